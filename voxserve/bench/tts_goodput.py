"""``voxserve bench tts --rates 2,4,8 --seconds 30``: first audio and gap-free streams under random arrivals.

At each rate, requests arrive as a seeded Poisson process for ``seconds``; each asks for one ~90-character
sentence (drawn from :data:`SENTENCES`). voxserve answers them over real HTTP (a server on a loopback port in
this process, ``POST /v1/audio/speech`` with ``response_format=pcm``, the body read as it arrives, as a user's
player meets it); the baseline is the same sentences through ``PiperVoice.synthesize`` per request in a thread
pool, at the same arrival times, right after (so a change of machine load affects both alike).

Per request: TTFB (request sent -> first audio byte) and whether the stream is *gap-free*: every piece of audio
arrives before the audio received before it has played out, for a player that starts at the first byte, and
for one with a ``client_buffer_s`` buffer. Per rate and system: TTFB p50/p95/p99, the share of gap-free
streams (failed requests count as not gap-free) and the load average before and after.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx

from voxserve.bench.common import machine
from voxserve.bench.tts import Trace, _ms, piper_traces
from voxserve.config import Settings
from voxserve.errors import InvalidInput
from voxserve.formats import text_table
from voxserve.server.thread import ServerThread
from voxserve.stats import percentile

SENTENCES = (
    "The train to Boston leaves from platform four at ten past nine, so please be there early.",
    "Your appointment with Doctor Lee has been moved to Thursday afternoon at a quarter past two.",
    "Thanks for waiting; I found your order, and the replacement part ships out first thing tomorrow.",
    "The museum opens at nine on weekdays, but the east wing stays closed until the roof is repaired.",
    "If the light on the router keeps blinking orange, unplug it for thirty seconds and try again.",
    "We had heavy rain overnight, and the river is expected to rise a little more before the weekend.",
    "Please remember to bring your passport, a printed ticket, and a pen for the customs form.",
    "The recipe calls for two cups of flour, a pinch of salt, and butter that is soft but still cool.",
    "Our support line is open every day from eight in the morning until eight in the evening.",
    "She parked the old blue car behind the bakery and walked the rest of the way to the station.",
    "The meeting ran long, so the budget review will move to next Monday, right after lunch.",
    "Turn left at the second traffic light, then follow the signs for the hospital's main entrance.",
    "The library asks that borrowed books come back within three weeks, or they can be renewed online.",
    "A strong wind from the north will bring colder air tonight, with frost likely in the valleys.",
    "Your balance is now fifty two dollars, and the next payment is due on the first of the month.",
    "He tuned the guitar twice before the show, yet the first song still sounded a little sharp.",
    "Children under twelve must wear a helmet, and everyone should stay on the marked trails.",
    "The kitchen will close in ten minutes, so if you would like dessert, now is the time to order.",
    "We moved the server room upstairs last spring, which finally fixed the problem with the heat.",
    "When the kettle clicks off, pour the water slowly over the grounds and let it rest a minute.",
    "The package was left with your neighbour at number twelve because nobody answered the door.",
    "Most of the village still gathers in the square each summer for the long festival of lights.",
    "For security reasons, we will never ask you for your password by email or over the phone.",
    "The final chapter explains how the two brothers rebuilt the farm after the great flood.",
)
"""What the requests ask for: varied sentences of 87-97 characters (one sentence each, as an agent's reply starts)."""


@dataclass(frozen=True)
class GoodputConfig:
    """What to measure.

    Attributes:
        rates: requests per second, one run per rate.
        seconds: how long requests keep arriving at each rate.
        voice: the voice (None: the server's default; the baseline loads the same file).
        client_buffer_s: the buffer of the second player.
        slack_s: lateness below this does not count as a gap (0: strictly before the audio runs out).
        seed: for the arrival times and the sentences.
        baseline: also run Piper per request (off: voxserve only, to compare settings quickly).
    """

    rates: tuple[float, ...] = (2.0, 4.0, 8.0)
    seconds: float = 30.0
    voice: str | None = None
    client_buffer_s: float = 0.25
    slack_s: float = 0.0
    seed: int = 0
    baseline: bool = True

    def validate(self) -> None:
        """Raise :class:`InvalidInput` for rates or a duration that cannot run."""
        if not self.rates or any(r <= 0 for r in self.rates) or self.seconds <= 0:
            raise InvalidInput("rates must be positive numbers and seconds more than 0", param="rates")


@dataclass(frozen=True)
class Arrivals:
    """One rate's requests: arrival times (seconds from the start) and the sentence of each."""

    times: list[float]
    texts: list[str]


def poisson_arrivals(rate: float, seconds: float, seed: int) -> Arrivals:
    """Arrival times of a Poisson process of ``rate`` per second over ``seconds`` (exponential gaps), each with a
    sentence drawn from :data:`SENTENCES`; the same ``seed`` gives the same requests."""
    rng = random.Random(f"{seed}:{rate}")
    times: list[float] = []
    t = rng.expovariate(rate)
    while t < seconds:
        times.append(t)
        t += rng.expovariate(rate)
    return Arrivals(times, [rng.choice(SENTENCES) for _ in times])


@dataclass
class HttpTrace(Trace):
    """A :class:`Trace` with the response's HTTP status (0: the connection failed)."""

    status: int = 0


async def _http_request(http: httpx.AsyncClient, body: dict[str, Any], at: float, t0: float) -> HttpTrace:
    """One request at ``t0 + at``: the time it was sent, its status, and each piece of the body as it arrived
    (no chunks when it failed)."""
    await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
    trace = HttpTrace(time.monotonic())
    received = 0
    try:
        async with http.stream("POST", "/v1/audio/speech", json=body) as response:
            trace.status = response.status_code
            if response.status_code != 200:
                await response.aread()
                return trace
            bytes_per_s = 2 * int(response.headers["x-voxserve-sample-rate"])  # 16-bit mono
            async for data in response.aiter_raw():
                if data:
                    trace.chunks.append((time.monotonic(), received / bytes_per_s, len(data) / bytes_per_s))
                    received += len(data)
    except httpx.HTTPError:
        trace.chunks.clear()
    return trace


async def _voxserve_rate(url: str, arrivals: Arrivals, voice: str | None) -> list[Trace]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as http:
        t0 = time.monotonic()
        bodies = [{"model": "tts-1", "input": text, "response_format": "pcm",
                   **({"voice": voice} if voice else {})} for text in arrivals.texts]
        return list(await asyncio.gather(*(_http_request(http, b, at, t0) for b, at in zip(bodies, arrivals.times))))


def _voxserve_traces(url: str, arrivals: Arrivals, voice: str | None) -> list[Trace]:
    return asyncio.run(_voxserve_rate(url, arrivals, voice))


def _row(system: str, rate: float, traces: list[Trace], config: GoodputConfig, load: tuple[Any, Any],
         wall_s: float) -> dict[str, Any]:
    done = [t for t in traces if t.chunks]
    ttfb = [t.ttfb_s for t in done]
    gap_free = [t for t in done if t.lateness_s() <= config.slack_s]
    buffered = [t for t in done if t.lateness_s(config.client_buffer_s) <= config.slack_s]
    n = len(traces)
    refused = Counter(str(getattr(t, "status", 0)) for t in traces if not t.chunks)
    return {
        "system": system, "rate": rate, "requests": n, "failed": n - len(done), "failed_by_status": dict(refused),
        "ttfb_p50_ms": _ms(percentile(ttfb, 50)), "ttfb_p95_ms": _ms(percentile(ttfb, 95)),
        "ttfb_p99_ms": _ms(percentile(ttfb, 99)),
        "gap_free": round(len(gap_free) / n, 3) if n else None,
        "gap_free_buffered": round(len(buffered) / n, 3) if n else None,
        "worst_lateness_ms": _ms(max((t.lateness_s() for t in done), default=float("nan"))),
        "audio_s": round(sum(c[2] for t in done for c in t.chunks), 1), "wall_s": round(wall_s, 1),
        "load_before": load[0], "load_after": load[1],
    }


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def run_goodput(settings: Settings, config: GoodputConfig, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure voxserve over HTTP and Piper per request at every rate; return the report."""
    from piper import PiperVoice

    config.validate()
    rows: list[dict[str, Any]] = []
    before = machine()
    with ServerThread(settings) as server:
        tts = server.app.state.ctx.vox.tts()
        info = tts.voice_info(config.voice)
        if info.backend != "piper" or info.path is None:
            raise InvalidInput("the baseline needs a Piper voice", param="voice")
        baseline = PiperVoice.load(info.path)
        for _ in baseline.synthesize(SENTENCES[0]):
            pass
        _voxserve_traces(server.url, Arrivals([0.0], [SENTENCES[0]]), config.voice)  # warm-up
        for rate in config.rates:
            arrivals = poisson_arrivals(rate, config.seconds, config.seed)
            runs: dict[str, Callable[[], list[Trace]]] = {
                "voxserve (HTTP)": partial(_voxserve_traces, server.url, arrivals, config.voice)}
            if config.baseline:
                runs["piper-per-request"] = partial(piper_traces, baseline, arrivals.times, arrivals.texts)
            for system, run in runs.items():
                load_before, started = _loadavg(), time.monotonic()
                traces = run()
                rows.append(_row(system, rate, traces, config, (load_before, _loadavg()), time.monotonic() - started))
                r = rows[-1]
                log(f"{system:18s} {rate:g}/s: {r['requests']} requests, TTFB p50/p95/p99 {r['ttfb_p50_ms']}/"
                    f"{r['ttfb_p95_ms']}/{r['ttfb_p99_ms']} ms, gap-free {r['gap_free']} ({r['gap_free_buffered']} "
                    f"buffered), load {r['load_before']} -> {r['load_after']}")
    return {"voice": info.name, "mean_chars": round(sum(map(len, SENTENCES)) / len(SENTENCES)),
            "config": {"rates": list(config.rates), "seconds": config.seconds, "seed": config.seed,
                       "client_buffer_s": config.client_buffer_s, "slack_s": config.slack_s},
            "rows": rows, "ttfb_p95_ratio": _ratios(rows), "machine_before": before, "machine_after": machine()}


def _ratios(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per rate: Piper's TTFB p95 / voxserve's (above 1: voxserve starts sooner)."""
    by = {(r["system"], r["rate"]): r for r in rows}
    out: dict[str, float | None] = {}
    for (system, rate), row in by.items():
        peer = by.get(("piper-per-request", rate))
        if system.startswith("voxserve") and peer:
            ours, theirs = row["ttfb_p95_ms"], peer["ttfb_p95_ms"]
            out[f"{rate:g}"] = round(theirs / ours, 2) if ours and theirs else None
    return out


def format_goodput(report: dict[str, Any]) -> str:
    """The report as a text table."""
    headers = ["system", "rate", "requests", "failed", "ttfb_p50_ms", "ttfb_p95_ms", "ttfb_p99_ms", "gap_free",
               "gap_free_buffered", "worst_lateness_ms", "load_before", "load_after"]
    c = report["config"]
    rows = [[" ".join(map(str, v)) if isinstance(v, list) else v for v in (r[h] for h in headers)] for r in report["rows"]]
    m0, m1 = report["machine_before"], report["machine_after"]
    return "\n".join([
        f"voice {report['voice']}; Poisson arrivals for {c['seconds']:g} s per rate (seed {c['seed']}), one "
        f"~{report['mean_chars']}-character sentence each; gap-free = every piece arrives before the audio received "
        f"so far has played (from the first byte; buffered: playback starts {c['client_buffer_s'] * 1000:.0f} ms later)",
        text_table(headers, rows),
        "TTFB p95, Piper per request / voxserve: "
        + ", ".join(f"{rate}/s {ratio}x" for rate, ratio in report["ttfb_p95_ratio"].items()),
        f"machine: {m0['cpu']}, {m0['cores']} cores; load average (1/5/15 min) per row above; 1-min load "
        f"{m0['load_1min']} before, {m1['load_1min']} after",
    ])
