"""Scale-out benchmark: RTFx of one long file on 1, 2, ... Ray replicas in the same run, and the scaling ratio.

Every replica count gets its own set of replicas (all started first, then kept), and the timed runs
alternate between the counts (1, 2, 1, 2, ...), so that load from other users of a shared machine falls on
every count alike; the median is reported, with the 1-minute load average around each run. The file is
transcribed by the real long-file pipeline (decode, VAD and chunk planning in this process, chunks fanned
out to the replicas); the texts of all counts must be identical. The result can be written as a capacity
``RESULTS.json`` entry for ``voxserve plan``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxserve.bench.common import machine
from voxserve.config import Settings
from voxserve.errors import InvalidInput
from voxserve.formats import text_table


@dataclass(frozen=True)
class ScaleConfig:
    """What to run: ``replicas`` counts of replicas with ``threads`` threads each, ``repeats`` timed runs each."""

    file: Path
    replicas: tuple[int, ...] = (1, 2)
    threads: int = 1
    repeats: int = 3
    local: bool = False
    name: str = ""


def run_scale(settings: Settings, config: ScaleConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Start the replica sets, time the alternating runs, and return the JSON-able report."""
    from voxserve.audio import probe
    from voxserve.distributed.cluster import connect
    from voxserve.service import Voxserve

    audio_s = probe(config.file).duration_s or 0.0
    ray = settings.ray.model_copy(update={
        "enabled": True, "cpus_per_replica": float(config.threads), "threads_per_worker": config.threads,
        "workers_per_replica": 1, "num_cpus": settings.ray.num_cpus or sum(config.replicas) * config.threads,
    })
    started_ray = connect(ray)
    engines: dict[str, Any] = {}
    try:
        for n in config.replicas:
            engines[f"ray x{n}"] = Voxserve(settings.model_copy(update={"ray": ray.model_copy(update={"replicas": n})}))
        if config.local:
            for n in config.replicas:
                asr = settings.asr.model_copy(update={"workers": n, "threads_per_worker": config.threads})
                engines[f"local x{n}"] = Voxserve(settings.model_copy(update={"asr": asr, "ray": ray.model_copy(
                    update={"enabled": False})}))
        for name, engine in engines.items():
            engine.asr()
            log(f"{name}: ready")
        runs = _timed_runs(engines, config, audio_s, log)
        served = {name: dict(e.asr().stats().served) for name, e in engines.items() if hasattr(e.asr(), "stats")}
    finally:
        for engine in engines.values():
            engine.close()
        if started_ray:
            import ray as ray_module

            ray_module.shutdown()
    report = _report(settings, config, audio_s, runs)
    report["served_per_replica"] = served  # how evenly the chunks spread
    return report


def _timed_runs(
    engines: dict[str, Any], config: ScaleConfig, audio_s: float, log: Callable[[str], None]
) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in engines}
    for repeat in range(config.repeats):
        for name, engine in engines.items():
            load_before = os.getloadavg()[0]
            started = time.perf_counter()
            transcript = asyncio.run(engine.atranscribe(config.file, engine.long_options()))
            wall = time.perf_counter() - started
            run = {"wall_s": wall, "rtfx": audio_s / wall, "load_before": load_before,
                   "load_after": os.getloadavg()[0], "text": transcript.text, "chunks": transcript.stats.chunks}
            runs[name].append(run)
            log(f"run {repeat + 1}/{config.repeats} {name}: {wall:.2f} s, RTFx {run['rtfx']:.1f}, "
                f"load {load_before:.2f} -> {run['load_after']:.2f}")
    return runs


def _report(settings: Settings, config: ScaleConfig, audio_s: float, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    rows = {}
    for name, rs in runs.items():
        rows[name] = {
            "rtfx": statistics.median(r["rtfx"] for r in rs), "wall_s": statistics.median(r["wall_s"] for r in rs),
            "runs": [{k: v for k, v in r.items() if k != "text"} for r in rs],
        }
    texts = {r["text"] for rs in runs.values() for r in rs}
    base = rows.get(f"ray x{config.replicas[0]}", {}).get("rtfx", 0.0) / max(1, config.replicas[0])
    scaling = [{"replicas": n, "rtfx": rows[f"ray x{n}"]["rtfx"],
                "ratio": rows[f"ray x{n}"]["rtfx"] / base if base else 0.0} for n in config.replicas]
    return {
        "file": str(config.file), "audio_s": audio_s, "model": settings.asr.model, "threads": config.threads,
        "batch_size": settings.asr.max_batch_size, "machine": machine(), "systems": rows, "scaling": scaling,
        "identical_text": len(texts) == 1, "name": config.name or f"cpu-{config.threads}thread",
    }


def format_scale(report: dict[str, Any]) -> str:
    """The report as a table and a verdict line."""
    rows = []
    for name, row in report["systems"].items():
        loads = [r["load_before"] for r in row["runs"]] + [r["load_after"] for r in row["runs"]]
        rows.append([name, row["wall_s"], row["rtfx"], len(row["runs"]), f"{min(loads):.2f}-{max(loads):.2f}"])
    out = [f"{report['file']}: {report['audio_s']:.1f} s of audio, {report['model']}, "
           f"{report['threads']} thread(s) per replica, batch {report['batch_size']}; machine {report['machine']}",
           text_table(["system", "wall s (median)", "RTFx", "runs", "load 1 min"], rows)]
    out += [f"{p['replicas']} replica(s): RTFx {p['rtfx']:.1f}, {p['ratio']:.2f}x one replica" for p in report["scaling"]]
    out.append("texts identical across all runs" if report["identical_text"] else "WARNING: texts differ between runs")
    return "\n".join(out)


def capacity_entry(report: dict[str, Any], gpus: float = 0.0) -> dict[str, Any]:
    """The report as one ``replicas[]`` entry of a capacity ``RESULTS.json`` (see ``voxserve.distributed.planner``)."""
    one = next((p["rtfx"] for p in report["scaling"] if p["replicas"] == 1), None)
    asr: dict[str, Any] = {"scaling": [{"replicas": p["replicas"], "rtfx": round(p["rtfx"], 3)} for p in report["scaling"]]}
    if one is not None:
        asr["rtfx"] = round(one, 3)
    return {"name": report["name"], "model": report["model"], "cpus": report["threads"], "gpus": gpus, "asr": asr,
            "measured": {"file": report["file"], "audio_s": report["audio_s"], "machine": report["machine"]}}


def merge_results(path: Path, entry: dict[str, Any], machine_info: dict[str, Any]) -> dict[str, Any]:
    """Add (or replace, by name) one entry in a capacity ``RESULTS.json``; returns the whole document."""
    from voxserve.distributed.planner import SCHEMA, parse_results

    doc: dict[str, Any] = {"schema": SCHEMA, "machine": machine_info, "replicas": []}
    if path.is_file():
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("schema") != SCHEMA:
            raise InvalidInput(f"{path} is not a {SCHEMA} file")
    doc["machine"] = machine_info  # the latest measurement's machine; each entry keeps its own
    doc["replicas"] = [e for e in doc.get("replicas", []) if e.get("name") != entry["name"]] + [entry]
    parse_results(doc)  # what is written must plan
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return doc

