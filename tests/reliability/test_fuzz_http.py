"""Fuzzing the HTTP API through the real server: multipart forms (random fields, types, values and broken
boundaries) and speech requests (random JSON, random Unicode text). Every answer is a success or a documented
4xx in OpenAI's error shape; never a 5xx, never a dropped connection."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import Server, budget
from tests.reliability.fuzz_media import seeds
from tests.reliability.report import Tally

ERROR_STATUSES = {400, 401, 404, 409, 410, 413, 415, 422}
FORM_ROUTES = ["/v1/audio/transcriptions", "/v1/audio/translations", "/v1/jobs", "/v1/audio/diarization"]
FIELDS = ["file", "model", "language", "prompt", "response_format", "temperature", "timestamp_granularities[]",
          "timestamp_granularities", "stream", "diarize", "num_speakers", "min_speakers", "max_speakers", "task",
          "max_line_width", "max_line_count", "max_cue_duration", "speaker_labels", "split_channels"]
VALUES = ["", "0", "1", "-1", "true", "false", "nan", "inf", "1e999", "whisper-1", "whisper-base", "json", "text",
          "srt", "vtt", "verbose_json", "diarized_json", "word", "segment", "en", "english", "xx", "../../etc",
          "/etc", "/tmp", "0.5", "33", "99999999999999999999", "\u0000", "é", "🙂", "translate", "²", "42"]


def fuzz_settings(n: int) -> Callable[..., object]:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("fuzz-http"), server={"max_upload_mb": 1.0, "warmup": True},
                tts={"max_ahead_s": 0.0}) as s:  # synthesis as fast as it goes: no pacing to playback
        yield s


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


def check(r: httpx.Response) -> str:
    """The outcome label; fails on a 5xx or an error body that is not OpenAI's error object."""
    assert r.status_code < 500, f"{r.status_code}: {r.text[:300]}"
    if r.status_code >= 400:
        assert r.status_code in ERROR_STATUSES, f"undocumented status {r.status_code}: {r.text[:300]}"
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"], err
        return f"{r.status_code}:{err['code']}"
    return str(r.status_code)


def send(http: httpx.Client, method: str, url: str, **kw: Any) -> httpx.Response:
    """One request; a dropped connection (no HTTP answer at all) fails the test."""
    try:
        with http.stream(method, url, **kw) as r:
            r.read()
            return r
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError) as exc:
        pytest.fail(f"the server dropped the connection on {method} {url}: {exc!r}")


# -------------------------------------------------------------------------------------------- multipart

PART = st.fixed_dictionaries({
    "name": st.one_of(st.sampled_from(FIELDS), st.text(max_size=12)),
    "filename": st.one_of(st.none(), st.sampled_from(["a.wav", "a.flac", "", "../../x.wav", "a\"b.wav", "é.mp3"]),
                          st.text(max_size=10)),
    "ctype": st.one_of(st.none(), st.sampled_from(["audio/wav", "text/plain", "application/octet-stream", "x/y"])),
    "value": st.one_of(st.sampled_from(VALUES).map(str.encode), st.binary(max_size=64),
                       st.sampled_from(sorted(seeds())).map(lambda n: seeds()[n])),
})


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace("\n", " ")


