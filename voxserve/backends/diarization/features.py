"""Acoustic features of the speaker embedders, in plain numpy (no torch, no librosa at inference).

- :func:`kaldi_fbank`: Kaldi-compatible log mel filterbanks (80 bins, 25 ms / 10 ms, povey window,
  pre-emphasis 0.97, DC removal, no dither, ``snip_edges``), as CAM++ was trained on
  (``torchaudio.compliance.kaldi.fbank`` defaults), mean-normalised over time.
- :func:`mel_power_spectrogram`: librosa's ``melspectrogram`` (centred 400-point Hann STFT, power 2, Slaney
  mel filters from :func:`slaney_mel_filters`), as resemblyzer's GE2E encoder expects (no log).
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from voxserve.types import SAMPLE_RATE

F32 = npt.NDArray[np.float32]
_FRAME = 400  # 25 ms at 16 kHz
_HOP = 160  # 10 ms
_FFT = 512
_EPS = float(np.finfo(np.float32).eps)


def _kaldi_mel(f: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return 1127.0 * np.log(1.0 + f / 700.0)


@functools.lru_cache(maxsize=4)
def kaldi_mel_banks(num_bins: int = 80, low_hz: float = 20.0, high_hz: float = SAMPLE_RATE / 2) -> F32:
    """Kaldi's triangular mel filters, shape (num_bins, FFT/2 + 1) (the Nyquist column is zero)."""
    n_fft_bins = _FFT // 2
    freqs = np.arange(n_fft_bins) * SAMPLE_RATE / _FFT
    mel = _kaldi_mel(freqs)
    lo, hi = _kaldi_mel(np.array(low_hz)), _kaldi_mel(np.array(high_hz))
    delta = (hi - lo) / (num_bins + 1)
    left = lo + np.arange(num_bins)[:, None] * delta
    center, right = left + delta, left + 2 * delta
    up = (mel[None, :] - left) / (center - left)
    down = (right - mel[None, :]) / (right - center)
    banks = np.maximum(0.0, np.minimum(up, down))
    return np.pad(banks, ((0, 0), (0, 1))).astype(np.float32)


@functools.lru_cache(maxsize=1)
def _povey_window() -> F32:
    n = np.arange(_FRAME)
    return (np.power(0.5 - 0.5 * np.cos(2 * np.pi * n / (_FRAME - 1)), 0.85)).astype(np.float32)


def kaldi_fbank(audio: F32, num_bins: int = 80, mean_norm: bool = True) -> F32:
    """Log mel filterbank energies, shape (frames, num_bins); frames = 1 + (len - 400) // 160 (at least 1)."""
    x = np.asarray(audio, dtype=np.float32)
    if len(x) < _FRAME:
        x = np.pad(x, (0, _FRAME - len(x)))
    n = 1 + (len(x) - _FRAME) // _HOP
    idx = np.arange(_FRAME)[None, :] + _HOP * np.arange(n)[:, None]
    frames = x[idx].astype(np.float32)
    frames -= frames.mean(axis=1, keepdims=True)
    frames[:, 1:] -= 0.97 * frames[:, :-1].copy()
    frames[:, 0] *= 1.0 - 0.97
    frames *= _povey_window()
    power = np.abs(np.fft.rfft(frames, n=_FFT, axis=1)) ** 2
    feats = np.log(np.maximum(power.astype(np.float32) @ kaldi_mel_banks(num_bins).T, _EPS))
    if mean_norm:
        feats -= feats.mean(axis=0, keepdims=True)
    return np.asarray(feats, dtype=np.float32)


@functools.lru_cache(maxsize=1)
def _hann400() -> F32:
    n = np.arange(_FRAME)
    return (0.5 - 0.5 * np.cos(2 * np.pi * n / _FRAME)).astype(np.float32)  # periodic, as scipy/librosa


def mel_power_spectrogram(audio: F32, mel_filters: F32) -> F32:
    """librosa ``melspectrogram(y, sr=16000, n_fft=400, hop_length=160)`` with ``mel_filters`` (n_mels, 201),
    transposed to (frames, n_mels); frames = 1 + len // 160."""
    x = np.pad(np.asarray(audio, dtype=np.float32), (_FRAME // 2, _FRAME // 2))
    n = 1 + (len(x) - _FRAME) // _HOP
    idx = np.arange(_FRAME)[None, :] + _HOP * np.arange(n)[:, None]
    spec = np.abs(np.fft.rfft(x[idx] * _hann400(), n=_FRAME, axis=1)) ** 2
    return (spec.astype(np.float32) @ mel_filters.T).astype(np.float32)


def _hz_to_slaney_mel(f: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    f = np.asarray(f, dtype=np.float64)
    linear = f / (200.0 / 3)
    log_part = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(f >= 1000.0, log_part, linear)


def _slaney_mel_to_hz(m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    linear = m * (200.0 / 3)
    log_part = 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0))
    return np.where(m >= 15.0, log_part, linear)


@functools.lru_cache(maxsize=4)
def slaney_mel_filters(n_mels: int = 40, n_fft: int = _FRAME) -> F32:
    """librosa's default mel filterbank (Slaney scale and area normalisation), shape (n_mels, n_fft/2 + 1)."""
    fft_freqs = np.linspace(0.0, SAMPLE_RATE / 2, 1 + n_fft // 2)
    mel_f = _slaney_mel_to_hz(np.linspace(0.0, float(_hz_to_slaney_mel(np.array(SAMPLE_RATE / 2))), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights.astype(np.float32)
