"""OpenAI-compatible ``POST /v1/audio/speech`` (audio streamed as it is made, or SSE) and
``GET /v1/audio/voices``. Needs ``voxserve[tts]``."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import ExitStack
from typing import Any

import numpy as np
from fastapi import APIRouter
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from voxserve.audio.pcm import pcm16_to_float32
from voxserve.audio.resample import StreamResampler
from voxserve.audio.stream_encode import CONTENT_TYPES, STREAM_FORMATS, StreamEncoder
from voxserve.errors import InvalidInput
from voxserve.server.context import context
from voxserve.server.errors import HttpError
from voxserve.server.http_asr import require_ready
from voxserve.streaming.tts import SpeakOptions, TtsStream
from voxserve.text.speakable import has_speech

router = APIRouter()
MAX_BODY_CHARS = 1_000_000


def _invalid(param: str, message: str) -> HttpError:
    return HttpError(422, message, code="invalid_value", param=param)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_CHARS * 4:
        raise HttpError(413, "request body too large", code="input_too_long", param="input")
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        raise HttpError(400, "the body must be JSON", code="invalid_json") from None
    if not isinstance(body, dict):
        raise HttpError(400, "the body must be a JSON object", code="invalid_json")
    return body


def _speech_request(body: dict[str, Any]) -> tuple[str, str | None, str, str, float]:
    """(text, voice, response_format, stream_format, speed) from an OpenAI speech request (``sample_rate``
    and ``pronunciations``, voxserve extensions, are read by :func:`_output_rate` and :func:`_pronunciations`;
    ``input`` starting with ``<speak>`` is SSML)."""
    text = body.get("input")
    if not isinstance(text, str):
        raise HttpError(400, "'input' (the text to speak) is required", code="missing_input", param="input")
    if not has_speech(text):
        raise InvalidInput("input has nothing to say (no letters or digits)", param="input", code="empty_input")
    voice = body.get("voice")
    if voice is not None and not isinstance(voice, str):
        raise _invalid("voice", "'voice' must be a string")
    fmt = body.get("response_format", "mp3")
    if fmt not in STREAM_FORMATS:
        raise _invalid("response_format", f"response_format must be one of {', '.join(STREAM_FORMATS)}")
    stream_format = body.get("stream_format", "audio")
    if stream_format not in ("audio", "sse"):
        raise _invalid("stream_format", "stream_format must be 'audio' or 'sse'")
    speed = body.get("speed", 1.0)
    if not isinstance(speed, (int, float)) or isinstance(speed, bool) or not 0.25 <= float(speed) <= 4.0:
        raise _invalid("speed", "speed must be a number between 0.25 and 4.0")
    return text, voice, str(fmt), str(stream_format), float(speed)


def _pronunciations(body: dict[str, Any]) -> dict[str, str]:
    """The request's ``pronunciations`` (word or phrase -> respelling), checked when the stream opens."""
    value = body.get("pronunciations", {})
    if not isinstance(value, dict):
        raise _invalid("pronunciations", "pronunciations must be an object of word -> respelling")
    return value


INCLUDES = ("word_timestamps",)


def wants_words(include: Any) -> bool:
    """Whether an ``include`` (voxserve extension of speech requests and the speech socket's session) asks for
    ``word_timestamps``.

    Raises:
        InvalidInput: (``param="include"``) not a list of known values.
    """
    if not isinstance(include, list) or not all(isinstance(v, str) and v in INCLUDES for v in include):
        raise InvalidInput(f"include must be a list of: {', '.join(INCLUDES)}", param="include", code="invalid_value")
    return "word_timestamps" in include


def words_json(words: Any) -> list[dict[str, Any]]:
    """Words as JSON: text and start/end seconds of the output audio."""
    return [{"word": w.text, "start": round(w.start_s, 3), "end": round(w.end_s, 3)} for w in words]


def _output_rate(body: dict[str, Any], default: int, voice_rate: int) -> int:
    """The rate the response is sent at: the request's ``sample_rate``, else the server's (OpenAI: 24 kHz)."""
    rate = body.get("sample_rate", default)
    if not isinstance(rate, int) or isinstance(rate, bool) or not (rate == 0 or 8000 <= rate <= 48000):
        raise _invalid("sample_rate", "sample_rate must be an integer from 8000 to 48000 (or 0: the voice's own)")
    return rate or voice_rate


