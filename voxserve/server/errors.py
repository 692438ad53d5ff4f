"""The one table from domain errors to HTTP statuses (OpenAI's error shape) and WebSocket close codes."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
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


# domain error -> (HTTP status, OpenAI error type, WebSocket close code)
_TABLE: list[tuple[type[VoxserveError], int, str, int]] = [
    (ModelUnavailable, 404, "invalid_request_error", 1008),
    (Unsupported, 400, "invalid_request_error", 1003),
    (InvalidInput, 400, "invalid_request_error", 1003),
    (Overloaded, 503, "server_error", 1013),
    (Cancelled, 499, "invalid_request_error", 1000),
    (BackendError, 500, "server_error", 1011),
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


def close_code(exc: BaseException) -> int:
    """The WebSocket close code for an error that ends a session."""
    for kind, _, _, code in _TABLE:
        if isinstance(exc, kind):
            return code
    return 1011


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
