"""The HTTP server with speech recognition on Ray replicas (``voxserve serve --ray``): the OpenAI route
answers from the replicas and ``/metrics`` exports the replica gauge and events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.quality import jfk_wer
from voxserve.config import load_settings
from voxserve.server.thread import ServerThread

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]


def test_server_transcribes_on_replicas(tmp_path: Path, data_dir: Path) -> None:
    settings = load_settings(server={"data_dir": str(tmp_path)}, ray={"enabled": True, "replicas": 2})
    with ServerThread(settings) as server:
        rec: Any = server.app.state.ctx.vox.asr()
        assert type(rec).__name__ == "RayRecognizer" and len(rec.replicas) == 2
        with open(data_dir / "fw_jfk.flac", "rb") as f:
            reply = httpx.post(server.url + "/v1/audio/transcriptions", files={"file": ("jfk.flac", f)},
                               data={"model": "whisper-1"}, timeout=120)
        assert reply.status_code == 200, reply.text
        assert jfk_wer(reply.json()["text"]) <= 0.1, reply.json()["text"]
        assert sum(rec.stats().served.values()) >= 1
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert 'voxserve_replicas_in_service{model="whisper-base"} 2.0' in metrics
        assert 'voxserve_replica_events_total{event="started",model="whisper-base"} 2.0' in metrics
        assert httpx.get(server.url + "/ready", timeout=10).json()["models"] == ["whisper-base"]
