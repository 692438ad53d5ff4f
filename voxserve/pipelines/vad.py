"""Voice activity as a pure state machine over per-frame speech probabilities.

The VAD model only scores frames; this module turns scores into speech start and end events. It is shared
by live streams (utterance cutting) and long files (chunk planning), and tested with lists of floats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from voxserve.errors import InvalidInput
from voxserve.types import SAMPLE_RATE, Float32Array

Scores = Sequence[float] | Float32Array
"""Per-frame speech probabilities: a list (tests) or the VAD model's array."""


@dataclass(frozen=True)
class VadParams:
    """Thresholds and timings of the speech detector.

    Attributes:
        threshold: a frame at or above this probability is speech.
        neg_threshold: a frame below this is silence; frames in between keep the current state
            (hysteresis). None means ``threshold - 0.15``.
        min_speech_ms: speech shorter than this is ignored (clicks, breaths).
        min_silence_ms: silence this long ends an utterance.
        speech_pad_ms: audio kept on each side of detected speech when cutting.
        frame_samples: samples per scored frame (512 for Silero at 16 kHz).
    """

    threshold: float = 0.5
    neg_threshold: float | None = None
    min_speech_ms: int = 100
    min_silence_ms: int = 500
    speech_pad_ms: int = 200
    frame_samples: int = 512

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise InvalidInput("VAD threshold must be between 0 and 1", param="threshold")
        if self.neg_threshold is not None and not 0.0 <= self.neg_threshold <= self.threshold:
            raise InvalidInput("VAD neg_threshold must be between 0 and threshold", param="neg_threshold")
        if min(self.min_speech_ms, self.min_silence_ms, self.speech_pad_ms) < 0 or self.frame_samples <= 0:
            raise InvalidInput("VAD durations must not be negative", param="turn_detection")

    @property
    def low(self) -> float:
        """The silence threshold actually used."""
        return self.neg_threshold if self.neg_threshold is not None else max(0.0, self.threshold - 0.15)

    def ms_to_samples(self, ms: int) -> int:
        """Milliseconds to samples at 16 kHz."""
        return ms * SAMPLE_RATE // 1000


@dataclass(frozen=True)
class VadEvent:
    """Speech started or ended at ``sample`` (unpadded, on the stream's timeline)."""

    kind: Literal["start", "end"]
    sample: int


class VadStateMachine:
    """Feeds on one probability per frame and emits start/end events.

    ``start`` is emitted once speech has lasted ``min_speech_ms`` and carries the sample where it began;
    ``end`` is emitted once silence has lasted ``min_silence_ms`` and carries the sample where it began.
    """

    def __init__(self, params: VadParams, start_sample: int = 0) -> None:
        self.params = params
        self._pos = start_sample
        self._in_speech = False
        self._candidate: int | None = None  # where possible speech began
        self._silence_from: int | None = None  # where possible silence began (inside speech)
        self._min_speech = params.ms_to_samples(params.min_speech_ms)
        self._min_silence = params.ms_to_samples(params.min_silence_ms)

    @property
    def position(self) -> int:
        """Sample index just after the last frame seen."""
        return self._pos

    @property
    def in_speech(self) -> bool:
        """Whether a start has been emitted without its end."""
        return self._in_speech

    @property
    def pause_from(self) -> int | None:
        """Inside speech, where the silence that may end it began (None while speech goes on)."""
        return self._silence_from if self._in_speech else None

    def update(self, prob: float) -> list[VadEvent]:
        """Consume the next frame's probability."""
        frame_start = self._pos
        self._pos += self.params.frame_samples
        if self._in_speech:
            return self._update_speech(prob, frame_start)
        return self._update_silence(prob, frame_start)

    def update_many(self, probs: Scores) -> list[VadEvent]:
        """Consume several frames."""
        events: list[VadEvent] = []
        for p in probs:
            events.extend(self.update(float(p)))
        return events

    def flush(self) -> list[VadEvent]:
        """End of input: close open speech at the current position."""
        if self._in_speech:
            self._in_speech = False
            end = self._silence_from if self._silence_from is not None else self._pos
            self._silence_from = None
            return [VadEvent("end", end)]
        self._candidate = None
        return []

    def _update_silence(self, prob: float, frame_start: int) -> list[VadEvent]:
        if prob >= self.params.threshold:
            if self._candidate is None:
                self._candidate = frame_start
            if self._pos - self._candidate >= self._min_speech:
                self._in_speech = True
                start, self._candidate = self._candidate, None
                return [VadEvent("start", start)]
        elif prob < self.params.low:
            self._candidate = None
        return []

    def _update_speech(self, prob: float, frame_start: int) -> list[VadEvent]:
        if prob >= self.params.threshold:
            self._silence_from = None
        elif prob < self.params.low:
            if self._silence_from is None:
                self._silence_from = frame_start
            if self._pos - self._silence_from >= self._min_silence:
                self._in_speech = False
                end, self._silence_from = self._silence_from, None
                return [VadEvent("end", end)]
        return []


def speech_regions(
    probs: Scores, params: VadParams, n_samples: int, start_sample: int = 0
) -> list[tuple[int, int]]:
    """Padded, merged speech regions ``(start, end)`` in samples for a whole run of frames."""
    machine = VadStateMachine(params, start_sample)
    events = machine.update_many(probs) + machine.flush()
    return padded_regions(events, params, start_sample, start_sample + n_samples)


def padded_regions(
    events: Sequence[VadEvent], params: VadParams, start_limit: int, end_limit: int
) -> list[tuple[int, int]]:
    """Speech regions from alternating start/end events: padded, merged, and clamped to the limits."""
    pad = params.ms_to_samples(params.speech_pad_ms)
    regions: list[tuple[int, int]] = []
    open_start: int | None = None
    for ev in events:
        if ev.kind == "start":
            open_start = ev.sample
        elif open_start is not None:
            start, end = max(start_limit, open_start - pad), min(end_limit, ev.sample + pad)
            if regions and start <= regions[-1][1]:
                regions[-1] = (regions[-1][0], max(end, regions[-1][1]))
            elif end > start:
                regions.append((start, end))
            open_start = None
    return regions
