"""``voxserve bench diarize FILE...``: registration and command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from voxserve.bench.common import write_report
from voxserve.cli.common import add_engine_args, engine_settings
from voxserve.errors import InvalidInput
from voxserve.service import Voxserve


def add_bench_diarize(bench_sub: Any) -> None:
    """Register ``bench diarize``."""
    p = bench_sub.add_parser("diarize", help="diarization wall time vs transcription of the same files, per stage, DER")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--embedder", help="speaker embedder (default: the configured one)")
    p.add_argument("--json", help="write the report here")
    add_engine_args(p)
    p.set_defaults(func=cmd_bench_diarize)


def cmd_bench_diarize(args: argparse.Namespace) -> int:
    """Run the benchmark and print its table."""
    from voxserve.bench.diarize import DiarizeBench, DiarizeBenchConfig, format_diarize

    files = tuple(Path(f) for f in args.files)
    for f in files:
        if not f.is_file():
            raise InvalidInput(f"{f} does not exist")
    config = DiarizeBenchConfig(files=files, repeats=max(1, args.repeats), embedder=args.embedder, model=args.model)
    vox = Voxserve(engine_settings(args))
    try:
        report = DiarizeBench(vox, config, log=lambda s: print(s, file=sys.stderr)).run()
    finally:
        vox.close()
    print(format_diarize(report))
    if args.json:
        write_report(args.json, report)
    return 0
