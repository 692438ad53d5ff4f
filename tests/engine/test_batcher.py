"""MicroBatcher scheduling, tested with fake model functions that record batch composition and timing."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from voxserve.engine.batcher import BatcherConfig, MicroBatcher
from voxserve.errors import BackendError, Overloaded
from voxserve.types import Priority

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 5.0) -> T:
    async def main() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(main())


@dataclass
class Call:
    items: list[Any]
    thread: str
    started: float
    ended: float = 0.0


@dataclass
class Recorder:
    """A fake model function: ``fn(items) -> [item * 10]``, recording every call.

    ``gate`` (when set) blocks the first ``block_calls`` calls until it is opened; ``entered`` is set
    when a call starts.
    """

    block_calls: int = 0
    delay_s: float = 0.0
    calls: list[Call] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    transform: Callable[[list[Any]], list[Any]] | None = None

    def __call__(self, items: list[Any]) -> list[Any]:
        call = Call(list(items), threading.current_thread().name, time.monotonic())
        with self.lock:
            self.calls.append(call)
            n = len(self.calls)
        self.entered.set()
        if n <= self.block_calls:
            assert self.gate.wait(5.0), "gate never opened"
        if self.delay_s:
            time.sleep(self.delay_s)
        call.ended = time.monotonic()
        if self.transform is not None:
            return self.transform(items)
        return [x * 10 for x in items]

    @property
    def batches(self) -> list[list[Any]]:
        with self.lock:
            return [c.items for c in self.calls]


async def wait_entered(rec: Recorder) -> None:
    assert await asyncio.to_thread(rec.entered.wait, 5.0)
    rec.entered.clear()


async def settle(n: int = 3) -> None:
    """Let freshly created tasks run up to their first await (their submit has queued the item)."""
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.fixture
def thread_errors() -> Iterator[list[BaseException]]:
    """Exceptions that escaped any thread (a dead batcher worker)."""
    errors: list[BaseException] = []
    old = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)  # type: ignore[assignment,arg-type]
    yield errors
    threading.excepthook = old


def make(rec: Recorder, **kw: Any) -> MicroBatcher[Any, Any]:
    return MicroBatcher(rec, BatcherConfig(**kw), name="fake")


# ------------------------------------------------------------------------------------------- basics


def test_invalid_config_is_refused() -> None:
    with pytest.raises(ValueError):
        MicroBatcher(Recorder(), BatcherConfig(max_batch_size=0))
    with pytest.raises(ValueError):
        MicroBatcher(Recorder(), BatcherConfig(workers=0))


def test_concurrent_submitters_share_batches_and_get_their_own_results() -> None:
    rec = Recorder(delay_s=0.02)
    b = make(rec, max_batch_size=4, max_wait_ms=5, offline_wait_ms=30, workers=1)
    items = list(range(1, 23))

    async def main() -> list[int]:
        return list(await asyncio.gather(*(b.submit(i) for i in items)))

    try:
        assert run(main()) == [i * 10 for i in items]
    finally:
        b.close()
    sizes = [len(x) for x in rec.batches]
    assert max(sizes) == 4 and all(1 <= s <= 4 for s in sizes)
    assert sum(sizes) == len(items)
    assert sorted(x for batch in rec.batches for x in batch) == items  # each item ran exactly once
    assert len(sizes) <= 7  # batched, not one call per item


def test_submit_many_keeps_order() -> None:
    rec = Recorder()
    b = make(rec, max_batch_size=3, max_wait_ms=5, offline_wait_ms=5)
    try:
        assert run(b.submit_many([5, 1, 4, 2, 3])) == [50, 10, 40, 20, 30]
    finally:
        b.close()


def test_results_reach_the_right_caller_under_load() -> None:
    rec = Recorder(transform=lambda items: [f"r{x}" for x in items])
    b = make(rec, max_batch_size=5, max_wait_ms=2, offline_wait_ms=5, workers=2)

    async def caller(i: int) -> tuple[int, str]:
        await asyncio.sleep((i % 7) * 0.003)
        return i, await b.submit(i, Priority(i % 3))

    async def main() -> list[tuple[int, str]]:
        return list(await asyncio.gather(*(caller(i) for i in range(60))))

    try:
        for i, r in run(main()):
            assert r == f"r{i}"
    finally:
        b.close()
    assert all(len(x) <= 5 for x in rec.batches)


def test_work_splits_evenly_across_idle_workers() -> None:
    barrier = threading.Barrier(2, timeout=3.0)

    def both_at_once(items: list[int]) -> list[int]:
        barrier.wait()  # fails unless two batches run at the same time
        return [x * 10 for x in items]

    rec = Recorder(transform=both_at_once)
    b = make(rec, max_batch_size=8, max_wait_ms=5, offline_wait_ms=200, workers=2)
    try:
        assert run(b.submit_many(list(range(8)))) == [x * 10 for x in range(8)]
    finally:
        b.close()
    assert sorted(len(x) for x in rec.batches) == [4, 4]
    assert len({c.thread for c in rec.calls}) == 2


def test_lone_live_item_waits_only_max_wait_ms() -> None:
    rec = Recorder()
    b = make(rec, max_batch_size=8, max_wait_ms=10, offline_wait_ms=400)

    async def timed(priority: Priority) -> float:
        t = time.monotonic()
        await b.submit(1, priority)
        return time.monotonic() - t

    try:
        live = run(timed(Priority.LIVE))
        offline = run(timed(Priority.OFFLINE))
    finally:
        b.close()
    assert live < 0.2
    assert 0.35 < offline < 2.0  # offline work waits to fill a batch


def test_full_batch_does_not_wait() -> None:
    rec = Recorder()
    b = make(rec, max_batch_size=4, max_wait_ms=1000, offline_wait_ms=1000)

    async def main() -> float:
        t = time.monotonic()
        await b.submit_many([1, 2, 3, 4])
        return time.monotonic() - t

    try:
        assert run(main()) < 0.5
    finally:
        b.close()
    assert rec.batches == [[1, 2, 3, 4]]


# ----------------------------------------------------------------------------------------- priority


def batches_behind_a_busy_worker(b: MicroBatcher[int, int], rec: Recorder,
                                 queued: list[tuple[int, Priority]]) -> list[list[Any]]:
    """The batches ``b``'s only worker runs when ``queued`` arrives while it is busy with item 0."""

    async def main() -> None:
        first = asyncio.ensure_future(b.submit(0))
        await wait_entered(rec)  # the only worker is busy
        tasks = [asyncio.ensure_future(b.submit(i, p)) for i, p in queued]
        await settle()
        assert b.queue_depth == len(queued)
        rec.gate.set()
        assert await asyncio.gather(first, *tasks) == [0] + [10 * i for i, _ in queued]

    try:
        run(main())
    finally:
        b.close()
    return rec.batches


