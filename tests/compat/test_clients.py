"""Third-party clients against a real voxserve server, each from its own virtual environment.

Each client script in ``clients/`` drives one framework with its defaults (only the base URL and a key set)
and writes what the framework handed it (texts, audio as the framework says it is) to ``result.json``.
These tests check each call: transcripts against the clip's reference, speech decoded at the rate the
client claims (a 22.05 kHz voice sent as OpenAI's 24 kHz ``pcm`` plays 8.8 % fast: the duration check
catches that), speech transcribed back to its input, and a Realtime conversation turn that speaks its text.
A client whose environment could not be built is skipped, saying why (``python tests/compat/envs.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.compat import envs
from tests.conftest import embedded_llm_problem
from tests.quality import jfk_wer, wer
from tests.server.conftest import LiveServer
from voxserve.audio import decode_audio, probe

pytest.importorskip("piper", reason="needs voxserve[tts]")
pytestmark = pytest.mark.slow

CLIENTS = Path(__file__).with_name("clients")
SPEECH_INPUT = "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background."
EXPECTED: dict[str, dict[str, str]] = {
    "openai": {
        "transcribe_json": "transcription", "transcribe_verbose": "transcription",
        "transcribe_stream": "transcription", "transcribe_logprobs": "transcription",
        "speech_mp3": "speech", "speech_opus": "speech", "speech_aac": "speech", "speech_flac": "speech",
        "speech_wav": "speech", "speech_pcm": "speech", "speech_stream_sse": "speech",
        "realtime_transcription": "transcription", "realtime_turn": "turn",
    },
    "openai_agents": {"stt": "transcription", "tts": "speech", "stt_streamed": "transcription"},
    "litellm": {"transcription": "transcription", "transcription_gpt_4o_transcribe": "transcription",
                "speech": "speech"},
    "pipecat": {"stt": "transcription", "tts": "speech", "realtime_turn": "turn"},
    "livekit": {"stt": "transcription", "stt_stream": "transcription", "tts": "speech", "realtime_turn": "turn"},
}
CASES = [(client, call) for client, calls in EXPECTED.items() for call in calls]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # Renderings without sampling noise: every rendering of a text lasts the same, so the speed check below can be
    # tight (with the voice's own noise, durations of one text spread by 5 % and more: 4.49 s median, 4.73 s seen).
    with LiveServer(tmp_path_factory.mktemp("compat"), tts={"noise_scale": 0.0, "noise_w": 0.0}) as live:
        yield live


_REFERENCE_S: dict[str, float] = {}


def reference_s(server: LiveServer, text: str) -> float:
    """How long the server's own rendering of ``text`` lasts, from a WAV whose header gives the rate (the
    server renders without sampling noise: two renderings must last the same)."""
    if text not in _REFERENCE_S:
        lengths = []
        for _ in range(2):
            r = httpx.post(server.url + "/v1/audio/speech", json={"input": text, "response_format": "wav"},
                           timeout=120)
            r.raise_for_status()
            lengths.append(probe(r.content).duration_s)
        assert abs(lengths[0] - lengths[1]) < 0.002, f"renderings without noise differ: {lengths}"
        _REFERENCE_S[text] = lengths[0]
    return _REFERENCE_S[text]


_RESULTS: dict[str, tuple[dict[str, Any], Path]] = {}


def client_result(name: str, server: LiveServer, root: Path) -> tuple[dict[str, Any], Path]:
    """Run client ``name``'s script once per module and return its result and output folder."""
    if name in _RESULTS:
        return _RESULTS[name]
    problem = envs.problem(name)
    if problem:
        pytest.skip(problem)
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "OPENAI_AGENTS_DISABLE_TRACING": "1", "PYTHONPATH": ""}
    run = subprocess.run(
        [str(envs.python(name)), str(CLIENTS / f"{name}_client.py"), "--base-url", server.url + "/v1",
         "--clip", str(Path(__file__).parents[1] / "data" / "fw_jfk.flac"), "--out", str(out)],
        capture_output=True, text=True, timeout=900, env=env,
    )
    result_file = out / "result.json"
    assert result_file.exists(), f"{name} client wrote no result (rc {run.returncode}):\n{run.stderr[-3000:]}"
    _RESULTS[name] = (json.loads(result_file.read_text()), out)
    return _RESULTS[name]


