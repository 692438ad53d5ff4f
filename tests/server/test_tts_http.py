"""Speech synthesis over HTTP (the official openai client) and the streaming WebSocket."""

from __future__ import annotations

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from tests.server.conftest import LiveServer
from voxserve.audio import decode_audio, probe

pytest.importorskip("piper", reason="needs voxserve[tts]")
pytestmark = pytest.mark.slow
TEXT = "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background."


def _pcm_seconds(fmt: str, audio: bytes) -> float:
    if fmt == "pcm":
        return len(audio) / 2 / 24000  # OpenAI's pcm: 24 kHz 16-bit mono
    return len(decode_audio(audio)) / 16000


@pytest.mark.parametrize("fmt", ["wav", "mp3", "opus", "flac", "aac", "pcm"])
def test_openai_client_gets_speech_in_each_format(client: Any, fmt: str) -> None:
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt).content
    assert len(audio) > 1000
    if fmt == "pcm":
        samples = np.frombuffer(audio, "<i2").astype(np.float32) / 32768
    else:
        assert probe(audio).sample_rate == (48000 if fmt == "opus" else 24000)  # what the header says
        samples = decode_audio(audio)
    seconds = _pcm_seconds(fmt, audio)
    assert 3.5 < seconds < 9.0, seconds  # two sentences of 8 and 9 words
    assert float(np.sqrt(np.mean(samples**2))) > 0.01  # not silence


def test_sample_rate_header_and_override(live: LiveServer) -> None:
    """Every format says 24 kHz (OpenAI's rate); ``sample_rate`` asks for another; a bad one is a 422. (That
    the samples really are at the rate they claim is checked exactly in tests/unit/test_speech_encoding.py;
    Piper draws durations with noise, so two requests differ by a few percent.)"""
    for fmt in ("pcm", "wav", "mp3", "flac", "aac"):
        r = httpx.post(live.url + "/v1/audio/speech", json={"input": TEXT, "response_format": fmt}, timeout=120)
        assert r.status_code == 200 and r.headers["x-voxserve-sample-rate"] == "24000"
        assert 3.5 < _pcm_seconds(fmt, r.content) < 9.0
    native = httpx.post(live.url + "/v1/audio/speech", json={"input": TEXT, "response_format": "wav", "sample_rate": 0},
                        timeout=120)
    assert native.headers["x-voxserve-sample-rate"] == "22050" and probe(native.content).sample_rate == 22050
    bad = httpx.post(live.url + "/v1/audio/speech", json={"input": TEXT, "sample_rate": 7}, timeout=60)
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "sample_rate"


def test_speech_streams_while_synthesizing(live: LiveServer) -> None:
    long_text = " ".join([TEXT] * 6)
    started = time.perf_counter()
    first = None
    total = 0
    with httpx.stream("POST", live.url + "/v1/audio/speech", json={"input": long_text, "response_format": "pcm"},
                      timeout=120) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "audio/pcm"
        for chunk in r.iter_bytes():
            first = first or time.perf_counter() - started
            total += len(chunk)
    elapsed = time.perf_counter() - started
    assert first is not None and first < elapsed / 3  # audio arrived long before the end
    assert total / 2 / 24000 > 20


@pytest.mark.parametrize("fmt", ["pcm", "mp3"])
def test_sse_stream_format(live: LiveServer, fmt: str) -> None:
    with httpx.stream("POST", live.url + "/v1/audio/speech", timeout=120,
                      json={"input": TEXT, "response_format": fmt, "stream_format": "sse"}) as r:
        events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    assert events[-1]["type"] == "speech.audio.done" and len(events) > 2
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])  # the deltas in the requested format
    samples = events[-1]["usage"]["output_audio_samples"]
    assert samples > 24000 * 3
    if fmt == "pcm":
        assert samples == len(audio) // 2
    else:
        assert abs(len(decode_audio(audio)) / 16000 - samples / 24000) < 0.1  # mp3 frames, decodable


def test_round_trip_through_voxserve_asr(client: Any) -> None:
    from voxserve.eval.wer import score_wer

    wav = client.audio.speech.create(model="tts-1", voice="joe", input=TEXT, response_format="wav").content
    text = client.audio.transcriptions.create(model="whisper-1", file=("speech.wav", wav)).text
    # Piper draws durations and prosody with noise: 30 syntheses (default voice and joe) heard back by
    # whisper-base gave WER 0.19 (25 times: "can use lid", "blue the sheet"), 0.25 (4) and 0.31 (1).
    assert score_wer(TEXT, text).wer <= 0.4, text


