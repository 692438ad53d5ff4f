"""The OpenAI Realtime protocol (transcription sessions): client events in, server events out.

Pure functions and small frozen types, no sockets. Both session shapes are accepted (read by
:mod:`voxserve.server.realtime_session`, as for conversation sessions): the GA one (``session.update`` with
``session.audio.input.{format, transcription, turn_detection}``) and the beta one (``transcription_session.update``
with ``input_audio_format``, ``input_audio_transcription``, ``turn_detection``). voxserve extensions: PCM at 16 kHz (``rate: 16000`` / ``input_sample_rate``) and, under
``session.voxserve``, ``partial_events`` (revisable ``...input_audio_transcription.partial`` events),
``partial_interval_ms`` and ``speakers`` (a speaker label in each completed event's ``voxserve`` block; with
``{"known": [names]}`` utterances of those enrolled voices carry their names).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from dataclasses import dataclass, field, replace
from typing import Any

from voxserve.errors import InvalidInput
from voxserve.server.realtime_session import (
    ABSENT,
    LOGPROBS,
    Maybe,
    TurnRequest,
    audio_format,
    beta_format,
    ga_format,
    keep,
    read_update,
)
from voxserve.server.realtime_session import (
    ProtocolError as ProtocolError,  # the protocol's error type, defined with the session reader
)
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
    keyterms: tuple[str, ...] = ()  # voxserve extension, added to the server's asr.keyterms
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    partial_events: bool = False
    partial_interval_ms: int = 600
    speakers: bool = False
    known_speakers: tuple[str, ...] = ()  # voxserve extension: enrolled voices utterances may be named after
    logprobs: bool = False  # include: ["item.input_audio_transcription.logprobs"]
    noise_reduction: str | None = None  # accepted and reported; no denoiser is applied (see docs/compatibility.md)
    shape: str = "ga"  # which protocol shape the client speaks: ga | beta

    def public(self, session_id: str) -> dict[str, Any]:
        """The session object as the server reports it, in the client's shape."""
        td = None if self.turn_detection is None else {"type": "server_vad", **self.turn_detection.__dict__}
        transcription: dict[str, Any] = {"model": self.model, "language": self.language, "prompt": self.prompt or ""}
        if self.keyterms:
            transcription["keyterms"] = list(self.keyterms)
        include = [LOGPROBS] if self.logprobs else []
        noise = None if self.noise_reduction is None else {"type": self.noise_reduction}
        speakers: bool | dict[str, list[str]] = {"known": list(self.known_speakers)} if self.known_speakers else self.speakers
        ext = {"partial_events": self.partial_events, "partial_interval_ms": self.partial_interval_ms,
               "speakers": speakers}
        if self.shape == "beta":
            return {"id": session_id, "object": "realtime.transcription_session",
                    "input_audio_format": beta_format(self.encoding),
                    "input_sample_rate": self.sample_rate, "input_audio_transcription": transcription,
                    "turn_detection": td, "input_audio_noise_reduction": noise, "include": include, "voxserve": ext}
        return {"id": session_id, "object": "realtime.transcription_session", "type": "transcription",
                "audio": {"input": {"format": ga_format(self.encoding, self.sample_rate),
                                    "transcription": transcription, "turn_detection": td,
                                    "noise_reduction": noise}},
                "include": include, "voxserve": ext}


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
    """A new session config from ``session.update`` or ``transcription_session.update`` of either shape, read by
    :func:`~voxserve.server.realtime_session.read_update`. An update that names nothing of either shape is
    GA unless it is ``transcription_session.update`` (the beta event of transcription sessions)."""
    asked = read_update(event, "transcription")
    t, x = asked.transcription, asked.voxserve
    encoding, rate = audio_format(asked.input_format, config.encoding, config.sample_rate)
    return replace(
        config,
        encoding=encoding,
        sample_rate=rate,
        model=keep(t.model, config.model),
        language=keep(t.language, config.language),
        prompt=keep(t.prompt, config.prompt),
        keyterms=keep(t.keyterms, config.keyterms),
        turn_detection=_turn_detection(asked.turn_detection, config.turn_detection),
        noise_reduction=keep(asked.noise_reduction, config.noise_reduction),
        logprobs=keep(asked.logprobs, config.logprobs),
        partial_events=keep(x.partial_events, config.partial_events),
        partial_interval_ms=keep(x.partial_interval_ms, config.partial_interval_ms),
        speakers=keep(x.speakers, config.speakers),
        known_speakers=keep(x.known_speakers, config.known_speakers),
        shape=asked.shape or "ga",
    )


def _turn_detection(asked: Maybe[TurnRequest | None], current: TurnDetection | None) -> TurnDetection | None:
    """The server VAD after the request: the fields it names change (``semantic_vad`` is served as server VAD
    with its eagerness as the silence), the others keep their value (or the default when it was off)."""
    if asked is ABSENT:
        return current
    if asked is None:
        return None
    base = current or TurnDetection()
    return TurnDetection(threshold=keep(asked.threshold, base.threshold),
                         prefix_padding_ms=keep(asked.prefix_padding_ms, base.prefix_padding_ms),
                         silence_duration_ms=asked.silence_ms(base.silence_duration_ms))


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