def multipart(parts: list[dict[str, Any]], boundary: str, damage: str) -> bytes:
    out = b""
    for p in parts:
        disposition = f'form-data; name="{_quote(p["name"])}"'
        if p["filename"] is not None:
            disposition += f'; filename="{_quote(p["filename"])}"'
        head = f"Content-Disposition: {disposition}\r\n"
        if p["ctype"]:
            head += f"Content-Type: {p['ctype']}\r\n"
        out += f"--{boundary}\r\n{head}\r\n".encode() + p["value"] + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    if damage == "no_final":
        out = out[: out.rfind(b"--" + boundary.encode() + b"--")]
    elif damage == "wrong_boundary":
        out = out.replace(boundary.encode(), b"other" + boundary.encode())
    elif damage == "no_crlf":
        out = out.replace(b"\r\n\r\n", b"\r\n", 1)
    elif damage == "truncated":
        out = out[: len(out) // 2]
    elif damage == "bare_lf":
        out = out.replace(b"\r\n", b"\n")
    elif damage == "header_garbage":
        out = out.replace(b"Content-Disposition", b"Content-Disposition\x00\xff", 1)
    return out


CONTENT_TYPES = st.sampled_from([
    "multipart/form-data; boundary={b}", 'multipart/form-data; boundary="{b}"', "multipart/form-data",
    "multipart/form-data; boundary=", "multipart/form-data; boundary={b}; charset=utf-7", "multipart/mixed; boundary={b}",
    "application/x-www-form-urlencoded", "application/json", "text/plain", "", "multipart/form-data; boundary={b}{b}",
])


@pytest.fixture(scope="module")
def form_tally() -> Iterator[Tally]:
    t = Tally("multipart forms (4 routes, through the server)")
    yield t
    t.write()


@fuzz_settings(budget(120))
@given(route=st.sampled_from(FORM_ROUTES), parts=st.lists(PART, max_size=6),
       boundary=st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters='"\\;'), min_size=1,
                        max_size=70),
       ctype=CONTENT_TYPES, damage=st.sampled_from(["", "", "no_final", "wrong_boundary", "no_crlf", "truncated",
                                                    "bare_lf", "header_garbage"]))
def test_multipart_forms(http: httpx.Client, form_tally: Tally, route: str, parts: list[dict[str, Any]],
                         boundary: str, ctype: str, damage: str) -> None:
    body = multipart(parts, boundary, damage)
    headers = {"content-type": ctype.format(b=boundary)} if ctype else {}
    form_tally.add(check(send(http, "POST", route, content=body, headers=headers)))


@fuzz_settings(budget(60, 1000))  # each of these runs a real transcription
@given(route=st.sampled_from(FORM_ROUTES), data=st.dictionaries(st.sampled_from(FIELDS), st.sampled_from(VALUES),
                                                                max_size=6),
       name=st.sampled_from(sorted(seeds())))
def test_valid_audio_with_random_fields(http: httpx.Client, form_tally: Tally, route: str, data: dict[str, str],
                                        name: str) -> None:
    data.pop("file", None)
    r = send(http, "POST", route, files={"file": (f"a.{name}", seeds()[name])}, data=data)
    form_tally.add(check(r))


