"""Build a long test recording from corpus clips joined by silences of varying length.

The reference transcript is the clips' references in order, written beside the audio as ``.txt``. The gaps
(0.2 to 6 s, seeded) carry a faint noise floor so that silence is not digital zero.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from voxserve.audio import decode_audio
from voxserve.audio.encode import encode_audio
from voxserve.eval.corpus import find_items
from voxserve.types import SAMPLE_RATE


def make_long_recording(corpus: Path, out: Path, minutes: float = 10.0, seed: int = 0) -> Path:
    """Write ``out`` (FLAC, 16 kHz mono) of at least ``minutes`` and ``out.with_suffix('.txt')``."""
    items = find_items(corpus, ("asr", "long"))
    if not items:
        raise FileNotFoundError(f"no clips with references under {corpus}")
    rng = random.Random(seed)
    noise = np.random.default_rng(seed)
    parts: list[np.ndarray] = []
    texts: list[str] = []
    total = 0
    target = int(minutes * 60 * SAMPLE_RATE)
    while total < target:
        order = items[:]
        rng.shuffle(order)
        for item in order:
            gap = int(rng.choice([0.2, 0.5, 0.8, 1.5, 3.0, 6.0]) * SAMPLE_RATE)
            parts.append(noise.normal(0.0, 1e-3, gap).astype(np.float32))
            clip = decode_audio(item.audio)
            parts.append(clip)
            texts.append(item.reference.read_text(encoding="utf-8").strip())
            total += gap + len(clip)
            if total >= target:
                break
    audio = np.concatenate(parts)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(encode_audio(audio, SAMPLE_RATE, "flac"))
    out.with_suffix(".txt").write_text(" ".join(texts) + "\n", encoding="utf-8")
    return out
