"""``/health``, ``/ready``, ``/metrics`` and the OpenAI model list."""

from __future__ import annotations

import time

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voxserve.backends.registry import ASR_MODELS
from voxserve.server import model_names
from voxserve.server.context import ServerContext, context
from voxserve.server.errors import HttpError

router = APIRouter()
_STARTED = int(time.time())


@router.get("/health")
async def health() -> Response:
    """Alive (answers even while models load or decode)."""
    return JSONResponse({"status": "ok"})


@router.get("/ready")
async def ready(request: Request) -> Response:
    """Ready once the default models are loaded and warmed up."""
    ctx = context(request)
    body = {"status": "ready" if ctx.ready else "loading", "models": ctx.vox.pool.loaded()}
    return JSONResponse(body, status_code=200 if ctx.ready else 503)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus metrics (the API key is required when keys are configured)."""
    ctx = context(request)
    ctx.client(request)
    for service_name in ctx.vox.pool.loaded():
        ctx.metrics.queue_depth.labels(service_name).set(ctx.vox.pool.asr(service_name).queue_depth)
    ctx.metrics.inflight.set(ctx.limiter.inflight)
    sessions = ctx.extras.get("live_sessions", ())
    ctx.metrics.live_behind.set(max((s.pending_s for s in sessions), default=0.0))
    return Response(ctx.metrics.render(), media_type=CONTENT_TYPE_LATEST)


def _model(ctx: ServerContext, model_id: str) -> dict[str, object]:
    entry = ASR_MODELS.get(model_id)
    default = ctx.settings.asr.model
    alias = model_names.is_alias(model_id) or model_id in ctx.settings.server.model_aliases
    target = model_names.maps_to(ctx.settings, model_id) if alias else model_id
    description = entry.description if entry else (f"alias of {target}" if alias else "local model")
    return {
        "id": model_id, "object": "model", "created": _STARTED, "owned_by": "voxserve",
        "description": description, "maps_to": target, "default": model_id == default,
        "loaded": target in ctx.vox.pool.loaded() or target.startswith(("voice:", "voxserve-")),
    }


def _known(ctx: ServerContext) -> list[str]:
    return list(dict.fromkeys([*ASR_MODELS, *model_names.TRANSCRIPTION, *ctx.settings.server.model_aliases,
                               *model_names.SPEECH, *model_names.REALTIME, *ctx.vox.pool.loaded()]))


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    """The models this server can run (registered ones, OpenAI aliases and loaded local paths)."""
    ctx = context(request)
    ctx.client(request)
    return JSONResponse({"object": "list", "data": [_model(ctx, i) for i in _known(ctx)]})


@router.get("/v1/models/{model_id:path}")
async def get_model(request: Request, model_id: str) -> Response:
    """One model, or 404."""
    ctx = context(request)
    ctx.client(request)
    if model_id not in _known(ctx):
        raise HttpError(404, f"the model {model_id!r} does not exist", code="model_not_found", param="model")
    return JSONResponse(_model(ctx, model_id))
