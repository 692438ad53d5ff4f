"""Deterministic fakes of the backend protocols, for tests and demos of orchestration (never for "done").

``FakeVad`` scores frames by energy; ``FakeAsr`` answers from a script keyed on the request audio and
records every batch it saw, so tests can assert on batching, retries and stitching without a model.
``FakeSegmentation`` and ``FakeEmbedder`` treat pure tones as speakers, for diarization tests.

Each fake refuses the inputs its real backend refuses (``voxserve.backends.checks``) and keeps the real
model's limits (the recogniser hears only its 30 s window); ``tests/contract`` holds both to one contract.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from voxserve.backends.base import (
    AsrModelInfo,
    AsrRequest,
    AsrResult,
    DecodeOptions,
    EmbedderInfo,
    SegmentationInfo,
    TimedWord,
)
from voxserve.backends.checks import check_audio, check_batch_audio
from voxserve.errors import InvalidInput
from voxserve.types import SAMPLE_RATE, Float32Array


class FakeVad:
    """Speech probability = 1 where a frame's RMS is above ``level``, else 0."""

    def __init__(self, level: float = 0.01, frame_samples: int = 512) -> None:
        self.level = level
        self._frame = frame_samples

    @property
    def frame_samples(self) -> int:
        """Samples per frame."""
        return self._frame

    def reset(self) -> None:
        """Stateless: nothing to reset."""

    def probabilities(self, audio: Float32Array) -> Float32Array:
        """1.0 for loud frames, 0.0 for quiet ones (InvalidInput for what Silero refuses)."""
        check_audio(audio, allow_empty=True)
        n = len(audio) // self._frame
        frames = np.asarray(audio[: n * self._frame], dtype=np.float32).reshape(n, self._frame)
        loud = np.sqrt(np.mean(frames**2, axis=1)) > self.level
        return np.asarray(loud, dtype=np.float32)


Script = Callable[[Float32Array, DecodeOptions], str]


def words_per_second_script(rate: float = 2.5) -> Script:
    """A script that says ``w0 w1 ...`` at ``rate`` words per second of audio."""

    def say(audio: Float32Array, options: DecodeOptions) -> str:
        n = max(1, int(len(audio) / SAMPLE_RATE * rate))
        return " ".join(f"w{i}" for i in range(n))

    return say


