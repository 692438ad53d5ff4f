"""API keys, request-body limits and per-client concurrency limits.

Keys are compared in constant time and never logged; a client is identified by a short hash of its key
(or by its address when no keys are configured).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voxserve.server.errors import HttpError, error_body


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server private to this machine."""
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ApiKeys:
    """Checks ``Authorization: Bearer <key>`` (or ``?api_key=`` for browsers' WebSockets)."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = tuple(k.encode() for k in keys if k)

    @property
    def enabled(self) -> bool:
        """Whether any key is configured."""
        return bool(self._keys)

    def client_id(self, headers: dict[str, str], query: dict[str, str], peer: str) -> str:
        """The caller's identity for limits; raises 401 when keys are configured and none matches."""
        if not self._keys:
            return f"addr:{peer}"
        token = _bearer(headers.get("authorization", "")) or query.get("api_key", "")
        supplied = token.encode()
        if not token or not any(hmac.compare_digest(supplied, k) for k in self._keys):
            message = "missing API key" if not token else "invalid API key"
            raise HttpError(401, f"{message}: send 'Authorization: Bearer <key>'", code="invalid_api_key")
        return "key:" + hashlib.sha256(supplied).hexdigest()[:12]


def _bearer(value: str) -> str:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class ConcurrencyLimiter:
    """At most ``limit`` requests in progress per client (429 beyond), and ``total`` overall (503 beyond)."""

    def __init__(self, limit: int, total: int) -> None:
        self.limit = limit
        self.total = total
        self._counts: dict[str, int] = defaultdict(int)
        self._inflight = 0

    @property
    def inflight(self) -> int:
        """Requests in progress."""
        return self._inflight

    @contextmanager
    def hold(self, client: str) -> Iterator[None]:
        """Count one request of ``client`` for the duration of the block (event-loop only; no locking)."""
        if self._counts[client] >= self.limit:
            raise HttpError(429, f"too many concurrent requests (limit {self.limit})", code="rate_limit_exceeded",
                            type="rate_limit_error", retry_after_s=1.0)
        if self._inflight >= self.total:
            raise HttpError(503, "server busy; retry later", type="server_error", code="overloaded", retry_after_s=2.0)
        self._counts[client] += 1
        self._inflight += 1
        try:
            yield
        finally:
            self._counts[client] -= 1
            self._inflight -= 1
            if not self._counts[client]:
                del self._counts[client]


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes`` with 413, counting chunked uploads as they
    stream in (nothing over the limit is ever buffered)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self._error()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except HttpError as exc:
            if exc.status != 413 or started:
                raise
            await self._reject(send)

    def _error(self) -> HttpError:
        mb = self.max_bytes / 1_000_000
        return HttpError(413, f"request body is larger than {mb:g} MB", code="file_too_large", param="file")

    async def _reject(self, send: Send) -> None:
        body = json.dumps(error_body(self._error())).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


class QueryKeyToHeader:
    """ASGI middleware: a key given as ``?api_key=`` (browsers cannot set WebSocket headers) becomes an
    ``Authorization`` header and leaves the query string. The scope is changed in place, before anything logs
    it: uvicorn's access log prints the query string of the very same scope, so it never sees the key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = scope.get("query_string", b"") if scope["type"] in ("http", "websocket") else b""
        if query:
            pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
            keys = [v for k, v in pairs if k == "api_key"]
            if keys:
                scope["query_string"] = urlencode([(k, v) for k, v in pairs if k != "api_key"]).encode("latin-1")
                headers = list(scope.get("headers", []))
                if keys[0] and not any(name.lower() == b"authorization" for name, _ in headers):
                    headers.append((b"authorization", f"Bearer {keys[0]}".encode("latin-1", "replace")))
                scope["headers"] = headers
        await self.app(scope, receive, send)


_SECRETS = re.compile(
    r"(?i)(api_key=|authorization:\s*\w+\s+|bearer\s+|openai-insecure-api-key\.)[^\s&\"',;]+"
)


class RedactSecrets(logging.Filter):
    """A logging filter that blanks API keys in a record's message (``api_key=``, ``Authorization:`` and
    ``Bearer`` values, the browser subprotocol): the WebSocket library's debug log prints whole handshakes."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's own problem
            return True
        if _SECRETS.search(message):
            record.msg, record.args = _SECRETS.sub(r"\1***", message), None
        return True


def redact_server_logs(names: tuple[str, ...] = ("uvicorn", "uvicorn.error", "uvicorn.access")) -> None:
    """Install :class:`RedactSecrets` on the server's loggers (once; after uvicorn configured them)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())


def header_dict(scope_headers: Any) -> dict[str, str]:
    """Lower-case header names to values."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope_headers}
