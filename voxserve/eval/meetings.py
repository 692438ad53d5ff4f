"""Built meetings: several-minute recordings of 2-6 speakers with overlaps, from real corpus speech of one
half of the split, with an RTTM of who speaks when.

Voices (:func:`half_voices`) are stretches of one person's speech:

- AMI excerpts of the half (``diar``): every run of at least 1 s where the reference has one speaker alone
  (the AMI id is the speaker, across excerpts);
- single-speaker clips of the half (``asr``, and the half's part of the long-form LJSpeech reading): runs of
  speech found by Silero VAD on these close-talk recordings (pauses under 0.25 s bridged, 30 ms padding,
  runs under 0.5 s dropped; frame energy was tried first and took JFK's crowd noise for speech). The MFA
  clips are all their author (one voice; his falsetto and whispered clips are left out); LJSpeech clips
  are one reader.

A meeting (:func:`build_meeting`, seeded) draws its speakers, then turns: a speaker other than the last
one says a piece (1-6 s) cut at a random place of one of their stretches, so every sample of a turn is
that speaker's speech and the RTTM turn is exactly where the piece lies. A turn starts after a pause
(0.1-1.5 s) or, with probability ``overlap_p``, before the previous turn ends (0.2-1.5 s of overlap);
with probability ``backchannel_p`` a third speaker's short piece (0.4-1 s) falls inside a turn. Each
speaker has their own level (RMS -26 dBFS +- 4 dB); pieces are mixed by addition over a faint noise
floor. Short voices' stretches recur in a long meeting (their material is what the half has).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxserve.audio import decode_audio
from voxserve.audio.encode import encode_audio
from voxserve.eval.corpus import find_items
from voxserve.eval.der import read_rttm
from voxserve.eval.split import LONG_FORM, LONG_FORM_CHECK_FROM_S, Half, names
from voxserve.types import SAMPLE_RATE, Float32Array, SpeakerTurn

FRAME = SAMPLE_RATE // 100
"""10 ms frames (reference activity and overlap are counted in them)."""
MIN_AMI_RUN_S = 1.0
MIN_VOICE_S = 5.0
"""Voices with less speech than this in the half are not used."""
LEFT_OUT_CLIPS = ("mfa_falsetto2", "mfa_whisper2")


@dataclass(frozen=True)
class Voice:
    """Stretches of speech of one person (each all speech, 16 kHz mono)."""

    speaker: str
    stretches: tuple[Float32Array, ...]

    @property
    def speech_s(self) -> float:
        """Seconds of speech in all stretches."""
        return sum(len(s) for s in self.stretches) / SAMPLE_RATE


@dataclass(frozen=True)
class MeetingSpec:
    """One built meeting: how many speakers, how long, the seed, and how often speech overlaps."""

    name: str
    speakers: int
    minutes: float
    seed: int
    overlap_p: float = 0.3
    backchannel_p: float = 0.25


DEFAULT_SPECS = (
    MeetingSpec("meeting_2spk", 2, 3.0, 1),
    MeetingSpec("meeting_3spk", 3, 3.0, 2),
    MeetingSpec("meeting_4spk", 4, 4.0, 3),
    MeetingSpec("meeting_6spk", 6, 4.0, 4),
)
"""The built set the benchmarks report (14 minutes)."""


def _runs(active: np.ndarray) -> list[tuple[int, int]]:
    edges = np.diff(np.concatenate([[0], active.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True))


def solo_runs(turns: Sequence[SpeakerTurn], n_samples: int, min_s: float = MIN_AMI_RUN_S) -> dict[str, list[tuple[int, int]]]:
    """Per speaker, the sample ranges (of at least ``min_s``) where the reference has them speaking alone."""
    speakers = sorted({t.speaker for t in turns})
    frames = n_samples // FRAME
    active = np.zeros((len(speakers), frames), dtype=bool)
    for t in turns:
        active[speakers.index(t.speaker), t.start // FRAME : t.end // FRAME] = True
    alone = active & (active.sum(axis=0) == 1)
    min_frames = round(min_s * 100)
    return {s: [(a * FRAME, b * FRAME) for a, b in _runs(alone[i]) if b - a >= min_frames]
            for i, s in enumerate(speakers)}


def speech_runs(audio: Float32Array, min_s: float = 0.5) -> list[tuple[int, int]]:
    """Sample ranges of speech in a close-talk single-speaker recording: Silero VAD's regions (pauses under
    0.25 s bridged, 30 ms of padding), those under ``min_s`` dropped."""
    from voxserve.backends.registry import load_vad
    from voxserve.pipelines.vad import VadParams, speech_regions

    params = VadParams(min_speech_ms=250, min_silence_ms=250, speech_pad_ms=30)
    regions = speech_regions(load_vad().probabilities(audio), params, len(audio))
    return [(a, b) for a, b in regions if b - a >= min_s * SAMPLE_RATE]


def _clip_speaker(name: str) -> str:
    if name.startswith("mfa_"):
        return "mfa_author"
    if "_lj_" in name or name == LONG_FORM:
        return "ljspeech"
    return name


def half_voices(corpus: Path, half: Half) -> list[Voice]:
    """The voices of one half of the split (sorted by speaker; those with under ``MIN_VOICE_S`` left out)."""
    found: dict[str, list[Float32Array]] = {}
    for item in find_items(corpus, ("diar",), ".rttm"):
        if item.name not in names(half, "diar"):
            continue
        audio = decode_audio(item.audio)
        turns = [t for ts in read_rttm(item.reference).values() for t in ts]
        for speaker, runs in solo_runs(turns, len(audio)).items():
            found.setdefault(speaker, []).extend(audio[a:b] for a, b in runs)
    for item in find_items(corpus, ("asr", "long")):
        if item.name in LEFT_OUT_CLIPS or (item.name != LONG_FORM and item.name not in names(half, "asr")):
            continue
        audio = decode_audio(item.audio)
        if item.name == LONG_FORM:
            cut = int(LONG_FORM_CHECK_FROM_S * SAMPLE_RATE)
            audio = audio[cut:] if half == "check" else audio[:cut]
        found.setdefault(_clip_speaker(item.name), []).extend(audio[a:b] for a, b in speech_runs(audio))
    voices = [Voice(s, tuple(st)) for s, st in sorted(found.items())]
    return [v for v in voices if v.speech_s >= MIN_VOICE_S]


class _Mixer:
    """The meeting's audio, grown as pieces are added."""

    def __init__(self, noise: np.random.Generator) -> None:
        self.audio = np.zeros(0, dtype=np.float32)
        self.noise = noise

    def add(self, piece: Float32Array, start: int) -> None:
        end = start + len(piece)
        if end > len(self.audio):
            grow = self.noise.normal(0.0, 3e-4, end - len(self.audio)).astype(np.float32)
            self.audio = np.concatenate([self.audio, grow])
        self.audio[start:end] += piece


