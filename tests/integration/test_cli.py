"""The ``voxserve`` command as users run it (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import srt

from tests.quality import jfk_wer

pytestmark = pytest.mark.slow


def voxserve(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voxserve.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def test_transcribe_to_stdout_with_speed_summary(data_dir: Path) -> None:
    r = voxserve("transcribe", str(data_dir / "fw_jfk.flac"))
    assert r.returncode == 0, r.stderr
    assert jfk_wer(r.stdout) <= 0.1, r.stdout
    assert "RTFx" in r.stderr and "audio 11.0 s" in r.stderr
    assert "audio s" in r.stderr  # the progress bar's unit


def test_several_files_into_a_folder(data_dir: Path, tmp_path: Path) -> None:
    files = [str(data_dir / "fw_jfk.flac"), str(data_dir / "mfa_ls_61-70968-0000.flac")]
    r = voxserve("transcribe", *files, "--format", "srt", "--output-dir", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    jfk = list(srt.parse((tmp_path / "fw_jfk.srt").read_text()))
    assert jfk and "Americans" in jfk[0].content
    assert (tmp_path / "mfa_ls_61-70968-0000.srt").is_file()


def test_verbose_json_and_options(data_dir: Path) -> None:
    r = voxserve("transcribe", str(data_dir / "es__pv_test_es.wav"), "--format", "verbose_json", "--language", "es",
                 "--quiet", "--workers", "1", "--batch-size", "4")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["language"] == "spanish" and d["segments"] and d["words"]
    assert {"rtfx", "chunks", "retries", "rechunks"} <= set(d["voxserve"])
    for chunk in d["voxserve"]["chunk_reports"]:  # every decode of every chunk, the kept one marked
        assert len(chunk["history"]) == chunk["attempts"] >= 1
        assert any(a["accepted"] for a in chunk["history"])
        assert all(a["language"] == "es" and 0 < a["window_s"] <= 30 and a["words"] >= 0 for a in chunk["history"])


def test_bad_file_fails_cleanly_and_others_still_run(data_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "broken.mp3"
    bad.write_bytes(b"ID3" + b"\x00" * 50)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    r = voxserve("transcribe", str(bad), str(empty), str(data_dir / "fw_jfk.flac"), "--output-dir", str(tmp_path), "--quiet")
    assert r.returncode == 1
    assert "broken.mp3" in r.stderr and "empty.wav" in r.stderr
    assert "Traceback" not in r.stderr
    assert jfk_wer((tmp_path / "fw_jfk.txt").read_text()) <= 0.1


def test_unknown_model_and_missing_file(data_dir: Path, tmp_path: Path) -> None:
    r = voxserve("transcribe", str(data_dir / "fw_jfk.flac"), "--model", "nope")
    assert r.returncode == 2 and "whisper-base" in r.stderr and "Traceback" not in r.stderr
    r = voxserve("transcribe", str(tmp_path / "missing.wav"), "--quiet")
    assert r.returncode == 1 and "missing.wav" in r.stderr
    r = voxserve("transcribe", str(tmp_path / "missing.wav"))  # no empty progress bar, no "RTFx 0.0" summary
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [r.stderr.strip().splitlines()[0]], r.stderr
    assert "RTFx" not in r.stderr and "audio s" not in r.stderr


def test_version() -> None:
    from importlib.metadata import version

    r = voxserve("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"voxserve {version('voxserve')}"


def test_eval_asr_on_a_folder(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    r = voxserve("eval", "asr", "--corpus", str(data_dir), "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "pooled WER" in r.stdout
    d = json.loads(out.read_text())
    names = {f["name"] for f in d["files"]}
    assert {"fw_jfk", "mfa_ls_61-70968-0000", "de__pv_test_de"} <= names
    jfk = next(f for f in d["files"] if f["name"] == "fw_jfk")
    assert jfk["score"]["wer"] == 0.0


def test_vad_flags_reach_the_speech_detection(corpus: Path) -> None:
    clip = str(corpus / "asr" / "mfa_whisper2.flac")  # whispering: heard at the default 0.3, not at 0.9
    heard = voxserve("transcribe", clip, "--quiet")
    strict = voxserve("transcribe", clip, "--quiet", "--vad-threshold", "0.9", "--min-silence-ms", "300")
    assert heard.returncode == strict.returncode == 0
    assert len(heard.stdout.split()) >= 4 and strict.stdout.strip() == ""
