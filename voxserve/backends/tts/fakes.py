"""Deterministic fakes of the synthesis protocols, for tests of streaming, batching and scheduling.

``FakeAcoustic`` turns a text into frames whose values identify the text (so mixed-up streams show), one unit
per ``|``-separated part, all at once (with its words, timed by their characters) or one frame at a time (like
an LLM). ``FakeDecoder`` is convolutional
with a receptive field of one frame on each side (windowed decoding equals whole decoding with context >= 1)
and records every batch it decoded.

Both keep the contract of the real voices (``tests/contract``): a faster ``speed`` gives fewer frames, a
text with nothing to say (whitespace, punctuation) gives none, and the decoder refuses malformed windows.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from voxserve.backends.base import DecoderInfo, FrameBlock, FrameWord, SpeechOptions, VoiceInfo
from voxserve.backends.checks import check_frames
from voxserve.errors import BackendError
from voxserve.types import Float32Array

FAKE_RATE = 8000


def text_signature(text: str) -> int:
    """A small integer that identifies a text (its frames start at ``signature * 4096``)."""
    return zlib.crc32(text.encode()) % 1000


def fake_frames(text: str, frames_per_char: int = 2, speed: float = 1.0) -> npt.NDArray[np.float32]:
    """The (1, n) frames FakeAcoustic makes for one unit of text: exact integers in float32 (``1 / speed``
    times as many at another speaking rate)."""
    n = max(1, round(len(text) * frames_per_char / speed))
    return (text_signature(text) * 4096 + np.arange(n, dtype=np.float64)).astype(np.float32).reshape(1, n)


def fake_decode(frames: npt.NDArray[Any], samples_per_frame: int) -> Float32Array:
    """What FakeDecoder returns for one window: ``x[t] + (x[t-1] + x[t+1]) / 2`` (zero outside), repeated."""
    x = frames[0].astype(np.float64)
    left = np.concatenate([[0.0], x[:-1]])
    right = np.concatenate([x[1:], [0.0]])
    return np.repeat(x + 0.5 * (left + right), samples_per_frame).astype(np.float32)


@dataclass
class FakeAcoustic:
    """A scripted acoustic model (implements ``AcousticModel``); parts without a letter or digit are silent."""

    name: str = "fake"
    frames_per_char: int = 2
    incremental: bool = False
    delay_s: float = 0.0
    fail_on: str | None = None
    texts: list[str] = field(default_factory=list)
    asked_first: list[int] = field(default_factory=list)  # ``first_frames`` of each call of :meth:`frames`

    @property
    def voice(self) -> VoiceInfo:
        """A fake voice at 8 kHz."""
        return VoiceInfo(self.name, "en", FAKE_RATE, "fake", "deterministic test voice")

    def check_options(self, options: SpeechOptions) -> None:
        """Accept any valid options."""
        options.validate()

    def frames(self, text: str, options: SpeechOptions, first_frames: int = 0) -> Iterator[FrameBlock]:
        """One unit per ``|``-separated part of ``text`` (``first_frames`` changes nothing: ``incremental`` gives
        frame by frame)."""
        self.texts.append(text)
        self.asked_first.append(first_frames)
        for part in (p.strip() for p in text.split("|")):
            if self.delay_s:
                time.sleep(self.delay_s)
            if self.fail_on is not None and self.fail_on in part:
                raise BackendError(f"scripted failure on {part!r}")
            if not any(c.isalnum() for c in part):
                continue
            frames = fake_frames(part, self.frames_per_char, options.speed)
            if not self.incremental:
                yield FrameBlock(frames, True, self._words(part, options.speed))
                continue
            for t in range(frames.shape[1]):
                yield FrameBlock(frames[:, t : t + 1], False)
            yield FrameBlock(frames[:, :0], True)

    def _words(self, part: str, speed: float) -> tuple[FrameWord, ...]:
        """Each word of ``part`` over the frames of its characters."""
        scale = self.frames_per_char / speed
        return tuple(FrameWord(m.group(0), round(m.start() * scale), round(m.end() * scale))
                     for m in re.finditer(r"\w+", part))


@dataclass
class FakeDecoder:
    """A convolutional fake decoder (implements ``AudioDecoder``) that records its batches."""

    name: str = "fake-decoder"
    samples_per_frame: int = 4
    context_frames: int = 2
    first_frames: int = 4
    window_frames: int = 16
    delay_s: float = 0.0
    batches: list[list[int]] = field(default_factory=list)
    on_batch: Callable[[Sequence[npt.NDArray[Any]]], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def info(self) -> DecoderInfo:
        """Facts about the fake decoder."""
        return DecoderInfo(self.name, FAKE_RATE, self.samples_per_frame, self.context_frames, self.first_frames,
                           self.window_frames)

    def decode_batch(self, windows: Sequence[npt.NDArray[Any]]) -> list[Float32Array]:
        """Decode each (1, frames) window; record the batch's window lengths."""
        for i, w in enumerate(windows):
            check_frames(w, 1, f"decoder window {i}")
        with self._lock:
            self.batches.append([w.shape[-1] for w in windows])
        if self.on_batch is not None:
            self.on_batch(windows)
        if self.delay_s:
            time.sleep(self.delay_s)
        return [fake_decode(w, self.samples_per_frame) for w in windows]
