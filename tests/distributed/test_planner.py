"""The capacity planner against hand-computed cases (RTFx = audio s / wall s; streams = capacity / need)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from voxserve.cli import main
from voxserve.distributed.planner import SCHEMA, Targets, parse_results, plan
from voxserve.errors import InvalidInput


def results(*replicas: dict[str, Any]) -> dict[str, Any]:
    return {"schema": SCHEMA, "machine": {"note": "hand-made"}, "replicas": list(replicas)}


H200 = {"name": "h200", "gpus": 1, "cpus": 8, "asr": {"rtfx": 250},
        "live": {"streams": 160, "latency_target_ms": 200}, "tts": {"streams": 100}}
MIG = {"name": "h200-mig-1g", "mig_slices_per_gpu": 7, "cpus": 2,
       "asr": {"rtfx": 50, "scaling": [{"replicas": 1, "rtfx": 50}, {"replicas": 2, "rtfx": 95}]},
       "live": {"streams": 24}, "tts": {"streams": 16}}
CPU = {"name": "cpu-1thread", "gpus": 0, "cpus": 1, "asr": {"rtfx": 10.2, "scaling": [{"replicas": 2, "rtfx": 18.9}]}}


def kind(entry: dict[str, Any]) -> Any:
    return parse_results(results(entry)).kinds[0]


def test_whole_gpu_long_files_linear() -> None:
    # 1000 / 250 = 4 replicas of one GPU; 1 GPU / 250x = 0.004 GPU-hours per audio hour.
    p = plan(kind(H200), Targets(rtfx=1000))
    (w,) = p.workloads
    assert (w.replicas_exact, w.replicas, p.gpus) == (4.0, 4, 4)
    assert w.cost == pytest.approx(0.004)
    assert any("assumed linear" in n for n in p.notes)


def test_mig_slices_with_measured_efficiency() -> None:
    # efficiency = 95 / (2 x 50) = 0.95; 1000 / (50 x 0.95) = 21.05 -> 22 slices = ceil(22 / 7) = 4 GPUs.
    # live: 200 / 24 = 8.33 -> 9 slices; a stream costs (1/7) / 24 = 1/168 GPU. tts: 100 / 16 = 6.25 -> 7.
    # total: 22 + 9 + 7 = 38 slices sharing GPUs: ceil(38 / 7) = 6 GPUs (not 4 + 2 + 1 = 7).
    k = kind(MIG)
    assert k.gpus == pytest.approx(1 / 7)
    assert k.efficiency == pytest.approx(0.95)
    p = plan(k, Targets(rtfx=1000, live_streams=200, tts_streams=100))
    long, live, tts = p.workloads
    assert long.replicas_exact == pytest.approx(21.0526, abs=1e-4) and long.replicas == 22
    assert long.cost == pytest.approx((1 / 7) / 47.5)
    assert (live.replicas, live.slices) == (9, 9) and live.cost == pytest.approx(1 / 168)
    assert tts.replicas == 7 and tts.cost == pytest.approx(1 / 112)
    assert (p.replicas, p.slices, p.gpus, p.cpus) == (38, 38, 6, 76)
    assert not p.notes


def test_cpu_replicas_count_cores() -> None:
    # efficiency = 18.9 / 20.4 = 0.9265; 100 / (10.2 x 0.9265) = 10.58 -> 11 replicas = 11 cores.
    p = plan(kind(CPU), Targets(rtfx=100, live_streams=5))
    (w,) = p.workloads
    assert w.per_replica == pytest.approx(9.45)
    assert (w.replicas, p.gpus, p.cpus) == (11, 0, 11)
    assert w.cost_unit == "core-hours per audio hour" and w.cost == pytest.approx(1 / 9.45)
    assert any("no live streams measurement" in n for n in p.notes)


def test_exact_multiples_do_not_round_up() -> None:
    p = plan(kind({"name": "g", "gpus": 0.5, "live": {"streams": 10}}), Targets(live_streams=30))
    assert (p.replicas, p.gpus) == (3, 2)  # 1.5 GPUs -> 2 whole GPUs
    assert p.workloads[0].cost == pytest.approx(0.05)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"schema": "other", "replicas": [H200]}, "schema"),
        (results(), "non-empty"),
        (results(H200, H200), "unique"),
        (results({"name": "x"}), "no measurement"),
        (results({"name": "x", "asr": {"rtfx": -1}}), "positive"),
        (results({"name": "x", "mig_slices_per_gpu": 7, "gpus": 0.5, "asr": {"rtfx": 1}}), "MIG slice"),
        (results({"name": "x", "asr": {"rtfx": 1, "scaling": [{"replicas": 0, "rtfx": 1}]}}), "integer replicas"),
    ],
)
def test_bad_results_are_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_results(data)


def test_targets_must_be_given() -> None:
    with pytest.raises(InvalidInput):
        plan(kind(H200), Targets())


def test_cli_prints_and_writes_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "results.json"
    bench.write_text(json.dumps(results(H200, MIG)))
    out = tmp_path / "plan.json"
    code = main(["plan", "--bench", str(bench), "--target-rtf", "1000", "--live-streams", "200",
                 "--replica", "h200-mig-1g", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "h200-mig-1g" in text and "31 slices = 5 GPUs" in text and "1/168 GPU per stream" in text
    assert "replica kind h200:" not in text
    (saved,) = json.loads(out.read_text())
    assert saved["replicas"] == 31 and saved["gpus"] == 5  # 22 + 9 slices -> ceil(31 / 7)


def test_cli_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--bench", str(tmp_path / "missing.json"), "--target-rtf", "10"]) == 2
    assert "does not exist" in capsys.readouterr().err
