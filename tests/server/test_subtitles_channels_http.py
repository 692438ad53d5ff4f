"""Subtitle shaping and one speaker a channel over a real server: the official ``openai`` client and httpx,
synchronous requests and jobs (the cue shape is stored with the job and applied when its result is fetched),
and 422s that name the bad field."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import srt
import webvtt

from tests.calls import write_call
from tests.quality import jfk_wer, reader_wer
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.slow


def post(live: LiveServer, path: Path, route: str = "/v1/audio/transcriptions", **data: Any) -> httpx.Response:
    return httpx.post(live.url + route, files={"file": (path.name, path.read_bytes())}, data=data, timeout=120)


def within(cues: list[srt.Subtitle], width: int, count: int, seconds: float) -> bool:
    return all(len(c.content.splitlines()) <= count and all(len(line) <= width for line in c.content.splitlines())
               and (c.end - c.start).total_seconds() <= seconds for c in cues)


def test_openai_client_gets_shaped_srt_and_vtt(client: Any, corpus: Path) -> None:
    clip = corpus / "asr" / "mfa_acoustic_corpus.wav"  # 26.7 s of one reader
    with open(clip, "rb") as f:
        default = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="srt")
    cues = list(srt.parse(default))
    assert len(cues) >= 4 and within(cues, 42, 2, 7.0)
    with open(clip, "rb") as f:
        narrow = client.audio.transcriptions.create(
            model="whisper-1", file=f, response_format="vtt",
            extra_body={"max_line_width": "24", "max_line_count": "1", "max_cue_duration": "3"})
    captions = webvtt.from_string(narrow).captions
    assert len(captions) > len(cues)
    assert all("\n" not in c.text and len(c.text) <= 24 and c.end_in_seconds - c.start_in_seconds <= 3.0
               for c in captions)
    assert " ".join(c.text for c in captions).split() == " ".join(c.content for c in cues).split()


def test_a_job_keeps_its_cue_shape(live: LiveServer, corpus: Path) -> None:
    r = post(live, corpus / "asr" / "mfa_acoustic_corpus.wav", "/v1/jobs", response_format="srt",
             max_line_width="30", max_cue_duration="4")
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    deadline = time.monotonic() + 180
    while httpx.get(f"{live.url}/v1/jobs/{job}", timeout=10).json()["status"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    shaped = list(srt.parse(httpx.get(f"{live.url}/v1/jobs/{job}/result", timeout=10).text))
    assert within(shaped, 30, 2, 4.0) and any(len(line) > 24 for c in shaped for line in c.content.splitlines())
    vtt = webvtt.from_string(httpx.get(f"{live.url}/v1/jobs/{job}/result?format=vtt", timeout=10).text)
    assert all(len(line) <= 30 for c in vtt.captions for line in c.text.splitlines())
    # the query reshapes a stored result: one line of 20, the job's 4 s kept
    one = list(srt.parse(httpx.get(f"{live.url}/v1/jobs/{job}/result?format=srt&max_line_width=20&max_line_count=1",
                                   timeout=10).text))
    assert within(one, 20, 1, 4.0) and len(one) > len(shaped)
    bad = httpx.get(f"{live.url}/v1/jobs/{job}/result?format=srt&max_line_count=99", timeout=10)
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "max_line_count"


@pytest.mark.parametrize("field,value", [
    ("max_line_width", "3"), ("max_line_width", "wide"), ("max_line_count", "0"), ("max_line_count", "-1"),
    ("max_cue_duration", "0"), ("max_cue_duration", "nan"), ("max_cue_duration", "600"),
    ("speaker_labels", "maybe"), ("split_channels", "2"),
])
def test_bad_fields_are_422_with_param(live: LiveServer, data_dir: Path, field: str, value: str) -> None:
    for route in ("/v1/audio/transcriptions", "/v1/jobs"):
        r = post(live, data_dir / "fw_jfk.flac", route, response_format="srt", **{field: value})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["param"] == field


def test_split_channels_over_http(live: LiveServer, client: Any, tmp_path: Path) -> None:
    call = write_call(tmp_path / "call.wav")
    with open(call, "rb") as f:
        verbose = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="verbose_json",
                                                     extra_body={"split_channels": "true"})
    segments = [s if isinstance(s, dict) else s.model_dump() for s in verbose.segments]
    by_channel = {c: " ".join(s["text"] for s in segments if s["channel"] == c) for c in (0, 1)}
    assert jfk_wer(by_channel[0]) <= 0.1 and reader_wer(by_channel[1]) <= 0.1, by_channel
    assert {(s["channel"], s["speaker"]) for s in segments} == {(0, "channel_0"), (1, "channel_1")}
    diarized = post(live, call, response_format="diarized_json", split_channels="true").json()
    assert {s["speaker"] for s in diarized["segments"]} == {"channel_0", "channel_1"}
    assert len(diarized["text"].split()) <= 22 + 17 + 2  # no sentence twice: the leak is not transcribed
    cues = list(srt.parse(post(live, call, response_format="srt", split_channels="true").text))
    assert {c.content.split("]")[0] for c in cues} == {"[channel_0", "[channel_1"}
    plain = post(live, call, response_format="srt", split_channels="true", speaker_labels="false").text
    assert "[channel_" not in plain and "Americans" in plain
