"""Domain errors shared by every layer.

Backends and pipelines raise these; the transport layer (CLI, HTTP, WebSocket) maps them to exit codes,
HTTP statuses and close codes in exactly one place each.
"""

from __future__ import annotations


class VoxserveError(Exception):
    """Base class of all voxserve errors.

    Attributes:
        param: the request field that caused the error, when there is one (e.g. ``"file"``).
        code: a short machine-readable code (e.g. ``"invalid_audio"``).
    """

    code = "voxserve_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class InvalidInput(VoxserveError):
    """The caller sent something we cannot use: corrupt or empty audio, a bad option value."""

    code = "invalid_input"


class Unsupported(VoxserveError):
    """A valid request for something this model or build does not do (e.g. translate on an .en model)."""

    code = "unsupported"


class ModelUnavailable(VoxserveError):
    """The named model is unknown or could not be loaded."""

    code = "model_not_found"


class Overloaded(VoxserveError):
    """Admission control refused new work; the caller should retry after ``retry_after_s`` seconds."""

    code = "overloaded"

    def __init__(self, message: str, *, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BackendError(VoxserveError):
    """A model runtime failed. ``retryable`` says whether running the same work again may succeed."""

    code = "backend_error"

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class Cancelled(VoxserveError):
    """The work was cancelled by its owner (a job deleted, a client gone)."""

    code = "cancelled"
