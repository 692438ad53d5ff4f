"""``voxserve bench soak``: many live streams at real-time pace for a while, with slow readers and clients that
vanish, plus file uploads at the same time, against a server in its own process (or one given by URL).

It checks what a user cares about after hours of traffic: no text lost, mixed between streams or out of
order; the server's memory (RSS) and open file descriptors back near their baseline once the traffic is
gone; and it records latency percentiles and the machine's load. See docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from voxserve.bench.common import machine
from voxserve.bench.live import free_port
from voxserve.bench.soak_clients import Clip, StreamOutcome, UploadOutcome, load_clips, run_stream, run_uploads
from voxserve.errors import InvalidInput
from voxserve.formats import text_table
from voxserve.stats import percentile

RSS_PER_STREAM_MB = 30
"""What each live stream may add to the server's settled RSS: its buffers and its VAD's two Silero states
(a few kB each: the weights are shared by every stream; in ONNX Runtime each state took 13 MB, see
:data:`voxserve.backends.vad.silero.FRESH_AFTER_S`)."""


@dataclass(frozen=True)
class SoakConfig:
    """What to run.

    Attributes:
        streams: concurrent live streams.
        seconds: audio each stream plays (whole clips, at real-time pace).
        slow: fraction of streams whose client reads slowly.
        vanish: fraction of streams whose client drops its connection mid-clip.
        uploads: concurrent upload clients (each uploads clips back to back while the streams run).
        model: the server's model (a registered name), or None for its default.
        url: an already running server instead of a private one (then resources are measured only with pid).
        pid: the process id of that server, to measure its RSS and descriptors.
        settle_s: how long to wait after the traffic for resources to come back.
        rss_slack_mb: how far above the warm baseline the RSS may stay, plus :data:`RSS_PER_STREAM_MB` per
            stream: the allocator keeps the peak working set of the traffic (measured: +130 MB at 4 streams,
            +210..+260 MB at 16, flat over the run, before live streams had two Silero states; +168..+209 MB at
            4 streams and +244 MB at 8 after: about 18 MB more per stream); a leak shows as growth in the run's
            second half instead (at most 100 MB).
    """

    streams: int = 4
    seconds: float = 20.0
    slow: float = 0.25
    vanish: float = 0.25
    uploads: int = 1
    model: str | None = None
    url: str | None = None
    pid: int | None = None
    settle_s: float = 15.0
    rss_slack_mb: float = 100.0

    def validate(self) -> None:
        if self.streams < 1 or self.seconds <= 0 or self.uploads < 0:
            raise InvalidInput("streams must be >= 1, seconds > 0 and uploads >= 0")
        if not (0 <= self.slow <= 1 and 0 <= self.vanish <= 1 and self.slow + self.vanish <= 1):
            raise InvalidInput("slow and vanish are fractions of the streams (together at most 1)")


# ------------------------------------------------------------------------------------------- server process


class PrivateServer:
    """``voxserve serve`` in a child process on a free loopback port (its RSS and fds are measured)."""

    def __init__(self, config: SoakConfig, log: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir = tempfile.TemporaryDirectory(prefix="voxserve-soak-")
        env = {**os.environ, "VOXSERVE_LIVE__MAX_STREAMS": str(config.streams + 8),
               "VOXSERVE_SERVER__MAX_CONCURRENT_PER_KEY": str(config.uploads + 8),
               "VOXSERVE_SERVER__MAX_INFLIGHT": str(config.uploads + 64)}
        args = [sys.executable, "-m", "voxserve.cli", "serve", "--host", "127.0.0.1", "--port", str(self.port),
                "--data-dir", self._dir.name] + (["--model", config.model] if config.model else [])
        self._log_file = open(Path(self._dir.name) / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(args, env=env, stdout=self._log_file, stderr=subprocess.STDOUT)
        self._log = log

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}: {self.log_tail()}")
            try:
                if httpx.get(self.url + "/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the server was not ready in {timeout_s:.0f} s: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        path = Path(self._dir.name) / "server.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._log_file.close()
        self._dir.cleanup()


def resources(pid: int | None) -> dict[str, float]:
    """RSS (MB), open fds and CPU seconds of a process (``/proc``); empty without a pid."""
    if pid is None or not Path(f"/proc/{pid}").exists():
        return {}
    rss = next(int(line.split()[1]) / 1024 for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return {"rss_mb": round(rss, 1), "fds": len(os.listdir(f"/proc/{pid}/fd")), "cpu_s": round(cpu, 1)}


def live_streams(url: str) -> float:
    """The server's ``voxserve_live_streams`` gauge."""
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("voxserve_live_streams "):
            return float(line.split()[1])
    return 0.0


