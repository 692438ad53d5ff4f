"""``voxserve diarize PATH...``: who spoke when, as RTTM or JSON, one output per file.

Transport only: parse arguments, run :meth:`Voxserve.adiarize` on every file through the shared runner
(:mod:`voxserve.cli.files`): every output to stdout (RTTM lines of all files), or one file each with
``--output-dir``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from voxserve.cli.common import add_engine_args, add_speaker_args, engine_settings, speaker_counts
from voxserve.cli.files import Progress, run_files
from voxserve.formats import DIARIZATION_FORMATS, render_diarization
from voxserve.service import Voxserve
from voxserve.types import Diarization


def add_diarize_command(sub: Any) -> None:
    """Register ``voxserve diarize``."""
    p = sub.add_parser("diarize", help="who spoke when: speaker turns of audio or video files")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--format", choices=DIARIZATION_FORMATS, default="rttm")
    p.add_argument("--output-dir", help="write <name>.<ext> files here (default: stdout)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    add_speaker_args(p)
    add_engine_args(p)
    p.set_defaults(func=cmd_diarize)


def cmd_diarize(args: argparse.Namespace) -> int:
    """Diarize files; one output per input (exit status 1 when any file failed)."""
    vox = Voxserve(engine_settings(args))
    try:
        options = speaker_counts(vox, args)

        async def job(path: str, progress: Progress) -> Diarization:
            return await vox.adiarize(path, options, embedder=args.embedder, progress=progress)

        return run_files(
            args.paths, job, lambda d, name: render_diarization(d, args.format, name), args.format,
            output_dir=Path(args.output_dir) if args.output_dir else None, quiet=args.quiet,
            summary=lambda done: f", speakers {', '.join(str(len(d.speakers)) for d in done)}",
        )
    finally:
        vox.close()
