"""Fuzzing the WebSocket protocols on live sockets: random JSON events, random text and binary frames on
``/v1/realtime?intent=transcription``, the conversation mode (``/v1/realtime``) and ``/v1/audio/speech/stream``.

Every message gets normal events or an ``error`` event and the session goes on; the only close allowed is the
documented 1008 after the error budget (``MAX_ERRORS``), after which the client reconnects. Never a 1011, never a
connection dropped without a close frame; afterwards the server holds no session and answers ``/health``."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.reliability.conftest import Server, budget, wait_until
from tests.reliability.wsproto import CONVERSATION, ENDPOINTS, SPEECH, TRANSCRIPTION, Endpoint

KEYS = ["type", "event_id", "audio", "session", "item", "item_id", "audio_end_ms", "response", "text", "voice",
        "speed", "binary", "input", "format", "rate", "transcription", "turn_detection", "model", "language",
        "prompt", "threshold", "prefix_padding_ms", "silence_duration_ms", "voxserve", "partial_events",
        "speakers", "partial_interval_ms", "input_audio_format", "input_sample_rate", "input_audio_transcription",
        "output", "instructions", "role", "content", "max_output_tokens", "temperature", "create_response",
        "interrupt_response", "output_audio_format", "audio_events"]
STRINGS = ["", "whisper-1", "whisper-base", "nope", "/etc", "../x.onnx", "audio/pcm", "audio/pcmu", "audio/pcma",
           "audio/mp3", "pcm16", "g711_ulaw", "g711_alaw", "server_vad", "semantic_vad", "transcription", "realtime",
           "en", "xx", "user", "assistant", "system", "message", "input_text", "ga", "beta", "joe", "alloy",
           "nobody", "AAAA", "@@@", "🙂", "\u0000", "item_000001"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False),
                    st.sampled_from([0, 1, 8000, 16000, 24000, 44100, 2**31, -1, 0.5, 7, 1e308]),
                    st.sampled_from(STRINGS), st.text(max_size=16))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5), max_leaves=12)
PCM = st.binary(max_size=4800).map(lambda b: base64.b64encode(b).decode())


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(strategy, SCALARS)


def session_updates() -> st.SearchStrategy[dict[str, Any]]:
    """``session.update`` events of the right shape (GA and beta) with random values at the leaves."""
    turn = st.fixed_dictionaries({}, optional={
        "type": _maybe(st.sampled_from(["server_vad", "semantic_vad"])), "threshold": SCALARS,
        "prefix_padding_ms": SCALARS, "silence_duration_ms": SCALARS, "create_response": SCALARS})
    transcription = st.fixed_dictionaries({}, optional={"model": SCALARS, "language": SCALARS, "prompt": SCALARS})
    fmt = st.fixed_dictionaries({}, optional={"type": _maybe(st.sampled_from(["audio/pcm", "audio/pcmu", "audio/pcma"])),
                                              "rate": SCALARS})
    ga = st.fixed_dictionaries({"type": _maybe(st.sampled_from(["transcription", "realtime"]))}, optional={
        "audio": _maybe(st.fixed_dictionaries({}, optional={"input": _maybe(st.fixed_dictionaries({}, optional={
            "format": _maybe(fmt), "transcription": _maybe(transcription), "turn_detection": _maybe(turn)})),
            "output": VALUES})),
        "voxserve": VALUES, "instructions": SCALARS})
    beta = st.fixed_dictionaries({}, optional={
        "input_audio_format": SCALARS, "input_sample_rate": SCALARS, "input_audio_transcription": _maybe(transcription),
        "turn_detection": _maybe(turn), "voice": SCALARS})
    return st.one_of(st.builds(lambda s: {"type": "session.update", "session": s}, ga),
                     st.builds(lambda s: {"type": "transcription_session.update", "session": s}, beta))


def events(types: list[str]) -> st.SearchStrategy[Any]:
    """A message: a JSON event of a known or random type with random fields, raw text, or a binary frame."""
    event = st.builds(
        lambda kind, fields, audio: {**fields, "type": kind, **({"audio": audio} if audio else {})},
        st.sampled_from(types) | st.text(max_size=20),
        st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
        st.one_of(st.none(), PCM, st.text(max_size=10)),
    )
    return st.one_of(
        event.map(json.dumps),
        session_updates().map(json.dumps),
        st.text(max_size=80),
        VALUES.map(json.dumps),
        st.binary(max_size=4801),
        st.sampled_from(["[" * 10_000, '{"type": ' * 3000, '{"type": "x"' + ", " * 10_000 + "}", "1" * 5000, "null"]),
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("fuzz-ws"), server={"warmup": True}, tts={"max_ahead_s": 0.0},
                agent={"max_output_tokens": 8}) as s:
        yield s


class Client:
    """One fuzzing client that reconnects after the documented 1008 (error budget spent)."""

    def __init__(self, server: Server, endpoint: Endpoint) -> None:
        self.server = server
        self.endpoint = endpoint
        self.ws: ClientConnection | None = None

    def open(self) -> ClientConnection:
        if self.ws is None:
            self.ws = connect(self.server.ws_url + self.endpoint.path, open_timeout=30, max_size=2**24)
            first = json.loads(self.ws.recv(timeout=120))
            assert first["type"] in ("session.created",), first
        return self.ws

    def roundtrip(self, messages: list[Any]) -> list[str]:
        """Send the messages, then the marker; the outcomes (``error:<code>`` or event types) until the
        marker's answer, or ``closed:1008``."""
        ws = self.open()
        try:
            for m in messages:
                ws.send(m)
            ws.send(json.dumps(self.endpoint.marker))
            seen: list[str] = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                event = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
                if event["type"] == "error":
                    assert event["error"]["code"] != "internal_error", event
                    seen.append(f"error:{event['error']['code']}")
                elif event["type"] == self.endpoint.answer:
                    return seen or ["ok"]
            pytest.fail(f"no {self.endpoint.answer} within 60 s after {messages!r:.300}")
        except ConnectionClosed as exc:
            self.ws = None
            code = exc.rcvd.code if exc.rcvd is not None else None
            assert code == 1008, f"closed with {code} ({exc!r}) after {messages!r:.300}"
            return ["closed:1008"]
        except TimeoutError:
            pytest.fail(f"the server stopped answering after {messages!r:.300}")

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None


