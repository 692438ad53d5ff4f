"""Pipecat compatibility client: drives pipecat's OpenAI services against a voxserve server.

Each service runs, with its default settings (only ``base_url`` and ``api_key`` given), inside a
minimal pipecat pipeline with no transport (``source -> service -> sink``, default
``PipelineParams``: 16 kHz in, 24 kHz out):

- ``stt``: ``OpenAISTTService`` (a ``SegmentedSTTService``) fed the clip as 16 kHz
  ``InputAudioRawFrame``s between VAD start/stop frames; it uploads the segment as WAV to
  ``/audio/transcriptions``.
- ``tts``: ``OpenAITTSService`` given a ``TTSSpeakFrame``; its ``TTSAudioRawFrame``s are saved.
- ``realtime_turn``: ``OpenAIRealtimeLLMService`` on ``/realtime``, fed the clip (plus trailing
  silence) as ``InputAudioRawFrame``s; the server's VAD ends the turn and the reply's
  transcript (``TTSTextFrame``) and audio (``TTSAudioRawFrame``) are saved.

Usage: ``python pipecat_client.py --base-url http://127.0.0.1:PORT/v1 --clip CLIP --out DIR``;
writes ``DIR/result.json`` (and the WAVs). Runs in the pipecat compat env only (stdlib, pipecat,
openai, av).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from common import TEXT, decode_pcm16, finish, parse_args, run_async_call, write_wav
from loguru import logger
from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    Frame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    ProposedUserStoppedSpeakingFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
from pipecat.services.openai.stt import OpenAISTTService
from pipecat.services.openai.tts import OpenAITTSService
from pipecat.workers.runner import WorkerRunner

API_KEY = "unused"
PARAMS = PipelineParams()  # pipecat's defaults: audio in 16 kHz, audio out 24 kHz


def audio_frames(pcm: bytes, rate: int, ms: int = 20) -> list[InputAudioRawFrame]:
    """``pcm`` cut into ``ms``-long input frames, as a transport would deliver it."""
    step = rate * ms // 1000 * 2
    return [InputAudioRawFrame(pcm[i : i + step], rate, 1) for i in range(0, len(pcm), step)]


Until = Callable[[list[Frame]], bool]


def ends_with(*types: type[Frame]) -> Until:
    """Done once a frame of one of ``types`` has come out (at once, when none are named)."""
    return lambda frames: not types or any(isinstance(f, types) for f in frames)


class Tap(FrameProcessor):
    """Records the frames passing one way, setting ``changed`` after each."""

    def __init__(self, direction: FrameDirection, changed: asyncio.Event) -> None:
        super().__init__()
        self.direction = direction
        self.changed = changed
        self.frames: list[Frame] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == self.direction:
            self.frames.append(frame)
            self.changed.set()
        await self.push_frame(frame, direction)


async def drive(service: FrameProcessor, frames: Sequence[Frame], until: Until,
                pace_s: float = 0.0) -> list[Frame]:
    """Run ``service`` in a transport-less pipeline: send ``frames``, wait for ``until``, end.

    ``until`` is asked about the downstream frames once all of ``frames`` are sent; then an
    ``EndFrame`` (which lets the service finish what it holds) closes the pipeline. Returns the
    downstream frames; raises on an ``ErrorFrame`` in either direction.
    """
    changed = asyncio.Event()
    source, sink = Tap(FrameDirection.UPSTREAM, changed), Tap(FrameDirection.DOWNSTREAM, changed)
    worker = PipelineWorker(Pipeline([source, service, sink]), params=PARAMS,
                            cancel_on_idle_timeout=False)
    started = asyncio.Event()

    async def _started(_worker: Any, _frame: Frame) -> None:
        started.set()

    worker.add_event_handler("on_pipeline_started", _started)

    def errors() -> list[ErrorFrame]:
        return [f for f in source.frames + sink.frames if isinstance(f, ErrorFrame)]

    async def feed() -> None:
        await asyncio.wait_for(started.wait(), 30)
        for frame in frames:
            await worker.queue_frame(frame)
            if pace_s:
                await asyncio.sleep(pace_s)
        while not (errors() or until(sink.frames)):
            changed.clear()
            await changed.wait()
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), feed())
    if errors():
        raise RuntimeError("; ".join(str(e.error) for e in errors()))
    return sink.frames


def final_reply(frames: list[Frame]) -> list[Frame] | None:
    """The frames of the reply to the last user turn, once it has ended with audio or text.

    A reply starts after the last ``ProposedUserStoppedSpeakingFrame`` (earlier ones were
    cut short by the next turn) with an ``LLMFullResponseStartFrame`` and ends with an
    ``LLMFullResponseEndFrame``.
    """
    stops = [i for i, f in enumerate(frames) if isinstance(f, ProposedUserStoppedSpeakingFrame)]
    tail = frames[stops[-1] + 1:] if stops else frames
    start = next((i for i, f in enumerate(tail) if isinstance(f, LLMFullResponseStartFrame)), None)
    if start is None:
        return None
    end = next((i for i, f in enumerate(tail) if i > start and isinstance(f, LLMFullResponseEndFrame)), None)
    reply = tail[start:end] if end is not None else []
    return reply if any(isinstance(f, (TTSAudioRawFrame, TTSTextFrame)) for f in reply) else None


async def call_stt(base_url: str, clip: str, out: Path) -> dict[str, Any]:
    stt = OpenAISTTService(base_url=base_url, api_key=API_KEY)
    rate = PARAMS.audio_in_sample_rate
    frames: list[Frame] = [VADUserStartedSpeakingFrame(), *audio_frames(decode_pcm16(clip, rate), rate),
                           VADUserStoppedSpeakingFrame()]
    got = await drive(stt, frames, ends_with())  # the EndFrame flushes the segment
    texts = [f.text for f in got if isinstance(f, TranscriptionFrame)]
    if not texts:
        raise RuntimeError("no TranscriptionFrame came out")
    settings: Any = stt._settings
    return {"text": " ".join(texts),
            "note": f"OpenAISTTService defaults (model {settings.model}, language {settings.language}); "
                    f"segment uploaded as a {rate} Hz WAV"}


async def call_tts(base_url: str, clip: str, out: Path) -> dict[str, Any]:
    tts = OpenAITTSService(base_url=base_url, api_key=API_KEY)
    got = await drive(tts, [TTSSpeakFrame(TEXT)], ends_with(TTSStoppedFrame))
    chunks = [f for f in got if isinstance(f, TTSAudioRawFrame)]
    if not chunks:
        raise RuntimeError("no TTSAudioRawFrame came out")
    rates = {f.sample_rate for f in chunks}
    if len(rates) != 1:
        raise RuntimeError(f"frames disagree on their sample rate: {sorted(rates)}")
    rate = rates.pop()
    write_wav(out / "tts.wav", b"".join(f.audio for f in chunks), rate)
    settings: Any = tts._settings
    return {"audio": "tts.wav", "sample_rate": rate, "input": TEXT,
            "note": f"OpenAITTSService defaults (model {settings.model}, voice {settings.voice}, "
                    f"response_format pcm); {len(chunks)} frames"}


async def call_realtime(base_url: str, clip: str, out: Path) -> dict[str, Any]:
    ws_url = base_url.replace("http", "ws", 1).rstrip("/") + "/realtime"
    llm = OpenAIRealtimeLLMService(base_url=ws_url, api_key=API_KEY)
    settings: Any = llm._settings
    rate = PARAMS.audio_in_sample_rate
    pcm = decode_pcm16(clip, rate) + bytes(rate * 2 * 2)  # 2 s of silence ends the turn
    frames = await drive(llm, audio_frames(pcm, rate), lambda fs: final_reply(fs) is not None,
                         pace_s=0.005)
    turns = sum(isinstance(f, ProposedUserStoppedSpeakingFrame) for f in frames)
    got = final_reply(frames) or []
    chunks = [f for f in got if isinstance(f, TTSAudioRawFrame)]
    text = "".join(f.text for f in got if isinstance(f, TTSTextFrame))
    if not chunks and not text:
        raise RuntimeError("the response carried neither audio nor text")
    rates = {f.sample_rate for f in chunks}
    if len(rates) > 1:
        raise RuntimeError(f"frames disagree on their sample rate: {sorted(rates)}")
    rate_out = rates.pop() if rates else None
    if rate_out:
        write_wav(out / "turn.wav", b"".join(f.audio for f in chunks), rate_out)
    return {"transcript": text, "audio": "turn.wav" if rate_out else None, "sample_rate": rate_out,
            "note": f"OpenAIRealtimeLLMService defaults (model {settings.model}, server VAD); "
                    f"clip pushed as {rate} Hz InputAudioRawFrames + 2 s silence; server VAD "
                    f"made {turns} user turn(s), this is the reply to the last"}


CALLS: list[tuple[str, str, Callable[[str, str, Path], Awaitable[dict[str, Any]]]]] = [
    ("stt", "transcription", call_stt),
    ("tts", "speech", call_tts),
    ("realtime_turn", "turn", call_realtime),
]


async def run_calls(base_url: str, clip: str, out: Path) -> list[dict[str, Any]]:
    """Every call in turn, each under its timeout; a failure is recorded and the next one runs."""
    calls: list[dict[str, Any]] = []
    for name, kind, fn in CALLS:
        await run_async_call(calls, name, kind, lambda fn=fn: fn(base_url, clip, out))
    return calls


def main() -> int:
    args = parse_args()
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    calls = asyncio.run(run_calls(args.base_url, args.clip, args.out))
    return finish(args.out, "pipecat", {p: version(p) for p in ("pipecat-ai", "openai")}, calls)


if __name__ == "__main__":
    sys.exit(main())
