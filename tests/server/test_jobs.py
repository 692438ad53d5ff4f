"""Asynchronous jobs: progress, results in every format, cancellation, and surviving a restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import srt

from tests.quality import jfk_wer
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.slow


def submit(live: LiveServer, path: Path, **data: Any) -> dict[str, Any]:
    with open(path, "rb") as f:
        r = httpx.post(live.url + "/v1/jobs", files={"file": (path.name, f.read())}, data=data, timeout=60)
    assert r.status_code == 202, r.text
    return dict(r.json())


def wait(live: LiveServer, job_id: str, statuses: tuple[str, ...] = ("succeeded",), timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        seen = httpx.get(f"{live.url}/v1/jobs/{job_id}", timeout=10).json()
        if seen["status"] in statuses:
            return seen
        if seen["status"] in ("failed", "cancelled", "interrupted") and seen["status"] not in statuses:
            raise AssertionError(seen)
        time.sleep(0.2)
    raise AssertionError(f"job did not reach {statuses}: {seen}")


def test_job_lifecycle_and_formats(live: LiveServer, data_dir: Path) -> None:
    job = submit(live, data_dir / "fw_jfk.flac", response_format="verbose_json")
    assert job["status"] == "queued" and job["id"].startswith("job_") and job["duration_s"] == pytest.approx(11.0, abs=0.1)
    done = wait(live, job["id"])
    assert done["progress_s"] == pytest.approx(11.0, abs=0.1) and done["rtfx"] > 0
    base = f"{live.url}/v1/jobs/{job['id']}/result"
    verbose = httpx.get(base, timeout=10).json()
    assert jfk_wer(verbose["text"]) <= 0.1 and verbose["words"]
    assert jfk_wer(httpx.get(base + "?format=text", timeout=10).text) <= 0.1
    cues = list(srt.parse(httpx.get(base + "?format=srt", timeout=10).text))
    assert cues and cues[0].start.total_seconds() < 1.0
    assert httpx.get(base + "?format=vtt", timeout=10).text.startswith("WEBVTT")
    assert httpx.get(base + "?format=docx", timeout=10).status_code == 400
    listed = httpx.get(live.url + "/v1/jobs", timeout=10).json()["data"]
    assert job["id"] in [j["id"] for j in listed]


def test_a_job_keeps_its_chunking_strategy(live: LiveServer, corpus: Path) -> None:
    """A job runs with the request's speech detection: whispering is silence at server_vad threshold 0.9."""
    strict = '{"type": "server_vad", "threshold": 0.9, "silence_duration_ms": 300}'
    jobs = [submit(live, corpus / "asr" / "mfa_whisper2.flac", language="en", **extra)
            for extra in ({}, {"chunking_strategy": strict})]
    texts = []
    for job in jobs:
        wait(live, job["id"])
        texts.append(httpx.get(f"{live.url}/v1/jobs/{job['id']}/result", timeout=10).json()["text"])
    assert len(texts[0].split()) >= 4 and texts[1] == "", texts


def test_translate_job(live: LiveServer, data_dir: Path) -> None:
    job = submit(live, data_dir / "de__pv_test_de.wav", task="translate")
    wait(live, job["id"])
    text = httpx.get(f"{live.url}/v1/jobs/{job['id']}/result", timeout=10).json()["text"]
    assert "wurde" not in text.lower()


def test_bad_jobs(live: LiveServer, tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp3"
    bad.write_bytes(b"garbage" * 100)
    r = httpx.post(live.url + "/v1/jobs", files={"file": ("bad.mp3", bad.read_bytes())}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_audio"
    assert httpx.get(live.url + "/v1/jobs/job_doesnotexist", timeout=10).status_code == 404
    assert httpx.get(live.url + "/v1/jobs/../../etc/passwd", timeout=10).status_code == 404
    assert httpx.delete(live.url + "/v1/jobs/nope", timeout=10).status_code == 404


def test_cancel_a_long_job(live: LiveServer, corpus: Path) -> None:
    job = submit(live, corpus / "long" / "lj_LJ001-0001-0032_concat.flac")
    wait(live, job["id"], ("running", "succeeded"))
    r = httpx.delete(f"{live.url}/v1/jobs/{job['id']}", timeout=10)
    assert r.status_code == 200 and r.json()["status"] in ("cancelled", "succeeded")
    final = httpx.get(f"{live.url}/v1/jobs/{job['id']}", timeout=10).json()
    assert final["status"] == r.json()["status"]
    if final["status"] == "cancelled":
        assert httpx.get(f"{live.url}/v1/jobs/{job['id']}/result", timeout=10).status_code == 410


def test_jobs_survive_a_restart(tmp_path: Path, data_dir: Path) -> None:
    import shutil

    from voxserve.jobs import JobStatus, JobStore
    from voxserve.records import to_record
    from voxserve.server.forms import TranscriptionRequest

    with LiveServer(tmp_path, warmup=False, job_workers=1) as first:
        finished = submit(first, data_dir / "fw_jfk.flac")
        wait(first, finished["id"])
    # a crash while a job was running and another was queued: their records and inputs are on disk
    store = JobStore(tmp_path / "jobs.sqlite3")
    crashed = []
    for name, status in (("mfa_ls_61-70968-0000.flac", JobStatus.RUNNING), ("es__pv_test_es.wav", JobStatus.QUEUED)):
        job = store.create(to_record(TranscriptionRequest()), "")
        job.input_path = str(tmp_path / "uploads" / f"{job.id}.upload")
        shutil.copyfile(data_dir / name, job.input_path)
        job.status = status
        store.save(job)
        crashed.append(job.id)
    lost = store.create(to_record(TranscriptionRequest()), str(tmp_path / "uploads" / "gone.upload"))
    lost.status = JobStatus.RUNNING
    store.save(lost)
    store.close()
    with LiveServer(tmp_path, warmup=False, job_workers=1) as second:
        old = httpx.get(f"{second.url}/v1/jobs/{finished['id']}/result?format=text", timeout=10)
        assert old.status_code == 200 and jfk_wer(old.text) <= 0.1
        states = [wait(second, job_id) for job_id in crashed]
        assert all(s["restarts"] == 1 for s in states)
        texts = [httpx.get(f"{second.url}/v1/jobs/{j}/result", timeout=10).json()["text"] for j in crashed]
        assert "CONFUSED" in texts[0].upper() and "arenas" in texts[1]
        gone = httpx.get(f"{second.url}/v1/jobs/{lost.id}", timeout=10).json()
        assert gone["status"] == "interrupted" and gone["error"]["code"] == "interrupted"
