"""One reader of OpenAI Realtime session updates, for every session kind (transcription and conversation).

An update comes in one of two shapes. GA: ``session.update`` with ``session.type``, ``session.audio.input.{format,
transcription, turn_detection, noise_reduction}`` and ``session.audio.output.{format, voice}``. Beta: flat
``input_audio_format``, ``input_audio_transcription``, ``turn_detection``, ``input_audio_noise_reduction``,
``voice`` and ``output_audio_format`` (sent as ``transcription_session.update`` to transcription sessions).
Both shapes share ``instructions``, ``include``, ``temperature``, the output token limit and voxserve's
``session.voxserve`` extensions. :func:`read_update` reads either shape into one :class:`SessionRequest`, with
one set of validation rules; each error names the field by the path the client sent. The session kinds apply
the request to their own config (``realtime_protocol.apply_update``, ``realtime_conversation``).

Only the fields an update names change, as OpenAI documents: :data:`ABSENT` marks the others. ``null`` clears
where OpenAI clears with it (turn detection, noise reduction, the transcription language and prompt); ``null``
in a number, a flag or a choice counts as not given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Final, Literal, TypeAlias, TypeVar

from voxserve.errors import InvalidInput
from voxserve.languages import language_code
from voxserve.text.keyterms import parse_keyterms

Shape = Literal["ga", "beta"]
SessionKind = Literal["transcription", "realtime"]
T = TypeVar("T")

FORMATS = {"pcm16": ("pcm16", 24000), "g711_ulaw": ("ulaw", 8000), "g711_alaw": ("alaw", 8000)}
"""Beta format names -> (encoding, sample rate)."""
GA_FORMATS = {"audio/pcm": "pcm16", "audio/pcmu": "ulaw", "audio/pcma": "alaw"}
"""GA format types -> encoding."""
EAGERNESS_MS = {"high": 300, "medium": 500, "auto": 500, "low": 900}
"""``semantic_vad`` eagerness -> the silence that ends a turn (served by the server VAD)."""
LOGPROBS = "item.input_audio_transcription.logprobs"
"""The one value ``include`` may hold."""

_BETA_EVENT = "transcription_session.update"
_BETA_KEYS = ("voice", "input_audio_format", "output_audio_format", "modalities", "input_audio_transcription",
              "turn_detection", "input_audio_noise_reduction", "input_sample_rate")
_WRONG_TYPE = {
    "transcription": "this socket is a transcription session (intent=transcription)",
    "realtime": "this socket is a conversation session: use type 'realtime' (or connect with ?intent=transcription)",
}


class ProtocolError(InvalidInput):
    """A client event that cannot be used; reported as an ``error`` event, the session goes on."""


class Absent(Enum):
    """The type of :data:`ABSENT`."""

    ABSENT = "absent"


ABSENT: Final = Absent.ABSENT
"""A field the update does not name (the session keeps its value)."""
Maybe: TypeAlias = T | Literal[Absent.ABSENT]


def keep(asked: Maybe[T], current: T) -> T:
    """The asked value, or ``current`` when the update does not name the field."""
    return current if asked is ABSENT else asked


@dataclass(frozen=True)
class AudioFormat:
    """An audio format asked for: ``encoding`` None when only a PCM rate was (beta ``input_sample_rate``)."""

    encoding: str | None  # pcm16 | ulaw | alaw
    rate: int


def audio_format(asked: Maybe[AudioFormat], encoding: str, rate: int) -> tuple[str, int]:
    """(encoding, sample rate) after the request, for a session now at ``encoding`` and ``rate``."""
    if asked is ABSENT:
        return encoding, rate
    if asked.encoding is not None:
        return asked.encoding, asked.rate
    return (encoding, asked.rate) if encoding == "pcm16" else (encoding, rate)  # G.711 stays 8 kHz


def beta_format(encoding: str) -> str:
    """The beta name of an encoding."""
    return {"ulaw": "g711_ulaw", "alaw": "g711_alaw"}.get(encoding, "pcm16")


def ga_format(encoding: str, rate: int) -> dict[str, Any]:
    """The GA format object of an encoding (only PCM names a rate)."""
    kind = {"ulaw": "audio/pcmu", "alaw": "audio/pcma"}.get(encoding, "audio/pcm")
    return {"type": kind, "rate": rate} if kind == "audio/pcm" else {"type": kind}


@dataclass(frozen=True)
class TurnRequest:
    """``turn_detection`` as asked (an object; ``null`` is a :class:`SessionRequest` field of None)."""

    kind: str = "server_vad"  # server_vad | semantic_vad
    threshold: Maybe[float] = ABSENT
    prefix_padding_ms: Maybe[int] = ABSENT
    silence_duration_ms: Maybe[int] = ABSENT
    eagerness: Maybe[str] = ABSENT  # semantic_vad only
    create_response: Maybe[bool] = ABSENT
    interrupt_response: Maybe[bool] = ABSENT

    def silence_ms(self, current: int) -> int:
        """The silence that ends a turn: as given, else by ``semantic_vad``'s eagerness, else ``current``."""
        if self.silence_duration_ms is not ABSENT:
            return self.silence_duration_ms
        if self.kind == "semantic_vad":
            return EAGERNESS_MS[keep(self.eagerness, "auto")]
        return current


