"""Which callback URLs a job may name, and how a callback is signed: pure functions, no I/O.

A callback URL is ``http`` or ``https``, names a host, carries no credentials and is at most 2,048 characters.
Every address its host resolves to must be public: loopback, private (RFC 1918, fc00::/7), shared (100.64/10),
link-local (169.254/16 with the cloud metadata address, fe80::/10), multicast, unspecified, reserved and
documentation addresses are refused, also when wrapped in IPv6 (``::ffff:127.0.0.1``, 6to4), unless the
server allows the host by name, by address or by network (``server.webhook_allow_hosts``).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable

import httpx

from voxserve.errors import InvalidInput

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_CHARS = 2048
SIGNATURE_HEADER = "X-Voxserve-Signature"
TIMESTAMP_HEADER = "X-Voxserve-Timestamp"

_KINDS = (
    ("is_unspecified", "unspecified"), ("is_loopback", "loopback"), ("is_link_local", "link-local"),
    ("is_multicast", "multicast"), ("is_private", "private"), ("is_reserved", "reserved"),
)


def address_refusal(address: Address) -> str | None:
    """Why a callback may not go to ``address`` (``"loopback"``, ``"private"``, ...), or None for a public one."""
    inner = _embedded_ipv4(address)
    if inner is not None:
        return address_refusal(inner)
    for attribute, kind in _KINDS:
        if getattr(address, attribute):
            return kind
    return None if address.is_global else "not public"


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped (``::ffff:a.b.c.d``) or 6to4 (``2002:aabb:ccdd::``) one."""
    if isinstance(address, ipaddress.IPv6Address):
        return address.ipv4_mapped or address.sixtofour
    return None


def is_allowed(host: str, address: Address, allow: Iterable[str]) -> bool:
    """Whether the server allows callbacks to ``host`` at ``address``: an entry of ``allow`` names the host
    (case-insensitive), the address, or a network holding it."""
    for entry in allow:
        entry = entry.strip().lower()
        if entry == host.lower().rstrip("."):
            return True
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:  # a host name
            continue
    return False


def check_addresses(host: str, addresses: Iterable[Address], allow: Iterable[str]) -> None:
    """Refuse (``InvalidInput``, param ``callback_url``) unless every address of ``host`` may be called."""
    allow = tuple(allow)
    for address in addresses:
        kind = address_refusal(address)
        if kind is not None and not is_allowed(host, address, allow):
            raise InvalidInput(
                f"callback_url host {host!r} resolves to a {kind} address ({address}); callbacks go to public "
                "addresses only unless the server allows the host (--allow-webhook-host)",
                param="callback_url", code="callback_host_refused",
            )


def parse_callback_url(raw: str) -> httpx.URL:
    """The URL, or ``InvalidInput`` (param ``callback_url``) for anything but a plain http(s) URL with a host."""
    if len(raw) > MAX_URL_CHARS:
        raise _malformed(f"callback_url is longer than {MAX_URL_CHARS} characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in raw):
        raise _malformed("callback_url may not contain spaces or control characters")
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, ValueError) as exc:
        raise _malformed(f"callback_url is not a valid URL ({exc})") from None
    if url.port is not None and not 0 < url.port < 65536:
        raise _malformed(f"callback_url is not a valid URL (port {url.port})")
    if url.scheme not in ("http", "https"):
        raise _malformed("callback_url must be an http or https URL")
    if not url.host:
        raise _malformed("callback_url has no host")
    if url.userinfo:
        raise _malformed("callback_url may not carry credentials (user:password@)")
    return url


def host_addresses(url: httpx.URL) -> list[Address] | None:
    """The address a URL names directly (an IP literal), or None when its host is a name to resolve."""
    try:
        return [ipaddress.ip_address(url.host)]
    except ValueError:
        return None


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Voxserve-Signature`` value: ``sha256=`` and the hex HMAC-SHA256, keyed by ``secret``, of the
    timestamp header's value, a ``.`` and the raw body."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _malformed(message: str) -> InvalidInput:
    return InvalidInput(message, param="callback_url", code="invalid_callback_url")
