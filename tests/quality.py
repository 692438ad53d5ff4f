"""What the tests may assert about a real model's text: word error rates against the clips' references.

Exact phrases are not guaranteed: int8 numerics differ between CPUs and CTranslate2 builds, so whisper-base
writes "ask not" on one machine and "asked not" on another. These bounds hold on every machine we measured
(each bound's comment says what was measured) and still fail when recognition breaks.
"""

from __future__ import annotations

from pathlib import Path

from voxserve.eval.wer import score_wer

DATA = Path(__file__).parent / "data"
JFK = (DATA / "fw_jfk.txt").read_text().strip()
"""JFK, 11 s: "And so my fellow Americans, ask not what your country can do for you, ask what you can do..." """
READER = (DATA / "mfa_ls_61-70968-0000.txt").read_text().strip()
"""A LibriSpeech reader, 4.9 s: "He began a confused complaint against the wizard who had vanished ..." """


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate after the project's English normalisation."""
    return score_wer(reference, hypothesis).wer


def jfk_wer(text: str) -> float:
    """WER of ``text`` against the JFK clip's reference (whisper-base int8: 0-5 %, one word at most)."""
    return wer(JFK, text)


def reader_wer(text: str) -> float:
    """WER of ``text`` against the LibriSpeech reader's reference (whisper-base int8: 0-6 %)."""
    return wer(READER, text)


def contains_speech(reference: str, text: str, max_wer: float = 0.25) -> bool:
    """Whether some stretch of ``text`` matches ``reference`` within ``max_wer`` (for texts that hold the
    clip among other speech, e.g. a live session or a file of several clips)."""
    words, n = text.split(), len(reference.split())
    if len(words) <= n:
        return wer(reference, text) <= max_wer
    return any(wer(reference, " ".join(words[i : i + n])) <= max_wer for i in range(len(words) - n + 1))
