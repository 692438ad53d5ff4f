"""DER, JER and the speaker-count error of the diarization pipeline over a corpus of audio files with RTTM
references.

Every file is scored over its whole duration with overlapped speech, at collar 0 and at a 0.25 s collar
(each side of every reference boundary); pooled DER sums errors and reference speech over files. The
speaker-count error of a file is its hypothesis speakers minus its reference speakers; pooled, the mean of
its absolute value.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from voxserve.eval.corpus import CorpusItem, find_items
from voxserve.eval.der import DerScore, pooled, read_rttm, score_der, score_jer
from voxserve.service import Voxserve
from voxserve.types import Diarization

COLLARS = (0.0, 0.25)


@dataclass(frozen=True)
class FileDer:
    """One file's scores and speed."""

    name: str
    duration_s: float
    wall_s: float
    ref_speakers: int
    hyp_speakers: int
    der: dict[float, DerScore]
    jer: float
    stages: tuple[tuple[str, float], ...]

    @property
    def count_error(self) -> int:
        """Hypothesis speakers minus reference speakers."""
        return self.hyp_speakers - self.ref_speakers


@dataclass(frozen=True)
class DiarizationEvaluation:
    """All files' scores, pooled DER per collar, and the speed of the whole run."""

    files: list[FileDer]
    wall_s: float

    def pooled(self, collar_s: float) -> DerScore:
        """Total errors over total reference speech at one collar."""
        return pooled(f.der[collar_s] for f in self.files)

    @property
    def mean_abs_count_error(self) -> float:
        """Mean over files of |hypothesis speakers - reference speakers|."""
        return sum(abs(f.count_error) for f in self.files) / len(self.files) if self.files else 0.0

    @property
    def mean_jer(self) -> float:
        """Mean over files of the Jaccard error rate (collar 0)."""
        return sum(f.jer for f in self.files) / len(self.files) if self.files else 0.0

    @property
    def audio_s(self) -> float:
        """Seconds of audio evaluated."""
        return sum(f.duration_s for f in self.files)

    @property
    def rtfx(self) -> float:
        """Audio seconds per wall second of the run."""
        return self.audio_s / self.wall_s if self.wall_s > 0 else 0.0


def diarization_items(root: Path) -> list[CorpusItem]:
    """Audio files with an ``.rttm`` beside them, under ``root/diar`` (or ``root`` itself)."""
    return find_items(root, ("diar",), ".rttm")


def score_file(item: CorpusItem, result: Diarization) -> FileDer:
    """Score one diarization against the item's RTTM (the file id inside it is ignored)."""
    reference = [t for turns in read_rttm(item.reference).values() for t in turns]
    duration = result.duration_s
    return FileDer(
        name=item.name,
        duration_s=duration,
        wall_s=result.stats.wall_s,
        ref_speakers=len({t.speaker for t in reference}),
        hyp_speakers=len(result.speakers),
        der={c: score_der(reference, result.turns, duration, c) for c in COLLARS},
        jer=score_jer(reference, result.turns, duration, 0.0),
        stages=result.stats.stages,
    )


async def evaluate_diarization(
    vox: Voxserve,
    items: list[CorpusItem],
    *,
    embedder: str | None = None,
    oracle_count: bool = False,
    on_file: Callable[[FileDer], None] | None = None,
) -> DiarizationEvaluation:
    """Diarize every item concurrently (sharing batches) and score it; ``oracle_count`` passes the
    reference's number of speakers."""
    started = time.monotonic()

    async def one(item: CorpusItem) -> FileDer:
        count = None
        if oracle_count:
            count = len({t.speaker for turns in read_rttm(item.reference).values() for t in turns})
        result = await vox.adiarize(item.audio, vox.diarize_options(num_speakers=count), embedder=embedder)
        scored = score_file(item, result)
        if on_file is not None:
            on_file(scored)
        return scored

    files = await asyncio.gather(*(one(i) for i in items))
    return DiarizationEvaluation(sorted(files, key=lambda f: f.name), time.monotonic() - started)


def format_report(ev: DiarizationEvaluation) -> str:
    """A plain-text table: per-file DER (both collars, with miss / false alarm / confusion), JER, speakers
    and the count error, then the pooled DER, mean JER, mean absolute count error and the speed."""
    lines = [f"{'file':<24} {'dur s':>6} {'ref':>3} {'hyp':>3} {'n err':>5} {'DER%':>6} {'DER25%':>6} "
             f"{'miss':>5} {'fa':>5} {'conf':>5} {'JER%':>6}"]
    for f in ev.files:
        d0, d25 = f.der[0.0], f.der[0.25]
        lines.append(f"{f.name[:24]:<24} {f.duration_s:6.1f} {f.ref_speakers:3d} {f.hyp_speakers:3d} "
                     f"{f.count_error:+5d} {100 * d0.der:6.1f} {100 * d25.der:6.1f} {d25.missed:5.2f} "
                     f"{d25.false_alarm:5.2f} {d25.confusion:5.2f} {100 * f.jer:6.1f}")
    for collar in COLLARS:
        p = ev.pooled(collar)
        lines.append(f"pooled DER (collar {collar:.2f} s, overlap scored) {100 * p.der:.1f}% over {p.total:.1f} s "
                     f"of speech (miss {p.missed:.1f} s, false alarm {p.false_alarm:.1f} s, confusion {p.confusion:.1f} s)")
    lines.append(f"mean JER (collar 0) {100 * ev.mean_jer:.1f}%; speaker-count error: mean |hyp - ref| "
                 f"{ev.mean_abs_count_error:.2f} over {len(ev.files)} files")
    lines.append(f"{ev.audio_s:.1f} s of audio in {ev.wall_s:.2f} s (speed {ev.rtfx:.1f}x real time)")
    return "\n".join(lines)
