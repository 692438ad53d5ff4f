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
from voxserve.eval.split import LONG_FORM, LONG_FORM_CHECK_FROM_S, Half, names
from voxserve.types import SAMPLE_RATE


def _half_clips(corpus: Path, half: Half | None) -> list[tuple[np.ndarray, str]]:
    """(audio, reference) of every clip, or of one half of the split: its ``asr`` clips and its part of the
    long-form reading (cut at :data:`~voxserve.eval.split.LONG_FORM_CHECK_FROM_S`, reference from the
    reading's ``.segments.tsv``)."""
    clips = []
    for item in find_items(corpus, ("asr", "long")):
        if half is None:
            reference = item.reference.read_text(encoding="utf-8").strip()
            clips.append((decode_audio(item.audio), _read_aloud(reference) if item.name == LONG_FORM else reference))
        elif item.name == LONG_FORM:
            clips.append(_long_form_half(item.audio, half))
        elif item.name in names(half, "asr"):
            clips.append((decode_audio(item.audio), item.reference.read_text(encoding="utf-8").strip()))
    return clips


def _reading_sentences(audio_path: Path, half: Half | None) -> list[tuple[float, float, str]]:
    """(start s, end s, text) of the long-form reading's sentences, of one half or all (its ``.segments.tsv``)."""
    lines = audio_path.with_suffix(".segments.tsv").read_text(encoding="utf-8").splitlines()[1:]
    rows = [(float(start), float(end), _read_aloud(text)) for _, start, end, text in (line.split("\t") for line in lines)]
    return [r for r in rows if half is None or (r[0] >= LONG_FORM_CHECK_FROM_S) == (half == "check")]


def _read_aloud(text: str) -> str:
    """A reading's reference with its parentheses dropped and their words kept: the reader says them ("But the
    first Bible actually dated (which also was printed at Maintz ...)"), and the WER normalizer removes text in
    parentheses, which scored those 12 words as insertions of every system."""
    return text.replace("(", "").replace(")", "")


def _long_form_half(audio_path: Path, half: Half) -> tuple[np.ndarray, str]:
    audio = decode_audio(audio_path)
    cut = int(LONG_FORM_CHECK_FROM_S * SAMPLE_RATE)
    texts = [text for _, _, text in _reading_sentences(audio_path, half)]
    return (audio[cut:] if half == "check" else audio[:cut]), " ".join(texts)


def reading_runs(corpus: Path, half: Half | None, min_s: float = 30.0) -> list[tuple[np.ndarray, str]]:
    """The long-form reading (of one half, or all of it) cut at sentence ends into runs of at least ``min_s``
    (a shorter remainder joins the last run), each with its reference: one reader going on without a pause a
    live VAD would end an utterance at (its sentences lie 0.3 s apart). Empty when ``corpus`` has no reading."""
    found = [item for item in find_items(corpus, ("long",)) if item.name == LONG_FORM]
    if not found or not found[0].audio.with_suffix(".segments.tsv").is_file():
        return []
    audio = decode_audio(found[0].audio)
    runs: list[list[tuple[float, float, str]]] = [[]]
    for sentence in _reading_sentences(found[0].audio, half):
        if runs[-1] and runs[-1][-1][1] - runs[-1][0][0] >= min_s:
            runs.append([])
        runs[-1].append(sentence)
    if len(runs) > 1 and runs[-1][-1][1] - runs[-1][0][0] < min_s:
        last = runs.pop()
        runs[-1].extend(last)
    return [(audio[int(run[0][0] * SAMPLE_RATE):int(run[-1][1] * SAMPLE_RATE)], " ".join(t for _, _, t in run))
            for run in runs if run]


def make_long_recording(corpus: Path, out: Path, minutes: float = 10.0, seed: int = 0, half: Half | None = None) -> Path:
    """Write ``out`` (FLAC, 16 kHz mono) of at least ``minutes`` and ``out.with_suffix('.txt')``, from the
    clips of one half of the corpus split (``half``) or of all of it."""
    items = _half_clips(corpus, half)
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
        for clip, text in order:
            gap = int(rng.choice([0.2, 0.5, 0.8, 1.5, 3.0, 6.0]) * SAMPLE_RATE)
            parts.append(noise.normal(0.0, 1e-3, gap).astype(np.float32))
            parts.append(clip)
            texts.append(text)
            total += gap + len(clip)
            if total >= target:
                break
    audio = np.concatenate(parts)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(encode_audio(audio, SAMPLE_RATE, "flac"))
    out.with_suffix(".txt").write_text(" ".join(texts) + "\n", encoding="utf-8")
    return out
