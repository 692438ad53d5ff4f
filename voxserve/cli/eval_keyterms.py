"""``voxserve eval keyterms --keyterms-file F``: term recall and WER with and without custom vocabulary."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from voxserve.cli.common import add_engine_args, engine_settings, keyterms_from_args
from voxserve.errors import InvalidInput
from voxserve.eval.corpus import default_corpus, find_items
from voxserve.eval.split import names
from voxserve.service import Voxserve


def add_eval_keyterms(ev_sub: Any) -> None:
    """Register ``eval keyterms``."""
    p = ev_sub.add_parser("keyterms", help="term recall and WER without and with key terms; glossary leaks")
    p.add_argument("--corpus", help="corpus folder with asr/ (default: ../shared/corpus when present)")
    p.add_argument("--half", choices=("check", "tune", "all"), default="check",
                   help="which half of the corpus split (voxserve.eval.split); report on check")
    p.add_argument("--keyterm", action="append", default=[], metavar="TERM", help="a key term (repeatable)")
    p.add_argument("--keyterms-file", metavar="FILE", help="key terms, one per line")
    add_engine_args(p)
    p.set_defaults(func=cmd_eval_keyterms)


def cmd_eval_keyterms(args: argparse.Namespace) -> int:
    """Run the key-term evaluation and print the report."""
    from voxserve.eval.keyterms_eval import evaluate_keyterms, format_report

    keyterms = keyterms_from_args(args)
    if not keyterms:
        raise InvalidInput("give key terms: --keyterm TERM or --keyterms-file FILE", param="keyterm")
    root = Path(args.corpus) if args.corpus else default_corpus()
    if root is None or not root.is_dir():
        raise InvalidInput("no corpus folder: pass --corpus DIR")
    items = find_items(root, ("asr",))
    if args.half != "all":
        wanted = set(names(args.half, "asr"))
        items = [i for i in items if i.name in wanted]
    if not items:
        raise InvalidInput(f"no audio files with .txt references under {root}/asr in the {args.half} half")
    vox = Voxserve(engine_settings(args))
    try:
        vox.asr(args.model)
        evaluation = asyncio.run(evaluate_keyterms(vox, items, keyterms, model=args.model))
    finally:
        vox.close()
    print(format_report(evaluation))
    return 0
