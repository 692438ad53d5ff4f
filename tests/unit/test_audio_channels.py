"""Channels kept apart: decode_channels (and its ChannelResampler) and the cross-talk rules of
voxserve.pipelines.channels on signals whose answer is known."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from voxserve.audio import decode_audio, decode_channels
from voxserve.errors import InvalidInput
from voxserve.pipelines.channels import CROSSTALK_DB, distinct_channels, frame_levels, suppress_crosstalk

RATE = 16_000


def tone(hz: float, seconds: float, rate: int = RATE, level: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (level * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def wav(channels: np.ndarray, rate: int, fmt: str = "WAV", subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, channels.T, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def peak_hz(x: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(x))
    return float(np.fft.rfftfreq(len(x), 1 / RATE)[int(np.argmax(spectrum))])


@pytest.mark.parametrize("rate,fmt", [(44_100, "WAV"), (48_000, "FLAC"), (16_000, "OGG")])
def test_stereo_channels_stay_apart_and_are_resampled(rate: int, fmt: str) -> None:
    data = wav(np.stack([tone(440, 2.0, rate), tone(1000, 2.0, rate)]), rate, fmt,
               "VORBIS" if fmt == "OGG" else "PCM_16")
    audio, mono = decode_channels(data), decode_audio(data)
    assert audio.shape == (2, len(mono)) and abs(len(mono) - 2 * RATE) <= 0.02 * RATE and audio.dtype == np.float32
    assert abs(peak_hz(audio[0]) - 440) < 5 and abs(peak_hz(audio[1]) - 1000) < 5
    np.testing.assert_allclose(audio.mean(axis=0), mono, atol=2e-3)  # the mixdown, channel by channel


def test_mono_is_one_row_equal_to_decode_audio() -> None:
    data = wav(tone(300, 1.0)[None, :], RATE)
    np.testing.assert_array_equal(decode_channels(data), decode_audio(data)[None, :])


def test_six_channels_and_the_limits_of_decode_audio() -> None:
    data = wav(np.stack([tone(200 + 100 * c, 1.0) for c in range(6)]), RATE)
    assert decode_channels(data).shape == (6, RATE)
    with pytest.raises(InvalidInput) as err:
        decode_channels(wav(tone(300, 2.0)[None, :], RATE), max_duration_s=1.0)
    assert err.value.code == "audio_too_long"


def test_leak_is_silenced_overlap_is_kept() -> None:
    a, b = tone(300, 1.0), tone(700, 1.0)
    silence = np.zeros(RATE, np.float32)
    leak = 10 ** (-25 / 20)
    # 0-1 s: A talks (B's channel holds A's leak); 1-2 s: both talk; 2-3 s: B talks
    left = np.concatenate([a, a, silence + leak * b])
    right = np.concatenate([leak * a, b, b])
    out = suppress_crosstalk(np.stack([left, right]))
    inner = slice(RATE // 4, 3 * RATE // 4)  # away from the edges the level hold smears
    assert not out[1, inner].any() and np.array_equal(out[0, inner], left[inner])  # A's leak gone from B
    both = slice(RATE + RATE // 4, RATE + 3 * RATE // 4)
    assert np.array_equal(out[0, both], left[both]) and np.array_equal(out[1, both], right[both])
    assert not out[0, 2 * RATE + RATE // 4: 2 * RATE + 3 * RATE // 4].any()
    levels = frame_levels(np.stack([left, right]))
    assert levels[0, 10] - levels[1, 10] == pytest.approx(25, abs=0.5) and CROSSTALK_DB < 25


def test_a_repeated_channel_is_one_channel() -> None:
    x = tone(300, 1.0)
    noise = np.random.default_rng(0).normal(0, 0.01, RATE).astype(np.float32)
    assert distinct_channels(np.stack([x, x + noise, tone(500, 1.0)])) == [0, 2]
    assert distinct_channels(np.stack([x, 0.2 * x])) == [0, 1]  # another level is another channel
