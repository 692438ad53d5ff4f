"""Key terms and a language per segment over HTTP (the official openai client and httpx), in jobs and in a
Realtime transcription session, on a real server with whisper-base and real clips."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.server.conftest import LiveServer
from tests.server.realtime_client import open_session, pcm24
from voxserve.audio import decode_audio
from voxserve.eval.keyterms_eval import count_phrase

pytestmark = pytest.mark.slow
TERM = "Montreal Forced Aligner"


def _post(live: LiveServer, path: Path, data: Any, route: str = "/v1/audio/transcriptions") -> httpx.Response:
    return httpx.post(live.url + route, files={"file": (path.name, path.read_bytes())}, data=data, timeout=120)


def test_openai_client_sends_keyterms_as_a_json_list(client: Any, data_dir: Path) -> None:
    path = data_dir / "corpus" / "asr" / "mfa_theother.flac"
    with open(path, "rb") as f:
        plain = client.audio.transcriptions.create(model="whisper-1", file=f, language="en")
    with open(path, "rb") as f:
        biased = client.audio.transcriptions.create(model="whisper-1", file=f, language="en",
                                                    extra_body={"keyterms": json.dumps([TERM, "CTranslate2"])})
    assert count_phrase(TERM, plain.text) == 0 and count_phrase(TERM, biased.text) == 1, (plain.text, biased.text)


def test_keyterms_as_repeated_and_comma_fields(live: LiveServer, data_dir: Path) -> None:
    path = data_dir / "corpus" / "asr" / "mfa_theother.flac"
    for data in ({"keyterms": [TERM, "CTranslate2"]}, {"keyterms": f"{TERM}, CTranslate2"}):
        r = _post(live, path, {"language": "en", **data})
        assert r.status_code == 200 and count_phrase(TERM, r.json()["text"]) == 1, r.text


def test_bad_vocabulary_and_language_fields_are_named(live: LiveServer, data_dir: Path) -> None:
    path = data_dir / "fw_jfk.flac"
    for data, status, param in (
        ({"keyterms": "[1, 2]"}, 422, "keyterms"),
        ({"keyterms": "x" * 80}, 422, "keyterms"),
        ({"allowed_languages": "en,klingon"}, 400, "allowed_languages"),
        ({"language": "de", "multilingual": "true"}, 422, "multilingual"),
        ({"language": "de", "allowed_languages": "en"}, 422, "allowed_languages"),
        ({"multilingual": "maybe"}, 422, "multilingual"),
    ):
        r = _post(live, path, data)
        assert r.status_code == status and r.json()["error"]["param"] == param, (data, r.text)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """English (JFK) then German, 1.5 s apart."""
    gap = np.zeros(24000, np.float32)
    clips = [decode_audio(data_dir / "fw_jfk.flac"), gap, decode_audio(data_dir / "corpus/lang/de__pv_test_de.wav"), gap]
    path = tmp_path_factory.mktemp("mixed") / "en_de.wav"
    buf = io.BytesIO()
    sf.write(buf, np.concatenate(clips), 16000, format="WAV")
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.parametrize("asked", [{"language": "auto-per-segment"}, {"multilingual": "true"}])
def test_verbose_json_has_a_language_per_segment(live: LiveServer, mixed: Path, asked: dict[str, str]) -> None:
    r = _post(live, mixed, {**asked, "response_format": "verbose_json", "allowed_languages": "en,de"})
    assert r.status_code == 200, r.text
    body = r.json()
    languages = [s["language"] for s in body["segments"]]
    assert languages[0] == "english" and languages[-1] == "german" and body["language"] == "english", languages
    plain = _post(live, mixed, {"response_format": "verbose_json"}).json()
    assert all("language" not in s for s in plain["segments"])


def test_a_job_keeps_keyterms_and_per_segment_language(live: LiveServer, mixed: Path, data_dir: Path) -> None:
    r = _post(live, mixed, {"language": "auto-per-segment", "keyterms": TERM}, route="/v1/jobs")
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    deadline = time.monotonic() + 180
    while httpx.get(f"{live.url}/v1/jobs/{job_id}", timeout=10).json()["status"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    result = httpx.get(f"{live.url}/v1/jobs/{job_id}/result?format=verbose_json", timeout=10).json()
    assert {s["language"] for s in result["segments"]} == {"english", "german"}


def test_a_realtime_session_takes_keyterms(live: LiveServer, data_dir: Path) -> None:
    s = open_session(live.url)
    s.wait_for("session.created")
    s.send({"type": "transcription_session.update", "session": {
        "input_audio_format": "pcm16", "input_audio_transcription": {"model": "whisper-1", "language": "en",
                                                                      "keyterms": [TERM]}}})
    updated = s.wait_for("transcription_session.updated")[0]["session"]
    assert updated["input_audio_transcription"]["keyterms"] == [TERM]
    s.stream(pcm24(data_dir / "corpus" / "asr" / "mfa_theother.flac"), speed=8.0)
    s.wait_for("conversation.item.input_audio_transcription.completed")
    assert count_phrase(TERM, " ".join(s.transcripts())) == 1, s.transcripts()
    s.send({"type": "transcription_session.update", "session": {"input_audio_transcription": {"keyterms": "x"}}})
    assert s.wait_for("error")[0]["error"]["param"].endswith("keyterms")
    s.ws.close()