@dataclass(frozen=True)
class TranscriptionRequest:
    """The input transcription settings asked for (``language`` None: detect it; ``prompt`` None: none)."""

    model: Maybe[str] = ABSENT
    language: Maybe[str | None] = ABSENT
    prompt: Maybe[str | None] = ABSENT
    keyterms: Maybe[tuple[str, ...]] = ABSENT


@dataclass(frozen=True)
class Extensions:
    """``session.voxserve``: voxserve's own settings (each session kind applies those it has)."""

    partial_events: Maybe[bool] = ABSENT
    partial_interval_ms: Maybe[int] = ABSENT
    speakers: Maybe[bool] = ABSENT
    known_speakers: Maybe[tuple[str, ...]] = ABSENT  # speakers: {"known": [names]} (then speakers is True)
    audio_events: Maybe[str] = ABSENT  # ga | beta
    incomplete_silence_ms: Maybe[int] = ABSENT
    speculative: Maybe[bool] = ABSENT


@dataclass(frozen=True)
class SessionRequest:
    """What one session update asks for, whichever shape it came in.

    ``shape`` is None when the update names nothing of either shape. ``voice`` None: the server's voice;
    ``turn_detection`` None: no server turn detection; ``noise_reduction`` None: off; ``max_output_tokens``
    None: ``"inf"`` (the server's limit).
    """

    shape: Shape | None = None
    instructions: Maybe[str] = ABSENT
    input_format: Maybe[AudioFormat] = ABSENT
    output_format: Maybe[AudioFormat] = ABSENT
    voice: Maybe[str | None] = ABSENT
    transcription: TranscriptionRequest = TranscriptionRequest()
    turn_detection: Maybe[TurnRequest | None] = ABSENT
    noise_reduction: Maybe[str | None] = ABSENT
    logprobs: Maybe[bool] = ABSENT
    max_output_tokens: Maybe[int | None] = ABSENT
    temperature: Maybe[float] = ABSENT
    voxserve: Extensions = Extensions()


# -------------------------------------------------------------------------------------------- reading


def read_update(event: dict[str, Any], kind: SessionKind) -> SessionRequest:
    """What a ``session.update`` (or ``transcription_session.update``) of either shape asks of a session of
    ``kind``; a :class:`ProtocolError` naming the field otherwise."""
    s = event.get("session")
    if not isinstance(s, dict):
        raise ProtocolError(f"{event.get('type')} needs a 'session' object", code="invalid_session", param="session")
    if "type" in s and s["type"] != kind:
        raise ProtocolError(_WRONG_TYPE[kind], code="invalid_session_type", param="session.type")
    shape = _shape(event.get("type"), s)
    asked = _read_beta(s) if shape == "beta" else _read_ga(s)
    return replace(
        asked,
        shape=shape,
        instructions=text_value(s["instructions"], "session.instructions") if "instructions" in s else ABSENT,
        logprobs=_include(s),
        max_output_tokens=_max_tokens(s),
        temperature=_number(s, "temperature", 0.0, 2.0, "session"),
        voxserve=_extensions(_object(s, "voxserve", "session"), "session.voxserve"),
    )


