"""Which callback URLs and addresses a job may name, the signature a receiver checks, the backoff, and the job
store's callback column (also added to a database made before callbacks)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from voxserve.config import ServerConfig
from voxserve.errors import InvalidInput
from voxserve.jobs import Callback, CallbackStatus, JobStatus, JobStore
from voxserve.server.webhook_policy import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    address_refusal,
    check_addresses,
    is_allowed,
    parse_callback_url,
)
from voxserve.server.webhooks import WebhookOptions, signed_headers

REFUSED = {
    "127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback",
    "10.1.2.3": "private", "172.16.0.1": "private", "172.31.255.255": "private", "192.168.1.1": "private",
    "fc00::1": "private", "fd12:3456::1": "private",
    "169.254.169.254": "link-local", "169.254.0.1": "link-local", "fe80::1": "link-local",
    "224.0.0.1": "multicast", "239.255.255.250": "multicast", "ff02::1": "multicast",
    "0.0.0.0": "unspecified", "::": "unspecified",
    "240.0.0.1": "private", "100.64.0.1": "not public", "192.0.2.5": "private", "2001:db8::1": "private",
    "::ffff:127.0.0.1": "loopback", "::ffff:169.254.169.254": "link-local", "2002:0a00:0001::": "private",
}


@pytest.mark.parametrize("address,kind", REFUSED.items())
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_every_resolved_address_is_checked() -> None:
    public, private = ipaddress.ip_address("8.8.8.8"), ipaddress.ip_address("10.0.0.7")
    check_addresses("hooks.example.com", [public], ())
    with pytest.raises(InvalidInput) as refused:
        check_addresses("hooks.example.com", [public, private], ())  # a rebinding name with one inward address
    assert refused.value.param == "callback_url" and refused.value.code == "callback_host_refused"
    assert "10.0.0.7" in refused.value.message and "private" in refused.value.message


def test_the_allow_list_names_hosts_addresses_and_networks() -> None:
    loopback, lan = ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.2.3.4")
    assert is_allowed("Hooks.Internal.", lan, ("hooks.internal",))
    assert is_allowed("127.0.0.1", loopback, ("127.0.0.1",))
    assert is_allowed("build.lan", lan, ("10.0.0.0/8",))
    assert not is_allowed("build.lan", lan, ("10.3.0.0/16", "other.lan"))
    assert not is_allowed("hooks.internal.evil.com", lan, ("hooks.internal",))
    check_addresses("localhost", [loopback, ipaddress.ip_address("::1")], ("localhost",))
    with pytest.raises(InvalidInput):
        check_addresses("localhost", [loopback], ("127.0.0.2",))


@pytest.mark.parametrize("url,why", [
    ("ftp://example.com/x", "http or https"),
    ("file:///etc/passwd", "http or https"),
    ("gopher://example.com:70/", "http or https"),
    ("http://user:secret@example.com/hook", "credentials"),
    ("https://:token@example.com/hook", "credentials"),
    ("http:///nohost", "no host"),
    ("http://exa mple.com/", "spaces"),
    ("http://example.com:99999/", "valid URL"),
    ("hooks.example.com/x", "http or https"),
    ("https://example.com/" + "a" * 2100, "longer"),
])
def test_malformed_callback_urls_are_refused(url: str, why: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_callback_url(url)
    assert refused.value.param == "callback_url" and why in refused.value.message


def test_a_plain_url_parses() -> None:
    url = parse_callback_url("https://hooks.example.com:8443/voxserve?team=7")
    assert (url.scheme, url.host, url.port, url.path) == ("https", "hooks.example.com", 8443, "/voxserve")
    assert parse_callback_url("http://[2606:4700::1111]/h").host == "2606:4700::1111"


def readme_receiver() -> Callable[[bytes, dict[str, str], bytes], bool]:
    """The README's receiver check, run as written."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = re.search(r"```python\n(import hashlib, hmac, time\ndef verified\(.*?)```", readme, re.S)
    assert code, "the README lost its signature check"
    namespace: dict[str, Any] = {}
    exec(code.group(1), namespace)  # noqa: S102 - the README's own example
    return cast(Callable[[bytes, dict[str, str], bytes], bool], namespace["verified"])


