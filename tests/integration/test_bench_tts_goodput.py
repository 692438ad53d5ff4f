"""``voxserve bench tts --rates``: Poisson arrivals over a real loopback server and Piper per request, both on
the real voice; the report's structure and sanity (not speed: the machine is shared)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxserve.bench.tts_goodput import SENTENCES, poisson_arrivals

pytest.importorskip("piper", reason="needs voxserve[tts]")
from voxserve.cli import main  # noqa: E402


def test_poisson_arrivals_are_seeded_and_near_the_rate() -> None:
    a, b = poisson_arrivals(4, 200, seed=3), poisson_arrivals(4, 200, seed=3)
    assert a == b and a != poisson_arrivals(4, 200, seed=4)
    assert 700 < len(a.times) < 900  # 800 expected, sd ~28
    assert a.times == sorted(a.times) and 0 < a.times[0] and a.times[-1] < 200
    gaps = [t1 - t0 for t0, t1 in zip(a.times, a.times[1:])]
    assert 0.2 < sum(gaps) / len(gaps) < 0.3  # exponential gaps of mean 1/rate
    assert len(set(a.texts)) > len(SENTENCES) // 2 and all(80 <= len(t) <= 100 for t in a.texts)


@pytest.mark.slow
def test_goodput_mode_reports_both_systems_at_the_same_arrivals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "goodput.json"
    assert main(["bench", "tts", "--rates", "2", "--seconds", "3", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    table = capsys.readouterr().out
    assert "voxserve (HTTP)" in table and "piper-per-request" in table and "TTFB p95" in table
    rows = {r["system"]: r for r in report["rows"]}
    assert set(rows) == {"voxserve (HTTP)", "piper-per-request"}
    expected = len(poisson_arrivals(2, 3, seed=0).times)
    for row in rows.values():
        assert row["rate"] == 2 and row["requests"] == expected > 0 and row["failed"] == 0
        assert row["failed_by_status"] == {}
        assert 0 < row["ttfb_p50_ms"] <= row["ttfb_p95_ms"] <= row["ttfb_p99_ms"] < 30_000
        assert 0 <= row["gap_free"] <= row["gap_free_buffered"] <= 1
        # every request got a whole sentence of speech: ~5-7 s each at the voice's pace
        assert 3.0 * expected < row["audio_s"] < 10.0 * expected
        assert len(row["load_before"]) == 3 and len(row["load_after"]) == 3
    assert set(report["ttfb_p95_ratio"]) == {"2"} and report["ttfb_p95_ratio"]["2"] > 0
    assert report["machine_before"]["cores"] >= 1


def test_bad_rates_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "tts", "--rates", "2,fast"]) != 0
    assert "--rates" in capsys.readouterr().err
    assert main(["bench", "tts", "--rates", "0", "--seconds", "3"]) != 0
