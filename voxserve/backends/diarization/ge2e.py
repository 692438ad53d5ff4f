"""resemblyzer's GE2E speaker encoder (3-layer LSTM, 256-d) on ONNX Runtime.

As resemblyzer does: the speech is raised to -30 dBFS, cut into 1.6 s partials, each partial is embedded,
and the mean of the partial embeddings is L2-normalised. Partials of all inputs of a batch go through the
model together. resemblyzer starts 1.3 partials per second; 0.7 (almost no overlap) gave the same DER on
the corpus with half the model calls.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from voxserve.backends.base import EmbedderInfo
from voxserve.backends.checks import check_batch_audio
from voxserve.backends.diarization.export import export_ge2e
from voxserve.backends.diarization.features import mel_power_spectrogram, slaney_mel_filters
from voxserve.backends.diarization.onnx_runtime import cpu_session
from voxserve.backends.diarization.weights import cached_export
from voxserve.types import SAMPLE_RATE, Float32Array

ONNX_NAME = "ge2e-resemblyzer-0.1.4.onnx"
_PARTIAL_FRAMES = 160
_HOP = 160
_RATE = 0.7
_MIN_COVERAGE = 0.75
_TARGET_DBFS = -30.0
_MAX_BATCH = 64


def partial_slices(n_samples: int, rate: float = _RATE, min_coverage: float = _MIN_COVERAGE) -> list[tuple[int, int]]:
    """Mel-frame ranges of the 1.6 s partials of an input of ``n_samples`` (resemblyzer's rule)."""
    n_frames = int(np.ceil((n_samples + 1) / _HOP))
    step = max(1, int(np.round((SAMPLE_RATE / rate) / _HOP)))
    starts = range(0, max(1, n_frames - _PARTIAL_FRAMES + step + 1), step)
    slices = [(s, s + _PARTIAL_FRAMES) for s in starts]
    coverage = (n_samples - slices[-1][0] * _HOP) / (_PARTIAL_FRAMES * _HOP)
    if coverage < min_coverage and len(slices) > 1:
        slices = slices[:-1]
    return slices


def raise_volume(audio: Float32Array, target_dbfs: float = _TARGET_DBFS) -> Float32Array:
    """Scale quiet audio up to ``target_dbfs`` (RMS); louder audio is left as it is."""
    rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if len(audio) else 0.0
    if rms <= 1e-8:
        return audio
    gain_db = target_dbfs - 20 * np.log10(rms)
    return audio if gain_db <= 0 else np.asarray(audio * 10 ** (gain_db / 20), dtype=np.float32)


class Ge2eEmbedder:
    """Implements :class:`~voxserve.backends.base.SpeakerEmbedder`."""

    def __init__(self, threads: int = 1) -> None:
        self._session = cpu_session(cached_export(ONNX_NAME, export_ge2e), threads)
        self._filters = slaney_mel_filters(40, 400)
        self._info = EmbedderInfo(name="resemblyzer", dim=256, min_samples=SAMPLE_RATE // 2)

    @property
    def info(self) -> EmbedderInfo:
        """256-d embeddings; at least 0.5 s of speech."""
        return self._info

    def embed_batch(self, audios: Sequence[Float32Array]) -> list[Float32Array]:
        """L2-normalised embeddings, in input order.

        Raises:
            InvalidInput: an input is empty, not 1-D float samples, or has NaN or infinite samples.
        """
        check_batch_audio(audios)
        if not audios:
            return []
        partials: list[Float32Array] = []
        owner: list[int] = []
        for i, audio in enumerate(audios):
            slices = partial_slices(len(audio))
            padded = np.pad(raise_volume(audio), (0, max(0, slices[-1][1] * _HOP - len(audio))))
            mel = mel_power_spectrogram(padded, self._filters)
            partials.extend(mel[a:b] for a, b in slices)
            owner.extend([i] * len(slices))
        embeddings = np.concatenate(
            [self._session.run(None, {"mels": np.stack(partials[j : j + _MAX_BATCH])})[0]
             for j in range(0, len(partials), _MAX_BATCH)]
        ) if partials else np.zeros((0, 256), np.float32)
        sums = np.zeros((len(audios), 256), dtype=np.float64)
        np.add.at(sums, np.asarray(owner), embeddings)
        norms = np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-8)
        return [np.asarray(row, dtype=np.float32) for row in sums / norms]
