"""A meeting for known-speaker naming, built from the corpus's AMI excerpts (real speakers, RTTM truth).

The meeting joins ami_dev00 0-13 s (MEE009 alone), ami_trn03 10-22 s (MEO069 alone), ami_trn05 10-22 s
(FEE078) and ami_trn04 16.5-24.5 s (MEE075, a word of MEO074); ``parts`` picks some of these four. Enrolled: MEE009
from a *different recording* (ami_dev01, 7-11.8 s, where he talks alone), MEO069 from a *different part* of
ami_trn03 (1.5-9.5 s, not in the meeting), and two people who are not in the meeting at all (MEE068 from
ami_trn00, MEE012 from ami_dev01). FEE078 and MEE075 are never enrolled.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from voxserve.audio import decode_audio
from voxserve.audio.encode import encode_audio
from voxserve.eval.der import read_rttm
from voxserve.types import SAMPLE_RATE

DIAR = Path(__file__).parent / "data" / "corpus" / "diar"
PARTS = (("ami_dev00", 0.0, 13.0), ("ami_trn03", 10.0, 22.0), ("ami_trn05", 10.0, 22.0), ("ami_trn04", 16.5, 24.5))
REFERENCES = {  # name -> (file, start s, end s): solo speech per the RTTM
    "MEE009": ("ami_dev01", 7.0, 11.8),
    "MEO069": ("ami_trn03", 1.5, 9.5),
    "MEE068": ("ami_trn00", 11.0, 15.5),
    "MEE012": ("ami_dev01", 4.3, 6.8),
}
PRESENT_ENROLLED = ("MEE009", "MEO069")
NEVER_ENROLLED = ("FEE078", "MEE075")
ABSENT_ENROLLED = ("MEE068", "MEE012")
MIN_NAMED = 0.8
"""Share of an enrolled speaker's speech under their name (measured 0.89 for MEE009, 1.0 for MEO069)."""
MAX_STRAY = 0.05
"""Most of a never-enrolled speaker's speech under any enrolled name (boundary frames; measured 0.01)."""


def _clip(name: str, start_s: float, end_s: float | None = None) -> np.ndarray:
    audio = decode_audio(DIAR / f"{name}.flac")
    return audio[int(start_s * SAMPLE_RATE) : None if end_s is None else int(end_s * SAMPLE_RATE)]


def meeting(parts: tuple[int, ...] = (0, 1, 2, 3)) -> tuple[np.ndarray, dict[str, list[tuple[float, float]]]]:
    """The meeting's samples and each true speaker's turns (seconds) on its timeline."""
    pieces, truth = [], {}
    offset = 0.0
    for name, start, end in (PARTS[i] for i in parts):
        audio = _clip(name, start, end)
        for turns in read_rttm(DIAR / f"{name}.rttm").values():
            for t in turns:
                a, b = max(t.start_s, start) - start, min(t.end_s, end) - start
                if b > a:
                    truth.setdefault(t.speaker, []).append((offset + a, offset + b))
        pieces.append(audio)
        offset += len(audio) / SAMPLE_RATE
    return np.concatenate(pieces), truth


def meeting_wav(parts: tuple[int, ...] = (0, 1, 2, 3)) -> bytes:
    """The meeting as a 16 kHz WAV file."""
    return encode_audio(meeting(parts)[0], SAMPLE_RATE, "wav")


def reference_wav(name: str) -> bytes:
    """The enrollment clip of ``name`` as a WAV file."""
    file, a, b = REFERENCES[name]
    return encode_audio(_clip(file, a, b), SAMPLE_RATE, "wav")


def named_share(turns: list[tuple[float, float, str]], truth: list[tuple[float, float]], name: str) -> float:
    """Share of the true turns' time covered by turns labelled ``name`` (10 ms grid)."""
    end = max([b for _, b, _ in turns] + [b for _, b in truth]) + 1
    grid = np.zeros(int(end * 100), bool)
    mine = grid.copy()
    for a, b in truth:
        grid[int(a * 100) : int(b * 100)] = True
    for a, b, label in turns:
        if label == name:
            mine[int(a * 100) : int(b * 100)] = True
    return float((grid & mine).sum() / max(1, grid.sum()))


def check_names(turns: list[tuple[float, float, str]], speakers: list[str]) -> None:
    """The naming bounds on a diarization of :func:`meeting` (turns in seconds, speaker labels): the enrolled
    people present named on most of their speech, the absent never, the never-enrolled never under a name,
    and the others labelled A, B, ..."""
    _, truth = meeting()
    for name in PRESENT_ENROLLED:
        assert name in speakers
        assert named_share(turns, truth[name], name) >= MIN_NAMED, name
    for name in ABSENT_ENROLLED:
        assert name not in speakers
    for person in NEVER_ENROLLED:
        for name in PRESENT_ENROLLED:
            assert named_share(turns, truth[person], name) <= MAX_STRAY, (person, name)
    generic = [s for s in speakers if s not in REFERENCES]
    assert generic and all(s.isalpha() and s.isupper() and len(s) <= 2 for s in generic)