def _pcm_wav(path: Path) -> tuple[np.ndarray, int]:
    with wave.open(str(path)) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, (w.getsampwidth(), w.getnchannels())
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768, w.getframerate()


def transcribe_back(server: LiveServer, path: Path) -> str:
    with open(path, "rb") as f:
        r = httpx.post(server.url + "/v1/audio/transcriptions", files={"file": (path.name, f)},
                       data={"model": "whisper-1", "language": "en"}, timeout=120)
    r.raise_for_status()
    return str(r.json()["text"])


def seconds_as_claimed(path: Path, claimed_rate: int) -> float:
    """The audio's length at the rate the client says it has (a WAV of raw frames), or by its own header."""
    if path.suffix == ".wav":
        try:
            samples, rate = _pcm_wav(path)
        except (wave.Error, AssertionError):  # a WAV as the server encoded it (float or other widths)
            return probe(path.read_bytes()).duration_s
        assert rate == claimed_rate, (rate, claimed_rate)
        assert float(np.sqrt(np.mean(samples**2))) > 0.01, "silence"
        return len(samples) / rate
    samples = decode_audio(path.read_bytes())  # 16 kHz (a streamed header may not hold the length)
    assert float(np.sqrt(np.mean(samples**2))) > 0.01, "silence"
    return len(samples) / 16000


@pytest.mark.parametrize(("client", "call"), CASES, ids=[f"{c}-{k}" for c, k in CASES])
def test_client_call(client: str, call: str, server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    kind = EXPECTED[client][call]
    if kind == "turn" and embedded_llm_problem():
        pytest.skip(str(embedded_llm_problem()))
    result, out = client_result(client, server, tmp_path_factory.getbasetemp() / "compat-clients")
    calls = {c["name"]: c for c in result["calls"]}
    assert call in calls, f"{client} did not report {call}: {sorted(calls)}"
    got = calls[call]
    assert got["ok"], f"{client} {call}: {got.get('error')} ({got.get('note', '')})"
    if kind == "transcription":
        assert jfk_wer(got["text"]) <= 0.1, got["text"]
    elif kind == "speech":
        path = out / got["audio"]
        claimed = int(got.get("sample_rate") or 24000)
        assert claimed == 24000 or path.suffix == ".opus", f"{client} says {claimed} Hz; OpenAI's audio is 24 kHz"
        spoken = got.get("input") or SPEECH_INPUT  # a voice pipeline speaks what its workflow said
        seconds, expected = seconds_as_claimed(path, claimed), reference_s(server, spoken)
        # Plays at the right speed: within 2 % of the server's own WAV (renderings without noise last the same),
        # plus 0.1 s for the priming and padding lossy codecs add (AAC decoded 4.69 s where WAVs gave 4.46-4.60 s).
        # 24 kHz claimed for 22.05 kHz audio would be 8.1 % (0.37 s) short.
        slack = 0.02 * expected + (0.1 if path.suffix in (".aac", ".mp3", ".opus", ".ogg") else 0.0)
        assert abs(seconds - expected) <= slack, (seconds, expected)
        assert wer(spoken, transcribe_back(server, path)) <= 0.4  # measured 0.19-0.31 (test_tts_http)
    else:  # a conversation turn: a reply in text and the same reply spoken
        assert got["transcript"].strip(), got
        path = out / got["audio"]
        samples, rate = _pcm_wav(path)
        assert rate == int(got.get("sample_rate") or 24000) and len(samples) / rate > 0.3
        assert wer(got["transcript"], transcribe_back(server, path)) <= 0.35, got["transcript"]
