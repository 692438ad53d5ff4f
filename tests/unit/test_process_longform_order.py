"""The whole-process long-file bench interleaves its systems, so a machine's drift falls on all of them."""

from __future__ import annotations

import wave
from pathlib import Path

from voxserve.bench.process_longform import Run, compare, format_report


def test_rounds_interleave_the_systems_and_ratios_come_per_round(tmp_path: Path) -> None:
    audio = tmp_path / "a.wav"
    with wave.open(str(audio), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(bytes(32_000))
    (tmp_path / "a.txt").write_text("hello there")
    order: list[str] = []
    clock = iter(range(1, 100))

    def fake_run(cmd: list[str]) -> Run:
        name = "voxserve" if "voxserve.cli" in cmd else f"bs{cmd[-2]}"
        order.append(name)
        tick = next(clock)  # a machine that slows down run after run: drift
        return Run(wall_s=float(tick) * (1.0 if name == "voxserve" else 2.0), peak_rss_mb=100.0,
                   text="hello there", load_avg=0.5)

    report = compare([audio], "model-dir", batch_sizes=(8, 16), repeats=3, log=lambda _: None, run=fake_run)
    assert order == ["voxserve", "bs8", "bs16", "bs8", "bs16", "voxserve", "bs16", "voxserve", "bs8"]
    f = report["files"][0]
    assert f["systems"]["voxserve"]["runs_s"] == [1.0, 6.0, 8.0]
    assert f["systems"]["faster-whisper batched bs8"]["runs_s"] == [4.0, 8.0, 18.0]
    # round 1: best peer bs8 at 4.0 s over voxserve 1.0 s; round 2: 8.0 / 6.0; round 3: min(14, 18) / 8.0
    assert f["ratio_per_round"] == [4.0, 1.33, 1.75]
    assert f["ratio_to_best_peer"] == round(8.0 / 6.0, 2)  # medians: bs8 8.0 s, voxserve 6.0 s
    assert f["systems"]["voxserve"]["wer"] == 0.0 and f["systems"]["voxserve"]["same_text_every_run"]
    assert "round by round: [4.0, 1.33, 1.75]" in format_report(report)
