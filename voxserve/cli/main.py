"""Command line: ``voxserve transcribe | serve | diarize | speak | agent | eval | bench | plan ...``.

The parser of every command, registered from the command's own module (flags that several commands share are
in :mod:`voxserve.cli.common`), and the entry point: logging, exit status 2 and one ``error:`` line for a
:class:`~voxserve.errors.VoxserveError`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from voxserve import __version__
from voxserve.cli.agent import add_agent_command
from voxserve.cli.bench import add_bench_commands
from voxserve.cli.bench_diarize import add_bench_diarize
from voxserve.cli.bench_scale import add_bench_scale
from voxserve.cli.diarize import add_diarize_command
from voxserve.cli.eval import add_eval_commands
from voxserve.cli.eval_diarization import add_eval_diarization
from voxserve.cli.eval_keyterms import add_eval_keyterms
from voxserve.cli.eval_languages import add_eval_languages
from voxserve.cli.eval_naming import add_eval_naming
from voxserve.cli.plan import add_plan_command
from voxserve.cli.serve import add_serve_command
from voxserve.cli.speak import add_speak_command
from voxserve.cli.transcribe import add_transcribe_command
from voxserve.errors import VoxserveError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="voxserve", description="Self-hosted speech inference.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_transcribe_command(sub)
    add_serve_command(sub)
    evals = add_eval_commands(sub)
    add_eval_diarization(evals)
    add_eval_keyterms(evals)
    add_eval_languages(evals)
    add_eval_naming(evals)
    bench = add_bench_commands(sub)
    add_bench_diarize(bench)
    add_bench_scale(bench)
    add_diarize_command(sub)
    add_speak_command(sub)
    add_agent_command(sub)
    add_plan_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``voxserve`` command."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except VoxserveError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
