"""Encode mono audio block by block (wav, pcm, flac, mp3, opus, aac), returning bytes as soon as they exist.

For responses that stream while synthesis runs: ``wav`` is a header whose sizes say "unknown length"
(0xFFFFFFFF, as streaming servers send it) followed by 16-bit PCM; ``pcm`` is raw 16-bit little-endian;
``flac``, ``mp3``, ``aac`` (ADTS frames, decodable from any frame on) and ``opus`` (in Ogg, pages of 60 ms) go
through PyAV into a non-seekable sink that is
drained after every block.
"""

from __future__ import annotations

import io
import struct

import av
import numpy as np
import numpy.typing as npt

from voxserve.audio.pcm import float32_to_pcm16
from voxserve.errors import InvalidInput

STREAM_FORMATS = ("wav", "pcm", "flac", "mp3", "opus", "aac")
CONTENT_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac", "mp3": "audio/mpeg", "opus": "audio/ogg",
                 "aac": "audio/aac"}
_CODECS = {"flac": ("flac", "flac", None), "mp3": ("mp3", "libmp3lame", None), "opus": ("ogg", "libopus", 48000),
           "aac": ("adts", "aac", None)}
_MP3_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)


class _Sink(io.RawIOBase):
    """A write-only, non-seekable file that keeps what was written until taken."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


def wav_stream_header(sample_rate: int) -> bytes:
    """A 44-byte mono 16-bit WAV header for a stream of unknown length."""
    byte_rate = sample_rate * 2
    return (b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate,
            byte_rate, 2, 16) + b"data" + struct.pack("<I", 0xFFFFFFFF))


class StreamEncoder:
    """Encodes one stream of mono samples (float32 in [-1, 1] or int16) into ``fmt``.

    Example::

        enc = StreamEncoder("mp3", 22050)
        for chunk in chunks:
            send(enc.push(chunk.audio))
        send(enc.finish())
    """

    def __init__(self, fmt: str, sample_rate: int) -> None:
        if fmt not in STREAM_FORMATS:
            raise InvalidInput(f"unsupported audio format {fmt!r}; choose one of {', '.join(STREAM_FORMATS)}",
                               param="response_format")
        self.format = fmt
        self.sample_rate = sample_rate
        self.content_type = CONTENT_TYPES[fmt]
        self._started = False
        self._finished = False
        self._sink: _Sink | None = None
        if fmt in _CODECS:
            container, codec, fixed_rate = _CODECS[fmt]
            rate = fixed_rate or (sample_rate if fmt != "mp3" or sample_rate in _MP3_RATES else 48000)
            self._sink = _Sink()
            options = {"page_duration": "60000"} if container == "ogg" else {}
            self._out = av.open(self._sink, "w", format=container, options=options)
            stream = self._out.add_stream(codec, rate=rate)
            assert isinstance(stream, av.AudioStream)
            stream.layout = "mono"
            self._stream = stream
            formats = stream.codec_context.codec.audio_formats
            sample_format = formats[0].name if formats else "s16"
            self._resampler = av.AudioResampler(format=sample_format, layout="mono", rate=rate)

    def push(self, samples: npt.NDArray[np.float32] | npt.NDArray[np.int16]) -> bytes:
        """Encode a block; returns the bytes that are ready (possibly none)."""
        if self._finished:
            raise RuntimeError("push after finish")
        pcm = samples.astype("<i2").tobytes() if samples.dtype == np.int16 else float32_to_pcm16(samples)
        head = b""
        if not self._started:
            self._started = True
            head = wav_stream_header(self.sample_rate) if self.format == "wav" else b""
        if self._sink is None:
            return head + pcm
        if pcm:
            frame = av.AudioFrame.from_ndarray(np.frombuffer(pcm, dtype="<i2").reshape(1, -1), format="s16",
                                               layout="mono")
            frame.sample_rate = self.sample_rate
            self._encode(self._resampler.resample(frame))
        return head + self._sink.take()

    def finish(self) -> bytes:
        """Flush the encoder and return the last bytes (a stream with no samples is still a valid file)."""
        if self._finished:
            return b""
        data = self.push(np.zeros(0, dtype=np.int16)) if not self._started else b""
        self._finished = True
        if self._sink is None:
            return data
        self._encode(self._resampler.resample(None))
        for packet in self._stream.encode(None):
            self._out.mux(packet)
        self._out.close()
        return data + self._sink.take()

    def _encode(self, frames: list[av.AudioFrame]) -> None:
        for frame in frames:
            for packet in self._stream.encode(frame):
                self._out.mux(packet)
