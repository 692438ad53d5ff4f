"""Input checks at the backend boundary, shared by the real backends and their fakes.

A model runtime given malformed input does not fail cleanly: Whisper turns NaN samples into an empty
transcript with a log-probability of -inf, Silero and the segmentation model into made-up probabilities,
CAM++ into a NaN embedding, Piper's decoder into NaN audio or a raw ONNX Runtime error, llama.cpp into an
unbounded reply for ``max_tokens=0``. Every backend (and every fake, so that tests see the same behaviour)
runs these checks before any model call and raises :class:`~voxserve.errors.InvalidInput` instead. The
contract tests in ``tests/contract`` hold each backend and its fake to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from voxserve.errors import InvalidInput

CHAT_ROLES = ("system", "user", "assistant")


def check_audio(audio: Any, what: str = "audio", *, allow_empty: bool = False) -> None:
    """Raise :class:`InvalidInput` unless ``audio`` is a 1-D array of finite floating-point samples (and not
    empty, unless ``allow_empty``). Integer PCM is refused: it is not scaled to [-1, 1]."""
    if not isinstance(audio, np.ndarray):
        raise InvalidInput(f"{what} must be a numpy array of samples, not {type(audio).__name__}", param="audio",
                           code="invalid_audio")
    if audio.ndim != 1:
        raise InvalidInput(f"{what} must be 1-D (mono samples), not of shape {audio.shape}", param="audio",
                           code="invalid_audio")
    if not np.issubdtype(audio.dtype, np.floating):
        raise InvalidInput(f"{what} must hold float samples in [-1, 1], not {audio.dtype}", param="audio",
                           code="invalid_audio")
    if not len(audio):
        if allow_empty:
            return
        raise InvalidInput(f"{what} has no samples", param="audio", code="empty_audio")
    if not np.isfinite(audio).all():
        raise InvalidInput(f"{what} has NaN or infinite samples", param="audio", code="invalid_audio")


def check_batch_audio(audios: Sequence[Any], what: str = "audio", *, allow_empty: bool = False) -> None:
    """:func:`check_audio` on every item of a batch (the message names the bad item)."""
    for i, audio in enumerate(audios):
        check_audio(audio, f"{what} {i}" if len(audios) > 1 else what, allow_empty=allow_empty)


def check_frames(window: Any, channels: int, what: str = "decoder window") -> None:
    """Raise :class:`InvalidInput` unless ``window`` is a (channels, frames) array of finite floats."""
    if not isinstance(window, np.ndarray) or window.ndim != 2 or window.shape[0] != channels:
        shape = window.shape if isinstance(window, np.ndarray) else type(window).__name__
        raise InvalidInput(f"{what} must be of shape ({channels}, frames), not {shape}", param="frames")
    if not np.issubdtype(window.dtype, np.floating) or not np.isfinite(window).all():
        raise InvalidInput(f"{what} must hold finite float values", param="frames")


def check_chat(messages: Sequence[Any], max_tokens: int, temperature: float) -> None:
    """Raise :class:`InvalidInput` for a chat request a chat model cannot answer as asked: no messages, a
    message that is not ``{"role": system|user|assistant, "content": str}``, ``max_tokens`` below 1 (which
    llama.cpp reads as "no limit") or a temperature outside [0, 2]."""
    if not messages:
        raise InvalidInput("the chat has no messages", param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in CHAT_ROLES \
                or not isinstance(message.get("content"), str):
            raise InvalidInput(f"message {i} must be {{'role': {' | '.join(CHAT_ROLES)}, 'content': str}}",
                               param="messages")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInput(f"max_tokens must be at least 1, not {max_tokens!r}", param="max_tokens")
    if not 0.0 <= temperature <= 2.0:
        raise InvalidInput(f"temperature must be between 0 and 2, not {temperature}", param="temperature")
