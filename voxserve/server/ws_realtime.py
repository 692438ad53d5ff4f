"""WebSocket ``/v1/realtime?intent=transcription``: the OpenAI Realtime transcription protocol.

Transport only: bytes and JSON in, stream events out. Audio arrives as ``input_audio_buffer.append``
(base64) or as raw binary frames of the session's format (documented extension for simple clients).
A bad message gets an ``error`` event and the session goes on; a client that keeps sending bad messages,
stops reading, or exceeds the frame limit is closed with the matching close code.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from typing import Any

import numpy as np
from fastapi import APIRouter
from starlette.websockets import WebSocket

from voxserve.audio.pcm import g711_alaw_to_float32, g711_ulaw_to_float32, pcm16_to_float32
from voxserve.audio.resample import StreamResampler
from voxserve.errors import InvalidInput, Overloaded, VoxserveError
from voxserve.pipelines.known_speakers import KnownSpeaker
from voxserve.pipelines.vad import VadParams
from voxserve.server.context import ServerContext, context
from voxserve.server.errors import Close, HttpError
from voxserve.server.known_speaker_fields import voice_library
from voxserve.server.model_names import asr_model
from voxserve.server.realtime_protocol import (
    ProtocolError,
    SessionConfig,
    apply_update,
    decode_audio_field,
    error_event,
    live_event,
    server_event,
)
from voxserve.server.ws_session import RealtimeSession, run_counted
from voxserve.streaming.live_asr import LiveStream
from voxserve.streaming.live_events import LiveEvent, Partial, TranscriptCompleted, TranscriptDelta
from voxserve.text.keyterms import parse_keyterms
from voxserve.types import SAMPLE_RATE

log = logging.getLogger(__name__)
router = APIRouter()
_CLIENT_EVENTS = {"session.update", "transcription_session.update", "input_audio_buffer.append",
                  "input_audio_buffer.commit", "input_audio_buffer.clear"}


def offered_key(ws: WebSocket) -> tuple[str | None, str | None]:
    """(subprotocol to accept, API key) from browser-style ``openai-insecure-api-key.<key>`` subprotocols."""
    offered = [p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    key = next((p.split(".", 1)[1] for p in offered if p.startswith("openai-insecure-api-key.")), None)
    accept = "realtime" if "realtime" in offered else None
    return accept, key


async def refuse(ws: WebSocket, exc: VoxserveError, end: Close) -> None:
    """Turn an accepted socket away before a session starts: the ``error`` event saying why, then the close."""
    await ws.send_text(json.dumps(error_event(exc)))
    await ws.close(end.code, end.reason)


async def authorize(ws: WebSocket, ctx: ServerContext) -> bool:
    """Accept the socket; when the key is missing or wrong, say so and close (:attr:`Close.UNAUTHORIZED`)."""
    subprotocol, key = offered_key(ws)
    await ws.accept(subprotocol=subprotocol)
    try:
        if key and ctx.keys.enabled and "authorization" not in ws.headers:
            ws.scope["headers"] = [*ws.scope["headers"], (b"authorization", f"Bearer {key}".encode())]
        ctx.client(ws)
    except HttpError as exc:
        await refuse(ws, InvalidInput(exc.message, code=exc.code or "invalid_api_key"), Close.UNAUTHORIZED)
        return False
    return True


@router.websocket("/v1/realtime")
async def realtime(ws: WebSocket) -> None:
    """Entry point of Realtime sessions."""
    ctx = context(ws)
    if not await authorize(ws, ctx):
        return
    handler = ctx.extras.get("realtime_conversation")
    if ws.query_params.get("intent") != "transcription":
        if handler is not None:
            await handler(ws, ctx)
            return
        await refuse(ws, InvalidInput("use ?intent=transcription", code="unsupported_intent"), Close.UNSUPPORTED_INTENT)
        return
    sessions: set[TranscriptionSession] = ctx.extras.setdefault("live_sessions", set())
    if not ctx.ready or len(sessions) >= ctx.settings.live.max_streams:
        await refuse(ws, Overloaded("too many live streams; retry later"), Close.TRY_AGAIN_LATER)
        return
    await run_counted(TranscriptionSession(ws, ctx), sessions, ctx.metrics.live_streams)


class AudioInput:
    """Client audio bytes in the session's format -> 16 kHz float32."""

    def __init__(self, encoding: str, rate: int) -> None:
        self.encoding = encoding
        self.rate = rate
        self._resampler = StreamResampler(rate, SAMPLE_RATE) if rate != SAMPLE_RATE else None

    def convert(self, data: bytes) -> np.ndarray:
        if self.encoding == "pcm16":
            if len(data) % 2:
                raise ProtocolError("pcm16 audio must have an even number of bytes", code="invalid_audio", param="audio")
            samples = pcm16_to_float32(data)
        elif self.encoding == "ulaw":
            samples = g711_ulaw_to_float32(data)
        else:
            samples = g711_alaw_to_float32(data)
        return self._resampler.push(samples) if self._resampler is not None else samples


