"""Tests of voxserve.audio.ring_buffer.RingBuffer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.audio import OverwrittenError, RingBuffer


def ramp(start: int, n: int) -> np.ndarray:
    """Samples whose value is their absolute index, so every read can be checked exactly."""
    return np.arange(start, start + n, dtype=np.float32)


def test_empty_buffer() -> None:
    buf = RingBuffer(10)

    assert (buf.start_sample, buf.end_sample, len(buf), buf.capacity) == (0, 0, 0, 10)
    assert len(buf.read(0, 0)) == 0


def test_append_and_read_without_wrapping() -> None:
    buf = RingBuffer(10)
    buf.append(ramp(0, 4))
    buf.append(ramp(4, 3))

    assert (buf.start_sample, buf.end_sample, len(buf)) == (0, 7, 7)
    assert buf.read(2, 6).tolist() == [2, 3, 4, 5]


def test_wrapping_keeps_the_latest_samples() -> None:
    buf = RingBuffer(10)
    for start in range(0, 25, 5):
        buf.append(ramp(start, 5))

    assert (buf.start_sample, buf.end_sample, len(buf)) == (15, 25, 10)
    assert buf.read(15, 25).tolist() == list(range(15, 25))
    assert buf.read(18, 22).tolist() == [18, 19, 20, 21]


def test_block_larger_than_capacity() -> None:
    buf = RingBuffer(8)
    buf.append(ramp(0, 3))
    buf.append(ramp(3, 20))

    assert (buf.start_sample, buf.end_sample) == (15, 23)
    assert buf.read(15, 23).tolist() == list(range(15, 23))


def test_reading_overwritten_samples_raises() -> None:
    buf = RingBuffer(10)
    buf.append(ramp(0, 25))

    with pytest.raises(OverwrittenError, match="starts at 15"):
        buf.read(14, 20)
    with pytest.raises(ValueError):  # OverwrittenError is a ValueError
        buf.read(0, 1)


def test_bad_ranges_raise() -> None:
    buf = RingBuffer(10)
    buf.append(ramp(0, 5))

    with pytest.raises(ValueError, match="only 5"):
        buf.read(3, 6)
    with pytest.raises(ValueError, match="reversed"):
        buf.read(4, 3)


def test_start_offset() -> None:
    buf = RingBuffer(4, start_sample=1_000)
    buf.append(ramp(1_000, 3))

    assert (buf.start_sample, buf.end_sample) == (1_000, 1_003)
    assert buf.read(1_001, 1_003).tolist() == [1_001, 1_002]
    with pytest.raises(OverwrittenError):
        buf.read(999, 1_001)


def test_reads_are_copies() -> None:
    buf = RingBuffer(4)
    buf.append(ramp(0, 4))
    view = buf.read(0, 4)
    buf.append(ramp(4, 4))

    assert view.tolist() == [0, 1, 2, 3]


def test_storage_is_never_reallocated() -> None:
    buf = RingBuffer(16)
    storage = buf._data  # noqa: SLF001 - the point of the test
    for start in range(0, 1_000, 7):
        buf.append(ramp(start, 7))

    assert buf._data is storage  # noqa: SLF001


def test_input_is_converted_and_validated() -> None:
    buf = RingBuffer(4)
    buf.append([0.5, 0.25])  # lists and float64 are accepted
    buf.append(np.array([1.0], dtype=np.float64))

    out = buf.read(0, 3)
    assert out.dtype == np.float32 and out.tolist() == [0.5, 0.25, 1.0]
    with pytest.raises(ValueError):
        buf.append(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError):
        RingBuffer(0)
    with pytest.raises(ValueError):
        RingBuffer(4, start_sample=-1)


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(min_value=1, max_value=64),
    blocks=st.lists(st.integers(min_value=0, max_value=100), max_size=20),
    data=st.data(),
)
def test_matches_a_list_model(capacity: int, blocks: list[int], data: st.DataObject) -> None:
    buf = RingBuffer(capacity)
    model: list[float] = []
    for n in blocks:
        buf.append(ramp(len(model), n))
        model.extend(range(len(model), len(model) + n))

        assert buf.end_sample == len(model)
        assert buf.start_sample == max(0, len(model) - capacity)
        start = data.draw(st.integers(buf.start_sample, buf.end_sample))
        end = data.draw(st.integers(start, buf.end_sample))
        assert buf.read(start, end).tolist() == model[start:end]
        if buf.start_sample > 0:
            old = data.draw(st.integers(0, buf.start_sample - 1))
            with pytest.raises(OverwrittenError):
                buf.read(old, buf.end_sample)
