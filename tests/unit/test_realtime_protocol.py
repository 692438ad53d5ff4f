"""The Realtime protocol's pure half: parsing client events, session updates in both shapes, and the mapping
of live-stream events to OpenAI server events."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voxserve.errors import InvalidInput
from voxserve.languages import LANGUAGES
from voxserve.server.realtime_protocol import (
    ProtocolError,
    SessionConfig,
    TurnDetection,
    apply_update,
    decode_audio_field,
    error_event,
    live_event,
    parse_message,
    server_event,
)
from voxserve.streaming.live_events import (
    Cleared,
    Committed,
    LiveEvent,
    Partial,
    SpeechStarted,
    SpeechStopped,
    StreamError,
    TranscriptCompleted,
    TranscriptDelta,
    TranscriptFailed,
)

pytestmark = pytest.mark.timeout(10)

GA = "session.update"
BETA = "transcription_session.update"
PREFIX = "conversation.item.input_audio_transcription"


def ga(**inp: Any) -> dict[str, Any]:
    """A GA ``session.update`` with ``session.audio.input`` = ``inp``."""
    return {"type": GA, "session": {"type": "transcription", "audio": {"input": inp}}}


def beta(**session: Any) -> dict[str, Any]:
    return {"type": BETA, "session": session}


def protocol_error(fn: Any, *args: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        fn(*args)
    assert isinstance(info.value, InvalidInput)  # mapped like every invalid input, the session goes on
    return info.value


# ------------------------------------------------------------------------------------- parse_message


def test_parse_message_returns_the_event_object() -> None:
    raw = json.dumps({"type": "input_audio_buffer.commit", "event_id": "evt_1", "extra": [1, 2]})
    assert parse_message(raw) == {"type": "input_audio_buffer.commit", "event_id": "evt_1", "extra": [1, 2]}


@pytest.mark.parametrize("raw", ["{not json", "", "{'type': 'x'}", '{"type": "x"', "\x00", "NaN]"])
def test_parse_message_rejects_invalid_json(raw: str) -> None:
    err = protocol_error(parse_message, raw)
    assert err.code == "invalid_json"
    assert err.message.startswith("message is not valid JSON")


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 100_000 + "]" * 100_000,  # deeper than the parser's recursion limit
        '{"type": "x", "n": ' + "1" * 5000 + "}",  # an integer beyond Python's 4300-digit conversion limit
    ],
    ids=["deeply-nested", "huge-integer"],
)
def test_parse_message_rejects_json_python_cannot_load(raw: str) -> None:
    assert protocol_error(parse_message, raw).code == "invalid_json"


def test_parse_message_rejects_bytes_that_are_not_utf8() -> None:
    assert protocol_error(parse_message, b'{"type": "\xff"}').code == "invalid_json"


@pytest.mark.parametrize("raw", ["[1, 2]", "3", "null", '"session.update"', "true"])
def test_parse_message_rejects_non_objects(raw: str) -> None:
    assert protocol_error(parse_message, raw).code == "invalid_event"


@pytest.mark.parametrize("raw", ["{}", '{"no": "type"}', '{"type": 5}', '{"type": null}', '{"type": ["x"]}'])
def test_parse_message_needs_a_string_type(raw: str) -> None:
    assert protocol_error(parse_message, raw).code == "invalid_event"


# -------------------------------------------------------------------------------- decode_audio_field


def test_decode_audio_field_returns_the_bytes() -> None:
    pcm = bytes(range(256)) * 3
    assert decode_audio_field({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}) == pcm
    assert decode_audio_field({"audio": ""}) == b""


@pytest.mark.parametrize("event", [{}, {"audio": None}, {"audio": 123}, {"audio": [1, 2]}, {"audio": b"AAAA"}])
def test_decode_audio_field_needs_a_string(event: dict[str, Any]) -> None:
    err = protocol_error(decode_audio_field, event)
    assert (err.code, err.param) == ("missing_audio", "audio")


@pytest.mark.parametrize("audio", ["@@not base64@@", "AAA", "=AAA", "AA=A", "AA AA", "AAAé", "AAAA\n"])
def test_decode_audio_field_rejects_bad_base64(audio: str) -> None:
    err = protocol_error(decode_audio_field, {"audio": audio})
    assert (err.code, err.param) == ("invalid_base64", "audio")


# -------------------------------------------------------------------------------- apply_update (GA)


def test_ga_update_sets_every_field() -> None:
    event = {
        "type": GA,
        "session": {
            "type": "transcription",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 16000},
                    "transcription": {"model": "gpt-4o-transcribe", "language": "English", "prompt": "Kenobi"},
                    "turn_detection": {"type": "server_vad", "threshold": 0.6, "prefix_padding_ms": 200,
                                       "silence_duration_ms": 700},
                }
            },
            "voxserve": {"partial_events": True, "partial_interval_ms": 300, "speakers": False},
        },
    }
    assert apply_update(SessionConfig(), event) == SessionConfig(
        encoding="pcm16", sample_rate=16000, model="gpt-4o-transcribe", language="en", prompt="Kenobi",
        turn_detection=TurnDetection(0.6, 200, 700), partial_events=True, partial_interval_ms=300, shape="ga",
    )


def test_ga_pcm_rate_defaults_to_24000() -> None:
    start = SessionConfig(sample_rate=16000)
    assert apply_update(start, ga(format={"type": "audio/pcm"})).sample_rate == 24000
    assert apply_update(start, ga(format={})).sample_rate == 24000  # type defaults to audio/pcm too
    assert apply_update(start, ga(format={"type": "audio/pcm", "rate": 24000})).sample_rate == 24000


@pytest.mark.parametrize("kind, encoding", [("audio/pcmu", "ulaw"), ("audio/pcma", "alaw")])
def test_ga_g711_formats_are_8k_whatever_the_rate(kind: str, encoding: str) -> None:
    for fmt in ({"type": kind}, {"type": kind, "rate": 16000}, {"type": kind, "rate": 44100}):
        config = apply_update(SessionConfig(), ga(format=fmt))
        assert (config.encoding, config.sample_rate) == (encoding, 8000)


def test_ga_null_turn_detection_means_manual_commits() -> None:
    config = apply_update(SessionConfig(), ga(turn_detection=None))
    assert config.turn_detection is None
    # A later update can turn it back on, with defaults for what it leaves out.
    again = apply_update(config, ga(turn_detection={"type": "server_vad", "silence_duration_ms": 900}))
    assert again.turn_detection == TurnDetection(0.5, 300, 900)


def test_ga_semantic_vad_is_served_as_server_vad() -> None:
    config = apply_update(SessionConfig(), ga(turn_detection={"type": "semantic_vad"}))
    assert config.turn_detection == TurnDetection()
    assert config.public("s")["audio"]["input"]["turn_detection"]["type"] == "server_vad"


def test_ga_update_keeps_what_it_does_not_mention() -> None:
    start = SessionConfig(encoding="ulaw", sample_rate=8000, language="de", turn_detection=None,
                          partial_events=True, shape="beta")
    config = apply_update(start, {"type": GA, "session": {"type": "transcription"}})
    assert config == replace(start, shape="ga")
    # Without session.type, a session.update is a transcription session as well.
    assert apply_update(start, {"type": GA, "session": {}}) == replace(start, shape="ga")
    # Only the transcription object given is replaced; the audio format stays.
    config = apply_update(start, ga(transcription={"language": "fr"}))
    assert (config.encoding, config.sample_rate, config.language, config.model) == ("ulaw", 8000, "fr", "whisper-1")


def test_ga_voxserve_extensions() -> None:
    start = SessionConfig()
    assert start.partial_events is False
    on = apply_update(start, {"type": GA, "session": {"voxserve": {"partial_events": True}}})
    assert (on.partial_events, on.partial_interval_ms) == (True, 600)
    off = apply_update(on, {"type": GA, "session": {"voxserve": {"partial_events": False, "partial_interval_ms": 0}}})
    assert (off.partial_events, off.partial_interval_ms) == (False, 0)
    same = apply_update(on, {"type": GA, "session": {"voxserve": {}}})
    assert (same.partial_events, same.partial_interval_ms) == (True, 600)


@pytest.mark.parametrize(
    "name, code", [("English", "en"), ("english", "en"), (" en ", "en"), ("EN", "en"), ("German", "de"),
                   ("cantonese", "yue"), ("haitian creole", "ht"), ("fr", "fr")]
)
def test_language_names_map_to_codes(name: str, code: str) -> None:
    assert apply_update(SessionConfig(), ga(transcription={"language": name})).language == code
    assert apply_update(SessionConfig(), beta(input_audio_transcription={"language": name})).language == code


def test_empty_language_and_prompt_mean_none() -> None:
    start = SessionConfig(language="de", prompt="x")
    config = apply_update(start, ga(transcription={"language": "", "prompt": "", "model": ""}))
    assert (config.language, config.prompt, config.model) == (None, None, "whisper-1")
    assert apply_update(start, ga(transcription=None)) == replace(start, shape="ga")


# ------------------------------------------------------------------------------- apply_update (beta)


def test_beta_update_sets_every_field() -> None:
    event = beta(
        input_audio_format="pcm16",
        input_sample_rate=16000,
        input_audio_transcription={"model": "whisper-base", "language": "French", "prompt": "Bonjour"},
        turn_detection={"type": "server_vad", "threshold": 0.3, "prefix_padding_ms": 0, "silence_duration_ms": 50},
        voxserve={"partial_events": True, "partial_interval_ms": 10_000},
    )
    assert apply_update(SessionConfig(), event) == SessionConfig(
        encoding="pcm16", sample_rate=16000, model="whisper-base", language="fr", prompt="Bonjour",
        turn_detection=TurnDetection(0.3, 0, 50), partial_events=True, partial_interval_ms=10_000, shape="beta",
    )


@pytest.mark.parametrize("fmt, encoding", [("g711_ulaw", "ulaw"), ("g711_alaw", "alaw")])
def test_beta_g711_is_8k_and_ignores_a_sample_rate(fmt: str, encoding: str) -> None:
    config = apply_update(SessionConfig(), beta(input_audio_format=fmt, input_sample_rate=16000))
    assert (config.encoding, config.sample_rate, config.shape) == (encoding, 8000, "beta")


def test_beta_pcm16_defaults_to_24k_and_takes_16k() -> None:
    start = SessionConfig(encoding="ulaw", sample_rate=8000)
    assert apply_update(start, beta(input_audio_format="pcm16")).sample_rate == 24000
    assert apply_update(start, beta(input_audio_format="pcm16", input_sample_rate=16000)).sample_rate == 16000


def test_beta_null_turn_detection() -> None:
    assert apply_update(SessionConfig(), beta(turn_detection=None)).turn_detection is None


# ------------------------------------------------------------------------------------ update errors

GA_ERRORS = [
    (ga(noise_reduction={"type": "studio"}), "invalid_noise_reduction", "session.audio.input.noise_reduction"),
    ({"type": "session.update", "session": {"type": "transcription", "include": ["x"]}}, "invalid_include",
     "session.include"),
    (ga(format={"type": "audio/mp3"}), "invalid_format", "session.audio.input.format"),
    (ga(format={"type": ["audio/pcm"]}), "invalid_format", "session.audio.input.format"),
    (ga(format={"type": "audio/pcm", "rate": 44100}), "invalid_rate", "session.audio.input.format.rate"),
    (ga(format={"type": "audio/pcm", "rate": 8000}), "invalid_rate", "session.audio.input.format.rate"),
    (ga(format={"type": "audio/pcm", "rate": "16000"}), "invalid_rate", "session.audio.input.format.rate"),
    (ga(format={"type": "audio/pcm", "rate": None}), "invalid_rate", "session.audio.input.format.rate"),
    (ga(turn_detection={"threshold": 7}), "invalid_value", "session.audio.input.turn_detection.threshold"),
    (ga(turn_detection={"threshold": 0}), "invalid_value", "session.audio.input.turn_detection.threshold"),
    (ga(turn_detection={"threshold": 1.0}), "invalid_value", "session.audio.input.turn_detection.threshold"),
    (ga(turn_detection={"threshold": "0.5"}), "invalid_value", "session.audio.input.turn_detection.threshold"),
    (ga(turn_detection={"threshold": True}), "invalid_value", "session.audio.input.turn_detection.threshold"),
    (ga(turn_detection={"prefix_padding_ms": 100.5}), "invalid_value",
     "session.audio.input.turn_detection.prefix_padding_ms"),
    (ga(turn_detection={"prefix_padding_ms": -1}), "invalid_value",
     "session.audio.input.turn_detection.prefix_padding_ms"),
    (ga(turn_detection={"silence_duration_ms": 500.0}), "invalid_value",
     "session.audio.input.turn_detection.silence_duration_ms"),
    (ga(turn_detection={"silence_duration_ms": 49}), "invalid_value",
     "session.audio.input.turn_detection.silence_duration_ms"),
    (ga(turn_detection={"silence_duration_ms": "500"}), "invalid_value",
     "session.audio.input.turn_detection.silence_duration_ms"),
    (ga(turn_detection={"silence_duration_ms": False}), "invalid_value",
     "session.audio.input.turn_detection.silence_duration_ms"),
    (ga(turn_detection={"type": "none"}), "invalid_turn_detection", "session.audio.input.turn_detection"),
    (ga(turn_detection="server_vad"), "invalid_turn_detection", "session.audio.input.turn_detection"),
    (ga(transcription={"language": "klingon"}), "unsupported_language", "session.audio.input.transcription.language"),
    (ga(transcription={"language": 7}), "unsupported_language", "session.audio.input.transcription.language"),
    (ga(transcription={"prompt": 5}), "invalid_prompt", "session.audio.input.transcription.prompt"),
    (ga(transcription="whisper-1"), "invalid_transcription", "session.audio.input.transcription"),
    ({"type": GA, "session": {"type": "realtime"}}, "invalid_session_type", "session.type"),
    ({"type": GA, "session": {"type": None}}, "invalid_session_type", "session.type"),
    ({"type": GA}, "invalid_session", "session"),
    ({"type": GA, "session": "transcription"}, "invalid_session", "session"),
    ({"type": GA, "session": {"voxserve": {"partial_interval_ms": -1}}}, "invalid_value",
     "session.voxserve.partial_interval_ms"),
    ({"type": GA, "session": {"voxserve": {"partial_interval_ms": 10_001}}}, "invalid_value",
     "session.voxserve.partial_interval_ms"),
]
BETA_ERRORS = [
    (beta(input_audio_format="mp3"), "invalid_format", "session.input_audio_format"),
    (beta(input_audio_format="audio/pcm"), "invalid_format", "session.input_audio_format"),
    (beta(input_audio_format=None), "invalid_format", "session.input_audio_format"),
    (beta(input_audio_format=["pcm16"]), "invalid_format", "session.input_audio_format"),
    (beta(input_sample_rate=8000), "invalid_rate", "session.input_sample_rate"),
    (beta(input_audio_format="pcm16", input_sample_rate=48000), "invalid_rate", "session.input_sample_rate"),
    (beta(turn_detection={"threshold": 0.0}), "invalid_value", "session.turn_detection.threshold"),
    (beta(turn_detection={"prefix_padding_ms": 5001}), "invalid_value", "session.turn_detection.prefix_padding_ms"),
    (beta(turn_detection={"silence_duration_ms": 1.5}), "invalid_value",
     "session.turn_detection.silence_duration_ms"),
    (beta(turn_detection={"type": "push_to_talk"}), "invalid_turn_detection", "session.turn_detection"),
    (beta(input_audio_transcription={"language": "xx"}), "unsupported_language",
     "session.input_audio_transcription.language"),
    (beta(input_audio_transcription={"prompt": ["a"]}), "invalid_prompt", "session.input_audio_transcription.prompt"),
    (beta(input_audio_transcription=[]), "invalid_transcription", "session.input_audio_transcription"),
    ({"type": BETA, "session": None}, "invalid_session", "session"),
]


@pytest.mark.parametrize("event, code, param", GA_ERRORS + BETA_ERRORS,
                         ids=[f"{c}:{p}:{i}" for i, (_, c, p) in enumerate(GA_ERRORS + BETA_ERRORS)])
def test_invalid_fields_give_the_right_code_and_param(event: dict[str, Any], code: str, param: str) -> None:
    start = SessionConfig(language="de")
    err = protocol_error(apply_update, start, event)
    assert (err.code, err.param) == (code, param)
    assert err.message
    assert start == SessionConfig(language="de")  # nothing was half-applied
    wire = error_event(err, "evt_7")["error"]
    assert wire == {"type": "invalid_request_error", "code": code, "message": err.message, "param": param,
                    "event_id": "evt_7"}


# ------------------------------------------------------------------------------- public round trip


def test_public_ga_shape() -> None:
    config = SessionConfig(sample_rate=16000, language="en", turn_detection=TurnDetection(0.4, 100, 800))
    assert config.public("sess_1") == {
        "id": "sess_1", "object": "realtime.transcription_session", "type": "transcription",
        "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 16000},
            "transcription": {"model": "whisper-1", "language": "en", "prompt": ""},
            "turn_detection": {"type": "server_vad", "threshold": 0.4, "prefix_padding_ms": 100,
                               "silence_duration_ms": 800},
            "noise_reduction": None,
        }},
        "include": [],
        "voxserve": {"partial_events": False, "partial_interval_ms": 600, "speakers": False},
    }
    assert SessionConfig(encoding="alaw", sample_rate=8000).public("s")["audio"]["input"]["format"] == {
        "type": "audio/pcma"
    }


def test_public_beta_shape() -> None:
    config = SessionConfig(encoding="ulaw", sample_rate=8000, prompt="hi", turn_detection=None, shape="beta",
                           partial_events=True)
    assert config.public("sess_2") == {
        "id": "sess_2", "object": "realtime.transcription_session", "input_audio_format": "g711_ulaw",
        "input_sample_rate": 8000,
        "input_audio_transcription": {"model": "whisper-1", "language": None, "prompt": "hi"},
        "turn_detection": None, "input_audio_noise_reduction": None, "include": [],
        "voxserve": {"partial_events": True, "partial_interval_ms": 600, "speakers": False},
    }


ENCODINGS = st.sampled_from([("pcm16", 24000), ("pcm16", 16000), ("ulaw", 8000), ("alaw", 8000)])
configs = st.builds(
    lambda enc, model, language, prompt, td, partials, interval, shape: SessionConfig(
        encoding=enc[0], sample_rate=enc[1], model=model, language=language, prompt=prompt, turn_detection=td,
        partial_events=partials, partial_interval_ms=interval, shape=shape,
    ),
    ENCODINGS,
    st.sampled_from(["whisper-1", "whisper-base", "gpt-4o-transcribe"]),
    st.none() | st.sampled_from(sorted(LANGUAGES)),
    st.none() | st.text(min_size=1, max_size=20),
    st.none() | st.builds(
        TurnDetection,
        st.floats(0.01, 0.99, allow_nan=False),
        st.integers(0, 5000),
        st.integers(50, 10_000),
    ),
    st.booleans(),
    st.integers(0, 10_000),
    st.sampled_from(["ga", "beta"]),
)


@settings(max_examples=150, deadline=None)
@given(configs, configs)
def test_public_round_trips_in_the_clients_shape(config: SessionConfig, other: SessionConfig) -> None:
    """What the server reports, sent back as an update (through JSON), gives the same settings."""
    session = json.loads(json.dumps(config.public("sess_x")))
    kind = BETA if config.shape == "beta" else GA
    assert apply_update(other, {"type": kind, "session": session}) == config
    assert ("input_audio_format" in session) == (config.shape == "beta")
    assert ("audio" in session) == (config.shape == "ga")


# ---------------------------------------------------------------------------------------- live_event

SAMPLE_EVENTS: list[tuple[LiveEvent, dict[str, Any]]] = [
    (SpeechStarted("item_1", 16_000),
     {"type": "input_audio_buffer.speech_started", "audio_start_ms": 1000, "item_id": "item_1"}),
    (SpeechStopped("item_1", 24_008),
     {"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 1500, "item_id": "item_1"}),
    (Committed("item_1", None),
     {"type": "input_audio_buffer.committed", "item_id": "item_1", "previous_item_id": None}),
    (Committed("item_2", "item_1"),
     {"type": "input_audio_buffer.committed", "item_id": "item_2", "previous_item_id": "item_1"}),
    (Cleared(), {"type": "input_audio_buffer.cleared"}),
    (TranscriptDelta("item_1", " world"),
     {"type": f"{PREFIX}.delta", "item_id": "item_1", "content_index": 0, "delta": " world"}),
    (TranscriptCompleted("item_1", "hello world", 8000, 32_000, 0.1234),
     {"type": f"{PREFIX}.completed", "item_id": "item_1", "content_index": 0, "transcript": "hello world",
      "usage": {"type": "duration", "seconds": 1.5}, "voxserve": {"latency_ms": 123.4}}),
    (TranscriptFailed("item_3", "the model failed"),
     {"type": f"{PREFIX}.failed", "item_id": "item_3", "content_index": 0,
      "error": {"type": "transcription_error", "code": "transcription_failed", "message": "the model failed"}}),
    (StreamError("input_audio_buffer_commit_empty", "there is no uncommitted audio to commit"),
     {"type": "error", "error": {"type": "invalid_request_error", "code": "input_audio_buffer_commit_empty",
                                 "message": "there is no uncommitted audio to commit", "param": None,
                                 "event_id": None}}),
]
PARTIAL = (Partial("item_1", "hello wor", 20_000),
           {"type": f"{PREFIX}.partial", "item_id": "item_1", "content_index": 0, "transcript": "hello wor",
            "voxserve": {"audio_end_ms": 1250}})


def _without_id(event: dict[str, Any] | None) -> dict[str, Any]:
    assert event is not None
    assert isinstance(event.pop("event_id"), str)
    return event


@pytest.mark.parametrize("ev, expected", SAMPLE_EVENTS, ids=[f"{type(e).__name__}-{i}" for i, (e, _) in
                                                              enumerate(SAMPLE_EVENTS)])
@pytest.mark.parametrize("partial_events", [False, True])
def test_live_event_maps_to_the_openai_server_event(ev: LiveEvent, expected: dict[str, Any],
                                                    partial_events: bool) -> None:
    assert _without_id(live_event(ev, partial_events)) == expected


def test_partial_events_only_when_enabled() -> None:
    ev, expected = PARTIAL
    assert live_event(ev, False) is None
    assert _without_id(live_event(ev, True)) == expected


def test_every_live_event_type_has_a_server_event() -> None:
    covered = {type(ev) for ev, _ in [*SAMPLE_EVENTS, PARTIAL]}
    assert covered == set(get_args(LiveEvent))
    for ev, _ in [*SAMPLE_EVENTS, PARTIAL]:
        assert live_event(ev, True) is not None


def test_completed_usage_is_the_item_duration_in_seconds() -> None:
    done = live_event(TranscriptCompleted("i", "x", 16_000, 16_000 + 12_345, 0.0), False)
    assert done is not None
    assert done["usage"] == {"type": "duration", "seconds": 0.772}  # 12345 / 16000, to the millisecond


def test_every_event_has_a_unique_event_id() -> None:
    ids = []
    for _ in range(50):
        for ev, _ in [*SAMPLE_EVENTS, PARTIAL]:
            out = live_event(ev, True)
            assert out is not None
            ids.append(out["event_id"])
        ids.append(server_event("session.updated", session={})["event_id"])
        ids.append(error_event(ProtocolError("x", code="invalid_json"))["event_id"])
    assert len(ids) == len(set(ids)) == 50 * (len(SAMPLE_EVENTS) + 3)
    assert all(isinstance(i, str) and i.startswith("event_") for i in ids)


def test_error_event_shape_for_plain_exceptions() -> None:
    out = error_event(ValueError("nope"))
    assert _without_id(out) == {"type": "error", "error": {"type": "invalid_request_error", "code": "error",
                                                           "message": "nope", "param": None, "event_id": None}}


# ----------------------------------------------------------------------- robustness on arbitrary input

KEYS = ["type", "session", "audio", "input", "format", "rate", "transcription", "turn_detection", "language",
        "prompt", "model", "threshold", "prefix_padding_ms", "silence_duration_ms", "voxserve", "partial_events",
        "partial_interval_ms", "input_audio_format", "input_sample_rate", "input_audio_transcription"]
VALUES = ["transcription", "audio/pcm", "audio/pcmu", "audio/pcma", "pcm16", "g711_ulaw", "g711_alaw", "server_vad",
          "semantic_vad", "en", "English", "whisper-1", 16000, 24000, 8000, 0.5, 300, 500]
json_leaves = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12) | st.sampled_from(VALUES)
)
json_like = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner,
                                                               max_size=5),
    max_leaves=25,
)


def _check_config(config: SessionConfig) -> None:
    assert (config.encoding, config.sample_rate) in {("pcm16", 24000), ("pcm16", 16000), ("ulaw", 8000),
                                                     ("alaw", 8000)}
    assert config.language is None or config.language in LANGUAGES
    assert isinstance(config.model, str) and config.shape in ("ga", "beta")
    assert config.prompt is None or isinstance(config.prompt, str)
    assert isinstance(config.partial_events, bool) and 0 <= config.partial_interval_ms <= 10_000
    td = config.turn_detection
    assert td is None or (0.01 <= td.threshold <= 0.99 and 0 <= td.prefix_padding_ms <= 5000
                          and 50 <= td.silence_duration_ms <= 10_000)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([GA, BETA]), json_like)
def test_apply_update_only_raises_protocol_errors(kind: str, session: Any) -> None:
    try:
        config = apply_update(SessionConfig(), {"type": kind, "session": session})
    except ProtocolError as exc:
        assert exc.code != "invalid_input" and exc.message
        return
    _check_config(config)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([GA, BETA]), st.dictionaries(st.sampled_from(["audio", "input"]), json_like, max_size=2),
       json_like)
def test_apply_update_on_ga_nesting_only_raises_protocol_errors(kind: str, outer: dict[str, Any], inner: Any) -> None:
    """Reach the nested GA paths (session.audio.input.*) more often than a flat random object would."""
    session = {"type": "transcription", **outer, "audio": {"input": inner}}
    try:
        config = apply_update(SessionConfig(), {"type": kind, "session": session})
    except ProtocolError:
        return
    _check_config(config)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), json_like.map(json.dumps)))
def test_parse_message_only_raises_protocol_errors(raw: str) -> None:
    try:
        event = parse_message(raw)
    except ProtocolError as exc:
        assert exc.code in ("invalid_json", "invalid_event")
        return
    assert isinstance(event, dict) and isinstance(event["type"], str)
    # Whatever parses, an update built from it fails only with a protocol error too.
    try:
        _check_config(apply_update(SessionConfig(), {**event, "type": GA}))
    except ProtocolError:
        pass


def test_known_speakers_apply_and_echo_in_both_shapes() -> None:
    named = apply_update(SessionConfig(), {"type": GA, "session": {"type": "transcription",
                                                                   "voxserve": {"speakers": {"known": ["alice"]}}}})
    assert (named.speakers, named.known_speakers) == (True, ("alice",))
    assert named.public("s")["voxserve"]["speakers"] == {"known": ["alice"]}
    kept = apply_update(named, {"type": BETA, "session": {"voxserve": {"partial_events": True}}})
    assert kept.known_speakers == ("alice",) and kept.public("s")["voxserve"]["speakers"] == {"known": ["alice"]}
    cleared = apply_update(kept, {"type": BETA, "session": {"voxserve": {"speakers": True}}})
    assert (cleared.speakers, cleared.known_speakers) == (True, ())
    assert cleared.public("s")["voxserve"]["speakers"] is True