@dataclass
class FakeAsr:
    """A scripted recogniser implementing :class:`~voxserve.backends.base.AsrModel`.

    Words are spread evenly over the request audio (only its first 30 s are heard, as by Whisper);
    ``avg_logprob`` is ``logprob``; the recorded ``batches`` list holds each batch's requests; ``delay_s``
    simulates compute per batch. Audio Whisper refuses (empty, NaN, ...) raises InvalidInput before a batch
    is recorded.
    """

    script: Script = field(default_factory=words_per_second_script)
    logprob: float = -0.2
    no_speech_prob: float = 0.01
    language: str = "en"
    delay_s: float = 0.0
    fail_on: Callable[[AsrRequest], bool] | None = None
    batches: list[list[AsrRequest]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def info(self) -> AsrModelInfo:
        """A multilingual 30 s model."""
        return AsrModelInfo("fake", True, 30 * SAMPLE_RATE, 448, ("de", "en", "es", "fr"))

    def check_options(self, options: DecodeOptions) -> None:
        """Validate like a real model."""
        options.validate()
        if options.language is not None and options.language not in self.info.languages:
            raise InvalidInput(f"unknown language {options.language!r}", param="language")
        if any(code not in self.info.languages for code in options.allowed_languages):
            raise InvalidInput("unknown language in allowed_languages", param="allowed_languages")

    def detect_language(self, audio: Float32Array) -> list[tuple[str, float]]:
        """Always the configured language."""
        check_audio(audio)
        return [(self.language, 1.0)]

    def transcribe_batch(self, requests: Sequence[AsrRequest]) -> list[AsrResult]:
        """Answer every request from the script."""
        check_batch_audio([r.audio for r in requests], "request audio")
        with self._lock:
            self.batches.append(list(requests))
        if self.delay_s:
            time.sleep(self.delay_s)
        out = []
        for req in requests:
            if self.fail_on is not None and self.fail_on(req):
                raise RuntimeError("scripted failure")
            out.append(self._result(req))
        return out

    def batch_key(self, request: AsrRequest) -> Hashable:
        """One key for all: a fake answers a whole batch in one call."""
        return None

    def _detected(self, allowed: tuple[str, ...]) -> str:
        """The configured language, or the first allowed one when it is not allowed."""
        return self.language if not allowed or self.language in allowed else allowed[0]

    def _result(self, req: AsrRequest) -> AsrResult:
        heard = req.audio[: self.info.window_samples]
        text = self.script(heard, req.options)
        tokens = text.split()
        step = len(heard) // max(1, len(tokens))
        words = tuple(
            TimedWord(w, i * step, (i + 1) * step, 0.9, (i,)) for i, w in enumerate(tokens)
        ) if req.options.word_timestamps else ()
        return AsrResult(
            text=text,
            tokens=tuple(range(len(tokens))),
            words=words,
            language=req.options.language or self._detected(req.options.allowed_languages),
            language_probability=1.0,
            avg_logprob=self.logprob,
            no_speech_prob=self.no_speech_prob,
            temperature=req.options.temperature,
        )


# ------------------------------------------------------------------------------------- diarization
# "Speakers" in fake-diarization tests are pure tones: a voice is its frequency.


def _band_energies(frames: np.ndarray, bands: int) -> np.ndarray:
    """Magnitude spectrum of each row pooled into ``bands`` equal bands up to 4 kHz."""
    window = np.hanning(frames.shape[-1]).astype(np.float32)
    spectrum = np.abs(np.fft.rfft(frames * window, n=1024, axis=-1))[..., :256]
    return np.asarray(spectrum.reshape(*spectrum.shape[:-1], bands, 256 // bands).sum(axis=-1))


@dataclass
class FakeSegmentation:
    """Implements :class:`~voxserve.backends.base.SegmentationModel` with the real model's geometry (10 s
    windows, 270-sample frames): each tone band that is present (loud, steady) in at least 10 frames of a
    window is a local speaker (numbered by first appearance, at most 3). Records every batch."""

    level: float = 0.01
    batches: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def info(self) -> SegmentationInfo:
        """The pyannote segmentation-3.0 geometry."""
        return SegmentationInfo("fake-segmentation", 10 * SAMPLE_RATE, 270, 991, 3)

    def segment_batch(self, windows: Sequence[Float32Array]) -> list[Float32Array]:
        """Activity (frames, 3) per window (shorter windows zero-padded, longer ones cut to 10 s)."""
        check_batch_audio(windows, "window", allow_empty=True)
        with self._lock:
            self.batches.append(len(windows))
        return [self._one(w) for w in windows]

    def _one(self, window: Float32Array) -> Float32Array:
        info = self.info
        audio = np.zeros(info.window_samples, np.float32)
        audio[: min(len(window), info.window_samples)] = window[: info.window_samples]
        n = 1 + (info.window_samples - info.frame_size) // info.frame_step
        idx = np.arange(info.frame_size)[None, :] + info.frame_step * np.arange(n)[:, None]
        frames = audio[idx]
        loud = np.sqrt(np.mean(frames**2, axis=1)) > self.level
        energy = _band_energies(frames, 32)
        present = (energy > 0.5 * energy.max(axis=1, keepdims=True)) & loud[:, None]
        present &= (present.sum(axis=1) <= 2)[:, None]  # onsets and offsets smear over many bands
        steady = np.flatnonzero(present.sum(axis=0) >= 10)
        first = [int(np.argmax(present[:, band])) for band in steady]
        order = [int(band) for _, band in sorted(zip(first, steady, strict=True))][: info.local_speakers]
        out = np.zeros((n, info.local_speakers), np.float32)
        for k, band in enumerate(order):
            out[:, k] = present[:, band]
        return out


@dataclass
class FakeEmbedder:
    """Implements :class:`~voxserve.backends.base.SpeakerEmbedder`: the L2-normalised band energies of the
    input (distinct tones give orthogonal embeddings). Like the real embedders it gives a unit vector for any
    non-empty input, silence and inputs shorter than ``min_samples`` included (a tiny floor in every band).
    Records the size of every batch."""

    batches: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def info(self) -> EmbedderInfo:
        """32-d embeddings of at least 0.25 s."""
        return EmbedderInfo("fake", 32, SAMPLE_RATE // 4)

    def embed_batch(self, audios: Sequence[Float32Array]) -> list[Float32Array]:
        """One embedding per input."""
        check_batch_audio(audios)
        with self._lock:
            self.batches.append(len(audios))
        out = []
        for a in audios:
            usable = max(1024, len(a) // 1024 * 1024)
            x = np.zeros(usable, np.float32)
            x[: min(len(a), usable)] = a[:usable]
            e = _band_energies(x.reshape(-1, 1024), 32).sum(axis=0) + 1e-6
            out.append(np.asarray(e / float(np.linalg.norm(e)), np.float32))
        return out
