"""Tests of voxserve.audio.resample: one-shot and streaming sample-rate conversion."""

from __future__ import annotations

import math

import av
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.audio import FrameResampler, StreamResampler, resample

RATE_PAIRS = [(48_000, 16_000), (44_100, 16_000), (8_000, 16_000), (16_000, 48_000), (22_050, 16_000)]


def chirp(rate: int, dur_s: float = 1.0, f0: float = 100.0, f1: float = 3_000.0) -> np.ndarray:
    t = np.arange(round(rate * dur_s)) / rate
    k = (f1 - f0) / dur_s
    return (0.5 * np.sin(2 * np.pi * (f0 * t + 0.5 * k * t * t))).astype(np.float32)


def tone(rate: int, hz: float, dur_s: float = 1.0) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * hz * np.arange(round(rate * dur_s)) / rate)).astype(np.float32)


@pytest.mark.parametrize(("src", "dst"), RATE_PAIRS)
def test_resampled_chirp_matches_the_chirp_sampled_at_the_target_rate(src: int, dst: int) -> None:
    y = resample(chirp(src), src, dst)

    expected = chirp(dst)
    assert abs(len(y) - len(expected)) <= 1
    n = min(len(y), len(expected))
    # Aligned (no filter delay left in the output) and accurate away from the edges.
    assert np.max(np.abs(y[200 : n - 200] - expected[200 : n - 200])) < 1e-3


@pytest.mark.parametrize(("src", "dst"), [*RATE_PAIRS, (96_000, 8_000), (16_000, 8_000)])
def test_output_length_is_exact_even_for_tiny_inputs(src: int, dst: int) -> None:
    # One output sample per output instant inside the input: ceil(n * dst / src). libswresample alone
    # returns nothing at all for inputs shorter than its filter.
    for n in [*range(1, 200), 1_000, 12_345]:
        assert len(resample(np.ones(n, np.float32), src, dst)) == math.ceil(n * dst / src), n


def test_short_input_keeps_its_level() -> None:
    y = resample(np.full(40, 0.5, np.float32), 8_000, 16_000)
    assert len(y) == 80
    assert np.allclose(y[10:-10], 0.5, atol=0.02)


def test_frequencies_above_the_new_nyquist_are_removed() -> None:
    y = resample(tone(48_000, 10_000), 48_000, 16_000)  # would alias to 6 kHz
    assert np.sqrt(np.mean(y[200:-200] ** 2)) < 1e-3
    passed = resample(tone(48_000, 3_000), 48_000, 16_000)
    assert np.sqrt(np.mean(passed[200:-200] ** 2)) == pytest.approx(0.5 / math.sqrt(2), rel=0.01)


def test_same_rate_is_an_exact_copy() -> None:
    x = chirp(16_000)
    y = resample(x, 16_000, 16_000)
    assert np.array_equal(x, y) and y is not x


def test_empty_input() -> None:
    assert len(resample(np.zeros(0, np.float32), 48_000, 16_000)) == 0
    stream = StreamResampler(48_000, 16_000)
    assert len(stream.push(np.zeros(0, np.float32))) == 0
    assert len(stream.flush()) == 0


def test_float64_input_is_accepted() -> None:
    y = resample(chirp(48_000).astype(np.float64), 48_000, 16_000)
    assert y.dtype == np.float32 and len(y) == 16_000


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        StreamResampler(0, 16_000)
    with pytest.raises(ValueError):
        StreamResampler(16_000, -1)
    with pytest.raises(ValueError):
        resample(np.zeros((2, 10), np.float32), 16_000, 8_000)


def _stream(x: np.ndarray, cuts: list[int], src: int, dst: int) -> np.ndarray:
    stream = StreamResampler(src, dst)
    blocks = np.split(x, sorted(cuts))
    return np.concatenate([stream.push(b) for b in blocks] + [stream.flush()])


@settings(max_examples=40, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=24_000), max_size=30),
    pair=st.sampled_from(RATE_PAIRS),
)
def test_streaming_equals_one_shot_for_any_block_sizes(cuts: list[int], pair: tuple[int, int]) -> None:
    src, dst = pair
    x = chirp(src, 0.5)
    cuts = [min(c, len(x)) for c in cuts]

    streamed = _stream(x, cuts, src, dst)

    np.testing.assert_allclose(streamed, resample(x, src, dst), atol=1e-6)


def test_tiny_blocks() -> None:
    x = chirp(48_000, 0.1)
    streamed = _stream(x, list(range(1, len(x), 3)), 48_000, 16_000)
    np.testing.assert_allclose(streamed, resample(x, 48_000, 16_000), atol=1e-6)


def test_flush_returns_the_tail_and_resets() -> None:
    x = chirp(48_000, 0.5)
    stream = StreamResampler(48_000, 16_000)

    head = stream.push(x)
    tail = stream.flush()
    again = np.concatenate([stream.push(x), stream.flush()])

    assert len(tail) > 0  # the filter holds samples back until the flush
    assert len(head) + len(tail) == 8_000
    np.testing.assert_array_equal(again, np.concatenate([head, tail]))


def _frame(planes: list[np.ndarray], layout: str, rate: int) -> av.AudioFrame:
    frame = av.AudioFrame.from_ndarray(np.stack(planes).astype(np.float32), format="fltp", layout=layout)
    frame.sample_rate = rate
    return frame


def test_frame_resampler_averages_stereo() -> None:
    x = tone(16_000, 440.0, 0.1)
    conv = FrameResampler(16_000)

    out = np.concatenate(conv.push(_frame([x, np.zeros_like(x)], "stereo", 16_000)) + conv.flush())

    np.testing.assert_allclose(out, x / 2, atol=1e-6)


def test_frame_resampler_handles_interleaved_int16() -> None:
    both = np.full((1, 200), 16384, dtype=np.int16)  # L and R interleaved, both 0.5
    frame = av.AudioFrame.from_ndarray(both, format="s16", layout="stereo")
    frame.sample_rate = 8_000
    conv = FrameResampler(16_000)

    out = np.concatenate(conv.push(frame) + conv.flush())

    assert len(out) == 200
    np.testing.assert_allclose(out[20:-20], 0.5, atol=0.01)


def test_frame_resampler_survives_format_and_rate_changes() -> None:
    first = tone(44_100, 440.0, 0.5)
    second = tone(48_000, 440.0, 0.5)
    conv = FrameResampler(16_000)

    out = conv.push(_frame([first, first], "stereo", 44_100))
    out += conv.push(_frame([second], "mono", 48_000))
    out += conv.flush()
    y = np.concatenate(out)

    assert len(y) == 16_000  # 8000 + 8000: each segment is flushed, nothing is lost at the switch
    np.testing.assert_allclose(y[200:7800], tone(16_000, 440.0, 0.5)[200:7800], atol=1e-3)
    assert conv.flush() == []
