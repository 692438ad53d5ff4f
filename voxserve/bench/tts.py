"""``voxserve bench tts``: streaming synthesis capacity against the same Piper voice used per request.

For each number of concurrent streams N (doubling up to ``--streams``, then a bisection between the last level
every stream passed and the first one that failed), N clients start within ``ramp_s`` seconds and each asks for
the same paragraph. Two systems run in turn, in the same process, on the same voice:

- voxserve: ``TtsService.stream`` (clause-first segmentation, split Piper graph, decoder windows through the
  shared batcher, urgency scheduling);
- the baseline: ``PiperVoice.synthesize`` per request in a thread pool of N threads (one sentence per chunk).

A stream is *real-time* when every chunk arrives before a listener needs it (a ``slack_s`` grace absorbs
scheduling jitter). Two listeners are scored from the same run: one who starts playing at the first chunk, and
one with a ``client_buffer_s`` jitter buffer (playback starts that long after the first chunk, so the audio
starts at TTFB + buffer: the *playback delay*). Reported per level: TTFB p50/p95 (request -> first audio),
time to first sentence, real-time streams for both listeners, the worst lateness, this process's CPU use and
the machine load. Capacity is the largest N at which every stream was real-time, for each listener, overall
and with the p95 playback delay within ``ttfb_budget_s``; the recommended admission limit is voxserve's
buffered capacity within the budget.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from voxserve.bench.common import machine
from voxserve.formats import text_table
from voxserve.stats import percentile
from voxserve.streaming.tts import SpeakOptions
from voxserve.streaming.tts_service import TtsService
from voxserve.types import Priority

PARAGRAPH = (
    "Good morning, and thank you for calling. Your order of three items shipped on March 3rd and should arrive "
    "within 2 days. The total came to $45.20, including tax. If anything is missing, reply to this message "
    "and we will sort it out right away. Have a wonderful day."
)


@dataclass(frozen=True)
class TtsBenchConfig:
    """What to measure.

    Attributes:
        max_streams: the highest N tried.
        text: what every client asks for.
        voice: the voice (None: the default; the baseline loads the same file).
        ramp_s: clients start at seeded random times within this many seconds.
        slack_s: lateness of a chunk below this is not an underrun.
        client_buffer_s: the jitter buffer of the second listener.
        ttfb_budget_s: the TTFB p95 that a level must meet to count for the admission limit.
        refine: bisection steps between the last passing and the first failing N.
        seed: for the start times.
        levels: run exactly these N (both systems, no search) when given.
    """

    max_streams: int = 16
    text: str = PARAGRAPH
    voice: str | None = None
    ramp_s: float = 1.0
    slack_s: float = 0.05
    client_buffer_s: float = 0.25
    ttfb_budget_s: float = 0.5
    refine: int = 2
    seed: int = 0
    levels: tuple[int, ...] = ()


class BatchSizes:
    """A :class:`~voxserve.engine.batcher.BatchObserver` that counts decoder batch sizes."""

    def __init__(self) -> None:
        self.sizes: Counter[int] = Counter()

    def on_batch(self, name: str, size: int, wait_s: float, run_s: float, queue_depth: int) -> None:
        """Count one batch."""
        self.sizes[size] += 1


@dataclass
class Trace:
    """One client's view: request time, and (arrival, audio start s, audio duration s) per chunk."""

    requested: float
    chunks: list[tuple[float, float, float]] = field(default_factory=list)
    first_sentence_at: float | None = None

    @property
    def ttfb_s(self) -> float:
        """Request -> first chunk."""
        return self.chunks[0][0] - self.requested if self.chunks else float("inf")

    def lateness_s(self, buffer_s: float = 0.0) -> float:
        """The worst delay of a chunk behind real-time playback that started ``buffer_s`` after the first chunk."""
        if not self.chunks:
            return float("inf")
        first = self.chunks[0][0] + buffer_s
        return max(0.0, *(arrival - (first + start) for arrival, start, _ in self.chunks))


