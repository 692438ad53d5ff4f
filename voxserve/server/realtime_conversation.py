"""The OpenAI Realtime protocol, conversation sessions: session config, client items, and server events made
from agent events. Pure functions and small frozen types, no sockets (see ``ws_conversation.py``).

Both session shapes are accepted (read by :mod:`voxserve.server.realtime_session`, as for transcription
sessions): GA (``session.update`` with ``type: realtime``, ``instructions`` and ``audio.{input,output}``) and
beta (flat ``voice``, ``input_audio_format``, ``output_audio_format``, ``turn_detection``,
``input_audio_transcription``). Reply audio events are named the GA way (``response.output_audio.delta``) or the
beta way (``response.audio.delta``): by the shape the client speaks, or explicitly with
``session.voxserve.audio_events: "ga" | "beta"``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, replace
from typing import Any

from voxserve.agent.events import (
    AgentError,
    AgentEvent,
    InputCleared,
    ItemAdded,
    ItemTruncated,
    ResponseAudio,
    ResponseDone,
    ResponseStarted,
    UserSpeechStarted,
    UserTurnEnded,
)
from voxserve.server.realtime_protocol import ProtocolError, error_event, server_event
from voxserve.server.realtime_session import (
    ABSENT,
    Extensions,
    Maybe,
    TurnRequest,
    audio_format,
    beta_format,
    ga_format,
    keep,
    read_update,
    text_value,
)
from voxserve.types import samples_to_s

_NAMES = {
    "ga": {"audio": "response.output_audio", "transcript": "response.output_audio_transcript"},
    "beta": {"audio": "response.audio", "transcript": "response.audio_transcript"},
}


@dataclass(frozen=True)
class TurnConfig:
    """Server turn detection (OpenAI names, plus voxserve's ``incomplete_silence_ms`` and ``speculative``)."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    create_response: bool = True
    interrupt_response: bool = True
    incomplete_silence_ms: int = 1500
    speculative: bool = True
    kind: str = "server_vad"

    def public(self) -> dict[str, Any]:
        """As reported in the session object."""
        return {"type": self.kind, "threshold": self.threshold, "prefix_padding_ms": self.prefix_padding_ms,
                "silence_duration_ms": self.silence_duration_ms, "create_response": self.create_response,
                "interrupt_response": self.interrupt_response}


@dataclass(frozen=True)
class ConversationConfig:
    """A conversation session's settings (``None`` fields fall back to the server's agent settings)."""

    instructions: str | None = None
    voice: str | None = None
    in_encoding: str = "pcm16"
    in_rate: int = 24000
    out_encoding: str = "pcm16"
    out_rate: int = 24000
    turn: TurnConfig | None = field(default_factory=TurnConfig)
    language: str | None = "en"
    max_output_tokens: int | None = None
    temperature: float | None = None
    audio_events: str = "ga"
    shape: str = "ga"

    def names(self) -> dict[str, str]:
        """Event name prefixes of reply audio and its transcript."""
        return _NAMES[self.audio_events]

    def public(self, session_id: str, defaults: dict[str, Any]) -> dict[str, Any]:
        """The session object as the server reports it; ``defaults`` fills what the client did not set."""
        instructions = self.instructions if self.instructions is not None else defaults.get("instructions", "")
        voice = self.voice or defaults.get("voice")
        td = self.turn.public() if self.turn is not None else None
        tokens = self.max_output_tokens or defaults.get("max_output_tokens")
        ext = {"audio_events": self.audio_events, "incomplete_silence_ms": self.turn.incomplete_silence_ms
               if self.turn else None, "speculative": self.turn.speculative if self.turn else False}
        if self.shape == "beta":
            return {"id": session_id, "object": "realtime.session", "modalities": ["audio", "text"],
                    "instructions": instructions, "voice": voice, "input_audio_format": beta_format(self.in_encoding),
                    "output_audio_format": beta_format(self.out_encoding), "turn_detection": td,
                    "input_audio_transcription": {"model": "whisper-1", "language": self.language},
                    "max_response_output_tokens": tokens, "voxserve": ext}
        return {"id": session_id, "object": "realtime.session", "type": "realtime", "output_modalities": ["audio"],
                "instructions": instructions, "max_output_tokens": tokens,
                "audio": {"input": {"format": ga_format(self.in_encoding, self.in_rate),
                                    "transcription": {"model": "whisper-1", "language": self.language},
                                    "turn_detection": td},
                          "output": {"format": ga_format(self.out_encoding, self.out_rate), "voice": voice}},
                "voxserve": ext}


# ------------------------------------------------------------------------------------------- session.update


def apply_conversation_update(config: ConversationConfig, event: dict[str, Any]) -> ConversationConfig:
    """A new config from a ``session.update`` of either shape, read by
    :func:`~voxserve.server.realtime_session.read_update`. A beta update switches reply audio events to the beta
    names; an update that names nothing of either shape keeps the session's shape."""
    asked = read_update(event, "realtime")
    in_encoding, in_rate = audio_format(asked.input_format, config.in_encoding, config.in_rate)
    out_encoding, out_rate = audio_format(asked.output_format, config.out_encoding, config.out_rate)
    events = "beta" if asked.shape == "beta" else config.audio_events
    return replace(
        config,
        instructions=keep(asked.instructions, config.instructions),
        voice=keep(asked.voice, config.voice),
        in_encoding=in_encoding,
        in_rate=in_rate,
        out_encoding=out_encoding,
        out_rate=out_rate,
        turn=_with_extensions(_turn(asked.turn_detection, config.turn), asked.voxserve),
        language=keep(asked.transcription.language, config.language),
        max_output_tokens=keep(asked.max_output_tokens, config.max_output_tokens),
        temperature=keep(asked.temperature, config.temperature),
        audio_events=keep(asked.voxserve.audio_events, events),
        shape=asked.shape or config.shape,
    )


def _turn(asked: Maybe[TurnRequest | None], current: TurnConfig | None) -> TurnConfig | None:
    """Turn detection after the request: the fields it names change, the others keep their value (or the
    default when it was off)."""
    if asked is ABSENT:
        return current
    if asked is None:
        return None
    base = current or TurnConfig()
    return replace(base, kind=asked.kind, threshold=keep(asked.threshold, base.threshold),
                   prefix_padding_ms=keep(asked.prefix_padding_ms, base.prefix_padding_ms),
                   silence_duration_ms=asked.silence_ms(base.silence_duration_ms),
                   create_response=keep(asked.create_response, base.create_response),
                   interrupt_response=keep(asked.interrupt_response, base.interrupt_response))


def _with_extensions(turn: TurnConfig | None, x: Extensions) -> TurnConfig | None:
    """voxserve's turn settings (``session.voxserve``); nothing to set while turn detection is off."""
    if turn is None:
        return None
    return replace(turn, incomplete_silence_ms=keep(x.incomplete_silence_ms, turn.incomplete_silence_ms),
                   speculative=keep(x.speculative, turn.speculative))


# ------------------------------------------------------------------------------------------- client items


def item_id(event: dict[str, Any]) -> str | None:
    """The client's id of a ``conversation.item.create`` item, kept as the item's id (None: the server makes
    one). At most 64 characters of letters, digits, ``_`` and ``-``, as OpenAI's ids."""
    item = event.get("item")
    value = item.get("id") if isinstance(item, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= 64 or not all(c.isalnum() or c in "_-" for c in value):
        raise ProtocolError("item.id must be 1-64 letters, digits, '_' or '-'", code="invalid_value", param="item.id")
    return value


def item_text(event: dict[str, Any]) -> tuple[str, str]:
    """(role, text) of a ``conversation.item.create`` text message (its ``id``: :func:`item_id`)."""
    item = event.get("item")
    if not isinstance(item, dict) or item.get("type", "message") != "message":
        raise ProtocolError("conversation.item.create needs an item of type 'message'", code="invalid_item",
                            param="item")
    role = item.get("role")
    if role not in ("user", "assistant"):
        raise ProtocolError("only user and assistant messages can be added", code="unsupported_item",
                            param="item.role")
    content = item.get("content")
    if not isinstance(content, list) or not content:
        raise ProtocolError("the message needs a content list", code="invalid_item", param="item.content")
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "text", "output_text"):
            raise ProtocolError("only text content can be added (input_text, text, output_text)",
                                code="unsupported_content", param="item.content")
        texts.append(text_value(part.get("text", ""), "item.content.text"))
    text = " ".join(t.strip() for t in texts if t.strip())
    if not text:
        raise ProtocolError("the message has no text", code="invalid_item", param="item.content")
    return str(role), text


def truncate_args(event: dict[str, Any]) -> tuple[str, int]:
    """(item_id, audio_end_ms) of ``conversation.item.truncate``."""
    item_id = event.get("item_id")
    if not isinstance(item_id, str) or not item_id:
        raise ProtocolError("conversation.item.truncate needs an item_id", code="invalid_value", param="item_id")
    end = event.get("audio_end_ms")
    if not isinstance(end, int) or isinstance(end, bool) or end < 0:
        raise ProtocolError("audio_end_ms must be a non-negative integer", code="invalid_value", param="audio_end_ms")
    return item_id, end


def response_instructions(event: dict[str, Any]) -> str | None:
    """The per-response ``instructions`` of ``response.create``, if any."""
    response = event.get("response")
    if response is None:
        return None
    if not isinstance(response, dict):
        raise ProtocolError("response must be an object", code="invalid_value", param="response")
    value = response.get("instructions")
    return text_value(value, "response.instructions") if value is not None else None


# ------------------------------------------------------------------------------------------- server events


def response_metadata(event: dict[str, Any]) -> dict[str, str] | None:
    """``response.metadata`` of a ``response.create`` (echoed in response.created and response.done; LiveKit's
    generate_reply waits for its id there): at most 16 string pairs, as OpenAI takes them."""
    response = event.get("response")
    meta = response.get("metadata") if isinstance(response, dict) else None
    if meta is None:
        return None
    if not isinstance(meta, dict) or len(meta) > 16 or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512 for k, v in meta.items()):
        raise ProtocolError("response.metadata must be at most 16 string pairs", code="invalid_value",
                            param="response.metadata")
    return dict(meta)