# ----------------------------------------------------------------------------------------------- the run


async def _traffic(url: str, clips: list[Clip], config: SoakConfig) -> tuple[list[StreamOutcome], list[UploadOutcome]]:
    n = config.streams
    kinds = (["vanish"] * round(n * config.vanish) + ["slow"] * round(n * config.slow))[:n]
    kinds += ["normal"] * (n - len(kinds))
    kinds = [kinds[(i * 7) % n] if n % 7 else kinds[i] for i in range(n)]  # spread the kinds over the streams
    playlists = [[clips[(i + k) % len(clips)] for k in range(64)] for i in range(n)]

    async def stream(i: int) -> StreamOutcome:
        await asyncio.sleep(i * min(0.1, 5.0 / n))  # a ramp: clients do not all connect in the same tick
        return await run_stream(url, playlists[i], config.seconds, kinds[i], seed=i)

    uploads = [run_uploads(url, clips, config.seconds, offset=j) for j in range(config.uploads)]
    streams, done = await asyncio.gather(asyncio.gather(*(stream(i) for i in range(n))), asyncio.gather(*uploads))
    return list(streams), list(done)


def run_soak(config: SoakConfig, clips: list[Clip], log: Any = print) -> dict[str, Any]:
    """Warm the server up, measure its baseline, run the traffic, let it settle, measure again."""
    config.validate()
    if not clips:
        raise InvalidInput("no clips to play")
    server = PrivateServer(config, log) if config.url is None else None
    url = config.url or (server.url if server else "")
    pid = server.process.pid if server else config.pid
    try:
        if server is not None:
            log(f"starting a server on {url} ...")
            server.wait_ready()
        asyncio.run(_traffic(url, clips, warm_up(config)))  # first-use allocations are not leaks
        time.sleep(2.0)
        before, load_before = resources(pid), os.getloadavg()[0]
        log(f"baseline {before}; {config.streams} streams x {config.seconds:g} s, {config.uploads} upload clients")
        started = time.monotonic()
        timeline: list[tuple[float, float]] = []
        sampler = _Sampler(pid, started, timeline)
        try:
            streams, uploads = asyncio.run(_traffic(url, clips, config))
        finally:
            sampler.stop()
        wall = time.monotonic() - started
        during = resources(pid)
        deadline = time.monotonic() + config.settle_s
        while time.monotonic() < deadline and (live_streams(url) > 0 or resources(pid).get("fds", 0) > before.get("fds", 0)):
            time.sleep(0.5)
        after = resources(pid)
        report = _report(config, clips, streams, uploads, wall, before, during, after, live_streams(url))
        report["load_1min"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
        report["rss_timeline"] = [[round(t, 1), mb] for t, mb in timeline]
        growth = report["rss_second_half_growth_mb"] = _second_half_growth(timeline, before.get("rss_mb"))
        report["ok"] = report["ok"] and (growth is None or growth < 100)
        return report
    finally:
        if server is not None:
            server.stop()


WARM_UP_S = 6.0
"""How long the warm-up traffic plays before the baseline is taken."""


def warm_up(config: SoakConfig) -> SoakConfig:
    """The traffic that runs before the baseline: as many streams and upload clients as the soak itself (batches
    of every size the soak will form, one model arena per size, are allocated before the baseline, not in the
    run's second half where they would read as a leak), each for :data:`WARM_UP_S` seconds, no client vanishing."""
    return replace(config, seconds=min(config.seconds, WARM_UP_S), vanish=0)


class _Sampler:
    """Samples the server's RSS every 2 s while the traffic runs (a leak grows steadily; an allocator that
    keeps freed memory levels off)."""

    def __init__(self, pid: int | None, started: float, timeline: list[tuple[float, float]]) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pid, started, timeline), daemon=True)
        self._thread.start()

    def _run(self, pid: int | None, started: float, timeline: list[tuple[float, float]]) -> None:
        while not self._stop.wait(2.0):
            found = resources(pid)
            if found:
                timeline.append((time.monotonic() - started, found["rss_mb"]))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _second_half_growth(timeline: list[tuple[float, float]], baseline_mb: float | None = None) -> float | None:
    """RSS at the end of the traffic minus the higher of its peak in the first half and the warm baseline (None
    for runs too short to tell). The baseline counts because the allocator may hand memory back early in the
    run: in one clean-clone run RSS fell from a 666 MB baseline to 623 MB in the first half and ended at 733 MB,
    67 MB above the baseline, which against the dip alone read as 110 MB of second-half growth."""
    if len(timeline) < 10:
        return None
    half = timeline[len(timeline) // 2][0]
    first = max(mb for t, mb in timeline if t <= half)
    if baseline_mb is not None:
        first = max(first, baseline_mb)
    return round(timeline[-1][1] - first, 1)


def _report(config: SoakConfig, clips: list[Clip], streams: list[StreamOutcome], uploads: list[UploadOutcome],
            wall: float, before: dict[str, float], during: dict[str, float], after: dict[str, float],
            live_left: float) -> dict[str, Any]:
    checks = [s.check(clips) for s in streams]
    total = {k: sum(c[k] for c in checks)
             for k in ("items", "lost", "out_of_order", "mixed", "unmatched", "empty", "failed", "shed",
                       "dropped_with_session")}
    latency = [x for s in streams if s.kind == "normal" for x in s.latency_s]
    slow_latency = [x for s in streams if s.kind == "slow" for x in s.latency_s]
    upload_latency = [x for u in uploads for x in u.latency_s]
    upload = {"ok": sum(u.ok for u in uploads), "mixed": sum(u.mixed for u in uploads),
              "errors": [e for u in uploads for e in u.errors]}
    slack = config.rss_slack_mb + RSS_PER_STREAM_MB * config.streams
    resources_ok = not before or (after.get("fds", 0) <= before["fds"] + 2
                                  and after.get("rss_mb", 0) <= before["rss_mb"] + slack)
    ok = (total["lost"] == total["mixed"] == total["out_of_order"] == 0 and upload["mixed"] == 0
          and live_left == 0 and resources_ok)
    return {
        "ok": ok, "config": asdict(config), "machine": machine(), "wall_s": round(wall, 1),
        "clips": [c.name for c in clips], "streams": total,
        "streams_by_kind": {k: sum(1 for s in streams if s.kind == k) for k in ("normal", "slow", "vanish")},
        "audio_s": round(sum(s.audio_s for s in streams), 1),
        "close_codes": sorted({str(s.close_code) for s in streams}),
        "error_codes": sorted({e for s in streams for e in s.errors}),
        "latency_s": _percentiles(latency), "slow_reader_latency_s": _percentiles(slow_latency),
        "server_latency_ms": _percentiles([x for s in streams for x in s.server_latency_ms]),
        "uploads": {**upload, "latency_s": _percentiles(upload_latency)},
        "suspect_items": [x for s in streams for x in s.suspects][:60],
        "resources": {"before": before, "during": during, "after": after, "live_streams_left": live_left},
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {"n": len(values), **{f"p{q}": round(percentile(values, q), 3) for q in (50, 90, 95, 99)},
            "max": round(max(values), 3)}


def format_soak(report: dict[str, Any]) -> str:
    """The report as a few readable lines."""
    s, u, r = report["streams"], report["uploads"], report["resources"]
    lat = report["latency_s"]
    rows = [
        ["streams", f"{sum(report['streams_by_kind'].values())} ({report['streams_by_kind']})"],
        ["items committed", s["items"]], ["lost / mixed / out of order", f"{s['lost']} / {s['mixed']} / {s['out_of_order']}"],
        ["failed / empty / shed (1013)", f"{s['failed']} / {s['empty']} / {s['shed']}"],
        ["unmatched (misrecognised)", s["unmatched"]],
        ["commit -> final p50 / p95 / p99", f"{lat.get('p50')} / {lat.get('p95')} / {lat.get('p99')} s"],
        ["uploads ok / mixed / errors", f"{u['ok']} / {u['mixed']} / {len(u['errors'])}"],
        ["upload p50 / p95", f"{u['latency_s'].get('p50')} / {u['latency_s'].get('p95')} s"],
        ["RSS before / during / after", f"{r['before'].get('rss_mb')} / {r['during'].get('rss_mb')} / {r['after'].get('rss_mb')} MB"],
        ["fds before / after", f"{r['before'].get('fds')} / {r['after'].get('fds')}"],
        ["load (1 min) before / after", f"{report['load_1min']['before']} / {report['load_1min']['after']}"],
        ["verdict", "OK" if report["ok"] else "FAILED"],
    ]
    return text_table(["soak", "value"], rows)


def default_clips() -> list[Clip]:
    """English clips with references: the corpus ``asr/`` folder when present, else the test data."""
    from voxserve.eval.corpus import default_corpus, find_items

    root = default_corpus() or Path(__file__).resolve().parents[2] / "tests" / "data"
    items = [(i.audio, i.reference.read_text(encoding="utf-8")) for i in find_items(root, ("asr",)) if i.language == "en"]
    return load_clips(items)
