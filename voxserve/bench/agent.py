"""``voxserve bench agent``: reply latency of the voice agent over scripted spoken turns, with embedded models.

The questions are spoken by voxserve's own TTS (before the clock starts) and fed to one agent session per
round like a microphone: 20 ms blocks in real time, silence between turns, and silence while the reply plays
(the session's playout clock would otherwise hear the next question as a barge-in). For every turn it records:

- ``total``: the true end of the user's speech (the last loud sample of the clip, as it was pushed) -> the
  first reply audio out of the session;
- the session's own breakdown (``ReplyLatency``): end of turn decided, ASR, retrieval, LLM time to first token,
  TTS time to first byte, and whether the reply was drafted during the silence;
- whether the reply text holds the expected answer (the tiny LLM is checked, not trusted);
- the machine's 1-minute load average (other jobs share the CPU: report it with every number).
"""

from __future__ import annotations

import asyncio
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxserve.agent.events import AgentEvent, ResponseAudio, ResponseDone, UserTurnEnded
from voxserve.audio import resample
from voxserve.bench.common import machine
from voxserve.formats import text_table
from voxserve.stats import percentile
from voxserve.streaming.tts import SpeakOptions
from voxserve.types import SAMPLE_RATE, Priority

SAMPLE_KNOWLEDGE = {
    "offices.md": """# Offices of Nordwind Travel

Nordwind Travel has three offices. Visitors should sign in at the front desk.

## Blue Lagoon office

The Blue Lagoon office is at 12 Harbour Road in Reykjavik. It is open from 8 am to 6 pm on weekdays.
The wifi password of the Blue Lagoon office is "seagull seven".
Parking is free behind the building.

## Red Rock office

The Red Rock office is at 40 Canyon Street in Sedona. It is open from 9 am to 5 pm, Monday to Saturday.
The wifi password of the Red Rock office is "copper kettle".

## Pine Hill office

- Address: 3 Forest Lane, Oslo.
- Opening hours: 10 am to 4 pm on weekdays.
- The wifi password of the Pine Hill office is "maple nine".
""",
    "policies.txt": """Refunds. A trip can be cancelled for a full refund up to 30 days before departure. After that, \
half of the price is refunded.

Pets. Dogs and cats may travel with their owners on all coach trips if they stay in a carrier.

Support. The support phone line is open every day from 7 am to 11 pm. Urgent travel problems can be reported \
at any hour by email.
""",
    "team.md": """# Team

The head of customer service is Maria Lopez. She joined the company in 2015.

The chief pilot for seaplane tours is Tom Berg. He has flown for twenty years.
""",
}


@dataclass(frozen=True)
class SpokenTurn:
    """A question, the words of which a right reply holds at least one, and words a wrong one holds (lower
    case)."""

    question: str
    expect: tuple[str, ...] = ()
    reject: tuple[str, ...] = ()


DEFAULT_TURNS = (
    SpokenTurn("What is the wifi password of the Blue Lagoon office?", ("seagull seven", "seagull 7")),
    SpokenTurn("And where is that office?", ("harbour", "harbor", "reykjavik")),
    SpokenTurn("When does the Red Rock office open?", ("9 am", "nine")),
    SpokenTurn("Can I bring my dog on a coach trip?", ("carrier",)),
    SpokenTurn("Who is the head of customer service?", ("maria", "lopez")),
    SpokenTurn("What is the wifi password at the Pine Hill office?", ("maple nine", "maple 9")),
    SpokenTurn("Is parking free at the Blue Lagoon office?", ("free",), ("not free", "no,", "not available")),
    SpokenTurn("How much is refunded if I cancel a week before departure?", ("half", "50")),
)
PARTS = ("total", "session_total", "end_of_turn", "asr", "retrieval", "llm_ttft", "tts_ttfb")


@dataclass(frozen=True)
class AgentBenchConfig:
    """What to run.

    Attributes:
        turns: the spoken turns of one conversation.
        rounds: conversations (a fresh session each, so the history does not grow without end).
        knowledge_dir: the knowledge folder (None: the built-in sample the default turns ask about).
        voice: the voice that speaks the questions (None: the default voice).
        lead_s: silence before each question.
        gap_s: silence after a reply has played, before the next question.
        timeout_s: the longest wait for a reply.
    """

    turns: tuple[SpokenTurn, ...] = DEFAULT_TURNS
    rounds: int = 2
    knowledge_dir: str | None = None
    voice: str | None = None
    lead_s: float = 0.5
    gap_s: float = 0.4
    timeout_s: float = 20.0


