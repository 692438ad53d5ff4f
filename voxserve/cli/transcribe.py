"""``voxserve transcribe PATH...``: audio or video files of any length -> one transcript each.

Transport only: parse arguments, build the engine, run :meth:`Voxserve.atranscribe` on every file through the
shared runner (:mod:`voxserve.cli.files`): one input goes to stdout, several (or ``--output-dir``) to files.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from voxserve.cli.common import (
    add_engine_args,
    add_ray_args,
    add_speaker_args,
    add_vocabulary_args,
    allowed_languages_from_args,
    engine_settings,
    keyterms_from_args,
    speaker_counts,
)
from voxserve.cli.files import Progress, run_files
from voxserve.cli.subtitle_args import add_subtitle_args, subtitle_options
from voxserve.formats import DIARIZED_FORMATS, FORMATS, extension, render
from voxserve.service import Voxserve
from voxserve.types import Transcript


def add_transcribe_command(sub: Any) -> None:
    """Register ``voxserve transcribe``."""
    p = sub.add_parser("transcribe", help="transcribe audio or video files of any length")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--language", help="ISO 639-1 code; detected from the first speech when omitted; "
                   "auto-per-segment: detected per segment (multilingual audio)")
    p.add_argument("--task", choices=("transcribe", "translate"), default="transcribe")
    p.add_argument("--format", choices=FORMATS, default="txt")
    p.add_argument("--output-dir", help="write <name>.<ext> files here (default: stdout for one input)")
    p.add_argument("--prompt", help="text that conditions the decoder (names, vocabulary)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    add_vocabulary_args(p)
    add_ray_args(p)
    p.add_argument("--diarize", action="store_true", help="label speakers (implied by --format diarized_json or rttm)")
    add_speaker_args(p)
    add_subtitle_args(p)
    add_engine_args(p)
    p.set_defaults(func=cmd_transcribe)


def cmd_transcribe(args: argparse.Namespace) -> int:
    """Transcribe files; one output per input (exit status 1 when any file failed)."""
    if args.output_dir:
        output_dir: Path | None = Path(args.output_dir)
    else:
        output_dir = None if len(args.paths) == 1 else Path(".")
    subtitles = subtitle_options(args)  # bad values fail before the model loads
    settings = engine_settings(args)
    vox = Voxserve(settings)
    try:
        if settings.ray.enabled:
            vox.asr(args.model)  # replicas start before the first file
        else:
            # An unknown model fails here, once; the model itself loads while the first file is decoded and
            # its speech found (measured on a 10 min file: 0.3 s of a 8.1 s run, one core idle, before).
            vox.check_model(args.model)
        wanted = args.diarize or args.format in DIARIZED_FORMATS
        speakers = speaker_counts(vox, args) if wanted and not args.split_channels else None  # channels or diarization
        options = vox.long_options(
            language=args.language, task=args.task, prompt=args.prompt, keyterms=keyterms_from_args(args),
            allowed_languages=allowed_languages_from_args(args),
            word_timestamps=speakers is not None or args.format not in ("txt", "text", "json"),
        )

        async def job(path: str, progress: Progress) -> Transcript:
            return await vox.atranscribe(path, options, speakers=speakers, model=args.model, embedder=args.embedder,
                                         progress=progress, split_channels=args.split_channels)

        return run_files(args.paths, job, lambda t, name: render(t, args.format, name, subtitles=subtitles),
                         extension(args.format), output_dir=output_dir, quiet=args.quiet)
    finally:
        vox.close()
