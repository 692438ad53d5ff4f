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
    """Scheduling classes: lower value runs first.

    ``PARTIAL`` is live work whose result is only a preview (partial hypotheses): it yields to every final
    result of live streams and agents, and still goes before offline files.
    """

    LIVE = 0
    AGENT = 1
    PARTIAL = 2
    OFFLINE = 3


class _SampleSpan:
    """Seconds of a span whose ``start`` and ``end`` are sample indices at :data:`SAMPLE_RATE`."""

    start: int
    end: int

    @property
    def start_s(self) -> float:
        """Start time in seconds."""
        return samples_to_s(self.start)

    @property
    def end_s(self) -> float:
        """End time in seconds."""
        return samples_to_s(self.end)


@dataclass(frozen=True)
class TokenLogprob:
    """One decoded token, its log-probability and its raw bytes (OpenAI's ``logprobs`` entries; a token may
    hold part of a character, so ``token`` alone may not be valid text)."""

    token: str
    logprob: float
    raw: bytes = b""


@dataclass(frozen=True)
class Word(_SampleSpan):
    """A recognised word with its time span in samples and the model's confidence.

    ``logprobs``: its tokens' log-probabilities, filled where the recogniser aligned the text (word timing).
    """

    text: str
    start: int
    end: int
    probability: float = 1.0
    speaker: str | None = None
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class Segment(_SampleSpan):
    """A stretch of transcript with its words and the decoding statistics of the chunk it came from;
    ``language`` is set only when the transcript detects a language per segment."""

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
    language: str | None = None
    channel: int | None = None
    """The audio channel the segment was heard on, when the file was transcribed channel by channel."""


@dataclass(frozen=True)
class AttemptReport:
    """One decode of a long file's chunk, or of a part of it once it was cut (reported in verbose_json).

    ``part``: ``""`` the whole chunk, ``"1"`` / ``"2"`` its first and second half, ``"2.1"`` the first half of
    the second half. ``start`` / ``end``: where the decoded speech starts and ends in the file (samples).
    ``window_s``: the encoder window. ``reasons``: why the guard failed it (empty when it passed).
    ``accepted``: its text is the one in the transcript."""

    part: str
    start: int
    end: int
    window_s: float
    beam_size: int
    temperature: float
    repetition_penalty: float
    language: str
    passed: bool
    reasons: tuple[str, ...]
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    words: int
    accepted: bool = False


@dataclass(frozen=True)
class ChunkReport:
    """What happened to one planned chunk of a long file (reported in verbose_json).

    ``attempts`` counts every decode of it and of its parts; ``history`` lists them: the chunk's own in the
    order they ran, then each half's (a chunk redone in the file's language at the end lists its first
    attempts first)."""

    index: int
    start: int
    end: int
    speech_samples: int
    attempts: int
    temperature: float
    rechunked: bool
    passed: bool
    reasons: tuple[str, ...] = ()
    history: tuple[AttemptReport, ...] = ()


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
class SpeakerTurn(_SampleSpan):
    """One speaker talking from ``start`` to ``end`` (samples); turns of different speakers may overlap."""

    start: int
    end: int
    speaker: str


@dataclass(frozen=True)
class DiarizationStats:
    """Speed of one diarization: wall seconds in total and per stage (decode, segmentation, embeddings, ...)."""

    wall_s: float = 0.0
    stages: tuple[tuple[str, float], ...] = ()
    windows: int = 0
    embeddings: int = 0


@dataclass(frozen=True)
class Diarization:
    """Who spoke when in one audio input: turns in time order and the speaker labels (``A``, ``B``, ...)."""

    turns: tuple[SpeakerTurn, ...]
    speakers: tuple[str, ...]
    duration: int
    stats: DiarizationStats = field(default_factory=DiarizationStats)

    @property
    def duration_s(self) -> float:
        """Audio duration in seconds."""
        return samples_to_s(self.duration)

    @property
    def rtfx(self) -> float:
        """Audio seconds per wall second (0 when the wall time is unknown)."""
        return self.duration_s / self.stats.wall_s if self.stats.wall_s > 0 else 0.0


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
    diarization: Diarization | None = None
    """Speaker turns when the transcript was diarized (words and segments then carry speakers)."""

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


@dataclass(frozen=True)
class SpokenWord:
    """A word of synthesized speech and when it is heard.

    Attributes:
        text: the word as spoken (after text normalisation: "doctor" for "Dr.").
        start_s: when it starts, in seconds of audio since the start of the stream.
        end_s: when it ends.
    """

    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True, eq=False)
class SynthesisChunk:
    """A piece of synthesized speech, in stream order.

    Attributes:
        audio: mono samples at ``sample_rate``: float32 in [-1, 1], or int16 when the stream was asked for it.
        sample_rate: the voice's output rate in Hz.
        sequence: 0 for the stream's first chunk, then 1, 2, ... without gaps.
        start_sample: where the chunk starts on the stream's audio timeline (at ``sample_rate``).
        text_start: offset of the first character of the text this audio speaks, in all text pushed so far.
        text_end: offset one past its last character.
        text: the segment of input text that this chunk belongs to.
        words: the words that start in this chunk's audio, with their times (from the voice's own durations;
            empty for voices that do not give them).
    """

    audio: npt.NDArray[np.float32] | npt.NDArray[np.int16]
    sample_rate: int
    sequence: int
    start_sample: int
    text_start: int
    text_end: int
    text: str = ""
    words: tuple[SpokenWord, ...] = ()

    @property
    def num_samples(self) -> int:
        """Number of samples."""
        return int(self.audio.shape[0])

    @property
    def start_s(self) -> float:
        """When the chunk starts, in seconds of audio since the start of the stream."""
        return self.start_sample / self.sample_rate

    @property
    def duration_s(self) -> float:
        """Length in seconds."""
        return self.num_samples / self.sample_rate

    def pcm16(self) -> bytes:
        """The samples as signed 16-bit little-endian PCM (float ``v`` maps to ``round(v * 32768)``, clipped)."""
        if self.audio.dtype == np.int16:
            return self.audio.astype("<i2").tobytes()
        scaled = np.rint(np.nan_to_num(self.audio.astype(np.float64)) * 32768.0)
        return np.clip(scaled, -32768, 32767).astype("<i2").tobytes()
