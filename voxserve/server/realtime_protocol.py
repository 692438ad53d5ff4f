"""The OpenAI Realtime protocol (transcription sessions): client events in, server events out.

Pure functions and small frozen types, no sockets. Both session shapes are accepted: the GA one
(``session.update`` with ``session.audio.input.{format, transcription, turn_detection}``) and the beta one
(``transcription_session.update`` with ``input_audio_format``, ``input_audio_transcription``,
``turn_detection``). voxserve extensions: PCM at 16 kHz (``rate: 16000`` / ``input_sample_rate``) and, under
``session.voxserve``, ``partial_events`` (revisable ``...input_audio_transcription.partial`` events),
``partial_interval_ms`` and ``speakers`` (a speaker label in each completed event's ``voxserve`` block).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from dataclasses import dataclass, field, replace
from typing import Any

from voxserve.errors import InvalidInput
from voxserve.languages import language_code
from voxserve.streaming.live_events import (
    Cleared,
    Committed,
    LiveEvent,
    Partial,
    SpeechStarted,
    SpeechStopped,
    StreamError,
    TranscriptCompleted,
    TranscriptDelta,
    TranscriptFailed,
)
from voxserve.types import samples_to_s

_event_ids = itertools.count(1)
FORMATS = {"pcm16": ("pcm16", 24000), "g711_ulaw": ("ulaw", 8000), "g711_alaw": ("alaw", 8000)}
GA_FORMATS = {"audio/pcm": "pcm16", "audio/pcmu": "ulaw", "audio/pcma": "alaw"}


@dataclass(frozen=True)
class TurnDetection:
    """Server VAD settings (OpenAI names)."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500


@dataclass(frozen=True)
class SessionConfig:
    """A transcription session's settings."""

    encoding: str = "pcm16"  # pcm16 | ulaw | alaw
    sample_rate: int = 24000
    model: str = "whisper-1"
    language: str | None = None
    prompt: str | None = None
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    partial_events: bool = False
    partial_interval_ms: int = 600
    speakers: bool = False
    logprobs: bool = False  # include: ["item.input_audio_transcription.logprobs"]
    noise_reduction: str | None = None  # accepted and reported; no denoiser is applied (see docs/compatibility.md)
    shape: str = "ga"  # which protocol shape the client speaks: ga | beta

    def public(self, session_id: str) -> dict[str, Any]:
        """The session object as the server reports it, in the client's shape."""
        td = None if self.turn_detection is None else {"type": "server_vad", **self.turn_detection.__dict__}
        transcription = {"model": self.model, "language": self.language, "prompt": self.prompt or ""}
        include = ["item.input_audio_transcription.logprobs"] if self.logprobs else []
        noise = None if self.noise_reduction is None else {"type": self.noise_reduction}
        ext = {"partial_events": self.partial_events, "partial_interval_ms": self.partial_interval_ms,
               "speakers": self.speakers}
        if self.shape == "beta":
            fmt = {"ulaw": "g711_ulaw", "alaw": "g711_alaw"}.get(self.encoding, "pcm16")
            return {"id": session_id, "object": "realtime.transcription_session", "input_audio_format": fmt,
                    "input_sample_rate": self.sample_rate, "input_audio_transcription": transcription,
                    "turn_detection": td, "input_audio_noise_reduction": noise, "include": include, "voxserve": ext}
        fmt_ga: dict[str, Any] = {"type": {"ulaw": "audio/pcmu", "alaw": "audio/pcma"}.get(self.encoding, "audio/pcm")}
        if self.encoding == "pcm16":
            fmt_ga["rate"] = self.sample_rate
        return {"id": session_id, "object": "realtime.transcription_session", "type": "transcription",
                "audio": {"input": {"format": fmt_ga, "transcription": transcription, "turn_detection": td,
                                    "noise_reduction": noise}},
                "include": include, "voxserve": ext}


class ProtocolError(InvalidInput):
    """A client event that cannot be used; reported as an ``error`` event, the session goes on."""


