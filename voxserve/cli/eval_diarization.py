"""``voxserve eval diarization --corpus DIR [--half tune|check]``: DER (two collars, overlap scored), JER, the
speaker-count error and speed."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from voxserve.cli.common import add_engine_args, engine_settings
from voxserve.errors import InvalidInput
from voxserve.eval.corpus import default_corpus
from voxserve.service import Voxserve


def add_eval_diarization(ev_sub: Any) -> None:
    """Register ``eval diarization``."""
    p = ev_sub.add_parser("diarization", help="diarization error rate per file and pooled, JER, speed")
    p.add_argument("--corpus", help="folder with audio + .rttm files, or a corpus with diar/ (default: ../shared/corpus)")
    p.add_argument("--embedder", help="speaker embedder (default: the configured one)")
    p.add_argument("--oracle-count", action="store_true", help="give each file its reference number of speakers")
    p.add_argument("--half", choices=("tune", "check"), help="only this half of the corpus split (default: all files)")
    p.add_argument("--json", help="also write the per-file results to this JSON file")
    add_engine_args(p)
    p.set_defaults(func=cmd_eval_diarization)


def cmd_eval_diarization(args: argparse.Namespace) -> int:
    """Run the diarization evaluation and print the table."""
    from voxserve.eval.diarization_eval import diarization_items, evaluate_diarization, format_report
    from voxserve.eval.split import names

    root = Path(args.corpus) if args.corpus else default_corpus()
    if root is None or not root.is_dir():
        raise InvalidInput("no corpus folder: pass --corpus DIR")
    items = diarization_items(root)
    if args.half:
        items = [i for i in items if i.name in names(args.half, "diar")]
    if not items:
        raise InvalidInput(f"no audio files with .rttm references under {root}" + (f" in the {args.half} half" if args.half else ""))
    vox = Voxserve(engine_settings(args))
    try:
        evaluation = asyncio.run(evaluate_diarization(vox, items, embedder=args.embedder, oracle_count=args.oracle_count))
    finally:
        vox.close()
    print(format_report(evaluation))
    print(f"load average (1 min) {os.getloadavg()[0]:.2f}", file=sys.stderr)
    if args.json:
        payload = {
            "pooled_der": {str(c): asdict(evaluation.pooled(c)) | {"der": evaluation.pooled(c).der} for c in (0.0, 0.25)},
            "mean_jer": evaluation.mean_jer,
            "mean_abs_count_error": evaluation.mean_abs_count_error,
            "rtfx": evaluation.rtfx,
            "wall_s": evaluation.wall_s,
            "files": [
                {**{k: v for k, v in asdict(f).items() if k != "der"}, "count_error": f.count_error,
                 "der": {str(c): asdict(s) | {"der": s.der} for c, s in f.der.items()}}
                for f in evaluation.files
            ],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
