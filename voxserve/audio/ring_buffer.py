"""A fixed-size float32 ring buffer addressed by absolute sample index.

A live stream appends blocks as they arrive; consumers (VAD, the live transcriber) read any range of
the most recent ``capacity`` samples by its position on the stream's timeline. The storage is allocated
once; appending copies into it and never reallocates.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxserve.types import Float32Array

__all__ = ["OverwrittenError", "RingBuffer"]


class OverwrittenError(ValueError):
    """The requested samples were in the buffer once but newer samples have replaced them."""


class RingBuffer:
    """Holds the latest ``capacity`` samples of a stream, addressed by absolute sample index.

    Samples ``[start_sample, end_sample)`` are readable. Not thread-safe: use one writer and readers on the
    same thread (or guard it with a lock).

    Example::

        buf = RingBuffer(30 * 16_000)
        buf.append(block)                     # extends end_sample by len(block)
        window = buf.read(buf.end_sample - 8_000, buf.end_sample)
    """

    def __init__(self, capacity_samples: int, *, start_sample: int = 0) -> None:
        """Allocate the buffer.

        Args:
            capacity_samples: how many of the latest samples are kept.
            start_sample: the absolute index of the first sample that will be appended.

        Raises:
            ValueError: ``capacity_samples`` is not positive or ``start_sample`` is negative.
        """
        if capacity_samples <= 0:
            raise ValueError(f"capacity_samples must be positive, got {capacity_samples}")
        if start_sample < 0:
            raise ValueError(f"start_sample must be >= 0, got {start_sample}")
        self._data = np.zeros(capacity_samples, dtype=np.float32)
        self._first = start_sample  # the index of the first sample ever appended
        self._end = start_sample

    @property
    def capacity(self) -> int:
        """The number of samples the buffer can hold."""
        return len(self._data)

    @property
    def start_sample(self) -> int:
        """Absolute index of the oldest sample still held."""
        return max(self._first, self._end - self.capacity)

    @property
    def end_sample(self) -> int:
        """Absolute index one past the newest sample."""
        return self._end

    def __len__(self) -> int:
        """The number of samples held (at most ``capacity``)."""
        return self._end - self.start_sample

    def append(self, block: npt.ArrayLike) -> None:
        """Append samples at ``end_sample``, overwriting the oldest when full.

        Args:
            block: 1-D float samples (converted to float32). Only the last ``capacity`` samples of a
                block larger than the buffer are stored, but ``end_sample`` advances by its full length.

        Raises:
            ValueError: ``block`` is not one-dimensional.
        """
        x = np.asarray(block, dtype=np.float32)
        if x.ndim != 1:
            raise ValueError(f"expected a 1-D array of samples, got shape {x.shape}")
        n = len(x)
        kept = x[-self.capacity :] if n > self.capacity else x
        self._write(self._end + n - len(kept), kept)
        self._end += n

    def read(self, start_sample: int, end_sample: int) -> Float32Array:
        """Copy the samples ``[start_sample, end_sample)``.

        Args:
            start_sample: absolute index of the first sample wanted.
            end_sample: absolute index one past the last sample wanted.

        Returns:
            A new float32 array of ``end_sample - start_sample`` samples.

        Raises:
            OverwrittenError: ``start_sample`` is older than :attr:`start_sample`.
            ValueError: the range is reversed or reaches past :attr:`end_sample`.
        """
        if start_sample > end_sample:
            raise ValueError(f"reversed range [{start_sample}, {end_sample})")
        if end_sample > self._end:
            raise ValueError(f"samples up to {end_sample} requested but only {self._end} have been appended")
        if start_sample < self.start_sample:
            raise OverwrittenError(
                f"samples from {start_sample} requested but the buffer now starts at {self.start_sample}"
            )
        first = start_sample % self.capacity
        count = end_sample - start_sample
        if first + count <= self.capacity:
            return self._data[first : first + count].copy()
        return np.concatenate((self._data[first:], self._data[: first + count - self.capacity]))

    def _write(self, start_sample: int, x: Float32Array) -> None:
        first = start_sample % self.capacity
        head = min(len(x), self.capacity - first)
        self._data[first : first + head] = x[:head]
        self._data[: len(x) - head] = x[head:]
