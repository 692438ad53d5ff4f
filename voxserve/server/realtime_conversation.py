"""The OpenAI Realtime protocol, conversation sessions: session config, client items, and server events made
from agent events. Pure functions and small frozen types, no sockets (see ``ws_conversation.py``).

Both session shapes are accepted: GA (``session.update`` with ``type: realtime``, ``instructions`` and
``audio.{input,output}``) and beta (flat ``voice``, ``input_audio_format``, ``output_audio_format``,
``turn_detection``, ``input_audio_transcription``). Reply audio events are named the GA way
(``response.output_audio.delta``) or the beta way (``response.audio.delta``): by the shape the client speaks,
or explicitly with ``session.voxserve.audio_events: "ga" | "beta"``.
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
from voxserve.languages import language_code
from voxserve.server.realtime_protocol import (
    FORMATS,
    GA_FORMATS,
    ProtocolError,
    error_event,
    float_field,
    int_field,
    server_event,
)
from voxserve.types import samples_to_s

_EAGERNESS_MS = {"high": 300, "medium": 500, "auto": 500, "low": 900}
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
                    "instructions": instructions, "voice": voice, "input_audio_format": _beta_format(self.in_encoding),
                    "output_audio_format": _beta_format(self.out_encoding), "turn_detection": td,
                    "input_audio_transcription": {"model": "whisper-1", "language": self.language},
                    "max_response_output_tokens": tokens, "voxserve": ext}
        return {"id": session_id, "object": "realtime.session", "type": "realtime", "output_modalities": ["audio"],
                "instructions": instructions, "max_output_tokens": tokens,
                "audio": {"input": {"format": _ga_format(self.in_encoding, self.in_rate),
                                    "transcription": {"model": "whisper-1", "language": self.language},
                                    "turn_detection": td},
                          "output": {"format": _ga_format(self.out_encoding, self.out_rate), "voice": voice}},
                "voxserve": ext}


def _beta_format(encoding: str) -> str:
    return {"ulaw": "g711_ulaw", "alaw": "g711_alaw"}.get(encoding, "pcm16")


def _ga_format(encoding: str, rate: int) -> dict[str, Any]:
    kind = {"ulaw": "audio/pcmu", "alaw": "audio/pcma"}.get(encoding, "audio/pcm")
    return {"type": kind, "rate": rate} if kind == "audio/pcm" else {"type": kind}


# ------------------------------------------------------------------------------------------- session.update


def apply_conversation_update(config: ConversationConfig, event: dict[str, Any]) -> ConversationConfig:
    """A new config from a ``session.update`` of either shape."""
    s = event.get("session")
    if not isinstance(s, dict):
        raise ProtocolError("session.update needs a 'session' object", code="invalid_session", param="session")
    if s.get("type", "realtime") != "realtime":
        raise ProtocolError("this socket is a conversation session: use type 'realtime' (or connect with "
                            "?intent=transcription)", code="invalid_session_type", param="session.type")
    beta = "audio" not in s and any(k in s for k in ("voice", "input_audio_format", "output_audio_format",
                                                     "modalities", "input_audio_transcription"))
    config = replace(config, shape="beta", audio_events="beta") if beta else config
    if "instructions" in s:
        config = replace(config, instructions=_text(s["instructions"], "session.instructions"))
    config = _apply_beta(config, s) if beta else _apply_ga(config, s)
    if "turn_detection" in s and not beta:
        raise ProtocolError("put turn_detection under session.audio.input", code="invalid_session",
                            param="session.turn_detection")
    tokens = s.get("max_output_tokens", s.get("max_response_output_tokens"))
    if tokens is not None:
        config = replace(config, max_output_tokens=None if tokens == "inf" else
                         int_field({"t": tokens}, "t", 80, 1, 4096, "session.max_output_tokens"))
    if "temperature" in s:
        config = replace(config, temperature=float_field(s, "temperature", 0.0, 0.0, 2.0, "session"))
    ext = s.get("voxserve")
    if isinstance(ext, dict):
        config = _apply_extensions(config, ext)
    return config


def _apply_ga(config: ConversationConfig, s: dict[str, Any]) -> ConversationConfig:
    audio = s.get("audio") or {}
    if not isinstance(audio, dict):
        raise ProtocolError("session.audio must be an object", code="invalid_session", param="session.audio")
    inp, out = _object(audio, "input", "session.audio"), _object(audio, "output", "session.audio")
    if isinstance(inp.get("format"), dict):
        encoding, rate = _ga_audio_format(inp["format"], "session.audio.input.format")
        config = replace(config, in_encoding=encoding, in_rate=rate)
    if isinstance(out.get("format"), dict):
        encoding, rate = _ga_audio_format(out["format"], "session.audio.output.format")
        config = replace(config, out_encoding=encoding, out_rate=rate)
    if "voice" in out:
        config = replace(config, voice=_text(out["voice"], "session.audio.output.voice") or None)
    if "transcription" in inp:
        config = _apply_language(config, inp["transcription"], "session.audio.input.transcription")
    if "turn_detection" in inp:
        config = replace(config, turn=_turn(inp["turn_detection"], config.turn, "session.audio.input.turn_detection"))
    return config


def _apply_beta(config: ConversationConfig, s: dict[str, Any]) -> ConversationConfig:
    for key in ("input_audio_format", "output_audio_format"):
        if key in s:
            fmt = s[key]
            if not isinstance(fmt, str) or fmt not in FORMATS:
                raise ProtocolError(f"{key} must be one of {', '.join(FORMATS)}", code="invalid_format",
                                    param=f"session.{key}")
            encoding, rate = FORMATS[fmt]
            if key == "input_audio_format":
                config = replace(config, in_encoding=encoding, in_rate=rate)
            else:
                config = replace(config, out_encoding=encoding, out_rate=rate)
    if "voice" in s:
        config = replace(config, voice=_text(s["voice"], "session.voice") or None)
    if "input_audio_transcription" in s:
        config = _apply_language(config, s["input_audio_transcription"], "session.input_audio_transcription")
    if "turn_detection" in s:
        config = replace(config, turn=_turn(s["turn_detection"], config.turn, "session.turn_detection"))
    return config


def _object(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``parent[key]`` as an object (``{}`` when absent or null), else ``invalid_session``."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}.{key} must be an object", code="invalid_session", param=f"{where}.{key}")
    return value


def _ga_audio_format(fmt: dict[str, Any], where: str) -> tuple[str, int]:
    kind = fmt.get("type", "audio/pcm")
    if not isinstance(kind, str) or kind not in GA_FORMATS:
        raise ProtocolError(f"audio format must be one of {', '.join(GA_FORMATS)}", code="invalid_format", param=where)
    encoding = GA_FORMATS[kind]
    if encoding != "pcm16":
        return encoding, 8000
    rate = fmt.get("rate", 24000)
    if rate not in (16000, 24000):
        raise ProtocolError("PCM audio must be at 24000 or 16000 Hz", code="invalid_rate", param=f"{where}.rate")
    return encoding, int(rate)


def _apply_language(config: ConversationConfig, t: Any, where: str) -> ConversationConfig:
    if t is None:
        return config
    if not isinstance(t, dict):
        raise ProtocolError("transcription settings must be an object", code="invalid_transcription", param=where)
    language = t.get("language")
    if not language:
        return config
    code = language_code(str(language))
    if code is None:
        raise ProtocolError(f"unsupported language {language!r}", code="unsupported_language", param=f"{where}.language")
    return replace(config, language=code)


def _turn(td: Any, current: TurnConfig | None, where: str) -> TurnConfig | None:
    if td is None:
        return None
    if not isinstance(td, dict) or td.get("type", "server_vad") not in ("server_vad", "semantic_vad"):
        raise ProtocolError("turn_detection must be null or {type: server_vad | semantic_vad, ...}",
                            code="invalid_turn_detection", param=where)
    base = current or TurnConfig()
    silence = base.silence_duration_ms
    if td.get("type") == "semantic_vad":
        eagerness = td.get("eagerness", "auto")
        if eagerness not in _EAGERNESS_MS:
            raise ProtocolError("eagerness must be low, medium, high or auto", code="invalid_value",
                                param=f"{where}.eagerness")
        silence = _EAGERNESS_MS[eagerness]
    return TurnConfig(
        threshold=float_field(td, "threshold", base.threshold, 0.01, 0.99, where),
        prefix_padding_ms=int_field(td, "prefix_padding_ms", base.prefix_padding_ms, 0, 5000, where),
        silence_duration_ms=int_field(td, "silence_duration_ms", silence, 50, 10_000, where),
        create_response=_flag(td, "create_response", base.create_response, where),
        interrupt_response=_flag(td, "interrupt_response", base.interrupt_response, where),
        incomplete_silence_ms=base.incomplete_silence_ms, speculative=base.speculative,
        kind=str(td.get("type", "server_vad")),
    )


def _apply_extensions(config: ConversationConfig, ext: dict[str, Any]) -> ConversationConfig:
    names = ext.get("audio_events", config.audio_events)
    if names not in _NAMES:
        raise ProtocolError("audio_events must be 'ga' or 'beta'", code="invalid_value",
                            param="session.voxserve.audio_events")
    config = replace(config, audio_events=names)
    if config.turn is not None:
        turn = replace(config.turn, incomplete_silence_ms=int_field(ext, "incomplete_silence_ms",
                                                               config.turn.incomplete_silence_ms, 0, 10_000,
                                                               "session.voxserve"),
                       speculative=_flag(ext, "speculative", config.turn.speculative, "session.voxserve"))
        config = replace(config, turn=turn)
    return config


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{where} must be a string", code="invalid_value", param=where)
    return value


def _flag(d: dict[str, Any], key: str, default: bool, where: str) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"{key} must be true or false", code="invalid_value", param=f"{where}.{key}")
    return value


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
        texts.append(_text(part.get("text", ""), "item.content.text"))
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
    return _text(value, "response.instructions") if value is not None else None


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