@router.post("/v1/audio/speech")
async def speech(request: Request) -> Response:
    """Synthesize ``input`` with ``voice``; the body streams while synthesis runs."""
    ctx = context(request)
    hold = ExitStack()
    try:
        require_ready(ctx)
        hold.enter_context(ctx.limiter.hold(ctx.client(request)))
        body = await _body(request)
        text, voice, fmt, stream_format, speed = _speech_request(body)
        timed = wants_words(body.get("include", []))
        tts = ctx.vox.tts()
        info = tts.voice_info(voice)
        rate = _output_rate(body, ctx.settings.tts.http_sample_rate, info.sample_rate)
        options = SpeakOptions(speed=speed, pronunciations=_pronunciations(body))
        stream = tts.stream(voice, options)  # admission: Overloaded -> 503
        try:
            stream.push_text(text)
            stream.end_input()
        except BaseException:
            await stream.aclose()
            raise
        first = await _first_chunk(stream)  # errors before any byte is sent (malformed SSML) get a status code
        slot = hold.pop_all()  # released when the body ends, or the client goes away
        encoded = _encoded(_chunks(first, stream, slot), fmt, info.sample_rate, rate)
        if timed and stream_format == "audio":
            return await _envelope(encoded, fmt, rate)
        out = _sse(encoded, timed) if stream_format == "sse" else (data async for data, _, _ in encoded if data)
        media = "text/event-stream" if stream_format == "sse" else CONTENT_TYPES[fmt]
        return StreamingResponse(out, media_type=media, background=BackgroundTask(_finish, stream, slot),
                                 headers={"X-Voxserve-Voice": info.name, "X-Voxserve-Sample-Rate": str(rate),
                                          "Cache-Control": "no-cache"})
    finally:
        hold.close()


async def _first_chunk(stream: TtsStream) -> Any:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None
    except BaseException:
        await stream.aclose()
        raise


async def _finish(stream: TtsStream, slot: ExitStack) -> None:
    await stream.aclose()
    slot.close()


async def _chunks(first: Any, stream: TtsStream, slot: ExitStack) -> AsyncIterator[Any]:
    """The stream's chunks (the first already taken); closes the stream and frees the slot at the end."""
    try:
        if first is not None:
            yield first
            async for chunk in stream:
                yield chunk
    finally:
        await _finish(stream, slot)


async def _envelope(encoded: AsyncIterator[tuple[bytes, int, Any]], fmt: str, rate: int) -> Response:
    """A whole response with ``include``: JSON with the audio (base64, in ``fmt``) and the words."""
    audio, words = bytearray(), []
    async for data, _, chunk_words in encoded:
        audio += data
        words += words_json(chunk_words)
    return JSONResponse({"audio": base64.b64encode(bytes(audio)).decode(), "format": fmt, "sample_rate": rate,
                         "words": words})


async def _encoded(
    chunks: AsyncIterator[Any], fmt: str, voice_rate: int, rate: int
) -> AsyncIterator[tuple[bytes, int, Any]]:
    """The response's bytes as they are ready, in ``fmt`` at ``rate`` (resampled once, here at the edge),
    each with the number of output samples it adds and the words that start in the chunk it came from
    (seconds, which resampling leaves as they are)."""
    resampler = StreamResampler(voice_rate, rate) if rate != voice_rate else None
    encoder = StreamEncoder(fmt, rate)
    async for chunk in chunks:
        audio = pcm16_to_float32(chunk.pcm16())
        if resampler is not None:
            audio = resampler.push(audio)
        data = encoder.push(audio)
        if data or chunk.words:
            yield data, len(audio), chunk.words
    tail = resampler.flush() if resampler is not None else np.zeros(0, np.float32)
    yield encoder.push(tail) + encoder.finish(), len(tail), ()


async def _sse(encoded: AsyncIterator[tuple[bytes, int, Any]], timed: bool = False) -> AsyncIterator[bytes]:
    """OpenAI's speech SSE: ``speech.audio.delta`` events (base64 audio in the requested format, at the
    response's rate), then ``speech.audio.done``; with ``timed`` a ``speech.audio.words`` event (voxserve
    extension) goes before the delta that holds its words' first audio."""
    samples = 0
    async for data, n, words in encoded:
        samples += n
        if timed and words:
            yield f"data: {json.dumps({'type': 'speech.audio.words', 'words': words_json(words)})}\n\n".encode()
        if data:
            event = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}
            yield f"data: {json.dumps(event)}\n\n".encode()
    done = {"type": "speech.audio.done", "usage": {"output_audio_samples": samples}}
    yield f"data: {json.dumps(done)}\n\n".encode()


@router.get("/v1/audio/voices")
async def voices(request: Request) -> Response:
    """The voices this server speaks with (the default first)."""
    ctx = context(request)
    ctx.client(request)
    return JSONResponse({"object": "list", "data": [_voice(v) for v in ctx.vox.tts().voices()]})


def _voice(v: Any) -> dict[str, Any]:
    return {"id": v.name, "object": "voice", "language": v.language, "sample_rate": v.sample_rate,
            "backend": v.backend, "description": v.description}