def _shape(event_type: Any, s: dict[str, Any]) -> Shape | None:
    """Beta for ``transcription_session.update`` or flat beta fields without ``audio``; GA for ``audio`` or
    ``type``; None when the update has nothing of either (instructions only, say)."""
    if event_type == _BETA_EVENT:
        return "beta"
    if "audio" in s:
        return "ga"
    if any(key in s for key in _BETA_KEYS):
        return "beta"
    return "ga" if "type" in s else None


def _read_ga(s: dict[str, Any]) -> SessionRequest:
    if "turn_detection" in s:
        raise ProtocolError("put turn_detection under session.audio.input", code="invalid_session",
                            param="session.turn_detection")
    audio = _object(s, "audio", "session")
    inp, out = _object(audio, "input", "session.audio"), _object(audio, "output", "session.audio")
    return SessionRequest(
        input_format=_ga_format(inp, "format", "session.audio.input"),
        transcription=_transcription(inp, "transcription", "session.audio.input"),
        turn_detection=_turn(inp, "turn_detection", "session.audio.input"),
        noise_reduction=_noise(inp, "noise_reduction", "session.audio.input"),
        output_format=_ga_format(out, "format", "session.audio.output"),
        voice=_voice(out, "session.audio.output"),
    )


def _read_beta(s: dict[str, Any]) -> SessionRequest:
    return SessionRequest(
        input_format=_beta_input_format(s),
        transcription=_transcription(s, "input_audio_transcription", "session"),
        turn_detection=_turn(s, "turn_detection", "session"),
        noise_reduction=_noise(s, "input_audio_noise_reduction", "session"),
        output_format=_beta_format(s, "output_audio_format"),
        voice=_voice(s, "session"),
    )


def _object(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``parent[key]`` as an object (``{}`` when absent or null), else ``invalid_session``."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}.{key} must be an object", code="invalid_session", param=f"{where}.{key}")
    return value


def _ga_format(parent: dict[str, Any], key: str, where: str) -> Maybe[AudioFormat]:
    fmt, param = parent.get(key), f"{where}.{key}"
    if fmt is None:
        return ABSENT
    kind = fmt.get("type", "audio/pcm") if isinstance(fmt, dict) else None
    if not isinstance(kind, str) or kind not in GA_FORMATS:
        raise ProtocolError(f"audio format must be an object with type {', '.join(GA_FORMATS)}", code="invalid_format",
                            param=param)
    encoding = GA_FORMATS[kind]
    if encoding != "pcm16":
        return AudioFormat(encoding, 8000)  # G.711 is 8 kHz whatever the rate says
    return AudioFormat(encoding, _pcm_rate(fmt.get("rate", 24000), f"{param}.rate"))


def _beta_format(s: dict[str, Any], key: str) -> Maybe[AudioFormat]:
    if key not in s:
        return ABSENT
    fmt = s[key]
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ProtocolError(f"{key} must be one of {', '.join(FORMATS)}", code="invalid_format", param=f"session.{key}")
    return AudioFormat(*FORMATS[fmt])


def _beta_input_format(s: dict[str, Any]) -> Maybe[AudioFormat]:
    """``input_audio_format`` with voxserve's ``input_sample_rate`` (16 kHz PCM; G.711 ignores it)."""
    fmt = _beta_format(s, "input_audio_format")
    if "input_sample_rate" not in s or (fmt is not ABSENT and fmt.encoding != "pcm16"):
        return fmt
    rate = _pcm_rate(s["input_sample_rate"], "session.input_sample_rate")
    return AudioFormat(None if fmt is ABSENT else fmt.encoding, rate)


def _pcm_rate(value: Any, param: str) -> int:
    if value not in (16000, 24000):
        raise ProtocolError("PCM audio must be at 24000 or 16000 Hz", code="invalid_rate", param=param)
    return int(value)


