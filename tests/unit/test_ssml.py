"""The SSML subset (voxserve.text.ssml) and pronunciation lexicons (voxserve.text.lexicon): pure, no model."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voxserve.errors import InvalidInput
from voxserve.text.lexicon import MAX_ENTRIES, Lexicon
from voxserve.text.speakable import to_speakable
from voxserve.text.ssml import (
    BREAK_STRENGTHS,
    MAX_BREAK_S,
    PARAGRAPH_PAUSE_S,
    Pause,
    Speech,
    is_ssml,
    parse_ssml,
    say_as,
    ssml_start,
)


def test_breaks_split_speech_in_order() -> None:
    pieces = parse_ssml('<speak>Good morning.<break time="1500ms"/>See you <break time="0.25s"/>soon.</speak>')
    assert pieces == [Speech("Good morning."), Pause(1.5), Speech("See you"), Pause(0.25), Speech("soon.")]


@pytest.mark.parametrize("strength", list(BREAK_STRENGTHS))
def test_break_strengths(strength: str) -> None:
    pieces = parse_ssml(f'<speak>a<break strength="{strength}"/>b</speak>')
    assert pieces[1] == Pause(BREAK_STRENGTHS[strength])


def test_a_bare_break_is_medium_and_adjacent_pauses_take_the_longest() -> None:
    assert parse_ssml("<speak>a<break/>b</speak>")[1] == Pause(BREAK_STRENGTHS["medium"])
    pieces = parse_ssml('<speak><p>One.</p><break time="2s"/><break time="100ms"/><p>Two.</p></speak>')
    assert pieces == [Speech("One."), Pause(2.0), Speech("Two."), Pause(PARAGRAPH_PAUSE_S)]


def test_paragraphs_and_sentences() -> None:
    pieces = parse_ssml("<speak><p><s>One</s><s>Two</s></p><p>Three</p></speak>")
    assert pieces == [Speech("One"), Pause(0.0), Speech("Two"), Pause(PARAGRAPH_PAUSE_S), Speech("Three"),
                      Pause(PARAGRAPH_PAUSE_S)]


def test_namespaces_entities_unknown_tags_and_whitespace() -> None:
    doc = ('<?xml version="1.0"?>\n<speak version="1.1" xmlns="http://www.w3.org/2001/10/synthesis">\n'
           "  Tom &amp; <emphasis level='strong'>Jerry</emphasis>\n  <mark name='x'/>say &lt;hi&gt; &#233;t&#xE9;.\n"
           "</speak>")
    assert parse_ssml(doc) == [Speech("Tom & Jerry say <hi> été.")]


def test_say_as_and_sub() -> None:
    doc = ('<speak>Call <say-as interpret-as="telephone">555-1234</say-as> about '
           '<say-as interpret-as="characters">IBM</say-as> on <say-as interpret-as="date">5/3/1999</say-as>, '
           '<sub alias="World Wide Web">WWW</sub>.</speak>')
    assert parse_ssml(doc) == [Speech("Call five five five, one two three four about I B M on May third, nineteen "
                                      "ninety-nine, World Wide Web.")]


@pytest.mark.parametrize(("kind", "fmt", "text", "spoken"), [
    ("cardinal", "", "1234", "one thousand two hundred thirty-four"),
    ("cardinal", "", "-7", "minus seven"),
    ("ordinal", "", "21st", "twenty-first"),
    ("ordinal", "", "3", "third"),
    ("digits", "", "2024", "two zero two four"),
    ("spell-out", "", "a1b", "A one B"),
    ("date", "", "2024-05-03", "May third, twenty twenty-four"),
    ("date", "dmy", "03.05.1999", "May third, nineteen ninety-nine"),
    ("date", "md", "Dec 25", "December twenty-fifth"),
    ("date", "y", "1905", "nineteen oh five"),
    ("time", "", "10:30 pm", "ten thirty p m"),
    ("telephone", "", "+1 555 0100", "plus, one, five five five, zero one zero zero"),
    ("expletive", "", "keep 12", "keep 12"),
])
def test_say_as_kinds(kind: str, fmt: str, text: str, spoken: str) -> None:
    assert say_as(text, kind, fmt) == spoken


@pytest.mark.parametrize("doc", [
    '<speak><say-as interpret-as="date">13/40/1999</say-as></speak>',
    '<speak><say-as interpret-as="date" format="mdy">5/3</say-as></speak>',
    '<speak><say-as interpret-as="date" format="mmm">5/3/1</say-as></speak>',
])
def test_bad_dates_are_refused(doc: str) -> None:
    with pytest.raises(InvalidInput, match="say-as date"):
        parse_ssml(doc)


def test_prosody_rates_multiply_and_volume_scales() -> None:
    doc = ('<speak>a <prosody rate="x-slow">b <prosody rate="200%" volume="-6dB">c</prosody></prosody> '
           '<prosody rate="+10%" volume="silent" pitch="high">d</prosody> <prosody rate="1.5">e</prosody></speak>')
    pieces = parse_ssml(doc)
    assert [p.text for p in pieces if isinstance(p, Speech)] == ["a", "b", "c", "d", "e"]
    rates = [round(p.rate, 3) for p in pieces if isinstance(p, Speech)]
    gains = [round(p.gain, 3) for p in pieces if isinstance(p, Speech)]
    assert rates == [1.0, 0.5, 1.0, 1.1, 1.5]
    assert gains == [1.0, 1.0, 0.501, 0.0, 1.0]


@pytest.mark.parametrize(("doc", "message"), [
    ("<speak>a<b></speak>", "line 1, column 13"),
    ("<speak>unclosed", "not well-formed"),
    ("<speak>\n\n  &nbsp;</speak>", "line 3"),
    ("<voice>hi</voice>", "root element must be <speak>"),
    ('<speak><break time="fast"/></speak>', "break time"),
    (f'<speak><break time="{MAX_BREAK_S + 1:g}s"/></speak>', "at most"),
    ('<speak><break strength="huge"/></speak>', "strength"),
    ('<speak><prosody rate="-200%">a</prosody></speak>', "prosody rate"),
    ('<speak><prosody volume="+40dB">a</prosody></speak>', "prosody volume"),
    ("<speak><sub>WWW</sub></speak>", "alias"),
    ("<speak>" + "<s>" * 40 + "deep" + "</s>" * 40 + "</speak>", "deeper than 32"),
    ('<!DOCTYPE speak [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><speak>&b;</speak>',
     "DTDs"),
    ('<!DOCTYPE speak SYSTEM "file:///etc/passwd"><speak>x</speak>', "DTDs"),
    ("<speak>   </speak>", "nothing to say"),
])
def test_malformed_ssml_is_refused_with_the_input_param(doc: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        parse_ssml(doc)
    assert caught.value.param == "input"


MARKUP = st.lists(st.one_of(st.characters(), st.sampled_from(
    ["<", ">", "/", "=", '"', "'", "&", ";", "#", " ", "break", "time", "1s", "say-as", "interpret-as", "date",
     "characters", "cardinal", "ordinal", "digits", "telephone", "format", "ymd", "prosody", "rate", "volume",
     "sub", "alias", "p", "s", "<!DOCTYPE", "<!ENTITY", "&amp;", "99999999999", "²", "١٢"])), max_size=120).map("".join)


@given(MARKUP)
@settings(max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_any_markup_gives_pieces_or_a_clear_error(text: str) -> None:
    try:
        pieces = parse_ssml(f"<speak>{text}</speak>")
    except InvalidInput as exc:
        assert exc.param == "input" and exc.message.startswith("SSML")
    else:
        assert pieces and all(isinstance(p, Speech) and p.text or isinstance(p, Pause) for p in pieces)


def test_say_as_refuses_huge_dates_and_reads_any_digits() -> None:
    with pytest.raises(InvalidInput, match="not a year"):
        parse_ssml(f'<speak><say-as interpret-as="date" format="y">{"9" * 5000}</say-as></speak>')
    assert say_as("x²", "characters") == "X ²"
    assert say_as("9" * 5000, "cardinal").startswith("nine nine")


def test_detection_of_ssml_and_of_its_start() -> None:
    assert is_ssml("  \n<speak>x</speak>") and is_ssml('<?xml version="1.0"?><speak>x</speak>')
    assert is_ssml("<!DOCTYPE speak><speak/>") and is_ssml('<?xml version="1.0"?>hello')
    assert not is_ssml("I <3 you") and not is_ssml("<speaker> said hi")
    starts = ("", " <", "<spe", "<speak>", "<speaker", "hello", "<?x", "<?xml ", "<!DOC", "<!DOCTYPE x")
    assert [ssml_start(t) for t in starts] == [None, None, None, True, False, False, None, True, None, True]


def test_lexicon_whole_words_case_insensitive_longest_first() -> None:
    lex = Lexicon.from_mapping({"Nguyen": "win", "New York": "Noo Yawk", "New York City": "the Big Apple",
                                "SQL": "sequel"})
    assert lex.apply("NGUYEN's new york\ncity SQL, Nguyenville MySQL sql.") == \
        "win's the Big Apple sequel, Nguyenville MySQL sequel."
    assert lex.merged(Lexicon.from_mapping({"sql": "S Q L"})).apply("SQL") == "S Q L"


def test_lexicon_phonemes_stay_out_of_the_normaliser() -> None:
    lex = Lexicon.from_mapping({"Nguyen": "[[ wˈɪn ]]", "3M": "three em"})
    assert lex.apply("Dr. Nguyen paid $5 to 3M.", to_speakable) == \
        "Doctor [[ wˈɪn ]] paid five dollars to three em."


@pytest.mark.parametrize("mapping", [
    {"": "x"}, {"...": "x"}, {"word": ""}, {"word": "[[ a ]] b"}, {"w" * 101: "x"}, {"word": 3},
    {f"w{i}": "x" for i in range(MAX_ENTRIES + 1)},
])
def test_bad_lexicons_are_refused(mapping: dict[str, object]) -> None:
    with pytest.raises(InvalidInput) as caught:
        Lexicon.from_mapping(mapping)  # type: ignore[arg-type]
    assert caught.value.param == "pronunciations"


def test_lexicon_files(tmp_path: Path) -> None:
    tsv = tmp_path / "lex.tsv"
    tsv.write_text("# names\nNguyen\twin\n\nGIF\tjif\n", encoding="utf-8")
    assert Lexicon.load(tsv).entries == {"nguyen": "win", "gif": "jif"}
    js = tmp_path / "lex.json"
    js.write_text('{"Nguyen": "win"}', encoding="utf-8")
    assert Lexicon.load(js).apply("nguyen") == "win"
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab here\n", encoding="utf-8")
    for path, message in ((bad, "line 1"), (tmp_path / "missing.tsv", "cannot read")):
        with pytest.raises(InvalidInput, match=message) as caught:
            Lexicon.load(path)
        assert caught.value.param == "lexicon_file"
