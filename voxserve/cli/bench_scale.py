"""``voxserve bench scale FILE``: RTFx of one long file on 1, 2, ... Ray replicas (:mod:`voxserve.bench.scale`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from voxserve.bench.common import write_report
from voxserve.cli.common import add_engine_args, engine_settings
from voxserve.errors import InvalidInput


def add_bench_scale(bench_sub: Any) -> None:
    """Register ``voxserve bench scale``."""
    p = bench_sub.add_parser("scale", help="RTFx of one long file on 1, 2, ... Ray replicas, and the scaling ratio")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--replicas", dest="replica_counts", default="1,2", help="comma-separated replica counts (default 1,2)")
    p.add_argument("--replica-threads", type=int, default=1, help="threads (and Ray CPUs) per replica")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per replica count (alternating)")
    p.add_argument("--local", action="store_true", help="also time the single-process engine with as many workers")
    p.add_argument("--name", help="replica kind name in RESULTS.json (default cpu-<threads>thread)")
    p.add_argument("--results", metavar="RESULTS.json", help="add this measurement to a capacity results file")
    p.add_argument("--json", help="write the full report here")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="join this Ray cluster (default: a private local instance)")
    add_engine_args(p)
    p.set_defaults(func=cmd_scale)


def cmd_scale(args: argparse.Namespace) -> int:
    """Run the scale benchmark, print it, and write what was asked (exit status 1 when the texts differ)."""
    from voxserve.bench.scale import ScaleConfig, capacity_entry, format_scale, merge_results, run_scale

    counts = tuple(int(n) for n in args.replica_counts.split(",") if n.strip())
    if not counts or min(counts) < 1 or args.replica_threads < 1 or args.repeats < 1:
        raise InvalidInput("--replicas, --replica-threads and --repeats must be positive")
    path = Path(args.file)
    if not path.is_file():
        raise InvalidInput(f"{path} does not exist")
    config = ScaleConfig(path, counts, args.replica_threads, args.repeats, args.local, args.name or "")
    report = run_scale(engine_settings(args), config, log=lambda s: print(s, file=sys.stderr))
    print(format_scale(report))
    if args.json:
        write_report(args.json, report)
    if args.results:
        merge_results(Path(args.results), capacity_entry(report), report["machine"])
        print(f"wrote {args.results}", file=sys.stderr)
    return 0 if report["identical_text"] else 1
