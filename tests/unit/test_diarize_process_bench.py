"""The whole-process diarization benchmark's command lines and run order (no processes started)."""

from __future__ import annotations

import sys
from pathlib import Path

from voxserve.bench.diarize_process import COMMANDS, command_line, run_order


def test_command_lines_take_all_files_with_user_defaults() -> None:
    files = (Path("a.flac"), Path("b.flac"))
    out = Path("/tmp/out")
    assert command_line("diarize", files, out) == [sys.executable, "-m", "voxserve.cli", "diarize", "a.flac",
                                                   "b.flac", "--quiet"]
    assert command_line("transcribe", files, out)[3:] == ["transcribe", "a.flac", "b.flac", "--quiet",
                                                          "--output-dir", "/tmp/out"]
    assert command_line("transcribe --diarize", files, out, ("--model", "tiny"))[3:] == [
        "transcribe", "--diarize", "a.flac", "b.flac", "--quiet", "--output-dir", "/tmp/out", "--model", "tiny"]


def test_run_order_rotates_so_each_command_takes_each_place() -> None:
    orders = [run_order(r) for r in range(3)]
    assert all(sorted(o) == sorted(COMMANDS) for o in orders)
    assert {o[0] for o in orders} == set(COMMANDS)
    assert run_order(3) == run_order(0)
