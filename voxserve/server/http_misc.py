"""``/health``, ``/ready``, ``/metrics`` and the OpenAI model list."""

from __future__ import annotations

import time

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voxserve.backends.registry import ASR_MODELS
from voxserve.server.context import ServerContext, context
from voxserve.server.errors import HttpError, error_response
from voxserve.server.forms import MODEL_ALIASES

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
    try:
        ctx.client(request)
    except Exception as exc:  # noqa: BLE001
        return error_response(exc)
    for service_name in ctx.vox.pool.loaded():
        ctx.metrics.queue_depth.labels(service_name).set(ctx.vox.pool.asr(service_name).queue_depth)
    ctx.metrics.inflight.set(ctx.limiter.inflight)
    sessions = ctx.extras.get("live_sessions", ())
    ctx.metrics.live_behind.set(max((s.pending_s for s in sessions), default=0.0))
    return Response(ctx.metrics.render(), media_type=CONTENT_TYPE_LATEST)


def _model(ctx: ServerContext, model_id: str) -> dict[str, object]:
    entry = ASR_MODELS.get(model_id)
    default = ctx.settings.asr.model
    description = entry.description if entry else ("alias of " + default if model_id in MODEL_ALIASES else "local model")
    return {
        "id": model_id, "object": "model", "created": _STARTED, "owned_by": "voxserve",
        "description": description, "default": model_id == default, "loaded": model_id in ctx.vox.pool.loaded(),
    }


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    """The models this server can run (registered ones, OpenAI aliases and loaded local paths)."""
    ctx = context(request)
    try:
        ctx.client(request)
        ids = list(dict.fromkeys([*ASR_MODELS, *MODEL_ALIASES, *ctx.vox.pool.loaded()]))
        return JSONResponse({"object": "list", "data": [_model(ctx, i) for i in ids]})
    except Exception as exc:  # noqa: BLE001
        return error_response(exc)


@router.get("/v1/models/{model_id:path}")
async def get_model(request: Request, model_id: str) -> Response:
    """One model, or 404."""
    ctx = context(request)
    try:
        ctx.client(request)
        if model_id not in ASR_MODELS and model_id not in MODEL_ALIASES and model_id not in ctx.vox.pool.loaded():
            raise HttpError(404, f"the model {model_id!r} does not exist", code="model_not_found", param="model")
        return JSONResponse(_model(ctx, model_id))
    except Exception as exc:  # noqa: BLE001
        return error_response(exc)
