"""What every route needs: the engine, settings, metrics, security and the job runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import HTTPConnection

from voxserve.config import Settings
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


def context(conn: HTTPConnection) -> ServerContext:
    """The server context of a request or WebSocket."""
    ctx: ServerContext = conn.app.state.ctx
    return ctx
