"""Job callbacks: when a job with a ``callback_url`` ends, one signed JSON POST to it, retried with exponential
backoff, its delivery state kept in the job store so that a restart resumes it.

Each attempt resolves the host again, checks every address (``webhook_policy``) and connects to a checked
address (the Host header and, for https, SNI and certificate verification keep the host's name), so a name
that starts resolving elsewhere (DNS rebinding) cannot turn a callback inward. Redirects are not followed
and response bodies are not read. Delivery is at least once: a receiver deduplicates by job id.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any

import certifi
import httpx

from voxserve.config import ServerConfig
from voxserve.errors import InvalidInput
from voxserve.jobs import Callback, CallbackStatus, Job, JobStatus, JobStore, until_stored
from voxserve.records import from_record
from voxserve.server.forms import TranscriptionRequest
from voxserve.server.http_asr import respond
from voxserve.server.metrics import Metrics
from voxserve.server.webhook_policy import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Address,
    check_addresses,
    host_addresses,
    parse_callback_url,
    signature,
)
from voxserve.types import Transcript

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebhookOptions:
    """How callbacks are checked, signed and retried (see the ``webhook_*`` fields of ``ServerConfig``)."""

    secret: str
    allow_hosts: tuple[str, ...]
    timeout_s: float
    max_attempts: int
    backoff_s: float
    max_backoff_s: float
    max_result_bytes: int
    ca_file: str

    @classmethod
    def from_settings(cls, server: ServerConfig) -> WebhookOptions:
        """The options of a server's settings."""
        return cls(server.webhook_secret, server.webhook_allow_hosts, server.webhook_timeout_s,
                   server.webhook_max_attempts, server.webhook_backoff_s, server.webhook_max_backoff_s,
                   int(server.webhook_max_result_kb * 1024), server.webhook_ca_file)

    def delay_s(self, attempts: int, retry_after_s: float | None = None) -> float:
        """The wait after ``attempts`` failed attempts (or the receiver's ``Retry-After``), at most the cap."""
        wait = retry_after_s if retry_after_s is not None else self.backoff_s * 2 ** (attempts - 1)
        return min(wait, self.max_backoff_s)


@dataclass(frozen=True)
class Target:
    """A checked callback URL and the addresses it may be sent to."""

    url: httpx.URL
    addresses: list[Address]


async def check_callback_url(raw: str, options: WebhookOptions) -> Target:
    """Parse, resolve and check a callback URL; ``InvalidInput`` (param ``callback_url``) when refused."""
    url = parse_callback_url(raw)
    addresses = host_addresses(url)
    if addresses is None:
        try:
            async with asyncio.timeout(options.timeout_s):
                found = await asyncio.get_running_loop().getaddrinfo(_ascii_host(url), url.port,
                                                                     type=socket.SOCK_STREAM)
        except (OSError, TimeoutError) as exc:
            raise InvalidInput(f"callback_url host {url.host!r} does not resolve ({exc})", param="callback_url",
                               code="callback_host_unresolved") from None
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in found))
    check_addresses(url.host, addresses, options.allow_hosts)
    return Target(url, addresses)


def _ascii_host(url: httpx.URL) -> str:
    """The host as DNS and TLS know it (an international name in its xn-- form)."""
    return url.raw_host.decode("ascii")


@dataclass(frozen=True)
class Attempt:
    """How one POST went."""

    delivered: bool
    retry: bool
    status: int | None = None
    error: str | None = None
    retry_after_s: float | None = None


def _retryable_status(status: int) -> bool:
    return status >= 500 or status == 429


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def signed_headers(body: bytes, secret: str, now: float | None = None) -> dict[str, str]:
    """The headers of a callback POST; signed (``X-Voxserve-Signature``) when there is a secret."""
    timestamp = str(int(time.time() if now is None else now))
    headers = {"Content-Type": "application/json", "User-Agent": "voxserve-webhook", TIMESTAMP_HEADER: timestamp}
    if secret:
        headers[SIGNATURE_HEADER] = signature(secret, timestamp, body)
    return headers


