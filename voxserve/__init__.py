"""voxserve: self-hostable speech inference (long-file and live transcription, diarization, TTS, agents)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("voxserve")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
