"""The ``voxserve`` command line: one module per command, each a thin transport over the
:class:`~voxserve.Voxserve` facade; :mod:`.main` registers them all, :mod:`.common` holds the flags and
settings they share and :mod:`.files` runs the commands that write one output per input file."""

from __future__ import annotations

from voxserve.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