class TranscriptionSession(RealtimeSession):
    """One client's Realtime transcription session."""

    kind = "realtime session"

    def __init__(self, ws: WebSocket, ctx: ServerContext) -> None:
        super().__init__(ws, ctx)
        self.config = SessionConfig(partial_interval_ms=ctx.settings.live.partial_interval_ms)
        self.stream: LiveStream | None = None
        self.audio: AudioInput | None = None
        self.known: tuple[KnownSpeaker, ...] = ()  # the enrolled voices config.known_speakers names
        self.forwarders: list[asyncio.Task[None]] = []
        self._received_samples = 0

    @property
    def pending_s(self) -> float:
        """Audio received but not yet scored (how far this stream is behind real time)."""
        return self.stream.pending_s if self.stream is not None else 0.0

    def _open(self) -> None:
        self._start_stream()
        self.send(server_event("session.created", session=self.config.public(self.id)))

    async def _shutdown(self) -> None:
        for task in self.forwarders:
            task.cancel()
        if self.stream is not None:
            await self.stream.aclose()
        await asyncio.gather(*self.forwarders, return_exceptions=True)

    # ------------------------------------------------------------------------------------ reading

    def _on_bytes(self, data: bytes) -> None:
        self._append(data)

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind not in _CLIENT_EVENTS:
            raise ProtocolError(f"unknown or unsupported event type {kind!r}", code="unknown_event", param="type")
        if kind in ("session.update", "transcription_session.update"):
            self._update(event)
        elif kind == "input_audio_buffer.append":
            self._append(decode_audio_field(event))
        elif kind == "input_audio_buffer.commit":
            event_id = event.get("event_id")
            self._require_stream().commit(event_id if isinstance(event_id, str) else None)
        else:
            self._require_stream().clear()

    def _require_stream(self) -> LiveStream:
        if self.stream is None:
            raise ProtocolError("the session has no audio stream", code="no_stream")
        return self.stream

    def _append(self, data: bytes) -> None:
        assert self.audio is not None
        samples = self.audio.convert(data)
        self._received_samples += len(samples)
        self._require_stream().push(samples)

    def _update(self, event: dict[str, Any]) -> None:
        new = apply_update(self.config, event)
        if new.model != self.config.model:
            model = asr_model(self.ctx.settings, new.model)
            self.ctx.check_model(model)  # a registered name, never a path on the server
            self.ctx.vox.asr(model)  # unknown -> ModelUnavailable
        if new.known_speakers != self.config.known_speakers:
            self.known = self._enrolled(new.known_speakers)
        audio_changed = self._received_samples > 0 and self.stream is not None
        self.config = new
        if audio_changed:  # let the old stream finish its utterances, continue in a new one
            assert self.stream is not None
            self.stream.end_input()
            self._start_stream()
        else:
            old, self.stream = self.stream, None
            if old is not None:
                self.forwarders.append(asyncio.ensure_future(old.aclose()))
            self._start_stream()
        beta_event = event["type"] == "transcription_session.update"  # the reply answers the client's event
        updated = "transcription_session.updated" if beta_event else "session.updated"
        self.send(server_event(updated, session=new.public(self.id)))

    def _enrolled(self, names: tuple[str, ...]) -> tuple[KnownSpeaker, ...]:
        """The voices ``session.voxserve.speakers.known`` names, from the server's voice library (as enrolled
        with ``diarization.naming_embedder``); an ``error`` naming the field for a name not enrolled."""
        library, embedder = voice_library(self.ctx), self.ctx.settings.diarization.naming_embedder
        voices = [(n, library.get(n, embedder)) for n in names]
        missing = [n for n, v in voices if v is None]
        if missing:
            raise ProtocolError(f"not enrolled with the {embedder} embedder: {', '.join(map(repr, missing))} "
                                "(POST /v1/voices/enrolled first)", code="voice_not_found",
                                param="session.voxserve.speakers.known")
        return tuple(v for _, v in voices if v is not None)

    def _start_stream(self) -> None:
        c = self.config
        vox = self.ctx.vox
        base = vox.live_options()
        vad = None
        if c.turn_detection is not None:
            td = c.turn_detection
            vad = VadParams(threshold=td.threshold, min_speech_ms=self.ctx.settings.live.min_speech_ms,
                            min_silence_ms=td.silence_duration_ms)
        options = vox.live_options(
            vad=vad,
            prefix_padding_ms=c.turn_detection.prefix_padding_ms if c.turn_detection else 0,
            decode=replace(base.decode, language=c.language, prompt=c.prompt),
            keyterms=parse_keyterms((*base.keyterms, *c.keyterms)),
            partial_interval_ms=c.partial_interval_ms,
            speakers=c.speakers,
            logprobs=c.logprobs,
        )
        # On Ray, the session's streams stay on one replica (stream_id).
        self.stream = vox.live(options, model=asr_model(self.ctx.settings, c.model), stream_id=self.id,
                               known_speakers=self.known if c.speakers else ())
        self.audio = AudioInput(c.encoding, c.sample_rate)
        self._received_samples = 0
        self.forwarders.append(asyncio.ensure_future(self._forward(self.stream)))

    # ------------------------------------------------------------------------------------ writing

    async def _forward(self, stream: LiveStream) -> None:
        async for ev in stream:
            self._observe(ev)
            out = live_event(ev, self.config.partial_events)
            if out is not None:
                self.send(out, droppable=isinstance(ev, (Partial, TranscriptDelta)))

    def _observe(self, ev: LiveEvent) -> None:
        if isinstance(ev, TranscriptCompleted):
            self.ctx.metrics.live_final_latency.observe(ev.latency_s)
        elif isinstance(ev, Partial):
            self.ctx.metrics.live_partials.inc()