def parse_message(raw: str) -> dict[str, Any]:
    """A client event as a dict with a string ``type``."""
    try:
        event = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"message is not valid JSON: {exc.msg}", code="invalid_json") from None
    except (ValueError, RecursionError) as exc:  # bad UTF-8, a number over 4300 digits, "[[[[..." nested too deep
        raise ProtocolError(f"message is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ProtocolError("every event must be a JSON object with a string 'type'", code="invalid_event")
    return event


def decode_audio_field(event: dict[str, Any]) -> bytes:
    """The bytes of ``input_audio_buffer.append``'s base64 ``audio``."""
    audio = event.get("audio")
    if not isinstance(audio, str):
        raise ProtocolError("input_audio_buffer.append needs 'audio' as a base64 string", code="missing_audio", param="audio")
    try:
        return base64.b64decode(audio, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("'audio' is not valid base64", code="invalid_base64", param="audio") from None


def apply_update(config: SessionConfig, event: dict[str, Any]) -> SessionConfig:
    """A new session config from ``session.update`` (GA) or ``transcription_session.update`` (beta)."""
    session = event.get("session")
    if not isinstance(session, dict):
        raise ProtocolError("the update needs a 'session' object", code="invalid_session", param="session")
    if event["type"] == "transcription_session.update":
        config = _apply_beta(replace(config, shape="beta"), session)
    else:
        if session.get("type", "transcription") != "transcription":
            raise ProtocolError("this socket is a transcription session (intent=transcription)",
                                code="invalid_session_type", param="session.type")
        config = _apply_ga(replace(config, shape="ga"), session)
    ext = session.get("voxserve")
    if isinstance(ext, dict):
        config = replace(
            config,
            partial_events=_bool(ext, "partial_events", config.partial_events),
            speakers=_bool(ext, "speakers", config.speakers),
            partial_interval_ms=int_field(ext, "partial_interval_ms", config.partial_interval_ms, 0, 10_000, "session.voxserve"),
        )
    return config


def _apply_beta(config: SessionConfig, s: dict[str, Any]) -> SessionConfig:
    if "input_audio_format" in s:
        fmt = s["input_audio_format"]
        if not isinstance(fmt, str) or fmt not in FORMATS:
            raise ProtocolError(f"input_audio_format must be one of {', '.join(FORMATS)}", code="invalid_format",
                                param="session.input_audio_format")
        encoding, rate = FORMATS[fmt]
        config = replace(config, encoding=encoding, sample_rate=rate)
    if "input_sample_rate" in s:
        config = replace(config, sample_rate=_rate(s["input_sample_rate"], config.encoding, "session.input_sample_rate"))
    if "input_audio_transcription" in s:
        config = _apply_transcription(config, s["input_audio_transcription"], "session.input_audio_transcription")
    if "turn_detection" in s:
        config = replace(config, turn_detection=_turn_detection(s["turn_detection"], "session.turn_detection"))
    if "input_audio_noise_reduction" in s:
        config = replace(config, noise_reduction=_noise(s["input_audio_noise_reduction"], "session.input_audio_noise_reduction"))
    return _apply_include(config, s)


def _apply_ga(config: SessionConfig, s: dict[str, Any]) -> SessionConfig:
    config = _apply_include(config, s)
    audio = s.get("audio") or {}
    inp = audio.get("input") if isinstance(audio, dict) else None
    if not isinstance(inp, dict):
        return config
    if "noise_reduction" in inp:
        config = replace(config, noise_reduction=_noise(inp["noise_reduction"], "session.audio.input.noise_reduction"))
    fmt = inp.get("format")
    if isinstance(fmt, dict):
        kind = fmt.get("type", "audio/pcm")
        if not isinstance(kind, str) or kind not in GA_FORMATS:
            raise ProtocolError(f"audio format must be one of {', '.join(GA_FORMATS)}", code="invalid_format",
                                param="session.audio.input.format")
        encoding = GA_FORMATS[kind]
        rate = _rate(fmt.get("rate", 24000), encoding, "session.audio.input.format.rate") if encoding == "pcm16" else 8000
        config = replace(config, encoding=encoding, sample_rate=rate)
    if "transcription" in inp:
        config = _apply_transcription(config, inp["transcription"], "session.audio.input.transcription")
    if "turn_detection" in inp:
        config = replace(config, turn_detection=_turn_detection(inp["turn_detection"], "session.audio.input.turn_detection"))
    return config


_INCLUDE = "item.input_audio_transcription.logprobs"


def _apply_include(config: SessionConfig, s: dict[str, Any]) -> SessionConfig:
    """``include``: only the transcription's logprobs can be asked for."""
    if "include" not in s:
        return config
    include = s["include"] or []
    if not isinstance(include, list) or any(v != _INCLUDE for v in include):
        raise ProtocolError(f"include may only hold {_INCLUDE!r}", code="invalid_include", param="session.include")
    return replace(config, logprobs=bool(include))


def _noise(value: Any, where: str) -> str | None:
    """OpenAI's noise reduction (``null`` or ``{"type": "near_field" | "far_field"}``): accepted and echoed."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in ("near_field", "far_field"):
        raise ProtocolError("noise_reduction must be null or {type: near_field | far_field}",
                            code="invalid_noise_reduction", param=where)
    return str(value["type"])


def _rate(value: Any, encoding: str, param: str) -> int:
    if encoding != "pcm16":
        return 8000
    if value not in (16000, 24000):
        raise ProtocolError("PCM audio must be at 24000 or 16000 Hz", code="invalid_rate", param=param)
    return int(value)


def _apply_transcription(config: SessionConfig, t: Any, where: str) -> SessionConfig:
    if t is None:
        return config
    if not isinstance(t, dict):
        raise ProtocolError("transcription settings must be an object", code="invalid_transcription", param=where)
    language = t.get("language")
    if language:
        code = language_code(str(language))
        if code is None:
            raise ProtocolError(f"unsupported language {language!r}", code="unsupported_language",
                                param=f"{where}.language")
        language = code
    prompt = t.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise ProtocolError("prompt must be a string", code="invalid_prompt", param=f"{where}.prompt")
    return replace(config, model=str(t.get("model") or config.model), language=language or None, prompt=prompt or None)


def _turn_detection(td: Any, where: str) -> TurnDetection | None:
    if td is None:
        return None
    if not isinstance(td, dict) or td.get("type", "server_vad") not in ("server_vad", "semantic_vad"):
        raise ProtocolError("turn_detection must be null or {type: server_vad, ...}", code="invalid_turn_detection",
                            param=where)
    return TurnDetection(
        threshold=float_field(td, "threshold", 0.5, 0.01, 0.99, where),
        prefix_padding_ms=int_field(td, "prefix_padding_ms", 300, 0, 5000, where),
        silence_duration_ms=int_field(td, "silence_duration_ms", 500, 50, 10_000, where),
    )


def _bool(d: dict[str, Any], key: str, default: bool) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"{key} must be true or false", code="invalid_value", param=f"session.voxserve.{key}")
    return value


def int_field(d: dict[str, Any], key: str, default: int, lo: int, hi: int, where: str) -> int:
    """``d[key]`` as an integer in ``[lo, hi]`` (``default`` when absent or null), else ``invalid_value``."""
    value = d.get(key, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ProtocolError(f"{key} must be an integer between {lo} and {hi}", code="invalid_value", param=f"{where}.{key}")
    return value


def float_field(d: dict[str, Any], key: str, default: float, lo: float, hi: float, where: str) -> float:
    """``d[key]`` as a number in ``[lo, hi]`` (``default`` when absent or null), else ``invalid_value``."""
    value = d.get(key, default)
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= float(value) <= hi:
        raise ProtocolError(f"{key} must be a number between {lo} and {hi}", code="invalid_value", param=f"{where}.{key}")
    return float(value)


def server_event(kind: str, **fields: Any) -> dict[str, Any]:
    """A server event with a fresh ``event_id``."""
    return {"event_id": f"event_{next(_event_ids)}", "type": kind, **fields}


def error_event(exc: Exception, client_event_id: str | None = None) -> dict[str, Any]:
    """An ``error`` event (OpenAI's shape)."""
    code = getattr(exc, "code", "error")
    message = getattr(exc, "message", str(exc))
    return server_event("error", error={"type": "invalid_request_error", "code": code, "message": message,
                                         "param": getattr(exc, "param", None), "event_id": client_event_id})


def live_event(ev: LiveEvent, partial_events: bool) -> dict[str, Any] | None:
    """The server event for a stream event (None when the session does not want it)."""
    prefix = "conversation.item.input_audio_transcription"
    if isinstance(ev, SpeechStarted):
        return server_event("input_audio_buffer.speech_started", audio_start_ms=ev.start_ms, item_id=ev.item_id)
    if isinstance(ev, SpeechStopped):
        return server_event("input_audio_buffer.speech_stopped", audio_end_ms=ev.end_ms, item_id=ev.item_id)
    if isinstance(ev, Committed):
        return server_event("input_audio_buffer.committed", item_id=ev.item_id, previous_item_id=ev.previous_item_id)
    if isinstance(ev, Cleared):
        return server_event("input_audio_buffer.cleared")
    if isinstance(ev, Partial):
        if not partial_events:
            return None
        return server_event(f"{prefix}.partial", item_id=ev.item_id, content_index=0, transcript=ev.text,
                            voxserve={"audio_end_ms": ev.end_ms})
    if isinstance(ev, TranscriptDelta):
        return server_event(f"{prefix}.delta", item_id=ev.item_id, content_index=0, delta=ev.delta)
    if isinstance(ev, TranscriptCompleted):
        extra = {"logprobs": [{"token": lp.token, "logprob": lp.logprob, "bytes": list(lp.raw)}
                              for lp in ev.logprobs]} if ev.logprobs else {}
        return server_event(f"{prefix}.completed", item_id=ev.item_id, content_index=0, transcript=ev.text, **extra,
                            usage={"type": "duration", "seconds": round(samples_to_s(ev.end - ev.start), 3)},
                            voxserve={"latency_ms": round(ev.latency_s * 1000, 1),
                                      **({"speaker": ev.speaker} if ev.speaker else {})})
    if isinstance(ev, TranscriptFailed):
        return server_event(f"{prefix}.failed", item_id=ev.item_id, content_index=0,
                            error={"type": "transcription_error", "code": "transcription_failed", "message": ev.message})
    if isinstance(ev, StreamError):
        return error_event(InvalidInput(ev.message, code=ev.code), ev.event_id)
    return None