def _assistant_item(item_id: str, status: str, transcript: str | None = None) -> dict[str, Any]:
    content = [] if transcript is None else [{"type": "output_audio", "transcript": transcript}]
    return {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant", "status": status,
            "content": content}


def _item_events(config: ConversationConfig, previous_item_id: str | None, item: dict[str, Any]) -> list[dict[str, Any]]:
    """A new conversation item: ``conversation.item.created`` (beta, and kept for GA clients that read it),
    and for GA sessions ``conversation.item.added`` and, once the item is complete, ``conversation.item.done``
    (what GA clients such as LiveKit's wait for)."""
    out = [server_event("conversation.item.created", previous_item_id=previous_item_id, item=item)]
    if config.shape != "beta":
        out.append(server_event("conversation.item.added", previous_item_id=previous_item_id, item=item))
        if item.get("status") == "completed":
            out.append(server_event("conversation.item.done", previous_item_id=previous_item_id, item=item))
    return out


def conversation_events(ev: AgentEvent, config: ConversationConfig, audio_b64: str = "") -> list[dict[str, Any]]:
    """The server events for one agent event (``audio_b64``: the reply chunk, already in the output format)."""
    if isinstance(ev, UserSpeechStarted):
        return [server_event("input_audio_buffer.speech_started", audio_start_ms=_ms(ev.start), item_id=ev.item_id)]
    if isinstance(ev, UserTurnEnded):
        return _user_turn(ev, config)
    if isinstance(ev, ItemAdded):
        kind = "input_text" if ev.role == "user" else "output_text"
        item = {"id": ev.item_id, "object": "realtime.item", "type": "message", "role": ev.role,
                "status": "completed", "content": [{"type": kind, "text": ev.text}]}
        return _item_events(config, ev.previous_item_id, item)
    if isinstance(ev, ResponseStarted):
        return _response_started(ev, config)
    if isinstance(ev, ResponseAudio):
        return _audio(ev, config, audio_b64)
    if isinstance(ev, ResponseDone):
        return _response_done(ev, config)
    if isinstance(ev, ItemTruncated):
        return [server_event("conversation.item.truncated", item_id=ev.item_id, content_index=0,
                             audio_end_ms=ev.audio_end_ms)]
    if isinstance(ev, InputCleared):
        return [server_event("input_audio_buffer.cleared")]
    if isinstance(ev, AgentError):
        return [error_event(ev.error)]
    return []


