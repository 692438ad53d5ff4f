"""Known-speaker naming on the corpus's AMI excerpts: how similar enrolled voices are to diarized speakers,
and how much of each enrolled speaker's speech carries their name.

For every file of a half, each corpus speaker with a stretch of at least ``MIN_STRETCH_S`` of solo speech
(no one else talking, per the RTTM) is enrolled from up to ``MAX_REFERENCE_S`` of it: from another file
when the speaker (same AMI id) talks alone in one, else from the file itself, whose stretch is then
silenced before diarizing (so a voice is never named from the very audio it is found in). On the tune half
only tune files give references; on the check half every file may (the audio measured is check audio).
Speakers enrolled but absent from the file are distractors: any name they get is a false name.

Each diarized speaker's true speaker is the reference speaker its turns overlap most. Pairs (reference,
diarized speaker) are *same* when these agree. Naming at a threshold follows the pipeline's own rule
(:func:`~voxserve.pipelines.known_speakers.match_names`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from voxserve.audio import decode_audio
from voxserve.errors import InvalidInput
from voxserve.eval.corpus import CorpusItem
from voxserve.eval.der import read_rttm
from voxserve.pipelines.known_speakers import KnownSpeaker, match_names, similarities
from voxserve.service import Voxserve
from voxserve.stats import percentile
from voxserve.types import SAMPLE_RATE, SpeakerTurn

MIN_STRETCH_S = 2.0
MAX_REFERENCE_S = 8.0
_GRID = 160  # samples a grid cell (10 ms) when measuring overlaps


@dataclass(frozen=True)
class Stretch:
    """Solo speech of one speaker in one file (samples)."""

    speaker: str
    item: CorpusItem
    start: int
    end: int


@dataclass(frozen=True)
class DiarizedVoice:
    """One diarized speaker: its true (reference) speaker, seconds of its turns, and per enrolled name the
    seconds of that name's speech it covers."""

    label: str
    truth: str
    seconds: float
    covers: dict[str, float]


@dataclass(frozen=True)
class FileNaming:
    """One file: its diarized voices, the enrolled names, similarities (voices x names) and how much speech
    each present enrolled speaker has."""

    name: str
    voices: list[DiarizedVoice]
    names: list[str]
    sims: np.ndarray
    speech_s: dict[str, float]


def _reference_turns(item: CorpusItem) -> list[SpeakerTurn]:
    return [t for turns in read_rttm(item.reference).values() for t in turns]


