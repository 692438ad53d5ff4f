"""Text normalization for WER: the Whisper normalizer's rules, voxserve's hesitations on top, other languages,
the corpus references, and properties (no crash, well-formed output)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from whisper_normalizer.english import EnglishTextNormalizer

from tests.conftest import corpus_root
from voxserve.eval.normalize import character_tokens, normalize_basic, normalize_english

_CORPUS = corpus_root()


def _corpus_texts(*subsets: str) -> list[Path]:
    paths = sorted(path for subset in subsets for path in (_CORPUS / subset).glob("*.txt"))
    assert paths, f"no reference texts under {_CORPUS}"
    return paths


def _params(paths: list[Path]) -> list[object]:
    return [pytest.param(path, id=path.name) for path in paths]


# ----------------------------------------------------------------------------- the Whisper normalizer's rules


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # case, punctuation, whitespace, diacritics
        ("  Hello,   WORLD!\n", "hello world"),
        ("The horizon seems extremely distant.", "the horizon seems extremely distant"),
        ("", ""),
        (" \t\n ", ""),
        ("caf\u00e9 na\u00efve", "cafe naive"),
        ("well-known", "well known"),
        # brackets and parentheses are removed with their content
        ("[laughter] so <VOCNOISE> yes (inaudible)", "so yes"),
        ("the first Bible (which was printed at Maintz) imitates", "the 1st bible imitates"),
        # contractions
        ("I'm gonna say don't, won't, can't", "i am going to say do not will not can not"),
        ("it's what we've got, y'all", "it is what we have got you all"),
        # titles
        ("Mr. Smith and Mrs. Brown", "mister smith and missus brown"),
        ("Dr. Jones, Prof. Green Jr.", "doctor jones professor green junior"),
        # British spellings become American
        ("the centre realised its favourite colour", "the center realized its favorite color"),
        ("STUFF IT INTO YOU HIS BELLY COUNSELLED HIM", "stuff it into you his belly counseled him"),
        ("a grey defence programme", "a gray defense program"),
        # numbers
        ("twenty one", "21"),
        ("twenty-one", "21"),
        ("one hundred and five", "105"),
        ("In eighteen thirteen", "in 1813"),
        ("nineteen sixty one", "1961"),
        ("three point one four", "3.14"),
        ("the twenty-second", "the 22nd"),
        ("the nineteen sixties", "the 1960s"),
        ("1,000,000", "1000000"),
        ("three million four hundred thousand", "3400000"),
        ("five percent", "5%"),
        ("five dollars", "$5"),
        ("$5 million", "$5000000"),
        # the package's own hesitations
        ("Uh, I, um, think so. Hmm.", "i think so"),
    ],
)
def test_whisper_rules(raw: str, expected: str) -> None:
    assert normalize_english(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # documented behaviour of the package, kept so that figures compare with the leaderboard's
        ("one two three", "123"),
        ("1, 2, 3", "one 2 3"),
        ("OK, okay", "ok okay"),
        ("alright yknow", "alright yknow"),
        ("rock & roll", "rock roll"),
        ("printed (which also was printed at Maintz by Peter Schoeffer) here", "printed here"),
    ],
)
def test_package_behaviour_kept(raw: str, expected: str) -> None:
    assert normalize_english(raw) == expected


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("1-2-3-4-5-6-7-8-9-10", "one 2 3 4 5 6 7 8 9 10"),
        ("Go forward 10 meters.", "go forward ten meters"),
        (
            "And so, my fellow Americans, ask not what your country can do for you, ask what you can do for "
            "your country.",
            "and so my fellow americans ask not what your country can do for you ask what you can do for your country",
        ),
        ("Mr. Smith's colour", "mister smith is color"),
        ("She was born in 1961.", "she was born in nineteen sixty-one"),
        ("It costs $5.", "it costs five dollars"),
        ("Up 25%!", "up twenty five percent"),
        ("the 21st century", "the twenty-first century"),
        ("a well-known fact", "a well known fact"),
        ("We're here, aren't we?", "we are here are not we"),
        ("the theatre's programme", "the theater is program"),
    ],
)
def test_equivalent_spellings_normalize_equal(left: str, right: str) -> None:
    assert normalize_english(left) == normalize_english(right)


def test_real_differences_survive() -> None:
    assert normalize_english("the cat sat") != normalize_english("the hat sat")
    assert normalize_english("twenty one") != normalize_english("twenty two")
    assert normalize_english("1961") != normalize_english("1962")
    assert normalize_english("to err is human") == "to err is human"


# ------------------------------------------------------------------------------ voxserve's extra hesitations


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("uh so um this is uhm hmm mm er ah eh hm mhm it", "so this is it"),
        ("Ummm, well, hmmm, mm-hmm, yes", "well yes"),
        ("Erm... Ehm, ahh, UHHH, mmhmm. Right.", "right"),
        ("montreal forced uh um uh hm hm um forced aligner", "montreal forced forced aligner"),
        ("uh um er", ""),
        ("twenty er one", "21"),  # removed before the package reads numbers
        ("her errand, the era of the hmmer", "her errand the era of the hmmer"),  # whole words only
    ],
)
def test_extra_hesitations_removed(raw: str, expected: str) -> None:
    assert normalize_english(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), [("wait...", "wait"), ("so.. yes..", "so yes"), ("uh, um...", "")])
def test_no_punctuation_tokens(raw: str, expected: str) -> None:
    assert "." in EnglishTextNormalizer()(raw).split()  # what the package leaves of the final dots
    assert normalize_english(raw) == expected


def test_points_in_numbers_stay() -> None:
    assert normalize_english("3.14... or $2.50.") == "3.14 or $2.50"


def test_extras_are_what_the_package_keeps() -> None:
    """Without voxserve's rule these hesitations survive: the rule is what removes them."""
    package = EnglishTextNormalizer()
    assert package("uhm hm er erm eh ehm ah ummm hmmm").split() == "uhm hm er erm eh ehm ah ummm hmmm".split()
    assert normalize_english("uhm hm er erm eh ehm ah ummm hmmm") == ""


