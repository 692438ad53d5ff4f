"""The ASGI application: ``create_app(settings)`` builds the engine, loads and warms the default models,
resumes unfinished jobs, and mounts every route. Transport only: no model logic lives here."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voxserve.backends.base import AsrRequest, DecodeOptions
from voxserve.config import Settings
from voxserve.errors import ModelUnavailable, VoxserveError
from voxserve.jobs import JobRunner, JobStore
from voxserve.server import (
    http_asr,
    http_diarize,
    http_jobs,
    http_misc,
    http_tts,
    http_voices,
    http_web,
    ws_realtime,
    ws_tts,
)
from voxserve.server.context import ServerContext, context
from voxserve.server.errors import HttpError, error_response
from voxserve.server.metrics import Metrics
from voxserve.server.security import ApiKeys, BodyLimit, ConcurrencyLimiter, QueryKeyToHeader, is_loopback
from voxserve.server.webhooks import WebhookOptions, WebhookSender
from voxserve.service import Voxserve
from voxserve.types import SAMPLE_RATE

log = logging.getLogger("voxserve.server")


def default_data_dir() -> Path:
    """``$VOXSERVE_DATA`` or ``~/.local/share/voxserve``."""
    return Path(os.environ.get("VOXSERVE_DATA", Path.home() / ".local" / "share" / "voxserve"))


def create_app(settings: Settings, vox: Voxserve | None = None) -> FastAPI:
    """The server application (``vox`` may be given to share an engine, e.g. in tests)."""
    metrics = Metrics()
    server = settings.server
    ctx = ServerContext(
        settings=settings,
        vox=vox or Voxserve(settings, observer=metrics),
        metrics=metrics,
        keys=ApiKeys(server.api_keys),
        limiter=ConcurrencyLimiter(server.max_concurrent_per_key, server.max_inflight),
        data_dir=Path(server.data_dir) if server.data_dir else default_data_dir(),
    )
    # With API keys, the schema and its docs pages are not public (only /health, /ready and the web page are).
    docs: dict[str, Any] = {"docs_url": None, "redoc_url": None, "openapi_url": None} if ctx.keys.enabled else {}
    app = FastAPI(title="voxserve", version="0.1.0", lifespan=_lifespan(ctx, owns_engine=vox is None), **docs)
    app.state.ctx = ctx
    from voxserve.server.ws_conversation import conversation_handler

    ctx.extras.setdefault("realtime_conversation", conversation_handler)  # GET /v1/realtime without intent
    for module in (http_misc, http_asr, http_diarize, http_jobs, http_tts, http_voices, ws_realtime, ws_tts):
        app.include_router(module.router)
    http_web.install(app)  # the web page at / (static files under /web)
    # Errors are mapped here, once, for every route: the documented error for domain errors, a 500 without
    # internals for anything else (voxserve.server.errors.classify holds the table).
    for kind in (HttpError, VoxserveError, Exception):
        app.add_exception_handler(kind, _on_error)
    app.add_exception_handler(RequestValidationError, _on_validation)
    if server.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(server.cors_origins), allow_methods=["*"], allow_headers=["*"])
    app.add_middleware(_RequestMetrics, metrics=metrics)
    app.add_middleware(BodyLimit, max_bytes=int(server.max_upload_mb * 1_000_000))
    app.add_middleware(QueryKeyToHeader)  # outermost: the key leaves the query string before anything logs it
    return app


def _lifespan(ctx: ServerContext, *, owns_engine: bool) -> Any:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        server = ctx.settings.server
        if not ctx.keys.enabled and not is_loopback(server.host):
            log.warning("serving on %s without API keys: anyone who can reach it can use it "
                        "(set VOXSERVE_SERVER__API_KEYS)", server.host)
        ctx.store = JobStore(ctx.data_dir / "jobs.sqlite3")
        webhooks = WebhookSender(ctx.store, WebhookOptions.from_settings(server), ctx.metrics)
        ctx.jobs = JobRunner(ctx.store, lambda job, progress: http_jobs.run_job(ctx, job, progress), server.job_workers,
                             on_end=webhooks.notify)
        await ctx.vox.executor.run(ctx.vox.asr)  # load the default model off the event loop
        try:
            ctx.vox.tts().observer = ctx.metrics  # synthesis stream metrics on /metrics
            ctx.vox.tts().pool.catalog.allow_paths = False  # clients name voices; only settings give paths
        except ModelUnavailable:
            pass
        if server.warmup:
            await _warm_up(ctx)
        ctx.jobs.start()
        webhooks.start()  # after the runner: jobs it finds interrupted call back too
        ctx.ready = True
        log.info("voxserve ready: models %s", ", ".join(ctx.vox.pool.loaded()))
        try:
            yield
        finally:
            ctx.ready = False
            await ctx.jobs.stop()
            await webhooks.stop()
            ctx.store.close()
            if owns_engine:  # joining worker threads blocks: not on the event loop
                await asyncio.get_running_loop().run_in_executor(None, ctx.vox.close)

    return lifespan


async def _warm_up(ctx: ServerContext) -> None:
    """One short decode (and the default voice loaded) so the first request does not pay for lazy
    initialisation."""
    started = time.monotonic()
    noise = (np.random.default_rng(0).standard_normal(SAMPLE_RATE) * 0.01).astype(np.float32)
    await ctx.vox.asr().transcribe(AsrRequest(noise, DecodeOptions(language="en")))
    vads = ctx.vox.live_vads
    vads.give(await ctx.vox.executor.run(vads))  # the first live session's VAD, loaded
    try:
        await ctx.vox.tts().load()
    except ModelUnavailable as exc:
        log.info("speech synthesis is off: %s", exc.message)
    log.info("warm-up took %.2f s", time.monotonic() - started)


async def _on_error(request: Request, exc: Exception) -> Response:
    context(request).metrics.errors.labels(type(exc).__name__).inc()
    return error_response(exc)


async def _on_validation(request: Request, exc: Exception) -> Response:
    message = str(exc.errors()[0].get("msg", "invalid request")) if isinstance(exc, RequestValidationError) else str(exc)
    return error_response(HttpError(422, message, code="invalid_value"))


class _RequestMetrics:
    """ASGI middleware counting requests by route template and status, with latency; every response gets an
    ``x-request-id`` as OpenAI's do (LiveKit's TTS warns without one)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.monotonic()

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", f"req_{uuid.uuid4().hex}".encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.request_seconds.labels(endpoint).observe(time.monotonic() - started)
