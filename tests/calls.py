"""A two-party call built from real recordings: one speaker a channel, taking turns, each channel also
carrying the other speaker's voice leaked in at -25 dB (headset bleed), as call recorders store them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from voxserve.audio import decode_audio
from voxserve.types import SAMPLE_RATE

DATA = Path(__file__).parent / "data"
LEAK_DB = -25.0


def write_call(path: Path, leak_db: float = LEAK_DB, reader_at_s: float = 12.0) -> Path:
    """A stereo WAV: JFK (11 s) on the left, the LibriSpeech reader (4.9 s) on the right from ``reader_at_s``
    (12: after JFK, with a 1 s pause; less: both talk at once), each leaking into the other channel at
    ``leak_db``."""
    jfk = decode_audio(DATA / "fw_jfk.flac")
    reader = decode_audio(DATA / "mfa_ls_61-70968-0000.flac")
    offset = round(reader_at_s * SAMPLE_RATE)
    left = np.zeros(max(len(jfk), offset + len(reader)) + SAMPLE_RATE, np.float32)
    right = left.copy()
    left[: len(jfk)] = jfk
    right[offset : offset + len(reader)] = reader
    leak = 10 ** (leak_db / 20)
    sf.write(path, np.stack([left + leak * right, right + leak * left], axis=1), SAMPLE_RATE, subtype="PCM_16")
    return path