@dataclass
class _Turn:
    spoken: SpokenTurn
    speech_end: float = 0.0
    first_audio: float | None = None
    done: ResponseDone | None = None
    heard: str = ""
    load: float = 0.0
    finished: asyncio.Event = field(default_factory=asyncio.Event)


def speech_end_sample(audio: np.ndarray, rate: int, floor: float = 0.01) -> int:
    """The end of the last 10 ms frame of ``audio`` louder than ``floor`` RMS (the true end of speech)."""
    hop = rate // 100
    n = len(audio) // hop
    if not n:
        return len(audio)
    rms = np.sqrt(np.mean(audio[: n * hop].reshape(n, hop) ** 2, axis=1))
    loud = np.flatnonzero(rms > floor)
    return int((loud[-1] + 1) * hop) if len(loud) else len(audio)


class AgentBench:
    """Runs the scripted conversations on one engine (``vox``: a :class:`~voxserve.service.Voxserve`)."""

    def __init__(self, vox: Any, config: AgentBenchConfig, log: Callable[[str], None] = lambda _: None) -> None:
        self.vox = vox
        self.config = config
        self.log = log

    def run(self) -> dict[str, Any]:
        """Run every round; return the report."""
        return asyncio.run(self._run())

    async def _run(self) -> dict[str, Any]:
        from voxserve.agent.build import default_options

        started_load = os.getloadavg()[0]
        t0 = time.monotonic()
        agent = await self.vox.executor.run(self.vox.agent)
        self.log(f"agent loaded in {time.monotonic() - t0:.1f} s")
        clips = [await self._speak(t.question) for t in self.config.turns]
        turns: list[_Turn] = []
        for r in range(self.config.rounds):
            session = agent.session(default_options(self.vox.settings.agent))
            current: list[_Turn] = []
            collector = asyncio.ensure_future(self._collect(session, current))
            for spoken, clip in zip(self.config.turns, clips, strict=True):
                turn = _Turn(spoken)
                current.append(turn)
                await self._play_turn(session, turn, clip)
                turns.append(turn)
                self.log(self._line(r, turn))
            await session.aclose()
            await collector
        return self._report(turns, started_load)

    async def _speak(self, text: str) -> np.ndarray:
        result = await self.vox.tts().synthesize(text, self.config.voice, SpeakOptions(priority=Priority.OFFLINE))
        return resample(result.audio, result.sample_rate, SAMPLE_RATE)

    async def _collect(self, session: Any, current: list[_Turn]) -> None:
        async for event in session:
            if current:
                self._on_event(current[-1], event)

    def _on_event(self, turn: _Turn, event: AgentEvent) -> None:
        if isinstance(event, UserTurnEnded) and event.transcript:
            turn.heard = event.transcript
        elif isinstance(event, ResponseAudio) and turn.first_audio is None:
            turn.first_audio = time.monotonic()
        elif isinstance(event, ResponseDone):
            turn.done = event
            turn.finished.set()

    async def _play_turn(self, session: Any, turn: _Turn, clip: np.ndarray) -> None:
        c = self.config
        lead = np.zeros(int(c.lead_s * SAMPLE_RATE), np.float32)
        end = len(lead) + speech_end_sample(clip, SAMPLE_RATE)
        clock = _Pacer(session)
        await clock.play(np.concatenate([lead, clip]), mark=end)
        turn.speech_end = clock.marked
        turn.load = os.getloadavg()[0]
        deadline = time.monotonic() + c.timeout_s
        while not turn.finished.is_set() and time.monotonic() < deadline:
            await clock.play(np.zeros(SAMPLE_RATE // 10, np.float32))
        if turn.done is not None and turn.first_audio is not None:  # let the reply play out
            remaining = turn.done.audio_s - (time.monotonic() - turn.first_audio)
            await clock.play(np.zeros(int(max(0.0, remaining) * SAMPLE_RATE), np.float32))
        await clock.play(np.zeros(int(c.gap_s * SAMPLE_RATE), np.float32))

    def _line(self, r: int, t: _Turn) -> str:
        d = t.done
        total = f"{(t.first_audio - t.speech_end) * 1000:.0f} ms" if t.first_audio else "no audio"
        return (f"round {r + 1}: {total}, heard {t.heard!r} -> {d.status if d else 'timeout'} "
                f"{(d.transcript if d else '')!r} [{'ok' if _correct(t) else 'WRONG'}]")

    def _report(self, turns: list[_Turn], started_load: float) -> dict[str, Any]:
        values: dict[str, list[float]] = {p: [] for p in PARTS}
        for t in turns:
            if t.first_audio is None or t.done is None or t.done.latency is None:
                continue
            lat = t.done.latency
            values["total"].append(t.first_audio - t.speech_end)
            values["session_total"].append(lat.total_s)
            for part in PARTS[2:]:
                values[part].append(getattr(lat, f"{part}_s"))
        loads = [t.load for t in turns]
        summary = {p: {"p50_ms": _ms(percentile(v, 50)), "p95_ms": _ms(percentile(v, 95)), "n": len(v)}
                   for p, v in values.items()}
        answered = [t for t in turns if t.done is not None and t.done.status == "completed"]
        return {
            "machine": machine(),
            "settings": self.vox.settings.agent.model_dump(),
            "turns": len(turns),
            "answered": len(answered),
            "correct": sum(_correct(t) for t in turns),
            "speculative": sum(bool(t.done and t.done.latency and t.done.latency.speculative) for t in turns),
            "latency": summary,
            "load_1min": {"start": round(started_load, 2), "min": round(min(loads), 2) if loads else None,
                          "mean": round(float(np.mean(loads)), 2) if loads else None,
                          "max": round(max(loads), 2) if loads else None},
            "detail": [{"question": t.spoken.question, "heard": t.heard, "reply": t.done.transcript if t.done else None,
                        "correct": _correct(t), "total_ms": _ms(t.first_audio - t.speech_end) if t.first_audio else None,
                        "latency": t.done.latency.as_dict() if t.done and t.done.latency else None,
                        "load_1min": round(t.load, 2)} for t in turns],
        }


class _Pacer:
    """Pushes audio in 20 ms blocks on a real-time schedule (no drift), noting when a sample went out."""

    block = SAMPLE_RATE // 50

    def __init__(self, session: Any) -> None:
        self.session = session
        self.marked = 0.0

    async def play(self, audio: np.ndarray, mark: int | None = None) -> None:
        start = time.monotonic()
        for i in range(0, len(audio), self.block):
            due = start + i / SAMPLE_RATE
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.session.push(audio[i : i + self.block])
            if mark is not None and i <= mark < i + self.block:
                self.marked = time.monotonic()


def _correct(t: _Turn) -> bool:
    reply = (t.done.transcript if t.done else "").lower()
    if any(r in reply for r in t.spoken.reject):
        return False
    return not t.spoken.expect or any(e in reply for e in t.spoken.expect)


def _ms(seconds: float | None) -> float | None:
    return round(seconds * 1000, 1) if seconds is not None and math.isfinite(seconds) else None


def write_sample_knowledge(folder: Path) -> Path:
    """Write the built-in knowledge folder the default turns ask about."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in SAMPLE_KNOWLEDGE.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def run_agent_bench(settings: Any, config: AgentBenchConfig, log: Callable[[str], None]) -> dict[str, Any]:
    """Build an engine with the agent's knowledge folder and run the benchmark."""
    from voxserve.service import Voxserve

    with tempfile.TemporaryDirectory() as tmp:
        folder = config.knowledge_dir or str(write_sample_knowledge(Path(tmp) / "knowledge"))
        run_settings = settings.model_copy(update={"agent": settings.agent.model_copy(update={"knowledge_dir": folder})})
        vox = Voxserve(run_settings)
        try:
            return AgentBench(vox, config, log).run()
        finally:
            vox.close()


def format_agent_report(report: dict[str, Any]) -> str:
    """The report as text tables."""
    rows = [[part, v["p50_ms"], v["p95_ms"], v["n"]] for part, v in report["latency"].items()]
    m, load = report["machine"], report["load_1min"]
    return "\n".join([
        text_table(["reply latency part (ms)", "p50", "p95", "n"], rows),
        "",
        f"turns {report['turns']}, answered {report['answered']}, expected answer in reply {report['correct']}/"
        f"{report['turns']}, drafted during the silence {report['speculative']}/{report['turns']}",
        f"machine: {m['cpu']}, {m['cores']} cores; 1-min load at start {load['start']}, during turns "
        f"min {load['min']} mean {load['mean']} max {load['max']}",
    ])
