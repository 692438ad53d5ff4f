"""Checks of per-request decoding options against what a Whisper-like model can do, from its
:class:`~voxserve.backends.base.AsrModelInfo` alone (so a process that holds no model, such as the head of a
Ray cluster, checks requests exactly as the model's own process would)."""

from __future__ import annotations

from voxserve.backends.base import AsrModelInfo, DecodeOptions
from voxserve.errors import InvalidInput, Unsupported


def check_decode_options(info: AsrModelInfo, options: DecodeOptions) -> None:
    """Raise :class:`InvalidInput` or :class:`Unsupported` when ``options`` cannot run on the model ``info``
    describes (English-only models neither translate nor take another language)."""
    options.validate()
    if not info.multilingual:
        if options.task == "translate":
            raise Unsupported(f"{info.name} is English-only and cannot translate", param="task")
        if options.language not in (None, "en"):
            raise Unsupported(f"{info.name} is English-only", param="language")
    elif options.language is not None and options.language not in info.languages:
        raise InvalidInput(f"unknown language code {options.language!r}", param="language")
    unknown = [code for code in options.allowed_languages if code not in info.languages]
    if unknown:
        raise InvalidInput(f"unknown language code {unknown[0]!r} in allowed_languages", param="allowed_languages")
