"""What every route needs: the engine, settings, metrics, security and the job runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import HTTPConnection

from voxserve.backends.registry import ASR_MODELS
from voxserve.config import Settings
from voxserve.errors import ModelUnavailable
from voxserve.jobs import JobRunner, JobStore
from voxserve.server.metrics import Metrics
from voxserve.server.security import ApiKeys, ConcurrencyLimiter, header_dict
from voxserve.service import Voxserve


@dataclass
class ServerContext:
    """Shared state of one running server."""

    settings: Settings
    vox: Voxserve
    metrics: Metrics
    keys: ApiKeys
    limiter: ConcurrencyLimiter
    data_dir: Path
    jobs: JobRunner | None = None
    store: JobStore | None = None
    ready: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    def client(self, conn: HTTPConnection) -> str:
        """Authenticate the caller (401 when keys are set and missing) and return its identity."""
        peer = conn.client.host if conn.client else "unknown"
        return self.keys.client_id(header_dict(conn.scope.get("headers", [])), dict(conn.query_params), peer)

    def check_model(self, name: str | None) -> None:
        """Refuse a model a request may not name: requests choose among the registered models, the configured
        ones and those already loaded, never a directory of the server (``ModelUnavailable``; the message does
        not tell whether such a directory exists)."""
        if name is None:
            return
        allowed = {*ASR_MODELS, self.settings.asr.model, self.settings.agent.asr_model, *self.vox.pool.loaded(),
                   *self.settings.server.model_aliases.values()}
        if name not in allowed:
            raise ModelUnavailable(f"unknown model {name!r}: available models are {', '.join(sorted(ASR_MODELS))}",
                                   param="model")


def context(conn: HTTPConnection) -> ServerContext:
    """The server context of a request or WebSocket."""
    ctx: ServerContext = conn.app.state.ctx
    return ctx