def test_a_receiver_verifies_the_signature() -> None:
    verified = readme_receiver()
    body = b'{"id":"job_1","status":"succeeded"}'
    headers = signed_headers(body, "s3cret")
    assert abs(int(headers[TIMESTAMP_HEADER]) - time.time()) < 2
    assert verified(b"s3cret", headers, body)
    assert not verified(b"other", headers, body)
    assert not verified(b"s3cret", headers, body.replace(b"succeeded", b"failed"))
    assert not verified(b"s3cret", {**headers, TIMESTAMP_HEADER: str(int(time.time()) + 1)}, body)  # signed too
    stale = signed_headers(body, "s3cret", now=time.time() - 3600)
    assert not verified(b"s3cret", stale, body)  # a replay an hour later
    own = "sha256=" + hmac.new(b"s3cret", headers[TIMESTAMP_HEADER].encode() + b"." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(own, headers[SIGNATURE_HEADER])
    assert SIGNATURE_HEADER not in signed_headers(body, "")  # no secret: unsigned


def test_backoff_doubles_up_to_the_cap() -> None:
    options = WebhookOptions.from_settings(ServerConfig(webhook_backoff_s=1.0, webhook_max_backoff_s=5.0))
    assert [options.delay_s(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert options.delay_s(1, retry_after_s=3.0) == 3.0 and options.delay_s(1, retry_after_s=60.0) == 5.0
    assert WebhookOptions.from_settings(ServerConfig()).max_result_bytes == 256 * 1024


def test_the_store_keeps_callbacks_and_finds_undelivered_ones(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite3")
    pending = store.create({}, "")
    pending.callback = Callback("https://hooks.example.com/a", "http://127.0.0.1:8000/v1/jobs/x/result")
    store.save_callback(pending.id, pending.callback)
    pending.status = JobStatus.SUCCEEDED
    store.save(pending)
    running = store.create({}, "")
    store.save_callback(running.id, Callback("https://hooks.example.com/b", ""))
    delivered = store.create({}, "")
    delivered.status = JobStatus.FAILED
    store.save(delivered)
    store.save_callback(delivered.id, Callback("https://hooks.example.com/c", "", CallbackStatus.DELIVERED, 2, 204))
    assert [j.id for j in store.pending_callbacks()] == [pending.id]
    pending.callback.attempts = 99  # save() leaves the callback column to save_callback()
    store.save(pending)
    shown = store.get(pending.id)
    assert shown is not None and shown.callback is not None
    assert shown.public()["callback"] == {"url": "https://hooks.example.com/a", "status": "pending", "attempts": 0,
                                          "last_status": None, "delivered_at": None, "error": None}
    store.close()


def test_a_database_from_before_callbacks_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, status TEXT NOT NULL, params TEXT NOT NULL, input_path TEXT"
                " NOT NULL, created_at REAL, updated_at REAL, duration_s REAL, progress_s REAL, wall_s REAL,"
                " restarts INTEGER, error TEXT, result TEXT)")
    old.execute("INSERT INTO jobs VALUES ('job_old', 'succeeded', '{}', '', 1, 1, 2, 2, 1, 0, NULL, '{}')")
    old.commit()
    old.close()
    store = JobStore(path)
    job = store.get("job_old")
    assert job is not None and job.callback is None and job.public()["callback"] is None
    store.save_callback("job_old", Callback("https://hooks.example.com/", ""))
    assert store.pending_callbacks()[0].id == "job_old"
    store.close()


def test_serve_flags_and_environment_set_the_webhook_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from voxserve.cli import build_parser
    from voxserve.cli.serve import serve_settings

    args = build_parser().parse_args(["serve", "--webhook-secret", "s", "--allow-webhook-host", "hooks.lan",
                                      "--allow-webhook-host", "10.0.0.0/8"])
    server = serve_settings(args).server
    assert (server.webhook_secret, server.webhook_allow_hosts) == ("s", ("hooks.lan", "10.0.0.0/8"))
    monkeypatch.setenv("VOXSERVE_SERVER__WEBHOOK_SECRET", "from-env")
    assert serve_settings(build_parser().parse_args(["serve"])).server.webhook_secret == "from-env"
    assert serve_settings(build_parser().parse_args(["serve"])).server.webhook_allow_hosts == ()
