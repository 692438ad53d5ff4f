"""A real voxserve server on a loopback port (uvicorn in a thread), per test module or per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from voxserve.config import load_settings
from voxserve.server.thread import ServerThread


class LiveServer(ServerThread):
    """The server in a thread, with settings given as keyword arguments of the ``server`` section (``asr`` and
    ``tts`` take their sections' settings as dicts)."""

    def __init__(self, data_dir: Path, **server: Any) -> None:
        asr, tts = server.pop("asr", {}), server.pop("tts", {})
        super().__init__(load_settings(asr=asr, tts=tts, server={"data_dir": str(data_dir), **server}))

    def metric(self, name: str, **labels: str) -> float:
        """Sum of a Prometheus sample family's values whose labels include ``labels``."""
        text = httpx.get(self.url + "/metrics", headers=getattr(self, "auth", {}), timeout=10).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
                head, _, value = line.rpartition(" ")
                if head.split("{")[0] == name:
                    total += float(value)
        return total


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tmp_path_factory.mktemp("server")) as server:
        yield server


@pytest.fixture(scope="module")
def client(live: LiveServer) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0, timeout=120)
