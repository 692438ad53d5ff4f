"""Asynchronous jobs for long files: ``/v1/jobs`` (create, list), ``/v1/jobs/{id}`` (status, cancel),
``/v1/jobs/{id}/result?format=...``."""

from __future__ import annotations

import shutil
import typing
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voxserve.audio import probe
from voxserve.errors import InvalidInput
from voxserve.jobs import Callback, Job, JobStatus, validate_job_id
from voxserve.pipelines.long_asr import ProgressHook
from voxserve.records import from_record, to_record
from voxserve.server.context import ServerContext, context
from voxserve.server.errors import HttpError
from voxserve.server.forms import TranscriptionForm, TranscriptionRequest, read_form, subtitle_fields
from voxserve.server.http_asr import require_ready, respond, transcribe_source
from voxserve.server.webhooks import WebhookOptions, check_callback_url
from voxserve.subtitles import DEFAULT_SUBTITLES
from voxserve.types import Task, Transcript

router = APIRouter()


@router.post("/v1/jobs")
async def create_job(request: Request) -> Response:
    """Queue a transcription (or, with ``task=translate``, a translation) of an uploaded file."""
    ctx = context(request)
    require_ready(ctx)
    with ctx.limiter.hold(ctx.client(request)):
        form = await read_form(request, "transcribe")
        task = (await request.form()).get("task", "transcribe")
        if task not in ("transcribe", "translate"):
            raise HttpError(422, "task must be 'transcribe' or 'translate'", param="task", code="invalid_value")
        callback_url = await _callback_url(ctx, request)
        job = await _store_upload(ctx, form, str(task))
        if callback_url is not None:
            assert ctx.store is not None
            job.callback = Callback(callback_url, result_url=f"{str(request.base_url).rstrip('/')}/v1/jobs/{job.id}/result")
            ctx.store.save_callback(job.id, job.callback)
    assert ctx.jobs is not None
    ctx.jobs.submit(job)
    return JSONResponse(job.public(), status_code=202)


async def _callback_url(ctx: ServerContext, request: Request) -> str | None:
    """The form's ``callback_url`` once checked (scheme, credentials, every resolved address), or 422."""
    raw = (await request.form()).get("callback_url")
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise HttpError(422, "callback_url must be text", param="callback_url", code="invalid_callback_url")
    try:
        await check_callback_url(raw, WebhookOptions.from_settings(ctx.settings.server))
    except InvalidInput as exc:
        raise HttpError(422, exc.message, param="callback_url", code=exc.code) from None
    return raw


async def _store_upload(ctx: ServerContext, form: TranscriptionForm, task: str) -> Job:
    assert ctx.store is not None
    uploads = ctx.data_dir / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    info = await ctx.vox.executor.run(probe, form.upload.file)  # refuse non-audio before queueing
    limit = ctx.settings.server.max_audio_s
    if info.duration_s and info.duration_s > limit:
        raise HttpError(413, f"audio is {info.duration_s:.0f} s long; the limit is {limit:.0f} s",
                        code="audio_too_long", param="file")
    request = replace(form.request, task=typing.cast(Task, task), stream=False)
    job = ctx.store.create(to_record(request), input_path="", duration_s=info.duration_s or 0.0)
    path = uploads / f"{job.id}.upload"
    await ctx.vox.executor.run(_copy, form.upload.file, path)
    await form.upload.close()
    job.input_path = str(path)
    ctx.store.save(job)
    return job


def _copy(src: Any, dst: Path) -> None:
    src.seek(0)
    with open(dst, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)


def _job_or_404(ctx: ServerContext, request: Request, job_id: str) -> Job:
    ctx.client(request)
    assert ctx.jobs is not None
    try:
        job = ctx.jobs.get(validate_job_id(job_id))
    except InvalidInput:  # a malformed id is simply not found (a store that is down is a 500, not a 404)
        job = None
    if job is None:
        raise HttpError(404, f"no job {job_id!r}", code="job_not_found", param="id")
    return job


@router.get("/v1/jobs")
async def list_jobs(request: Request) -> Response:
    """The newest jobs."""
    ctx = context(request)
    ctx.client(request)
    assert ctx.store is not None
    return JSONResponse({"object": "list", "data": [j.public() for j in ctx.store.list()]})


@router.get("/v1/jobs/{job_id}")
async def get_job(request: Request, job_id: str) -> Response:
    """Status, progress (audio seconds done) and speed so far."""
    ctx = context(request)
    return JSONResponse(_job_or_404(ctx, request, job_id).public())


@router.delete("/v1/jobs/{job_id}")
async def cancel_job(request: Request, job_id: str) -> Response:
    """Cancel a queued or running job (finished jobs are unchanged)."""
    ctx = context(request)
    _job_or_404(ctx, request, job_id)
    assert ctx.jobs is not None
    job = ctx.jobs.cancel(job_id)
    assert job is not None
    return JSONResponse(job.public())


@router.get("/v1/jobs/{job_id}/result")
async def job_result(request: Request, job_id: str) -> Response:
    """The finished job's transcript in any response format (``?format=``, default the job's own); srt and
    vtt cues as the job asked, or as the query's ``max_line_width``, ``max_line_count``, ``max_cue_duration``
    and ``speaker_labels`` say (voxserve extension)."""
    ctx = context(request)
    job = _job_or_404(ctx, request, job_id)
    if job.status != JobStatus.SUCCEEDED or job.result is None:
        status = 409 if not job.status.final else 410
        raise HttpError(status, f"job {job_id} is {job.status.value}; no result", code=f"job_{job.status.value}")
    asked = from_record(TranscriptionRequest, job.params)
    fmt = request.query_params.get("format") or asked.response_format
    query = FormData(request.query_params)
    subtitles = subtitle_fields(query, asked.subtitles or DEFAULT_SUBTITLES) or asked.subtitles
    return respond(from_record(Transcript, job.result), fmt, asked.granularities or ("word", "segment"),
                   subtitles=subtitles)


async def run_job(ctx: ServerContext, job: Job, progress: ProgressHook) -> dict[str, Any]:
    """The job runner's work: the stored request on the stored upload; the transcript as a lossless record
    (every response format is rendered from it when the result is fetched)."""
    request = from_record(TranscriptionRequest, job.params)
    # word timing always: the result may be fetched later as srt, vtt or verbose_json
    transcript = await transcribe_source(ctx, replace(request, response_format="verbose_json"), job.input_path,
                                         ctx.settings.server.max_audio_s, progress=progress)
    ctx.metrics.on_transcript(transcript, request.model_name, "job")
    return typing.cast(dict[str, Any], to_record(transcript))
