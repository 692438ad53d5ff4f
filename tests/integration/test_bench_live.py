"""``voxserve bench live``: real streams through the real server, and the same programs transcribed as files
beside them (the yardstick of the live WER target); the report's structure and sanity, not speed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from voxserve.cli import main


@pytest.mark.slow
def test_live_bench_reports_the_streams_beside_the_same_audio_as_files(
        tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("mfa_ls_61-70968-0000.flac", "mfa_ls_61-70968-0000.txt"):
        shutil.copy(data_dir / "corpus" / "asr" / name, corpus / name)
    out = tmp_path / "live.json"
    assert main(["bench", "live", "--streams", "1", "--seconds", "2", "--corpus", str(corpus), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "as files" in printed and "WhisperLive: not run" in printed
    report = json.loads(out.read_text())
    (row,) = report["rows"]
    assert not any("whisperlive" in key for key in report["capacity"])  # not run: no figure that reads as 0
    assert row["system"] == "voxserve" and row["streams"] == 1 and row["errors"] == 0 and row["utterances"] >= 1
    # a 5 s read sentence (LibriSpeech): whisper-base gets it word for word as a file, nearly so live
    assert row["offline_wer"] <= 0.1 and row["wer"] <= 0.2
    assert 0 <= row["final_p50"] <= row["final_p95"] < 30
    assert row["partials_per_utterance"] > 0  # one idle stream: its previews are not shed
    # the texts behind both WERs, per stream and per program, so a reader can see where the live text loses
    (program,) = report["programs"]
    assert program["reference"] == (corpus / "mfa_ls_61-70968-0000.txt").read_text().strip()
    assert program["as_file"].strip() and len(row["transcripts"]) == 1
    assert len(row["transcripts"][0]) == row["utterances"] and any(t.strip() for t in row["transcripts"][0])
