"""The blocking executor: where non-model blocking work (decoding files, VAD, I/O) runs off the event loop.

Model calls run in the worker threads of their :class:`~voxserve.engine.batcher.MicroBatcher`; everything
else that blocks goes through :meth:`BlockingExecutor.run`, which returns fully materialised results.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

R = TypeVar("R")


class BlockingExecutor:
    """A bounded thread pool for blocking helpers called from async code."""

    def __init__(self, max_workers: int = 4, name: str = "voxserve-io") -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)

    async def run(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """Run ``fn(*args, **kwargs)`` in the pool and await its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def shutdown(self) -> None:
        """Stop the pool (pending work is cancelled)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
