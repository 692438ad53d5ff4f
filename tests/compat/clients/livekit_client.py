"""LiveKit Agents compatibility client: drives livekit-plugins-openai against a voxserve server.

Each plugin object is built with its defaults (only ``base_url`` and ``api_key`` given) and run in
a plain ``asyncio.run`` script inside ``utils.http_context.open()`` (no worker, job or room). The
clip is decoded to 48 kHz mono ``rtc.AudioFrame``s, as a LiveKit room track delivers it.

- ``stt``: ``openai.STT().recognize(frames)``, one WAV upload to ``/audio/transcriptions``.
- ``stt_stream``: ``openai.STT(use_realtime=True).stream()``, the Realtime transcription socket
  (``/realtime?intent=transcription``, server VAD); 20 ms frames pushed at real-time pace, then
  1 s of silence and ``end_input()``. Its final transcripts are joined.
- ``tts``: ``openai.TTS().synthesize(text)``; the frames LiveKit decodes are saved.
- ``realtime_turn``: ``realtime.RealtimeModel().session().generate_reply(instructions=...)`` on
  ``/realtime``; the reply's text and audio streams are saved.

Usage: ``python livekit_client.py --base-url http://127.0.0.1:PORT/v1 --clip CLIP --out DIR``;
writes ``DIR/result.json`` (and the WAVs). Runs in the livekit compat env only (stdlib,
livekit-agents, livekit-plugins-openai, av).
"""

from __future__ import annotations

import asyncio
import sys
import time
import wave
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from common import TEXT, decode_pcm16, finish, parse_args, run_async_call
from livekit import rtc
from livekit.agents import stt as lk_stt
from livekit.agents import utils
from livekit.plugins import openai

REPLY_INSTRUCTIONS = "Greet the user in one short sentence."
API_KEY = "unused"
RATE = 48000  # what a LiveKit room track carries
FRAME_MS = 20


def load_frames(path: str, rate: int = RATE, ms: int = FRAME_MS) -> list[rtc.AudioFrame]:
    """The clip as ``ms``-long 16-bit mono frames at ``rate``."""
    return pcm_frames(decode_pcm16(path, rate), rate, ms)


def pcm_frames(pcm: bytes, rate: int, ms: int = FRAME_MS) -> list[rtc.AudioFrame]:
    step = rate * ms // 1000 * 2
    return [rtc.AudioFrame(pcm[i : i + step], rate, 1, len(pcm[i : i + step]) // 2)
            for i in range(0, len(pcm), step)]


def save_frames(path: Path, frames: list[rtc.AudioFrame]) -> int:
    """Write the frames as a 16-bit mono WAV at the rate they carry; returns that rate."""
    rates = {(f.sample_rate, f.num_channels) for f in frames}
    if len(rates) != 1:
        raise RuntimeError(f"frames disagree on (sample_rate, channels): {sorted(rates)}")
    rate, channels = rates.pop()
    if channels != 1:
        raise RuntimeError(f"frames are {channels}-channel, not mono")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(f.data.tobytes() for f in frames))
    return rate


async def call_stt(base_url: str, clip: str, out: Path) -> dict[str, Any]:
    stt = openai.STT(base_url=base_url, api_key=API_KEY)
    try:
        event = await stt.recognize(load_frames(clip))
    finally:
        await stt.aclose()
    return {"text": event.alternatives[0].text if event.alternatives else "",
            "note": f"openai.STT defaults (model {stt.model}, language en, response_format json); "
                    f"{RATE} Hz frames sent as one WAV"}


