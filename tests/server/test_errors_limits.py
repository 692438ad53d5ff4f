"""Bad input, authentication, limits and overload: the documented error, and the server stays healthy."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.server.conftest import LiveServer

pytestmark = pytest.mark.slow
URL = "/v1/audio/transcriptions"


def post(live: LiveServer, files: dict[str, Any], data: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
    return httpx.post(live.url + URL, files=files, data=data or {}, timeout=120, **kw)


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if code:
        assert err["code"] == code
    return err


def test_corrupt_empty_and_non_audio(live: LiveServer, data_dir: Path) -> None:
    good = (data_dir / "fw_jfk.flac").read_bytes()
    assert_error(post(live, {"file": ("a.flac", good[: len(good) // 50])}), 400)
    assert_error(post(live, {"file": ("empty.wav", b"")}), 400, "empty_file")
    assert_error(post(live, {"file": ("notes.txt", b"hello world, not audio at all" * 20)}), 400, "invalid_audio")
    assert_error(post(live, {}, {"model": "whisper-1"}), 400, "missing_file")
    assert httpx.get(live.url + "/health").json() == {"status": "ok"}


def test_wrong_field_types_and_values(live: LiveServer, data_dir: Path) -> None:
    f = {"file": ("a.flac", (data_dir / "fw_jfk.flac").read_bytes())}
    assert_error(post(live, f, {"temperature": "hot"}), 422, "invalid_value")
    assert_error(post(live, f, {"temperature": "3"}), 422)
    assert_error(post(live, f, {"response_format": "docx"}), 422)
    assert_error(post(live, f, {"timestamp_granularities[]": "sentence"}), 422)
    assert_error(post(live, f, {"stream": "maybe"}), 422)
    assert_error(post(live, f, {"language": "klingon"}), 400, "unsupported_language")
    err = assert_error(post(live, f, {"model": "whisper-large-v9"}), 404, "model_not_found")
    assert "whisper-base" in err["message"]
    r = httpx.post(live.url + URL, content=b"not multipart", headers={"content-type": "text/plain"}, timeout=30)
    assert r.status_code in (400, 422)


def test_openai_client_sees_typed_errors(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.audio.transcriptions.create(model="whisper-1", file=("x.wav", b"RIFF0000WAVEjunk"))
    assert err.value.status_code == 400
    with pytest.raises(openai.NotFoundError):
        client.audio.transcriptions.create(model="nope", file=("x.wav", b"RIFF0000WAVEjunk"))


def test_unknown_route_and_method(live: LiveServer) -> None:
    assert httpx.get(live.url + "/v1/nothing").status_code == 404
    assert httpx.get(live.url + URL).status_code == 405


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("guarded"), api_keys=("sekret-1", "sekret-2"), max_upload_mb=0.5,
                        max_concurrent_per_key=1, max_sync_audio_s=8.0, warmup=False)
    server.auth = {"Authorization": "Bearer sekret-1"}  # type: ignore[attr-defined]
    with server:
        yield server


def test_api_keys_required_on_every_api_route(guarded: LiveServer, data_dir: Path) -> None:
    small = {"file": ("a.flac", (data_dir / "mfa_ls_61-70968-0000.flac").read_bytes())}
    assert_error(post(guarded, small), 401, "invalid_api_key")
    assert_error(post(guarded, small, headers={"Authorization": "Bearer wrong"}), 401, "invalid_api_key")
    for path in ("/v1/models", "/v1/jobs", "/metrics", "/v1/jobs/job_abc"):
        assert httpx.get(guarded.url + path).status_code == 401, path
    assert httpx.get(guarded.url + "/health").status_code == 200
    ok = post(guarded, small, headers={"Authorization": "Bearer sekret-2"})
    assert ok.status_code == 200 and "CONFUSED" in ok.json()["text"].upper()
    from openai import OpenAI

    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=guarded.url + "/v1", api_key="wrong", max_retries=0).models.list()
    assert OpenAI(base_url=guarded.url + "/v1", api_key="sekret-1", max_retries=0).models.list().data


def test_oversize_upload_is_413_before_decoding(guarded: LiveServer, data_dir: Path) -> None:
    big = {"file": ("big.flac", (data_dir / "fw_jfk.flac").read_bytes())}  # 1.15 MB > 0.5 MB
    assert_error(post(guarded, big, headers=guarded.auth), 413, "file_too_large")  # type: ignore[attr-defined]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        boundary = b"--xyz\r\n"
        yield boundary + b'Content-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
        for _ in range(100):
            yield b"\0" * 10_000

    r = httpx.post(guarded.url + URL, content=chunks(), timeout=60,
                   headers={**guarded.auth, "content-type": "multipart/form-data; boundary=xyz"})  # type: ignore[attr-defined]
    assert_error(r, 413, "file_too_large")
    assert httpx.get(guarded.url + "/health").status_code == 200


def test_audio_duration_limit(guarded: LiveServer, data_dir: Path) -> None:
    # es clip is 8.7 s > 8 s sync limit; it is small enough to upload
    r = post(guarded, {"file": ("es.wav", (data_dir / "es__pv_test_es.wav").read_bytes())},
             headers=guarded.auth)  # type: ignore[attr-defined]
    assert_error(r, 413, "audio_too_long")


def test_per_key_concurrency_limit(guarded: LiveServer, data_dir: Path) -> None:
    payload = (data_dir / "mfa_ls_61-70968-0000.flac").read_bytes()

    def one(_: int) -> int:
        return post(guarded, {"file": ("a.flac", payload)}, headers=guarded.auth).status_code  # type: ignore[attr-defined]

    with ThreadPoolExecutor(4) as pool:
        codes = list(pool.map(one, range(4)))
    assert 200 in codes and 429 in codes, codes
    r = None
    for _ in range(3):
        r = post(guarded, {"file": ("a.flac", payload)}, headers=guarded.auth)  # type: ignore[attr-defined]
        if r.status_code == 200:
            break
    assert r is not None and r.status_code == 200


def test_health_answers_quickly_while_decoding(live: LiveServer, corpus: Path) -> None:
    long_file = corpus / "long" / "lj_LJ001-0001-0032_concat.flac"
    done = threading.Event()

    def transcribe() -> None:
        with open(long_file, "rb") as f:
            post(live, {"file": ("long.flac", f.read())}, {"response_format": "text"})
        done.set()

    worker = threading.Thread(target=transcribe)
    worker.start()
    time.sleep(1.0)
    latencies = []
    while not done.is_set() and len(latencies) < 50:
        t = time.perf_counter()
        assert httpx.get(live.url + "/health", timeout=5).status_code == 200
        latencies.append(time.perf_counter() - t)
        time.sleep(0.05)
    worker.join()
    latencies.sort()
    assert len(latencies) >= 10
    # a blocked event loop would take seconds; the target (50 ms) is reported by the benchmark
    assert latencies[len(latencies) // 2] < 0.5, latencies  # measured 0.01-0.05 s idle; over 0.25 s once at load 5
