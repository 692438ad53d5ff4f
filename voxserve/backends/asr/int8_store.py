"""An int8 copy of a CTranslate2 model saved in float16, so that a CPU load reads its weights instead of
quantizing them at every start.

CTranslate2 loads a float model for ``compute_type="int8"`` by quantizing each linear weight (every rank-2
variable named ``.../weight``: projections, feed-forward layers, the embeddings) row by row: ``scale = 127 /
max|row|``, ``round-half-even(row * scale)``. For the embedded whisper-base (float16, 145 MB) that took 0.28-0.44
s of every process's start on the 2-core EPYC, on the critical path before the first batch; the copy loads in
0.03 s. The copy holds exactly what CTranslate2 computes (tested: the same encoder output, bit for bit, and the
same tokens and scores); everything else (convolutions, norms, biases) stays as saved.

The ``model.bin`` format (version 6): a version, the spec's name and revision, then each variable (name, rank,
dims, type, byte count, bytes) and each alias (name, target).
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxserve.errors import ModelUnavailable

MODEL_BIN = "model.bin"
FORMAT_VERSION = 6
_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
_CODES = {np.dtype(t): code for code, t in _DTYPES.items()}


@dataclass
class ModelFile:
    """The contents of a CTranslate2 ``model.bin``."""

    spec: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]


def read_model(path: Path) -> ModelFile:
    """Parse a ``model.bin`` (arrays are views of the file's bytes, read-only).

    Raises:
        ModelUnavailable: not a ``model.bin`` of format version 6 with known variable types.
    """
    data = path.read_bytes()
    pos = 0

    def take(fmt: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return int(value)

    def text() -> str:
        nonlocal pos
        size = take("<H")
        raw = data[pos : pos + size]
        pos += size
        return raw.rstrip(b"\0").decode("utf-8")

    try:
        version = take("<I")
        if version != FORMAT_VERSION:
            raise ModelUnavailable(f"{path}: model format {version}, not {FORMAT_VERSION}")
        spec, revision = text(), take("<I")
        variables: dict[str, np.ndarray] = {}
        for _ in range(take("<I")):
            name = text()
            dims = [take("<I") for _ in range(take("<B"))]
            dtype = np.dtype(_DTYPES[take("<B")])
            size = take("<I")
            variables[name] = np.frombuffer(data, dtype, size // dtype.itemsize, pos).reshape(dims)
            pos += size
        aliases = {text(): text() for _ in range(take("<I"))}
    except (struct.error, KeyError, ValueError, UnicodeDecodeError) as exc:
        raise ModelUnavailable(f"{path} is not a CTranslate2 model file ({exc!r})") from exc
    if pos != len(data):
        raise ModelUnavailable(f"{path}: {len(data) - pos} bytes after the model")
    return ModelFile(spec, revision, variables, aliases)


def write_model(path: Path, model: ModelFile) -> None:
    """Write ``model`` in the ``model.bin`` format."""

    def text(value: str) -> bytes:
        raw = value.encode("utf-8") + b"\0"
        return struct.pack("<H", len(raw)) + raw

    with open(path, "wb") as out:
        out.write(struct.pack("<I", FORMAT_VERSION) + text(model.spec) + struct.pack("<I", model.revision))
        out.write(struct.pack("<I", len(model.variables)))
        for name, value in model.variables.items():
            raw = np.ascontiguousarray(value).tobytes()
            out.write(text(name) + struct.pack("<B", value.ndim) + struct.pack(f"<{value.ndim}I", *value.shape))
            out.write(struct.pack("<BI", _CODES[value.dtype], len(raw)) + raw)
        out.write(struct.pack("<I", len(model.aliases)))
        for alias, target in model.aliases.items():
            out.write(text(alias) + text(target))


def quantize_int8(model: ModelFile) -> ModelFile:
    """``model`` with every float rank-2 ``.../weight`` in int8 beside its per-row ``..._scale``, as CTranslate2
    quantizes it when loading for ``compute_type="int8"``."""
    variables: dict[str, np.ndarray] = {}
    for name, value in model.variables.items():
        if value.ndim == 2 and name.endswith("/weight") and value.dtype.kind == "f":
            rows = value.astype(np.float32)
            amax = np.abs(rows).max(axis=1)
            amax[amax == 0] = 127.0
            scale = (np.float32(127.0) / amax).astype(np.float32)
            variables[name] = np.rint(rows * scale[:, None]).astype(np.int8)
            variables[f"{name}_scale"] = scale
        else:
            variables[name] = value
    return ModelFile(model.spec, model.revision, variables, dict(model.aliases))


def int8_copy(source: Path, target: Path) -> Path:
    """``target``, an int8 copy of the model directory ``source`` (made once, then reused while ``source``'s
    ``model.bin`` is unchanged); ``source`` itself when its weights are not float16.

    Raises:
        ModelUnavailable: ``source`` has no readable ``model.bin``.
    """
    stamp = _stamp(source / MODEL_BIN)
    if (target / MODEL_BIN).is_file() and _read_stamp(target) == stamp:
        return target
    model = read_model(source / MODEL_BIN)
    if not any(v.dtype == np.float16 and v.ndim == 2 for v in model.variables.values()):
        return source
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        building.chmod(0o755)  # mkdtemp's 0700 would hide the copy from other users sharing the cache
        for item in source.iterdir():
            if item.is_file() and item.name != MODEL_BIN:
                shutil.copyfile(item, building / item.name)
        write_model(building / MODEL_BIN, quantize_int8(model))
        (building / _STAMP).write_text(stamp)
        if _read_stamp(target) != stamp:  # never remove a current copy: another process may be loading it
            shutil.rmtree(target, ignore_errors=True)  # a copy of an older source
            os.replace(building, target)
    except OSError:
        if _read_stamp(target) != stamp:  # not another process's copy of the same source, made meanwhile
            raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


_STAMP = "source.txt"


def _stamp(model_bin: Path) -> str:
    """What identifies the source's weights: its path, size and modification time."""
    info = model_bin.stat()
    return f"{model_bin.resolve()}\n{info.st_size}\n{info.st_mtime_ns}\n"


def _read_stamp(target: Path) -> str | None:
    try:
        return (target / _STAMP).read_text()
    except OSError:
        return None
