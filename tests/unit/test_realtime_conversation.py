"""session.update of the conversation socket: GA and beta shapes, clear errors for every malformed field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.server.realtime_conversation import ConversationConfig, apply_conversation_update
from voxserve.server.realtime_protocol import ProtocolError


def update(session: Any) -> ConversationConfig:
    return apply_conversation_update(ConversationConfig(), {"type": "session.update", "session": session})


def test_ga_shape() -> None:
    c = update({"type": "realtime", "instructions": "Be brief.",
                "audio": {"input": {"format": {"type": "audio/pcmu"}, "turn_detection": {"silence_duration_ms": 800}},
                          "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "joe"}}})
    assert (c.instructions, c.voice, c.in_encoding, c.in_rate, c.shape) == ("Be brief.", "joe", "ulaw", 8000, "ga")
    assert c.turn is not None and c.turn.silence_duration_ms == 800


def test_beta_shape() -> None:
    c = update({"voice": "joe", "input_audio_format": "g711_alaw", "turn_detection": None})
    assert (c.shape, c.audio_events, c.in_encoding, c.turn) == ("beta", "beta", "alaw", None)


@pytest.mark.parametrize("session, param", [
    ({"audio": {"output": [[]]}}, "session.audio.output"),
    ({"audio": {"input": "pcm16"}}, "session.audio.input"),
    ({"audio": [1]}, "session.audio"),
    ({"type": "transcription"}, "session.type"),
    ({"instructions": 5}, "session.instructions"),
    ({"audio": {"input": {"turn_detection": {"type": "push"}}}}, "session.audio.input.turn_detection"),
])
def test_malformed_fields_are_protocol_errors(session: dict[str, Any], param: str) -> None:
    with pytest.raises(ProtocolError) as info:
        update(session)
    assert info.value.param == param


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
KEYS = st.sampled_from(["type", "instructions", "audio", "voice", "input_audio_format", "output_audio_format",
                        "turn_detection", "input_audio_transcription", "max_output_tokens", "temperature", "voxserve"])
AUDIO = st.fixed_dictionaries({}, optional={"input": JSON | st.fixed_dictionaries({}, optional={
    "format": JSON, "transcription": JSON, "turn_detection": JSON}), "output": JSON | st.fixed_dictionaries(
    {}, optional={"format": JSON, "voice": JSON})})


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.dictionaries(KEYS, JSON, max_size=5) | st.builds(lambda a, rest: {"audio": a, **rest}, AUDIO,
                                                           st.dictionaries(KEYS, JSON, max_size=3)))
def test_any_session_object_is_a_config_or_a_protocol_error(session: dict[str, Any]) -> None:
    try:
        update(session)
    except ProtocolError:
        pass
