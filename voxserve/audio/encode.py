"""Encode float32 mono audio to a container/codec in memory (wav, flac, mp3, opus, pcm) with PyAV."""

from __future__ import annotations

import io

import av
import numpy as np

from voxserve.audio.pcm import float32_to_pcm16
from voxserve.errors import InvalidInput
from voxserve.types import Float32Array

# format -> (container, codec, sample format, rates the encoder accepts or None for any)
_CODECS: dict[str, tuple[str, str, str, tuple[int, ...] | None]] = {
    "wav": ("wav", "pcm_s16le", "s16", None),
    "flac": ("flac", "flac", "s16", None),
    "mp3": ("mp3", "libmp3lame", "s16p", (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)),
    "opus": ("ogg", "libopus", "s16", (48000,)),
}
ENCODINGS = ("wav", "flac", "mp3", "opus", "pcm")


def encode_audio(samples: Float32Array, sample_rate: int, fmt: str) -> bytes:
    """Encode mono float32 samples in [-1, 1]; ``pcm`` is raw little-endian 16-bit."""
    raw = float32_to_pcm16(samples)
    if fmt == "pcm":
        return raw
    pcm = np.frombuffer(raw, dtype="<i2")
    if fmt not in _CODECS:
        raise InvalidInput(f"unsupported audio format {fmt!r}; choose one of {', '.join(ENCODINGS)}", param="response_format")
    container, codec, sample_fmt, rates = _CODECS[fmt]
    out_rate = sample_rate if rates is None or sample_rate in rates else rates[-1]
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container) as out:
        stream = out.add_stream(codec, rate=out_rate)
        assert isinstance(stream, av.AudioStream)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = sample_rate
        resampler = av.AudioResampler(format=sample_fmt, layout="mono", rate=out_rate)
        for resampled in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(resampled):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()
