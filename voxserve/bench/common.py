"""Shared helpers of the benchmarks: machine description, timing with repeats, tables."""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """What the benchmark ran on (reported with every result: timings on shared machines are noisy)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "load_1min": round(load, 2)}


@dataclass
class Timing:
    """Wall times of repeated runs of one system."""

    name: str
    walls: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        """The median wall time."""
        return statistics.median(self.walls) if self.walls else float("nan")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``fn`` once; return (wall seconds, result)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def write_report(path: str | Path, report: Any) -> None:
    """Write a benchmark report as strict JSON (a NaN, such as a latency nobody could measure, becomes null)."""

    def strict(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: strict(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [strict(v) for v in value]
        return value

    Path(path).write_text(json.dumps(strict(report), indent=2, allow_nan=False) + "\n", encoding="utf-8")
