"""Spoken forms of numbers and symbols, and incremental text segmentation for synthesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.errors import InvalidInput
from voxserve.text import SegmenterParams, TextSegmenter, cardinal, ordinal, to_speakable, year


@pytest.mark.parametrize(
    "n,words",
    [(0, "zero"), (13, "thirteen"), (21, "twenty-one"), (100, "one hundred"), (115, "one hundred fifteen"),
     (1001, "one thousand one"), (1234, "one thousand two hundred thirty-four"), (2_000_000_001, "two billion one"),
     (-5, "minus five")],
)
def test_cardinal(n: int, words: str) -> None:
    assert cardinal(n) == words


@pytest.mark.parametrize("n,words", [(1, "first"), (2, "second"), (3, "third"), (12, "twelfth"), (20, "twentieth"),
                                     (21, "twenty-first"), (42, "forty-second"), (100, "one hundredth")])
def test_ordinal(n: int, words: str) -> None:
    assert ordinal(n) == words


@pytest.mark.parametrize("n,words", [(1999, "nineteen ninety-nine"), (1905, "nineteen oh five"), (2000, "two thousand"),
                                     (2008, "two thousand eight"), (2024, "twenty twenty-four"), (1800, "eighteen hundred")])
def test_year(n: int, words: str) -> None:
    assert year(n) == words


@pytest.mark.parametrize(
    "text,spoken",
    [
        ("It costs $5.20.", "It costs five dollars and twenty cents."),
        ("$1 or $0.50", "one dollar or fifty cents"),
        ("$1.5 million", "one point five million dollars"),
        ("Dr. Smith lives on Elm Dr. now.", "Doctor Smith lives on Elm Drive now."),
        ("Mr. and Mrs. Jones", "Mister and Missus Jones"),
        ("In 1999, we met.", "In nineteen ninety-nine, we met."),
        ("We have 1234 people.", "We have one thousand two hundred thirty-four people."),
        ("He came 3rd.", "He came third."),
        ("The 1990s and the '80s", "The nineteen nineties and the eighties"),
        ("At 10:30 am.", "At ten thirty a m."),
        ("at 7:05 p.m. or 12:00", "at seven oh five p m or twelve o'clock"),
        ("About 50% of 1,234 people", "About fifty percent of one thousand two hundred thirty-four people"),
        ("It is 3.14 m long at -5 degrees.", "It is three point one four meters long at minus five degrees."),
        ("It's 72°F outside.", "It's seventy-two degrees Fahrenheit outside."),
        ("Call 555-1234.", "Call five five five, one two three four."),
        ("pages 5-10, 2019-2020", "pages five to ten, twenty nineteen to twenty twenty"),
        ("e.g. this, i.e. that, etc.", "for example this, that is that, et cetera."),
        ("Acme Inc. Then we left.", "Acme Incorporated. Then we left."),
        ("No. 5 is here. I said no.", "number five is here. I said no."),
        ("R&D", "R and D"),
        ("agent 007", "agent zero zero seven"),
    ],
)
def test_to_speakable(text: str, spoken: str) -> None:
    assert to_speakable(text) == spoken


def test_to_speakable_leaves_plain_text_alone() -> None:
    plain = "The birch canoe slid on the smooth planks."
    assert to_speakable(plain) == plain


def segments(pieces: list[str], params: SegmenterParams | None = None) -> list[tuple[str, bool]]:
    seg = TextSegmenter(params or SegmenterParams())
    out = [s for p in pieces for s in seg.push(p)] + seg.flush()
    return [(s.text, s.ends_sentence) for s in out]


def test_first_clause_leaves_early_then_sentences() -> None:
    text = "Good morning, and thank you for calling. Your order shipped. Bye now!"
    assert segments([text]) == [
        ("Good morning,", False), ("and thank you for calling.", True), ("Your order shipped.", True), ("Bye now!", True),
    ]


@pytest.mark.parametrize(
    "text",
    ["Dr. Smith arrived.", "J. R. R. Tolkien wrote it.", "The value is 3.14 today.", "See e.g. the notes here.",
     "The U.S. economy grew.", "He said... well, nothing."],
)
def test_no_cut_inside_a_sentence(text: str) -> None:
    assert segments([text], SegmenterParams(first_clause_min_chars=0)) == [(text, True)]


def test_streamed_tokens_give_the_same_segments_as_whole_text() -> None:
    text = 'Well, I think the value is 3.14, not 2.71. Really?! "Quoted." Dr. Who said so; fine: ok\n\nNext part.'
    assert segments(list(text)) == segments([text])


def test_a_segment_is_returned_only_when_its_end_is_certain() -> None:
    seg = TextSegmenter()
    assert seg.push("Hello Dr.") == []  # "Dr." may be a title
    assert seg.push(" Smith.") == []  # the next sentence has not started yet
    assert [s.text for s in seg.push(" How")] == ["Hello Dr. Smith."]
    assert [s.text for s in seg.push(" are you? I")] == ["How are you?"]
    assert [s.text for s in seg.flush()] == ["I"]


def test_offsets_point_into_the_pushed_text() -> None:
    pieces = ["  Hello there, my good friend. ", "This is   the second one.\n\n", "Third"]
    text = "".join(pieces)
    seg = TextSegmenter()
    out = [s for p in pieces for s in seg.push(p)] + seg.flush()
    assert [s.index for s in out] == list(range(len(out)))
    for s in out:
        assert text[s.start : s.end] == s.text


def test_long_text_is_cut_at_spaces_below_the_hard_limit() -> None:
    params = SegmenterParams(soft_max_chars=40, hard_max_chars=60)
    text = "word " * 200 + "and then, a clause, after a comma, and more words."
    for s, _ in segments([text], params):
        assert len(s) <= 60
        assert not s.startswith("ord")  # never inside a word


def test_speechless_segments_are_dropped() -> None:
    assert segments(["... !!! ", "\n\n", "--"]) == []


def test_bad_params() -> None:
    with pytest.raises(InvalidInput):
        SegmenterParams(soft_max_chars=100, hard_max_chars=50)


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet="ab .,!?\n'A3", max_size=300), st.integers(1, 7))
def test_segments_tile_the_text(text: str, step: int) -> None:
    seg = TextSegmenter(SegmenterParams(soft_max_chars=30, hard_max_chars=50))
    pieces = [text[i : i + step] for i in range(0, len(text), step)]
    out = [s for p in pieces for s in seg.push(p)] + seg.flush()
    covered: set[int] = set()
    for s in out:
        assert text[s.start : s.end] == s.text and 0 < len(s.text) <= 50
        covered.update(range(s.start, s.end))
    assert all(a.end <= b.start for a, b in zip(out, out[1:], strict=False))
    assert all(i in covered for i, c in enumerate(text) if c.isalnum())
