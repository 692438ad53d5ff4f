"""pyannote segmentation-3.0 on ONNX Runtime: 10 s windows -> per-frame activity of 3 local speakers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from voxserve.backends.base import SegmentationInfo
from voxserve.backends.checks import check_batch_audio
from voxserve.backends.diarization.onnx_runtime import cpu_session
from voxserve.backends.diarization.powerset import powerset_to_multilabel
from voxserve.backends.diarization.weights import segmentation_onnx
from voxserve.types import SAMPLE_RATE, Float32Array

INFO = SegmentationInfo(
    name="pyannote-segmentation-3.0",
    window_samples=10 * SAMPLE_RATE,
    frame_step=270,
    frame_size=991,
    local_speakers=3,
)
_MAX_PER_FRAME = 2


class PyannoteSegmentation:
    """Implements :class:`~voxserve.backends.base.SegmentationModel` (hard powerset decoding, overlap aware)."""

    def __init__(self, threads: int = 1) -> None:
        self._session = cpu_session(segmentation_onnx(), threads)

    @property
    def info(self) -> SegmentationInfo:
        """Window and frame geometry."""
        return INFO

    def segment_batch(self, windows: Sequence[Float32Array]) -> list[Float32Array]:
        """Activity (frames, 3) in {0, 1} per window; windows shorter than 10 s are zero-padded (an empty one is
        10 s of silence), only the first 10 s of longer ones are seen.

        Raises:
            InvalidInput: a window is not 1-D float samples or has NaN or infinite samples (the model marks
                every frame of such a window as speech).
        """
        check_batch_audio(windows, "window", allow_empty=True)
        if not windows:
            return []
        batch = np.zeros((len(windows), 1, INFO.window_samples), dtype=np.float32)
        for i, w in enumerate(windows):
            n = min(len(w), INFO.window_samples)
            batch[i, 0, :n] = w[:n]
        scores = self._session.run(None, {"input": batch})[0]
        activity = powerset_to_multilabel(scores, INFO.local_speakers, _MAX_PER_FRAME)
        return [np.ascontiguousarray(a, dtype=np.float32) for a in activity]
