"""A WebSocket client over a plain blocking socket (``websockets``' sans-I/O protocol), for abuse tests that
need control a normal client does not give: a client that stops reading (half-open), frames of any size,
a tiny receive buffer, and the exact close code the server sent."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Close
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri


class RawWebSocket:
    """``RawWebSocket(url)`` connects and completes the handshake; nothing is read unless asked."""

    def __init__(self, url: str, *, rcvbuf: int | None = None, headers: dict[str, str] | None = None,
                 timeout: float = 30.0) -> None:
        uri = parse_uri(url)
        self.protocol = ClientProtocol(uri, max_size=None)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect, so the window the server sees is small from the start
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((uri.host, uri.port))
        request = self.protocol.connect()
        for name, value in (headers or {}).items():
            request.headers[name] = value
        self.protocol.send_request(request)
        self._flush()
        self.messages: list[Any] = []
        while self.protocol.state == State.CONNECTING:
            self._read_once()
        if self.protocol.handshake_exc is not None:
            raise self.protocol.handshake_exc

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:
                self.sock.sendall(data)

    def _read_once(self, timeout: float | None = None) -> bool:
        """Read what is there; False when the connection ended."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if data:
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        for event in self.protocol.events_received():
            if isinstance(event, Response):
                continue
            if getattr(event, "opcode", None) is not None and event.opcode.name in ("TEXT", "BINARY"):
                self.messages.append(event.data.decode() if event.opcode.name == "TEXT" else bytes(event.data))
        self._flush()
        return bool(data)

    def send_text(self, text: str) -> None:
        """Send one text frame (blocks while the server's receive window is full)."""
        self.protocol.send_text(text.encode())
        self._flush()

    def send_json(self, event: dict[str, Any]) -> None:
        """Send one JSON event."""
        self.send_text(json.dumps(event))

    def send_bytes(self, data: bytes) -> None:
        """Send one binary frame."""
        self.protocol.send_binary(data)
        self._flush()

    def read_until_closed(self, timeout: float = 30.0) -> int | None:
        """Read (collecting messages) until the server closes; the close code, or None on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not self._read_once(timeout=max(0.05, deadline - time.monotonic())):
                    break
            except TimeoutError:
                break
            if self.protocol.close_rcvd is not None:
                break
        return self.close_code

    def events(self) -> list[dict[str, Any]]:
        """The JSON messages received so far."""
        return [json.loads(m) for m in self.messages if isinstance(m, str)]

    @property
    def close_code(self) -> int | None:
        """The code of the server's close frame, if one arrived."""
        rcvd: Close | None = self.protocol.close_rcvd
        return None if rcvd is None else int(rcvd.code)

    def is_open(self, wait_s: float = 0.2) -> bool:
        """Whether the server still holds the connection open (reads, so call only when reading is fine)."""
        try:
            self._read_once(timeout=wait_s)
        except TimeoutError:
            return self.protocol.close_rcvd is None
        return self.protocol.close_rcvd is None and self.protocol.state != State.CLOSED

    def abort(self) -> None:
        """Drop the TCP connection without a closing handshake (a client that vanished)."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        finally:
            self.sock.close()

    def close(self) -> None:
        """Close politely (best effort), then the socket."""
        try:
            self.protocol.send_close(1000)
            self._flush()
        except Exception:  # noqa: BLE001 - already closed
            pass
        self.sock.close()
