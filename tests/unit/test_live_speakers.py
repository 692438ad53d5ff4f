"""Online speaker labels and known-speaker names on synthetic embeddings (and a stream with fake models)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from voxserve.backends.fakes import FakeVad
from voxserve.engine.executor import BlockingExecutor
from voxserve.errors import InvalidInput
from voxserve.pipelines.known_speakers import KnownSpeaker
from voxserve.streaming.live_asr import LiveOptions, LiveStream, LiveTranscriber
from voxserve.streaming.live_events import TranscriptCompleted
from voxserve.streaming.live_speakers import KnownVoices, OnlineSpeakers
from voxserve.types import SAMPLE_RATE


def voice(seed: int, noise: float = 0.1, n: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(64)
    return [base + noise * np.random.default_rng(seed * 100 + i).standard_normal(64) * np.linalg.norm(base) / 8
            for i in range(n)]


def test_two_voices_get_two_stable_labels() -> None:
    speakers = OnlineSpeakers(threshold=0.7)
    a, b = voice(1, n=4), voice(2, n=4)
    labels = [speakers.assign(e) for e in [a[0], a[1], b[0], a[2], b[1], b[2], a[3], b[3]]]
    assert labels == ["A", "A", "B", "A", "B", "B", "A", "B"]
    assert speakers.labels == ["A", "B"]


def test_short_utterances_never_create_speakers() -> None:
    speakers = OnlineSpeakers(threshold=0.7)
    assert speakers.assign(voice(3)[0], reliable=False) == "A"
    assert speakers.labels == []
    first = speakers.assign(voice(3)[0])
    assert speakers.assign(voice(4)[0], reliable=False) == first  # closest known, not a new one
    assert speakers.labels == ["A"]


def test_max_speakers_caps_new_labels() -> None:
    speakers = OnlineSpeakers(threshold=0.99, max_speakers=2)
    labels = [speakers.assign(voice(s)[0]) for s in (10, 11, 12, 13)]
    assert set(labels) == {"A", "B"} and labels[:2] == ["A", "B"]


def test_bad_parameters() -> None:
    with pytest.raises(ValueError):
        OnlineSpeakers(threshold=2.0)
    with pytest.raises(ValueError):
        OnlineSpeakers(max_speakers=0)


# ------------------------------------------------------------------------------------ known speakers

ALICE = np.eye(8, dtype=np.float32)[0]


def known(*names: str) -> list[KnownSpeaker]:
    return [KnownSpeaker(n, np.eye(8, dtype=np.float32)[i], "campplus") for i, n in enumerate(names)]


def test_a_name_needs_the_threshold_and_goes_to_the_most_similar_voice() -> None:
    voices = KnownVoices(known("alice", "bob"), threshold=0.67)
    near_alice = np.array([0.8, 0.5, 0, 0, 0, 0, 0, 0.33])  # cosine 0.80 with alice, 0.50 with bob
    assert voices.name(near_alice * 3.0) == "alice"  # the scale of an embedding does not matter
    assert voices.scores(near_alice) == pytest.approx({"alice": 0.80, "bob": 0.50}, abs=0.01)
    weak = np.array([0.6, 0.6, 0.53, 0, 0, 0, 0, 0])  # 0.6 with both: under the threshold, no name
    assert voices.name(weak) is None
    assert voices.name(np.eye(8)[5]) is None
    with pytest.raises(ValueError):
        KnownVoices([], 0.67)
    with pytest.raises(ValueError):
        KnownVoices(known("alice"), 1.5)


def _stream_labels(options: LiveOptions, naming_is_labels: bool = False) -> tuple[list[str | None], list[int]]:
    """Speaker labels of four tones (2.5 s at 300, 500, 700 Hz, then 0.4 s at 300 Hz: 0.85 s with the padding): the label embedder hears
    every tone as one voice, the naming embedder 300 Hz as ALICE, 500 Hz at cosine 0.5 from her, 700 Hz
    apart. Also the lengths (s x 10) of the audio the naming embedder was asked to embed."""
    from tests.unit.test_live_stream import (
        ScriptedAsr,
        dominant_freq,
        phrase_script,
        push_paced,
        run_stream,
        service,
        silence,
        tone,
    )

    naming_calls: list[int] = []
    voices = {300: ALICE, 500: np.array([0.5, 0.866, 0, 0, 0, 0, 0, 0], np.float32), 700: np.eye(8, dtype=np.float32)[2]}

    async def labels_embed(audio: np.ndarray) -> np.ndarray:
        return np.ones(8, np.float32)

    async def naming_embed(audio: np.ndarray) -> np.ndarray:
        naming_calls.append(round(len(audio) / SAMPLE_RATE * 10))
        vector: np.ndarray = voices.get(dominant_freq(audio), np.eye(8, dtype=np.float32)[7])
        return vector

    audio = np.concatenate([silence(0.3), tone(2.5, 300), silence(1.0), tone(2.5, 500), silence(1.0), tone(2.5, 700),
                            silence(1.0), tone(0.4, 300), silence(1.0)])
    async def feed(stream: LiveStream) -> None:
        await push_paced(stream, audio)
        stream.end_input()

    executor = BlockingExecutor()
    with service(ScriptedAsr(script=phrase_script)) as svc:
        try:
            live = LiveTranscriber(svc, FakeVad, executor, naming_embed if naming_is_labels else labels_embed,
                                   None if naming_is_labels else naming_embed)
            events = run_stream(live, options, feed, timeout_s=10)
        finally:
            executor.shutdown()
    return [e.speaker for e in events if isinstance(e, TranscriptCompleted)], naming_calls


def test_a_stream_names_the_utterances_of_a_known_voice_only() -> None:
    options = LiveOptions(partial_interval_ms=0, speakers=True, known_speakers=tuple(known("alice")),
                          naming_threshold=0.67)
    labels, naming_calls = _stream_labels(options)
    # 300 Hz is alice; 500 Hz (0.5) and 700 Hz get letters, joined into one by the label embedder; the 0.4 s tone
    # is under naming_min_s (1 s): never named, never embedded by the naming model
    assert labels == ["alice", "A", "A", "A"]
    assert len(naming_calls) == 3 and all(24 <= n <= 32 for n in naming_calls), naming_calls
    # one model for labels and names: each utterance is embedded once
    same, calls = _stream_labels(options, naming_is_labels=True)
    assert same[0] == "alice" and "alice" not in same[1:] and len(calls) == 4
    # without known speakers, nothing is named and the naming model is not asked
    plain, calls = _stream_labels(replace(options, known_speakers=()))
    assert plain == ["A", "A", "A", "A"] and calls == []


def test_known_speakers_need_a_threshold() -> None:
    options = LiveOptions(partial_interval_ms=0, speakers=True, known_speakers=tuple(known("alice")))
    with pytest.raises(InvalidInput) as err:
        _stream_labels(options)
    assert err.value.param == "known_speaker_names"
