"""Word and character error rates, per file and pooled over a corpus.

Both texts are normalized (``voxserve.eval.normalize``) and split into tokens, then aligned with jiwer's
minimum edit distance. A score keeps the raw counts so that scores pool correctly: the WER of a corpus is its
total number of errors divided by its total number of reference words, not the mean of the files' WERs.

An empty reference (after normalization) is defined, not an error: the denominator is taken as 1, so the WER
equals the number of inserted words (0.0 when the hypothesis is empty too, 2.0 for two inserted words).

Example:
    >>> score = pooled([score_wer("the cat sat", "the cat sat"), score_wer("a dog", "a dig")])
    >>> (score.errors, score.ref_words, score.wer)
    (1, 5, 0.2)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import jiwer

from voxserve.eval.normalize import character_tokens, normalize_basic, normalize_english

__all__ = ["Normalizer", "WerScore", "pooled", "score_cer", "score_wer"]

Normalizer = Callable[[str], str]


@dataclass(frozen=True, kw_only=True)
class WerScore:
    """Alignment counts of a hypothesis against a reference, and the error rate they give.

    Construct it from the four alignment counts; ``ref_words`` and ``wer`` are derived. For a character error
    rate the same fields count characters. ``a + b`` pools two scores (``sum`` works too).

    Attributes:
        wer: (substitutions + deletions + insertions) / ref_words; with no reference words, the number of
            insertions.
        substitutions: reference tokens replaced by another token.
        deletions: reference tokens missing from the hypothesis.
        insertions: hypothesis tokens with no reference token.
        hits: reference tokens matched exactly.
        ref_words: number of reference tokens (hits + substitutions + deletions).

    Raises:
        ValueError: if a count is negative.
    """

    wer: float = field(init=False)
    substitutions: int
    deletions: int
    insertions: int
    hits: int
    ref_words: int = field(init=False)

    def __post_init__(self) -> None:
        counts = (self.substitutions, self.deletions, self.insertions, self.hits)
        if any(count < 0 for count in counts):
            raise ValueError(f"alignment counts must not be negative, got {counts}")
        ref_words = self.hits + self.substitutions + self.deletions
        object.__setattr__(self, "ref_words", ref_words)
        object.__setattr__(self, "wer", self.errors / max(ref_words, 1))

    @property
    def errors(self) -> int:
        """Total edit errors: substitutions + deletions + insertions."""
        return self.substitutions + self.deletions + self.insertions

    def __add__(self, other: object) -> WerScore:
        if not isinstance(other, WerScore):
            return NotImplemented
        return WerScore(
            substitutions=self.substitutions + other.substitutions,
            deletions=self.deletions + other.deletions,
            insertions=self.insertions + other.insertions,
            hits=self.hits + other.hits,
        )

    def __radd__(self, other: object) -> WerScore:
        if other == 0:  # the start value of sum()
            return self
        return self.__add__(other)


_EMPTY = WerScore(substitutions=0, deletions=0, insertions=0, hits=0)


def _align(reference: list[str], hypothesis: list[str]) -> WerScore:
    """Score token lists; tokens must not contain whitespace."""
    if not reference or not hypothesis:
        return WerScore(substitutions=0, deletions=len(reference), insertions=len(hypothesis), hits=0)
    output = jiwer.process_words(" ".join(reference), " ".join(hypothesis))
    return WerScore(
        substitutions=output.substitutions,
        deletions=output.deletions,
        insertions=output.insertions,
        hits=output.hits,
    )


def score_wer(reference: str, hypothesis: str, *, normalizer: Normalizer = normalize_english) -> WerScore:
    """Word error rate of one hypothesis against its reference.

    Args:
        reference: the ground-truth transcript, raw.
        hypothesis: the recognized transcript, raw.
        normalizer: applied to both texts before splitting on whitespace; ``normalize_english`` by default,
            ``normalize_basic`` for other languages, ``str`` to score the texts as they are.

    Returns:
        The alignment counts and WER. An empty reference gives WER = number of inserted words.
    """
    return _align(normalizer(reference).split(), normalizer(hypothesis).split())


def score_cer(reference: str, hypothesis: str, *, normalizer: Normalizer = normalize_basic) -> WerScore:
    """Character error rate of one hypothesis against its reference.

    Both texts are normalized, then split with ``character_tokens`` (whitespace is not counted; a combining
    mark counts with its base character). Use it for languages written without spaces (ja, zh).

    Args:
        reference: the ground-truth transcript, raw.
        hypothesis: the recognized transcript, raw.
        normalizer: applied to both texts first; ``normalize_basic`` by default.

    Returns:
        A score whose counts are characters: ``wer`` is the CER and ``ref_words`` the reference characters.
    """
    return _align(character_tokens(normalizer(reference)), character_tokens(normalizer(hypothesis)))


def pooled(scores: Iterable[WerScore]) -> WerScore:
    """Pool scores over a corpus: total errors / total reference tokens (not the mean of per-file rates).

    Args:
        scores: per-file scores; may be empty.

    Returns:
        The summed counts and their rate; all zeros with WER 0.0 for no scores.
    """
    total = _EMPTY
    for score in scores:
        total = total + score
    return total
