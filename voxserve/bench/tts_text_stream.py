"""``voxserve bench tts --text-stream``: first audio when a reply's text streams in as an LLM writes it.

Each reply (:data:`REPLIES`, 2-3 spoken sentences; or the embedded LLM's own replies to :data:`PROMPTS`) goes to
the real server's speech WebSocket (``/v1/audio/speech/stream``, a loopback port in this process) as
``text.append`` deltas at an LLM's pace:

- ``llm``: the pieces and their times as the embedded LLM (``[agent]``, llama.cpp) produced them, recorded
  before the synthesis runs (skipped, with the reason, when the runtime cannot run here);
- a fixed replay at each of ``token_rates`` tokens per second, a token being a word piece of ~4 characters
  (:func:`word_pieces`).

Measured per reply, from the first text delta to the first audio byte:

- ``streamed``: the socket's default (audio starts at the first clause the segmenter can cut, with no wait
  for ``text.done``);
- ``streamed, wait N ms``: with ``first_segment_wait_ms`` set to the voice agent's first-segment wait (the
  first words are cut at a word end when no clause has ended N ms after the first delta);
- ``whole reply``: the client waits for the last delta, then sends all the text at once: latency from the first
  delta = the reply's generation time + that request's first audio (the request is sent at once and the
  generation time added, which is the same number without the wait).

Also per reply: the characters of the segment the first audio came from and which boundary ended it (comma,
clause, sentence, or a word for a timed cut), and whether the first audio arrived before the last delta was
due. The stream is cancelled after its first audio (only first audio is measured). Load average per row.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from voxserve.bench.common import machine
from voxserve.bench.tts import _ms
from voxserve.config import Settings
from voxserve.errors import InvalidInput
from voxserve.formats import text_table
from voxserve.server.thread import ServerThread
from voxserve.stats import percentile

REPLIES = (
    "Sure. Your table for four is booked for seven thirty on Friday, and I have added a note about the birthday "
    "cake. You will get a text message an hour before.",
    "The train to Boston leaves from platform four at ten past nine. If you hurry, you can still buy a ticket at "
    "the machine by the entrance.",
    "I found your order. The replacement part shipped this morning and should arrive by Thursday, so you do not "
    "need to do anything else.",
    "Good question. The museum opens at nine on weekdays, but the east wing stays closed until the roof is "
    "repaired next month.",
    "Unplug the router for thirty seconds and plug it back in. If the light keeps blinking orange after that, I "
    "can book a technician for you.",
    "Tomorrow looks dry in the morning with a high of eighteen degrees. Rain moves in after four, so take an "
    "umbrella if you are out late.",
    "Your balance is fifty two dollars and ten cents. The next payment of twenty dollars is due on the first of "
    "the month.",
    "Yes, the pharmacy on Main Street is open until nine tonight. They have your prescription ready at the "
    "counter, under your last name.",
    "To reset your password, open the settings page and choose security. You will get a code by email, which "
    "works for ten minutes.",
    "The flight is on time. Boarding starts at gate twelve in about forty minutes, and the walk from security "
    "takes roughly ten.",
    "Okay, I moved your dentist appointment to Tuesday at two in the afternoon. Doctor Lee's office will call "
    "if anything changes.",
    "For two people you will need one cup of rice, two cups of water, and a pinch of salt. Let it simmer for "
    "about fifteen minutes.",
    "The library keeps borrowed books for three weeks. You can renew them online twice, unless someone else has "
    "asked for the same book.",
    "Right now the fastest route is the ring road, which takes twenty five minutes. The bridge is closed for "
    "repairs until Sunday.",
    "I am sorry, that store closed last year. The nearest one is on Elm Street, about a ten minute drive from "
    "where you are.",
    "Your package was left with your neighbour at number twelve because nobody answered the door. They signed "
    "for it at noon.",
    "The meeting moved to Monday after lunch. I have updated the invitation, and everyone on the list will get "
    "the new time.",
    "Children under twelve get in free on weekends. Adult tickets cost fifteen dollars, or ten if you book them "
    "online before Friday.",
    "That depends on the model. Most of them charge fully in about two hours, and a quick charge of fifteen "
    "minutes gives you half.",
    "Let me check. There are three rooms left for those dates, and the cheapest one is ninety dollars a night "
    "with breakfast included.",
)
"""Spoken assistant replies: 2-3 sentences, 117-156 characters, first clauses of varied length (some open on a
short sentence, some on a long one without a comma)."""

PROMPTS = (
    "Can you book a table for four on Friday evening?",
    "When does the next train to Boston leave?",
    "Where is my order?",
    "What time does the museum open?",
    "My internet is not working. What should I do?",
    "What is the weather like tomorrow?",
    "What is my account balance?",
    "Is the pharmacy still open tonight?",
    "How do I reset my password?",
    "Is my flight on time?",
    "Can you move my dentist appointment to next week?",
    "How do I cook rice for two people?",
    "How long can I keep a library book?",
    "What is the fastest way to the airport right now?",
    "Is there a hardware store near me?",
    "Why was my package left with a neighbour?",
    "When is the team meeting now?",
    "How much are tickets for the zoo?",
    "How long does my phone take to charge?",
    "Are there any hotel rooms free next weekend?",
)
"""What the embedded LLM is asked, one reply each (the agent's instructions as its system prompt)."""

_CLOSERS = "\"')]}\u201d\u2019"
_WORDS = re.compile(r"\s*\S+")


@dataclass(frozen=True)
class TextStreamConfig:
    """What to measure.

    Attributes:
        replies: how many of :data:`REPLIES` (and of :data:`PROMPTS` for the LLM) are streamed.
        token_rates: fixed replays, tokens per second.
        llm: also record the embedded LLM's replies and token times (skipped when it cannot run).
        wait_ms: the first-segment wait of the ``streamed, wait`` mode (the agent's; negative: no such mode).
        voice: the voice (None: the server's default).
    """

    replies: int = 20
    token_rates: tuple[float, ...] = (15.0, 40.0)
    llm: bool = True
    wait_ms: float = 50.0
    voice: str | None = None

    def validate(self) -> None:
        """Raise :class:`InvalidInput` for settings that cannot run."""
        if not 1 <= self.replies <= len(REPLIES):
            raise InvalidInput(f"replies must be between 1 and {len(REPLIES)}", param="replies")
        if any(r <= 0 for r in self.token_rates) or (not self.token_rates and not self.llm):
            raise InvalidInput("token rates must be positive (and some pace given)", param="token_rates")


@dataclass(frozen=True)
class Delta:
    """One text delta, ``at_s`` seconds after the reply's first."""

    at_s: float
    text: str


@dataclass(frozen=True)
class Script:
    """A reply as its writer produced it."""

    deltas: tuple[Delta, ...]

    @property
    def text(self) -> str:
        """The whole reply."""
        return "".join(d.text for d in self.deltas)

    @property
    def generation_s(self) -> float:
        """First delta -> last delta."""
        return self.deltas[-1].at_s if self.deltas else 0.0


def word_pieces(text: str, chars: int = 4) -> list[str]:
    """``text`` as LLM-like tokens: each word (with the space before it) in nearly equal pieces of about
    ``chars`` characters; joined they give ``text`` back."""
    pieces: list[str] = []
    for match in _WORDS.finditer(text):
        word = match.group()
        n = max(1, round(len(word.strip()) / chars))
        cuts = [len(word) - len(word.lstrip()) + round(i * len(word.strip()) / n) for i in range(1, n)]
        pieces += [word[a:b] for a, b in zip([0, *cuts], [*cuts, len(word)])]
    return pieces


def paced(text: str, rate: float) -> Script:
    """``text`` as :func:`word_pieces` arriving at ``rate`` per second (the first at 0)."""
    return Script(tuple(Delta(i / rate, piece) for i, piece in enumerate(word_pieces(text))))


def boundary(segment: str) -> str:
    """What ended the segment the first audio came from: sentence, clause (``; : —``), comma, or word (a
    timed cut, or a forced one in a long run of words)."""
    last = segment.rstrip().rstrip(_CLOSERS)[-1:]
    if last and last in ".!?\u2026":
        return "sentence"
    if last == ",":
        return "comma"
    return "clause" if last and last in ";:\u2014" else "word"


# ------------------------------------------------------------------------------------------ the LLM's pace


def record_llm(settings: Settings, prompts: tuple[str, ...]) -> tuple[list[Script], str | None]:
    """The configured LLM's replies to ``prompts`` with each piece's time (markup stripped and leading blank
    pieces skipped as the agent does); ([], why) when it cannot run here."""
    from voxserve.agent.build import build_llm
    from voxserve.agent.llm import LlmOptions
    from voxserve.agent.prompt import GROUNDING_RULE, ChatMessage
    from voxserve.agent.reply import strip_markup
    from voxserve.errors import VoxserveError

    config = settings.agent
    try:
        llm = build_llm(config)
    except (VoxserveError, ImportError) as exc:
        return [], f"{type(exc).__name__}: {exc}"
    options = LlmOptions(max_tokens=config.max_output_tokens, temperature=config.temperature)
    system = ChatMessage("system", " ".join((config.instructions, GROUNDING_RULE)))

    async def one(prompt: str) -> Script:
        deltas: list[Delta] = []
        first: float | None = None
        async for piece in llm.stream([system, ChatMessage("user", prompt)], options):
            clean = strip_markup(piece)
            if not deltas and not clean.strip():
                continue
            now = time.monotonic()
            first = now if first is None else first
            if clean:
                deltas.append(Delta(now - first, clean))
        return Script(tuple(deltas))

    async def run() -> list[Script]:
        await one("Hello.")  # warm-up: runtime loaded, system prompt in the prefix cache
        return [s for s in [await one(p) for p in prompts] if s.deltas]

    try:
        return asyncio.run(run()), None
    except VoxserveError as exc:
        return [], f"{type(exc).__name__}: {exc}"
    finally:
        llm.close()


# ------------------------------------------------------------------------------------------ the socket


@dataclass(frozen=True)
class Sample:
    """One reply in one mode."""

    latency_s: float
    segment: str
    generation_s: float
    before_last_delta: bool
    deltas_sent: int


class SpeechSocket:
    """A client of ``/v1/audio/speech/stream`` (binary audio frames)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws

    async def update(self, **fields: Any) -> None:
        """``session.update`` and its answer."""
        await self.ws.send(json.dumps({"type": "session.update", "binary": True, **fields}))
        await self._until("session.updated")

    async def append(self, text: str) -> None:
        """One ``text.append``."""
        await self.ws.send(json.dumps({"type": "text.append", "text": text}))

    async def first_audio(self) -> tuple[float, str]:
        """Until the first audio bytes: when they arrived and the text of the segment they belong to."""
        header = await self._until("audio")
        data = await self.ws.recv()
        if not isinstance(data, bytes):
            raise RuntimeError(f"expected audio bytes after the audio header, got {data[:80]!r}")
        return time.monotonic(), str(header.get("text", ""))

    async def cancel(self) -> None:
        """Stop the utterance and read everything up to ``cancelled``."""
        await self.ws.send(json.dumps({"type": "cancel"}))
        await self._until("cancelled")

    async def _until(self, kind: str) -> dict[str, Any]:
        while True:
            message = await self.ws.recv()
            if isinstance(message, bytes):
                continue
            event = json.loads(message)
            if event["type"] == "error":
                raise RuntimeError(f"server error: {event.get('error')}")
            if event["type"] == kind:
                return dict(event)


async def streamed(sock: SpeechSocket, script: Script) -> Sample:
    """The deltas at their times; latency from the first delta sent to the first audio byte."""
    sent = 0
    t0 = time.monotonic()

    async def send() -> None:
        nonlocal sent
        for delta in script.deltas:
            await asyncio.sleep(max(0.0, t0 + delta.at_s - time.monotonic()))
            await sock.append(delta.text)
            sent += 1
        await sock.ws.send(json.dumps({"type": "text.done"}))

    sender = asyncio.ensure_future(send())
    try:
        at, segment = await sock.first_audio()
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
    await sock.cancel()
    latency = at - t0
    return Sample(latency, segment, script.generation_s, latency < script.generation_s, sent)


async def whole(sock: SpeechSocket, script: Script) -> Sample:
    """All text in one ``text.append`` + ``text.done``; latency = generation time + this request's first audio."""
    t0 = time.monotonic()
    await sock.append(script.text)
    await sock.ws.send(json.dumps({"type": "text.done"}))
    at, segment = await sock.first_audio()
    await sock.cancel()
    return Sample(script.generation_s + at - t0, segment, script.generation_s, False, len(script.deltas))


# ------------------------------------------------------------------------------------------ the run


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def _modes(config: TextStreamConfig) -> list[tuple[str, float | None]]:
    """(name, first_segment_wait_ms); None for the whole-reply mode's wait too (it has nothing to wait for)."""
    modes: list[tuple[str, float | None]] = [("streamed", None)]
    if config.wait_ms >= 0:
        modes.append((f"streamed, wait {config.wait_ms:g} ms", config.wait_ms))
    return [*modes, ("whole reply", None)]


async def _measure(url: str, paces: dict[str, list[Script]], config: TextStreamConfig,
                   log: Callable[[str], None]) -> list[dict[str, Any]]:
    from websockets.asyncio.client import connect

    rows: list[dict[str, Any]] = []
    async with connect(url.replace("http", "ws", 1) + "/v1/audio/speech/stream", max_size=2**24) as ws:
        await ws.recv()  # session.created
        sock = SpeechSocket(ws)
        voice = {"voice": config.voice} if config.voice else {}
        await sock.update(**voice)
        await whole(sock, paced(REPLIES[0], 1000.0))  # warm-up
        for pace, scripts in paces.items():
            samples: dict[str, list[Sample]] = {name: [] for name, _ in _modes(config)}
            load_before = _loadavg()
            for script in scripts:  # the modes of one reply run back to back: load changes hit them alike
                for name, wait in _modes(config):
                    await sock.update(first_segment_wait_ms=wait, **voice)
                    run = whole if name == "whole reply" else streamed
                    samples[name].append(await run(sock, script))
            load = (load_before, _loadavg())
            for name, got in samples.items():
                rows.append(_row(pace, name, got, scripts, load))
                r = rows[-1]
                log(f"{pace:18s} {name:22s} first audio p50/p95 {r['first_audio_p50_ms']}/{r['first_audio_p95_ms']} ms"
                    f"  first segment {r['first_segment_chars_p50']} chars ({r['first_boundary']})  load {load}")
    return rows


def _row(pace: str, mode: str, samples: list[Sample], scripts: list[Script], load: tuple[Any, Any]) -> dict[str, Any]:
    latency = [s.latency_s for s in samples]
    pieces = [len(d.text) for s in scripts for d in s.deltas]
    rates = [(len(s.deltas) - 1) / s.generation_s for s in scripts if s.generation_s > 0]
    return {
        "pace": pace, "mode": mode, "replies": len(samples),
        "tokens_per_s_p50": round(percentile(rates, 50), 1) if rates else None,
        "chars_per_token": round(sum(pieces) / len(pieces), 2) if pieces else None,
        "generation_p50_ms": _ms(percentile([s.generation_s for s in samples], 50)),
        "first_audio_p50_ms": _ms(percentile(latency, 50)), "first_audio_p95_ms": _ms(percentile(latency, 95)),
        "first_segment_chars_p50": round(percentile([len(s.segment) for s in samples], 50)),
        "first_boundary": dict(Counter(boundary(s.segment) for s in samples).most_common()),
        "before_last_delta": round(sum(s.before_last_delta for s in samples) / len(samples), 3) if samples else None,
        "first_segments": [s.segment for s in samples],
        "load_before": load[0], "load_after": load[1],
    }


def run_text_stream(settings: Settings, config: TextStreamConfig, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Record the LLM's pace (when asked and it runs), then stream every reply at every pace; return the report."""
    config.validate()
    before = machine()
    paces: dict[str, list[Script]] = {}
    llm_note = "not asked (--no-llm)"
    if config.llm:
        log("recording the embedded LLM's replies ...")
        scripts, why = record_llm(settings, PROMPTS[: config.replies])
        llm_note = why or f"{len(scripts)} replies recorded"
        if scripts:
            paces["llm (recorded)"] = scripts
        log(f"LLM: {llm_note}")
    for rate in config.token_rates:
        paces[f"{rate:g} tokens/s"] = [paced(text, rate) for text in REPLIES[: config.replies]]
    with ServerThread(settings) as server:
        voice = server.app.state.ctx.vox.tts().voice_info(config.voice).name
        rows = asyncio.run(_measure(server.url, paces, config, log))
    return {"voice": voice, "llm": llm_note,
            "config": {"replies": config.replies, "token_rates": list(config.token_rates), "wait_ms": config.wait_ms},
            "rows": rows, "ratios": _ratios(rows), "machine_before": before, "machine_after": machine()}


def _ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per pace: whole reply's first audio / streamed's, at p50 and p95 (above 1: streaming starts sooner)."""
    by = {(r["pace"], r["mode"]): r for r in rows}
    out: dict[str, dict[str, float | None]] = {}
    for (pace, mode), row in by.items():
        if mode != "streamed" or (pace, "whole reply") not in by:
            continue
        other = by[(pace, "whole reply")]
        out[pace] = {q: (round(other[f"first_audio_{q}_ms"] / row[f"first_audio_{q}_ms"], 2)
                         if row[f"first_audio_{q}_ms"] else None) for q in ("p50", "p95")}
    return out


def format_text_stream(report: dict[str, Any]) -> str:
    """The report as a text table."""
    headers = ["pace", "mode", "replies", "tokens_per_s_p50", "generation_p50_ms", "first_audio_p50_ms",
               "first_audio_p95_ms", "first_segment_chars_p50", "first_boundary", "before_last_delta",
               "load_before", "load_after"]

    def cell(value: Any) -> Any:
        if isinstance(value, dict):
            return " ".join(f"{k}:{v}" for k, v in value.items())
        return " ".join(map(str, value)) if isinstance(value, list) else value

    rows = [[cell(r[h]) for h in headers] for r in report["rows"]]
    m0, m1 = report["machine_before"], report["machine_after"]
    return "\n".join([
        f"voice {report['voice']}; replies streamed over the speech WebSocket as text deltas; latency = first text "
        f"delta -> first audio byte (whole reply: generation time + first audio of the whole text); LLM: {report['llm']}",
        text_table(headers, rows),
        "first audio, whole reply / streamed (p50, p95): "
        + ", ".join(f"{pace} {r['p50']}x, {r['p95']}x" for pace, r in report["ratios"].items()),
        f"machine: {m0['cpu']}, {m0['cores']} cores; load average (1/5/15 min) per row above; 1-min load "
        f"{m0['load_1min']} before, {m1['load_1min']} after",
    ])
