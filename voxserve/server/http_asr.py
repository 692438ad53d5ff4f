"""OpenAI-compatible ``/v1/audio/transcriptions`` and ``/v1/audio/translations`` (plain and SSE)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import ExitStack
from typing import Any

from fastapi import APIRouter
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from voxserve.errors import InvalidInput
from voxserve.formats import render, to_diarized_json, to_logprobs, to_verbose_json
from voxserve.pipelines.long_asr import LongAsrOptions
from voxserve.server.context import ServerContext, context
from voxserve.server.errors import HttpError, error_response
from voxserve.server.forms import TranscriptionForm, TranscriptionRequest, read_form
from voxserve.server.known_speaker_fields import known_speakers
from voxserve.subtitles import SubtitleOptions
from voxserve.types import Transcript

router = APIRouter()
_TEXT_TYPES = {"text": "text/plain", "srt": "application/x-subrip", "vtt": "text/vtt"}


@router.post("/v1/audio/transcriptions")
async def transcriptions(request: Request) -> Response:
    """Transcribe an uploaded file (OpenAI's multipart fields)."""
    return await _handle(request, "transcribe")


@router.post("/v1/audio/translations")
async def translations(request: Request) -> Response:
    """Translate an uploaded file's speech to English text."""
    return await _handle(request, "translate")


async def _handle(request: Request, task: str) -> Response:
    ctx = context(request)
    hold = ExitStack()
    try:
        require_ready(ctx)
        hold.enter_context(ctx.limiter.hold(ctx.client(request)))
        form = await read_form(request, task)  # type: ignore[arg-type]
        req = form.request
        if req.stream:
            return _stream(ctx, form, hold.pop_all())
        transcript = await _transcribe(ctx, form)
        return respond(transcript, req.response_format, req.granularities, logprobs=req.logprobs,
                       subtitles=req.subtitles)
    finally:
        hold.close()


def options_for(ctx: ServerContext, req: TranscriptionRequest, max_audio_s: float) -> LongAsrOptions:
    """Pipeline options for a request (word timing only when the answer needs times)."""
    return ctx.vox.long_options(
        language=req.language,
        task=req.task,
        prompt=req.prompt,
        temperature=req.temperature,
        word_timestamps=req.logprobs or req.speakers is not None or req.response_format in ("srt", "vtt", "verbose_json"),
        max_duration_s=max_audio_s,
        vad=req.vad,
        keyterms=req.keyterms,
        allowed_languages=req.allowed_languages,
    )


async def _transcribe(ctx: ServerContext, form: TranscriptionForm, on_text: Any = None) -> Transcript:
    ctx.metrics.inflight.inc()
    try:
        transcript = await transcribe_source(ctx, form.request, form.upload.file,
                                             ctx.settings.server.max_sync_audio_s, on_text)
    finally:
        ctx.metrics.inflight.dec()
        await form.upload.close()
    ctx.metrics.on_transcript(transcript, form.request.model_name, form.request.task)
    return transcript


async def transcribe_source(
    ctx: ServerContext, req: TranscriptionRequest, source: Any, max_audio_s: float, on_text: Any = None,
    progress: Any = None,
) -> Transcript:
    """Transcribe (with speakers when the request asks for them) a file path or file object."""
    options = options_for(ctx, req, max_audio_s)
    if req.split_channels:  # one speaker a channel: the channels are the speakers (no diarization)
        return await ctx.vox.atranscribe(source, options, split_channels=True, model=req.model, progress=progress)
    if req.speakers is None:
        return await ctx.vox.atranscribe(source, options, model=req.model, on_text=on_text, progress=progress)
    sp = req.speakers
    diarize = ctx.vox.diarize_options(num_speakers=sp.num_speakers, min_speakers=sp.min_speakers,
                                      max_speakers=sp.max_speakers, max_duration_s=max_audio_s,
                                      known_speakers=await known_speakers(ctx, sp.known_names, sp.known_references))
    return await ctx.vox.atranscribe(source, options, speakers=diarize, model=req.model, progress=progress)


def respond(t: Transcript, fmt: str, granularities: tuple[str, ...], *, logprobs: bool = False,
            subtitles: SubtitleOptions | None = None) -> Response:
    """The transcript in the requested OpenAI response format (``logprobs``: with each token's, as OpenAI's
    ``include[]=logprobs`` gives them, in json and verbose_json; ``subtitles``: the srt and vtt cue shape)."""
    extra = {"logprobs": to_logprobs(t)} if logprobs else {}
    if fmt in _TEXT_TYPES:
        return PlainTextResponse(render(t, fmt, subtitles=subtitles), media_type=_TEXT_TYPES[fmt])
    if fmt == "verbose_json":
        segments = not granularities or "segment" in granularities
        return JSONResponse({**to_verbose_json(t, words="word" in granularities, segments=segments), **extra})
    if fmt == "json":
        return JSONResponse({"text": t.text, **extra})
    if fmt == "diarized_json":
        return JSONResponse(to_diarized_json(t))
    raise InvalidInput(f"unknown response_format {fmt!r}", param="response_format")


def _stream(ctx: ServerContext, form: TranscriptionForm, hold: ExitStack) -> StreamingResponse:
    """Server-sent events as OpenAI sends them: ``transcript.text.delta`` per piece, then ``.done``.

    ``hold`` (the client's concurrency slot) is released when the stream ends or the client goes away.
    """
    return StreamingResponse(_events(ctx, form, hold), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                             background=BackgroundTask(hold.close))


async def _events(ctx: ServerContext, form: TranscriptionForm, hold: ExitStack) -> AsyncIterator[bytes]:
    deltas: asyncio.Queue[str] = asyncio.Queue()
    first = True

    def on_text(text: str) -> None:
        nonlocal first
        deltas.put_nowait(text if first else " " + text)
        first = False

    task = asyncio.ensure_future(_transcribe(ctx, form, on_text))
    try:
        while not task.done() or not deltas.empty():
            getter = asyncio.ensure_future(deltas.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield _sse({"type": "transcript.text.delta", "delta": getter.result()})
            else:
                getter.cancel()
        transcript = task.result()
        extra = {"logprobs": to_logprobs(transcript)} if form.request.logprobs else {}
        yield _sse({"type": "transcript.text.done", "text": transcript.text, **extra,
                    "usage": {"type": "duration", "seconds": round(transcript.duration_s, 3)}})
    except Exception as exc:  # noqa: BLE001 - reported in-band: the status line is already sent
        err = error_response(exc)
        yield _sse({"type": "error", "error": json.loads(bytes(err.body))["error"]})
    finally:
        if not task.done():
            task.cancel()
        hold.close()


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


def require_ready(ctx: ServerContext) -> None:
    """Refuse work until the models are loaded."""
    if not ctx.ready:
        raise HttpError(503, "models are still loading", type="server_error", code="not_ready", retry_after_s=5)