def test_live_item_goes_first_in_the_next_batch() -> None:
    rec = Recorder(block_calls=1)
    b = make(rec, max_batch_size=2, max_wait_ms=5, offline_wait_ms=5, workers=1)
    queued = [(1, Priority.OFFLINE), (2, Priority.OFFLINE), (3, Priority.AGENT), (4, Priority.OFFLINE), (5, Priority.LIVE)]
    # live, then agent, then offline in arrival order
    assert batches_behind_a_busy_worker(b, rec, queued) == [[0], [5, 3], [1, 2], [4]]


def test_a_final_shares_its_batch_only_with_finals() -> None:
    rec = Recorder(block_calls=1)
    b = make(rec, max_batch_size=8, max_wait_ms=5, offline_wait_ms=5, workers=1)
    queued = [(1, Priority.PARTIAL), (2, Priority.LIVE), (3, Priority.OFFLINE), (4, Priority.AGENT), (5, Priority.PARTIAL)]
    # the finals alone, then the previews alone, then the offline chunk (room for all of them in one batch)
    assert batches_behind_a_busy_worker(b, rec, queued) == [[0], [2, 4], [1, 5], [3]]


def test_a_waited_on_batch_holds_only_items_of_one_model_call_and_offline_batches_fill() -> None:
    rec = Recorder(block_calls=1)
    b: MicroBatcher[int, int] = MicroBatcher(
        rec, BatcherConfig(max_batch_size=8, max_wait_ms=5, offline_wait_ms=5, workers=1), key=lambda x: x % 2)
    queued = [(1, Priority.LIVE), (2, Priority.LIVE), (3, Priority.AGENT), (4, Priority.PARTIAL),
              (5, Priority.PARTIAL), (6, Priority.PARTIAL), (7, Priority.OFFLINE), (8, Priority.OFFLINE)]
    # odd and even keys never share a final's or a preview's batch; offline chunks share regardless
    assert batches_behind_a_busy_worker(b, rec, queued) == [[0], [1, 3], [2], [4, 6], [5], [7, 8]]


