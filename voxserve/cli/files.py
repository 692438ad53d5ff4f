"""The runner of the commands that take many input files and write one output each (``transcribe``, ``diarize``).

Up to :data:`MAX_FILES_IN_FLIGHT` files run at once (their chunks share the engine's batches); one progress bar
over audio seconds and the speed summary go to stderr, so that stdout carries only the outputs. A file that
fails gets an ``error: <path>: <message>`` line and the others still run.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from voxserve.audio import probe
from voxserve.errors import VoxserveError

MAX_FILES_IN_FLIGHT = 4

Progress = Callable[[float, float], None]
"""A per-file progress hook: (audio seconds done, audio seconds in the file)."""


class _Timed(Protocol):
    @property
    def duration_s(self) -> float: ...


R = TypeVar("R", bound=_Timed)


class _Bar:
    """A tqdm progress bar over audio seconds, shared by all files of one run."""

    def __init__(self, total_s: float, enabled: bool) -> None:
        self._bar: Any = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=round(total_s, 1), unit="audio s", file=sys.stderr, dynamic_ncols=True)
        self._done: dict[int, float] = {}

    def hook(self, key: int) -> Progress:
        def update(done_s: float, _total_s: float) -> None:
            if self._bar is not None:  # the bar shows the rounded sum (summed rounded steps ran past the total)
                self._done[key] = done_s
                shown = min(self._bar.total, round(sum(self._done.values()), 1))
                self._bar.n = shown
                self._bar.refresh()

        return update

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _duration(path: str) -> float:
    try:
        return probe(path).duration_s or 0.0
    except VoxserveError:
        return 0.0  # the job reports it


async def _run_all(paths: Sequence[str], job: Callable[[str, Progress], Awaitable[R]],
                   bar: _Bar) -> list[R | VoxserveError]:
    gate = asyncio.Semaphore(MAX_FILES_IN_FLIGHT)

    async def one(i: int, path: str) -> R | VoxserveError:
        async with gate:
            try:
                return await job(path, bar.hook(i))
            except VoxserveError as exc:
                return exc

    try:
        return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(paths))))
    finally:
        bar.close()


def run_files(
    paths: Sequence[str],
    job: Callable[[str, Progress], Awaitable[R]],
    render: Callable[[R, str], str],
    extension: str,
    *,
    output_dir: Path | None,
    quiet: bool,
    summary: Callable[[list[R]], str] | None = None,
) -> int:
    """Run ``job`` on every path, write each result, print the speed summary; returns the exit status.

    Args:
        paths: the input files, in the order their outputs are written.
        job: the work on one file, given its path and a :data:`Progress` hook; its :class:`VoxserveError` is
            that file's failure.
        render: the output text of a result, given the result and the input's name without folder and
            extension (also the output file's name, and the file id of RTTM).
        extension: the output files' extension, without the dot.
        output_dir: write ``<name>.<extension>`` files here (created when missing); None: every output to
            stdout, in input order.
        quiet: no progress bar and no summary.
        summary: more of the summary line (e.g. ``", speakers 2"``), from the results that succeeded.

    Returns:
        0, or 1 when any file failed.
    """
    total_s = sum(_duration(p) for p in paths)
    bar = _Bar(total_s, not quiet and total_s > 0)  # no empty bar when no input decodes
    started = time.monotonic()
    results = asyncio.run(_run_all(paths, job, bar))
    wall = time.monotonic() - started
    done: list[R] = []
    for path, result in zip(paths, results, strict=True):
        if isinstance(result, VoxserveError):
            print(f"error: {path}: {result.message}", file=sys.stderr)
            continue
        done.append(result)
        name = Path(path).stem
        text = render(result, name)
        if output_dir is None:
            sys.stdout.write(text)
        else:
            output_dir.mkdir(parents=True, exist_ok=True)
            (output_dir / f"{name}.{extension}").write_text(text, encoding="utf-8")
    if not quiet and done:
        audio = sum(r.duration_s for r in done)
        rtfx = audio / wall if wall > 0 else 0.0
        more = summary(done) if summary is not None else ""
        print(f"audio {audio:.1f} s, wall {wall:.2f} s, RTFx {rtfx:.1f}{more}", file=sys.stderr)
    return 1 if len(done) < len(results) else 0
