"""The voice activity detector contract (:class:`~voxserve.backends.base.VadModel`), for Silero and FakeVad.

- One float32 probability in [0, 1] per whole frame of the call's audio; a partial tail frame is not scored,
  so empty or sub-frame audio gives no probabilities (streams push chunks of any size).
- A stream is continuous: one call over some audio equals calls over frame-aligned pieces of it; ``reset``
  starts the stream again (the same audio then gives the same probabilities).
- Silence is not speech (every frame below 0.5); speech is (some frame above 0.5).
- Bad input raises InvalidInput and leaves the stream as it was: a NaN or infinite sample (Silero scored
  them as speech), two channels (Silero returned no frames), integer PCM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from contract_support import load_or_skip, seconds

from voxserve.backends.base import VadModel
from voxserve.backends.fakes import FakeVad
from voxserve.errors import InvalidInput


@pytest.fixture(scope="module", params=["silero", "fake"])
def vad(request: pytest.FixtureRequest) -> VadModel:
    if request.param == "fake":
        return FakeVad()
    from voxserve.backends.registry import load_vad

    return load_or_skip(load_vad)


@pytest.fixture
def fresh(vad: VadModel) -> VadModel:
    vad.reset()
    return vad


def test_one_probability_per_whole_frame(fresh: VadModel, speech: dict[str, np.ndarray]) -> None:
    frame = fresh.frame_samples
    assert frame > 0
    audio = speech["ldc"][: 20 * frame + frame // 2]
    probs = fresh.probabilities(audio)
    assert probs.dtype == np.float32 and probs.shape == (20,)
    assert np.all((probs >= 0) & (probs <= 1))


@pytest.mark.parametrize("frames", [0, 0.5, 1, 1.99], ids=["empty", "half", "one", "almost-two"])
def test_frame_boundary(fresh: VadModel, speech: dict[str, np.ndarray], frames: float) -> None:
    probs = fresh.probabilities(speech["ldc"][: int(frames * fresh.frame_samples)])
    assert probs.dtype == np.float32 and probs.shape == (int(frames),)


def test_a_stream_is_continuous(fresh: VadModel, speech: dict[str, np.ndarray]) -> None:
    frame = fresh.frame_samples
    audio = speech["ldc"][: 40 * frame]
    whole = fresh.probabilities(audio)
    fresh.reset()
    cuts = [0, 3, 4, 4, 17, 40]  # frame-aligned pieces, one of them empty
    pieces = [fresh.probabilities(audio[a * frame : b * frame]) for a, b in zip(cuts, cuts[1:])]
    np.testing.assert_allclose(np.concatenate(pieces), whole, atol=1e-6)
    fresh.reset()
    np.testing.assert_allclose(fresh.probabilities(audio), whole, atol=1e-6)


def test_silence_and_speech(fresh: VadModel, speech: dict[str, np.ndarray]) -> None:
    assert fresh.probabilities(np.zeros(seconds(1), np.float32)).max() < 0.5
    fresh.reset()
    assert fresh.probabilities(speech["ldc"]).max() > 0.5


def test_bad_samples_are_refused_and_leave_the_stream(fresh: VadModel, speech: dict[str, np.ndarray],
                                                      spoil: Callable[[np.ndarray], Any]) -> None:
    frame = fresh.frame_samples
    first, second = speech["ldc"][: 10 * frame], speech["ldc"][10 * frame : 20 * frame]
    expected = np.concatenate([fresh.probabilities(first), fresh.probabilities(second)])
    fresh.reset()
    got = [fresh.probabilities(first)]
    with pytest.raises(InvalidInput):
        fresh.probabilities(spoil(second))
    got.append(fresh.probabilities(second))
    np.testing.assert_allclose(np.concatenate(got), expected, atol=1e-6)
