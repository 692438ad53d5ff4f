"""Lossless JSON records of the result types: a frozen dataclass -> plain JSON values -> the same dataclass.

Jobs keep their results as records (``Transcript`` with every field, ``speech_samples`` included), so what a
job returns later is exactly what the pipeline produced, in any response format; the OpenAI wire formats in
:mod:`voxserve.formats` are views of a result and are never parsed back.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")


def to_record(value: Any) -> Any:
    """A dataclass (nested dataclasses, tuples, enums, bytes, scalars) as JSON values: dicts, lists, scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_record(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (bytes, bytearray)):
        return list(value)  # as OpenAI writes a token's bytes
    if isinstance(value, (tuple, list)):
        return [to_record(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_record(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"{type(value).__name__} has no JSON record")


def from_record(cls: type[T], record: Any) -> T:
    """Rebuild a ``cls`` instance from :func:`to_record` output, following the field annotations.

    Raises:
        TypeError: the record does not have the shape of ``cls``.
    """
    return typing.cast(T, _build(cls, record))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _build(hint: Any, value: Any) -> Any:
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            raise TypeError(f"{hint.__name__} record must be an object, not {type(value).__name__}")
        hints = _hints(hint)
        names = {f.name for f in dataclasses.fields(hint) if f.init}
        return hint(**{k: _build(hints[k], v) for k, v in value.items() if k in names})
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in get_args(hint) if a is not type(None)]
        return _build(options[0], value) if len(options) == 1 else value
    if origin is tuple:
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v) for v in value)
        return tuple(_build(a, v) for a, v in zip(args, value, strict=True))
    if origin is dict:
        return dict(value)
    if origin is typing.Literal:
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if hint is bytes:
        return bytes(value)
    if hint is float and isinstance(value, int):
        return float(value)
    return value