async def call_stt_stream(base_url: str, clip: str, out: Path) -> dict[str, Any]:
    stt = openai.STT(base_url=base_url, api_key=API_KEY, use_realtime=True)
    stream = stt.stream()
    finals: list[str] = []
    counts = {"start": 0, "end": 0}
    done = asyncio.Event()
    input_ended = False

    def check() -> None:  # every segment the server VAD opened is closed and transcribed
        if input_ended and counts["end"] == counts["start"] and len(finals) >= counts["end"] > 0:
            done.set()

    async def read() -> None:
        async for ev in stream:
            if ev.type == lk_stt.SpeechEventType.START_OF_SPEECH:
                counts["start"] += 1
            elif ev.type == lk_stt.SpeechEventType.END_OF_SPEECH:
                counts["end"] += 1
            elif ev.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT and ev.alternatives:
                finals.append(ev.alternatives[0].text)
            check()
        done.set()

    reader = asyncio.create_task(read())
    try:
        frames = load_frames(clip) + pcm_frames(bytes(RATE * 2), RATE)  # + 1 s of silence
        t0 = time.monotonic()
        for i, frame in enumerate(frames):
            if reader.done():  # the stream failed; its error is raised below
                break
            stream.push_frame(frame)
            await asyncio.sleep(max(0.0, t0 + (i + 1) * FRAME_MS / 1000 - time.monotonic()))
        else:
            stream.end_input()
            input_ended = True
            check()
            await asyncio.wait([reader, asyncio.create_task(done.wait())],
                               return_when=asyncio.FIRST_COMPLETED)
        if reader.done() and (exc := reader.exception()):
            raise exc
    finally:
        await stream.aclose()
        reader.cancel()
        await stt.aclose()
    if not finals:
        raise RuntimeError(f"no final transcript ({counts['start']} speech starts, {counts['end']} ends)")
    return {"text": " ".join(t.strip() for t in finals),
            "note": f"openai.STT(use_realtime=True) (non-default: the plugin's streaming mode), else "
                    f"defaults (model {stt.model}, server_vad); {len(finals)} final transcript(s); "
                    f"{FRAME_MS} ms {RATE} Hz frames at real-time pace + 1 s silence"}


async def call_tts(base_url: str, clip: str, out: Path) -> dict[str, Any]:
    tts = openai.TTS(base_url=base_url, api_key=API_KEY)
    frames: list[rtc.AudioFrame] = []
    try:
        async with tts.synthesize(TEXT) as stream:
            async for ev in stream:
                frames.append(ev.frame)
    finally:
        await tts.aclose()
    if not frames:
        raise RuntimeError("no audio frames")
    rate = save_frames(out / "tts.wav", frames)
    o = tts._opts
    return {"audio": "tts.wav", "sample_rate": rate, "input": TEXT,
            "note": f"openai.TTS defaults (model {o.model}, voice {o.voice}, response_format "
                    f"{o.response_format}, stream_format sse); {len(frames)} frames"}


async def call_realtime(base_url: str, clip: str, out: Path) -> dict[str, Any]:
    model = openai.realtime.RealtimeModel(base_url=base_url, api_key=API_KEY)
    session = model.session()
    errors: list[str] = []
    session.on("error", lambda ev: errors.append(f"{type(ev.error).__name__}: {ev.error}"))
    texts: list[str] = []
    frames: list[rtc.AudioFrame] = []

    async def read_text(stream: Any) -> None:
        async for delta in stream:
            texts.append(str(delta))

    async def read_audio(stream: Any) -> None:
        async for frame in stream:
            frames.append(frame)

    try:
        gen = await session.generate_reply(instructions=REPLY_INSTRUCTIONS)
        async for msg in gen.message_stream:
            await asyncio.gather(read_text(msg.text_stream), read_audio(msg.audio_stream))
    finally:
        await session.aclose()
        await model.aclose()
    if errors:
        raise RuntimeError("; ".join(errors))
    if not frames and not texts:
        raise RuntimeError("the reply carried neither text nor audio")
    rate = save_frames(out / "turn.wav", frames) if frames else None
    return {"transcript": "".join(texts), "audio": "turn.wav" if frames else None, "sample_rate": rate,
            "note": f"RealtimeModel defaults (model {model.model}, voice {model._opts.voice}, "
                    f"modalities {model._opts.modalities}, semantic_vad); generate_reply(instructions="
                    f"{REPLY_INSTRUCTIONS!r}), no audio input"}


CALLS: list[tuple[str, str, Callable[[str, str, Path], Awaitable[dict[str, Any]]]]] = [
    ("stt", "transcription", call_stt),
    ("stt_stream", "transcription", call_stt_stream),
    ("tts", "speech", call_tts),
    ("realtime_turn", "turn", call_realtime),
]


async def run_calls(base_url: str, clip: str, out: Path) -> list[dict[str, Any]]:
    """Every call in turn, each under its timeout; a failure is recorded and the next one runs."""
    calls: list[dict[str, Any]] = []
    async with utils.http_context.open():
        for name, kind, fn in CALLS:
            await run_async_call(calls, name, kind, lambda fn=fn: fn(base_url, clip, out))
    return calls


def main() -> int:
    args = parse_args()
    calls = asyncio.run(run_calls(args.base_url, args.clip, args.out))
    packages = ("livekit-agents", "livekit-plugins-openai", "livekit", "openai")
    return finish(args.out, "livekit", {p: version(p) for p in packages}, calls)


if __name__ == "__main__":
    sys.exit(main())
