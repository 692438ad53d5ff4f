"""Diarization error rate and Jaccard error rate with pyannote.metrics (from the ``[diarize]`` extra).

Scoring follows the corpus README: the whole file is scored (UEM = [0, duration]), overlapped speech
included. ``collar_s`` is the forgiveness collar on each side of every reference boundary (NIST's 0.25 s
collar is pyannote's ``collar=0.5``, the total width).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxserve.errors import ModelUnavailable
from voxserve.types import SpeakerTurn, s_to_samples


@dataclass(frozen=True)
class DerScore:
    """Error durations in seconds over ``total`` seconds of reference speech (overlap counted per speaker)."""

    missed: float
    false_alarm: float
    confusion: float
    total: float

    @property
    def der(self) -> float:
        """(missed + false alarm + confusion) / total reference speech."""
        return (self.missed + self.false_alarm + self.confusion) / self.total if self.total > 0 else 0.0


def pooled(scores: Iterable[DerScore]) -> DerScore:
    """Sum of the error and reference durations of several files (the corpus-level DER)."""
    items = list(scores)
    return DerScore(
        missed=sum(s.missed for s in items),
        false_alarm=sum(s.false_alarm for s in items),
        confusion=sum(s.confusion for s in items),
        total=sum(s.total for s in items),
    )


def read_rttm(path: Path) -> dict[str, list[SpeakerTurn]]:
    """Turns per file id from an RTTM file (``SPEAKER`` lines only)."""
    turns: dict[str, list[SpeakerTurn]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[0] == "SPEAKER":
            start, duration = float(parts[3]), float(parts[4])
            turns[parts[1]].append(SpeakerTurn(s_to_samples(start), s_to_samples(start + duration), parts[7]))
    return dict(turns)


def _metrics() -> Any:
    try:
        from pyannote.core import Annotation, Segment, Timeline
        from pyannote.metrics.diarization import DiarizationErrorRate, JaccardErrorRate
    except ImportError as exc:
        raise ModelUnavailable("DER scoring needs pyannote.metrics: pip install 'voxserve[diarize]'") from exc
    return Annotation, Segment, Timeline, DiarizationErrorRate, JaccardErrorRate


def _annotation(turns: Sequence[SpeakerTurn]) -> Any:
    annotation_cls, segment_cls, *_ = _metrics()
    annotation = annotation_cls()
    for i, t in enumerate(turns):
        if t.end > t.start:
            annotation[segment_cls(t.start_s, t.end_s), i] = t.speaker
    return annotation


def score_der(
    reference: Sequence[SpeakerTurn], hypothesis: Sequence[SpeakerTurn], duration_s: float, collar_s: float = 0.0
) -> DerScore:
    """DER components of one file, scored over [0, duration_s] with overlap."""
    _, segment_cls, timeline_cls, der_cls, _ = _metrics()
    metric = der_cls(collar=2 * collar_s, skip_overlap=False)
    uem = timeline_cls([segment_cls(0.0, duration_s)])
    d = metric(_annotation(reference), _annotation(hypothesis), uem=uem, detailed=True)
    return DerScore(d["missed detection"], d["false alarm"], d["confusion"], d["total"])


def score_jer(
    reference: Sequence[SpeakerTurn], hypothesis: Sequence[SpeakerTurn], duration_s: float, collar_s: float = 0.0
) -> float:
    """Jaccard error rate of one file (mean over reference speakers of 1 - their best-matched overlap ratio)."""
    _, segment_cls, timeline_cls, _, jer_cls = _metrics()
    metric = jer_cls(collar=2 * collar_s, skip_overlap=False)
    return float(metric(_annotation(reference), _annotation(hypothesis), uem=timeline_cls([segment_cls(0.0, duration_s)])))
