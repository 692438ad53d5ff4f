"""Online speaker labels on synthetic embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from voxserve.streaming.live_speakers import OnlineSpeakers


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
