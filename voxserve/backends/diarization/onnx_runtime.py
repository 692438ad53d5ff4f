"""ONNX Runtime sessions for the diarization models (CPU, a fixed number of threads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxserve.backends.diarization.weights import INSTALL_HINT
from voxserve.errors import ModelUnavailable


def cpu_session(path: Path, threads: int = 1) -> Any:
    """An ``onnxruntime.InferenceSession`` on the CPU with ``threads`` intra-op threads."""
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - onnxruntime comes with faster-whisper
        raise ModelUnavailable(f"onnxruntime is not installed; {INSTALL_HINT}") from exc
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
