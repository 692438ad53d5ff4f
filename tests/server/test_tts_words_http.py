"""Word timestamps over the real server: ``include: ["word_timestamps"]`` on ``/v1/audio/speech`` (SSE events
ahead of their audio, the JSON envelope through httpx and the official openai client) and on the speech
WebSocket; an unknown ``include`` is refused with its param."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import numpy as np
import pytest

from tests.server.conftest import LiveServer
from tests.server.test_tts_http import _collect, _ws
from voxserve.audio import decode_audio

pytest.importorskip("piper", reason="needs voxserve[tts]")
pytestmark = pytest.mark.slow

TEXT = "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background."
WORDS = TEXT.replace(".", "").split()


def _sse(live: LiveServer, **body: Any) -> list[dict[str, Any]]:
    with httpx.stream("POST", live.url + "/v1/audio/speech", timeout=120,
                      json={"input": TEXT, "response_format": "pcm", "stream_format": "sse", **body}) as r:
        assert r.status_code == 200, r.read()
        return [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]


def _check_words(words: list[dict[str, Any]], audio_s: float) -> None:
    assert [w["word"] for w in words] == WORDS
    assert all(0 <= w["start"] < w["end"] <= audio_s + 1e-3 for w in words)
    assert all(a["end"] <= b["start"] for a, b in zip(words, words[1:], strict=False))


def test_sse_words_come_no_later_than_their_audio(live: LiveServer) -> None:
    events = _sse(live, include=["word_timestamps"])
    assert {e["type"] for e in events} == {"speech.audio.delta", "speech.audio.words", "speech.audio.done"}
    received_s, words = 0.0, []
    for e in events:
        if e["type"] == "speech.audio.delta":
            received_s += len(base64.b64decode(e["audio"])) / 2 / 24000
        elif e["type"] == "speech.audio.words":
            assert all(w["start"] >= received_s - 0.01 for w in e["words"]), (received_s, e)  # not yet heard
            words += e["words"]
    samples = events[-1]["usage"]["output_audio_samples"]
    _check_words(words, samples / 24000)
    assert "speech.audio.words" not in {e["type"] for e in _sse(live)}  # OpenAI's stream unless asked


def test_envelope_with_httpx_and_the_openai_client(live: LiveServer, client: Any) -> None:
    r = httpx.post(live.url + "/v1/audio/speech", timeout=120,
                   json={"input": TEXT, "response_format": "wav", "include": ["word_timestamps"], "sample_rate": 16000})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["format"] == "wav" and body["sample_rate"] == 16000
    audio = decode_audio(base64.b64decode(body["audio"]), sample_rate=16000)
    _check_words(body["words"], len(audio) / 16000)
    # the words sit on speech: each word's audio is louder than the gap between the sentences
    level = [float(np.sqrt(np.mean(audio[int(w["start"] * 16000):int(w["end"] * 16000)] ** 2))) for w in body["words"]]
    gap = audio[int(body["words"][7]["end"] * 16000) + 800:int(body["words"][8]["start"] * 16000) - 800]
    assert min(level) > 4 * float(np.sqrt(np.mean(gap ** 2))), (level, len(gap))
    speech = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="mp3",
                                        extra_body={"include": ["word_timestamps"]})
    envelope = json.loads(speech.content)
    assert envelope["format"] == "mp3" and [w["word"] for w in envelope["words"]] == WORDS


@pytest.mark.parametrize("include", [["words"], "word_timestamps", [1], ["word_timestamps", "logprobs"]])
def test_unknown_include_is_refused(live: LiveServer, include: Any) -> None:
    r = httpx.post(live.url + "/v1/audio/speech", json={"input": TEXT, "include": include}, timeout=60)
    assert r.status_code in (400, 422) and r.json()["error"]["param"] == "include", r.text


def test_websocket_words_before_their_audio(live: LiveServer) -> None:
    ws = _ws(live)
    ws.send(json.dumps({"type": "session.update", "include": ["nope"]}))
    error = json.loads(ws.recv(timeout=30))
    assert error["type"] == "error" and error["error"]["param"] == "include", error
    ws.send(json.dumps({"type": "session.update", "include": ["word_timestamps"]}))
    assert json.loads(ws.recv(timeout=30))["type"] == "session.updated"
    for piece in TEXT.split(" "):
        ws.send(json.dumps({"type": "text.append", "text": piece + " "}))
    ws.send(json.dumps({"type": "text.done"}))
    events = _collect(ws)
    assert events[-1]["type"] == "done", events[-1]
    words, audio_end = [], 0.0
    for e in events:
        if e["type"] == "speech.audio.words":
            assert all(w["start"] >= audio_end - 0.01 for w in e["words"])
            words += e["words"]
        elif e["type"] == "audio":
            assert all(w["start"] < e["start_s"] + e["duration_s"] + 0.01 for w in words)  # sent with or before
            audio_end = e["start_s"] + e["duration_s"]
    _check_words(words, events[-1]["audio_s"])
    ws.close()
