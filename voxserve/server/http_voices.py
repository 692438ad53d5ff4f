"""The voice library: ``POST /v1/voices/enrolled`` (a name and a clip of that voice), ``GET`` lists the
names, ``DELETE /v1/voices/enrolled/{name}`` forgets one. Enrolled names may then be given in
``known_speaker_names[]`` without a reference. Needs ``voxserve[diarize]``.
"""

from __future__ import annotations

import json

from fastapi import APIRouter
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voxserve.server.context import context
from voxserve.server.errors import HttpError
from voxserve.server.http_asr import require_ready
from voxserve.server.known_speaker_fields import MAX_REFERENCE_BYTES, data_url_bytes, enroll, voice_library

router = APIRouter()


async def _name_and_audio(request: Request) -> tuple[str, bytes]:
    """``{"name", "audio": data URL}`` as JSON, or a multipart form with ``name`` and ``file``."""
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            body = json.loads(await request.body())
        except ValueError:
            raise HttpError(400, "the body is not valid JSON", code="invalid_json") from None
        if not isinstance(body, dict):
            raise HttpError(422, "the body must be a JSON object", code="invalid_value")
        name, audio = body.get("name"), body.get("audio")
        if not isinstance(audio, str):
            raise HttpError(422, "'audio' must be a data URL (data:audio/wav;base64,...)", code="invalid_value",
                            param="audio")
        data = data_url_bytes(audio, "audio")
    else:
        try:
            form = await request.form(max_files=1, max_fields=4)
        except Exception as exc:  # noqa: BLE001 - any parser failure is the client's malformed body
            raise HttpError(400, f"could not parse the multipart form: {exc}", code="invalid_form") from None
        name, upload = form.get("name"), form.get("file")
        if not isinstance(upload, UploadFile):
            raise HttpError(422, "'file' must be an audio file upload", code="invalid_value", param="file")
        data = await upload.read(MAX_REFERENCE_BYTES + 1)
        if len(data) > MAX_REFERENCE_BYTES:
            raise HttpError(413, f"a reference may hold at most {MAX_REFERENCE_BYTES // 1_000_000} MB",
                            code="file_too_large", param="file")
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 100:
        raise HttpError(422, "'name' must be 1-100 characters", code="invalid_value", param="name")
    return name.strip(), data


@router.post("/v1/voices/enrolled")
async def enroll_voice(request: Request) -> Response:
    """Enroll (or re-enroll) a voice: its embedding with the server's embedder is stored, not the audio."""
    ctx = context(request)
    require_ready(ctx)
    with ctx.limiter.hold(ctx.client(request)):
        name, audio = await _name_and_audio(request)
        param = "audio" if request.headers.get("content-type", "").startswith("application/json") else "file"
        voice = await enroll(ctx, name, audio, param)
    voice_library(ctx).put(voice)
    return JSONResponse({"object": "enrolled_voice", "name": voice.name, "embedder": voice.embedder,
                         "speech_seconds": round(voice.speech_s, 2)}, status_code=201)


@router.get("/v1/voices/enrolled")
async def list_voices(request: Request) -> Response:
    """The enrolled names (with the embedders each has an embedding of)."""
    ctx = context(request)
    ctx.client(request)
    data = [{"object": "enrolled_voice", "name": v.name, "embedders": list(v.embedders), "created_at": v.created_at}
            for v in voice_library(ctx).list()]
    return JSONResponse({"object": "list", "data": data})


@router.delete("/v1/voices/enrolled/{name}")
async def delete_voice(request: Request, name: str) -> Response:
    """Forget an enrolled voice (404 when it is not enrolled)."""
    ctx = context(request)
    ctx.client(request)
    if not voice_library(ctx).delete(name):
        raise HttpError(404, f"no enrolled voice named {name!r}", code="voice_not_found", param="name")
    return JSONResponse({"object": "enrolled_voice.deleted", "name": name, "deleted": True})
