"""The official ``openai`` client against a real voxserve server."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
import srt
import webvtt

from tests.quality import jfk_wer, reader_wer
from voxserve.eval.normalize import normalize_english
from voxserve.eval.wer import score_wer

pytestmark = pytest.mark.slow


def test_json_text_matches_the_cli(client: Any, data_dir: Path) -> None:
    with open(data_dir / "fw_jfk.flac", "rb") as f:
        r = client.audio.transcriptions.create(model="whisper-1", file=f)
    cli = subprocess.run([sys.executable, "-m", "voxserve.cli", "transcribe", str(data_dir / "fw_jfk.flac"), "--quiet"],
                         capture_output=True, text=True, timeout=120)
    assert r.text == cli.stdout.strip()
    assert jfk_wer(r.text) <= 0.1, r.text


@pytest.mark.parametrize("fmt", ["text", "srt", "vtt"])
def test_text_formats(client: Any, data_dir: Path, fmt: str) -> None:
    with open(data_dir / "mfa_ls_61-70968-0000.flac", "rb") as f:
        out = client.audio.transcriptions.create(model="whisper-base", file=f, response_format=fmt)
    assert isinstance(out, str)
    if fmt == "srt":
        text = " ".join(c.content for c in srt.parse(out))
    elif fmt == "vtt":
        text = " ".join(c.text for c in webvtt.from_string(out).captions)
    else:
        text = out
    assert score_wer((data_dir / "mfa_ls_61-70968-0000.txt").read_text(), text).wer <= 0.1


def test_verbose_json_with_word_and_segment_timestamps(client: Any, data_dir: Path) -> None:
    with open(data_dir / "fw_jfk.flac", "rb") as f:
        r = client.audio.transcriptions.create(
            model="whisper-base", file=f, response_format="verbose_json",
            timestamp_granularities=["word", "segment"], language="en",
        )
    assert r.language == "english" and abs(r.duration - 11.0) < 0.05
    assert r.words and r.segments
    americans = next(w for w in r.words if w.word.startswith("Americans"))
    assert americans.start <= 1.8 <= americans.end
    assert [w.start for w in r.words] == sorted(w.start for w in r.words)
    assert r.segments[0].avg_logprob < 0 and r.segments[0].tokens


def test_word_granularity_only(client: Any, data_dir: Path) -> None:
    with open(data_dir / "fw_jfk.flac", "rb") as f:
        r = client.audio.transcriptions.create(model="whisper-base", file=f, response_format="verbose_json",
                                               timestamp_granularities=["word"])
    assert r.words and not r.segments


def test_translation_to_english(client: Any, data_dir: Path) -> None:
    with open(data_dir / "de__pv_test_de.wav", "rb") as f:
        r = client.audio.translations.create(model="whisper-1", file=f)
    words = set(normalize_english(r.text).split())
    assert words & {"the", "was", "used", "room", "as"} and "wurde" not in words


def test_streaming_events(client: Any, data_dir: Path) -> None:
    with open(data_dir / "fw_jfk.flac", "rb") as f:
        events = list(client.audio.transcriptions.create(model="whisper-1", file=f, stream=True))
    types = [e.type for e in events]
    assert types[-1] == "transcript.text.done" and "transcript.text.delta" in types
    assert all(t == "transcript.text.delta" for t in types[:-1])
    assert "".join(e.delta for e in events[:-1]).strip() == events[-1].text
    assert events[-1].usage is not None and abs(events[-1].usage.seconds - 11.0) < 0.05  # OpenAI's duration usage
    assert jfk_wer(events[-1].text) <= 0.1, events[-1].text


def test_eight_concurrent_requests_share_batches(client: Any, live: Any, data_dir: Path) -> None:
    files = ["fw_jfk.flac", "mfa_ls_61-70968-0000.flac", "es__pv_test_es.wav", "de__pv_test_de.wav"] * 2
    before_batches = live.metric("voxserve_batch_size_count")
    before_items = live.metric("voxserve_batch_size_sum")

    def one(name: str) -> str:
        with open(data_dir / name, "rb") as f:
            return str(client.audio.transcriptions.create(model="whisper-base", file=f).text)

    with ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(one, files))
    assert texts[0] == texts[4] and texts[1] == texts[5]
    assert jfk_wer(texts[0]) <= 0.1, texts[0]
    assert "arenas" in texts[2] and ("Portal" in texts[3] or "portal" in texts[3])
    batches = live.metric("voxserve_batch_size_count") - before_batches
    items = live.metric("voxserve_batch_size_sum") - before_items
    assert items >= 8 and batches < items  # some batch held more than one request's chunk


def test_models_endpoints(client: Any) -> None:
    ids = [m.id for m in client.models.list()]
    assert {"whisper-base", "whisper-tiny.en", "whisper-1"} <= set(ids)
    assert client.models.retrieve("whisper-tiny.en").id == "whisper-tiny.en"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("whisper-large-v9")
    listed = {m.id: m for m in client.models.list()}
    for name, target in (("gpt-4o-mini-tts", "voice:joe"), ("tts-1", "voice:joe"), ("gpt-realtime", "voxserve-agent"),
                         ("gpt-4o-transcribe", "whisper-base")):
        assert listed[name].maps_to == target, listed[name]  # type: ignore[attr-defined]


def test_a_configured_alias_routes_to_its_model(tmp_path: Path, data_dir: Path) -> None:
    """server.model_aliases: an OpenAI name served by another local model (here whisper-tiny.en)."""
    import httpx

    from tests.server.conftest import LiveServer

    with LiveServer(tmp_path, model_aliases={"gpt-4o-mini-transcribe": "whisper-tiny.en"}) as server:
        models = httpx.get(server.url + "/v1/models", timeout=10).json()["data"]
        mini = next(m for m in models if m["id"] == "gpt-4o-mini-transcribe")
        assert mini["maps_to"] == "whisper-tiny.en"
        with open(data_dir / "fw_jfk.flac", "rb") as f:
            r = httpx.post(server.url + "/v1/audio/transcriptions", files={"file": ("a.flac", f)},
                           data={"model": "gpt-4o-mini-transcribe", "response_format": "verbose_json"}, timeout=120)
        assert r.status_code == 200 and jfk_wer(r.json()["text"]) <= 0.1
        loaded = {m["id"] for m in httpx.get(server.url + "/v1/models", timeout=10).json()["data"] if m["loaded"]}
        assert "whisper-tiny.en" in loaded


@pytest.mark.parametrize("model", ["gpt-4o-transcribe", "gpt-4o-mini-transcribe", "gpt-transcribe",
                                   "gpt-realtime-whisper", "gpt-4o-transcribe-diarize"])
def test_openai_default_model_names_work(client: Any, data_dir: Path, model: str) -> None:
    """Each client's default transcription model name is served by the local default model, and listed."""
    with open(data_dir / "mfa_ls_61-70968-0000.flac", "rb") as f:
        r = client.audio.transcriptions.create(model=model, file=f)
    assert reader_wer(r.text) <= 0.1, r.text
    assert model in {m.id for m in client.models.list()}