@dataclass
class Level:
    """The results of one system at one N."""

    system: str
    streams: int
    traces: list[Trace]
    slack_s: float
    buffer_s: float
    load_before: float
    load_after: float
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def realtime(self, buffer_s: float = 0.0) -> int:
        """Streams that never fell behind playback (beyond the slack) with a client buffer of ``buffer_s``."""
        return sum(t.lateness_s(buffer_s) <= self.slack_s for t in self.traces)

    def all_realtime(self, buffer_s: float = 0.0) -> bool:
        """Whether every stream was real-time with a client buffer of ``buffer_s``."""
        return self.realtime(buffer_s) == self.streams

    def delay_p95_s(self, buffer_s: float = 0.0) -> float:
        """The p95 playback delay: TTFB plus the client buffer."""
        return (percentile([t.ttfb_s for t in self.traces], 95) if self.traces else float("inf")) + buffer_s

    def row(self) -> dict[str, Any]:
        """The level as a report row."""
        ttfb = [t.ttfb_s for t in self.traces]
        first = [(t.first_sentence_at or t.chunks[0][0]) - t.requested for t in self.traces if t.chunks]
        return {
            "system": self.system, "streams": self.streams, "realtime": self.realtime(),
            "realtime_buffered": self.realtime(self.buffer_s),
            "ttfb_p50_ms": _ms(percentile(ttfb, 50)), "ttfb_p95_ms": _ms(percentile(ttfb, 95)),
            "first_sentence_p50_ms": _ms(percentile(first, 50)), "first_sentence_p95_ms": _ms(percentile(first, 95)),
            "worst_lateness_ms": _ms(max(t.lateness_s() for t in self.traces)),
            "wall_s": round(self.wall_s, 2), "load_1min": f"{self.load_before:.1f}->{self.load_after:.1f}",
            **self.extra,
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None or not np.isfinite(seconds) else round(seconds * 1000, 1)


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _starts(n: int, config: TtsBenchConfig) -> list[float]:
    rng = random.Random(config.seed + n)
    return sorted(rng.uniform(0, config.ramp_s) for _ in range(n))


async def _voxserve_level(tts: TtsService, n: int, config: TtsBenchConfig) -> list[Trace]:
    t0 = time.monotonic()

    async def client(start: float) -> Trace:
        await asyncio.sleep(max(0.0, t0 + start - time.monotonic()))
        trace = Trace(time.monotonic())
        async with tts.stream(config.voice, SpeakOptions(priority=Priority.LIVE)) as stream:
            stream.push_text(config.text)
            stream.end_input()
            async for chunk in stream:
                trace.chunks.append((time.monotonic(), chunk.start_s, chunk.duration_s))
        trace.first_sentence_at = stream.stats.first_sentence_at
        return trace

    return list(await asyncio.gather(*(client(s) for s in _starts(n, config))))


def _baseline_level(voice: Any, n: int, config: TtsBenchConfig) -> list[Trace]:
    return piper_traces(voice, _starts(n, config), [config.text] * n)


def piper_traces(voice: Any, starts: list[float], texts: list[str]) -> list[Trace]:
    """The baseline: ``texts[i]`` through ``PiperVoice.synthesize`` at ``starts[i]`` seconds from now, each
    request on its own thread of a pool (one sentence per chunk)."""
    t0 = time.monotonic()
    rate = voice.config.sample_rate

    def client(start: float, text: str) -> Trace:
        time.sleep(max(0.0, t0 + start - time.monotonic()))
        trace = Trace(time.monotonic())
        played = 0.0
        for chunk in voice.synthesize(text):
            duration = len(chunk.audio_float_array) / rate
            trace.chunks.append((time.monotonic(), played, duration))
            played += duration
        return trace

    with ThreadPoolExecutor(max_workers=max(1, len(starts)), thread_name_prefix="piper-baseline") as pool:
        return list(pool.map(client, starts, texts))


class TtsBench:
    """Runs both systems over the levels and summarises capacity."""

    def __init__(
        self, tts: TtsService, config: TtsBenchConfig, batches: BatchSizes, log: Callable[[str], None] = lambda s: None
    ) -> None:
        self.tts = tts
        self.config = config
        self.batches = batches
        self.log = log

    def run(self) -> dict[str, Any]:
        """Measure and return the report (levels, capacities, recommendation, machine)."""
        from piper import PiperVoice

        info = self.tts.voice_info(self.config.voice)
        if info.backend != "piper" or info.path is None:
            raise ValueError("the baseline needs a Piper voice")
        baseline = PiperVoice.load(info.path)
        asyncio.run(self.tts.load(self.config.voice))
        self._warm(baseline)
        before = machine()
        levels: dict[str, dict[int, Level]] = {"voxserve": {}, "piper-per-request": {}}
        self._schedule({system: partial(self._run, system, baseline=baseline, out=levels[system]) for system in levels})
        return self._report(levels, before, info.name)

    def _schedule(self, runs: dict[str, Callable[[int], bool]]) -> None:
        """Doubling N until each system fails (or the maximum), then bisection per system; the systems run
        one after the other at each step, so that a change of machine load affects both alike."""
        if self.config.levels:
            for n in self.config.levels:
                for run in runs.values():
                    run(n)
            return
        top = self.config.max_streams
        doubling = sorted({min(top, 2**i) for i in range(top.bit_length() + 1)})
        good = {s: 0 for s in runs}
        bad: dict[str, int | None] = {s: None for s in runs}
        for n in doubling:
            active = [s for s in runs if bad[s] is None]
            if not active:
                break
            for system in active:
                if runs[system](n):
                    good[system] = n
                else:
                    bad[system] = n
        for _ in range(self.config.refine):
            for system, run in runs.items():
                high = bad[system]
                if high is not None and high - good[system] > 1:
                    mid = (good[system] + high) // 2
                    if run(mid):
                        good[system] = mid
                    else:
                        bad[system] = mid

    def _run(self, system: str, n: int, *, baseline: Any, out: dict[int, Level]) -> bool:
        load_before = _load()
        cpu_before = time.process_time()
        started = time.monotonic()
        if system == "voxserve":
            self.batches.sizes.clear()
            traces = asyncio.run(_voxserve_level(self.tts, n, self.config))
            extra: dict[str, Any] = {"decoder_batches": dict(sorted(self.batches.sizes.items()))}
        else:
            traces = _baseline_level(baseline, n, self.config)
            extra = {}
        wall = time.monotonic() - started
        extra["cpu_cores_used"] = round((time.process_time() - cpu_before) / wall, 2)  # this process, all threads
        audio_s = sum(c[2] for t in traces for c in t.chunks)
        extra["cpu_s_per_audio_s"] = round((time.process_time() - cpu_before) / audio_s, 4) if audio_s else None
        c = self.config
        level = Level(system, n, traces, c.slack_s, c.client_buffer_s, load_before, _load(), wall, extra)
        out[n] = level
        row = level.row()
        self.log(f"{system:18s} N={n:3d} realtime {level.realtime()}/{n} ({row['realtime_buffered']} buffered)  TTFB p50 {row['ttfb_p50_ms']} ms "
                 f"p95 {row['ttfb_p95_ms']} ms  worst lateness {row['worst_lateness_ms']} ms  load {row['load_1min']}"
                 f"  cores used {extra['cpu_cores_used']}  CPU-s/audio-s {extra['cpu_s_per_audio_s']}")
        return level.all_realtime(self.config.client_buffer_s)

    def _warm(self, baseline: Any) -> None:
        for _ in baseline.synthesize("Warm up."):
            pass
        warm = TtsBenchConfig(text="Warm up, please.", voice=self.config.voice, ramp_s=0.0)
        asyncio.run(_voxserve_level(self.tts, 1, warm))

    def _report(self, levels: dict[str, dict[int, Level]], before: dict[str, Any], voice: str) -> dict[str, Any]:
        budget, buffer = self.config.ttfb_budget_s, self.config.client_buffer_s
        summary: dict[str, Any] = {}
        for system, by_n in levels.items():
            cap: dict[str, int] = {}
            for label, b in (("at_first_audio", 0.0), ("buffered", buffer)):
                cap[f"realtime_streams_{label}"] = _capacity(by_n, b, None)
                cap[f"within_budget_{label}"] = _capacity(by_n, b, budget)
            summary[system] = cap
        vox, base = summary["voxserve"], summary["piper-per-request"]
        return {
            "voice": voice, "text_chars": len(self.config.text), "config": {
                "max_streams": self.config.max_streams, "ramp_s": self.config.ramp_s, "slack_s": self.config.slack_s,
                "client_buffer_s": buffer, "ttfb_budget_ms": budget * 1000},
            "levels": [lv.row() for by_n in levels.values() for lv in sorted(by_n.values(), key=lambda x: x.streams)],
            "capacity": summary,
            "ratios": {key: _ratio(vox[key], base[key]) for key in vox},
            "recommended_max_streams": max(1, vox["within_budget_buffered"]),
            "machine_before": before, "machine_after": machine(),
        }


def _capacity(by_n: dict[int, Level], buffer_s: float, delay_budget_s: float | None) -> int:
    """The largest N such that every level run at N or below had every stream real-time (with the client
    buffer) and, when a budget is given, a p95 playback delay within it; 0 when the first level failed."""
    best = 0
    for n in sorted(by_n):
        level = by_n[n]
        if not level.all_realtime(buffer_s) or (delay_budget_s is not None and level.delay_p95_s(buffer_s) > delay_budget_s):
            break
        best = n
    return best


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 2) if b else None


