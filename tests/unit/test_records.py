"""Job results are stored as lossless records: every field of a transcript comes back as it was."""

from __future__ import annotations

import json

import pytest

from voxserve.records import from_record, to_record
from voxserve.types import (
    AttemptReport,
    ChunkReport,
    Diarization,
    DiarizationStats,
    Segment,
    SpeakerTurn,
    TokenLogprob,
    Transcript,
    TranscriptStats,
    Word,
)


def _transcript() -> Transcript:
    word = Word("Hello", 1600, 8000, 0.9, "A", (TokenLogprob(" Hel", -0.25, b" Hel"), TokenLogprob("lo", -0.5, b"\xe2\x80")))
    segment = Segment(0, 1600, 16000, "Hello", (word,), (50364, 2425), 0.0, -0.3, 1.2, 0.01, "A")
    tries = (AttemptReport("", 0, 16000, 5.0, 1, 0.0, 1.0, "en", False, ("repetition",), -0.9, 2.6, 0.1, 9),
             AttemptReport("", 0, 16000, 30.0, 5, 0.0, 1.0, "en", True, (), -0.3, 1.2, 0.01, 3, accepted=True))
    report = ChunkReport(0, 0, 16000, 12345, 2, 0.0, False, True, ("repetition",), tries)
    stats = TranscriptStats(0.5, 1, 1, 0, 0, 0.77, (report,))
    diarization = Diarization((SpeakerTurn(1600, 16000, "A"),), ("A",), 16000,
                              DiarizationStats(0.2, (("decode", 0.1), ("segmentation", 0.1)), 3, 1))
    return Transcript("Hello", "en", 16000, (segment,), 0.98, "translate", stats, diarization)


def test_a_transcript_survives_json_whole() -> None:
    t = _transcript()
    back = from_record(Transcript, json.loads(json.dumps(to_record(t))))
    assert back == t
    assert back.stats.chunk_reports[0].speech_samples == 12345  # the verbose_json round trip lost this
    assert back.stats.chunk_reports[0].history[1].accepted and back.stats.chunk_reports[0].history[0].reasons
    assert back.segments[0].words[0].logprobs[1].raw == b"\xe2\x80"
    assert isinstance(back.segments[0].tokens, tuple) and back.diarization is not None


def test_a_record_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(TypeError):
        from_record(Transcript, ["not", "an", "object"])
    with pytest.raises(TypeError):
        to_record(object())
