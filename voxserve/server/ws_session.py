"""The life cycle shared by the Realtime sockets (transcription and conversation sessions).

A session reads frames in one task, queues its events to the client in a bounded outbox written by another
task, and closes the documented way (:class:`~voxserve.server.errors.Close`): ``BEHIND_REAL_TIME`` when the
client is too far behind real time, ``TOO_MANY_INVALID`` after :data:`MAX_ERRORS` bad messages,
``NOT_READING_EVENTS`` when the client stops reading, ``IDLE`` when idle (:mod:`voxserve.server.ws_watch`).
Subclasses say what a session opens (:meth:`RealtimeSession._open`), what a frame or an event does
(:meth:`_on_bytes`, :meth:`_handle`) and what to release at the end (:meth:`_shutdown`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from voxserve.errors import InvalidInput, Overloaded, VoxserveError
from voxserve.server.context import ServerContext
from voxserve.server.errors import Close
from voxserve.server.realtime_protocol import error_event, parse_message
from voxserve.server.ws_watch import SessionWatch, close_socket, drain

log = logging.getLogger(__name__)

MAX_ERRORS = 50
"""Bad messages a session may send before it is closed (:attr:`Close.TOO_MANY_INVALID`)."""
OUTBOX = 512
"""Events queued for a client before it counts as not reading."""


class RealtimeSession:
    """One client's Realtime session: reader, bounded outbox, writer, timeouts and close codes."""

    kind = "realtime session"

    def __init__(self, ws: WebSocket, ctx: ServerContext) -> None:
        self.ws = ws
        self.ctx = ctx
        self.id = f"sess_{uuid.uuid4().hex[:20]}"
        self.outbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(OUTBOX)
        self.errors = 0
        self._closing: Close | None = None
        self._reader: asyncio.Task[None] | None = None
        self.watch = SessionWatch(ctx.settings.server.ws_idle_timeout_s, ctx.settings.server.ws_send_timeout_s)

    # ------------------------------------------------------------------------------ what subclasses say

    def _open(self) -> None:
        """Start the session's streams and send ``session.created``."""
        raise NotImplementedError

    def _on_bytes(self, data: bytes) -> None:
        """A binary frame (raw audio of the session's input format)."""
        raise NotImplementedError

    def _handle(self, event: dict[str, Any]) -> None:
        """A parsed client event; a ``VoxserveError`` becomes an ``error`` event for the client."""
        raise NotImplementedError

    async def _shutdown(self) -> None:
        """Stop the session's streams and tasks (the outbox is drained afterwards)."""

    # ------------------------------------------------------------------------------------- life cycle

    async def run(self) -> None:
        """Serve the session until the client leaves or is closed."""
        writer = asyncio.ensure_future(self._write())
        watcher = asyncio.ensure_future(self.watch.run(self._expire))
        try:
            self._open()
            self._reader = asyncio.ensure_future(self._read())
            await asyncio.gather(self._reader, return_exceptions=True)
        finally:
            watcher.cancel()
            await self._shutdown()
            await drain(self.outbox, writer)  # the last error event goes out before the close frame
            await asyncio.gather(writer, watcher, return_exceptions=True)
            if self.ws.application_state == WebSocketState.CONNECTED:
                await close_socket(self.ws, self._closing or Close.NORMAL)

    async def _read(self) -> None:
        while self._closing is None:
            message = await self.watch.receive(self.ws)
            if message is None:
                return
            event_id = None
            try:
                if message.get("bytes") is not None:
                    self._on_bytes(message["bytes"])
                elif message.get("text") is not None:
                    event = parse_message(message["text"])
                    event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
                    self._handle(event)
            except VoxserveError as exc:
                self._report(exc, event_id)
            except Exception:  # noqa: BLE001 - a defect: logged, told, closed (internal error), never a silent close
                log.exception("%s %s: unexpected error handling a client message", self.kind, self.id)
                self.send(error_event(VoxserveError("internal error handling the message", code="internal_error"),
                                      event_id))
                self.close(Close.INTERNAL_ERROR)

    def _report(self, exc: VoxserveError, event_id: str | None) -> None:
        self.errors += 1
        self.send(error_event(exc, event_id))
        if isinstance(exc, Overloaded):
            self.close(Close.BEHIND_REAL_TIME)
        elif self.errors > MAX_ERRORS:
            self.close(Close.TOO_MANY_INVALID)

    def _expire(self, end: Close) -> None:
        """A timeout of :class:`SessionWatch` passed: say why (when the client still reads), then close."""
        if end is Close.IDLE:
            idle = self.watch.idle_timeout_s
            self.send(error_event(InvalidInput(f"no message for {idle:g} s; closing", code="idle_timeout")))
        self.close(end)

    # ---------------------------------------------------------------------------------------- writing

    def send(self, event: dict[str, Any], *, droppable: bool = False) -> None:
        """Queue an event for the client. When the outbox is full a ``droppable`` event (a partial) is dropped
        and counted; any other closes the session (not reading) rather than buffer for a client that stopped reading."""
        if self._closing is not None:
            return
        if self.outbox.full():
            if droppable:
                self.ctx.metrics.live_dropped_events.inc()
                return
            self.close(Close.NOT_READING_EVENTS)
            return
        self.outbox.put_nowait(event)

    def close(self, end: Close) -> None:
        """Close the session after what is already queued."""
        if self._closing is None:
            self._closing = end
            log.info("closing %s %s: %d %s", self.kind, self.id, end.code, end.reason)
            if self._reader is not None:
                self._reader.cancel()

    async def _write(self) -> None:
        while True:
            event = await self.outbox.get()
            if event is None:
                return
            try:
                with self.watch.sending():
                    await self.ws.send_text(json.dumps(event, ensure_ascii=False))
            except (WebSocketDisconnect, RuntimeError):
                self.close(Close.CLIENT_GONE)
                return


async def run_counted(session: RealtimeSession, sessions: set[Any], gauge: Any) -> None:
    """Run a session while it is in ``sessions`` (the server's admission count) and ``gauge`` (its metric)."""
    sessions.add(session)
    gauge.set(len(sessions))
    try:
        await session.run()
    finally:
        sessions.discard(session)
        gauge.set(len(sessions))
