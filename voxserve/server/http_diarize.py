"""``POST /v1/audio/diarization``: who spoke when (speaker turns as JSON or RTTM). Needs ``voxserve[diarize]``."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from voxserve.formats import diarization_dict, to_rttm
from voxserve.server.context import context
from voxserve.server.errors import HttpError
from voxserve.server.forms import parse_form, speaker_fields
from voxserve.server.http_asr import require_ready
from voxserve.server.known_speaker_fields import known_speakers

router = APIRouter()


@router.post("/v1/audio/diarization")
async def diarization(request: Request) -> Response:
    """Multipart ``file`` plus optional ``num_speakers``, ``min_speakers``, ``max_speakers`` and
    ``response_format`` (``json``, default, or ``rttm``); ``known_speaker_names[]`` and
    ``known_speaker_references[]`` name the speakers whose voices match."""
    ctx = context(request)
    require_ready(ctx)
    with ctx.limiter.hold(ctx.client(request)):
        form, upload = await parse_form(request)
        fmt = form.get("response_format") or "json"
        if fmt not in ("json", "rttm"):
            raise HttpError(422, "response_format must be 'json' or 'rttm'", code="invalid_value",
                            param="response_format")
        sp = speaker_fields(form, required=True)
        assert sp is not None
        known = await known_speakers(ctx, sp.known_names, sp.known_references)
        options = ctx.vox.diarize_options(num_speakers=sp.num_speakers, min_speakers=sp.min_speakers,
                                          max_speakers=sp.max_speakers, known_speakers=known,
                                          max_duration_s=ctx.settings.server.max_sync_audio_s)
        try:
            result = await ctx.vox.adiarize(upload.file, options)
        finally:
            await upload.close()
    ctx.metrics.audio_seconds.labels("diarization", "diarize").inc(result.duration_s)
    if fmt == "rttm":
        return PlainTextResponse(to_rttm(result, Path(upload.filename or "audio").stem), media_type="text/plain")
    return JSONResponse(diarization_dict(result))
