"""The SNAC 24 kHz codec decoder (``snac`` package, torch) over windows of Orpheus frames, batched across streams.

No SNAC weights ship with voxserve (none are installable offline): :func:`load_snac` reads a local directory
with ``config.json`` and ``pytorch_model.bin``; tests build small random-weight models from a config.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxserve.backends.base import DecoderInfo
from voxserve.backends.tts.orpheus_codes import CODES_PER_FRAME, snac_levels
from voxserve.errors import BackendError, ModelUnavailable
from voxserve.types import Float32Array


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SnacDecoder:
    """Decodes windows of Orpheus frames (shape (7, n), int) to audio (implements ``AudioDecoder``).

    Windows of equal length are stacked into one batch on any device (torch convolutions gain from it).
    The default window sizes follow the codec: 3 context frames (about 12 latent steps on each side) cover
    the decoder's receptive field, so windowed audio equals whole decoding within float tolerance.
    """

    def __init__(
        self,
        model: Any,
        *,
        name: str = "snac",
        device: str = "cpu",
        first_frames: int = 1,
        window_frames: int = 8,
        context_frames: int = 3,
    ) -> None:
        import torch

        self._torch = torch
        self._device = resolve_device(device)
        self._model = model.to(self._device).eval()
        self._lock = threading.Lock()
        hop = int(np.prod(model.encoder_rates)) if hasattr(model, "encoder_rates") else int(model.hop_length)
        self.codebook_size = int(model.codebook_size)
        self._info = DecoderInfo(
            name=name, sample_rate=int(model.sampling_rate), samples_per_frame=hop * int(model.vq_strides[0]),
            context_frames=context_frames, first_frames=first_frames, window_frames=window_frames,
            stacks_batches=True,
        )

    @property
    def info(self) -> DecoderInfo:
        """Facts about the decoder."""
        return self._info

    def decode_batch(self, windows: Sequence[npt.NDArray[Any]]) -> list[Float32Array]:
        """Decode each (7, n) window to ``n * samples_per_frame`` samples."""
        results: list[Float32Array | None] = [None] * len(windows)
        by_length: dict[int, list[int]] = {}
        for i, w in enumerate(windows):
            if w.ndim != 2 or w.shape[0] != CODES_PER_FRAME:
                raise BackendError(f"SNAC windows must have shape (7, frames), not {w.shape}")
            by_length.setdefault(w.shape[-1], []).append(i)
        for indices in by_length.values():
            stacked = np.stack([np.asarray(windows[i], dtype=np.int64) for i in indices])
            if stacked.min(initial=0) < 0 or stacked.max(initial=0) >= self.codebook_size:
                raise BackendError("SNAC codes out of range for this codebook")
            for i, audio in zip(indices, self._decode(stacked), strict=True):
                results[i] = audio
        return [r for r in results if r is not None]

    def _decode(self, frames: npt.NDArray[np.int64]) -> list[Float32Array]:
        torch = self._torch
        codes = [torch.from_numpy(np.ascontiguousarray(level)).to(self._device) for level in snac_levels(frames)]
        with self._lock, torch.inference_mode():
            audio = self._model.decode(codes)
        out = audio.reshape(frames.shape[0], -1).float().cpu().numpy()
        return [np.asarray(row, dtype=np.float32) for row in out]


def snac_from_config(config: dict[str, Any], seed: int = 0) -> Any:
    """A SNAC model with random weights (for tests of the code path: real shapes, noise for output)."""
    import torch
    from snac import SNAC

    torch.manual_seed(seed)
    return SNAC(**config).eval()


def load_snac(path: str) -> Any:
    """A SNAC model from a local directory (``config.json`` + ``pytorch_model.bin``); never downloads."""
    folder = Path(path).expanduser()
    if not (folder / "config.json").is_file() or not (folder / "pytorch_model.bin").is_file():
        raise ModelUnavailable(f"{folder} must contain SNAC's config.json and pytorch_model.bin", param="voice")
    try:
        from snac import SNAC
    except ImportError as exc:
        raise ModelUnavailable("the SNAC decoder needs: pip install 'voxserve[tts-llm]'") from exc
    return SNAC.from_pretrained(str(folder)).eval()
