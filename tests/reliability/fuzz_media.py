"""Seed media for fuzzing the decoder: small valid files in several containers, and mutations of them that
target the fields decoders trust (sizes, sample rates, channel counts, frame headers)."""

from __future__ import annotations

import io
import struct
from functools import lru_cache

import av
import numpy as np

from voxserve.audio.encode import encode_audio

RATE = 16_000


def _tone(seconds: float = 0.3, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def _encode(container: str, codec: str, rate: int, channels: int, seconds: float = 0.3) -> bytes:
    buffer = io.BytesIO()
    layout = "mono" if channels == 1 else "stereo"
    with av.open(buffer, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate)
        stream.layout = layout  # type: ignore[union-attr]
        pcm = (np.tile(_tone(seconds, rate), (channels, 1)) * 32767).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1, order="F"), format="s16", layout=layout)
        frame.sample_rate = rate
        fmt = stream.codec_context.format.name  # type: ignore[union-attr]
        resampler = av.AudioResampler(format=fmt, layout=layout, rate=rate)
        for resampled in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(resampled):  # type: ignore[union-attr]
                out.mux(packet)
        for packet in stream.encode(None):  # type: ignore[union-attr]
            out.mux(packet)
    return buffer.getvalue()


@lru_cache(maxsize=1)
def seeds() -> dict[str, bytes]:
    """Small valid files: WAV, FLAC, MP3, Ogg/Opus, Ogg/Vorbis when available, stereo WAV and AIFF."""
    out = {name: encode_audio(_tone(), RATE, name) for name in ("wav", "flac", "mp3", "opus")}
    extra = {"vorbis": ("ogg", "libvorbis", 44100, 2), "stereo_wav": ("wav", "pcm_s16le", 8000, 2),
             "aiff": ("aiff", "pcm_s16be", 22050, 1), "m4a": ("ipod", "aac", 24000, 1)}
    for name, (container, codec, rate, channels) in extra.items():
        if codec in av.codecs_available:
            try:
                out[name] = _encode(container, codec, rate, channels)
            except Exception:  # noqa: BLE001 - an encoder this FFmpeg build lacks
                continue
    return out


def wav_header(rate: int, channels: int, bits: int, tag: int = 1, data_len: int = 1000, riff_len: int | None = None,
               byte_rate: int | None = None, block_align: int | None = None) -> bytes:
    """A RIFF/WAVE header with any (possibly absurd) field values, all modulo their field width."""
    block = block_align if block_align is not None else channels * bits // 8
    rate_b = byte_rate if byte_rate is not None else rate * block
    fmt = struct.pack("<HHIIHH", tag & 0xFFFF, channels & 0xFFFF, rate & 0xFFFFFFFF, rate_b & 0xFFFFFFFF,
                      block & 0xFFFF, bits & 0xFFFF)
    riff = riff_len if riff_len is not None else 36 + data_len
    return (b"RIFF" + struct.pack("<I", riff & 0xFFFFFFFF) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
            + b"data" + struct.pack("<I", data_len & 0xFFFFFFFF))


def flac_with_streaminfo(rate: int, channels: int, bits: int, total_samples: int) -> bytes:
    """The FLAC seed with its STREAMINFO rate / channels / bits / total samples replaced (bit-packed fields)."""
    data = bytearray(seeds()["flac"])
    # fLaC, block header (4 bytes), then STREAMINFO: 2+2+3+3 bytes, then 20 bits rate, 3 channels-1, 5 bps-1, 36 total
    at = 4 + 4 + 10
    packed = ((rate & 0xFFFFF) << 44) | (((channels - 1) & 0x7) << 41) | (((bits - 1) & 0x1F) << 36) | (
        total_samples & 0xFFFFFFFFF)
    data[at : at + 8] = packed.to_bytes(8, "big")
    return bytes(data)


def mp3_header_mutation(data: bytes, value: int) -> bytes:
    """The MP3 seed with the bitrate / rate / mode bits of every frame header set to ``value``'s bits."""
    out = bytearray(data)
    i = 0
    while i < len(out) - 4:
        if out[i] == 0xFF and out[i + 1] & 0xE0 == 0xE0:
            out[i + 2] = value & 0xFF
            out[i + 3] = (value >> 8) & 0xFF
            i += 4
        else:
            i += 1
    return bytes(out)


def ogg_page_mutation(data: bytes, field: str, value: int) -> bytes:
    """The Ogg seed with one field of every page header set: granule, serial, sequence or segment count."""
    out = bytearray(data)
    offsets = {"granule": (6, 8), "serial": (14, 4), "sequence": (18, 4), "segments": (26, 1)}
    at, width = offsets[field]
    i = out.find(b"OggS")
    while i >= 0 and i + 27 <= len(out):
        out[i + at : i + at + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        i = out.find(b"OggS", i + 4)
    return bytes(out)