# -------------------------------------------------------------------------------------------- other languages


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            "Vår husläkare, men han har ju ett sådant trevligt sätt!",
            "vår husläkare men han har ju ett sådant trevligt sätt",
        ),
        ("Al Señor D. Manuel", "al señor d manuel"),
        ("L'homme   est là.", "l homme est là"),
        ("客観的実在の判断的知識が成立するのである。", "客観的実在の判断的知識が成立するのである"),
        ("Valdemoro, 20 de Septiembre de 1881.", "valdemoro 20 de septiembre de 1881"),
        ("[música] hola (risas) amigos", "hola amigos"),
        # combining marks (Devanagari vowel signs, a decomposed accent) are kept
        ("नमस्ते दुनिया!", "नमस्ते दुनिया"),
        ("Cafe\u0301", "café"),
        ("", ""),
    ],
)
def test_normalize_basic(raw: str, expected: str) -> None:
    assert normalize_basic(raw) == expected


def test_basic_has_no_english_rules() -> None:
    assert normalize_basic("Mr. colour twenty one uh") == "mr colour twenty one uh"


def test_character_tokens() -> None:
    assert character_tokens("砸自己的脚") == ["砸", "自", "己", "的", "脚"]
    assert character_tokens("ab c") == ["a", "b", "c"]
    assert character_tokens("e\u0301x") == ["e\u0301", "x"]
    assert character_tokens(" \u0301a") == ["\u0301", "a"]
    assert character_tokens(normalize_basic("नमस्ते")) == ["न", "म", "स्", "ते"]
    assert character_tokens("") == []


# ------------------------------------------------------------------------------------------ corpus


@pytest.mark.parametrize("path", _params(_corpus_texts("asr", "long")))
def test_corpus_english_references(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    normalized = normalize_english(text)
    assert normalized
    assert normalize_english(normalized) == normalized
    # the package's output less voxserve's hesitations and punctuation-only tokens, nothing else
    extras = {"uhm", "hm", "er", "erm", "eh", "ehm", "ah", "."}
    assert normalized.split() == [word for word in EnglishTextNormalizer()(text).split() if word not in extras]


@pytest.mark.parametrize("path", _params(_corpus_texts("lang")))
def test_corpus_other_language_references(path: Path) -> None:
    normalized = normalize_basic(path.read_text(encoding="utf-8"))
    assert normalized
    assert normalize_basic(normalized) == normalized
    assert character_tokens(normalized)


# -------------------------------------------------------------------------------------- properties

_TRICKY_PIECES = (
    "one two three four five nine ten eleven twelve thirteen nineteen twenty sixty ninety hundred thousand "
    "million first second twelfth twentieth hundredth sixties and a half oh o point zero double triple minus "
    "dollars cents pounds percent per cent uh um hmm mm er erm ah eh ummm mr dr st won't it's colour 1 21 1961 "
    "3.14 1st 60s $ £ € ¢ % & - , . ' ( ) [ ] < > : smith's don't"
).split()
_tricky_text = st.lists(
    st.one_of(st.sampled_from(_TRICKY_PIECES), st.text(max_size=3)),
    max_size=12,
).map(lambda pieces: " ".join(pieces))
_FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _well_formed(text: str) -> bool:
    return text == " ".join(text.split())


@_FAST
@given(st.one_of(st.text(), _tricky_text))
def test_english_well_formed_on_any_text(text: str) -> None:
    assert _well_formed(normalize_english(text))


@_FAST
@given(st.text())
def test_basic_idempotent_on_any_text(text: str) -> None:
    once = normalize_basic(text)
    assert _well_formed(once)
    assert normalize_basic(once) == once
    assert all(not token.isspace() for token in character_tokens(once))
