"""Deterministic fakes of the backend protocols, for tests and demos of orchestration (never for "done").

``FakeVad`` scores frames by energy; ``FakeAsr`` answers from a script keyed on the request audio and
records every batch it saw, so tests can assert on batching, retries and stitching without a model.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from voxserve.backends.base import AsrModelInfo, AsrRequest, AsrResult, DecodeOptions, TimedWord
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
        """1.0 for loud frames, 0.0 for quiet ones."""
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

    Words are spread evenly over the request audio; ``avg_logprob`` is ``logprob``; the recorded
    ``batches`` list holds each batch's requests; ``delay_s`` simulates compute per batch.
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

    def detect_language(self, audio: Float32Array) -> list[tuple[str, float]]:
        """Always the configured language."""
        return [(self.language, 1.0)]

    def transcribe_batch(self, requests: Sequence[AsrRequest]) -> list[AsrResult]:
        """Answer every request from the script."""
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

    def _result(self, req: AsrRequest) -> AsrResult:
        text = self.script(req.audio, req.options)
        tokens = text.split()
        step = len(req.audio) // max(1, len(tokens))
        words = tuple(
            TimedWord(w, i * step, (i + 1) * step, 0.9, (i,)) for i, w in enumerate(tokens)
        ) if req.options.word_timestamps else ()
        return AsrResult(
            text=text,
            tokens=tuple(range(len(tokens))),
            words=words,
            language=req.options.language or self.language,
            language_probability=1.0,
            avg_logprob=self.logprob,
            no_speech_prob=self.no_speech_prob,
            temperature=req.options.temperature,
        )