# --------------------------------------------------------------------------------------- failures


def test_failing_item_fails_only_its_own_caller() -> None:
    def fn(items: list[str]) -> list[str]:
        if "bad" in items:
            raise ValueError("cannot do bad")
        return [x.upper() for x in items]

    rec = Recorder(transform=fn)
    b = make(rec, max_batch_size=3, max_wait_ms=1000, offline_wait_ms=1000)

    async def main() -> list[Any]:
        return list(await asyncio.gather(b.submit("a"), b.submit("bad"), b.submit("c"), return_exceptions=True))

    try:
        a, bad, c = run(main())
    finally:
        b.close()
    assert (a, c) == ("A", "C")
    assert isinstance(bad, ValueError) and str(bad) == "cannot do bad"
    assert rec.batches == [["a", "bad", "c"], ["a"], ["bad"], ["c"]]  # the batch is retried item by item


def test_wrong_number_of_results_is_a_backend_error() -> None:
    rec = Recorder(transform=lambda items: [])
    b = make(rec, max_batch_size=2, max_wait_ms=1000, offline_wait_ms=1000)

    async def main() -> list[Any]:
        return list(await asyncio.gather(b.submit(1), b.submit(2), return_exceptions=True))

    try:
        results = run(main())
    finally:
        b.close()
    assert all(isinstance(r, BackendError) for r in results)
    assert "returned 0 results for 1 items" in str(results[0])
    assert rec.batches == [[1, 2], [1], [2]]


def test_wrong_number_only_for_batches_recovers_item_by_item() -> None:
    rec = Recorder(transform=lambda items: [x * 10 for x in items[:1]])
    b = make(rec, max_batch_size=3, max_wait_ms=1000, offline_wait_ms=1000)
    try:
        assert run(b.submit_many([1, 2, 3])) == [10, 20, 30]
    finally:
        b.close()


class Fatal(BaseException):
    pass


def test_base_exception_becomes_backend_error() -> None:
    def fn(items: list[int]) -> list[int]:
        raise Fatal("boom")

    b = MicroBatcher(fn, BatcherConfig(max_batch_size=1, max_wait_ms=1))
    try:
        with pytest.raises(BackendError, match="worker failed"):
            run(b.submit(1, Priority.LIVE))
        # the worker survived
        with pytest.raises(BackendError):
            run(b.submit(2, Priority.LIVE))
    finally:
        b.close()


# -------------------------------------------------------------------------------- admission control


def test_full_queue_is_overloaded_with_retry_after() -> None:
    rec = Recorder(block_calls=1)
    b = make(rec, max_batch_size=1, max_wait_ms=1, offline_wait_ms=1, workers=1, max_queue=5)

    async def main() -> None:
        first = asyncio.ensure_future(b.submit(0))
        await wait_entered(rec)
        queued = [asyncio.ensure_future(b.submit(i)) for i in range(1, 6)]
        await settle()
        assert b.queue_depth == 5
        with pytest.raises(Overloaded) as info:
            await b.submit(99)
        assert info.value.retry_after_s == 5.0  # 5 queued items, one item per batch, one worker
        rec.gate.set()
        assert await asyncio.gather(first, *queued) == [0, 10, 20, 30, 40, 50]
        assert await b.submit(6) == 60  # room again

    try:
        run(main())
    finally:
        b.close()
    assert [x for batch in rec.batches for x in batch] == [0, 1, 2, 3, 4, 5, 6]


