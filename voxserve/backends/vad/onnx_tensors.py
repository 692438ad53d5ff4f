"""The constant tensors of an ONNX file, read straight from its protobuf encoding.

The ``onnx`` package would do this too, but importing it costs 0.6-0.8 s of CPU (measured on the 2-core
EPYC), more than the work it would serve: a long file's VAD weights are read once per process, a live
stream's once per server. Only what a model's weights need is decoded: each graph's initializers and the
``value`` of its ``Constant`` nodes, in the graph itself and in every subgraph its nodes carry (an ``If``
node's branches). Each graph is returned on its own, so a caller picks the branch it wants by what it holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

_DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 11: np.float64}
"""ONNX ``TensorProto.DataType`` codes this reader decodes."""

# Field numbers of the ONNX protobuf messages (onnx/onnx.proto).
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_OUTPUT, _NODE_OP_TYPE, _NODE_ATTRIBUTE = 2, 4, 5
_ATTR_NAME, _ATTR_TENSOR, _ATTR_GRAPH, _ATTR_GRAPHS = 1, 5, 6, 11
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_FLOAT_DATA, _TENSOR_INT64_DATA = 1, 2, 4, 7
_TENSOR_NAME, _TENSOR_RAW_DATA = 8, 9
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


class OnnxFormatError(ValueError):
    """The file is not an ONNX model this reader understands."""


def graph_constants(path: str | Path) -> list[dict[str, np.ndarray]]:
    """Every graph of the model at ``path`` (the main graph first, then its subgraphs depth first), each as
    a mapping from a constant's name to its value. Names are the graph's own (inlined branches prefix theirs).

    Raises:
        OSError: the file cannot be read.
        OnnxFormatError: it is not a well-formed ONNX model, or a constant has a type this reader lacks.
    """
    data = memoryview(Path(path).read_bytes())
    graphs: list[dict[str, np.ndarray]] = []
    for field, _, value in _fields(data):
        if field == _MODEL_GRAPH:
            _graph(_as_bytes(value), graphs)
    if not graphs:
        raise OnnxFormatError(f"{path}: no graph in the file")
    return graphs


def _graph(buf: memoryview, out: list[dict[str, np.ndarray]]) -> None:
    constants: dict[str, np.ndarray] = {}
    out.append(constants)
    for field, _, value in _fields(buf):
        if field == _GRAPH_INITIALIZER:
            name, array = _tensor(_as_bytes(value))
            constants[name] = array
        elif field == _GRAPH_NODE:
            _node(_as_bytes(value), constants, out)


def _node(buf: memoryview, constants: dict[str, np.ndarray], out: list[dict[str, np.ndarray]]) -> None:
    outputs: list[str] = []
    op_type = ""
    attributes: list[memoryview] = []
    for field, _, value in _fields(buf):
        if field == _NODE_OUTPUT:
            outputs.append(_text(value))
        elif field == _NODE_OP_TYPE:
            op_type = _text(value)
        elif field == _NODE_ATTRIBUTE:
            attributes.append(_as_bytes(value))
    for attribute in attributes:
        name, tensor = "", None
        for field, _, value in _fields(attribute):
            if field == _ATTR_NAME:
                name = _text(value)
            elif field == _ATTR_TENSOR:
                tensor = _as_bytes(value)
            elif field in (_ATTR_GRAPH, _ATTR_GRAPHS):
                _graph(_as_bytes(value), out)
        if op_type == "Constant" and name == "value" and tensor is not None and outputs:
            constants[outputs[0]] = _tensor(tensor)[1]


def _tensor(buf: memoryview) -> tuple[str, np.ndarray]:
    dims: list[int] = []
    dtype_code, name = 0, ""
    raw: memoryview | None = None
    floats: list[np.ndarray] = []
    ints: list[int] = []
    for field, wire, value in _fields(buf):
        if field == _TENSOR_DIMS:
            dims.extend(_varints(value) if wire == _BYTES else [_signed(value)])
        elif field == _TENSOR_DATA_TYPE:
            dtype_code = _signed(value)
        elif field == _TENSOR_NAME:
            name = _text(value)
        elif field == _TENSOR_RAW_DATA:
            raw = _as_bytes(value)
        elif field == _TENSOR_FLOAT_DATA:
            floats.append(np.frombuffer(_as_bytes(value), "<f4"))
        elif field == _TENSOR_INT64_DATA:
            ints.extend(_varints(value) if wire == _BYTES else [_signed(value)])
    dtype = _DTYPES.get(dtype_code)
    if dtype is None:
        raise OnnxFormatError(f"tensor {name!r}: data type {dtype_code} is not supported")
    if raw is not None:
        array = np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).astype(dtype)
    elif floats:
        array = np.concatenate(floats).astype(dtype)
    else:
        array = np.asarray(ints, dtype=dtype)
    size = int(np.prod(dims)) if dims else 1
    if array.size != size:
        raise OnnxFormatError(f"tensor {name!r}: {array.size} values for shape {tuple(dims)}")
    return name, array.reshape(dims)


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field of one protobuf message."""
    i, end = 0, len(buf)
    while i < end:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == _VARINT:
            value, i = _varint(buf, i)
        elif wire == _BYTES:
            length, i = _varint(buf, i)
            value, i = buf[i : i + length], i + length
        elif wire == _FIXED64:
            value, i = buf[i : i + 8], i + 8
        elif wire == _FIXED32:
            value, i = buf[i : i + 4], i + 4
        else:
            raise OnnxFormatError(f"unsupported protobuf wire type {wire}")
        if i > end:
            raise OnnxFormatError("truncated protobuf message")
        yield field, wire, value


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if i >= len(buf):
            raise OnnxFormatError("truncated varint")
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def _varints(buf: int | memoryview) -> list[int]:
    """A packed repeated integer field (two's complement 64-bit, as int64 is encoded)."""
    data = _as_bytes(buf)
    out, i = [], 0
    while i < len(data):
        v, i = _varint(data, i)
        out.append(_signed(v))
    return out


def _signed(value: int | memoryview) -> int:
    """A varint read as int64 (negative values are encoded in ten bytes, two's complement)."""
    if isinstance(value, memoryview):
        raise OnnxFormatError("expected a varint field")
    return value - (1 << 64) if value >= 1 << 63 else value


def _as_bytes(value: int | memoryview) -> memoryview:
    if not isinstance(value, memoryview):
        raise OnnxFormatError("expected a length-delimited field")
    return value


def _text(value: int | memoryview) -> str:
    return bytes(_as_bytes(value)).decode("utf-8", "replace")
