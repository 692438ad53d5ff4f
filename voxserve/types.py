"""Frozen value types shared by all layers.

Inside the code, time is an integer sample index at :data:`SAMPLE_RATE` (16 kHz); seconds appear only in
the ``*_s`` properties and on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal

import numpy as np
import numpy.typing as npt

SAMPLE_RATE = 16_000
"""The sample rate of every internal audio timeline (Whisper, VAD, segmentation)."""

Task = Literal["transcribe", "translate"]
Float32Array = npt.NDArray[np.float32]


def samples_to_s(n: int) -> float:
    """Convert a sample index at :data:`SAMPLE_RATE` to seconds."""
    return n / SAMPLE_RATE


def s_to_samples(seconds: float) -> int:
    """Convert seconds to the nearest sample index at :data:`SAMPLE_RATE`."""
    return int(round(seconds * SAMPLE_RATE))


class Priority(IntEnum):
    """Scheduling classes: lower value runs first."""

    LIVE = 0
    AGENT = 1
    OFFLINE = 2


@dataclass(frozen=True, eq=False)
class AudioChunk:
    """Mono float32 samples that start at ``start_sample`` on their stream's or file's timeline."""

    samples: Float32Array
    start_sample: int = 0
    sample_rate: int = SAMPLE_RATE

    @property
    def end_sample(self) -> int:
        """One past the last sample on the timeline."""
        return self.start_sample + len(self.samples)

    @property
    def duration_s(self) -> float:
        """Length in seconds."""
        return len(self.samples) / self.sample_rate


@dataclass(frozen=True)
class Word:
    """A recognised word with its time span in samples and the model's confidence."""

    text: str
    start: int
    end: int
    probability: float = 1.0
    speaker: str | None = None

    @property
    def start_s(self) -> float:
        """Start time in seconds."""
        return samples_to_s(self.start)

    @property
    def end_s(self) -> float:
        """End time in seconds."""
        return samples_to_s(self.end)


@dataclass(frozen=True)
class Segment:
    """A stretch of transcript with its words and the decoding statistics of the chunk it came from."""

    id: int
    start: int
    end: int
    text: str
    words: tuple[Word, ...] = ()
    tokens: tuple[int, ...] = ()
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0
    speaker: str | None = None

    @property
    def start_s(self) -> float:
        """Start time in seconds."""
        return samples_to_s(self.start)

    @property
    def end_s(self) -> float:
        """End time in seconds."""
        return samples_to_s(self.end)


@dataclass(frozen=True)
class ChunkReport:
    """What happened to one planned chunk of a long file (reported in verbose_json)."""

    index: int
    start: int
    end: int
    speech_samples: int
    attempts: int
    temperature: float
    rechunked: bool
    passed: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class TranscriptStats:
    """Speed and guard statistics of one transcription."""

    wall_s: float = 0.0
    chunks: int = 0
    retries: int = 0
    rechunks: int = 0
    guard_failures: int = 0
    speech_s: float = 0.0
    chunk_reports: tuple[ChunkReport, ...] = ()


@dataclass(frozen=True)
class Transcript:
    """The full result of transcribing one audio input."""

    text: str
    language: str
    duration: int
    segments: tuple[Segment, ...]
    language_probability: float = 1.0
    task: Task = "transcribe"
    stats: TranscriptStats = field(default_factory=TranscriptStats)

    @property
    def duration_s(self) -> float:
        """Audio duration in seconds."""
        return samples_to_s(self.duration)

    @property
    def words(self) -> tuple[Word, ...]:
        """All words of all segments, in order."""
        return tuple(w for s in self.segments for w in s.words)

    @property
    def rtfx(self) -> float:
        """Audio seconds per wall second (0 when the wall time is unknown)."""
        return self.duration_s / self.stats.wall_s if self.stats.wall_s > 0 else 0.0