def test_chunking_strategy_sets_the_speech_detection(live: Any, corpus: Path) -> None:
    """OpenAI's chunking_strategy is this request's VAD: whispering that the default (offline) threshold hears
    is silence to a server_vad threshold of 0.9."""
    import httpx

    def post(strategy: str | None) -> httpx.Response:
        data = {"model": "whisper-1", "language": "en"} | ({"chunking_strategy": strategy} if strategy else {})
        with open(corpus / "asr" / "mfa_whisper2.flac", "rb") as f:
            return httpx.post(live.url + "/v1/audio/transcriptions", files={"file": ("w.flac", f)}, data=data,
                              timeout=120)

    auto, strict = post("auto"), post('{"type": "server_vad", "threshold": 0.9, "silence_duration_ms": 300}')
    assert auto.status_code == strict.status_code == 200
    assert len(auto.json()["text"].split()) >= 4 and strict.json()["text"] == ""
    bad = post('{"type": "server_vad", "threshold": 3}')
    assert bad.status_code in (400, 422) and bad.json()["error"]["param"] == "chunking_strategy"


def test_logprobs_are_the_texts_tokens(client: Any, data_dir: Path, live: Any) -> None:
    """include=["logprobs"] gives OpenAI's entries: tokens whose bytes spell the text, each with a logprob."""
    import httpx

    with open(data_dir / "fw_jfk.flac", "rb") as f:
        r = client.audio.transcriptions.create(model="gpt-4o-transcribe", file=f, include=["logprobs"])
    assert r.logprobs and len(r.logprobs) >= 20
    spelled = b"".join(bytes(int(b) for b in lp.bytes) for lp in r.logprobs).decode()
    assert spelled.strip() == r.text.strip()
    assert "".join(lp.token for lp in r.logprobs).strip() == r.text.strip()
    values = [lp.logprob for lp in r.logprobs]
    assert all(v <= 0 for v in values) and sum(values) / len(values) > -0.5  # a clear clip: a confident decoder
    with open(data_dir / "fw_jfk.flac", "rb") as f:
        events = list(client.audio.transcriptions.create(model="whisper-1", file=f, include=["logprobs"], stream=True))
    assert events[-1].type == "transcript.text.done" and len(events[-1].logprobs) == len(r.logprobs)
    with open(data_dir / "fw_jfk.flac", "rb") as f:
        plain = httpx.post(live.url + "/v1/audio/transcriptions", files={"file": ("a.flac", f)}, timeout=120).json()
    assert "logprobs" not in plain
    with open(data_dir / "fw_jfk.flac", "rb") as f:
        bad = httpx.post(live.url + "/v1/audio/transcriptions", files={"file": ("a.flac", f)},
                         data={"include[]": "segments"}, timeout=60)
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "include"


def test_every_response_has_a_request_id(live: Any) -> None:
    import httpx

    ids = {httpx.get(live.url + path, timeout=10).headers.get("x-request-id") for path in ("/v1/models", "/nope")}
    assert None not in ids and len(ids) == 2 and all(i.startswith("req_") for i in ids)
