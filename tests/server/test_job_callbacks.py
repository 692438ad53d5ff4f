"""Job callbacks end to end: a real server POSTs to a real receiver on loopback (allowed by name, ``localhost``),
signed; retries are recorded on the job; a restart delivers what the previous process could not; inward
callback URLs are refused at creation; redirects are not followed; cancelled and failed jobs call back too."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.quality import jfk_wer
from tests.server.conftest import LiveServer
from tests.server.test_jobs import submit, wait
from voxserve.server.thread import ServerThread

pytestmark = pytest.mark.slow

SECRET = "test-secret"
FAST_RETRIES = {"webhook_secret": SECRET, "webhook_allow_hosts": ("localhost",), "webhook_backoff_s": 0.05,
                "webhook_max_backoff_s": 0.2, "webhook_timeout_s": 5.0, "warmup": False, "job_workers": 1}


STALL_S = 2.0


class Receiver:
    """An HTTP server on 127.0.0.1 that answers each POST with the next scripted status (then 200; 0: 200 after
    STALL_S) and keeps what it was sent."""

    def __init__(self, answers: list[int] | None = None, port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.answers = list(answers or [])
        self.hits: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.hits.append({"path": self.path, "headers": dict(self.headers), "body": body})
                status = owner.answers.pop(0) if owner.answers else 200
                if status == 0:
                    time.sleep(STALL_S)
                    status = 200
                try:
                    self.send_response(status)
                    if 300 <= status < 400:
                        self.send_header("Location", "/elsewhere")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError):  # the sender gave up waiting
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if tls else "http"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str = "/hook", host: str = "localhost") -> str:
        return f"{self.scheme}://{host}:{self.server.server_address[1]}{path}"

    def wait_for(self, count: int, timeout: float = 120) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.hits) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.hits) >= count, self.hits
        return self.hits


def verified(hit: dict[str, Any]) -> dict[str, Any]:
    """The body, once its signature checks out as the README tells receivers to check it."""
    headers = {k.lower(): v for k, v in hit["headers"].items()}
    signed = headers["x-voxserve-timestamp"].encode() + b"." + hit["body"]
    expected = "sha256=" + hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, headers["x-voxserve-signature"])
    assert abs(int(headers["x-voxserve-timestamp"]) - time.time()) < 300
    return dict(json.loads(hit["body"]))


def settled(live: ServerThread, job_id: str, timeout: float = 60) -> dict[str, Any]:
    """The job once its callback is delivered or given up."""
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = httpx.get(f"{live.url}/v1/jobs/{job_id}", timeout=10).json()
        if job["callback"]["status"] != "pending":
            return job
        time.sleep(0.05)
    raise AssertionError(job)


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(tmp_path, **FAST_RETRIES) as live:
        yield live


def test_a_finished_job_posts_its_signed_result(server: LiveServer, data_dir: Path) -> None:
    with Receiver() as receiver:
        job = submit(server, data_dir / "fw_jfk.flac", callback_url=receiver.url(), response_format="srt")
        assert job["callback"] == {"url": receiver.url(), "status": "pending", "attempts": 0, "last_status": None,
                                   "delivered_at": None, "error": None}
        body = verified(receiver.wait_for(1)[0])
    assert receiver.hits[0]["path"] == "/hook"
    assert body["id"] == job["id"] and body["object"] == "transcription.job" and body["status"] == "succeeded"
    assert body["error"] is None and "callback" not in body
    assert jfk_wer(body["result"]["text"]) <= 0.1 and body["result"]["segments"] and body["result"]["words"]
    fetched = httpx.get(body["result_url"], params={"format": "verbose_json"}, timeout=10).json()
    assert fetched["text"] == body["result"]["text"]
    done = settled(server, job["id"])["callback"]
    assert done["status"] == "delivered" and done["attempts"] == 1 and done["last_status"] == 200
    assert abs(done["delivered_at"] - time.time()) < 60
    assert server.metric("voxserve_webhook_attempts_total", outcome="delivered") == 1


def test_failed_attempts_are_retried_and_recorded(server: LiveServer, data_dir: Path) -> None:
    with Receiver([503, 500, 200]) as receiver:
        job = submit(server, data_dir / "fw_jfk.flac", callback_url=receiver.url())
        done = settled(server, job["id"])["callback"]
        hits = receiver.wait_for(3)
    assert done["status"] == "delivered" and done["attempts"] == 3 and done["last_status"] == 200
    assert len(hits) == 3 and len({h["body"] for h in hits}) == 1  # the same body each time, signed each time
    assert all(verified(h)["status"] == "succeeded" for h in hits)
    assert server.metric("voxserve_webhook_attempts_total", outcome="retried") == 2


def test_a_receiver_that_stalls_times_out_and_is_tried_again(tmp_path: Path, data_dir: Path) -> None:
    settings = {**FAST_RETRIES, "webhook_timeout_s": 0.5, "webhook_backoff_s": 0.5, "webhook_max_backoff_s": 0.5}
    with LiveServer(tmp_path, **settings) as live, Receiver([0, 429]) as receiver:
        job = submit(live, data_dir / "fw_jfk.flac", callback_url=receiver.url())
        seen, deadline = [], time.monotonic() + 120
        while time.monotonic() < deadline and (state := httpx.get(f"{live.url}/v1/jobs/{job['id']}", timeout=10).json()["callback"])["status"] == "pending":
            seen.append((state["attempts"], state["last_status"], state["error"]))
            time.sleep(0.05)
    assert state["status"] == "delivered" and state["attempts"] == 3 and len(receiver.hits) == 3
    assert any(a == 1 and "Timeout" in (e or "") for a, _, e in seen), seen  # httpx's ReadTimeout or asyncio's
    assert any(a == 2 and status == 429 for a, status, _ in seen), seen


def test_client_errors_and_redirects_are_not_retried(server: LiveServer, data_dir: Path) -> None:
    with Receiver([307, 404]) as receiver:
        redirected = submit(server, data_dir / "fw_jfk.flac", callback_url=receiver.url("/moved"))
        first = settled(server, redirected["id"])["callback"]
        missing = submit(server, data_dir / "fw_jfk.flac", callback_url=receiver.url("/gone"))
        second = settled(server, missing["id"])["callback"]
        time.sleep(0.5)  # more than the backoff: a retry would have come
    assert [h["path"] for h in receiver.hits] == ["/moved", "/gone"]  # /elsewhere never asked
    assert first["status"] == "failed" and first["attempts"] == 1 and first["last_status"] == 307
    assert "redirect not followed" in first["error"]
    assert second["status"] == "failed" and second["attempts"] == 1 and second["last_status"] == 404


def test_inward_and_malformed_callback_urls_are_refused(server: LiveServer, data_dir: Path) -> None:
    port = 9  # nothing is sent: these are refused before the job exists
    for url, code in ((f"http://127.0.0.1:{port}/hook", "callback_host_refused"),  # allowed is localhost, by name
                      (f"http://[::1]:{port}/", "callback_host_refused"),
                      ("http://169.254.169.254/latest/meta-data/", "callback_host_refused"),
                      ("http://10.0.0.1/hook", "callback_host_refused"),
                      ("http://[::ffff:7f00:1]/", "callback_host_refused"),
                      ("ftp://example.com/hook", "invalid_callback_url"),
                      ("http://user:pw@localhost/hook", "invalid_callback_url"),
                      ("not a url", "invalid_callback_url"),
                      ("http://no-such-host.invalid/hook", "callback_host_unresolved")):
        with open(data_dir / "fw_jfk.flac", "rb") as f:
            r = httpx.post(server.url + "/v1/jobs", files={"file": ("a.flac", f.read())},
                           data={"callback_url": url}, timeout=30)
        assert r.status_code == 422, (url, r.text)
        error = r.json()["error"]
        assert error["param"] == "callback_url" and error["code"] == code, (url, error)
    assert httpx.get(server.url + "/v1/jobs", timeout=10).json()["data"] == []


def test_without_a_secret_callbacks_are_unsigned_and_large_results_only_linked(
        tmp_path: Path, data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = {**FAST_RETRIES, "webhook_secret": "", "webhook_max_result_kb": 1.0}
    with LiveServer(tmp_path, **settings) as live, Receiver() as receiver:
        job = submit(live, data_dir / "fw_jfk.flac", callback_url=receiver.url(), response_format="verbose_json")
        hit = receiver.wait_for(1)[0]
        result_url = f"{live.url}/v1/jobs/{job['id']}/result"
        full = httpx.get(result_url, timeout=10).content
    assert "x-voxserve-signature" not in {k.lower() for k in hit["headers"]}
    assert any("job callbacks are sent unsigned" in r.getMessage() for r in caplog.records)
    body = json.loads(hit["body"])
    assert body["status"] == "succeeded" and "result" not in body and len(full) > 1024  # 11 s of words: over 1 KB
    assert body["result_url"] == result_url


def test_cancelled_jobs_call_back(server: LiveServer, corpus: Path) -> None:
    with Receiver() as receiver:
        job = submit(server, corpus / "long" / "lj_LJ001-0001-0032_concat.flac", callback_url=receiver.url())
        assert httpx.delete(f"{server.url}/v1/jobs/{job['id']}", timeout=10).json()["status"] == "cancelled"
        body = verified(receiver.wait_for(1)[0])
        time.sleep(0.3)
    assert body["id"] == job["id"] and body["status"] == "cancelled" and "result" not in body
    assert len(receiver.hits) == 1  # one call back, though both the cancel and the worker saw the job end
    assert settled(server, job["id"])["callback"]["status"] == "delivered"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_undelivered_callback_is_delivered_after_a_restart(tmp_path: Path, data_dir: Path) -> None:
    from voxserve.jobs import Callback, JobStatus, JobStore
    from voxserve.records import to_record
    from voxserve.server.forms import TranscriptionRequest

    port = _free_port()  # the receiver is down while the first server runs
    url = f"http://localhost:{port}/hook"
    with LiveServer(tmp_path, **{**FAST_RETRIES, "webhook_max_attempts": 100}) as first:
        job = submit(first, data_dir / "fw_jfk.flac", callback_url=url)
        wait(first, job["id"])
        deadline = time.monotonic() + 30
        while (state := httpx.get(f"{first.url}/v1/jobs/{job['id']}", timeout=10).json()["callback"])["attempts"] < 2:
            assert time.monotonic() < deadline, state
            time.sleep(0.05)
    assert state["status"] == "pending" and "could not connect" in state["error"]
    # and, queued when the server stopped, a job whose upload is not audio: it fails after the restart
    store = JobStore(tmp_path / "jobs.sqlite3")
    broken = store.create(to_record(TranscriptionRequest()), str(tmp_path / "uploads" / "broken.upload"))
    Path(broken.input_path).write_bytes(b"not audio at all" * 64)
    store.save_callback(broken.id, Callback(url, f"http://127.0.0.1/v1/jobs/{broken.id}/result"))
    lost = store.create(to_record(TranscriptionRequest()), str(tmp_path / "uploads" / "gone.upload"))
    store.save_callback(lost.id, Callback(url, ""))
    assert store.get(broken.id).status == JobStatus.QUEUED  # type: ignore[union-attr]
    store.close()
    with Receiver(port=port) as receiver, LiveServer(tmp_path, **FAST_RETRIES) as second:
        bodies = {b["id"]: b for b in map(verified, receiver.wait_for(3))}
        delivered = settled(second, job["id"])["callback"]
        failed = settled(second, broken.id)
    assert bodies[job["id"]]["status"] == "succeeded" and jfk_wer(bodies[job["id"]]["result"]["text"]) <= 0.1
    assert delivered["status"] == "delivered" and delivered["attempts"] > state["attempts"]
    assert delivered["last_status"] == 200
    assert failed["status"] == "failed" and bodies[broken.id]["status"] == "failed"
    assert bodies[broken.id]["error"]["code"] == failed["error"]["code"] and "result" not in bodies[broken.id]
    assert bodies[lost.id]["status"] == "interrupted" and bodies[lost.id]["error"]["code"] == "interrupted"


REBINDING = "hooks.rebind.test"  # not in any DNS: only the patched resolver below knows it


@pytest.fixture()
def resolutions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Resolve REBINDING to 127.0.0.1 (the system resolver for every other name) and count its look-ups."""
    seen: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == REBINDING:
            seen.append(host)
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return seen


