"""Live benchmark: N simulated microphones paced in real time over WebSockets, voxserve vs WhisperLive.

Each stream plays corpus clips separated by 1-2 s of silence for ``seconds`` of audio, in 100 ms chunks at
real-time pace; among the clips, runs of 30-50 s of the long-form reading (sentences 0.3 s apart: one
utterance the VAD has to cut) when the corpus has it. Measured per utterance, on the client:
- final latency: speech_stopped -> completed (the server knows the utterance is over at speech_stopped);
- last-byte latency: completed - the moment the utterance's last speech audio was sent (includes the
  silence the VAD waits for);
- partial latency: a partial's arrival - the moment the audio it covers was sent.
WhisperLive (when its package and Python are available) gets the same audio through its own protocol;
it has no speech_stopped event, so only its last-byte latency exists (a segment's first arrival with
``completed: true`` minus the moment its end was sent).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import socket
import subprocess
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voxserve.audio import resample
from voxserve.audio.pcm import float32_to_pcm16
from voxserve.bench.common import machine
from voxserve.eval.normalize import normalize_english
from voxserve.eval.wer import WerScore, pooled, score_wer
from voxserve.formats import text_table
from voxserve.stats import percentile
from voxserve.types import SAMPLE_RATE

CHUNK_S = 0.1
OPEN_S = 60.0
"""A stream waits this long for its server to accept it (WhisperLive accepts a client while it decodes
others: at 4 streams on 2 cores, the default 10 s ran out and ended the run)."""


@dataclass
class Program:
    """One microphone's audio and what was said."""

    audio: np.ndarray
    reference: str


@dataclass
class StreamResult:
    """What one stream measured."""

    final_s: list[float] = field(default_factory=list)
    last_byte_s: list[float] = field(default_factory=list)
    partial_s: list[float] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    errors: int = 0


def interleave(clips: list[tuple[np.ndarray, str]], runs: list[tuple[np.ndarray, str]]
               ) -> list[tuple[np.ndarray, str]]:
    """``clips`` in order with ``runs`` spread evenly among them (run k after clip ``(k + 1) * len(clips) //
    (len(runs) + 1)``), so every stream's program meets long continuous speech as well as short clips."""
    pool = list(clips)
    for k, run in reversed(list(enumerate(runs))):
        pool.insert((k + 1) * len(clips) // (len(runs) + 1), run)
    return pool


def make_programs(clips: list[tuple[np.ndarray, str]], n: int, seconds: float, seed: int = 0) -> list[Program]:
    """``n`` different clip sequences of about ``seconds`` each (each stream starts at another clip)."""
    rng = random.Random(seed)
    programs = []
    for i in range(n):
        parts: list[np.ndarray] = []
        refs: list[str] = []
        j = i
        while sum(len(p) for p in parts) < seconds * SAMPLE_RATE:
            audio, text = clips[j % len(clips)]
            parts += [audio, np.zeros(int(rng.uniform(1.0, 2.0) * SAMPLE_RATE), np.float32)]
            refs.append(text)
            j += 1
        programs.append(Program(np.concatenate(parts), " ".join(refs)))
    return programs


CLIENT_COMPRESSION = None
"""The benchmark's microphones send without permessage-deflate (both systems' clients). With the websockets
default, compressing every 100 ms of base64 audio took 13 s of CPU in an 8-stream x 30 s run (py-spy), in the
benchmark's own process: the clients stood beside voxserve's in-process server on the same cores and the same
GIL, which a real user's microphone, on another machine, does not."""


async def _pace(send: Any, payloads: list[Any], started: list[float]) -> None:
    t0 = time.monotonic()
    started.append(t0)
    for i, payload in enumerate(payloads):
        await send(payload)
        delay = t0 + (i + 1) * CHUNK_S - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


async def voxserve_stream(url: str, program: Program, partials: bool = True) -> StreamResult:
    """One microphone against voxserve's Realtime WebSocket."""
    import websockets

    result = StreamResult()
    pcm = float32_to_pcm16(resample(program.audio, SAMPLE_RATE, 24000))
    step = int(24000 * 2 * CHUNK_S)
    payloads = [json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm[i : i + step]).decode()})
                for i in range(0, len(pcm), step)]
    update = {"type": "session.update", "session": {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": 24000}, "transcription": {"language": "en"},
        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}, "voxserve": {"partial_events": partials}}}
    started: list[float] = []
    stopped: dict[str, float] = {}
    end_ms: dict[str, int] = {}
    async with websockets.connect(url + "/v1/realtime?intent=transcription", max_size=2**24,
                                  compression=CLIENT_COMPRESSION, open_timeout=OPEN_S) as ws:
        await ws.send(json.dumps(update))
        sender = asyncio.ensure_future(_pace(ws.send, payloads, started))
        deadline = None
        while True:
            timeout = 5.0 if deadline is None else max(0.1, deadline - time.monotonic())
            try:
                event = json.loads(await asyncio.wait_for(ws.recv(), timeout))
            except TimeoutError:
                if sender.done():
                    break
                continue
            now = time.monotonic()
            kind = event["type"]
            if kind == "input_audio_buffer.speech_stopped":
                stopped[event["item_id"]], end_ms[event["item_id"]] = now, event["audio_end_ms"]
            elif kind.endswith("input_audio_transcription.completed"):
                item = event["item_id"]
                result.text.append(event["transcript"])
                if item in stopped:
                    result.final_s.append(now - stopped[item])
                    result.last_byte_s.append(now - (started[0] + end_ms[item] / 1000))
            elif kind.endswith("input_audio_transcription.partial") and started:
                result.partial_s.append(now - (started[0] + event["voxserve"]["audio_end_ms"] / 1000))
            elif kind == "error":
                result.errors += 1
            if sender.done() and deadline is None:
                deadline = now + 3.0
    return result