def _ms(sample: int) -> int:
    return int(samples_to_s(sample) * 1000)


def _user_turn(ev: UserTurnEnded, config: ConversationConfig) -> list[dict[str, Any]]:
    out = []
    if config.turn is not None:
        out.append(server_event("input_audio_buffer.speech_stopped", audio_end_ms=_ms(ev.end), item_id=ev.item_id))
    if not ev.transcript:
        return out
    item = {"id": ev.item_id, "object": "realtime.item", "type": "message", "role": "user", "status": "completed",
            "content": [{"type": "input_audio", "transcript": ev.transcript}]}
    return [*out,
            server_event("input_audio_buffer.committed", item_id=ev.item_id, previous_item_id=ev.previous_item_id),
            *_item_events(config, ev.previous_item_id, item),
            server_event("conversation.item.input_audio_transcription.completed", item_id=ev.item_id,
                         content_index=0, transcript=ev.transcript)]


def _response_started(ev: ResponseStarted, config: ConversationConfig) -> list[dict[str, Any]]:
    item = _assistant_item(ev.item_id, "in_progress")
    ids = {"response_id": ev.response_id, "item_id": ev.item_id, "output_index": 0, "content_index": 0}
    return [
        server_event("response.created", response={"id": ev.response_id, "object": "realtime.response",
                                                   "status": "in_progress", "output": []}),
        server_event("response.output_item.added", response_id=ev.response_id, output_index=0, item=item),
        *_item_events(config, ev.previous_item_id, item),
        server_event("response.content_part.added", **ids, part={"type": "audio", "transcript": ""}),
    ]