@pytest.fixture(scope="module")
def clients(server: Server) -> Iterator[dict[str, Client]]:
    out = {name: Client(server, endpoint) for name, endpoint in ENDPOINTS.items()}
    yield out
    for name, client in out.items():
        client.close()
        if ENDPOINTS[name].tally.inputs:
            ENDPOINTS[name].tally.write()


def _fuzz(server: Server, clients: dict[str, Client], name: str, messages: list[Any]) -> None:
    endpoint = ENDPOINTS[name]
    if not endpoint.available(server):
        pytest.skip(f"{endpoint.path} is not available here")
    outcomes = clients[name].roundtrip(messages)
    errors = [o for o in outcomes if o != "ok"]
    for outcome in errors:  # one label per message sent: its error, or "accepted"
        endpoint.tally.add(outcome)
    for _ in range(len(messages) - len(errors)):
        endpoint.tally.add("accepted")


def fuzz_settings(n: int) -> Callable[..., object]:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@fuzz_settings(budget(150, 4600))
@given(messages=st.lists(events(TRANSCRIPTION.types), min_size=1, max_size=3))
def test_transcription_events(server: Server, clients: dict[str, Client], messages: list[Any]) -> None:
    _fuzz(server, clients, "transcription", messages)


@fuzz_settings(budget(60, 4600))
@given(messages=st.lists(events(CONVERSATION.types), min_size=1, max_size=3))
def test_conversation_events(server: Server, clients: dict[str, Client], messages: list[Any]) -> None:
    _fuzz(server, clients, "conversation", messages)


@fuzz_settings(budget(80, 4600))
@given(messages=st.lists(events(SPEECH.types), min_size=1, max_size=3))
def test_speech_stream_events(server: Server, clients: dict[str, Client], messages: list[Any]) -> None:
    _fuzz(server, clients, "speech", messages)


def test_nothing_is_left_behind(server: Server, clients: dict[str, Client]) -> None:
    for client in clients.values():
        client.close()
    assert wait_until(lambda: server.live_sessions() == 0, 20), server.live_sessions()
    assert wait_until(lambda: not server.ctx.extras.get("agent_sessions"), 20)
    assert server.healthy()
