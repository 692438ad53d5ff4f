"""``voxserve eval asr --corpus DIR``: quality on a corpus with references."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from voxserve.cli.common import add_engine_args, engine_settings
from voxserve.errors import InvalidInput
from voxserve.eval.corpus import default_corpus, find_items
from voxserve.service import Voxserve


def add_eval_commands(sub: Any) -> Any:
    """Register ``voxserve eval`` and ``eval asr``; returns the group, for the others to join."""
    ev = sub.add_parser("eval", help="score quality on a corpus with references")
    ev_sub = ev.add_subparsers(dest="eval_command", required=True)
    p = ev_sub.add_parser("asr", help="word error rate per file and pooled")
    p.add_argument("--corpus", help="corpus folder (default: ../shared/corpus when present)")
    p.add_argument("--subsets", default="asr,long", help="comma-separated subfolders (asr, long, lang)")
    p.add_argument("--detect-language", action="store_true", help="do not pass the known language")
    p.add_argument("--json", help="also write the per-file results to this JSON file")
    add_engine_args(p)
    p.set_defaults(func=cmd_eval_asr)
    return ev_sub


def cmd_eval_asr(args: argparse.Namespace) -> int:
    """Run the ASR evaluation and print the table."""
    from voxserve.eval.asr_eval import evaluate_asr, format_report

    root = Path(args.corpus) if args.corpus else default_corpus()
    if root is None or not root.is_dir():
        raise InvalidInput("no corpus folder: pass --corpus DIR")
    items = find_items(root, tuple(s.strip() for s in args.subsets.split(",") if s.strip()))
    if not items:
        raise InvalidInput(f"no audio files with .txt references under {root}")
    vox = Voxserve(engine_settings(args))
    try:
        vox.asr(args.model)
        evaluation = asyncio.run(evaluate_asr(vox, items, model=args.model, language_hint=not args.detect_language))
    finally:
        vox.close()
    print(format_report(evaluation))
    if args.json:
        payload = {
            "pooled_wer": evaluation.pooled_wer.wer,
            "rtfx": evaluation.rtfx,
            "files": [{**asdict(f), "score": asdict(f.score)} for f in evaluation.files],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2, ensure_ascii=False))
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
