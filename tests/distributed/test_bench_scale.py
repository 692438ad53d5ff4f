"""``voxserve bench scale``: its capacity entry merges into RESULTS.json for ``voxserve plan``, and a smoke run
on real replicas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from voxserve.bench.scale import capacity_entry, merge_results
from voxserve.cli import main
from voxserve.distributed.planner import Targets, load_results, plan
from voxserve.errors import InvalidInput


def report(name: str, one: float, two: float) -> dict[str, Any]:
    return {"name": name, "model": "whisper-base", "threads": 1, "file": "f.flac", "audio_s": 60.0,
            "machine": {"cores": 2}, "scaling": [{"replicas": 1, "rtfx": one, "ratio": 1.0},
                                                 {"replicas": 2, "rtfx": two, "ratio": two / one}]}


def test_entries_merge_by_name_and_plan(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.json"
    merge_results(path, capacity_entry(report("cpu-1thread", 30.0, 54.0)), {"cores": 2})
    merge_results(path, capacity_entry(report("cpu-2thread", 40.0, 70.0)), {"cores": 2})
    merge_results(path, capacity_entry(report("cpu-1thread", 32.0, 60.8)), {"cores": 2})  # replaces the first
    kinds = {k.name: k for k in load_results(path).kinds}
    assert set(kinds) == {"cpu-1thread", "cpu-2thread"}
    k = kinds["cpu-1thread"]
    assert (k.asr_rtfx, k.efficiency, k.gpus) == (32.0, pytest.approx(0.95), 0.0)
    assert plan(k, Targets(rtfx=100)).replicas == 4  # 100 / (32 x 0.95) = 3.29


def test_merge_refuses_other_files(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(InvalidInput):
        merge_results(path, capacity_entry(report("x", 1.0, 2.0)), {})


@pytest.mark.bench
@pytest.mark.usefixtures("ray_session")
def test_bench_scale_smoke(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "RESULTS.json"
    code = main(["bench", "scale", str(data_dir / "fw_jfk.flac"), "--replicas", "1,2", "--repeats", "1",
                 "--results", str(results), "--json", str(tmp_path / "report.json")])
    assert code == 0
    out = capsys.readouterr().out
    assert "2 replica(s): RTFx" in out and "texts identical" in out
    (kind,) = load_results(results).kinds
    assert kind.name == "cpu-1thread" and kind.asr_rtfx and [p.replicas for p in kind.scaling] == [1, 2]
    assert main(["plan", "--bench", str(results), "--target-rtf", "100"]) == 0