async def post_once(raw_url: str, body: bytes, options: WebhookOptions, verify: ssl.SSLContext) -> Attempt:
    """One callback attempt: check the URL, then POST to its checked addresses in turn until one connects
    (``verify``: how https receivers' certificates are checked, for their host name; see :func:`tls_context`)."""
    try:
        target = await check_callback_url(raw_url, options)
    except InvalidInput as exc:  # refused now (DNS changed): retrying will not help
        return Attempt(False, retry=exc.code == "callback_host_unresolved", error=exc.message)
    headers = {**signed_headers(body, options.secret), "Host": target.url.netloc.decode("ascii")}
    extensions = {"sni_hostname": _ascii_host(target.url)} if target.url.scheme == "https" else {}
    error = "no address"
    async with httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=options.timeout_s,
                                 verify=verify) as client:
        for address in target.addresses:
            request = client.build_request("POST", target.url.copy_with(host=str(address)), content=body,
                                           headers=headers, extensions=extensions)
            try:
                async with asyncio.timeout(options.timeout_s):
                    response = await client.send(request, stream=True)  # the body is never read
                    await response.aclose()
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                error = f"could not connect to {address}: {exc or type(exc).__name__}"
                continue
            except (httpx.HTTPError, TimeoutError) as exc:
                return Attempt(False, retry=True, error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            status = response.status_code
            if 200 <= status < 300:
                return Attempt(True, retry=False, status=status)
            why = "redirect not followed" if 300 <= status < 400 else "receiver answered"
            return Attempt(False, _retryable_status(status), status, f"{why}: HTTP {status}", _retry_after(response))
    return Attempt(False, retry=True, error=error)


def tls_context(options: WebhookOptions) -> ssl.SSLContext:
    """The certificate check of https receivers: the CAs of ``ca_file``, or certifi's (made once: loading them
    costs more than a POST on a local network)."""
    return ssl.create_default_context(cafile=options.ca_file or certifi.where())


def callback_body(job: Job, max_result_bytes: int) -> bytes:
    """The POSTed JSON: the job as ``GET /v1/jobs/{id}`` shows it (without its callback state), ``result_url``,
    and, when it fits in ``max_result_bytes``, ``result``: the transcript as the job's JSON format gives it
    (``verbose_json``, or ``diarized_json`` when the job asked for that)."""
    assert job.callback is not None
    body: dict[str, Any] = {k: v for k, v in job.public().items() if k != "callback"}
    body["result_url"] = job.callback.result_url
    if job.status == JobStatus.SUCCEEDED and job.result is not None:
        asked = from_record(TranscriptionRequest, job.params)
        fmt = "diarized_json" if asked.response_format == "diarized_json" else "verbose_json"
        rendered = respond(from_record(Transcript, job.result), fmt, asked.granularities or ("word", "segment")).body
        if len(rendered) <= max_result_bytes:
            body["result"] = json.loads(bytes(rendered))
    return json.dumps(body, separators=(",", ":")).encode()


class WebhookSender:
    """Delivers the callbacks of ended jobs (one task per job; event-loop only)."""

    def __init__(self, store: JobStore, options: WebhookOptions, metrics: Metrics) -> None:
        self.store = store
        self.options = options
        self.metrics = metrics
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._verify = tls_context(options)  # a CA file that cannot be read stops the server at start

    def start(self) -> None:
        """Resume the callbacks a previous process left undelivered (call inside the event loop)."""
        if not self.options.secret:
            log.warning("no webhook secret (--webhook-secret, VOXSERVE_SERVER__WEBHOOK_SECRET): job callbacks are "
                        "sent unsigned")
        for job in self.store.pending_callbacks():
            log.info("job %s: resuming its callback after a restart", job.id)
            self.notify(job)

    def notify(self, job: Job) -> None:
        """A job ended: deliver its callback, if it has one and it is not being delivered already."""
        if job.callback is not None and job.id not in self._tasks:
            self._tasks[job.id] = asyncio.ensure_future(self._deliver(job.id))

    async def stop(self) -> None:
        """Stop delivering; undelivered callbacks stay pending in the store for the next start."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _deliver(self, job_id: str) -> None:
        try:
            job = await until_stored(self.store.get, job_id)
            if job is None or job.callback is None:
                return
            body = callback_body(job, self.options.max_result_bytes)
            callback = job.callback
            while callback.status == CallbackStatus.PENDING:
                attempt = await post_once(callback.url, body, self.options, self._verify)
                self._record(job_id, callback, attempt)
                await until_stored(self.store.save_callback, job_id, callback)  # before the next attempt
                if callback.status == CallbackStatus.PENDING:
                    await asyncio.sleep(self.options.delay_s(callback.attempts, attempt.retry_after_s))
        finally:
            self._tasks.pop(job_id, None)

    def _record(self, job_id: str, callback: Callback, attempt: Attempt) -> None:
        callback.attempts += 1
        callback.last_status, callback.error = attempt.status, attempt.error
        if attempt.delivered:
            callback.status, callback.delivered_at, outcome = CallbackStatus.DELIVERED, time.time(), "delivered"
        elif attempt.retry and callback.attempts < self.options.max_attempts:
            outcome = "retried"
        else:
            callback.status, outcome = CallbackStatus.FAILED, "failed"
            log.warning("job %s: callback given up after %d attempts: %s", job_id, callback.attempts, attempt.error)
        self.metrics.webhook_attempts.labels(outcome).inc()
