"""WER and CER scoring: counts, empty texts, pooling, and agreement with jiwer."""

from __future__ import annotations

import dataclasses

import jiwer
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.eval.normalize import normalize_basic
from voxserve.eval.wer import WerScore, pooled, score_cer, score_wer


def _score(substitutions: int = 0, deletions: int = 0, insertions: int = 0, hits: int = 0) -> WerScore:
    return WerScore(substitutions=substitutions, deletions=deletions, insertions=insertions, hits=hits)


@pytest.mark.parametrize(
    ("reference", "hypothesis"),
    [
        ("We're gonna win in 2020.", "we are going to win in twenty twenty"),
        ("Go forward 10 meters.", "go forward ten meters"),
        (
            "And so, my fellow Americans, ask not what your country can do for you, ask what you can do for "
            "your country.",
            "and so my fellow americans ask not what your country can do for you ask what you can do for your country",
        ),
        ("montreal forced uh um uh hm hm um forced aligner", "Montreal forced, forced aligner."),
        ("Mr. Smith's colour", "mister smith's color"),
        ("IN EIGHTEEN THIRTEEN", "In 1813."),
    ],
)
def test_equivalent_texts_score_zero(reference: str, hypothesis: str) -> None:
    score = score_wer(reference, hypothesis)
    assert score.wer == 0.0
    assert score.errors == 0
    assert score.hits == score.ref_words > 0


def test_substitution_counts() -> None:
    score = score_wer("The cat sat on the mat.", "the cat sat on the hat")
    assert (score.substitutions, score.deletions, score.insertions, score.hits) == (1, 0, 0, 5)
    assert score.ref_words == 6
    assert score.wer == pytest.approx(1 / 6)


def test_deletion_and_insertion_counts() -> None:
    deleted = score_wer("the birch canoe", "the canoe")
    assert (deleted.deletions, deleted.insertions, deleted.hits) == (1, 0, 2)
    inserted = score_wer("hello world", "hello big world")
    assert (inserted.insertions, inserted.deletions, inserted.hits) == (1, 0, 2)
    assert inserted.wer == pytest.approx(0.5)


def test_numbers_still_differ() -> None:
    score = score_wer("I was born in nineteen sixty one", "I was born in 1962")
    assert score.substitutions == 1
    assert score.ref_words == 5


def test_empty_reference_counts_insertions() -> None:
    score = score_wer("", "hello there")
    assert (score.insertions, score.ref_words, score.hits) == (2, 0, 0)
    assert score.wer == 2.0
    only_fillers = score_wer("uh, um...", "hello")
    assert (only_fillers.insertions, only_fillers.ref_words, only_fillers.wer) == (1, 0, 1.0)


def test_both_empty_is_perfect() -> None:
    score = score_wer("", "  ")
    assert score == _score()
    assert score.wer == 0.0


def test_empty_hypothesis_deletes_everything() -> None:
    score = score_wer("the birch canoe", "")
    assert (score.deletions, score.ref_words, score.wer) == (3, 3, 1.0)


def test_other_language_with_basic_normalizer() -> None:
    score = score_wer("Las arenas son blancas.", "las arenas son negras", normalizer=normalize_basic)
    assert (score.substitutions, score.hits) == (1, 3)


def test_raw_scoring_with_identity_normalizer() -> None:
    score = score_wer("Hello, world", "hello world", normalizer=str)
    assert (score.substitutions, score.hits) == (1, 1)


def test_cer_for_languages_without_spaces() -> None:
    assert score_cer("砸自己的脚", "砸自己的脚。").wer == 0.0
    score = score_cer("客観的実在の判断", "客観的実存の判断")
    assert (score.substitutions, score.ref_words) == (1, 8)
    assert score.wer == pytest.approx(1 / 8)


def test_cer_ignores_spaces_and_counts_characters() -> None:
    score = score_cer("ab cd", "abcx")
    assert (score.ref_words, score.hits, score.substitutions) == (4, 3, 1)


def test_score_is_frozen_and_derived() -> None:
    score = _score(substitutions=1, deletions=2, insertions=3, hits=4)
    assert (score.ref_words, score.errors) == (7, 6)
    assert score.wer == pytest.approx(6 / 7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        score.hits = 5  # type: ignore[misc]
    assert dataclasses.asdict(score)["wer"] == score.wer


def test_negative_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        _score(hits=-1)


def test_addition_pools_counts() -> None:
    total = _score(substitutions=1, hits=0) + _score(hits=9)
    assert total == _score(substitutions=1, hits=9)
    assert total.wer == pytest.approx(0.1)
    assert sum([_score(deletions=1), _score(hits=1)]) == _score(deletions=1, hits=1)
    with pytest.raises(TypeError):
        _ = _score() + 1


def test_pooled_is_total_errors_over_total_words_not_mean() -> None:
    short_wrong = score_wer("yes", "no")
    long_right = score_wer(
        "the birch canoe slid on the smooth planks too", "the birch canoe slid on the smooth planks too"
    )
    assert (short_wrong.wer, long_right.wer) == (1.0, 0.0)
    total = pooled([short_wrong, long_right])
    assert total.ref_words == 10
    assert total.wer == pytest.approx(0.1)  # the mean of per-file WERs would be 0.5


def test_pooled_of_nothing_is_zero() -> None:
    assert pooled([]) == _score()
    assert pooled(iter([])).wer == 0.0


_words = st.lists(st.sampled_from(["a", "b", "c", "dd", "eee"]), max_size=15)


@settings(max_examples=200, deadline=None)
@given(_words, _words)
def test_counts_agree_with_jiwer_and_are_consistent(reference: list[str], hypothesis: list[str]) -> None:
    score = score_wer(" ".join(reference), " ".join(hypothesis), normalizer=str)
    assert score.hits + score.substitutions + score.deletions == len(reference)
    assert score.hits + score.substitutions + score.insertions == len(hypothesis)
    assert score.errors >= abs(len(reference) - len(hypothesis))
    if reference and hypothesis:
        expected = jiwer.process_words(" ".join(reference), " ".join(hypothesis))
        assert score.errors == expected.substitutions + expected.deletions + expected.insertions
        assert score.wer == pytest.approx(expected.wer)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_words, _words), max_size=6))
def test_pooled_wer_is_error_ratio(pairs: list[tuple[list[str], list[str]]]) -> None:
    scores = [score_wer(" ".join(r), " ".join(h), normalizer=str) for r, h in pairs]
    total = pooled(scores)
    errors = sum(s.errors for s in scores)
    words = sum(s.ref_words for s in scores)
    assert (total.errors, total.ref_words) == (errors, words)
    assert total.wer == pytest.approx(errors / max(words, 1))


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text())
def test_scoring_never_crashes_on_any_text(reference: str, hypothesis: str) -> None:
    for score in (score_wer(reference, hypothesis), score_cer(reference, hypothesis)):
        assert score.wer >= 0.0
        assert score.hits + score.substitutions + score.deletions == score.ref_words
