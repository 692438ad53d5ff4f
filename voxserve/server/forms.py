"""OpenAI's multipart transcription form -> validated request fields (422 for malformed values)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from math import inf
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request

from voxserve.errors import InvalidInput
from voxserve.languages import PER_SEGMENT, language_code
from voxserve.pipelines.vad import VadParams
from voxserve.server.context import context
from voxserve.server.errors import HttpError
from voxserve.server.known_speaker_fields import MAX_REFERENCE_BYTES, NAMES, REFERENCES, check_known_fields
from voxserve.server.model_names import asr_model
from voxserve.subtitles import DEFAULT_SUBTITLES, SubtitleOptions
from voxserve.text.keyterms import parse_keyterms
from voxserve.types import Task

RESPONSE_FORMATS = ("json", "text", "srt", "verbose_json", "vtt", "diarized_json")
GRANULARITIES = ("word", "segment")


@dataclass(frozen=True)
class TranscriptionRequest:
    """What a transcription or translation request asks for: everything but its audio (a job stores it as a
    record, :func:`voxserve.records.to_record`, and runs it later as it is)."""

    model: str | None = None
    model_name: str = "whisper-1"
    language: str | None = None
    prompt: str | None = None
    response_format: str = "json"
    temperature: float = 0.0
    granularities: tuple[str, ...] = ()
    stream: bool = False
    task: Task = "transcribe"
    speakers: SpeakerFields | None = None
    vad: VadParams | None = None
    logprobs: bool = False
    subtitles: SubtitleOptions | None = None
    split_channels: bool = False
    keyterms: tuple[str, ...] = ()
    allowed_languages: tuple[str, ...] = ()


@dataclass(frozen=True)
class TranscriptionForm:
    """A parsed transcription form: the uploaded audio and the request."""

    upload: UploadFile
    request: TranscriptionRequest


@dataclass(frozen=True)
class SpeakerFields:
    """Diarization fields (voxserve extension): ``diarize=true`` or ``response_format=diarized_json``,
    optional ``num_speakers`` / ``min_speakers`` / ``max_speakers``; OpenAI's ``known_speaker_names[]`` with
    ``known_speaker_references[]`` (data URLs; none: enrolled voices of the server's library)."""

    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None
    known_names: tuple[str, ...] = ()
    known_references: tuple[str, ...] = ()


def _invalid(param: str, message: str) -> HttpError:
    return HttpError(422, message, code="invalid_value", param=param)


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(name, f"'{name}' must be a text field, not a file")
    return value.strip() or None


def _float(form: FormData, name: str, default: float, lo: float, hi: float) -> float:
    raw = _text(form, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise _invalid(name, f"'{name}' must be a number, not {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise _invalid(name, f"'{name}' must be between {lo:g} and {hi:g}")
    return value


def _bool(form: FormData, name: str) -> bool:
    raw = (_text(form, name) or "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise _invalid(name, f"'{name}' must be true or false")
    return raw in ("true", "1")


def _count(form: FormData, name: str) -> int | None:
    raw = _text(form, name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 32:
        raise _invalid(name, f"'{name}' must be a whole number between 1 and 32")
    return int(raw)


def speaker_fields(form: FormData, required: bool = False) -> SpeakerFields | None:
    """The diarization fields, or None when the request does not ask for speakers."""
    names, references = check_known_fields(_values(form, NAMES), _values(form, REFERENCES))
    wanted = required or _bool(form, "diarize") or _text(form, "response_format") == "diarized_json" or names
    if not wanted:
        return None
    return SpeakerFields(_count(form, "num_speakers"), _count(form, "min_speakers"), _count(form, "max_speakers"),
                         names, references)


def _logprobs_included(form: FormData) -> bool:
    """OpenAI's ``include[]``: only ``logprobs`` exists (for json; voxserve also gives them in verbose_json)."""
    values = [v for key in ("include[]", "include") for v in form.getlist(key)]
    for v in values:
        if v != "logprobs":
            raise _invalid("include", "include may only hold 'logprobs'")
    return bool(values)


def _granularities(form: FormData) -> tuple[str, ...]:
    values = [v for key in ("timestamp_granularities[]", "timestamp_granularities") for v in form.getlist(key)]
    out = []
    for v in values:
        if not isinstance(v, str) or v not in GRANULARITIES:
            raise _invalid("timestamp_granularities", "timestamp_granularities must be 'word' and/or 'segment'")
        out.append(v)
    return tuple(dict.fromkeys(out))


async def parse_form(request: Request) -> tuple[FormData, UploadFile]:
    """The multipart form and its uploaded ``file`` (spooled to disk by the parser, not held in memory)."""
    try:
        # text fields up to the largest reference data URL (known_speaker_references[])
        form = await request.form(max_files=1, max_fields=64, max_part_size=MAX_REFERENCE_BYTES * 4 // 3 + 1024)
    except HttpError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parser failure is the client's malformed body
        raise HttpError(400, f"could not parse the multipart form: {exc}", code="invalid_form") from None
    upload = form.get("file")
    if upload is None:
        raise HttpError(400, "the 'file' field is required", code="missing_file", param="file")
    if not isinstance(upload, UploadFile):
        raise _invalid("file", "'file' must be a file upload")
    return form, upload


async def read_form(request: Request, task: Task, formats: tuple[str, ...] = RESPONSE_FORMATS) -> TranscriptionForm:
    """Parse and validate a transcription form."""
    form, upload = await parse_form(request)
    model_name = _text(form, "model") or "whisper-1"
    response_format = _text(form, "response_format") or "json"
    if response_format not in formats:
        raise _invalid("response_format", f"response_format must be one of {', '.join(formats)}")
    language = _language(_text(form, "language")) if task == "transcribe" else None
    if _bool(form, "multilingual"):
        if language not in (None, PER_SEGMENT):
            raise _invalid("multilingual", "multilingual=true detects the language per segment; omit 'language'")
        language = PER_SEGMENT
    allowed = _allowed_languages(form)
    if allowed and language not in (None, PER_SEGMENT):
        raise _invalid("allowed_languages", "allowed_languages restricts a detected language; omit 'language'")
    speakers = speaker_fields(form)
    if speakers is not None and speakers.known_names and _bool(form, "split_channels"):
        raise _invalid(NAMES, "split_channels labels speakers by channel: not with known speakers")
    ctx = context(request)
    model = asr_model(ctx.settings, model_name)
    ctx.check_model(model)  # a registered name, never a path on the server
    return TranscriptionForm(upload, TranscriptionRequest(
        model=model,
        model_name=model_name,
        language=language,
        prompt=_text(form, "prompt"),
        response_format=response_format,
        temperature=_float(form, "temperature", 0.0, 0.0, 1.0),
        granularities=_granularities(form),
        stream=_bool(form, "stream"),
        task=task,
        speakers=speakers,
        vad=chunking_strategy(_text(form, "chunking_strategy")),
        logprobs=_logprobs_included(form),
        subtitles=subtitle_fields(form),
        split_channels=_bool(form, "split_channels"),
        keyterms=_keyterms(form),
        allowed_languages=allowed,
    ))


def _whole(form: FormData, name: str) -> int | None:
    raw = _text(form, name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()):  # int() refuses some Unicode digits ("²") that isdigit() takes
        raise _invalid(name, f"'{name}' must be a whole number, not {raw[:40]!r}")
    return int(raw)


def subtitle_fields(form: FormData, base: SubtitleOptions = DEFAULT_SUBTITLES) -> SubtitleOptions | None:
    """voxserve extension: how srt and vtt cues are shaped (``max_line_width``, ``max_line_count``,
    ``max_cue_duration`` in seconds, ``speaker_labels``), the fields not given as in ``base``; None when the
    form sets none of them."""
    names = ("max_line_width", "max_line_count", "max_cue_duration", "speaker_labels")
    if all(_text(form, n) is None for n in names):
        return None
    width, count = _whole(form, "max_line_width"), _whole(form, "max_line_count")
    given: dict[str, Any] = {"max_line_width": width, "max_line_count": count,
                             "max_cue_duration_s": _float(form, "max_cue_duration", base.max_cue_duration_s, 0.0, inf),
                             "speaker_labels": None if _text(form, "speaker_labels") is None
                             else _bool(form, "speaker_labels")}
    try:
        return replace(base, **{k: v for k, v in given.items() if v is not None})
    except InvalidInput as exc:
        raise _invalid(exc.param or "max_line_width", exc.message) from None


def _values(form: FormData, name: str) -> list[str]:
    """A repeatable text field's values (``name`` and ``name[]``)."""
    values = [v for key in (name, f"{name}[]") for v in form.getlist(key)]
    if not all(isinstance(v, str) for v in values):
        raise _invalid(name, f"'{name}' must be a text field, not a file")
    return [str(v) for v in values]


def _keyterms(form: FormData) -> tuple[str, ...]:
    """voxserve extension ``keyterms``: repeated fields, a JSON list or a comma-separated list (or a mix)."""
    try:
        return parse_keyterms(_values(form, "keyterms"))
    except InvalidInput as exc:
        raise _invalid("keyterms", exc.message) from None


def _allowed_languages(form: FormData) -> tuple[str, ...]:
    """voxserve extension ``allowed_languages``: codes or names, repeated fields or a comma-separated list."""
    names = [n.strip() for v in _values(form, "allowed_languages") for n in v.split(",") if n.strip()]
    codes = []
    for name in names:
        code = language_code(name)
        if code is None:
            raise HttpError(400, f"unsupported language {name!r}", code="unsupported_language",
                            param="allowed_languages")
        codes.append(code)
    return tuple(dict.fromkeys(codes))


def chunking_strategy(raw: str | None) -> VadParams | None:
    """OpenAI's ``chunking_strategy``: ``"auto"`` (the server's VAD settings) or a JSON object
    ``{"type": "server_vad", "threshold", "prefix_padding_ms", "silence_duration_ms"}``, honoured as this
    request's speech detection (prefix padding pads both sides of each speech region)."""
    if raw is None or raw.strip() in ("", "auto", '"auto"'):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        raise _invalid("chunking_strategy", "chunking_strategy must be 'auto' or a JSON object") from None
    if not isinstance(value, dict) or value.get("type") != "server_vad":
        raise _invalid("chunking_strategy", "chunking_strategy must be 'auto' or {\"type\": \"server_vad\", ...}")
    threshold = value.get("threshold", 0.5)
    pad = value.get("prefix_padding_ms", 300)
    silence = value.get("silence_duration_ms", 200)
    numbers = (isinstance(threshold, (int, float)) and isinstance(pad, int) and isinstance(silence, int)
               and not any(isinstance(v, bool) for v in (threshold, pad, silence)))
    if not numbers or not 0.0 < float(threshold) < 1.0 or not 0 <= pad <= 5000 or not 0 <= silence <= 10000:
        raise _invalid("chunking_strategy", "server_vad needs 0 < threshold < 1, prefix_padding_ms 0-5000 and "
                       "silence_duration_ms 0-10000")
    return VadParams(threshold=float(threshold), min_silence_ms=silence, speech_pad_ms=pad)


def _language(value: str | None) -> str | None:
    if value is None:
        return None
    if value.strip().lower() == PER_SEGMENT:
        return PER_SEGMENT
    code = language_code(value)
    if code is None:
        raise HttpError(400, f"unsupported language {value!r}", code="unsupported_language", param="language")
    return code
