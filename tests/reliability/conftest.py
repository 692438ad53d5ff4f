"""The reliability suite's budget, servers and resource probes.

Every test here is bounded in inputs and time and talks only to 127.0.0.1. The CI sample is small and seeded;
``VOXSERVE_LONG=1`` runs the long budget (>= 10,000 inputs per fuzz target) and the tests marked ``long``.
``VOXSERVE_FUZZ_EXAMPLES=N`` sets the number of inputs per fuzz target explicitly.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from voxserve.config import Settings, load_settings
from voxserve.server.app import create_app
from voxserve.server.thread import ServerThread, uvicorn_config
from voxserve.service import Voxserve

LONG = os.environ.get("VOXSERVE_LONG", "") == "1"
SEED = int(os.environ.get("VOXSERVE_FUZZ_SEED", "20240601"))


def budget(ci: int, long: int = 10_000) -> int:
    """Inputs per fuzz target: ``VOXSERVE_FUZZ_EXAMPLES``, else ``long`` with ``VOXSERVE_LONG=1``, else ``ci``."""
    explicit = os.environ.get("VOXSERVE_FUZZ_EXAMPLES")
    if explicit:
        return max(1, int(explicit))
    return long if LONG else ci


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long: long runs (fuzz budgets, soaks); only with VOXSERVE_LONG=1")
    config.addinivalue_line("markers", "reliability: the reliability and security suite (tests/reliability)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="long run: set VOXSERVE_LONG=1")
    for item in items:
        if "tests/reliability" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)
            if "long" in item.keywords and not LONG:
                item.add_marker(skip)
            if LONG or os.environ.get("VOXSERVE_FUZZ_EXAMPLES"):
                item.add_marker(pytest.mark.timeout(4 * 3600))  # long budgets outlast the suite's 600 s


# ------------------------------------------------------------------------------------------ resources


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of a process in MB (``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid: int | str = "self") -> int:
    """Open file descriptors of a process."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


# -------------------------------------------------------------------------------------------- servers


class Server(ServerThread):
    """A voxserve server on a loopback port in a thread, with any settings sections as keyword arguments
    (``Server(tmp, server={...}, live={...})``) or a shared engine (``vox=``)."""

    def __init__(self, data_dir: Path, *, vox: Voxserve | None = None, log_level: str = "warning",
                 **sections: dict[str, Any]) -> None:
        server = {"data_dir": str(data_dir), "warmup": False, **sections.pop("server", {})}
        self.settings: Settings = load_settings(server=server, **sections)
        self.app = create_app(self.settings, vox)
        self.server = uvicorn.Server(uvicorn_config(self.app, self.settings, "127.0.0.1", 0, log_level))
        self._thread = threading.Thread(target=self.server.run, name="voxserve-test-server", daemon=True)
        self._timeout = 180.0
        self.auth: dict[str, str] = {}

    @property
    def ws_url(self) -> str:
        """``ws://127.0.0.1:<port>``."""
        return self.url.replace("http://", "ws://")

    @property
    def ctx(self) -> Any:
        """The app's ServerContext."""
        return self.app.state.ctx

    def healthy(self) -> bool:
        """``/health`` answers 200 within 5 s."""
        try:
            return httpx.get(self.url + "/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def live_sessions(self) -> int:
        """Live transcription sessions the server holds."""
        return len(self.ctx.extras.get("live_sessions", ()))


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One plain server (no keys, default limits) for the tests that do not need their own settings."""
    with Server(tmp_path_factory.mktemp("reliability"), server={"warmup": True}) as server:
        yield server


class LogCapture(logging.Handler):
    """Every formatted log line of the given loggers (and the root), while installed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._lock2 = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is still a line
            text = str(record.msg)
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        with self._lock2:
            self.lines.append(f"{record.name}: {text}")

    @property
    def text(self) -> str:
        with self._lock2:
            return "\n".join(self.lines)


LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "voxserve", "websockets", "httpx")


@contextlib.contextmanager
def capture_logs() -> Iterator[LogCapture]:
    """All log lines (DEBUG and up) written inside the block, uvicorn's access log included. Enter it after
    building a server: uvicorn's config replaces the handlers of its loggers."""
    handler = LogCapture()
    saved = {}
    for name in LOGGERS:
        logger = logging.getLogger(name)
        saved[name] = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if name in ("", "voxserve", "uvicorn.access", "uvicorn.error") else logger.level)
    try:
        yield handler
    finally:
        for name in LOGGERS:
            logger = logging.getLogger(name)
            logger.removeHandler(handler)
            logger.setLevel(saved[name])
