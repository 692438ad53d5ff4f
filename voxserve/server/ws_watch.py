"""Idle and send timeouts of one WebSocket session (every socket: transcription, conversation, speech).

* Idle: no message in either direction for ``server.ws_idle_timeout_s`` -> an ``error`` event with code
  ``idle_timeout`` and :attr:`Close.IDLE` (going away). A session that streams audio or is being sent events
  is never idle.
* Not reading: one message to the client not accepted within ``server.ws_send_timeout_s`` (the client stopped
  reading and the socket buffers are full) -> :attr:`Close.NOT_READING` (policy). The session's streams,
  synthesis slots and memory are freed at once; only the TCP connection itself lingers until the peer goes away.

Transport only: the sessions call :meth:`SessionWatch.touch` on every message and wrap their sends in
:meth:`SessionWatch.sending`; :meth:`SessionWatch.run` calls the session's ``close(end)``. The codes and
reasons are in :class:`voxserve.server.errors.Close`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from voxserve.server.errors import Close

CLOSE_WAIT_S = 2.0
"""How long the final close frame may take to go out (a client that does not read never takes it)."""


class SessionWatch:
    """Tracks a session's last activity and its send in progress; :meth:`run` enforces the timeouts."""

    def __init__(self, idle_timeout_s: float, send_timeout_s: float) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.send_timeout_s = send_timeout_s
        self._last = time.monotonic()
        self._sending_since: float | None = None

    def touch(self) -> None:
        """A message went in or out."""
        self._last = time.monotonic()

    @contextlib.contextmanager
    def sending(self) -> Iterator[None]:
        """Wrap one send to the client (its duration is what the send timeout measures)."""
        self._sending_since = time.monotonic()
        try:
            yield
        finally:
            self._sending_since = None
            self.touch()

    async def receive(self, ws: WebSocket) -> dict[str, Any] | None:
        """The client's next message (activity), or None once the client has gone."""
        try:
            message = await ws.receive()
        except (WebSocketDisconnect, RuntimeError):
            return None
        if message["type"] == "websocket.disconnect":
            return None
        self.touch()
        return dict(message)

    def expired(self, now: float | None = None) -> Close | None:
        """How the session ends when a timeout has passed, else None."""
        now = time.monotonic() if now is None else now
        since = self._sending_since
        if self.send_timeout_s > 0 and since is not None and now - since > self.send_timeout_s:
            return Close.NOT_READING
        if self.idle_timeout_s > 0 and since is None and now - self._last > self.idle_timeout_s:
            return Close.IDLE
        return None

    async def run(self, close: Callable[[Close], Any]) -> None:
        """Check the timeouts a few times per period until one passes, then ``close(end)``."""
        periods = [t for t in (self.idle_timeout_s, self.send_timeout_s) if t > 0]
        if not periods:
            return
        step = max(0.05, min(1.0, min(periods) / 4))
        while True:
            found = self.expired()
            if found is not None:
                break
            await asyncio.sleep(step)
        result = close(found)
        if asyncio.iscoroutine(result):
            await result


async def close_socket(ws: WebSocket, end: Close) -> None:
    """Send the close frame if the client takes it within :data:`CLOSE_WAIT_S` (one that stopped reading
    never does: the handler returns anyway and the server drops the connection when the peer goes)."""
    try:
        await asyncio.wait_for(ws.close(end.code, end.reason), CLOSE_WAIT_S)
    except (TimeoutError, RuntimeError, WebSocketDisconnect):
        pass  # the client left first, or will never read the close frame


async def drain(outbox: asyncio.Queue[Any], writer: asyncio.Future[Any]) -> None:
    """Let a session's writer send what is already queued (at most :data:`CLOSE_WAIT_S`), then stop it: the
    last ``error`` event goes out before the close frame, and a client that does not read holds nothing up."""
    if not writer.done():
        try:
            outbox.put_nowait(None)  # the writer's end marker
        except asyncio.QueueFull:
            pass
        else:
            await asyncio.wait({writer}, timeout=CLOSE_WAIT_S)
    writer.cancel()
