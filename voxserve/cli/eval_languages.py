"""``voxserve eval languages FILE...``: clips in several languages joined by pauses, transcribed with one
language for the file and with a language per segment."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from voxserve.cli.common import add_engine_args, allowed_languages_from_args, engine_settings
from voxserve.errors import InvalidInput
from voxserve.eval.corpus import CorpusItem
from voxserve.service import Voxserve


def add_eval_languages(ev_sub: Any) -> None:
    """Register ``eval languages``."""
    p = ev_sub.add_parser("languages", help="segment language accuracy and WER on clips joined into one file")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="clips with a .txt reference beside them, named <code>__<name> (English otherwise)")
    p.add_argument("--pause-s", type=float, default=1.5, help="silence between clips (default 1.5 s)")
    p.add_argument("--allowed-languages", metavar="CODES", help="detect only among these, e.g. en,de,es,fr")
    add_engine_args(p)
    p.set_defaults(func=cmd_eval_languages)


def cmd_eval_languages(args: argparse.Namespace) -> int:
    """Run the evaluation and print the report."""
    from voxserve.eval.language_eval import evaluate_languages, format_report

    items = []
    for raw in args.paths:
        path = Path(raw)
        reference = path.with_suffix(".txt")
        if not path.is_file() or not reference.is_file():
            raise InvalidInput(f"{path} or its reference {reference.name} does not exist", param="paths")
        items.append(CorpusItem(path, reference, path.stem.split("__", 1)[0] if "__" in path.stem else "en"))
    if not 0 <= args.pause_s <= 10:
        raise InvalidInput("--pause-s must be between 0 and 10", param="pause_s")
    vox = Voxserve(engine_settings(args))
    try:
        vox.asr(args.model)
        scores = asyncio.run(evaluate_languages(vox, items, pause_s=args.pause_s,
                                                allowed=allowed_languages_from_args(args), model=args.model))
    finally:
        vox.close()
    print(format_report(scores))
    return 0
