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
    """Register ``bench diarize``, ``bench diarize-process`` and ``bench make-meetings``."""
    p = bench_sub.add_parser("diarize", help="diarization wall time vs transcription of the same files, per stage, DER")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--embedder", help="speaker embedder (default: the configured one)")
    p.add_argument("--json", help="write the report here")
    add_engine_args(p)
    p.set_defaults(func=cmd_bench_diarize)
    q = bench_sub.add_parser("diarize-process", help="whole processes with user defaults: voxserve diarize, "
                             "transcribe and transcribe --diarize on the same files")
    q.add_argument("files", nargs="+", metavar="FILE")
    q.add_argument("--repeats", type=int, default=3)
    q.add_argument("--args", default="", help="extra CLI arguments for every command, e.g. '--model tiny'")
    q.add_argument("--json", help="write the report here")
    q.set_defaults(func=cmd_bench_diarize_process)
    m = bench_sub.add_parser("make-meetings", help="build several-minute meetings (2-6 speakers, overlaps) with RTTMs "
                             "from corpus speech of one half of the split")
    m.add_argument("--corpus", help="corpus folder (default: ../shared/corpus)")
    m.add_argument("--out", required=True, help="folder for <name>.flac and <name>.rttm")
    m.add_argument("--half", choices=("tune", "check"), default="check")
    m.set_defaults(func=cmd_make_meetings)


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


def cmd_bench_diarize_process(args: argparse.Namespace) -> int:
    """Time the three commands as whole processes and print the table."""
    import shlex

    from voxserve.bench.diarize_process import ProcessBenchConfig, bench_processes, format_processes

    files = tuple(Path(f) for f in args.files)
    for f in files:
        if not f.is_file():
            raise InvalidInput(f"{f} does not exist")
    config = ProcessBenchConfig(files, max(1, args.repeats), tuple(shlex.split(args.args)))
    report = bench_processes(config, log=lambda s: print(s, file=sys.stderr))
    print(format_processes(report))
    if args.json:
        write_report(args.json, report)
    return 0


def cmd_make_meetings(args: argparse.Namespace) -> int:
    """Write the built meetings of one half; print each with its speakers and overlap share."""
    from voxserve.eval.corpus import default_corpus
    from voxserve.eval.der import read_rttm
    from voxserve.eval.meetings import overlap_share, write_meetings

    corpus = Path(args.corpus) if args.corpus else default_corpus()
    if corpus is None or not corpus.is_dir():
        raise InvalidInput("no corpus folder: pass --corpus DIR")
    for path in write_meetings(corpus, Path(args.out), args.half):
        turns = [t for ts in read_rttm(path.with_suffix(".rttm")).values() for t in ts]
        n = max(t.end for t in turns)
        print(f"{path}  {n / 16000:.1f} s, speakers {', '.join(sorted({t.speaker for t in turns}))}, "
              f"overlap {100 * overlap_share(turns, n):.1f}% of speech")
    return 0
