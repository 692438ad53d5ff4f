"""Text normalization for WER: rules, corpus references, and properties (idempotence, no crash)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import corpus_root
from voxserve.eval.normalize import _WORD_TABLE, character_tokens, normalize_basic, normalize_english

_CORPUS = corpus_root()


def _corpus_texts(*subsets: str) -> list[Path]:
    paths = sorted(path for subset in subsets for path in (_CORPUS / subset).glob("*.txt"))
    assert paths, f"no reference texts under {_CORPUS}"
    return paths


def _params(paths: list[Path]) -> list[object]:
    return [pytest.param(path, id=path.name) for path in paths]


# ------------------------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # case, punctuation, whitespace
        ("  Hello,   WORLD!\n", "hello world"),
        ("The horizon seems extremely distant.", "the horizon seems extremely distant"),
        ("", ""),
        (" \t\n ", ""),
        ("?!...", ""),
        # quotes and apostrophes
        ("\u2018Don\u2019t\u2019 \u201cquoted\u201d", "don't quoted"),
        ("Smith's o'clock", "smith's o'clock"),
        ("'cause the dogs' toys", "cause the dogs toys"),
        ("rock 'n' roll", "rock n roll"),
        ("the 1960's", "the 1960s"),
        ("caf\u00e9 na\u00efve", "cafe naive"),
        ("\uff26\uff55\uff4c\uff4c width", "full width"),
        ("co\u00adoperate", "cooperate"),
        # annotations
        ("[laughter] so (inaudible) <VOCNOISE> yes {noise}", "so yes"),
        ("well [music playing] (door closes) ok", "well okay"),
        ("so [nested [annotation]] yes", "so yes"),
        ("printed (which also was printed at Maintz) here", "printed which also was printed at maintz here"),
        # fillers and hesitations
        ("uh so um this is uhm hmm mm er ah eh hm mhm it", "so this is it"),
        ("Ummm, well, hmmm, mm-hmm, yes", "well yes"),
        ("uh um", ""),
        ("to err is human", "to err is human"),
        # hyphens
        ("well-known", "well known"),
        ("a picture-book, lower-case", "a picture book lower case"),
        # numbers
        ("twenty one", "21"),
        ("twenty-one", "21"),
        ("one hundred and five", "105"),
        ("a hundred", "100"),
        ("two thousand and twenty", "2020"),
        ("three million four hundred thousand", "3400000"),
        ("nineteen sixty one", "1961"),
        ("In eighteen thirteen", "in 1813"),
        ("fourteen fifty-five", "1455"),
        ("nineteen oh five", "1905"),
        ("twenty twenty", "2020"),
        ("eleven thirty", "11 30"),
        ("11:30", "11 30"),
        ("thirty forty", "30 40"),
        ("ten meters", "10 meters"),
        ("1-2-3", "1 2 3"),
        ("one, two, three", "1 2 3"),
        ("one two three", "1 2 3"),
        ("ten, twenty, thirty", "10 20 30"),
        ("fifteen or twenty years", "15 or 20 years"),
        ("first", "1st"),
        ("1st", "1st"),
        ("twenty-second", "22nd"),
        ("the eleventh hour", "the 11th hour"),
        ("one hundred and first", "101st"),
        ("the fifteenth century", "the 15th century"),
        ("three point one four", "3.14"),
        ("3.14", "3.14"),
        ("the nineteen sixties", "the 1960s"),
        ("the sixties", "the 60s"),
        ("1,000,000", "1000000"),
        ("one million", "1000000"),
        ("5 million", "5000000"),
        ("1.5 thousand", "1500"),
        ("zero", "0"),
        ("oh no", "oh no"),
        ("no one", "no 1"),
        # percent and currency
        ("5%", "5 percent"),
        ("five percent", "5 percent"),
        ("five per cent", "5 percent"),
        ("$5", "5 dollars"),
        ("five dollars", "5 dollars"),
        ("$1", "1 dollar"),
        ("$5 million", "5000000 dollars"),
        ("\u00a310", "10 pounds"),
        ("20\u20ac", "20 euros"),
        ("$5.50", "5.50 dollars"),
        # spellings, abbreviations, variants
        ("Mr. Smith's colour", "mister smith's color"),
        ("Dr. Jones and Mrs. Brown vs. Prof. Green Jr.", "doctor jones and missus brown versus professor green junior"),
        ("the centre realised its favourite theatre", "the center realized its favorite theater"),
        ("STUFF IT INTO YOU HIS BELLY COUNSELLED HIM", "stuff it into you his belly counseled him"),
        ("a grey defence programme", "a gray defense program"),
        ("rock & roll", "rock and roll"),
        ("OK", "okay"),
        ("o.k.", "okay"),
        ("okay", "okay"),
        ("ink, paper, etc.", "ink paper etcetera"),
        ("et cetera", "etcetera"),
        ("yknow, y'know", "you know you know"),
        ("alright", "all right"),
        # acronyms and spelled letters
        ("i.e. the U.S.A.", "ie the usa"),
        ("m f a is like this", "mfa is like this"),
        ("the M. F. A. corpus", "the mfa corpus"),
        ("i have a cold", "i have a cold"),
    ],
)
def test_normalize_english(raw: str, expected: str) -> None:
    assert normalize_english(raw) == expected


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("1-2-3-4-5-6-7-8-9-10", "One, two, three, four, five, six, seven, eight, nine, ten"),
        ("Go forward 10 meters.", "go forward ten meters"),
        (
            "And so, my fellow Americans, ask not what your country can do for you, ask what you can do for "
            "your country.",
            "and so my fellow americans ask not what your country can do for you ask what you can do for your country",
        ),
        ("Mr. Smith's colour", "mister smith's color"),
        ("She was born in 1961.", "she was born in nineteen sixty-one"),
        ("It costs $5.", "it costs five dollars"),
        ("Up 25%!", "up twenty five percent"),
        ("the 21st century", "the twenty-first century"),
        ("a well-known fact", "a well known fact"),
        ("Uh, I, um, think so.", "I think so"),
        ("the M.F.A. aligner", "the m f a aligner"),
        ("OK, the theatre", "okay the theater"),
    ],
)
def test_equivalent_spellings_normalize_equal(left: str, right: str) -> None:
    assert normalize_english(left) == normalize_english(right)


def test_real_differences_survive() -> None:
    assert normalize_english("the cat sat") != normalize_english("the hat sat")
    assert normalize_english("twenty one") != normalize_english("twenty two")
    assert normalize_english("1961") != normalize_english("1962")


def test_word_table_targets_are_fixed_points() -> None:
    for british, american in _WORD_TABLE.items():
        assert normalize_english(american) == american, british


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            "Vår husläkare, men han har ju ett sådant trevligt sätt!",
            "vår husläkare men han har ju ett sådant trevligt sätt",
        ),
        ("Al Señor D. Manuel", "al señor d manuel"),
        ("Straße", "strasse"),
        ("L'homme   est là.", "l homme est là"),
        ("客観的実在の判断的知識が成立するのである。", "客観的実在の判断的知識が成立するのである"),
        ("Valdemoro, 20 de Septiembre de 1881.", "valdemoro 20 de septiembre de 1881"),
        ("", ""),
    ],
)
def test_normalize_basic(raw: str, expected: str) -> None:
    assert normalize_basic(raw) == expected


def test_character_tokens() -> None:
    assert character_tokens("砸自己的脚") == ["砸", "自", "己", "的", "脚"]
    assert character_tokens("ab c") == ["a", "b", "c"]
    assert character_tokens("e\u0301x") == ["e\u0301", "x"]
    assert character_tokens(" \u0301a") == ["\u0301", "a"]
    assert character_tokens("") == []


# ------------------------------------------------------------------------------------------ corpus


@pytest.mark.parametrize("path", _params(_corpus_texts("asr", "long")))
def test_corpus_english_references(path: Path) -> None:
    normalized = normalize_english(path.read_text(encoding="utf-8"))
    assert normalized
    assert normalize_english(normalized) == normalized


@pytest.mark.parametrize("path", _params(_corpus_texts("lang")))
def test_corpus_other_language_references(path: Path) -> None:
    normalized = normalize_basic(path.read_text(encoding="utf-8"))
    assert normalized
    assert normalize_basic(normalized) == normalized
    assert character_tokens(normalized)


# -------------------------------------------------------------------------------------- properties

_TRICKY_PIECES = (
    "one two three four five nine ten eleven twelve thirteen nineteen twenty sixty ninety hundred thousand "
    "million first second twelfth twentieth hundredth sixties and a oh point zero uh um hmm mm er ah eh m f "
    "i o k u h s mr dr ok etc et cetera per cent yknow colour realise 1 21 1961 3.14 1st 60s $ % & - , . ' ( ) "
    "[ ] < > : smith's don't"
).split()
_tricky_text = st.lists(
    st.one_of(st.sampled_from(_TRICKY_PIECES), st.text(max_size=3)),
    max_size=12,
).map(lambda pieces: " ".join(pieces))
_FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _well_formed(text: str) -> bool:
    return text == " ".join(text.split())


@_FAST
@given(st.text())
def test_english_idempotent_on_any_text(text: str) -> None:
    once = normalize_english(text)
    assert _well_formed(once)
    assert normalize_english(once) == once


@_FAST
@given(_tricky_text)
def test_english_idempotent_on_tricky_text(text: str) -> None:
    once = normalize_english(text)
    assert _well_formed(once)
    assert normalize_english(once) == once


@_FAST
@given(st.text())
def test_basic_idempotent_on_any_text(text: str) -> None:
    once = normalize_basic(text)
    assert _well_formed(once)
    assert normalize_basic(once) == once
    assert all(not token.isspace() for token in character_tokens(once))
