"""The speech endpoint's edge: synthesis chunks at the voice's rate -> bytes at the response's rate, in every
format, with exactly the length the rate change gives (a 22.05 kHz stream labelled 24 kHz plays 8.8 % fast)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import pytest

from voxserve.audio import decode_audio, probe
from voxserve.audio.pcm import float32_to_pcm16
from voxserve.server.http_tts import _encoded
from voxserve.types import SpokenWord

VOICE_RATE = 22050


@dataclass
class Chunk:
    """The part of :class:`~voxserve.types.SynthesisChunk` the encoder reads."""

    audio: np.ndarray
    words: tuple[SpokenWord, ...] = ()

    def pcm16(self) -> bytes:
        return float32_to_pcm16(self.audio)


async def _chunks(audio: np.ndarray, size: int) -> AsyncIterator[Chunk]:
    for i in range(0, len(audio), size):
        yield Chunk(audio[i : i + size])


def _encode(fmt: str, rate: int, audio: np.ndarray) -> tuple[bytes, int]:
    async def run() -> tuple[bytes, int]:
        parts, samples = [], 0
        async for data, n, _words in _encoded(_chunks(audio, 4410), fmt, VOICE_RATE, rate):
            parts.append(data)
            samples += n
        return b"".join(parts), samples

    return asyncio.run(run())


def _tone(seconds: float, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * VOICE_RATE)) / VOICE_RATE
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def _peak_hz(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spectrum) * rate / len(x))


@pytest.mark.parametrize("rate", [24000, 16000, 48000])
def test_pcm_has_the_exact_length_and_pitch_at_the_new_rate(rate: int) -> None:
    audio = _tone(2.0)
    data, samples = _encode("pcm", rate, audio)
    out = np.frombuffer(data, "<i2").astype(np.float32) / 32768
    assert len(out) == samples == math.ceil(len(audio) * rate / VOICE_RATE)
    assert abs(_peak_hz(out, rate) - 440.0) < 2.0  # the same pitch when played at the rate it claims


@pytest.mark.parametrize("fmt", ["wav", "mp3", "flac", "aac", "opus"])
def test_every_container_says_its_rate_and_lasts_as_long(fmt: str) -> None:
    audio = _tone(2.0)
    data, samples = _encode(fmt, 24000, audio)
    assert probe(data).sample_rate == (48000 if fmt == "opus" else 24000)
    seconds = len(decode_audio(data)) / 16000
    assert abs(seconds - 2.0) < 0.08, seconds  # codec padding only (mp3: 64 ms); mislabelled would be 1.84 s
    assert samples == math.ceil(len(audio) * 24000 / VOICE_RATE)


def test_same_rate_passes_through() -> None:
    audio = _tone(1.0)
    data, samples = _encode("pcm", VOICE_RATE, audio)
    assert samples == len(audio) and data == float32_to_pcm16(audio)
