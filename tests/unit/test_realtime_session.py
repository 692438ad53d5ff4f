"""The one reader of Realtime session updates: GA and beta shapes read alike, and transcription and conversation
sessions take (and refuse) the same inputs the same way."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.server.realtime_conversation import ConversationConfig, TurnConfig, apply_conversation_update
from voxserve.server.realtime_protocol import SessionConfig, TurnDetection, apply_update
from voxserve.server.realtime_session import (
    ABSENT,
    LOGPROBS,
    AudioFormat,
    ProtocolError,
    SessionRequest,
    TranscriptionRequest,
    TurnRequest,
    read_update,
)

pytestmark = pytest.mark.timeout(30)


def update(session: Any, kind: str = "session.update") -> dict[str, Any]:
    return {"type": kind, "session": session}


def transcription(session: Any, start: SessionConfig | None = None) -> SessionConfig:
    return apply_update(start or SessionConfig(language="de"), update(session))


def conversation(session: Any, start: ConversationConfig | None = None) -> ConversationConfig:
    return apply_conversation_update(start or ConversationConfig(language="de"), update(session))


def outcome(apply: Any, session: Any) -> tuple[Any, ...]:
    """What a session kind made of an update, in the terms both kinds share (or the error it gave)."""
    try:
        c = apply(session)
    except ProtocolError as exc:
        return ("error", exc.code, exc.param, exc.message)
    if isinstance(c, SessionConfig):
        td = c.turn_detection
        return ("ok", c.encoding, c.sample_rate, c.language, c.shape,
                None if td is None else (td.threshold, td.prefix_padding_ms, td.silence_duration_ms))
    t = c.turn
    return ("ok", c.in_encoding, c.in_rate, c.language, c.shape,
            None if t is None else (t.threshold, t.prefix_padding_ms, t.silence_duration_ms))


# ------------------------------------------------------------------------------------------- both shapes


def test_ga_and_beta_shapes_ask_for_the_same_thing() -> None:
    turn = {"type": "server_vad", "threshold": 0.6, "prefix_padding_ms": 200, "silence_duration_ms": 700}
    asr = {"model": "whisper-base", "language": "French", "prompt": "Bonjour"}
    ga = read_update(update({"audio": {
        "input": {"format": {"type": "audio/pcm", "rate": 16000}, "transcription": asr, "turn_detection": turn,
                  "noise_reduction": {"type": "far_field"}},
        "output": {"format": {"type": "audio/pcmu"}, "voice": "joe"}}}), "realtime")
    beta = read_update(update({
        "input_audio_format": "pcm16", "input_sample_rate": 16000, "input_audio_transcription": asr,
        "turn_detection": turn, "input_audio_noise_reduction": {"type": "far_field"},
        "output_audio_format": "g711_ulaw", "voice": "joe"}), "realtime")
    assert (ga.shape, beta.shape) == ("ga", "beta")
    assert ga == SessionRequest(
        shape="ga", input_format=AudioFormat("pcm16", 16000), output_format=AudioFormat("ulaw", 8000), voice="joe",
        transcription=TranscriptionRequest("whisper-base", "fr", "Bonjour"),
        turn_detection=TurnRequest("server_vad", 0.6, 200, 700), noise_reduction="far_field",
    )
    assert replace(beta, shape="ga") == ga


def test_what_an_update_does_not_name_is_absent() -> None:
    asked = read_update(update({"instructions": "Be brief."}), "realtime")
    assert asked == SessionRequest(instructions="Be brief.")
    assert asked.shape is None and asked.turn_detection is ABSENT and asked.transcription.language is ABSENT
    # null clears what OpenAI clears with null; in a number or a flag it is "not given"
    asked = read_update(update({"turn_detection": None, "input_audio_transcription": {"language": None},
                                "temperature": None, "voxserve": {"speakers": None}}), "transcription")
    assert (asked.turn_detection, asked.transcription.language) == (None, None)
    assert asked.temperature is ABSENT and asked.voxserve.speakers is ABSENT


@pytest.mark.parametrize("event_type, session, shape", [
    ("transcription_session.update", {}, "beta"),
    ("transcription_session.update", {"audio": {}}, "beta"),
    ("session.update", {"audio": {}, "voice": "joe"}, "ga"),
    ("session.update", {"voice": "joe"}, "beta"),
    ("session.update", {"turn_detection": None}, "beta"),
    ("session.update", {"type": "transcription", "input_audio_format": "pcm16"}, "beta"),
    ("session.update", {"type": "transcription"}, "ga"),
    ("session.update", {"instructions": "x", "include": []}, None),
    ("session.update", {}, None),
])
def test_the_shape_is_read_from_the_update(event_type: str, session: dict[str, Any], shape: str | None) -> None:
    assert read_update(update(session, event_type), "transcription").shape == shape


def test_errors_name_the_field_the_client_sent() -> None:
    for key in ("max_output_tokens", "max_response_output_tokens"):
        with pytest.raises(ProtocolError) as info:
            read_update(update({key: 5000}), "realtime")
        assert (info.value.code, info.value.param) == ("invalid_value", f"session.{key}")
    with pytest.raises(ProtocolError) as info:
        read_update(update({"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "eager"}}}}),
                    "realtime")
    assert info.value.param == "session.audio.input.turn_detection.eagerness"


# ------------------------------------------------------------------- both session kinds agree

VALID = [
    {},
    {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}},
    {"audio": {"input": {"format": {"type": "audio/pcmu", "rate": 44100}, "transcription": {"language": "French"},
                         "turn_detection": {"type": "semantic_vad", "eagerness": "low"}}}},
    {"audio": {"input": {"turn_detection": None, "noise_reduction": {"type": "near_field"}}}},
    {"audio": {"input": {"transcription": {"language": None, "model": "whisper-base"}}}},
    {"audio": {"input": {"turn_detection": {"threshold": 0.7, "create_response": False}}}},
    {"audio": {"output": {"format": {"type": "audio/pcma"}, "voice": "joe"}}, "include": [LOGPROBS]},
    {"instructions": "Be brief.", "temperature": 0.8, "max_output_tokens": "inf", "include": None},
    {"voxserve": {"partial_events": True, "speculative": False, "audio_events": "beta"}},
    {"input_audio_format": "g711_ulaw", "input_sample_rate": 16000},
    {"input_audio_format": "pcm16", "input_sample_rate": 16000},
    {"input_audio_transcription": {"language": "en", "prompt": "Kenobi"}, "turn_detection": {"silence_duration_ms": 900}},
    {"input_audio_noise_reduction": None, "turn_detection": None},
    {"voice": "joe", "output_audio_format": "g711_alaw", "max_response_output_tokens": 100},
]
INVALID = [
    ({"audio": {"input": {"format": {"type": "audio/mp3"}}}}, "invalid_format", "session.audio.input.format"),
    ({"audio": {"input": {"format": "audio/pcm"}}}, "invalid_format", "session.audio.input.format"),
    ({"audio": {"input": {"format": {"rate": 44100}}}}, "invalid_rate", "session.audio.input.format.rate"),
    ({"audio": {"output": {"format": {"type": "pcm16"}}}}, "invalid_format", "session.audio.output.format"),
    ({"audio": {"input": {"turn_detection": {"threshold": 7}}}}, "invalid_value",
     "session.audio.input.turn_detection.threshold"),
    ({"audio": {"input": {"turn_detection": {"type": "push"}}}}, "invalid_turn_detection",
     "session.audio.input.turn_detection"),
    ({"audio": {"input": {"turn_detection": {"create_response": "yes"}}}}, "invalid_value",
     "session.audio.input.turn_detection.create_response"),
    ({"audio": {"input": {"transcription": {"language": "klingon"}}}}, "unsupported_language",
     "session.audio.input.transcription.language"),
    ({"audio": {"input": {"transcription": {"prompt": 5}}}}, "invalid_prompt", "session.audio.input.transcription.prompt"),
    ({"audio": {"input": {"transcription": {"model": 5}}}}, "invalid_value", "session.audio.input.transcription.model"),
    ({"audio": {"input": {"noise_reduction": {"type": "studio"}}}}, "invalid_noise_reduction",
     "session.audio.input.noise_reduction"),
    ({"audio": {"output": {"voice": 5}}}, "invalid_value", "session.audio.output.voice"),
    ({"audio": [1]}, "invalid_session", "session.audio"),
    ({"audio": {"input": "pcm16"}}, "invalid_session", "session.audio.input"),
    ({"audio": {}, "turn_detection": None}, "invalid_session", "session.turn_detection"),
    ({"include": ["everything"]}, "invalid_include", "session.include"),
    ({"instructions": 5}, "invalid_value", "session.instructions"),
    ({"temperature": 3}, "invalid_value", "session.temperature"),
    ({"max_output_tokens": 0}, "invalid_value", "session.max_output_tokens"),
    ({"voxserve": {"audio_events": "v2"}}, "invalid_value", "session.voxserve.audio_events"),
    ({"voxserve": {"partial_interval_ms": -1}}, "invalid_value", "session.voxserve.partial_interval_ms"),
    ({"voxserve": "on"}, "invalid_session", "session.voxserve"),
    ({"input_audio_format": "mp3"}, "invalid_format", "session.input_audio_format"),
    ({"output_audio_format": "audio/pcm"}, "invalid_format", "session.output_audio_format"),
    ({"input_sample_rate": 8000}, "invalid_rate", "session.input_sample_rate"),
    ({"turn_detection": {"prefix_padding_ms": 5001}}, "invalid_value", "session.turn_detection.prefix_padding_ms"),
    ({"input_audio_transcription": []}, "invalid_transcription", "session.input_audio_transcription"),
    ({"input_audio_noise_reduction": {"type": "x"}}, "invalid_noise_reduction", "session.input_audio_noise_reduction"),
    ({"voice": 5}, "invalid_value", "session.voice"),
    ({"voice": "joe", "max_response_output_tokens": 5000}, "invalid_value", "session.max_response_output_tokens"),
]


@pytest.mark.parametrize("session", VALID, ids=[str(i) for i in range(len(VALID))])
def test_both_session_kinds_take_the_same_valid_updates(session: dict[str, Any]) -> None:
    got = outcome(transcription, session)
    assert got[0] == "ok", got
    assert outcome(conversation, session) == got


@pytest.mark.parametrize("session, code, param", INVALID, ids=[p for _, _, p in INVALID])
def test_both_session_kinds_refuse_the_same_invalid_updates(session: dict[str, Any], code: str, param: str) -> None:
    got = outcome(transcription, session)
    assert got[:3] == ("error", code, param)
    assert outcome(conversation, session) == got


def test_each_kind_refuses_the_other_kinds_session_type() -> None:
    with pytest.raises(ProtocolError) as info:
        transcription({"type": "realtime"})
    assert (info.value.code, info.value.param) == ("invalid_session_type", "session.type")
    with pytest.raises(ProtocolError) as info:
        conversation({"type": "transcription"})
    assert (info.value.code, info.value.param) == ("invalid_session_type", "session.type")
    with pytest.raises(ProtocolError):
        apply_update(SessionConfig(), update({"type": "realtime"}, "transcription_session.update"))


JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 30_000) | st.floats(allow_nan=True)
                    | st.sampled_from(["audio/pcm", "audio/pcmu", "pcm16", "g711_ulaw", "server_vad", "semantic_vad",
                                       "low", "en", "inf", "near_field", LOGPROBS, ""]),
                    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(
                        ["type", "rate", "format", "language", "prompt", "model", "threshold", "eagerness",
                         "silence_duration_ms", "create_response", "input", "output", "voice"]), inner, max_size=3),
                    max_leaves=10)
KEYS = st.sampled_from(["audio", "instructions", "include", "temperature", "max_output_tokens",
                        "max_response_output_tokens", "voxserve", "voice", "input_audio_format", "input_sample_rate",
                        "output_audio_format", "input_audio_transcription", "turn_detection",
                        "input_audio_noise_reduction"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.dictionaries(KEYS, JSON, max_size=4))
def test_both_session_kinds_agree_on_any_update(session: dict[str, Any]) -> None:
    assert outcome(transcription, session) == outcome(conversation, session)


# -------------------------------------------------------------- where the two parsers used to differ


def test_semantic_vad_eagerness_sets_the_silence_for_transcription_too() -> None:
    c = transcription({"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "low"}}}})
    assert c.turn_detection == TurnDetection(silence_duration_ms=900)


def test_a_partial_update_changes_only_what_it_names() -> None:
    start = SessionConfig(language="de", turn_detection=TurnDetection(0.7, 200, 900))
    c = transcription({"audio": {"input": {"turn_detection": {"silence_duration_ms": 600},
                                           "transcription": {"model": "whisper-base"}}}}, start)
    assert (c.turn_detection, c.language, c.model) == (TurnDetection(0.7, 200, 600), "de", "whisper-base")
    conv = conversation({"turn_detection": {"silence_duration_ms": 600}, "temperature": None},
                        ConversationConfig(turn=TurnConfig(threshold=0.7), temperature=0.9))
    assert conv.turn is not None and (conv.turn.threshold, conv.turn.silence_duration_ms) == (0.7, 600)
    assert conv.temperature == 0.9


def test_a_null_language_means_detect_it_in_both_kinds() -> None:
    session = {"audio": {"input": {"transcription": {"language": None}}}}
    assert transcription(session).language is None
    assert conversation(session).language is None


def test_transcription_sessions_read_beta_fields_of_a_session_update() -> None:
    c = transcription({"input_audio_format": "g711_alaw", "turn_detection": None})
    assert (c.encoding, c.sample_rate, c.turn_detection, c.shape) == ("alaw", 8000, None, "beta")
    assert c.public("s")["input_audio_format"] == "g711_alaw"


def test_conversation_sessions_take_a_pcm_rate_and_check_include() -> None:
    c = conversation({"input_audio_format": "pcm16", "input_sample_rate": 16000, "include": [LOGPROBS]})
    assert (c.in_encoding, c.in_rate, c.out_rate) == ("pcm16", 16000, 24000)
    with pytest.raises(ProtocolError):
        conversation({"include": ["everything"]})


def test_a_conversation_keeps_its_shape_until_an_update_says_otherwise() -> None:
    beta = conversation({"voice": "joe"})
    assert (beta.shape, beta.audio_events) == ("beta", "beta")
    assert conversation({"instructions": "x"}, beta).shape == "beta"
    ga = conversation({"audio": {"output": {"voice": "joe"}}}, beta)
    assert (ga.shape, ga.audio_events) == ("ga", "beta")  # reply audio names change only when asked


def _speakers(value: Any) -> tuple[Any, Any]:
    x = read_update(update({"type": "transcription", "voxserve": {"speakers": value}}), "transcription").voxserve
    return x.speakers, x.known_speakers


def test_known_speakers_are_a_list_of_names_under_speakers() -> None:
    assert _speakers({"known": [" alice", "bob "]}) == (True, ("alice", "bob"))
    assert _speakers({"known": []}) == (True, ())  # labels, no names
    assert _speakers({}) == (True, ())
    assert _speakers(True) == (True, ()) and _speakers(False) == (False, ())  # a flag clears the names
    assert _speakers(None) == (ABSENT, ABSENT)  # not given: the session keeps both
    assert read_update(update({"type": "transcription"}), "transcription").voxserve.known_speakers is ABSENT


@pytest.mark.parametrize("value, param", [
    ({"known": "alice"}, "session.voxserve.speakers.known"),
    ({"known": ["alice", 3]}, "session.voxserve.speakers.known"),
    ({"known": ["alice", "alice"]}, "session.voxserve.speakers.known"),
    ({"known": ["alice", " "]}, "session.voxserve.speakers.known"),
    ({"known": ["x" * 101]}, "session.voxserve.speakers.known"),
    ({"known": [f"p{i}" for i in range(17)]}, "session.voxserve.speakers.known"),
    ({"known": ["alice"], "threshold": 0.5}, "session.voxserve.speakers.threshold"),
    ("alice", "session.voxserve.speakers"),
])
def test_bad_known_speakers_name_the_field(value: Any, param: str) -> None:
    with pytest.raises(ProtocolError) as info:
        _speakers(value)
    assert (info.value.code, info.value.param) == ("invalid_value", param)