def test_voices_and_bad_requests(live: LiveServer) -> None:
    voices = httpx.get(live.url + "/v1/audio/voices").json()["data"]
    assert voices and voices[0]["sample_rate"] == 22050
    post = lambda body: httpx.post(live.url + "/v1/audio/speech", json=body, timeout=60)  # noqa: E731
    assert post({"input": ""}).status_code == 400
    assert post({"input": "x" * 200_001}).status_code in (400, 413)
    assert post({"input": "hello", "voice": "nobody"}).status_code == 400
    assert post({"input": "hello", "response_format": "docx"}).status_code == 422
    assert post({"input": "hello", "speed": 9}).status_code == 422
    assert post({}).status_code == 400
    assert httpx.post(live.url + "/v1/audio/speech", content=b"{oops", timeout=30).status_code == 400
    assert httpx.get(live.url + "/health").status_code == 200


def _ws(live: LiveServer) -> Any:
    ws = connect(live.url.replace("http", "ws") + "/v1/audio/speech/stream", max_size=2**24)
    assert json.loads(ws.recv())["type"] == "session.created"
    return ws


def _collect(ws: Any, until: str = "done", timeout: float = 60) -> list[dict[str, Any]]:
    events = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = json.loads(ws.recv(timeout=timeout))
        events.append(event)
        if event["type"] in (until, "error"):
            break
    return events


def test_websocket_text_pieces_in_audio_out(live: LiveServer) -> None:
    ws = _ws(live)
    for word in TEXT.split():  # an LLM's tokens, one by one
        ws.send(json.dumps({"type": "text.append", "text": word + " "}))
    ws.send(json.dumps({"type": "text.done"}))
    events = _collect(ws)
    audio = [e for e in events if e["type"] == "audio"]
    assert events[-1]["type"] == "done" and audio
    assert [e["seq"] for e in audio] == sorted(e["seq"] for e in audio)
    seconds = sum(len(base64.b64decode(e["audio"])) for e in audio) / 2 / 22050
    assert abs(seconds - events[-1]["audio_s"]) < 0.05 and seconds > 3.5
    ws.close()


def test_websocket_cancel_and_bad_events(live: LiveServer) -> None:
    ws = _ws(live)
    ws.send(json.dumps({"type": "session.update", "voice": "nobody"}))
    assert json.loads(ws.recv())["type"] == "error"
    ws.send("not json")
    assert json.loads(ws.recv())["error"]["code"] == "invalid_json"
    ws.send(json.dumps({"type": "text.append", "text": " ".join([TEXT] * 10)}))
    ws.send(json.dumps({"type": "text.done"}))
    first = json.loads(ws.recv(timeout=30))
    assert first["type"] == "audio"
    ws.send(json.dumps({"type": "cancel"}))
    events = _collect(ws, until="cancelled")
    assert events[-1]["type"] == "cancelled"
    ws.send(json.dumps({"type": "session.update", "binary": True}))
    assert json.loads(ws.recv())["type"] == "session.updated"
    ws.send(json.dumps({"type": "text.append", "text": "Hello there."}))
    ws.send(json.dumps({"type": "text.done"}))
    header = json.loads(ws.recv(timeout=30))
    assert header["type"] == "audio" and "audio" not in header
    payload = ws.recv(timeout=30)
    assert isinstance(payload, bytes) and len(payload) % 2 == 0
    ws.close()


def test_concurrent_streams_get_their_own_audio(live: LiveServer) -> None:
    texts = ["One two three four five.", "The quick brown fox jumps over the lazy dog today."]

    def speak(text: str) -> bytes:
        r = httpx.post(live.url + "/v1/audio/speech", json={"input": text, "response_format": "wav"}, timeout=120)
        return r.content

    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(speak, texts * 2))
    durations = [(len(o) - 44) / 2 / 22050 for o in outs]  # streamed WAV: 44-byte header, then PCM16
    assert all(o[:4] == b"RIFF" for o in outs)
    assert abs(durations[0] - durations[2]) < 0.25 * durations[0]  # same text, about the same length
    assert abs(durations[1] - durations[3]) < 0.25 * durations[1]
    assert min(durations[1], durations[3]) > 1.3 * max(durations[0], durations[2])  # never each other's audio


@pytest.mark.parametrize("voice", ["marin", "cedar"])
def test_every_voice_of_the_sdk_is_accepted(live: LiveServer, voice: str) -> None:
    """The openai SDK's newest voices (marin is LiveKit Realtime's default) speak with the default voice."""
    r = httpx.post(live.url + "/v1/audio/speech", json={"input": "Hello there.", "voice": voice, "response_format": "pcm"},
                   timeout=60)
    assert r.status_code == 200 and len(r.content) > 24000  # over half a second of 24 kHz PCM16