def _audio(ev: ResponseAudio, config: ConversationConfig, audio_b64: str) -> list[dict[str, Any]]:
    names = config.names()
    ids = {"response_id": ev.response_id, "item_id": ev.item_id, "output_index": 0, "content_index": 0}
    out = [server_event(f"{names['transcript']}.delta", **ids, delta=ev.text_delta)] if ev.text_delta else []
    if audio_b64:
        out.append(server_event(f"{names['audio']}.delta", **ids, delta=audio_b64))
    return out


def _response_done(ev: ResponseDone, config: ConversationConfig) -> list[dict[str, Any]]:
    names = config.names()
    ids = {"response_id": ev.response_id, "item_id": ev.item_id, "output_index": 0, "content_index": 0}
    status = "completed" if ev.status == "completed" else "incomplete"
    item = _assistant_item(ev.item_id, status, ev.transcript)
    details: dict[str, Any] | None = None
    if ev.status == "cancelled":
        details = {"type": "cancelled", "reason": ev.reason}
    elif ev.status == "failed":
        error = ev.error
        details = {"type": "failed", "error": {"type": "server_error", "code": getattr(error, "code", "error"),
                                               "message": getattr(error, "message", "the response failed")}}
    voxserve = {"audio_ms": round(ev.audio_s * 1000), "latency": ev.latency.as_dict() if ev.latency else None}
    done = [server_event("conversation.item.done", item=item)] if config.shape != "beta" else []
    return [
        server_event(f"{names['audio']}.done", **ids),
        server_event(f"{names['transcript']}.done", **ids, transcript=ev.transcript),
        server_event("response.content_part.done", **ids, part={"type": "audio", "transcript": ev.transcript}),
        server_event("response.output_item.done", response_id=ev.response_id, output_index=0, item=item),
        *done,
        server_event("response.done", response={"id": ev.response_id, "object": "realtime.response",
                                                "status": ev.status, "status_details": details, "output": [item],
                                                "voxserve": voxserve}),
    ]


def encode_b64(data: bytes) -> str:
    """Base64 text of audio bytes."""
    return base64.b64encode(data).decode("ascii")