def test_retry_after_scales_with_capacity() -> None:
    rec = Recorder(block_calls=2)
    b = make(rec, max_batch_size=2, max_wait_ms=1, offline_wait_ms=1, workers=2, max_queue=12)

    async def main() -> None:
        busy = []
        for i in range(2):  # both workers busy with one item each
            busy.append(asyncio.ensure_future(b.submit(i, Priority.LIVE)))
            await wait_entered(rec)
        while len(rec.calls) < 2:  # noqa: ASYNC110 - polls a plain list the worker thread fills
            await asyncio.sleep(0.002)
        queued = [asyncio.ensure_future(b.submit(i)) for i in range(12)]
        await settle()
        with pytest.raises(Overloaded) as info:
            await b.submit(99)
        assert info.value.retry_after_s == 3.0  # 12 items / (2 per batch * 2 workers)
        rec.gate.set()
        await asyncio.gather(*busy, *queued)

    try:
        run(main())
    finally:
        b.close()


def test_cancelled_callers_items_are_skipped() -> None:
    rec = Recorder(block_calls=1)
    b = make(rec, max_batch_size=4, max_wait_ms=1, offline_wait_ms=1, workers=1)

    async def main() -> None:
        first = asyncio.ensure_future(b.submit(0))
        await wait_entered(rec)
        keep = asyncio.ensure_future(b.submit(1))
        gone = asyncio.ensure_future(b.submit(2))
        keep2 = asyncio.ensure_future(b.submit(3))
        await settle()
        gone.cancel()
        await settle()
        assert gone.cancelled()
        rec.gate.set()
        assert await asyncio.gather(first, keep, keep2) == [0, 10, 30]

    try:
        run(main())
    finally:
        b.close()
    assert rec.batches == [[0], [1, 3]]


def test_close_refuses_new_work_and_finishes_queued_work() -> None:
    rec = Recorder(block_calls=1)
    b = make(rec, max_batch_size=2, max_wait_ms=1, offline_wait_ms=1, workers=1)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(b.submit(0))
        await wait_entered(rec)
        queued = [asyncio.ensure_future(b.submit(i)) for i in (1, 2, 3)]
        await settle()
        closing = loop.run_in_executor(None, b.close)  # waits for the queued work
        while not b._closed:  # noqa: ASYNC110 - polls a flag set by another thread
            await asyncio.sleep(0.002)
        with pytest.raises(Overloaded) as info:
            await b.submit(4)
        assert info.value.retry_after_s > 0
        assert not closing.done()
        rec.gate.set()
        assert await asyncio.gather(first, *queued) == [0, 10, 20, 30]
        await closing

    run(main())
    assert rec.batches == [[0], [1, 2], [3]]
    assert not any(t.is_alive() for t in b._threads)


def test_observer_sees_every_batch() -> None:
    seen: list[tuple[str, int, float, float, int]] = []

    class Obs:
        def on_batch(self, name: str, size: int, wait_s: float, run_s: float, queue_depth: int) -> None:
            seen.append((name, size, wait_s, run_s, queue_depth))

    rec = Recorder(delay_s=0.01)
    b = MicroBatcher(
        rec, BatcherConfig(max_batch_size=3, max_wait_ms=1000, offline_wait_ms=1000), name="m", observer=Obs()
    )
    try:
        run(b.submit_many([1, 2, 3]))
    finally:
        b.close()
    assert len(seen) == 1
    name, size, wait_s, run_s, depth = seen[0]
    assert (name, size, depth) == ("m", 3, 0)
    assert 0 <= wait_s < 0.5 and run_s >= 0.009


def test_a_worker_that_finds_the_queue_drained_keeps_running(thread_errors: list[BaseException]) -> None:
    """Two workers wait to fill a batch from the same single item; the one that loses must go back to
    waiting, not pop an empty queue (which killed its thread)."""
    rec = Recorder(block_calls=1)
    b = make(rec, max_batch_size=2, max_wait_ms=10, offline_wait_ms=300, workers=2)

    async def main() -> None:
        live = asyncio.ensure_future(b.submit(0, Priority.LIVE))
        await wait_entered(rec)  # worker X is busy; worker Y idles
        offline = asyncio.ensure_future(b.submit(1))  # Y starts waiting 300 ms for a second item
        await asyncio.sleep(0.1)
        rec.gate.set()  # X comes back, finds the item queued and waits its own 300 ms
        assert await live == 0
        assert await offline == 10  # Y takes it first
        await asyncio.sleep(0.25)  # X's wait runs out on an empty queue
        assert await b.submit(2, Priority.LIVE) == 20

    try:
        run(main())
        assert thread_errors == []
        assert all(t.is_alive() for t in b._threads)
    finally:
        b.close()