def _mask(turns: Sequence[SpeakerTurn], n: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for t in turns:
        m = out.setdefault(t.speaker, np.zeros(n, dtype=bool))
        m[t.start // _GRID : -(-t.end // _GRID)] = True
    return out


def solo_stretches(item: CorpusItem) -> list[Stretch]:
    """The longest solo stretch (at least ``MIN_STRETCH_S``, cut to ``MAX_REFERENCE_S``) of each speaker."""
    turns = _reference_turns(item)
    n = max(t.end for t in turns) // _GRID + 1
    masks = _mask(turns, n)
    talking = sum(m.astype(int) for m in masks.values())
    out = []
    for speaker, m in masks.items():
        solo = np.concatenate([[False], m & (talking == 1), [False]]).astype(np.int8)
        edges = np.flatnonzero(np.diff(solo))
        spans = sorted(zip(edges[::2], edges[1::2], strict=True), key=lambda s: s[0] - s[1])
        if spans and (spans[0][1] - spans[0][0]) * _GRID >= MIN_STRETCH_S * SAMPLE_RATE:
            a, b = int(spans[0][0]) * _GRID, int(spans[0][1]) * _GRID
            out.append(Stretch(speaker, item, a, min(b, a + int(MAX_REFERENCE_S * SAMPLE_RATE))))
    return out


async def name_file(vox: Voxserve, item: CorpusItem, stretches: Sequence[Stretch],
                    embedder: str | None = None) -> FileNaming:
    """Enroll every speaker of ``stretches`` (one stretch each, another file's first), diarize ``item`` with
    its own reference stretches silenced, and measure its voices against the enrolled names."""
    diarizer = await vox.adiarizer(embedder)
    audio = decode_audio(item.audio)
    chosen: dict[str, Stretch] = {}
    for s in sorted(stretches, key=lambda s: s.item.name == item.name):
        chosen.setdefault(s.speaker, s)
    known: list[KnownSpeaker] = []
    silenced = np.ones(len(audio) // _GRID + 1, dtype=bool)
    for s in chosen.values():
        clip = audio if s.item.name == item.name else decode_audio(s.item.audio)
        try:
            known.append(await diarizer.enroll(s.speaker, clip[s.start : s.end].copy()))
        except InvalidInput:  # the segmentation hears too little speech in it: not enrollable
            continue
        if s.item.name == item.name:
            audio = audio.copy()
            audio[s.start : s.end] = 0.0
            silenced[s.start // _GRID : s.end // _GRID] = False
    result = await diarizer.run_with_voices(audio)
    n = len(silenced)
    truth = {k: m & silenced for k, m in _mask(_reference_turns(item), n).items()}
    hyp = _mask(result.diarization.turns, n)
    labels = list(result.voices)
    voices = []
    for label in labels:
        h = hyp.get(label, np.zeros(n, dtype=bool))
        overlaps = {k: float((h & m).sum()) * _GRID / SAMPLE_RATE for k, m in truth.items()}
        best = max(overlaps, key=lambda k: overlaps[k]) if overlaps and max(overlaps.values()) > 0 else "-"
        voices.append(DiarizedVoice(label, best, float(h.sum()) * _GRID / SAMPLE_RATE, overlaps))
    cents = np.stack([result.voices[label] for label in labels]) if labels else np.zeros((0, 1), np.float32)
    sims = similarities(cents, known)
    speech = {k.name: float(truth[k.name].sum()) * _GRID / SAMPLE_RATE for k in known if k.name in truth}
    return FileNaming(item.name, voices, [k.name for k in known], sims, speech)


async def evaluate_naming(vox: Voxserve, files: Sequence[CorpusItem], reference_files: Sequence[CorpusItem],
                          embedder: str | None = None) -> list[FileNaming]:
    """:func:`name_file` for every file, references drawn from ``reference_files`` (and the file itself)."""
    pool = [s for item in reference_files for s in solo_stretches(item)]
    return [await name_file(vox, item, pool, embedder) for item in files]


@dataclass(frozen=True)
class NamingScore:
    """At one threshold: seconds of enrolled speakers' speech under their own name, of their speech in
    all, and of speech under a wrong name (plus the count of wrongly named voices)."""

    threshold: float
    named_s: float
    speech_s: float
    false_s: float
    false_voices: int

    @property
    def accuracy(self) -> float:
        """Share of the enrolled speakers' speech that carries their name."""
        return self.named_s / self.speech_s if self.speech_s else 0.0


def score_naming(files: Sequence[FileNaming], threshold: float) -> NamingScore:
    """Apply the pipeline's matching at ``threshold`` to every file and score the names."""
    named = speech = false = 0.0
    wrong = 0
    for f in files:
        names = match_names(f.sims.astype(np.float32), f.names, threshold)
        speech += sum(f.speech_s.values())
        for i, v in enumerate(f.voices):
            name = names.get(i)
            if name is None:
                continue
            if name == v.truth:
                named += v.covers.get(name, 0.0)
            else:
                false += v.seconds
                wrong += 1
    return NamingScore(threshold, named, speech, false, wrong)


def pairs(files: Sequence[FileNaming]) -> tuple[list[float], list[float]]:
    """Similarities of same-speaker and of different-speaker pairs (reference, diarized voice)."""
    same: list[float] = []
    different: list[float] = []
    for f in files:
        for i, v in enumerate(f.voices):
            for j, name in enumerate(f.names):
                (same if name == v.truth else different).append(float(f.sims[i, j]))
    return same, different


def zero_false_threshold(files: Sequence[FileNaming]) -> float:
    """The lowest threshold (0.01 steps from 0) at which no voice takes a wrong name."""
    for step in range(100):
        if score_naming(files, step / 100).false_voices == 0:
            return step / 100
    return 1.0


def format_naming_report(files: Sequence[FileNaming], threshold: float) -> str:
    """Pair similarity distributions, the zero-false-name threshold and the naming score at ``threshold``."""
    same, different = pairs(files)
    lines = []
    for name, values in (("same speaker", same), ("different speakers", different)):
        if values:
            q = [percentile(values, p) for p in (0, 10, 50, 90, 100)]
            lines.append(f"{name:<19} pairs {len(values):3d}: min {q[0]:.3f} p10 {q[1]:.3f} median {q[2]:.3f} "
                         f"p90 {q[3]:.3f} max {q[4]:.3f}")
    lines.append(f"lowest threshold with no false name: {zero_false_threshold(files):.2f}")
    for f in files:
        row = ", ".join(f"{v.label}={v.truth}" for v in f.voices)
        lines.append(f"{f.name}: voices {row}; enrolled present {', '.join(sorted(f.speech_s)) or '-'}")
    s = score_naming(files, threshold)
    lines.append(f"at threshold {threshold:.2f}: {100 * s.accuracy:.1f}% of enrolled speakers' speech named "
                 f"({s.named_s:.1f} of {s.speech_s:.1f} s); false names {s.false_voices} ({s.false_s:.1f} s)")
    return "\n".join(lines)


def run_naming(vox: Voxserve, files: Sequence[CorpusItem], reference_files: Sequence[CorpusItem],
               embedder: str | None = None) -> list[FileNaming]:
    """Synchronous :func:`evaluate_naming`."""
    return asyncio.run(evaluate_naming(vox, files, reference_files, embedder))
