"""voxserve: self-hostable speech inference (long-file and live transcription, diarization, TTS, agents).

The front door is :class:`Voxserve`::

    from voxserve import Voxserve

    with Voxserve() as vox:
        print(vox.transcribe("talk.mp3").text)
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("voxserve")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

if TYPE_CHECKING:
    from voxserve.config import Settings, load_settings
    from voxserve.service import Voxserve

__all__ = ["Settings", "Voxserve", "__version__", "load_settings"]


def __getattr__(name: str) -> Any:
    """The facade loads on first use, so ``import voxserve.<module>`` stays light (the CLI's --help)."""
    if name == "Voxserve":
        from voxserve.service import Voxserve

        return Voxserve
    if name in ("Settings", "load_settings"):
        from voxserve import config

        return getattr(config, name)
    raise AttributeError(f"module 'voxserve' has no attribute {name!r}")