async def whisperlive_stream(url: str, program: Program, model_dir: str) -> StreamResult:
    """One microphone against a WhisperLive server (its own protocol, float32 frames)."""
    import websockets

    result = StreamResult()
    step = int(SAMPLE_RATE * CHUNK_S)
    payloads = [program.audio[i : i + step].astype(np.float32).tobytes() for i in range(0, len(program.audio), step)]
    options = {"uid": f"bench-{random.random()}", "language": "en", "task": "transcribe", "model": model_dir,
               "use_vad": True, "send_last_n_segments": 10}
    started: list[float] = []
    seen: dict[tuple[str, str], bool] = {}
    pending: list[str] = []  # the last message's unfinished segments count for WER, not latency
    async with websockets.connect(url, max_size=2**24, compression=CLIENT_COMPRESSION, open_timeout=OPEN_S) as ws:
        await ws.send(json.dumps(options))
        while True:  # wait for SERVER_READY
            message = json.loads(await asyncio.wait_for(ws.recv(), 120))
            if message.get("message") == "SERVER_READY":
                break
            if message.get("status") in ("WAIT", "ERROR"):
                result.errors += 1
                return result
        sender = asyncio.ensure_future(_pace(ws.send, payloads, started))
        deadline = None
        while True:
            timeout = 5.0 if deadline is None else max(0.1, deadline - time.monotonic())
            try:
                message = json.loads(await asyncio.wait_for(ws.recv(), timeout))
            except (TimeoutError, websockets.ConnectionClosed):
                if sender.done():
                    break
                continue
            now = time.monotonic()
            if message.get("segments"):
                pending = [s["text"].strip() for s in message["segments"] if not s.get("completed")]
            for seg in message.get("segments", []):
                key = (seg["start"], seg["text"])
                if seg.get("completed") and key not in seen:
                    seen[key] = True
                    result.text.append(seg["text"].strip())
                    result.last_byte_s.append(now - (started[0] + float(seg["end"])))
            if sender.done() and deadline is None:
                await ws.send(b"END_OF_AUDIO")
                deadline = now + 5.0
    result.text += pending
    return result


def summarize(system: str, n: int, results: list[StreamResult], programs: list[Program]) -> dict[str, Any]:
    """Pool the streams of one run."""
    final = [x for r in results for x in r.final_s]
    last = [x for r in results for x in r.last_byte_s]
    partial = [x for r in results for x in r.partial_s]
    wer: WerScore = pooled(score_wer(p.reference, " ".join(r.text), normalizer=normalize_english)
                           for r, p in zip(results, programs))
    return {
        "system": system, "streams": n, "utterances": len(last), "errors": sum(r.errors for r in results),
        "final_p50": percentile(final, 50), "final_p95": percentile(final, 95), "final_p99": percentile(final, 99),
        "last_byte_p50": percentile(last, 50), "last_byte_p95": percentile(last, 95),
        "partial_p50": percentile(partial, 50), "partial_p95": percentile(partial, 95), "wer": wer.wer,
        "partials_per_utterance": len(partial) / max(1, len(last)),  # previews are shed first under load
        "transcripts": [list(r.text) for r in results],  # each stream's finals, to see where the live text loses
    }


async def _counted(stream: Coroutine[Any, Any, StreamResult]) -> StreamResult:
    """One stream's result; a stream that could not connect, or whose connection broke, counts as an error
    and hears nothing (its words count as deleted), so one failed stream does not end the whole run."""
    import websockets

    try:
        return await stream
    except (OSError, TimeoutError, websockets.WebSocketException):
        return StreamResult(errors=1)


async def run_level(system: str, url: str, programs: list[Program], model_dir: str) -> dict[str, Any]:
    """All streams of one concurrency level at once."""
    if system == "voxserve":
        coros = [voxserve_stream(url, p) for p in programs]
    else:
        coros = [whisperlive_stream(url, p, model_dir) for p in programs]
    results = list(await asyncio.gather(*(_counted(c) for c in coros)))
    return summarize(system, len(programs), results, programs)


def offline_texts(settings: Any, programs: list[Program]) -> list[str]:
    """Each program transcribed as a file (the process's own defaults, language en): the live WER's yardstick
    (the same audio, without the stream's cuts and latency budget)."""
    from voxserve.service import Voxserve

    with Voxserve(settings) as vox:
        return [vox.transcribe(p.audio, language="en").text for p in programs]


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


