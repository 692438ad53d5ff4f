"""``voxserve bench diarize FILE...``: diarization wall time against transcription wall time of the same
files in the same process run, per stage, with DER when an ``.rttm`` lies beside a file.

Both pipelines run all files concurrently through the shared engine (as a server would), each model
warmed up first; repeats alternate transcription and diarization so both see the same machine load.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxserve.bench.common import machine
from voxserve.formats import text_table
from voxserve.service import Voxserve
from voxserve.types import Diarization


@dataclass(frozen=True)
class DiarizeBenchConfig:
    """What to run."""

    files: tuple[Path, ...]
    repeats: int = 3
    embedder: str | None = None
    model: str | None = None


class DiarizeBench:
    """Runs the benchmark on one engine."""

    def __init__(self, vox: Voxserve, config: DiarizeBenchConfig, log: Callable[[str], None] = lambda s: None) -> None:
        self.vox = vox
        self.config = config
        self.log = log

    async def _transcribe(self) -> float:
        options = self.vox.long_options(word_timestamps=True)
        started = time.perf_counter()
        await asyncio.gather(*(self.vox.atranscribe(f, options, model=self.config.model) for f in self.config.files))
        return time.perf_counter() - started

    async def _diarize(self) -> tuple[float, list[Diarization]]:
        started = time.perf_counter()
        results = await asyncio.gather(*(self.vox.adiarize(f, embedder=self.config.embedder) for f in self.config.files))
        return time.perf_counter() - started, list(results)

    def run(self) -> dict[str, Any]:
        """Warm up, then time both pipelines ``repeats`` times; return the report."""
        one = self.config.files[:1]
        self.log("warming up the models")
        asyncio.run(self.vox.atranscribe(one[0], self.vox.long_options(), model=self.config.model))
        asyncio.run(self.vox.adiarize(one[0], embedder=self.config.embedder))
        loads_before = machine()
        asr_walls: list[float] = []
        diar_walls: list[float] = []
        last: list[Diarization] = []
        for r in range(self.config.repeats):
            asr_walls.append(asyncio.run(self._transcribe()))
            wall, last = asyncio.run(self._diarize())
            diar_walls.append(wall)
            self.log(f"repeat {r + 1}: transcription {asr_walls[-1]:.2f} s, diarization {wall:.2f} s")
        return self._report(asr_walls, diar_walls, last, loads_before)

    def _report(self, asr: list[float], diar: list[float], results: list[Diarization], before: dict[str, Any]) -> dict[str, Any]:
        audio_s = sum(r.duration_s for r in results)
        stages: dict[str, float] = defaultdict(float)
        for r in results:
            for name, seconds in r.stats.stages:
                stages[name] += seconds
        report: dict[str, Any] = {
            "machine_before": before,
            "machine_after": machine(),
            "files": [str(f) for f in self.config.files],
            "audio_s": round(audio_s, 2),
            "repeats": self.config.repeats,
            "transcription_wall_s": [round(w, 3) for w in asr],
            "diarization_wall_s": [round(w, 3) for w in diar],
            "transcription_median_s": round(statistics.median(asr), 3),
            "diarization_median_s": round(statistics.median(diar), 3),
            "ratio": round(statistics.median(diar) / statistics.median(asr), 3),
            "stages_s": {k: round(v, 3) for k, v in stages.items()},
        }
        report["der"] = _der(self.config.files, results)
        return report


def _der(files: tuple[Path, ...], results: list[Diarization]) -> dict[str, float] | None:
    """Pooled DER at both collars over the files that have an RTTM beside them."""
    from voxserve.eval.corpus import CorpusItem
    from voxserve.eval.diarization_eval import COLLARS, score_file

    scored = [score_file(CorpusItem(f, f.with_suffix(".rttm")), r) for f, r in zip(files, results, strict=True)
              if f.with_suffix(".rttm").is_file()]
    if not scored:
        return None
    from voxserve.eval.der import pooled

    return {f"collar_{c}": round(pooled(s.der[c] for s in scored).der, 4) for c in COLLARS}


def format_diarize(report: dict[str, Any]) -> str:
    """The report as text."""
    rows = [
        ["transcription", report["transcription_median_s"], report["audio_s"] / report["transcription_median_s"]],
        ["diarization", report["diarization_median_s"], report["audio_s"] / report["diarization_median_s"]],
    ]
    lines = [text_table(["pipeline", "median wall s", "x real time"], rows)]
    lines.append(f"diarization / transcription wall: {report['ratio']:.2f}  "
                 f"({report['audio_s']:.1f} s of audio, {report['repeats']} repeats)")
    lines.append("diarization stages (sum over files, s): "
                 + ", ".join(f"{k} {v:.2f}" for k, v in report["stages_s"].items()))
    if report["der"]:
        lines.append("pooled DER: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in report["der"].items()))
    lines.append(f"load average (1 min) before {report['machine_before']['load_1min']}, "
                 f"after {report['machine_after']['load_1min']}; {report['machine_after']['cpu']}, "
                 f"{report['machine_after']['cores']} cores")
    return "\n".join(lines)
