"""The WebSocket routes under test: their client events, and a cheap "marker" event each answers in order, so
a test knows the server has handled everything sent before it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.conftest import embedded_llm_problem
from tests.reliability.conftest import Server
from tests.reliability.report import Tally


@dataclass
class Endpoint:
    """A WebSocket route, its client events, and a cheap event that the server answers in order (a marker)."""

    path: str
    types: list[str]
    marker: dict[str, Any]
    answer: str
    available: Callable[[Server], bool] = lambda server: True
    tally: Tally = field(init=False)

    def __post_init__(self) -> None:
        self.tally = Tally(f"WebSocket events on {self.path}")


def _tts(server: Server) -> bool:
    try:
        server.ctx.vox.tts().voice_info(None)
        return True
    except Exception:  # noqa: BLE001
        return False


def _agent(server: Server) -> bool:
    """The conversation socket has an agent: its modules, a voice, and an LLM that runs here (the embedded
    one is refused where its llama-cpp-python build cannot run on this CPU)."""
    try:
        import voxserve.agent.cascade  # noqa: F401
        import voxserve.server.ws_conversation  # noqa: F401

        if not _tts(server):
            return False
        return bool(server.ctx.settings.agent.llm_url) or embedded_llm_problem() is None
    except ImportError:
        return False


TRANSCRIPTION = Endpoint(
    "/v1/realtime?intent=transcription",
    ["session.update", "transcription_session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
     "input_audio_buffer.clear", "response.create"],
    {"type": "input_audio_buffer.clear"}, "input_audio_buffer.cleared")
CONVERSATION = Endpoint(
    "/v1/realtime",
    ["session.update", "input_audio_buffer.append", "input_audio_buffer.commit", "input_audio_buffer.clear",
     "conversation.item.create", "conversation.item.truncate", "response.create", "response.cancel"],
    {"type": "input_audio_buffer.clear"}, "input_audio_buffer.cleared", _agent)
SPEECH = Endpoint(
    "/v1/audio/speech/stream",
    ["session.update", "text.append", "text.flush", "text.done", "cancel"],
    {"type": "session.update"}, "session.updated", _tts)
ENDPOINTS = {"transcription": TRANSCRIPTION, "conversation": CONVERSATION, "speech": SPEECH}


class WsClient:
    """A plain client of one endpoint (``websockets`` sync API) that can wait for the marker's answer."""

    def __init__(self, server: Server, endpoint: Endpoint, **headers: str) -> None:
        self.endpoint = endpoint
        self.ws: ClientConnection = connect(server.ws_url + endpoint.path, open_timeout=30, max_size=2**24,
                                            additional_headers=headers or None)
        self.events: list[dict[str, Any]] = [json.loads(self.ws.recv(timeout=120))]
        assert self.events[0]["type"] == "session.created", self.events[0]

    def send(self, message: Any) -> None:
        """A dict is sent as JSON; text and bytes as they are."""
        self.ws.send(json.dumps(message) if isinstance(message, dict) else message)

    def send_garbage(self, times: int) -> None:
        """Send ``times`` malformed JSON messages, stopping when the server has closed (its error budget may run
        out while the client still sends)."""
        for _ in range(times):
            try:
                self.send("{garbage")
            except ConnectionClosed:
                return

    def sync(self, timeout: float = 60.0, answers: int = 1) -> list[dict[str, Any]]:
        """Send the marker and return the JSON events received until its answer (the ``answers``-th event of the
        answer's type: 2 when the message just sent was itself the marker's type)."""
        self.send(self.endpoint.marker)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            message = self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))
            if isinstance(message, bytes):
                continue
            event = json.loads(message)
            out.append(event)
            self.events.append(event)
            if event["type"] == self.endpoint.answer:
                answers -= 1
                if not answers:
                    return out

    def errors(self, events: list[dict[str, Any]]) -> list[str]:
        """The error codes among ``events``."""
        return [e["error"]["code"] for e in events if e["type"] == "error"]

    def wait_closed(self, timeout: float = 30.0) -> int | None:
        """Read (keeping events) until the server closes; its close code (None: no close frame)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                message = self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))
                if isinstance(message, str):
                    self.events.append(json.loads(message))
        except ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd is not None else None
        except TimeoutError:
            return -1
        return -1

    def close(self) -> None:
        self.ws.close()