def test_each_attempt_connects_to_the_address_it_checked(tmp_path: Path, data_dir: Path, resolutions: list[str]) -> None:
    """The host is resolved once per check and the POST goes to that address with the name in Host: a name that
    resolved elsewhere by the time of connecting (DNS rebinding) is not asked again."""
    with LiveServer(tmp_path, **{**FAST_RETRIES, "webhook_allow_hosts": ("127.0.0.0/8",)}) as live, \
            Receiver([503]) as receiver:
        job = submit(live, data_dir / "fw_jfk.flac", callback_url=receiver.url(host=REBINDING))
        done = settled(live, job["id"])["callback"]
    assert done["status"] == "delivered" and done["attempts"] == 2
    assert len(resolutions) == 3  # once at creation, once for each attempt: never by the HTTP client
    port = receiver.server.server_address[1]
    assert [h["headers"]["Host"] for h in receiver.hits] == [f"{REBINDING}:{port}"] * 2


def _certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` (with the openssl command)."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
                    "-addext", f"subjectAltName=DNS:{name}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_receivers_are_verified_for_their_name(tmp_path: Path, data_dir: Path, resolutions: list[str]) -> None:
    """Connected by address, an https callback still sends the host's name (SNI) and checks the certificate for it:
    the receiver's certificate for ``localhost`` is accepted as localhost and refused as another name."""
    cert, key = _certificate(tmp_path, "localhost")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    settings = {**FAST_RETRIES, "webhook_allow_hosts": ("localhost", REBINDING), "webhook_ca_file": str(cert),
                "webhook_max_attempts": 2}
    with LiveServer(tmp_path / "server", **settings) as live, Receiver(tls=tls) as receiver:
        good = submit(live, data_dir / "fw_jfk.flac", callback_url=receiver.url())
        delivered = settled(live, good["id"])["callback"]
        body = verified(receiver.wait_for(1)[0])
        wrong = submit(live, data_dir / "fw_jfk.flac", callback_url=receiver.url(host=REBINDING))
        refused = settled(live, wrong["id"])["callback"]
    assert delivered["status"] == "delivered" and body["id"] == good["id"]
    assert refused["status"] == "failed" and refused["attempts"] == 2 and refused["last_status"] is None
    assert "certificate" in refused["error"].lower() and len(receiver.hits) == 1


def test_attempts_wait_for_a_job_store_that_is_down(tmp_path: Path, data_dir: Path) -> None:
    """The database goes away between two attempts: the next attempt's outcome waits to be stored, none is lost
    from the record, and the callback is delivered once the store is back."""
    settings = {**FAST_RETRIES, "webhook_backoff_s": 0.3, "webhook_max_backoff_s": 0.3}
    with LiveServer(tmp_path, **settings) as live, Receiver([503, 503]) as receiver:
        store = live.app.state.ctx.store
        job = submit(live, data_dir / "fw_jfk.flac", callback_url=receiver.url())
        deadline = time.monotonic() + 60
        while httpx.get(f"{live.url}/v1/jobs/{job['id']}", timeout=10).json()["callback"]["attempts"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        store.close()  # (the first attempt is stored; the second comes 0.3 s later)
        try:
            receiver.wait_for(2)
            time.sleep(1.0)  # the second attempt's outcome cannot be stored: no third attempt meanwhile
            assert len(receiver.hits) == 2
        finally:
            store.reopen()
        done = settled(live, job["id"])["callback"]
    assert done["status"] == "delivered" and done["attempts"] == 3 == len(receiver.hits)
