"""Fuzzing the TTS text path in process: the normaliser (``to_speakable``) and the segmenter take any Unicode,
control characters, huge numbers and emoji without an exception, in time linear in the input, and the
segments still tile the text."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import budget
from tests.reliability.report import Tally
from voxserve.text.segment import SegmenterParams, TextSegmenter
from voxserve.text.speakable import has_speech, to_speakable, without_controls


def fuzz_settings(n: int) -> Callable[..., object]:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def _digits(most: int) -> st.SearchStrategy[str]:
    return st.text(st.sampled_from("0123456789"), min_size=1, max_size=most)


# Number-like runs: currency, sign, digits, separated groups, a suffix, trailing punctuation (what the regular
# expression [$€£#]?-?\d{1,30}([.,:/]\d{1,20})*(suffix)?[ .,;!?\n]{0,3} matches), built piece by piece: drawing
# from st.from_regex took 95 % of this file's time, the code under test 3 %.
NUMBERISH = st.tuples(
    st.sampled_from(["", "", "$", "€", "£", "#"]),
    st.sampled_from(["", "", "-"]),
    _digits(30),
    st.lists(st.tuples(st.sampled_from(".,:/"), _digits(20)).map("".join), max_size=4).map("".join),
    st.sampled_from(["", "", "", "%", "st", "nd", "rd", "th", "s", "'s", " km", " mph", "°C"]),
    st.text(st.sampled_from(" .,;!?\n"), max_size=3),
).map("".join)

ALPHABET = st.one_of(
    st.characters(),  # any code point, surrogates included
    st.sampled_from(list("0123456789.,:;$€£¥%#&@+=-–—'\"()[]{}*_~^|<>\\/ \n\t\rstndhkmgsA°")),
)
TEXT = st.one_of(
    st.text(ALPHABET, max_size=400),
    st.lists(NUMBERISH, min_size=1, max_size=8).map("".join),
    st.lists(st.sampled_from(["Dr.", "e.g.", "U.S.A.", "etc.", "10:30", "am", "$5.20", "1990s", "1st", "—", "…",
                              "🙂", "\u0000", "\u202e", "a\u0301", "\n\n", "  ", "3/4", "#1", "5 km", "2024"]),
             max_size=40).map(" ".join),
)


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    t = Tally("TTS text normaliser and segmenter (in process)")
    yield t
    t.write()


@fuzz_settings(budget(1500))
@given(text=TEXT)
def test_normaliser_takes_any_text(tally: Tally, text: str) -> None:
    spoken = to_speakable(text)
    assert isinstance(spoken, str)
    assert to_speakable(spoken) is not None  # idempotence is not promised; a second pass must still work
    cleaned = without_controls(text)
    assert len(cleaned) == len(text) and has_speech(cleaned) == has_speech(text)
    tally.add("speech" if has_speech(spoken) else "silent")


@fuzz_settings(budget(800))
@given(text=TEXT, cuts=st.lists(st.integers(0, 400), max_size=10),
       hard=st.integers(8, 320))
def test_segmenter_tiles_any_text(tally: Tally, text: str, cuts: list[int], hard: int) -> None:
    seg = TextSegmenter(SegmenterParams(soft_max_chars=max(1, hard // 2), hard_max_chars=hard))
    bounds = sorted({0, len(text), *[min(c, len(text)) for c in cuts]})
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out += seg.push(text[a:b])
    out += seg.flush()
    for s in out:
        assert text[s.start : s.end] == s.text and 0 < len(s.text) <= hard
        to_speakable(s.text)
    assert all(a.end <= b.start for a, b in zip(out, out[1:]))
    tally.add(f"segments:{min(len(out), 5)}")


ADVERSARIAL = {
    "digits": "1" * 50_000,
    "grouped": "1," * 25_000,
    "decimals": "1." * 25_000,
    "money": "$1" + "0" * 50_000,
    "ordinal": "1" * 50_000 + "th",
    "hash": "#" + "9" * 50_000,
    "decimal_big": "9" * 50_000 + ".5",
    "percent": "1" * 50_000 + " %",
    "range": "1-" * 25_000,
    "newlines": "\n " * 25_000,
    "titles": "Dr. " * 12_500,
    "periods": "." * 50_000,
    "units": "1 km " * 10_000,
    "emoji": "🙂" * 50_000,
    "controls": "\x00\x01" * 25_000,
    "blanks": " " * 50_000 + "- x",
    "times": "10:30 a.m. " * 5_000,
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_long_adversarial_input_is_handled_in_linear_time(tally: Tally, name: str) -> None:
    """50,000 characters (half the default ``max_input_chars``) of one pattern, through the normaliser and the
    segmenter, in well under the time a quadratic regular expression would take (minutes)."""
    text = ADVERSARIAL[name]
    started = time.perf_counter()
    to_speakable(text)
    seg = TextSegmenter()
    pieces = seg.push(text) + seg.flush()
    for piece in pieces:
        to_speakable(piece.text)
    elapsed = time.perf_counter() - started
    assert elapsed < 10.0, f"{name}: {elapsed:.1f} s"
    tally.add(f"adversarial:{name}")
