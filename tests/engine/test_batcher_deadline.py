"""MicroBatcher: earliest deadline first within a priority class; arrival order when no deadline is given."""

from __future__ import annotations

import asyncio
import threading
import time

from voxserve.engine.batcher import BatcherConfig, MicroBatcher
from voxserve.types import Priority


def test_earliest_deadline_first_within_a_class() -> None:
    gate = threading.Event()
    order: list[str] = []

    def fn(items: list[str]) -> list[str]:
        gate.wait(5)
        order.extend(items)
        return items

    batcher: MicroBatcher[str, str] = MicroBatcher(fn, BatcherConfig(max_batch_size=1, max_wait_ms=0.0), name="t")

    async def run() -> None:
        now = time.monotonic()
        blocker = asyncio.ensure_future(batcher.submit("blocker", Priority.LIVE))
        await asyncio.sleep(0.05)  # the worker holds "blocker" until the gate opens
        tasks = [
            asyncio.ensure_future(batcher.submit("live-late", Priority.LIVE, deadline=now + 5)),
            asyncio.ensure_future(batcher.submit("offline-early", Priority.OFFLINE, deadline=now - 5)),
            asyncio.ensure_future(batcher.submit("live-early", Priority.LIVE, deadline=now + 1)),
            asyncio.ensure_future(batcher.submit("live-arrival", Priority.LIVE)),  # deadline = arrival (now)
            asyncio.ensure_future(batcher.submit("agent", Priority.AGENT, deadline=now - 9)),
        ]
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.gather(blocker, *tasks)

    try:
        asyncio.run(run())
    finally:
        batcher.close()
    assert order == ["blocker", "live-arrival", "live-early", "live-late", "agent", "offline-early"]