def test_limits_on_chunked_multipart(http: httpx.Client, server: Server) -> None:
    """An upload without Content-Length over the body limit is 413 while it streams; a file under it is fine."""

    def chunks(total: int) -> Iterator[bytes]:
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
        for _ in range(total // 65536):
            yield b"\0" * 65536
        yield b"\r\n--b--\r\n"

    r = send(http, "POST", "/v1/audio/transcriptions", content=chunks(3_000_000),
             headers={"content-type": "multipart/form-data; boundary=b"})
    assert check(r) == "413:file_too_large"
    assert server.healthy()


# -------------------------------------------------------------------------------------------- speech

TEXTS = st.one_of(
    st.text(max_size=60),
    st.text(st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp", "So", "Sk", "Mn"]), max_size=30),
    st.from_regex(r"[$€£#-]?\d{1,40}([.,]\d{1,20})?(%|st|th|s| km| kg)?", fullmatch=True),
    st.sampled_from(["🙂" * 20, "\u202e\u202d" * 10 + "a", "a\u0301" * 20, "ﷺ" * 5, "𝕳𝖊𝖑𝖑𝖔", "\x00a\x00", "A" * 5000,
                     "1" * 5000, "Dr. " * 50, "$" + "9" * 400, "..." * 100, "\r\n" * 100 + "hi"]),
)
SPEECH_KEYS = ["input", "voice", "response_format", "speed", "stream_format", "model", "instructions"]
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
              st.sampled_from(["alloy", "joe", "nobody", "/etc/passwd", "../x.onnx", "mp3", "wav", "opus", "pcm",
                               "flac", "aac", "sse", "audio"])),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def speech_tally() -> Iterator[Tally]:
    t = Tally("speech requests (POST /v1/audio/speech)")
    yield t
    t.write()


def _speech_available(server: Server) -> bool:
    try:
        server.ctx.vox.tts().voice_info(None)
        return True
    except Exception:  # noqa: BLE001
        return False


@fuzz_settings(budget(60, 3000))  # most of these synthesize speech
@given(text=TEXTS, extra=st.dictionaries(st.sampled_from(SPEECH_KEYS[1:]), JSON_VALUES, max_size=3),
       fmt=st.sampled_from(["pcm", "wav", "mp3"]))
def test_speech_text_and_fields(http: httpx.Client, server: Server, speech_tally: Tally, text: str,
                                extra: dict[str, Any], fmt: str) -> None:
    if not _speech_available(server):
        pytest.skip("needs voxserve[tts]")
    body = {"input": text, "response_format": fmt, **extra}
    speech_tally.add(check(send(http, "POST", "/v1/audio/speech", json=body)))


@fuzz_settings(budget(60, 7000))
@given(raw=st.one_of(
    st.binary(max_size=200),
    st.sampled_from(['{"input": "\\ud800 hello"}', '{"input": "hi \\udfff\\ud800 there"}', '{"input": "a", "speed": 1e999}',
                     '{"input": "a", "speed": NaN}', '{"input": "' + "[" * 5000 + '"}', "[" * 100_000, '{"input": 1e99999}',
                     '{"input": "x"' + ', "a": 1' * 5000 + "}", '"just a string"', "null", "{}", '{"input": ""}']),
    JSON_VALUES.map(lambda v: json.dumps(v).encode())))
def test_speech_raw_bodies(http: httpx.Client, server: Server, speech_tally: Tally, raw: Any) -> None:
    if not _speech_available(server):
        pytest.skip("needs voxserve[tts]")
    body = raw if isinstance(raw, bytes) else raw.encode()
    speech_tally.add(check(send(http, "POST", "/v1/audio/speech", content=body,
                                headers={"content-type": "application/json"})))


SSML_PARTS = ["<speak>", "</speak>", "<break time='0.1s'/>", "<break time='11s'/>", "<break strength='x-strong'/>",
              "<p>", "</p>", "<s>", "</s>", "<say-as interpret-as='date'>", "<say-as interpret-as='characters'>",
              "<say-as interpret-as='cardinal'>", "</say-as>", "<prosody rate='x-fast' volume='+6dB'>",
              "<prosody rate='-300%'>", "</prosody>", "<sub alias='x'>", "</sub>", "<emphasis>", "</emphasis>",
              "hello", "12/31/1999", "9" * 60, "&amp;", "&bogus;", "&#0;", "<!DOCTYPE x>", "<?xml version='1.0'?>",
              "]]>", "<", "\x00", " "]


@fuzz_settings(budget(40, 2000))
@given(parts=st.lists(st.sampled_from(SSML_PARTS), max_size=14), close=st.booleans(),
       pronunciations=st.one_of(st.just({}), st.just({"hello": "[[ h ]]", "x": "ex"}), JSON_VALUES,
                                st.dictionaries(st.sampled_from(["hello", "x", "", "[[", "a b"]),
                                                st.sampled_from(["hi", "", "[[ h ]]", "[[x", 3]))))
def test_ssml_and_pronunciations(http: httpx.Client, server: Server, speech_tally: Tally, parts: list[str],
                                 close: bool, pronunciations: Any) -> None:
    """SSML (input starting with <speak>) and the pronunciations field: audio or a documented error."""
    if not _speech_available(server):
        pytest.skip("needs voxserve[tts]")
    document = "<speak>" + "".join(parts) + ("</speak>" if close else "")
    body = {"input": document, "response_format": "pcm", "pronunciations": pronunciations}
    speech_tally.add(check(send(http, "POST", "/v1/audio/speech", json=body)))


def test_server_still_serves_after_fuzzing(http: httpx.Client, server: Server, data_dir: Path) -> None:
    r = send(http, "POST", "/v1/audio/transcriptions",
             files={"file": ("a.flac", (data_dir / "mfa_ls_61-70968-0000.flac").read_bytes())})
    assert r.status_code == 200 and "wizard" in r.json()["text"].lower()
