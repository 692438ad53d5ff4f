"""``voxserve agent``: one spoken turn, offline: a question in an audio file -> the agent's spoken reply.

Transport only: decode the file, push it through an agent session (end of input ends the turn), write the
reply's audio (format from the extension) and print what was heard and said, with the reply's timing, on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from voxserve.audio import decode_audio
from voxserve.audio.encode import encode_audio
from voxserve.cli.common import output_format
from voxserve.config import load_settings
from voxserve.errors import BackendError, InvalidInput
from voxserve.service import Voxserve


def add_agent_command(sub: Any) -> None:
    """Register ``agent`` on the CLI."""
    p = sub.add_parser("agent", help="one spoken turn with the voice agent: question audio in, reply audio out")
    p.add_argument("--input", required=True, help="the question: any audio or video file")
    p.add_argument("--output", required=True, help="the reply: .wav .mp3 .flac .opus/.ogg .pcm")
    p.add_argument("--knowledge", help="folder of .md/.txt files the agent answers from")
    p.add_argument("--llm-url", help="OpenAI-compatible chat endpoint (default: the embedded SmolLM2-135M)")
    p.add_argument("--llm-model", help="model name for --llm-url, or a GGUF file for the embedded runtime")
    p.add_argument("--instructions", help="the system prompt")
    p.add_argument("--voice", help="the reply's voice")
    p.add_argument("--model", help="speech recognition model (default: the configured one)")
    p.add_argument("--config", help="settings file (TOML or JSON)")
    p.set_defaults(func=cmd_agent)


def _settings(args: argparse.Namespace) -> Any:
    agent = {"knowledge_dir": args.knowledge, "llm_url": args.llm_url, "llm_model": args.llm_model,
             "instructions": args.instructions, "voice": args.voice}
    return load_settings(args.config, asr={"model": args.model}, agent=agent)


async def _one_turn(vox: Voxserve, audio: np.ndarray) -> tuple[str, Any, list[np.ndarray], int]:
    from voxserve.agent.build import default_options
    from voxserve.agent.events import AgentError, ResponseAudio, ResponseDone, UserTurnEnded

    agent = await vox.executor.run(vox.agent)
    session = agent.session(default_options(vox.settings.agent))
    heard, done, parts, rate = "", None, [], 0
    session.push(audio)
    session.end_input()
    async for event in session:
        if isinstance(event, UserTurnEnded):
            heard = event.transcript or heard
        elif isinstance(event, ResponseAudio):
            parts.append(np.asarray(event.chunk.audio, dtype=np.float32))
            rate = event.chunk.sample_rate
        elif isinstance(event, ResponseDone):
            done = event
        elif isinstance(event, AgentError):
            print(f"warning: {event.error.message}", file=sys.stderr)
    await session.aclose()
    return heard, done, parts, rate


def cmd_agent(args: argparse.Namespace) -> int:
    """Answer the question in ``--input`` and write the spoken reply to ``--output``."""
    fmt = output_format(args.output, None)
    if not Path(args.input).is_file():
        raise InvalidInput(f"{args.input} does not exist", param="input")
    vox = Voxserve(_settings(args))
    try:
        audio = decode_audio(args.input)
        started = time.monotonic()
        heard, done, parts, rate = asyncio.run(_one_turn(vox, audio))
        wall = time.monotonic() - started
    finally:
        vox.close()
    if not heard:
        raise InvalidInput("no speech was recognised in the input", param="input")
    if done is None or done.status != "completed" or not parts:
        reason = done.error.message if done is not None and done.error is not None else "no reply"
        raise BackendError(f"the agent did not answer: {reason}")
    Path(args.output).write_bytes(encode_audio(np.concatenate(parts), rate, fmt))
    print(f"heard: {heard}\nreply: {done.transcript}", file=sys.stderr)
    latency = done.latency
    timing = (f"ASR {latency.asr_s * 1000:.0f} ms, LLM first token {latency.llm_ttft_s * 1000:.0f} ms, "
              f"TTS first audio {latency.tts_ttfb_s * 1000:.0f} ms; " if latency else "")
    print(f"{timing}reply audio {done.audio_s:.1f} s, wall {wall:.1f} s (models loaded included)", file=sys.stderr)
    return 0