def format_tts_report(report: dict[str, Any]) -> str:
    """The report as text tables."""
    headers = ["system", "streams", "realtime", "realtime_buffered", "ttfb_p50_ms", "ttfb_p95_ms",
               "first_sentence_p50_ms", "first_sentence_p95_ms", "worst_lateness_ms", "cpu_cores_used", "load_1min"]
    rows = [[r.get(h) for h in headers] for r in report["levels"]]
    c = report["config"]
    buffer_ms = c["client_buffer_s"] * 1000
    columns = ["realtime_streams_at_first_audio", "within_budget_at_first_audio", "realtime_streams_buffered",
               "within_budget_buffered"]
    caps = [[system, *(cap[k] for k in columns)] for system, cap in report["capacity"].items()]
    caps.append(["ratio", *(report["ratios"][k] for k in columns)])
    m0, m1 = report["machine_before"], report["machine_after"]
    return "\n".join([
        f"voice {report['voice']}, {report['text_chars']} characters per stream, clients start within {c['ramp_s']} s, "
        f"lateness slack {c['slack_s'] * 1000:.0f} ms; 'buffered' = playback starts {buffer_ms:.0f} ms after the "
        "first audio",
        text_table(headers, rows),
        "",
        "real-time streams (largest N such that every level up to it had every stream real-time), and within a "
        "p95 playback delay of "
        f"{c['ttfb_budget_ms']:.0f} ms (TTFB, plus the buffer when buffered):",
        text_table(["system", "at first audio", "... within delay", f"buffered {buffer_ms:.0f} ms", "... within delay"],
              caps),
        f"machine: {m0['cpu']}, {m0['cores']} cores, load {m0['load_1min']} before, {m1['load_1min']} after "
        "(shared machine: other jobs' load changes the numbers between levels)",
        f"recommended admission limit: VOXSERVE_TTS__MAX_STREAMS={report['recommended_max_streams']}",
    ])
