"""Two test sets for the hallucination guard, built from real speech and from non-speech.

* Legitimate repetition (must pass): real corpus clips said twice in one window, a short clip repeated as a
  chorus or a call ("hello? hello?"), counting said again and again, dictation that says each phrase twice.
* Real hallucination (must be caught): what Whisper writes on windows with no speech in them: low-level
  noise, music-like tones, near-silence, very short windows, with whisper-base and tiny.en.

Each case is one window, decoded as the long-file pipeline's first attempt decodes it (fitted window below
20 s, the token cap, no word timings: the default ``txt`` output computes none) and judged by
:func:`voxserve.pipelines.guard.assess`. Clips come from one half of the corpus split
(:mod:`voxserve.eval.split`), so a threshold tuned on the tune half is reported on the check half.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from voxserve.audio import decode_audio
from voxserve.backends.base import AsrModel, AsrRequest, AsrResult, DecodeOptions
from voxserve.eval.split import Half, names
from voxserve.pipelines.guard import GuardConfig, LoopEvidence, Verdict, assess, token_cap
from voxserve.types import SAMPLE_RATE

Kind = Literal["repetition", "hallucination"]
MAX_WINDOW_S = 29.0
FIT_BELOW_S = 20.0
_DEFAULT_GUARD = GuardConfig()


@dataclass(frozen=True)
class GuardCase:
    """One window of audio and what the guard should say of it."""

    name: str
    kind: Kind
    audio: np.ndarray
    clip: np.ndarray | None = None
    times: int = 0
    reference: str = ""


@dataclass(frozen=True)
class GuardOutcome:
    """A case, the recogniser's first attempt on it and the guard's verdict. ``expected``: for repetition,
    the model's own text of the repeated clip alone, repeated as often as it was said (so the model's own
    misrecognitions do not count as loops)."""

    case: GuardCase
    result: AsrResult
    verdict: Verdict
    expected: str = ""

    @property
    def correct(self) -> bool:
        """Hallucination caught (failed, judged silence, or no text). Repetition: a text that says every
        repetition passed; a text that runs on past them (the decoder looped) failed."""
        if self.case.kind == "hallucination":
            return not self.verdict.passed or self.verdict.silence or not self.result.text.strip()
        if self.dropped:
            return True  # the guard cannot see speech the decoder left out; counted apart
        return (self.verdict.passed and not self.verdict.silence) != self.looped

    @property
    def heard(self) -> bool:
        """A repetition case whose text is about as long as every repetition said once (neither a decoder
        that ran on nor one that left repetitions out)."""
        return not self.looped and not self.dropped

    @property
    def looped(self) -> bool:
        """Far more words than were said: the decoder ran on."""
        return len(self.result.text.split()) > 1.5 * len(self.expected.split()) + 3

    @property
    def dropped(self) -> bool:
        """Fewer words than were said: the decoder left repetitions out (speech lost, not a hallucination)."""
        return len(self.result.text.split()) < 0.75 * len(self.expected.split())

    @property
    def false_alarm(self) -> bool:
        """A repetition case whose text says every repetition (the decoder neither ran on nor left any out),
        failed by the guard. Failing a text that left repetitions out is right: the pipeline retries it."""
        return self.case.kind == "repetition" and self.heard and not (self.verdict.passed and not self.verdict.silence)


def _gap(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), np.float32)


def _join(parts: Sequence[np.ndarray], gap_s: float) -> np.ndarray:
    out: list[np.ndarray] = []
    for p in parts:
        out += [p, _gap(gap_s)]
    return np.concatenate(out[:-1])


def _clips(corpus: Path, half: Half) -> dict[str, tuple[np.ndarray, str]]:
    folder = corpus / "asr"
    found = {}
    for name in names(half, "asr"):
        files = [p for p in folder.glob(name + ".*") if p.suffix != ".txt"]
        if files:
            found[name] = (decode_audio(files[0]), (folder / f"{name}.txt").read_text().strip())
    return found


def repetition_cases(corpus: Path, half: Half) -> list[GuardCase]:
    """Legitimate repetition from the clips of one half of the corpus: each clip said twice (when the window
    holds it), short clips said four times (a chorus), the shortest said six times (a call)."""
    clips = _clips(corpus, half)
    cases = []
    for name, (audio, text) in clips.items():
        seconds = len(audio) / SAMPLE_RATE
        if 2 * seconds + 0.6 <= MAX_WINDOW_S:
            cases.append(GuardCase(f"twice:{name}", "repetition", _join([audio, audio], 0.6), audio, 2, text))
        if seconds <= 5.0:
            cases.append(GuardCase(f"chorus:{name}", "repetition", _join([audio] * 4, 0.4), audio, 4, text))
    short = sorted((len(a), n) for n, (a, _) in clips.items())
    if short:
        word, text = clips[short[0][1]]
        cases.append(GuardCase(f"call:{short[0][1]}x6", "repetition", _join([word] * 6, 0.3), word, 6, text))
    return cases


def hallucination_cases(seed: int = 0) -> list[GuardCase]:
    """Windows without speech: noise, music-like tones, near-silence, very short windows."""
    rng = np.random.default_rng(seed)
    cases = []
    for seconds in (0.6, 2.0, 5.0, 12.0, 25.0):
        for db in (-30, -45):
            noise = rng.standard_normal(int(seconds * SAMPLE_RATE)) * 10 ** (db / 20)
            cases.append(GuardCase(f"noise{db}dB:{seconds}s", "hallucination", noise.astype(np.float32)))
        cases.append(GuardCase(f"music:{seconds}s", "hallucination", _music(seconds, rng)))
        near = rng.standard_normal(int(seconds * SAMPLE_RATE)) * 10 ** (-70 / 20)
        cases.append(GuardCase(f"near-silence:{seconds}s", "hallucination", near.astype(np.float32)))
    return cases


def _music(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Chords of harmonic tones changing every beat, with a soft percussive click: music-like, no speech."""
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    out = np.zeros(n, np.float32)
    beat = int(0.5 * SAMPLE_RATE)
    roots = rng.choice([110.0, 130.8, 146.8, 164.8, 196.0, 220.0], size=max(1, n // beat + 1))
    for i in range(0, n, beat):
        seg = slice(i, min(n, i + beat))
        root = roots[i // beat]
        chord = sum(np.sin(2 * np.pi * root * r * h * t[seg]) / h for r in (1.0, 1.26, 1.5) for h in (1, 2, 3))
        env = np.exp(-3.0 * (t[seg] - t[i]))
        out[seg] = 0.05 * chord * env
    return out


def _first_attempt(model: AsrModel, audio: np.ndarray, language: str | None,
                   guard: GuardConfig) -> tuple[AsrResult, Verdict]:
    """The pipeline's first attempt on one window (fitted below 20 s, the token cap, no word timings) and the
    guard's verdict on it."""
    n = len(audio)
    options = DecodeOptions(language=language, word_timestamps=False, max_new_tokens=token_cap(n),
                            window="fit" if n < FIT_BELOW_S * SAMPLE_RATE else "full")
    result = model.transcribe_batch([AsrRequest(audio, options)])[0]
    evidence = LoopEvidence(hit_cap=len(result.tokens) >= token_cap(n))
    return result, assess(result.text, result.avg_logprob, result.no_speech_prob, n, result.language, guard, evidence)


def judge(model: AsrModel, cases: Sequence[GuardCase], guard: GuardConfig = _DEFAULT_GUARD,
          language: str | None = "en") -> list[GuardOutcome]:
    """Decode every case as the pipeline's first attempt does and judge it."""
    outcomes = []
    alone_texts: dict[bytes, str | None] = {}  # a clip's own text (None where it loops), decoded once per clip
    for case in cases:
        result, verdict = _first_attempt(model, case.audio, language, guard)
        expected = ""
        if case.clip is not None:  # the model's own text of the clip, or the reference where that loops
            key = case.clip.tobytes()
            if key not in alone_texts:
                alone, alone_verdict = _first_attempt(model, case.clip, language, guard)
                alone_texts[key] = alone.text if alone_verdict.passed else None
            own = alone_texts[key]
            expected = " ".join([own if own is not None else case.reference] * case.times)
        outcomes.append(GuardOutcome(case, result, verdict, expected))
    return outcomes
