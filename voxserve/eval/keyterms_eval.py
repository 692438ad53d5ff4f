"""Custom vocabulary evaluation: term recall and WER of a corpus with and without key terms, and how often
the glossary leaks into the text of audio that holds none of it.

Term recall is the fraction of the references' term occurrences (English-normalised, as phrases) that the
transcript also holds; WER is pooled over every file, so a glossary that helps its terms but hurts the
rest shows.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from voxserve.backends.base import AsrRequest, DecodeOptions
from voxserve.eval.asr_eval import FileScore, score_item
from voxserve.eval.corpus import CorpusItem
from voxserve.eval.normalize import normalize_english
from voxserve.eval.wer import WerScore, pooled
from voxserve.service import Voxserve
from voxserve.text.keyterms import copies_glossary, glossary_prompt
from voxserve.types import SAMPLE_RATE


@dataclass(frozen=True)
class TermCount:
    """How often a term is in the references and how many of those the transcripts hold."""

    term: str
    occurrences: int
    found_without: int
    found_with: int


@dataclass(frozen=True)
class LeakProbe:
    """One decode of audio without speech, with the glossary as its prompt (no guard): what it said and
    whether :func:`~voxserve.text.keyterms.copies_glossary` catches it."""

    name: str
    text: str
    leaked: bool
    caught: bool


@dataclass(frozen=True)
class KeytermEvaluation:
    """Scores of one corpus without and with the key terms."""

    keyterms: tuple[str, ...]
    without: list[FileScore]
    with_terms: list[FileScore]
    terms: list[TermCount]
    probes: list[LeakProbe]

    @property
    def wer_without(self) -> WerScore:
        """Pooled WER without key terms."""
        return pooled(f.score for f in self.without)

    @property
    def wer_with(self) -> WerScore:
        """Pooled WER with key terms."""
        return pooled(f.score for f in self.with_terms)

    def recall(self, with_terms: bool) -> float:
        """Term occurrences found over term occurrences in the references (1.0 when there are none)."""
        total = sum(t.occurrences for t in self.terms)
        found = sum(t.found_with if with_terms else t.found_without for t in self.terms)
        return found / total if total else 1.0


def count_phrase(phrase: str, text: str) -> int:
    """Occurrences of a phrase in a text, both English-normalised, as whole words."""
    words, target = normalize_english(text).split(), normalize_english(phrase).split()
    if not target:
        return 0
    return sum(1 for i in range(len(words) - len(target) + 1) if words[i : i + len(target)] == target)


def term_counts(keyterms: tuple[str, ...], references: list[str], without: list[str], with_terms: list[str]) -> list[TermCount]:
    """Each term's occurrences in the references and, per file, how many the hypotheses hold (at most as many
    as the reference has)."""
    out = []
    for term in keyterms:
        occ = [count_phrase(term, r) for r in references]
        found_without = sum(min(n, count_phrase(term, h)) for n, h in zip(occ, without))
        found_with = sum(min(n, count_phrase(term, h)) for n, h in zip(occ, with_terms))
        out.append(TermCount(term, sum(occ), found_without, found_with))
    return out


def probe_audio(seed: int = 0) -> dict[str, np.ndarray]:
    """Audio without speech: digital silence and quiet noise, 1 s and 3 s long."""
    rng = np.random.default_rng(seed)
    out = {}
    for seconds in (1, 3):
        n = seconds * SAMPLE_RATE
        out[f"silence_{seconds}s"] = np.zeros(n, np.float32)
        out[f"noise_{seconds}s"] = (0.005 * rng.standard_normal(n)).astype(np.float32)
    return out


async def evaluate_keyterms(vox: Voxserve, items: list[CorpusItem], keyterms: tuple[str, ...], *,
                            model: str | None = None) -> KeytermEvaluation:
    """Transcribe every item without and with ``keyterms`` (English given), score both, and probe leaks."""

    async def one(item: CorpusItem, terms: tuple[str, ...]) -> FileScore:
        options = vox.long_options(language=item.language, word_timestamps=False, keyterms=terms)
        transcript = await vox.atranscribe(item.audio, options, model=model)
        return score_item(item, transcript.text, transcript.language, transcript.duration_s)

    without = list(await asyncio.gather(*(one(i, ()) for i in items)))
    with_terms = list(await asyncio.gather(*(one(i, keyterms) for i in items)))
    references = [f.reference for f in without]
    terms = term_counts(keyterms, references, [f.hypothesis for f in without], [f.hypothesis for f in with_terms])
    return KeytermEvaluation(keyterms, without, with_terms, terms, await probe_leaks(vox, keyterms, model=model))


async def probe_leaks(vox: Voxserve, keyterms: tuple[str, ...], *, model: str | None = None) -> list[LeakProbe]:
    """Decode each :func:`probe_audio` clip straight through the recogniser with the glossary prompt, in a
    fitted window as live streams do (the long-file VAD drops such audio before the recogniser)."""
    asr = vox.asr(model)
    decode = DecodeOptions(language="en", prompt=glossary_prompt(keyterms, None), window="fit", word_timestamps=False)
    out = []
    for name, audio in probe_audio().items():
        result = await asr.transcribe(AsrRequest(audio, decode))
        leaked = any(count_phrase(t, result.text) for t in keyterms) or "glossary" in result.text.lower()
        out.append(LeakProbe(name, result.text, leaked, copies_glossary(result.text, keyterms)))
    return out


def format_report(ev: KeytermEvaluation) -> str:
    """A plain-text report: per-file errors, term recall, pooled WER and the leak probes."""
    lines = [f"key terms: {', '.join(ev.keyterms)}", f"{'file':<32} {'errors without':>14} {'errors with':>11}"]
    for a, b in zip(ev.without, ev.with_terms):
        lines.append(f"{a.name[:32]:<32} {a.score.errors:14d} {b.score.errors:11d}")
    for t in ev.terms:
        lines.append(f"term {t.term!r}: {t.occurrences} in references; found {t.found_without} without, "
                     f"{t.found_with} with")
    before, after = ev.wer_without, ev.wer_with
    lines.append(f"term recall {100 * ev.recall(False):.1f}% -> {100 * ev.recall(True):.1f}%; "
                 f"pooled WER {100 * before.wer:.2f}% -> {100 * after.wer:.2f}% over {before.ref_words} words")
    for p in ev.probes:
        lines.append(f"probe {p.name}: {p.text!r} (leaked: {p.leaked}, caught: {p.caught})")
    return "\n".join(lines)
