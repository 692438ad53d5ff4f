"""Benchmark reports are strict JSON: a latency nobody measured is null, never NaN."""

from __future__ import annotations

import json
import math
from pathlib import Path

from voxserve.bench.common import write_report


def test_nan_and_infinity_become_null(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_report(path, {"p95": math.nan, "rows": [{"x": math.inf, "n": 3}], "pair": (1.5, -math.inf)})
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"p95": None, "rows": [{"x": None, "n": 3}], "pair": [1.5, None]}
