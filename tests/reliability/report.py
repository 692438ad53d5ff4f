"""Counts of what the suite tried, for docs/reliability.md: ``VOXSERVE_RELIABILITY_REPORT=FILE`` appends one JSON
line per finished target (inputs tried, outcomes by kind, failures)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tally:
    """Outcomes of one fuzz target."""

    target: str
    outcomes: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, outcome: str) -> None:
        """Count one input's outcome (e.g. ``ok``, ``400:invalid_audio``, ``error:invalid_json``)."""
        with self._lock:
            self.outcomes[outcome] += 1

    @property
    def inputs(self) -> int:
        """Inputs tried."""
        return sum(self.outcomes.values())

    def summary(self) -> dict[str, Any]:
        """The JSON line written to the report."""
        top = dict(self.outcomes.most_common(12))
        return {"target": self.target, "inputs": self.inputs, "seconds": round(time.monotonic() - self.started, 1),
                "outcomes": top, "distinct_outcomes": len(self.outcomes)}

    def write(self) -> None:
        """Append the summary to ``$VOXSERVE_RELIABILITY_REPORT`` (when set) and print it."""
        line = json.dumps(self.summary())
        print(line)
        path = os.environ.get("VOXSERVE_RELIABILITY_REPORT")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


def record(section: str, **figures: Any) -> None:
    """Append any other measured figures (RSS, fds, latencies) to the report."""
    line = json.dumps({"section": section, **figures})
    print(line)
    path = os.environ.get("VOXSERVE_RELIABILITY_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
