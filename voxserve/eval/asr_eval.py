"""WER evaluation of the long-file pipeline over a corpus (per file and pooled)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from voxserve.eval.corpus import CorpusItem
from voxserve.eval.normalize import normalize_basic, normalize_english
from voxserve.eval.wer import WerScore, pooled, score_cer, score_wer
from voxserve.service import Voxserve

NO_SPACE = ("ja", "zh")


@dataclass(frozen=True)
class FileScore:
    """One file's score."""

    name: str
    language: str
    detected_language: str
    duration_s: float
    score: WerScore
    metric: str
    reference: str
    hypothesis: str


@dataclass(frozen=True)
class AsrEvaluation:
    """All files' scores, pooled WER (English-normalised) and speed."""

    files: list[FileScore]
    wall_s: float

    @property
    def pooled_wer(self) -> WerScore:
        """Total word errors over total reference words of the files scored by WER."""
        return pooled([f.score for f in self.files if f.metric == "wer"])

    @property
    def audio_s(self) -> float:
        """Seconds of audio evaluated."""
        return sum(f.duration_s for f in self.files)

    @property
    def rtfx(self) -> float:
        """Audio seconds per wall second."""
        return self.audio_s / self.wall_s if self.wall_s > 0 else 0.0


def score_item(item: CorpusItem, hypothesis: str, detected: str, duration_s: float) -> FileScore:
    """Score one transcript against the item's reference (CER for languages written without spaces)."""
    reference = item.reference.read_text(encoding="utf-8").strip()
    if item.language in NO_SPACE:
        return FileScore(item.name, item.language, detected, duration_s, score_cer(reference, hypothesis), "cer", reference, hypothesis)
    normalizer = normalize_english if item.language == "en" else normalize_basic
    score = score_wer(reference, hypothesis, normalizer=normalizer)
    return FileScore(item.name, item.language, detected, duration_s, score, "wer", reference, hypothesis)


async def evaluate_asr(
    vox: Voxserve,
    items: list[CorpusItem],
    *,
    model: str | None = None,
    language_hint: bool = True,
    on_file: Callable[[FileScore], None] | None = None,
) -> AsrEvaluation:
    """Transcribe every item concurrently (sharing batches) and score it."""
    started = time.monotonic()

    async def one(item: CorpusItem) -> FileScore:
        options = vox.long_options(language=item.language if language_hint else None, word_timestamps=False)
        transcript = await vox.atranscribe(item.audio, options, model=model)
        result = score_item(item, transcript.text, transcript.language, transcript.duration_s)
        if on_file is not None:
            on_file(result)
        return result

    files = await asyncio.gather(*(one(i) for i in items))
    return AsrEvaluation(sorted(files, key=lambda f: f.name), time.monotonic() - started)


def format_report(ev: AsrEvaluation) -> str:
    """A plain-text table of per-file scores, the pooled WER and the speed."""
    lines = [f"{'file':<40} {'lang':>4} {'det':>4} {'dur s':>7} {'metric':>6} {'error %':>8} {'ref words':>9}"]
    for f in ev.files:
        lines.append(
            f"{f.name[:40]:<40} {f.language:>4} {f.detected_language:>4} {f.duration_s:7.1f} {f.metric:>6} "
            f"{100 * f.score.wer:8.2f} {f.score.ref_words:9d}"
        )
    p = ev.pooled_wer
    lines.append(f"pooled WER {100 * p.wer:.2f}% over {p.ref_words} words "
                 f"(S {p.substitutions}, D {p.deletions}, I {p.insertions}); "
                 f"{ev.audio_s:.1f} s of audio in {ev.wall_s:.1f} s (RTFx {ev.rtfx:.1f})")
    return "\n".join(lines)
