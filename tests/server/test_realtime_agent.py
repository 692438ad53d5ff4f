"""Conversation sessions over the Realtime WebSocket (``/v1/realtime`` without intent) with real clients, on a
fake agent (scripted ASR, LLM and voice): protocol, event order, audio formats, bad input, a dead LLM endpoint.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from tests.server.conftest import LiveServer
from tests.server.realtime_client import Session
from voxserve.agent.cascade import Agent
from voxserve.agent.fakes import FakeLlm
from voxserve.agent.llm import HttpChatLlm
from voxserve.audio import resample
from voxserve.audio.pcm import float32_to_pcm16, g711_ulaw_to_float32
from voxserve.backends.base import VoiceEntry
from voxserve.backends.fakes import FakeAsr, FakeVad
from voxserve.backends.tts.catalog import VoiceCatalog
from voxserve.backends.tts.fakes import FakeAcoustic, FakeDecoder
from voxserve.engine.batcher import BatcherConfig, MicroBatcher
from voxserve.engine.pool import AsrService
from voxserve.engine.tts_pool import VoicePool
from voxserve.streaming.tts import TtsStreamParams
from voxserve.streaming.tts_service import TtsService

pytestmark = pytest.mark.slow  # a real server (it loads the default recogniser at start)
REPLY = "The password is seagull seven."
GA = {"type": "session.update", "session": {
    "type": "realtime", "instructions": "Be brief.",
    "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 400}},
              "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "fake"}},
}}


def question_pcm(seconds: float = 1.5, silence_s: float = 1.5) -> bytes:
    """A 24 kHz PCM16 'question' that the fake recogniser hears as words (its level names them)."""
    n = int(seconds * 16000)
    speech = 0.1 * np.where(np.arange(n) % 40 < 20, 1.0, -1.0)
    audio = np.concatenate([np.zeros(8000), speech, np.zeros(int(silence_s * 16000))]).astype(np.float32)
    return float32_to_pcm16(resample(audio, 16000, 24000))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tmp_path_factory.mktemp("agent")) as live:
        yield live


@pytest.fixture
def fake_agent(server: LiveServer) -> Iterator[Agent]:
    model = FakeAsr(script=lambda audio, _o: "What is the wifi password?" if np.abs(audio).max() > 0.05 else "")
    asr = AsrService(model, MicroBatcher(model.transcribe_batch, BatcherConfig(max_batch_size=4, max_wait_ms=1)))
    acoustic, decoder = FakeAcoustic(), FakeDecoder(samples_per_frame=40)  # 10 ms of 8 kHz audio per character
    catalog = VoiceCatalog(default_voice="fake")
    catalog.register(VoiceEntry(acoustic.voice, lambda: (acoustic, decoder)))
    tts = TtsService(VoicePool(catalog, BatcherConfig(max_batch_size=4, max_wait_ms=1)), TtsStreamParams(max_ahead_s=0))
    ctx = server.app.state.ctx
    agent = Agent(asr, FakeVad, ctx.vox.executor, tts, FakeLlm(REPLY, ttft_s=0.01), observer=ctx.metrics)
    ctx.extras["agent"] = agent
    yield agent
    ctx.extras.pop("agent", None)
    tts.close()
    asr.batcher.close()


def open_conversation(url: str) -> Session:
    ws = connect(url.replace("http://", "ws://") + "/v1/realtime", max_size=2**24, open_timeout=30)
    return Session(ws).start()


def types(s: Session) -> list[str]:
    return [e["type"] for e in s.events]


def test_voice_turn_event_order_audio_and_metrics(server: LiveServer, fake_agent: Agent) -> None:
    s = open_conversation(server.url)
    s.send(GA)
    s.wait_for("session.updated")
    s.stream(question_pcm(), chunk_ms=100, speed=2.0)
    [done] = s.wait_for("response.done", timeout=30)
    order = ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
             "conversation.item.created", "conversation.item.input_audio_transcription.completed", "response.created",
             "response.output_item.added", "response.output_audio_transcript.delta", "response.output_audio.delta",
             "response.output_audio.done", "response.output_audio_transcript.done", "response.output_item.done",
             "response.done"]
    seen = types(s)
    assert [seen.index(k) for k in order] == sorted(seen.index(k) for k in order), seen
    # GA clients (LiveKit) wait for conversation.item.added / .done: the user's item, then the reply's
    added, item_done = s.of_type("conversation.item.added"), s.of_type("conversation.item.done")
    assert [e["item"]["role"] for e in added] == ["user", "assistant"]
    assert [e["item"]["role"] for e in item_done] == ["user", "assistant"]
    assert item_done[-1]["item"]["status"] == "completed" and seen.index("conversation.item.done") > seen.index(
        "conversation.item.added")
    assert seen[0] == "session.created" and s.of_type("session.created")[0]["session"]["type"] == "realtime"
    updated = s.of_type("session.updated")[0]["session"]
    assert updated["instructions"] == "Be brief." and updated["audio"]["output"]["voice"] == "fake"
    user = s.of_type("conversation.item.input_audio_transcription.completed")[0]
    assert user["transcript"] == "What is the wifi password?"
    response = done["response"]
    assert response["status"] == "completed" and response["output"][0]["content"][0]["transcript"] == REPLY
    assert response["voxserve"]["latency"]["total_ms"] > 0
    text = "".join(e["delta"] for e in s.of_type("response.output_audio_transcript.delta"))
    assert text.split() == REPLY.split()
    audio = b"".join(base64.b64decode(e["delta"]) for e in s.of_type("response.output_audio.delta"))
    seconds = len(audio) / 2 / 24000  # PCM16 at 24 kHz, resampled from the fake voice's 8 kHz
    assert abs(seconds - response["voxserve"]["audio_ms"] / 1000) < 0.02
    s.ws.close()
    assert server.metric("voxserve_agent_reply_latency_seconds_count", part="total") >= 1
    assert server.metric("voxserve_agent_responses_total", status="completed") >= 1


def test_text_turns_beta_names_and_g711_output(server: LiveServer, fake_agent: Agent) -> None:
    s = open_conversation(server.url)
    s.send({"type": "session.update", "session": {"voice": "fake", "output_audio_format": "g711_ulaw",
                                                  "turn_detection": None}})
    assert s.wait_for("session.updated")[0]["session"]["output_audio_format"] == "g711_ulaw"
    s.send({"type": "conversation.item.create", "event_id": "evt_bad",
            "item": {"id": "no spaces allowed", "type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "x"}]}})
    assert s.wait_for("error")[-1]["error"]["param"] == "item.id"
    s.send({"type": "conversation.item.create",
            "item": {"id": "item_client_7", "type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "Password?"}]}})
    s.send({"type": "response.create", "response": {"metadata": {"topic": "wifi"}}})
    [done] = s.wait_for("response.done", timeout=30)
    assert done["response"]["status"] == "completed"
    assert done["response"]["metadata"] == {"topic": "wifi"}  # LiveKit's generate_reply waits for this
    assert s.of_type("response.created")[-1]["response"]["metadata"] == {"topic": "wifi"}
    assert "response.audio.delta" in types(s) and "response.output_audio.delta" not in types(s)  # beta names
    audio = b"".join(base64.b64decode(e["delta"]) for e in s.of_type("response.audio.delta"))
    samples = g711_ulaw_to_float32(audio)  # one byte per 8 kHz sample
    assert abs(len(samples) / 8000 - done["response"]["voxserve"]["audio_ms"] / 1000) < 0.02
    created = s.of_type("conversation.item.created")[0]["item"]
    assert created["content"][0]["text"] == "Password?" and created["id"] == "item_client_7"  # the client's id kept
    s.ws.close()


def test_bad_input_gets_errors_and_the_session_goes_on(server: LiveServer, fake_agent: Agent) -> None:
    s = open_conversation(server.url)
    s.wait_for("session.created")
    s.ws.send("{not json")
    s.send({"type": "no.such.event"})
    s.send({"type": "response.cancel", "event_id": "evt_1"})
    s.send({"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": []}})
    s.send({"type": "conversation.item.truncate", "item_id": "item_nope", "content_index": 0, "audio_end_ms": 10})
    s.send({"type": "session.update", "session": {"type": "transcription"}})
    s.send({"type": "session.update", "session": {"instructions": "Kept.", "audio": {"output": {"voice": "no-such-voice"}}}})
    s.send({"type": "input_audio_buffer.append", "audio": "%%%"})
    errors = s.wait_for("error", count=8)
    codes = [e["error"]["code"] for e in errors]
    assert codes[:5] == ["invalid_json", "unknown_event", "response_cancel_not_active", "invalid_item", "item_not_found"]
    assert errors[2]["error"]["event_id"] == "evt_1"
    assert codes[5] == "invalid_session_type" and codes[7] == "invalid_base64"
    # the unknown voice was refused alone: the rest of that update took effect
    assert s.of_type("session.updated")[-1]["session"]["instructions"] == "Kept."
    s.send({"type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}})
    s.send({"type": "response.create"})
    assert s.wait_for("response.done", timeout=30)[0]["response"]["status"] == "completed"  # still serving
    s.ws.close()


def test_a_dead_llm_endpoint_fails_the_response_not_the_session(server: LiveServer, fake_agent: Agent) -> None:
    fake_agent.llm = HttpChatLlm("http://127.0.0.1:9/v1")  # nothing listens on the discard port
    s = open_conversation(server.url)
    s.send({"type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello?"}]}})
    s.send({"type": "response.create"})
    [done] = s.wait_for("response.done", timeout=30)
    details = done["response"]["status_details"]
    assert done["response"]["status"] == "failed" and details["error"]["code"] == "llm_unavailable"
    error = s.wait_for("error")[0]["error"]
    assert error["code"] == "llm_unavailable" and "unreachable" in error["message"]
    s.send({"type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Still there?"}]}})
    assert len(s.wait_for("conversation.item.created", count=2)) == 2  # the session survives
    assert not s.closed.is_set()
    s.ws.close()


def test_transcription_intent_still_reaches_the_transcription_session(server: LiveServer, fake_agent: Agent) -> None:
    ws = connect(server.url.replace("http://", "ws://") + "/v1/realtime?intent=transcription", open_timeout=30)
    first = json.loads(ws.recv())
    assert first["type"] == "session.created" and first["session"]["object"] == "realtime.transcription_session"
    ws.close()
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200
