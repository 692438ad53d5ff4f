"""SSML and pronunciations over the real server: ``/v1/audio/speech`` (wav, SSE; httpx and the openai client)
and the speech WebSocket, heard back through the server's own transcription endpoint."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import numpy as np
import pytest

from tests.integration.test_tts_ssml import BREAK, quiet_run
from tests.server.conftest import LiveServer
from tests.server.test_tts_http import _collect, _ws
from voxserve.audio import decode_audio
from voxserve.audio.encode import encode_audio

pytest.importorskip("piper", reason="needs voxserve[tts]")
pytest.importorskip("defusedxml", reason="needs voxserve[tts]")
pytestmark = pytest.mark.slow


def _speech(live: LiveServer, **body: Any) -> httpx.Response:
    return httpx.post(live.url + "/v1/audio/speech", json={"response_format": "wav", **body}, timeout=120)


def _heard(client: Any, wav: bytes) -> str:
    text = client.audio.transcriptions.create(model="whisper-1", file=("speech.wav", wav), language="en").text
    return str(text).lower()


def test_break_in_wav_and_sse(live: LiveServer) -> None:
    wav = _speech(live, input=BREAK)
    assert wav.status_code == 200
    audio = decode_audio(wav.content, sample_rate=24000)
    start, end = quiet_run(audio)
    assert abs((end - start) / 24000 - 1.5) < 0.05, (start, end)
    assert np.sqrt(np.mean(audio[:start] ** 2)) > 0.02 and np.sqrt(np.mean(audio[end:] ** 2)) > 0.02
    with httpx.stream("POST", live.url + "/v1/audio/speech", timeout=120,
                      json={"input": BREAK, "response_format": "pcm", "stream_format": "sse"}) as r:
        events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    assert events[-1]["type"] == "speech.audio.done" and events[-1]["usage"]["output_audio_samples"] == len(samples)
    start, end = quiet_run(samples)
    assert abs((end - start) / 24000 - 1.5) < 0.05, (start, end)


def test_ssml_and_pronunciations_are_heard(live: LiveServer, client: Any) -> None:
    ssml = ('<speak>I work at <sub alias="the World Health Organization">WHO</sub>. '
            "I ate a Zqrt &amp; a salad for lunch.</speak>")
    texts = []
    for _ in range(3):  # Piper draws prosody with noise: a rendering is sometimes misheard ("apeza"); never
        speech = client.audio.speech.create(  # "pizza" without the lexicon (0 of 5 renderings)
            model="tts-1", voice="alloy", input=ssml, response_format="wav",
            extra_body={"pronunciations": {"Zqrt": "pizza"}})
        texts.append(_heard(client, speech.content))
        if "pizza" in texts[-1]:
            break
    text = texts[-1]
    assert "world health organization" in text and "pizza" in text and "speak" not in text, texts


@pytest.mark.parametrize(("body", "param", "message"), [
    ({"input": "<speak>Good morning.<break time='1500ms'/>See you soon.</spek>"}, "input", "line 1, column"),
    ({"input": '<!DOCTYPE s [<!ENTITY a "aaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]><speak>&b;&b;</speak>'},
     "input", "DTD"),
    ({"input": "<speak>" + "<p>" * 33 + "deep" + "</p>" * 33 + "</speak>"}, "input", "deeper than 32"),
    ({"input": "<speak><break time='20s'/>hi</speak>"}, "input", "at most 10s"),
    ({"input": "Hello.", "pronunciations": ["Nguyen", "win"]}, "pronunciations", "object"),
    ({"input": "Hello.", "pronunciations": {"Nguyen": ""}}, "pronunciations", "respelling"),
])
def test_bad_ssml_and_lexicons_are_400s_with_the_param(live: LiveServer, body: dict[str, Any], param: str,
                                                      message: str) -> None:
    r = _speech(live, **body)
    assert r.status_code in (400, 422), r.text
    error = r.json()["error"]
    assert error["param"] == param and message in error["message"], error


def test_ssml_longer_than_the_input_limit_is_refused(live: LiveServer) -> None:
    r = _speech(live, input="<speak>" + "la " * 40_000 + "</speak>")
    assert r.status_code in (400, 413) and r.json()["error"]["param"] == "input"


def test_websocket_ssml_in_pieces_and_a_word_split_across_deltas(live: LiveServer, client: Any) -> None:
    ws = _ws(live)
    for piece in ("  <spe", "ak>Good morning.<break time=", '"1s"/>See you soon.</speak>'):
        ws.send(json.dumps({"type": "text.append", "text": piece}))
    ws.send(json.dumps({"type": "text.done"}))
    events = _collect(ws)
    audio = [e for e in events if e["type"] == "audio"]
    assert events[-1]["type"] == "done" and [e["text"] for e in audio].count("") == 1
    pcm = np.frombuffer(b"".join(base64.b64decode(e["audio"]) for e in audio), "<i2").astype(np.float32) / 32768
    start, end = quiet_run(pcm)
    assert abs((end - start) / 22050 - 1.0) < 0.05, (start, end)
    assert abs(len(pcm) / 22050 - events[-1]["audio_s"]) < 0.01

    ws.send(json.dumps({"type": "text.append", "text": "<speak>oops</speek>"}))
    ws.send(json.dumps({"type": "text.done"}))
    error = _collect(ws)[-1]
    assert error["type"] == "error" and error["error"]["param"] == "input", error

    ws.send(json.dumps({"type": "session.update", "pronunciations": {"Zqrt": "pizza"}}))
    assert json.loads(ws.recv(timeout=30))["type"] == "session.updated"
    heard = []
    for _ in range(3):  # as above: one rendering in a few is misheard
        for piece in ("I ate a Zq", "rt for lunch. It was good."):
            ws.send(json.dumps({"type": "text.append", "text": piece}))
        ws.send(json.dumps({"type": "text.done"}))
        events = _collect(ws)
        pcm16 = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "audio")
        samples = np.frombuffer(pcm16, "<i2").astype(np.float32) / 32768
        heard.append(_heard(client, encode_audio(samples, 22050, "wav")))
        if "pizza" in heard[-1]:
            break
    assert "pizza" in heard[-1], heard
    ws.send(json.dumps({"type": "session.update", "pronunciations": {"Zqrt": "[[ a ]] b"}}))
    bad = json.loads(ws.recv(timeout=30))
    assert bad["type"] == "error" and bad["error"]["param"] == "pronunciations"
    ws.close()
