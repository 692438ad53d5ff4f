"""Tests of voxserve.audio.pcm: PCM16 and G.711 conversion, RMS and dBFS."""

from __future__ import annotations

import math

import av
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voxserve.audio import (
    dbfs,
    float32_to_pcm16,
    g711_alaw_to_float32,
    g711_ulaw_to_float32,
    pcm16_to_float32,
    rms,
)
from voxserve.errors import InvalidInput


def test_pcm16_known_values() -> None:
    data = np.array([0, 1, -1, 16384, -16384, 32767, -32768], dtype="<i2").tobytes()

    x = pcm16_to_float32(data)

    assert x.dtype == np.float32
    assert x.tolist() == [0.0, 1 / 32768, -1 / 32768, 0.5, -0.5, 32767 / 32768, -1.0]


def test_pcm16_is_little_endian() -> None:
    assert pcm16_to_float32(b"\x00\x40").tolist() == [0.5]


def test_pcm16_accepts_bytearray_and_memoryview() -> None:
    data = np.array([100, -200], dtype="<i2").tobytes()

    assert np.array_equal(pcm16_to_float32(bytearray(data)), pcm16_to_float32(data))
    assert np.array_equal(pcm16_to_float32(memoryview(data)), pcm16_to_float32(data))
    assert len(pcm16_to_float32(b"")) == 0


def test_pcm16_result_is_writable() -> None:
    x = pcm16_to_float32(b"\x00\x40\x00\x40")
    x[0] = 0.0  # not a read-only view of the bytes
    assert x.tolist() == [0.0, 0.5]


def test_odd_pcm16_length_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as info:
        pcm16_to_float32(b"\x00\x01\x02")
    assert info.value.code == "invalid_pcm"
    assert "3" in info.value.message


def test_float_to_pcm16_clips_and_rounds() -> None:
    out = np.frombuffer(float32_to_pcm16(np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0, 1e-5, np.nan])), "<i2")

    assert out.tolist() == [0, 16384, -16384, 32767, -32768, 32767, -32768, 0, 0]


def test_float_to_pcm16_rejects_2d() -> None:
    with pytest.raises(ValueError):
        float32_to_pcm16(np.zeros((2, 4), np.float32))


@given(st.binary(max_size=512).filter(lambda b: len(b) % 2 == 0))
def test_pcm16_bytes_round_trip_exactly(data: bytes) -> None:
    assert float32_to_pcm16(pcm16_to_float32(data)) == data


@given(st.lists(st.floats(min_value=-1.0, max_value=1.0, width=32), max_size=256))
def test_float_round_trip_is_within_half_a_step(values: list[float]) -> None:
    x = np.array(values, dtype=np.float32)

    y = pcm16_to_float32(float32_to_pcm16(x))

    assert len(y) == len(x)
    # +1.0 clips to 32767/32768; everything else is within half a quantisation step.
    assert np.all(np.abs(y - x) <= np.where(x >= 32767.5 / 32768, 1 / 32768, 0.5 / 32768) + 1e-9)


def _ffmpeg_decode(codec: str, data: bytes) -> np.ndarray:
    ctx = av.CodecContext.create(codec, "r")
    assert isinstance(ctx, av.AudioCodecContext)
    ctx.sample_rate = 8000
    ctx.layout = "mono"
    frames = ctx.decode(av.Packet(data))
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.int64)


@pytest.mark.parametrize(("codec", "fn"), [("pcm_mulaw", g711_ulaw_to_float32), ("pcm_alaw", g711_alaw_to_float32)])
def test_g711_tables_match_ffmpeg(codec: str, fn: object) -> None:
    every_byte = bytes(range(256))
    ours = fn(every_byte)  # type: ignore[operator]

    assert ours.dtype == np.float32 and len(ours) == 256
    assert np.array_equal((ours * 32768).astype(np.int64), _ffmpeg_decode(codec, every_byte))


def test_g711_known_values() -> None:
    # mu-law: 0xFF and 0x7F are the two zeros, 0x00 / 0x80 the extremes (+-8031 << 2).
    assert g711_ulaw_to_float32(b"\xff\x7f\x00\x80").tolist() == [0.0, 0.0, -32124 / 32768, 32124 / 32768]
    # A-law: 0xD5 / 0x55 are the smallest magnitudes (+-8), 0xAA / 0x2A the extremes (+-32256).
    assert g711_alaw_to_float32(b"\xd5\x55\xaa\x2a").tolist() == [8 / 32768, -8 / 32768, 32256 / 32768, -32256 / 32768]


def test_g711_is_monotonic_within_each_sign() -> None:
    # mu-law bytes 0x80..0xFF run from +max down to 0; A-law's 256 values are symmetric about zero.
    mu = g711_ulaw_to_float32(bytes(range(0x80, 0x100)))
    assert np.all(np.diff(mu) < 0)
    a = np.sort(g711_alaw_to_float32(bytes(range(256))))
    assert np.array_equal(a, -a[::-1])


def test_rms_and_dbfs() -> None:
    t = np.arange(16_000) / 16_000
    sine = np.sin(2 * np.pi * 100 * t).astype(np.float32)

    assert rms(sine) == pytest.approx(1 / math.sqrt(2), rel=1e-4)
    assert dbfs(sine) == pytest.approx(-3.0103, abs=1e-3)
    assert dbfs(0.1 * sine) == pytest.approx(-23.0103, abs=1e-3)
    assert dbfs(np.ones(10)) == pytest.approx(0.0)
    assert rms(np.zeros(0)) == 0.0
    assert dbfs(np.zeros(100)) == -120.0
    assert dbfs(np.zeros(0), floor_db=-90.0) == -90.0
    assert dbfs(np.full(10, 1e-9)) == -120.0
