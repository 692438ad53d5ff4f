"""The one table from domain errors to HTTP statuses (OpenAI's error shape) and WebSocket close codes, and the
one table of the ways a WebSocket session ends (:class:`Close`): no close code is written anywhere else."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any

from starlette.responses import JSONResponse

from voxserve.errors import (
    BackendError,
    Cancelled,
    InvalidInput,
    ModelUnavailable,
    Overloaded,
    Unsupported,
    VoxserveError,
)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class HttpError(Exception):
    """An error raised by the transport itself (authentication, limits, unknown routes).

    Not frozen: raising an exception sets its ``__traceback__``.
    """

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    retry_after_s: float | None = None


class CloseCode(IntEnum):
    """Every WebSocket close code the server uses (RFC 6455, section 7.4.1)."""

    NORMAL = 1000
    GOING_AWAY = 1001
    UNSUPPORTED_DATA = 1003
    CLIENT_GONE = 1006  # noted when a send fails; never sent (there is no one to send it to)
    POLICY = 1008
    INTERNAL = 1011
    TRY_AGAIN = 1013


class Close(Enum):
    """Every way a WebSocket session ends: its close code and the reason sent with it."""

    _value_: tuple[CloseCode, str]

    NORMAL = (CloseCode.NORMAL, "")
    IDLE = (CloseCode.GOING_AWAY, "idle timeout")
    UNAUTHORIZED = (CloseCode.POLICY, "unauthorized")
    UNSUPPORTED_INTENT = (CloseCode.POLICY, "unsupported intent")
    TOO_MANY_INVALID = (CloseCode.POLICY, "too many invalid messages")
    NOT_READING = (CloseCode.POLICY, "client is not reading")  # a send outlived the send timeout
    NOT_READING_EVENTS = (CloseCode.POLICY, "client is not reading events")  # the outbox filled up
    CLIENT_GONE = (CloseCode.CLIENT_GONE, "client gone")
    INTERNAL_ERROR = (CloseCode.INTERNAL, "internal error")
    SYNTHESIS_UNAVAILABLE = (CloseCode.INTERNAL, "synthesis unavailable")
    TRY_AGAIN_LATER = (CloseCode.TRY_AGAIN, "try again later")
    BEHIND_REAL_TIME = (CloseCode.TRY_AGAIN, "too far behind real time")
    TOO_MANY_SYNTHESIS_STREAMS = (CloseCode.TRY_AGAIN, "too many synthesis streams")

    @property
    def code(self) -> CloseCode:
        """The close code."""
        return self.value[0]

    @property
    def reason(self) -> str:
        """The reason sent with the close frame."""
        return self.value[1]


# domain error -> (HTTP status, OpenAI error type, WebSocket close code)
_TABLE: list[tuple[type[VoxserveError], int, str, CloseCode]] = [
    (ModelUnavailable, 404, "invalid_request_error", CloseCode.POLICY),
    (Unsupported, 400, "invalid_request_error", CloseCode.UNSUPPORTED_DATA),
    (InvalidInput, 400, "invalid_request_error", CloseCode.UNSUPPORTED_DATA),
    (Overloaded, 503, "server_error", CloseCode.TRY_AGAIN),
    (Cancelled, 499, "invalid_request_error", CloseCode.NORMAL),
    (BackendError, 500, "server_error", CloseCode.INTERNAL),
]
_INPUT_TOO_LARGE = {"audio_too_long": 413, "file_too_large": 413}


def classify(exc: BaseException) -> HttpError:
    """The HTTP view of any exception (unknown ones are 500s without internal details)."""
    if isinstance(exc, HttpError):
        return exc
    if isinstance(exc, VoxserveError):
        for kind, status, err_type, _ in _TABLE:
            if isinstance(exc, kind):
                status = _INPUT_TOO_LARGE.get(exc.code, status)
                retry = exc.retry_after_s if isinstance(exc, Overloaded) else None
                return HttpError(status, exc.message, err_type, exc.code, exc.param, retry)
    log.exception("unexpected error", exc_info=exc)
    return HttpError(500, "internal error; see the server log", "server_error", "internal_error")


def close_code(exc: BaseException) -> CloseCode:
    """The WebSocket close code for an error that ends a session."""
    for kind, _, _, code in _TABLE:
        if isinstance(exc, kind):
            return code
    return CloseCode.INTERNAL


def error_body(err: HttpError) -> dict[str, Any]:
    """OpenAI's error object."""
    return {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}


def error_response(exc: BaseException) -> JSONResponse:
    """A JSON error response (with Retry-After when the client should come back later)."""
    err = classify(exc)
    headers = {}
    if err.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, math.ceil(err.retry_after_s)))
    return JSONResponse(error_body(err), status_code=err.status, headers=headers)
