"""``voxserve diarize PATH...`` and the speaker options of ``voxserve transcribe --diarize``.

Transport only: parse arguments, call :meth:`Voxserve.adiarize`, print RTTM or JSON. The speed summary
goes to stderr so that stdout carries only the result.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from voxserve.errors import VoxserveError
from voxserve.formats import DIARIZATION_FORMATS, DIARIZED_FORMATS, render, render_diarization
from voxserve.service import Voxserve
from voxserve.types import Diarization, Transcript

MAX_FILES_IN_FLIGHT = 4


def add_speaker_args(p: argparse.ArgumentParser, *, flag: bool = False) -> None:
    """The speaker-count options (and ``--diarize`` when ``flag``)."""
    if flag:
        p.add_argument("--diarize", action="store_true",
                       help="label speakers (implied by --format diarized_json or rttm)")
    p.add_argument("--num-speakers", type=int, help="exact number of speakers (default: estimated)")
    p.add_argument("--min-speakers", type=int, help="at least this many speakers")
    p.add_argument("--max-speakers", type=int, help="at most this many speakers")
    p.add_argument("--embedder", help="speaker embedder: resemblyzer (default) or campplus")


def speaker_options(vox: Voxserve, args: argparse.Namespace) -> Any:
    """Diarization options for ``transcribe``, or None when the run does not diarize."""
    if not (getattr(args, "diarize", False) or args.format in DIARIZED_FORMATS):
        return None
    return vox.diarize_options(num_speakers=args.num_speakers, min_speakers=args.min_speakers,
                               max_speakers=args.max_speakers)


def render_transcript(t: Transcript, fmt: str, path: str) -> str:
    """``render``, with the input's name as the RTTM file id."""
    if fmt == "rttm" and t.diarization is not None:
        return render_diarization(t.diarization, "rttm", Path(path).stem)
    return render(t, fmt)


def add_diarize_command(sub: Any, engine_args: Callable[[argparse.ArgumentParser], None], settings: Callable[..., Any]) -> None:
    """Register ``voxserve diarize``."""
    p = sub.add_parser("diarize", help="who spoke when: speaker turns of audio or video files")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--format", choices=DIARIZATION_FORMATS, default="rttm")
    p.add_argument("--output-dir", help="write <name>.<ext> files here (default: stdout)")
    p.add_argument("--quiet", action="store_true", help="no speed summary")
    add_speaker_args(p)
    engine_args(p)
    p.set_defaults(func=lambda a: cmd_diarize(a, settings(a)))


async def _diarize_all(vox: Voxserve, args: argparse.Namespace) -> list[Diarization | VoxserveError]:
    options = vox.diarize_options(num_speakers=args.num_speakers, min_speakers=args.min_speakers,
                                  max_speakers=args.max_speakers)
    gate = asyncio.Semaphore(MAX_FILES_IN_FLIGHT)

    async def one(path: str) -> Diarization | VoxserveError:
        async with gate:
            try:
                return await vox.adiarize(path, options, embedder=args.embedder)
            except VoxserveError as exc:
                return exc

    return list(await asyncio.gather(*(one(p) for p in args.paths)))


def cmd_diarize(args: argparse.Namespace, settings: Any) -> int:
    """Diarize files; RTTM lines (all files to stdout, or one file each) or JSON."""
    vox = Voxserve(settings)
    try:
        started = time.monotonic()
        results = asyncio.run(_diarize_all(vox, args))
        wall = time.monotonic() - started
    finally:
        vox.close()
    failed = 0
    for path, result in zip(args.paths, results, strict=True):
        if isinstance(result, VoxserveError):
            failed += 1
            print(f"error: {path}: {result.message}", file=sys.stderr)
            continue
        text = render_diarization(result, args.format, Path(path).stem)
        if args.output_dir:
            out_dir = Path(args.output_dir)
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{Path(path).stem}.{args.format}").write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    if not args.quiet:
        done = [r for r in results if isinstance(r, Diarization)]
        audio = sum(r.duration_s for r in done)
        print(f"audio {audio:.1f} s, wall {wall:.2f} s, RTFx {audio / wall if wall > 0 else 0.0:.1f}, "
              f"speakers {', '.join(str(len(r.speakers)) for r in done)}", file=sys.stderr)
    return 1 if failed else 0