def _piece(voice: Voice, length_s: float, level: float, rng: np.random.Generator) -> Float32Array:
    """A piece of about ``length_s`` cut at a random place of a stretch (longer stretches likelier), at
    RMS ``level``."""
    lengths = np.array([len(s) for s in voice.stretches], dtype=np.float64)
    stretch = voice.stretches[int(rng.choice(len(lengths), p=lengths / lengths.sum()))]
    n = min(len(stretch), int(length_s * SAMPLE_RATE))
    start = int(rng.integers(0, len(stretch) - n + 1))
    piece = stretch[start : start + n].astype(np.float32)
    rms = float(np.sqrt(np.mean(np.square(piece, dtype=np.float64))))
    return np.asarray(piece * (level / max(rms, 1e-6)), dtype=np.float32)


def build_meeting(voices: Sequence[Voice], spec: MeetingSpec) -> tuple[Float32Array, list[SpeakerTurn]]:
    """The audio and reference turns of one meeting (see the module); the same for the same voices and spec.

    Raises:
        ValueError: fewer voices than ``spec.speakers``.
    """
    if len(voices) < spec.speakers:
        raise ValueError(f"{spec.name} needs {spec.speakers} voices; the half has {len(voices)}")
    rng = np.random.default_rng(spec.seed)
    chosen = [voices[i] for i in sorted(rng.choice(len(voices), spec.speakers, replace=False))]
    levels = [10 ** ((-26.0 + rng.uniform(-4.0, 4.0)) / 20) for _ in chosen]
    mixer = _Mixer(np.random.default_rng(spec.seed + 1))
    turns: list[SpeakerTurn] = []
    target = int(spec.minutes * 60 * SAMPLE_RATE)
    last, prev_end, prev_len = -1, SAMPLE_RATE // 2, 0
    while prev_end < target:
        who = int(rng.choice([i for i in range(len(chosen)) if i != last])) if len(chosen) > 1 else 0
        piece = _piece(chosen[who], rng.uniform(1.0, 6.0), levels[who], rng)
        if turns and rng.random() < spec.overlap_p:
            start = max(0, prev_end - int(min(rng.uniform(0.2, 1.5), prev_len / SAMPLE_RATE / 2) * SAMPLE_RATE))
        else:
            start = prev_end + int(rng.uniform(0.1, 1.5) * SAMPLE_RATE)
        mixer.add(piece, start)
        turns.append(SpeakerTurn(start, start + len(piece), chosen[who].speaker))
        others = [i for i in range(len(chosen)) if i != who]
        if others and len(piece) > 2 * SAMPLE_RATE and rng.random() < spec.backchannel_p:
            b = int(rng.choice(others))
            short = _piece(chosen[b], rng.uniform(0.4, 1.0), levels[b], rng)
            at = start + int(rng.integers(SAMPLE_RATE // 2, len(piece) - len(short) - SAMPLE_RATE // 4 + 1))
            mixer.add(short, at)
            turns.append(SpeakerTurn(at, at + len(short), chosen[b].speaker))
        last, prev_end, prev_len = who, max(prev_end, start + len(piece)), len(piece)
    mixer.add(np.zeros(SAMPLE_RATE // 2, dtype=np.float32), prev_end)
    audio = mixer.audio
    peak = float(np.max(np.abs(audio)))
    if peak > 0.99:
        audio = np.asarray(audio * (0.99 / peak), dtype=np.float32)
    return audio, sorted(turns, key=lambda t: (t.start, t.speaker))


def rttm_lines(file_id: str, turns: Sequence[SpeakerTurn]) -> str:
    """RTTM ``SPEAKER`` lines of ``turns`` (seconds to the millisecond)."""
    return "".join(f"SPEAKER {file_id} 1 {t.start / SAMPLE_RATE:.3f} {(t.end - t.start) / SAMPLE_RATE:.3f} "
                   f"<NA> <NA> {t.speaker} <NA> <NA>\n" for t in turns)


def overlap_share(turns: Sequence[SpeakerTurn], n_samples: int) -> float:
    """The share of speech time (frames with anyone speaking) in which two or more speak."""
    count = np.zeros(n_samples // FRAME + 1, dtype=np.int32)
    for t in turns:
        count[t.start // FRAME : t.end // FRAME] += 1
    speech = int(np.sum(count > 0))
    return float(np.sum(count > 1)) / speech if speech else 0.0


def write_meetings(corpus: Path, out_dir: Path, half: Half = "check",
                   specs: Sequence[MeetingSpec] = DEFAULT_SPECS) -> list[Path]:
    """Build every spec from the voices of ``half`` into ``out_dir`` (``<name>.flac`` and ``<name>.rttm``);
    returns the audio paths."""
    voices = half_voices(corpus, half)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in specs:
        audio, turns = build_meeting(voices, spec)
        path = out_dir / f"{spec.name}.flac"
        path.write_bytes(encode_audio(audio, SAMPLE_RATE, "flac"))
        path.with_suffix(".rttm").write_text(rttm_lines(spec.name, turns), encoding="utf-8")
        paths.append(path)
    return paths
