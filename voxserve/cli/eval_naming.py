"""``voxserve eval naming --half tune|check``: known-speaker naming on the corpus's AMI excerpts (the pair
similarity distributions, the lowest threshold with no false name, and the naming score at a threshold)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from voxserve.cli.common import add_engine_args, engine_settings
from voxserve.errors import InvalidInput
from voxserve.eval.corpus import default_corpus
from voxserve.service import Voxserve


def add_eval_naming(ev_sub: Any) -> None:
    """Register ``eval naming``."""
    p = ev_sub.add_parser("naming", help="known speakers named from enrolled voices: similarities and accuracy")
    p.add_argument("--corpus", help="corpus with diar/ (default: ../shared/corpus)")
    p.add_argument("--half", choices=("tune", "check"), default="check",
                   help="files measured; on tune only tune files give references")
    p.add_argument("--embedder", help="speaker embedder (default: diarization.naming_embedder)")
    p.add_argument("--threshold", type=float, help="naming threshold scored (default: the embedder's)")
    add_engine_args(p)
    p.set_defaults(func=cmd_eval_naming)


def cmd_eval_naming(args: argparse.Namespace) -> int:
    """Run the naming evaluation on one half and print the report."""
    from voxserve.eval.diarization_eval import diarization_items
    from voxserve.eval.naming_eval import format_naming_report, run_naming
    from voxserve.eval.split import names
    from voxserve.pipelines.diarization import DiarizationParams

    root = Path(args.corpus) if args.corpus else default_corpus()
    if root is None or not root.is_dir():
        raise InvalidInput("no corpus folder: pass --corpus DIR")
    items = diarization_items(root)
    files = [i for i in items if i.name in names(args.half, "diar")]
    if not files:
        raise InvalidInput(f"no {args.half}-half diarization files under {root}")
    vox = Voxserve(engine_settings(args))
    try:
        embedder = args.embedder or vox.settings.diarization.naming_embedder
        results = run_naming(vox, files, files if args.half == "tune" else items, embedder)
    finally:
        vox.close()
    threshold = args.threshold
    if threshold is None:
        threshold = DiarizationParams.from_settings(vox.settings.diarization, embedder).naming_threshold
    print(f"embedder {embedder}, {args.half} half")
    print(format_naming_report(results, threshold))
    return 0
