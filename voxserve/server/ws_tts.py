"""WebSocket ``/v1/audio/speech/stream``: text pieces in (from an LLM, say), audio chunks out as they are made.

Client events (JSON): ``session.update`` {voice, speed, binary, pronunciations, include, first_segment_wait_ms},
``text.append`` {text}, ``text.flush``
(speak what is buffered even without a sentence end), ``text.done`` (end of this utterance's text) and
``cancel`` (stop the current utterance at once). Server events: ``session.created`` / ``session.updated``
{voice, sample_rate}, ``audio`` {seq, audio (base64 PCM16 little-endian, mono), start_s, duration_s, text}
(or, with ``binary: true``, the PCM16 bytes as a binary frame right after a JSON ``audio`` header without
the ``audio`` field), ``done`` {audio_s, ttfb_ms} when an utterance is finished, ``cancelled`` and ``error``.
With ``include: ["word_timestamps"]`` (voxserve extension) a ``speech.audio.words`` event {words: [{word, start,
end}]} (seconds of the utterance's audio) goes right before the ``audio`` event its words start in.
After ``done`` or ``cancelled`` the next ``text.append`` starts a new utterance on the same socket.

Text deltas (an LLM's tokens as it writes them) are spoken from the first clause that can be said well: audio
starts at the first sentence end, clause end or (12 characters in) comma, without waiting for ``text.done``;
``first_segment_wait_ms`` (voxserve extension, null: off, the default) also cuts the first words at a word end
when no clause has ended that long after the first delta, as the voice agent does (the agent feeds its LLM's
pieces into the same kind of stream). ``ttfb_ms`` in ``done`` counts from the first delta with speech in it.

An utterance whose text starts with ``<speak>`` is SSML: it is spoken from its ``text.done`` on (malformed SSML
is an ``error`` event with ``param: input`` instead of audio).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any

from fastapi import APIRouter
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from voxserve.errors import InvalidInput, Overloaded, VoxserveError
from voxserve.server.context import ServerContext, context
from voxserve.server.errors import Close
from voxserve.server.http_tts import wants_words, words_json
from voxserve.server.realtime_protocol import ProtocolError, error_event, parse_message, server_event
from voxserve.server.ws_realtime import authorize
from voxserve.server.ws_session import MAX_ERRORS
from voxserve.server.ws_watch import SessionWatch, close_socket
from voxserve.streaming.tts import SpeakOptions, TtsStream

log = logging.getLogger(__name__)
router = APIRouter()


@router.websocket("/v1/audio/speech/stream")
async def speech_stream(ws: WebSocket) -> None:
    """Entry point of streaming synthesis sessions."""
    ctx = context(ws)
    if not await authorize(ws, ctx):
        return
    await SpeechSession(ws, ctx).run()


class SpeechSession:
    """One client's synthesis session: a stream per utterance, one at a time."""

    def __init__(self, ws: WebSocket, ctx: ServerContext) -> None:
        self.ws = ws
        self.ctx = ctx
        self.voice: str | None = None
        self.speed = 1.0
        self.binary = False
        self.pronunciations: dict[str, str] = {}
        self.words = False
        self.first_segment_wait_s: float | None = None
        self.stream: TtsStream | None = None
        self.forwarder: asyncio.Task[None] | None = None
        self.errors = 0
        self._send_lock = asyncio.Lock()
        self._closing: Close | None = None
        self._reader: asyncio.Task[None] | None = None
        self.watch = SessionWatch(ctx.settings.server.ws_idle_timeout_s, ctx.settings.server.ws_send_timeout_s)

    async def run(self) -> None:
        """Serve until the client leaves or is closed."""
        watcher = asyncio.ensure_future(self.watch.run(self._expire))
        try:
            info = self.ctx.vox.tts().voice_info(None)
            await self.send(server_event("session.created", voice=info.name, sample_rate=info.sample_rate))
            self._reader = asyncio.ensure_future(self._read())
            try:
                await self._reader
            except asyncio.CancelledError:
                if self._closing is None:  # cancelled from outside (server shutdown), not by a timeout
                    raise
        except VoxserveError as exc:  # no TTS installed, say
            await self.send(error_event(exc))
            self._closing = Close.SYNTHESIS_UNAVAILABLE
        finally:
            watcher.cancel()
            await self._stop_stream(cancel=True)
            if self.ws.application_state == WebSocketState.CONNECTED:
                await close_socket(self.ws, self._closing or Close.NORMAL)

    async def _expire(self, end: Close) -> None:
        """A timeout of :class:`SessionWatch` passed: say why (when the client still reads), then close."""
        if end is Close.IDLE:
            idle = self.watch.idle_timeout_s
            await self.send(error_event(InvalidInput(f"no message for {idle:g} s; closing", code="idle_timeout")))
        self._closing = self._closing or end
        if self._reader is not None:
            self._reader.cancel()

    async def _read(self) -> None:
        while self._closing is None:
            message = await self.watch.receive(self.ws)
            if message is None:
                return
            try:
                if message.get("text") is None:
                    raise ProtocolError("this socket takes JSON text events", code="invalid_event")
                await self._handle(parse_message(message["text"]))
            except Overloaded as exc:
                await self.send(error_event(exc))
                self._closing = Close.TOO_MANY_SYNTHESIS_STREAMS
            except VoxserveError as exc:
                self.errors += 1
                await self.send(error_event(exc))
                if self.errors > MAX_ERRORS:
                    self._closing = Close.TOO_MANY_INVALID
            except Exception:  # noqa: BLE001 - a defect: logged, told, closed (internal error), never a silent close
                log.exception("speech session: unexpected error handling a client message")
                await self.send(error_event(VoxserveError("internal error handling the message", code="internal_error")))
                self._closing = Close.INTERNAL_ERROR

    async def _handle(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "session.update":
            self._update(event)
            info = self.ctx.vox.tts().voice_info(self.voice)
            await self.send(server_event("session.updated", voice=info.name, sample_rate=info.sample_rate))
        elif kind == "text.append":
            text = event.get("text")
            if not isinstance(text, str):
                raise ProtocolError("text.append needs 'text' as a string", code="missing_text", param="text")
            self._current().push_text(text)
        elif kind == "text.flush":
            self._current().flush()
        elif kind == "text.done":
            if self.stream is None:
                raise ProtocolError("no text to finish", code="nothing_to_finish")
            self.stream.end_input()
        elif kind == "cancel":
            await self._stop_stream(cancel=True)
            await self.send(server_event("cancelled"))
        else:
            raise ProtocolError(f"unknown event type {kind!r}", code="unknown_event", param="type")

    def _update(self, event: dict[str, Any]) -> None:
        voice, speed, binary = event.get("voice", self.voice), event.get("speed", self.speed), event.get("binary", self.binary)
        if voice is not None and not isinstance(voice, str):
            raise ProtocolError("voice must be a string", code="invalid_value", param="voice")
        if not isinstance(speed, (int, float)) or isinstance(speed, bool) or not 0.25 <= float(speed) <= 4.0:
            raise ProtocolError("speed must be between 0.25 and 4.0", code="invalid_value", param="speed")
        if not isinstance(binary, bool):
            raise ProtocolError("binary must be true or false", code="invalid_value", param="binary")
        pronunciations = event.get("pronunciations", self.pronunciations)
        if not isinstance(pronunciations, dict):
            raise ProtocolError("pronunciations must be an object of word -> respelling", code="invalid_value",
                                param="pronunciations")
        SpeakOptions(pronunciations=pronunciations).validate()
        wait = _wait_s(event["first_segment_wait_ms"]) if "first_segment_wait_ms" in event else self.first_segment_wait_s
        words = wants_words(event["include"]) if "include" in event else self.words
        self.ctx.vox.tts().voice_info(voice)  # unknown voice -> InvalidInput
        self.words, self.first_segment_wait_s = words, wait
        self.voice, self.speed, self.binary, self.pronunciations = voice, float(speed), binary, pronunciations

    def _current(self) -> TtsStream:
        if self.stream is None or self.stream.done:
            options = SpeakOptions(speed=self.speed, sample_format="int16", pronunciations=self.pronunciations,
                                   first_segment_wait_s=self.first_segment_wait_s)
            self.stream = self.ctx.vox.tts().stream(self.voice, options)
            self.forwarder = asyncio.ensure_future(self._forward(self.stream))
        return self.stream

    async def _stop_stream(self, *, cancel: bool) -> None:
        stream, forwarder = self.stream, self.forwarder
        self.stream, self.forwarder = None, None
        if stream is not None:
            if cancel:
                stream.cancel()
            await stream.aclose()
        if forwarder is not None:
            forwarder.cancel()
            await asyncio.gather(forwarder, return_exceptions=True)

    async def _forward(self, stream: TtsStream) -> None:
        try:
            async for chunk in stream:
                if self.words and chunk.words:
                    await self.send(server_event("speech.audio.words", words=words_json(chunk.words)))
                header = server_event("audio", seq=chunk.sequence, start_s=round(chunk.start_s, 3),
                                      duration_s=round(chunk.duration_s, 3), text=chunk.text)
                if self.binary:
                    await self.send(header, chunk.pcm16())
                else:
                    await self.send({**header, "audio": base64.b64encode(chunk.pcm16()).decode()})
            if not stream.cancelled:
                ttfb = stream.stats.ttfb_s
                await self.send(server_event("done", audio_s=round(stream.stats.audio_s, 3),
                                             ttfb_ms=None if ttfb is None else round(ttfb * 1000, 1)))
        except VoxserveError as exc:
            await self.send(error_event(exc))
        finally:
            await stream.aclose()

    async def send(self, event: dict[str, Any], binary: bytes | None = None) -> None:
        """Send an event (and its binary payload) unless the client has gone."""
        async with self._send_lock:
            try:
                with self.watch.sending():
                    await self.ws.send_text(json.dumps(event, ensure_ascii=False))
                    if binary is not None:
                        await self.ws.send_bytes(binary)
            except (WebSocketDisconnect, RuntimeError):
                self._closing = self._closing or Close.CLIENT_GONE


def _wait_s(value: Any) -> float | None:
    """``first_segment_wait_ms`` of a ``session.update`` in seconds (None: off)."""
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 60_000:
        raise ProtocolError("first_segment_wait_ms must be null or between 0 and 60000", code="invalid_value",
                            param="first_segment_wait_ms")
    return float(value) / 1000.0
