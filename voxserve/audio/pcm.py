"""Raw PCM conversions (16-bit little-endian, G.711 A-law and mu-law) and level measurement.

Float samples are in [-1, 1]; 16-bit value ``v`` maps to ``v / 32768``, so every int16 round-trips exactly
and +1.0 clips to 32767.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from voxserve.errors import InvalidInput
from voxserve.types import Float32Array

__all__ = [
    "dbfs",
    "float32_to_g711_alaw",
    "float32_to_g711_ulaw",
    "float32_to_pcm16",
    "g711_alaw_to_float32",
    "g711_ulaw_to_float32",
    "pcm16_to_float32",
    "rms",
]

_PCM16_SCALE = 32768.0
_Bytes = bytes | bytearray | memoryview


def pcm16_to_float32(data: _Bytes) -> Float32Array:
    """Convert signed 16-bit little-endian mono PCM to float32 samples in [-1, 1).

    Args:
        data: the raw PCM bytes; their length must be even.

    Returns:
        A new 1-D float32 array with ``len(data) // 2`` samples.

    Raises:
        InvalidInput: ``code="invalid_pcm"`` when the byte count is odd.
    """
    if len(data) % 2:
        raise InvalidInput(f"16-bit PCM needs an even number of bytes, got {len(data)}", code="invalid_pcm")
    samples = np.frombuffer(data, dtype="<i2")
    return samples.astype(np.float32) / np.float32(_PCM16_SCALE)


def float32_to_pcm16(samples: npt.ArrayLike) -> bytes:
    """Convert float samples to signed 16-bit little-endian PCM, clipping to the int16 range.

    Values are scaled by 32768 and rounded to the nearest integer; values beyond [-1, 1) clip to
    -32768/32767 and NaN becomes 0.

    Args:
        samples: a 1-D array of floats (any float dtype).

    Returns:
        The PCM bytes, two per sample.

    Raises:
        ValueError: ``samples`` is not one-dimensional.
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D array of samples, got shape {x.shape}")
    scaled = np.rint(np.nan_to_num(x, nan=0.0) * _PCM16_SCALE)
    return np.clip(scaled, -32768, 32767).astype("<i2").tobytes()


def _ulaw_table() -> Float32Array:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    values = np.where(u & 0x80, -magnitude, magnitude)
    return (values / _PCM16_SCALE).astype(np.float32)


def _alaw_table() -> Float32Array:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    exponent = (a >> 4) & 0x07
    mantissa = a & 0x0F
    magnitude = np.where(exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0))
    values = np.where(a & 0x80, magnitude, -magnitude)
    return (values / _PCM16_SCALE).astype(np.float32)


_ULAW = _ulaw_table()
_ALAW = _alaw_table()
_ULAW.flags.writeable = False
_ALAW.flags.writeable = False


def g711_ulaw_to_float32(data: _Bytes) -> Float32Array:
    """Decode G.711 mu-law bytes (one per sample, as in telephony streams) to float32.

    Args:
        data: the mu-law bytes.

    Returns:
        A new 1-D float32 array with one sample per byte, in [-0.981, 0.981].
    """
    return _ULAW[np.frombuffer(data, dtype=np.uint8)]


def g711_alaw_to_float32(data: _Bytes) -> Float32Array:
    """Decode G.711 A-law bytes (one per sample) to float32.

    Args:
        data: the A-law bytes.

    Returns:
        A new 1-D float32 array with one sample per byte, in [-0.985, 0.985].
    """
    return _ALAW[np.frombuffer(data, dtype=np.uint8)]


def _encoder(table: Float32Array) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
    order = np.argsort(table, kind="stable")
    return table[order].astype(np.float64), order.astype(np.uint8)


_ULAW_SORTED, _ULAW_CODES = _encoder(_ULAW)
_ALAW_SORTED, _ALAW_CODES = _encoder(_ALAW)


def _nearest_code(samples: npt.ArrayLike, values: npt.NDArray[np.float64], codes: npt.NDArray[np.uint8]) -> bytes:
    x = np.clip(np.nan_to_num(np.asarray(samples, dtype=np.float64).reshape(-1)), values[0], values[-1])
    i = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
    nearer_left = (x - values[i - 1]) <= (values[i] - x)
    return codes[np.where(nearer_left, i - 1, i)].tobytes()


def float32_to_g711_ulaw(samples: npt.ArrayLike) -> bytes:
    """Encode float samples in [-1, 1] as G.711 mu-law bytes (the nearest code; the inverse of
    :func:`g711_ulaw_to_float32` on its own values)."""
    return _nearest_code(samples, _ULAW_SORTED, _ULAW_CODES)


def float32_to_g711_alaw(samples: npt.ArrayLike) -> bytes:
    """Encode float samples in [-1, 1] as G.711 A-law bytes (the nearest code)."""
    return _nearest_code(samples, _ALAW_SORTED, _ALAW_CODES)


def rms(samples: npt.ArrayLike) -> float:
    """Root mean square of the samples (0.0 for an empty array), computed in float64.

    Args:
        samples: an array of float samples.

    Returns:
        The RMS value.
    """
    x = np.asarray(samples, dtype=np.float64)
    return math.sqrt(float(np.mean(np.square(x)))) if x.size else 0.0


def dbfs(samples: npt.ArrayLike, *, floor_db: float = -120.0) -> float:
    """RMS level in dB relative to full scale (a full-scale square wave is 0 dBFS, a sine -3.01 dBFS).

    Args:
        samples: an array of float samples in [-1, 1].
        floor_db: returned for silence and empty input, and the lowest value ever returned.

    Returns:
        ``20 * log10(rms)``, at least ``floor_db``.
    """
    level = rms(samples)
    return max(floor_db, 20.0 * math.log10(level)) if level > 0 else floor_db
