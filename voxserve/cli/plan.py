"""``voxserve plan``: replicas, GPUs and MIG slices for a target, from measured benchmark results."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_plan_command(sub: Any) -> None:
    """Register ``voxserve plan``."""
    p = sub.add_parser(
        "plan", help="replicas, GPUs and MIG slices for a target, from measured results (RESULTS.json)",
        description="Capacity planning from measured per-replica results (docs/scale.md describes RESULTS.json; "
        "`voxserve bench scale --results FILE` writes one).",
    )
    p.add_argument("--bench", required=True, metavar="RESULTS.json", help="measured per-replica results")
    p.add_argument("--target-rtf", type=float, help="long-file throughput to reach, as RTFx (audio s per wall s)")
    p.add_argument("--live-streams", type=int, help="concurrent live transcription streams to hold")
    p.add_argument("--tts-streams", type=int, help="concurrent real-time speech synthesis streams to hold")
    p.add_argument("--replica", action="append", dest="replicas", metavar="NAME",
                   help="plan only for these measured replica kinds (repeatable; default: all)")
    p.add_argument("--json", help="write the plan here as JSON")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan for every measured replica kind."""
    from voxserve.distributed.planner import Targets, format_plans, load_results, plan_all

    targets = Targets(rtfx=args.target_rtf, live_streams=args.live_streams, tts_streams=args.tts_streams)
    results = load_results(Path(args.bench))
    plans = plan_all(results, targets, args.replicas)
    print(format_plans(plans, targets))
    if args.json:
        Path(args.json).write_text(json.dumps([p.as_dict() for p in plans], indent=2), encoding="utf-8")
    return 0
