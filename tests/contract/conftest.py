"""The contract tier: one suite per backend kind, each test run against the real backend and against its fake
(ids ``whisper-base`` / ``fake``, ...), so that a fake cannot drift from the model it stands in for.

Each suite loads its real model once (a module-scoped fixture parametrized over [real, fake]) and skips the
real one, with the reason, where its extra is not installed. Clips are short: the tier runs in well under a
minute on two cores.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

DATA = Path(__file__).parents[1] / "data"
CLIPS = {
    "jfk": DATA / "fw_jfk.flac",  # 11 s
    "ldc": DATA / "corpus" / "asr" / "ds_ldc93s1.wav",  # 2.9 s
    "ls260": DATA / "corpus" / "asr" / "fw_stereo_right_ls260.wav",  # 5 s
    "lj": DATA / "corpus" / "asr" / "lh_lj_LJ002-0020.wav",  # 1.5 s
}


@pytest.fixture(scope="session")
def speech() -> dict[str, np.ndarray]:
    """Short real recordings, 16 kHz mono float32."""
    from voxserve.audio import decode_audio

    return {name: decode_audio(path) for name, path in CLIPS.items()}


def _spoiled(kind: str, audio: np.ndarray) -> Any:
    if kind == "nan":
        out = audio.copy()
        out[len(out) // 2] = np.nan
        return out
    if kind == "inf":
        out = audio.copy()
        out[len(out) // 3] = -np.inf
        return out
    if kind == "2-d":
        return np.stack([audio, audio])
    if kind == "int16":
        return (np.clip(audio, -1, 1) * 32767).astype(np.int16)
    raise AssertionError(kind)


@pytest.fixture(params=["nan", "inf", "2-d", "int16"])
def spoil(request: pytest.FixtureRequest) -> Callable[[np.ndarray], Any]:
    """Turns good samples into samples every audio backend must refuse with InvalidInput: a NaN, an infinite
    sample, two channels, unscaled integer PCM."""
    return lambda audio: _spoiled(request.param, audio)
