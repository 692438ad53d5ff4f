"""Server benchmark: N concurrent clients posting files over HTTP to a real voxserve server, vs a baseline of
faster-whisper called per request from a thread pool (no HTTP at all), in the same process run.

Both answer the same requests (the same files, in the same order per client). Throughput is audio seconds
per wall second; latency is per request (p50/p95). The baseline gets the configuration that suits
concurrent requests best on CPU: one single-threaded worker per core (``cpu_threads=1, num_workers=cores``).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from voxserve.audio import probe
from voxserve.bench.common import machine
from voxserve.config import Settings
from voxserve.formats import text_table
from voxserve.server.thread import ServerThread
from voxserve.stats import percentile


@dataclass(frozen=True)
class ServerBenchConfig:
    """What to run."""

    files: tuple[Path, ...]
    clients: tuple[int, ...] = (1, 8)
    requests_per_client: int = 8
    beam_size: int = 1




def _drive(n_clients: int, plan: list[list[Path]], send: Callable[[Path], str], durations: dict[Path, float]) -> dict[str, Any]:
    latencies: list[float] = []
    failures = 0

    def client(files: list[Path]) -> None:
        nonlocal failures
        for path in files:
            start = time.perf_counter()
            try:
                send(path)
            except Exception:  # noqa: BLE001 - counted, reported
                failures += 1
                continue
            latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    with ThreadPoolExecutor(n_clients) as pool:
        list(pool.map(client, plan[:n_clients]))
    wall = time.perf_counter() - started
    audio = sum(durations[p] for files in plan[:n_clients] for p in files)
    return {
        "clients": n_clients, "requests": sum(len(f) for f in plan[:n_clients]), "failures": failures,
        "wall_s": wall, "audio_s": audio, "throughput": audio / wall,
        "p50_s": percentile(latencies, 50), "p95_s": percentile(latencies, 95),
        "mean_s": statistics.fmean(latencies) if latencies else float("nan"),
    }


def run_server_bench(settings: Settings, config: ServerBenchConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure voxserve over HTTP and the faster-whisper baseline; return a JSON-able report."""
    durations = {p: probe(p).duration_s or 0.0 for p in config.files}
    most = max(config.clients)
    plan = [[config.files[(c + i) % len(config.files)] for i in range(config.requests_per_client)] for c in range(most)]
    results: list[dict[str, Any]] = []
    with ServerThread(settings) as server, httpx.Client(timeout=600) as http:
        def post(path: Path) -> str:
            with open(path, "rb") as f:
                r = http.post(server.url + "/v1/audio/transcriptions", files={"file": (path.name, f)},
                              data={"model": settings.asr.model, "response_format": "json"})
            r.raise_for_status()
            return str(r.json()["text"])

        post(config.files[0])  # warm-up
        model_dir = str(getattr(server.app.state.ctx.vox.asr().model, "directory", ""))
        for n in config.clients:
            results.append({"system": "voxserve (HTTP)", **_drive(n, plan, post, durations)})
            log(f"voxserve {n} clients: {results[-1]['throughput']:.1f} audio s/s")
    baseline = _baseline(model_dir, config.beam_size)
    baseline(config.files[0])
    for n in config.clients:
        results.append({"system": "faster-whisper per request", **_drive(n, plan, baseline, durations)})
        log(f"baseline {n} clients: {results[-1]['throughput']:.1f} audio s/s")
    ratios = {}
    for n in config.clients:
        ours = next(r for r in results if r["clients"] == n and r["system"].startswith("voxserve"))
        peer = next(r for r in results if r["clients"] == n and r["system"].startswith("faster"))
        ratios[n] = ours["throughput"] / peer["throughput"]
    return {"machine": machine(), "files": [str(p) for p in config.files], "results": results,
            "throughput_ratio": ratios}


def _baseline(model_dir: str, beam_size: int) -> Callable[[Path], str]:
    from faster_whisper import WhisperModel

    cores = os.cpu_count() or 1
    model = WhisperModel(model_dir, device="cpu", compute_type="int8", cpu_threads=1, num_workers=cores,
                         local_files_only=True)

    def transcribe(path: Path) -> str:
        segments, _ = model.transcribe(str(path), beam_size=beam_size, vad_filter=True)
        return " ".join(s.text.strip() for s in segments)

    return transcribe


def format_server(report: dict[str, Any]) -> str:
    """The report as a table."""
    rows = [[r["system"], r["clients"], r["requests"], r["failures"], r["throughput"], r["p50_s"], r["p95_s"]]
            for r in report["results"]]
    m = report["machine"]
    lines = [f"{len(report['files'])} files; {m['cpu']}, {m['cores']} cores, load {m['load_1min']}",
             text_table(["system", "clients", "requests", "failed", "audio s/s", "p50 s", "p95 s"], rows)]
    lines += [f"{n} clients: voxserve / baseline throughput = {ratio:.2f}x" for n, ratio in report["throughput_ratio"].items()]
    return "\n".join(lines)
