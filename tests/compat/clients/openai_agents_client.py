"""Compatibility client: the OpenAI Agents SDK's voice pipeline (``openai-agents[voice]``) against voxserve.

Run with the openai_agents env's interpreter:
    python openai_agents_client.py --base-url http://127.0.0.1:PORT/v1 --clip CLIP --out DIR

``OpenAIVoiceModelProvider(openai_client=AsyncOpenAI(base_url=..., api_key="unused"))`` with the SDK's default
models, voice and settings; the only change is that tracing is disabled (its exporter would post to
api.openai.com). A workflow echoes the transcript back (no LLM). Results go to ``DIR/result.json``.
"""

from __future__ import annotations

import asyncio
import sys
import time
import traceback
from importlib.metadata import version

import numpy as np
from agents import set_tracing_disabled
from agents.voice import AudioInput, StreamedAudioInput, VoicePipeline, VoicePipelineConfig, VoiceWorkflowBase
from agents.voice.input import DEFAULT_SAMPLE_RATE
from agents.voice.models import openai_model_provider as omp
from agents.voice.models import openai_stt, openai_tts
from agents.voice.models.openai_model_provider import OpenAIVoiceModelProvider
from common import decode_pcm16, finish, parse_args, write_wav
from openai import AsyncOpenAI

TIMEOUT = 120.0
RATE = DEFAULT_SAMPLE_RATE  # the SDK's audio rate: AudioInput default, and what its pcm TTS stream carries


class EchoWorkflow(VoiceWorkflowBase):
    """Records each transcription; yields it back for TTS when ``speak`` is set (no LLM)."""

    def __init__(self, speak: bool):
        self.speak = speak
        self.seen: list[str] = []

    async def run(self, transcription: str):
        self.seen.append(transcription)
        if self.speak:
            yield transcription


def error_text(e: BaseException) -> str:
    msg = f"{type(e).__name__}: {e}"
    cause = e.__cause__ or e.__context__
    if cause is not None and str(cause) not in msg:
        msg += f" (caused by {type(cause).__name__}: {cause})"
    return msg


async def run_call(calls: list, names: list[tuple[str, str]], coro_fn) -> list[dict]:
    """Await ``coro_fn()`` (returns the fields of one record per (name, kind)) under a timeout;
    on failure every named record gets the error."""
    t0 = time.monotonic()
    try:
        recs = await asyncio.wait_for(coro_fn(), TIMEOUT)
    except TimeoutError:
        recs = [{"name": n, "kind": k, "error": f"TimeoutError: no result after {TIMEOUT:.0f} s"} for n, k in names]
    except Exception as e:  # noqa: BLE001 - recorded, not raised
        traceback.print_exc()
        recs = [{"name": n, "kind": k, "error": error_text(e)} for n, k in names]
    for r in recs:
        r.setdefault("error", None)
        r["ok"] = r["error"] is None
        r["seconds"] = round(time.monotonic() - t0, 2)
        calls.append(r)
        print(f"{r['name']}: {'ok' if r['ok'] else 'FAIL ' + r['error']} ({r['seconds']} s)", flush=True)
    return recs


async def main() -> int:
    args = parse_args()
    out = args.out
    set_tracing_disabled(True)  # keep traffic on loopback
    client = AsyncOpenAI(base_url=args.base_url, api_key="unused")
    clip = np.frombuffer(decode_pcm16(args.clip, RATE), np.int16).copy()  # the SDK takes int16 samples
    defaults = (f"SDK defaults: STT {omp.DEFAULT_STT_MODEL}, TTS {omp.DEFAULT_TTS_MODEL}, "
                f"voice {openai_tts.DEFAULT_VOICE}")
    calls: list = []

    def pipeline(workflow: VoiceWorkflowBase) -> VoicePipeline:
        return VoicePipeline(workflow=workflow, config=VoicePipelineConfig(
            model_provider=OpenAIVoiceModelProvider(openai_client=client)))

    async def voice_pipeline():
        wf = EchoWorkflow(speak=True)
        result = await pipeline(wf).run(AudioInput(buffer=clip))
        chunks, lifecycle = [], []
        async for ev in result.stream():
            if ev.type == "voice_stream_event_audio" and ev.data is not None:
                chunks.append(np.asarray(ev.data).reshape(-1))
            elif ev.type == "voice_stream_event_lifecycle":
                lifecycle.append(ev.event)
            elif ev.type == "voice_stream_event_error":
                raise ev.error
        text = " ".join(wf.seen)
        stt = {"name": "stt", "kind": "transcription", "text": text,
               "note": f"VoicePipeline + AudioInput (int16 {RATE} Hz, sent as WAV upload); {defaults}"}
        if not wf.seen:
            stt["error"] = "workflow never received a transcription"
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.int16)
        write_wav(out / "tts.wav", audio.astype("<i2").tobytes(), RATE)
        tts = {"name": "tts", "kind": "speech", "audio": "tts.wav", "sample_rate": RATE, "input": text,
               "note": f"pipeline TTS of the echoed transcript, pcm streamed, int16 @ {RATE} Hz; "
                       f"{len(chunks)} chunks, {audio.size} samples; lifecycle {lifecycle}; {defaults}"}
        if audio.size == 0:
            tts["error"] = "no audio from the pipeline"
        return [stt, tts]

    async def stt_streamed():
        wf = EchoWorkflow(speak=False)
        streamed = StreamedAudioInput()
        result = await pipeline(wf).run(streamed)
        step = RATE // 10  # 100 ms

        async def push():
            for i in range(0, clip.size, step):
                await streamed.add_audio(clip[i:i + step])
                await asyncio.sleep(0.02)
            for _ in range(15):  # 1.5 s of silence
                await streamed.add_audio(np.zeros(step, np.int16))
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.0)  # VAD commits first, so the SDK's final commit meets an empty buffer
            await streamed.add_audio(None)

        pusher = asyncio.create_task(push())
        lifecycle = []
        try:
            async for ev in result.stream():
                if ev.type == "voice_stream_event_lifecycle":
                    lifecycle.append(ev.event)
                elif ev.type == "voice_stream_event_error":
                    raise ev.error
        finally:
            pusher.cancel()
        rec = {"name": "stt_streamed", "kind": "transcription", "text": " ".join(t.strip() for t in wf.seen),
               "note": f"VoicePipeline + StreamedAudioInput (Realtime ?intent=transcription WebSocket, "
                       f"{openai_stt.DEFAULT_TURN_DETECTION}); 100 ms int16 chunks + 1.5 s silence, 1 s later end "
                       f"of input (the SDK's final commit then finds the buffer empty); {len(wf.seen)} turns; lifecycle {lifecycle}; {defaults}"}
        if not wf.seen:
            rec["error"] = "no transcript turns"
        return [rec]

    await run_call(calls, [("stt", "transcription"), ("tts", "speech")], voice_pipeline)
    await run_call(calls, [("stt_streamed", "transcription")], stt_streamed)

    return finish(out, "openai-agents",
                  {p: version(p) for p in ("openai-agents", "openai", "websockets", "numpy", "av")}, calls)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