def _transcription(parent: dict[str, Any], key: str, where: str) -> TranscriptionRequest:
    t, here = parent.get(key), f"{where}.{key}"
    if t is None:
        return TranscriptionRequest()
    if not isinstance(t, dict):
        raise ProtocolError("transcription settings must be an object", code="invalid_transcription", param=here)
    return TranscriptionRequest(model=_model(t, here), language=_language(t, here), prompt=_prompt(t, here),
                                keyterms=_keyterms(t, here))


def _model(t: dict[str, Any], where: str) -> Maybe[str]:
    """The transcription model (null or empty: the session's stays)."""
    value = t.get("model")
    if value is None or value == "":
        return ABSENT
    if not isinstance(value, str):
        raise ProtocolError("model must be a string", code="invalid_value", param=f"{where}.model")
    return value


def _language(t: dict[str, Any], where: str) -> Maybe[str | None]:
    """The language as a code (null or empty: detect it)."""
    if "language" not in t:
        return ABSENT
    value = t["language"]
    if value is None or value == "":
        return None
    code = language_code(str(value))
    if code is None:
        raise ProtocolError(f"unsupported language {value!r}", code="unsupported_language", param=f"{where}.language")
    return code


def _prompt(t: dict[str, Any], where: str) -> Maybe[str | None]:
    if "prompt" not in t:
        return ABSENT
    value = t["prompt"]
    if value is not None and not isinstance(value, str):
        raise ProtocolError("prompt must be a string", code="invalid_prompt", param=f"{where}.prompt")
    return value or None


def _keyterms(t: dict[str, Any], where: str) -> Maybe[tuple[str, ...]]:
    """voxserve extension: words and names to favour, a list of strings (null: none)."""
    if "keyterms" not in t:
        return ABSENT
    value = t["keyterms"]
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError("keyterms must be a list of strings", code="invalid_value", param=f"{where}.keyterms")
    try:
        return parse_keyterms(value)
    except InvalidInput as exc:
        raise ProtocolError(exc.message, code="invalid_value", param=f"{where}.keyterms") from None


def _turn(parent: dict[str, Any], key: str, where: str) -> Maybe[TurnRequest | None]:
    if key not in parent:
        return ABSENT
    td, here = parent[key], f"{where}.{key}"
    if td is None:
        return None
    kind = td.get("type", "server_vad") if isinstance(td, dict) else None
    if kind not in ("server_vad", "semantic_vad"):
        raise ProtocolError("turn_detection must be null or {type: server_vad | semantic_vad, ...}",
                            code="invalid_turn_detection", param=here)
    return TurnRequest(
        kind=str(kind),
        threshold=_number(td, "threshold", 0.01, 0.99, here),
        prefix_padding_ms=_int(td, "prefix_padding_ms", 0, 5000, here),
        silence_duration_ms=_int(td, "silence_duration_ms", 50, 10_000, here),
        eagerness=_choice(td, "eagerness", tuple(EAGERNESS_MS), here) if kind == "semantic_vad" else ABSENT,
        create_response=_flag(td, "create_response", here),
        interrupt_response=_flag(td, "interrupt_response", here),
    )


def _noise(parent: dict[str, Any], key: str, where: str) -> Maybe[str | None]:
    """Noise reduction (``null`` or ``{"type": "near_field" | "far_field"}``): accepted and echoed."""
    if key not in parent:
        return ABSENT
    value = parent[key]
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in ("near_field", "far_field"):
        raise ProtocolError("noise_reduction must be null or {type: near_field | far_field}",
                            code="invalid_noise_reduction", param=f"{where}.{key}")
    return str(value["type"])


def _voice(parent: dict[str, Any], where: str) -> Maybe[str | None]:
    if "voice" not in parent:
        return ABSENT
    return text_value(parent["voice"], f"{where}.voice") or None


def _include(s: dict[str, Any]) -> Maybe[bool]:
    """``include``: only the transcription's logprobs can be asked for."""
    if "include" not in s:
        return ABSENT
    include = s["include"] or []
    if not isinstance(include, list) or any(v != LOGPROBS for v in include):
        raise ProtocolError(f"include may only hold {LOGPROBS!r}", code="invalid_include", param="session.include")
    return bool(include)


