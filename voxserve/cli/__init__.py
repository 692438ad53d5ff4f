"""The ``voxserve`` command line: one module per command (``transcribe`` and ``serve`` in :mod:`.main`),
each a thin transport over the :class:`~voxserve.Voxserve` facade."""

from __future__ import annotations

from voxserve.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
