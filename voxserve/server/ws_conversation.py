"""WebSocket ``/v1/realtime`` conversation sessions (no ``intent``, or ``intent=conversation``): the OpenAI
Realtime protocol over the voice agent (``voxserve.agent``).

Transport only: client audio and events go into an :class:`~voxserve.agent.cascade.AgentSession`; its events
come out as Realtime server events, reply audio resampled and encoded to the session's output format. A bad
message gets an ``error`` event and the session goes on; so does a failing LLM (``response.done`` with status
``failed`` and an ``error`` event). Registered by ``create_app`` as ``ctx.extras["realtime_conversation"]``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from typing import Any

import numpy as np
from starlette.websockets import WebSocket

from voxserve.agent.cascade import Agent, AgentSession
from voxserve.agent.events import AgentEvent, ResponseAudio, ResponseDone
from voxserve.agent.llm import LlmOptions
from voxserve.agent.options import AgentOptions
from voxserve.agent.turn import TurnParams
from voxserve.audio.pcm import float32_to_g711_alaw, float32_to_g711_ulaw, float32_to_pcm16
from voxserve.audio.resample import StreamResampler
from voxserve.errors import Overloaded, VoxserveError
from voxserve.server.context import ServerContext
from voxserve.server.errors import Close, close_code
from voxserve.server.realtime_conversation import (
    ConversationConfig,
    TurnConfig,
    apply_conversation_update,
    conversation_events,
    encode_b64,
    item_id,
    item_text,
    response_instructions,
    response_metadata,
    truncate_args,
)
from voxserve.server.realtime_protocol import (
    ProtocolError,
    decode_audio_field,
    error_event,
    server_event,
)
from voxserve.server.ws_realtime import AudioInput
from voxserve.server.ws_session import RealtimeSession, run_counted

log = logging.getLogger(__name__)
_CLIENT_EVENTS = {"session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
                  "input_audio_buffer.clear", "conversation.item.create", "conversation.item.truncate",
                  "response.create", "response.cancel"}


async def conversation_handler(ws: WebSocket, ctx: ServerContext) -> None:
    """Serve one conversation session on an accepted socket (``ctx.extras["realtime_conversation"]``)."""
    sessions: set[ConversationSession] = ctx.extras.setdefault("agent_sessions", set())
    if not ctx.ready or len(sessions) >= ctx.settings.agent.max_sessions:
        await _refuse(ws, Overloaded("too many conversation sessions; retry later"))
        return
    try:
        agent = await shared_agent(ctx)
    except VoxserveError as exc:
        await _refuse(ws, exc)
        return
    await run_counted(ConversationSession(ws, ctx, agent), sessions, ctx.metrics.agent_sessions)


async def shared_agent(ctx: ServerContext) -> Agent:
    """The process's agent (``ctx.extras["agent"]``, e.g. a test's, or loaded once off the event loop)."""
    found: Agent | None = ctx.extras.get("agent")
    if found is not None:
        return found
    agent: Agent = await ctx.vox.executor.run(ctx.vox.agent)
    if agent.observer is None:
        agent.observer = ctx.metrics
    ctx.extras["agent"] = agent
    return agent


async def _refuse(ws: WebSocket, exc: VoxserveError) -> None:
    await ws.send_text(json.dumps(error_event(exc)))
    await ws.close(close_code(exc), Close.TRY_AGAIN_LATER.reason if isinstance(exc, Overloaded) else exc.code)


def initial_config(ctx: ServerContext) -> ConversationConfig:
    """A new session's config from the server's agent settings."""
    a = ctx.settings.agent
    turn = TurnConfig(silence_duration_ms=a.silence_ms, incomplete_silence_ms=a.incomplete_silence_ms,
                      speculative=a.speculative)
    return ConversationConfig(turn=turn, language=a.language or None, audio_events=a.audio_events)


def agent_options(ctx: ServerContext, c: ConversationConfig) -> AgentOptions:
    """The agent session options for a conversation config (unset fields from the server's settings)."""
    from voxserve.agent.build import default_options

    base = default_options(ctx.settings.agent)
    turn = None
    if c.turn is not None:
        t = c.turn
        turn = TurnParams(silence_ms=t.silence_duration_ms, incomplete_silence_ms=t.incomplete_silence_ms,
                          respond=t.create_response, interrupt=t.interrupt_response, speculate=t.speculative)
    llm = LlmOptions(max_tokens=c.max_output_tokens or base.llm.max_tokens,
                     temperature=base.llm.temperature if c.temperature is None else c.temperature)
    prompt = replace(base.prompt, instructions=c.instructions) if c.instructions else base.prompt
    return replace(base, prompt=prompt, turn=turn, llm=llm, language=c.language, voice=c.voice or base.voice,
                   guard=ctx.vox.guard_config(),
                   vad_threshold=c.turn.threshold if c.turn else base.vad_threshold,
                   prefix_padding_ms=c.turn.prefix_padding_ms if c.turn else base.prefix_padding_ms)


class _AudioOut:
    """Reply audio of one response -> the session's output format (resampled as one stream)."""

    def __init__(self, encoding: str, rate: int, source_rate: int) -> None:
        self.encoding = encoding
        self._resampler = StreamResampler(source_rate, rate) if source_rate != rate else None

    def encode(self, samples: np.ndarray) -> bytes:
        """The next float32 chunk, in the output format."""
        x = np.asarray(samples, dtype=np.float32)
        return self._bytes(self._resampler.push(x) if self._resampler is not None else x)

    def flush(self) -> bytes:
        """The samples the resampler still holds (at the end of the reply)."""
        return self._bytes(self._resampler.flush()) if self._resampler is not None else b""

    def _bytes(self, x: np.ndarray) -> bytes:
        if self.encoding == "ulaw":
            return float32_to_g711_ulaw(x)
        if self.encoding == "alaw":
            return float32_to_g711_alaw(x)
        return float32_to_pcm16(x)


class ConversationSession(RealtimeSession):
    """One client's Realtime conversation."""

    kind = "conversation"

    def __init__(self, ws: WebSocket, ctx: ServerContext, agent: Agent) -> None:
        super().__init__(ws, ctx)
        self.agent = agent
        self.config = initial_config(ctx)
        a = ctx.settings.agent
        self.defaults = {"instructions": a.instructions, "voice": a.voice or ctx.settings.tts.voice,
                         "max_output_tokens": a.max_output_tokens}
        self.audio = AudioInput(self.config.in_encoding, self.config.in_rate)
        self.session: AgentSession = agent.session(agent_options(ctx, self.config))
        self._out: dict[str, _AudioOut] = {}
        self._forwarder: asyncio.Future[None] | None = None
        self.metadata: dict[str, dict[str, str]] = {}  # response id -> the client's response.metadata

    def _open(self) -> None:
        self._forwarder = asyncio.ensure_future(self._forward())
        self.send(server_event("session.created", session=self.config.public(self.id, self.defaults)))

    async def _shutdown(self) -> None:
        await self.session.aclose()
        if self._forwarder is not None:
            self._forwarder.cancel()
            await asyncio.gather(self._forwarder, return_exceptions=True)

    # ------------------------------------------------------------------------------------------ reading

    def _on_bytes(self, data: bytes) -> None:
        self._append(data)

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind not in _CLIENT_EVENTS:
            raise ProtocolError(f"unknown or unsupported event type {kind!r}", code="unknown_event", param="type")
        s = self.session
        if kind == "session.update":
            self._update(event)
        elif kind == "input_audio_buffer.append":
            self._append(decode_audio_field(event))
        elif kind == "input_audio_buffer.commit":
            s.commit()
        elif kind == "input_audio_buffer.clear":
            s.clear()
        elif kind == "conversation.item.create":
            role, text = item_text(event)
            s.add_text("user" if role == "user" else "assistant", text, item_id(event))
        elif kind == "conversation.item.truncate":
            s.truncate(*truncate_args(event))
        elif kind == "response.create":
            meta = response_metadata(event)
            response_id = s.respond(response_instructions(event))
            if meta is not None:
                self.metadata[response_id] = meta
        else:
            s.cancel_response()

    def _append(self, data: bytes) -> None:
        self.session.push(self.audio.convert(data))

    def _update(self, event: dict[str, Any]) -> None:
        new = apply_conversation_update(self.config, event)
        if new.voice and new.voice != self.config.voice:
            try:
                self.agent.tts.voice_info(new.voice)
            except VoxserveError as exc:  # an unknown voice rejects that field alone, not the whole update
                event_id = event.get("event_id")
                self.send(error_event(exc, event_id if isinstance(event_id, str) else None))
                new = replace(new, voice=self.config.voice)
        if (new.in_encoding, new.in_rate) != (self.config.in_encoding, self.config.in_rate):
            self.audio = AudioInput(new.in_encoding, new.in_rate)
        self.config = new
        self.session.update(agent_options(self.ctx, new))
        self.send(server_event("session.updated", session=new.public(self.id, self.defaults)))

    # ------------------------------------------------------------------------------------------ writing

    async def _forward(self) -> None:
        async for ev in self.session:
            self._send_event(ev)

    def _send_event(self, ev: AgentEvent) -> None:
        audio = ""
        if isinstance(ev, ResponseAudio):
            out = self._out.get(ev.response_id)
            if out is None:
                out = self._out[ev.response_id] = _AudioOut(self.config.out_encoding, self.config.out_rate,
                                                            ev.chunk.sample_rate)
            audio = encode_b64(out.encode(ev.chunk.audio))
        elif isinstance(ev, ResponseDone):
            out = self._out.pop(ev.response_id, None)
            tail = out.flush() if out is not None and ev.status == "completed" else b""
            if tail:
                self.send(server_event(f"{self.config.names()['audio']}.delta", response_id=ev.response_id,
                                       item_id=ev.item_id, output_index=0, content_index=0, delta=encode_b64(tail)))
        for out_event in conversation_events(ev, self.config, audio):
            if out_event["type"] in ("response.created", "response.done"):  # the client's metadata, echoed
                meta = self.metadata.get(out_event["response"]["id"])
                out_event["response"]["metadata"] = meta
                if out_event["type"] == "response.done":
                    self.metadata.pop(out_event["response"]["id"], None)
            self.send(out_event)
