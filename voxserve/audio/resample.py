"""Sample-rate conversion of mono float32 signals, one-shot or block by block for live streams.

All use FFmpeg's libswresample through PyAV, so a stream resampled block by block is identical to the
whole signal resampled at once, whatever the block sizes. :class:`FrameResampler` also mixes decoded
PyAV frames of any sample format and channel layout down to mono; :class:`ChannelResampler` keeps the
channels apart (calls recorded with one speaker a channel).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from av.audio.frame import AudioFrame
from av.audio.resampler import AudioResampler

from voxserve.types import Float32Array

__all__ = ["ChannelResampler", "FrameResampler", "StreamResampler", "resample"]

_ONE_SHOT_BLOCK = 1 << 20  # the one-shot function feeds long signals in blocks of this many samples


def _as_mono_float32(block: npt.ArrayLike) -> Float32Array:
    x = np.asarray(block, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D array of samples, got shape {x.shape}")
    return x


def _check_rate(name: str, rate: int) -> int:
    if not isinstance(rate, int) or isinstance(rate, bool) or rate <= 0:
        raise ValueError(f"{name} must be a positive int, got {rate!r}")
    return rate


class StreamResampler:
    """Resamples a live mono stream block by block.

    Each :meth:`push` returns the output available so far (the filter holds back a few dozen samples,
    so it may return fewer samples than the rate ratio suggests); :meth:`flush` returns the rest. The
    concatenated outputs equal :func:`resample` of the concatenated inputs and hold exactly
    ``ceil(n * to_rate / from_rate)`` samples for ``n`` input samples: the output sample times that fall
    inside the input. After :meth:`flush` the object is ready for a new, independent stream.

    Example::

        r = StreamResampler(48_000, 16_000)
        out = [r.push(block) for block in blocks] + [r.flush()]
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        """Create a resampler.

        Args:
            from_rate: input sample rate in Hz.
            to_rate: output sample rate in Hz.

        Raises:
            ValueError: a rate is not a positive int.
        """
        self.from_rate = _check_rate("from_rate", from_rate)
        self.to_rate = _check_rate("to_rate", to_rate)
        self._resampler: AudioResampler | None = None
        self._samples_in = 0
        self._samples_out = 0

    def push(self, block: npt.ArrayLike) -> Float32Array:
        """Resample the next block of the stream.

        Args:
            block: 1-D float samples at ``from_rate`` (converted to float32); may be empty.

        Returns:
            A new 1-D float32 array at ``to_rate``, possibly empty.

        Raises:
            ValueError: ``block`` is not one-dimensional.
        """
        x = _as_mono_float32(block)
        if self.from_rate == self.to_rate:
            return x.copy()
        self._samples_in += len(x)
        out = self._convert(x)
        self._samples_out += len(out)
        return out

    def flush(self) -> Float32Array:
        """Return the samples still held by the filter and reset for a new stream.

        Returns:
            A new 1-D float32 array at ``to_rate``, possibly empty.
        """
        if self._resampler is None:
            return np.zeros(0, dtype=np.float32)
        # libswresample drops the tail of very short inputs on flush; trailing silence pushes it out,
        # and the output past the input's end is cut off.
        padding = self._convert(np.zeros(self._padding_samples(), dtype=np.float32))
        tail = np.concatenate([padding, _join(self._resampler.resample(None))])
        expected = -(-self._samples_in * self.to_rate // self.from_rate)  # ceil
        tail = tail[: max(0, expected - self._samples_out)]
        self._resampler, self._samples_in, self._samples_out = None, 0, 0
        return tail

    def _padding_samples(self) -> int:
        return 256 * max(1, -(-self.from_rate // self.to_rate))

    def _convert(self, x: Float32Array) -> Float32Array:
        if not len(x):
            return np.zeros(0, dtype=np.float32)
        if self._resampler is None:
            self._resampler = AudioResampler("flt", "mono", self.to_rate)
        frame = AudioFrame.from_ndarray(np.ascontiguousarray(x).reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = self.from_rate
        return _join(self._resampler.resample(frame))


def _join(frames: list[AudioFrame]) -> Float32Array:
    # A passthrough AudioResampler answers a flush with [None].
    parts = [f.to_ndarray().reshape(-1) for f in frames if f is not None]
    if not parts:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(parts).astype(np.float32, copy=False)


def resample(samples: npt.ArrayLike, from_rate: int, to_rate: int) -> Float32Array:
    """Resample a whole mono signal.

    The output holds ``ceil(len(samples) * to_rate / from_rate)`` samples.

    Args:
        samples: 1-D float samples at ``from_rate``.
        from_rate: input sample rate in Hz.
        to_rate: output sample rate in Hz.

    Returns:
        A new 1-D float32 array at ``to_rate``.

    Raises:
        ValueError: a rate is not a positive int or ``samples`` is not one-dimensional.
    """
    x = _as_mono_float32(samples)
    stream = StreamResampler(from_rate, to_rate)
    parts = [stream.push(x[i : i + _ONE_SHOT_BLOCK]) for i in range(0, len(x), _ONE_SHOT_BLOCK)]
    parts.append(stream.flush())
    return np.concatenate(parts)


class FrameResampler:
    """Converts decoded PyAV audio frames to mono float32 at one rate.

    Channels are averaged (stereo -> ``(L + R) / 2``; other layouts use FFmpeg's downmix matrix, scaled so
    the gains sum to 1). The frames' format, layout and rate may change mid-stream. Stage one mixes down
    at the frame's own rate (no filter delay); stage two is a :class:`StreamResampler`, so :meth:`flush`
    returns every tail sample.
    """

    def __init__(self, sample_rate: int) -> None:
        """Create a converter.

        Args:
            sample_rate: the output rate in Hz.
        """
        self._rate = _check_rate("sample_rate", sample_rate)
        self._mixer: AudioResampler | None = None
        self._key: tuple[str, str, int] | None = None
        self._stream: StreamResampler | None = None

    def push(self, frame: AudioFrame) -> list[Float32Array]:
        """Convert one frame.

        Args:
            frame: a decoded audio frame.

        Returns:
            Non-empty 1-D float32 arrays (possibly none) in stream order.
        """
        key = (frame.format.name, frame.layout.name, frame.sample_rate)
        out: list[Float32Array] = []
        if key != self._key:
            out = self.flush()
            self._mixer = AudioResampler("flt", "mono", frame.sample_rate, options={"rematrix_maxval": "1"})
            self._stream = StreamResampler(frame.sample_rate, self._rate)
            self._key = key
        assert self._mixer is not None
        return out + self._resample(self._mixer.resample(frame))

    def flush(self) -> list[Float32Array]:
        """Return the samples still held back and reset for a new stream.

        Returns:
            Non-empty 1-D float32 arrays (possibly none).
        """
        if self._mixer is None or self._stream is None:
            return []
        out = [*self._resample(self._mixer.resample(None)), self._stream.flush()]
        self._mixer, self._stream, self._key = None, None, None
        return [part for part in out if len(part)]

    def _resample(self, frames: list[AudioFrame]) -> list[Float32Array]:
        assert self._stream is not None
        mono = (f.to_ndarray().reshape(-1) for f in frames if f is not None)  # a passthrough flush gives [None]
        return [part for part in map(self._stream.push, mono) if len(part)]


class ChannelResampler:
    """Converts decoded PyAV audio frames to float32 at one rate, channel by channel: blocks of shape
    (samples, channels), each channel resampled as :class:`StreamResampler` does a mono stream.

    The frames' format and rate may change mid-stream; their channel count may not.
    """

    def __init__(self, sample_rate: int) -> None:
        """Create a converter.

        Args:
            sample_rate: the output rate in Hz.
        """
        self._rate = _check_rate("sample_rate", sample_rate)
        self._planar: AudioResampler | None = None
        self._key: tuple[str, str, int] | None = None
        self._streams: list[StreamResampler] = []
        self.channels: int | None = None
        """The stream's channel count, once a frame has been seen."""

    def push(self, frame: AudioFrame) -> list[Float32Array]:
        """Convert one frame.

        Args:
            frame: a decoded audio frame.

        Returns:
            Non-empty (samples, channels) float32 arrays (possibly none) in stream order.

        Raises:
            ValueError: the frame's channel count differs from the earlier frames'.
        """
        key = (frame.format.name, frame.layout.name, frame.sample_rate)
        out: list[Float32Array] = []
        if key != self._key:
            channels = frame.layout.nb_channels
            if self.channels is not None and channels != self.channels:
                raise ValueError(f"the channel count changes mid-stream ({self.channels} -> {channels})")
            out = self.flush()
            self.channels = channels
            self._planar = AudioResampler("fltp", frame.layout.name, frame.sample_rate)  # sample format only
            self._streams = [StreamResampler(frame.sample_rate, self._rate) for _ in range(channels)]
            self._key = key
        assert self._planar is not None
        return out + self._resample(self._planar.resample(frame))

    def flush(self) -> list[Float32Array]:
        """Return the samples still held back and reset for a new stream (the channel count stays).

        Returns:
            Non-empty (samples, channels) float32 arrays (possibly none).
        """
        if self._planar is None:
            return []
        out = self._resample(self._planar.resample(None))
        tail = np.stack([s.flush() for s in self._streams], axis=1)
        self._planar, self._key, self._streams = None, None, []
        return [part for part in [*out, tail] if len(part)]

    def _resample(self, frames: list[AudioFrame]) -> list[Float32Array]:
        planes = (f.to_ndarray() for f in frames if f is not None)  # (channels, samples) each
        out = (np.stack([s.push(plane[c]) for c, s in enumerate(self._streams)], axis=1) for plane in planes)
        return [part for part in out if len(part)]