WHISPERLIVE_SERVER = """
import sys
from whisper_live.server import TranscriptionServer
TranscriptionServer().run("127.0.0.1", port=int(sys.argv[1]), backend="faster_whisper",
    faster_whisper_custom_model_path=sys.argv[2], single_model=True, max_clients=int(sys.argv[3]),
    max_connection_time=3600)
"""


def start_whisperlive(python: str, model_dir: str, max_clients: int) -> tuple[subprocess.Popen[bytes], str]:
    """WhisperLive's server in a subprocess (offline: its Silero file must be in ~/.cache/whisper-live)."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(os.cpu_count() or 1)}
    proc = subprocess.Popen([python, "-c", WHISPERLIVE_SERVER, str(port), model_dir, str(max_clients)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"WhisperLive exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"ws://127.0.0.1:{port}"
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError("WhisperLive did not start within 120 s")


def capacity(rows: list[dict[str, Any]], system: str, key: str, limit_s: float) -> int:
    """The most streams whose p95 stays within the limit (0 when none does)."""
    ok = [r["streams"] for r in rows if r["system"] == system and r[key] == r[key] and r[key] <= limit_s]
    return max(ok, default=0)


def format_live(report: dict[str, Any]) -> str:
    """The report as a table plus the capacity lines."""
    rows = [[r["system"], r["streams"], r["utterances"], r["final_p50"], r["final_p95"], r["final_p99"],
             r["last_byte_p50"], r["last_byte_p95"], r["partial_p50"], r["partial_p95"],
             f"{r['partials_per_utterance']:.1f}", f"{100 * r['wer']:.1f}%",
             f"{100 * r['offline_wer']:.1f}%" if "offline_wer" in r else "-"]
            for r in report["rows"]]
    m = report["machine"]
    lines = [f"{report['seconds']:.0f} s per stream; {m['cpu']}, {m['cores']} cores, load {m['load_1min']}",
             text_table(["system", "streams", "utts", "final p50", "p95", "p99", "last-byte p50", "p95", "partial p50",
                    "p95", "partials/utt", "WER", "as files"], rows)]
    for k, v in report["capacity"].items():
        lines.append(f"{k}: {v}")
    if report.get("whisperlive_note"):
        lines.append("WhisperLive: " + report["whisperlive_note"])
    return "\n".join(lines)


def python_has_whisperlive(python: str) -> bool:
    """Whether that interpreter can import whisper_live."""
    try:
        return subprocess.run([python, "-c", "import whisper_live.server"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_live_bench(
    settings: Any,
    clips: list[tuple[np.ndarray, str]],
    streams: list[int],
    seconds: float,
    whisperlive_python: str | None,
    log: Any = print,
) -> dict[str, Any]:
    """Every concurrency level against voxserve, then against WhisperLive when it can run."""
    from voxserve.backends.registry import resolve_asr
    from voxserve.server.thread import ServerThread

    rows: list[dict[str, Any]] = []
    model_dir = str(resolve_asr(settings.asr.model)[1])
    programs = make_programs(clips, max(streams), seconds)  # a level of n streams plays the first n of them
    with ServerThread(settings) as server:
        url = server.url.replace("http://", "ws://")
        for n in streams:
            rows.append(asyncio.run(run_level("voxserve", url, programs[:n], model_dir)))
            log(f"voxserve {n} streams: final p95 {rows[-1]['final_p95']:.3f} s")
    as_files = offline_texts(settings, programs)
    offline = [score_wer(p.reference, text, normalizer=normalize_english) for p, text in zip(programs, as_files)]
    for row in rows:
        row["offline_wer"] = pooled(offline[: row["streams"]]).wer
    log(f"the same programs as files: WER {100 * pooled(offline).wer:.1f} %")
    note = ""
    if whisperlive_python and python_has_whisperlive(whisperlive_python):
        proc, url = start_whisperlive(whisperlive_python, model_dir, max(streams))
        try:
            for n in streams:
                rows.append(asyncio.run(run_level("whisperlive", url, programs[:n], model_dir)))
                log(f"whisperlive {n} streams: last-byte p95 {rows[-1]['last_byte_p95']:.3f} s")
        finally:
            proc.terminate()
            proc.wait(30)
    else:
        note = ("not run: pass --whisperlive-python with an interpreter that has whisper-live installed "
                "(it needs torch; see docs/benchmarks.md)")
    cap = {
        "voxserve streams at final p95 <= 0.5 s": capacity(rows, "voxserve", "final_p95", 0.5),
        "voxserve streams at last-byte p95 <= 1.0 s": capacity(rows, "voxserve", "last_byte_p95", 1.0),
    }
    if not note:  # a peer that did not run has no capacity to report (0 would read as measured)
        cap["whisperlive streams at last-byte p95 <= 1.0 s"] = capacity(rows, "whisperlive", "last_byte_p95", 1.0)
    played = [{"reference": p.reference, "as_file": text} for p, text in zip(programs, as_files)]
    return {"machine": machine(), "seconds": seconds, "rows": rows, "capacity": cap, "whisperlive_note": note,
            "programs": played}
