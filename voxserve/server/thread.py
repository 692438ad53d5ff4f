"""Run the server in a background thread on a loopback port (for benchmarks, tests and embedding)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from voxserve.config import Settings
from voxserve.server.app import create_app
from voxserve.server.security import redact_server_logs


def uvicorn_config(app: Any, settings: Settings, host: str, port: int, log_level: str = "info") -> uvicorn.Config:
    """The one uvicorn configuration of voxserve (sans-I/O websockets, message size limit, lifespan on; API keys
    blanked in the server's logs)."""
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, ws="websockets-sansio", lifespan="on",
        ws_max_size=int(settings.live.max_message_mb * 1024 * 1024), timeout_graceful_shutdown=10,
    )
    redact_server_logs()  # after Config: it (re)configures uvicorn's loggers
    return config


class ServerThread:
    """``with ServerThread(settings) as s: httpx.get(s.url + "/health")`` — uvicorn on 127.0.0.1, any free port."""

    def __init__(self, settings: Settings, start_timeout_s: float = 180.0) -> None:
        self.settings = settings
        self.app = create_app(settings)
        self.server = uvicorn.Server(uvicorn_config(self.app, settings, "127.0.0.1", 0, "warning"))
        self._thread = threading.Thread(target=self.server.run, name="voxserve-server", daemon=True)
        self._timeout = start_timeout_s

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self._timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self.server.should_exit = True
                raise RuntimeError("the server did not start (see the log)")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self._thread.join(60)

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"