def _max_tokens(s: dict[str, Any]) -> Maybe[int | None]:
    """GA ``max_output_tokens`` or beta ``max_response_output_tokens``: 1-4096 or ``"inf"``."""
    for key in ("max_output_tokens", "max_response_output_tokens"):
        if s.get(key) is not None:
            return None if s[key] == "inf" else _int(s, key, 1, 4096, "session")
    return ABSENT


def _extensions(x: dict[str, Any], where: str) -> Extensions:
    speakers, known = _speakers(x, where)
    return Extensions(
        partial_events=_flag(x, "partial_events", where),
        partial_interval_ms=_int(x, "partial_interval_ms", 0, 10_000, where),
        speakers=speakers,
        known_speakers=known,
        audio_events=_choice(x, "audio_events", ("ga", "beta"), where),
        incomplete_silence_ms=_int(x, "incomplete_silence_ms", 0, 10_000, where),
        speculative=_flag(x, "speculative", where),
    )


MAX_KNOWN_SPEAKERS = 16
"""The most enrolled voices one live session may name (as a request of the HTTP API)."""


def _speakers(x: dict[str, Any], where: str) -> tuple[Maybe[bool], Maybe[tuple[str, ...]]]:
    """``speakers``: true / false (labels ``A``, ``B``, ... or none), or ``{"known": [names]}``: labels, and the
    enrolled voices of the server's library (``/v1/voices/enrolled``) an utterance may be named after. A flag
    clears the known names; the names' shape is checked here, that they are enrolled by the session."""
    value = x.get("speakers")
    if not isinstance(value, dict):
        return _flag(x, "speakers", where), (ABSENT if value is None else ())
    here = f"{where}.speakers"
    unknown = sorted(set(value) - {"known"})
    if unknown:
        raise ProtocolError(f"speakers takes only 'known', not {', '.join(map(repr, unknown))}", code="invalid_value",
                            param=f"{here}.{unknown[0]}")
    names = value.get("known") or []
    here = f"{here}.known"
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ProtocolError("known must be a list of enrolled voice names", code="invalid_value", param=here)
    names = [n.strip() for n in names]
    if len(names) > MAX_KNOWN_SPEAKERS:
        raise ProtocolError(f"at most {MAX_KNOWN_SPEAKERS} known speakers", code="invalid_value", param=here)
    if any(not n or len(n) > 100 for n in names):
        raise ProtocolError("known speaker names must be 1-100 characters", code="invalid_value", param=here)
    if len(set(names)) != len(names):
        raise ProtocolError("known speaker names must differ", code="invalid_value", param=here)
    return True, tuple(names)


# ----------------------------------------------------------------------------------------- field checks


def text_value(value: Any, where: str) -> str:
    """``value`` as a string, else ``invalid_value`` for the field at ``where``."""
    if not isinstance(value, str):
        raise ProtocolError(f"{where} must be a string", code="invalid_value", param=where)
    return value


def _int(d: dict[str, Any], key: str, lo: int, hi: int, where: str) -> Maybe[int]:
    value = d.get(key)
    if value is None:
        return ABSENT
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ProtocolError(f"{key} must be an integer between {lo} and {hi}", code="invalid_value", param=f"{where}.{key}")
    return value


def _number(d: dict[str, Any], key: str, lo: float, hi: float, where: str) -> Maybe[float]:
    value = d.get(key)
    if value is None:
        return ABSENT
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= float(value) <= hi:
        raise ProtocolError(f"{key} must be a number between {lo} and {hi}", code="invalid_value", param=f"{where}.{key}")
    return float(value)


def _flag(d: dict[str, Any], key: str, where: str) -> Maybe[bool]:
    value = d.get(key)
    if value is None:
        return ABSENT
    if not isinstance(value, bool):
        raise ProtocolError(f"{key} must be true or false", code="invalid_value", param=f"{where}.{key}")
    return value


def _choice(d: dict[str, Any], key: str, choices: tuple[str, ...], where: str) -> Maybe[str]:
    value = d.get(key)
    if value is None:
        return ABSENT
    if not isinstance(value, str) or value not in choices:
        raise ProtocolError(f"{key} must be one of {', '.join(choices)}", code="invalid_value", param=f"{where}.{key}")
    return value
