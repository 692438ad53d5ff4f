"""Command line: ``voxserve transcribe | eval | bench ...``.

Transport only: parse arguments, build the engine, call pipelines, print results. Progress bars and the
speed summary go to stderr so that stdout carries only the transcript.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voxserve import __version__
from voxserve.config import load_settings
from voxserve.errors import VoxserveError
from voxserve.formats import FORMATS, extension
from voxserve.service import Voxserve
from voxserve.types import Transcript

log = logging.getLogger("voxserve")
MAX_FILES_IN_FLIGHT = 4


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model name (whisper-base, whisper-tiny.en) or a CTranslate2 Whisper directory")
    p.add_argument("--config", help="settings file (TOML or JSON)")
    p.add_argument("--batch-size", type=int, help="chunks per decoder batch")
    p.add_argument("--workers", type=int, help="concurrent model batches (default: one per core)")
    p.add_argument("--threads", type=int, help="threads per worker")
    p.add_argument("--beam-size", type=int, help="beam width (1 = greedy)")
    p.add_argument("--device", help="cpu, cuda or auto")
    p.add_argument("--compute-type", help="CTranslate2 compute type (default: int8 on CPU)")
    p.add_argument("--no-guard", action="store_true", help="disable the hallucination guard (faster, riskier)")
    p.add_argument("--vad-threshold", type=float, help="speech probability of the VAD (default 0.3 for files)")
    p.add_argument("--min-silence-ms", type=int, help="a pause this long separates speech regions (default 300)")
    p.add_argument("--speech-pad-ms", type=int, help="audio kept around each speech region (default 200)")


def _settings(args: argparse.Namespace) -> Any:
    asr = {
        "model": args.model, "max_batch_size": args.batch_size, "workers": args.workers,
        "threads_per_worker": args.threads, "beam_size": args.beam_size, "device": args.device,
        "compute_type": args.compute_type,
    }
    guard = {"enabled": False} if args.no_guard else {}
    from voxserve.cli.scale import ray_overrides

    chunking = {"vad_threshold": getattr(args, "vad_threshold", None),
                "min_silence_ms": getattr(args, "min_silence_ms", None),
                "speech_pad_ms": getattr(args, "speech_pad_ms", None)}
    return load_settings(args.config, asr=asr, guard=guard, chunking=chunking, ray=ray_overrides(args))


def _add_transcribe(sub: Any) -> None:
    p = sub.add_parser("transcribe", help="transcribe audio or video files of any length")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--language", help="ISO 639-1 code; detected from the first speech when omitted")
    p.add_argument("--task", choices=("transcribe", "translate"), default="transcribe")
    p.add_argument("--format", choices=FORMATS, default="txt")
    p.add_argument("--output-dir", help="write <name>.<ext> files here (default: stdout for one input)")
    p.add_argument("--prompt", help="text that conditions the decoder (names, vocabulary)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    from voxserve.cli.scale import add_ray_args

    add_ray_args(p)
    from voxserve.cli.diarize import add_speaker_args

    add_speaker_args(p, flag=True)
    _engine_args(p)
    p.set_defaults(func=cmd_transcribe)


class _Bar:
    """A tqdm progress bar over audio seconds, shared by all files of one run."""

    def __init__(self, total_s: float, enabled: bool) -> None:
        self._bar = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=round(total_s, 1), unit="audio s", file=sys.stderr, dynamic_ncols=True)
        self._done: dict[int, float] = {}

    def hook(self, key: int) -> Any:
        def update(done_s: float, _total_s: float) -> None:
            if self._bar is not None:
                delta = done_s - self._done.get(key, 0.0)
                self._done[key] = done_s
                self._bar.update(round(delta, 1))

        return update

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


async def _transcribe_all(vox: Voxserve, args: argparse.Namespace) -> tuple[list[Transcript | VoxserveError], float]:
    from voxserve.audio import probe

    durations = []
    for path in args.paths:
        try:
            durations.append(probe(path).duration_s or 0.0)
        except VoxserveError:
            durations.append(0.0)
    bar = _Bar(sum(durations), not args.quiet and sum(durations) > 0)  # no empty bar when no input decodes
    gate = asyncio.Semaphore(MAX_FILES_IN_FLIGHT)
    from voxserve.cli.diarize import speaker_options

    diarize = speaker_options(vox, args)
    options = vox.long_options(
        language=args.language, task=args.task, prompt=args.prompt,
        word_timestamps=diarize is not None or args.format not in ("txt", "text", "json"),
    )

    async def one(i: int, path: str) -> Transcript | VoxserveError:
        async with gate:
            try:
                return await vox.atranscribe(path, options, speakers=diarize, model=args.model,
                                             embedder=args.embedder, progress=bar.hook(i))
            except VoxserveError as exc:
                return exc

    started = time.monotonic()
    results = await asyncio.gather(*(one(i, p) for i, p in enumerate(args.paths)))
    bar.close()
    return list(results), time.monotonic() - started


def cmd_transcribe(args: argparse.Namespace) -> int:
    """Transcribe files; one output per input."""
    vox = Voxserve(_settings(args))
    try:
        vox.asr(args.model)  # load before the clock starts
        results, wall = asyncio.run(_transcribe_all(vox, args))
    finally:
        vox.close()
    failed = 0
    single_stdout = len(args.paths) == 1 and not args.output_dir
    for path, result in zip(args.paths, results):
        if isinstance(result, VoxserveError):
            failed += 1
            print(f"error: {path}: {result.message}", file=sys.stderr)
            continue
        from voxserve.cli.diarize import render_transcript

        text = render_transcript(result, args.format, path)
        if single_stdout:
            sys.stdout.write(text)
        else:
            out_dir = Path(args.output_dir or ".")
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{Path(path).stem}.{extension(args.format)}").write_text(text, encoding="utf-8")
    if not args.quiet and failed < len(results):
        audio = sum(r.duration_s for r in results if isinstance(r, Transcript))
        rtfx = audio / wall if wall > 0 else 0.0
        print(f"audio {audio:.1f} s, wall {wall:.2f} s, RTFx {rtfx:.1f}", file=sys.stderr)
    return 1 if failed else 0


def _add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the HTTP/WebSocket server (OpenAI-compatible)")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--api-key", action="append", dest="api_keys", help="accepted bearer token (repeatable)")
    p.add_argument("--data-dir", help="folder for the job database and uploads")
    from voxserve.cli.scale import add_ray_args

    add_ray_args(p)
    _engine_args(p)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted."""
    import uvicorn

    from voxserve.config import load_settings
    from voxserve.server.app import create_app
    from voxserve.server.thread import uvicorn_config

    asr = {
        "model": args.model, "max_batch_size": args.batch_size, "workers": args.workers,
        "threads_per_worker": args.threads, "beam_size": args.beam_size, "device": args.device,
        "compute_type": args.compute_type,
    }
    server = {"host": args.host, "port": args.port, "data_dir": args.data_dir,
              "api_keys": tuple(args.api_keys) if args.api_keys else None}
    from voxserve.cli.scale import ray_overrides

    settings = load_settings(args.config, asr=asr, server=server, guard={"enabled": False} if args.no_guard else {},
                             ray=ray_overrides(args))
    logging.getLogger("voxserve").setLevel(logging.INFO)
    app = create_app(settings)
    uvicorn.Server(uvicorn_config(app, settings, settings.server.host, settings.server.port)).run()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="voxserve", description="Self-hosted speech inference.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_transcribe(sub)
    _add_serve(sub)
    from voxserve.cli.bench import add_bench_commands
    from voxserve.cli.eval import add_eval_commands

    add_eval_commands(sub, _engine_args, _settings)
    add_bench_commands(sub, _engine_args, _settings)
    from voxserve.cli.diarize import add_diarize_command

    add_diarize_command(sub, _engine_args, _settings)
    from voxserve.cli.speak import add_speak_command

    add_speak_command(sub)
    from voxserve.cli.agent import add_agent_command

    add_agent_command(sub)
    from voxserve.cli.scale import add_plan_command

    add_plan_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``voxserve`` command."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except VoxserveError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
