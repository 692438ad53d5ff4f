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


def _nice_of(thread_name: str) -> int:
    """The nice value of this process's thread of that name (Linux schedules threads one by one)."""
    import os

    for thread in threading.enumerate():
        if thread.name == thread_name and thread.native_id is not None:
            return os.getpriority(os.PRIO_PROCESS, thread.native_id)
    raise AssertionError(f"no thread {thread_name!r}")


def test_urgent_workers_take_only_work_due_soon_while_the_others_are_busy() -> None:
    gate = threading.Event()
    ran: list[tuple[str, str]] = []

    def fn(items: list[str]) -> list[str]:
        if items == ["blocker"]:
            gate.wait(5)
        ran.append((items[0], threading.current_thread().name))
        return items

    config = BatcherConfig(max_batch_size=1, max_wait_ms=0.0, urgent_workers=1, urgent_horizon_s=0.3)
    batcher: MicroBatcher[str, str] = MicroBatcher(fn, config, name="t")

    async def run() -> None:
        now = time.monotonic()
        # The urgent worker may take the blocker too: queue it as offline so the regular worker holds it.
        blocker = asyncio.ensure_future(batcher.submit("blocker", Priority.OFFLINE))
        await asyncio.sleep(0.1)
        # Due 1.7 s in: far enough that a loaded machine still runs "live-now" before it falls due.
        later = asyncio.ensure_future(batcher.submit("live-in-2s", Priority.LIVE, deadline=now + 2.0))
        offline = asyncio.ensure_future(batcher.submit("offline", Priority.OFFLINE, deadline=now - 1))
        due = asyncio.ensure_future(batcher.submit("live-now", Priority.LIVE, deadline=now + 0.1))
        await asyncio.wait_for(due, 2)  # the regular worker is still blocked: the urgent one ran it
        assert not later.done() and not offline.done()
        await asyncio.wait_for(later, 3)  # it falls due 0.3 s before its deadline, while the blocker still runs
        assert time.monotonic() >= now + 2.0 - 0.3 - 0.05
        assert not offline.done()  # offline work never goes to an urgent worker
        gate.set()
        await asyncio.gather(blocker, offline)

    try:
        asyncio.run(run())
    finally:
        batcher.close()
    assert ran[:2] == [("live-now", "t-urgent-0"), ("live-in-2s", "t-urgent-0")]
    assert ("offline", "t-batcher-0") in ran


def test_regular_workers_run_nicer_than_urgent_ones() -> None:
    import os
    import sys

    import pytest

    if not sys.platform.startswith("linux"):
        pytest.skip("per-thread nice values are a Linux feature")
    base = os.getpriority(os.PRIO_PROCESS, 0)
    batcher: MicroBatcher[str, str] = MicroBatcher(
        lambda items: items, BatcherConfig(workers=1, urgent_workers=1, background_nice=5), name="nicetest"
    )
    try:
        deadline = time.monotonic() + 2
        while _nice_of("nicetest-batcher-0") == base and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _nice_of("nicetest-batcher-0") == min(19, base + 5)
        assert _nice_of("nicetest-urgent-0") == base
    finally:
        batcher.close()


def test_offline_work_is_not_lost_to_a_sleeping_urgent_worker() -> None:
    """A new item wakes one waiting thread; an urgent worker that declines it must not swallow the wake-up."""
    config = BatcherConfig(max_batch_size=1, max_wait_ms=0.0, workers=1, urgent_workers=3)
    batcher: MicroBatcher[int, int] = MicroBatcher(lambda items: [i * 2 for i in items], config, name="t")

    async def run() -> list[int]:
        out = []
        for i in range(20):  # one at a time: every submit finds all four threads asleep
            out.append(await asyncio.wait_for(batcher.submit(i, Priority.OFFLINE), 2))
        return out

    try:
        assert asyncio.run(run()) == [i * 2 for i in range(20)]
    finally:
        batcher.close()
