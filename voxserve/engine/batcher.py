"""MicroBatcher: one generic batcher that groups work from many callers into model batches.

Callers ``await batcher.submit(item, priority)``; worker threads (the only place the model's blocking code
runs) take the most urgent items first (live before agent before offline; within a class, earliest deadline
first, where an item's deadline is its arrival time unless the caller gives one), wait at most ``max_wait_ms``
for a batch to fill, split queued work fairly between idle workers, and hand each caller its own result. A
batch that someone waits on (a final, an agent's turn, a preview) holds only items the model runs in one call
(equal ``key``) and never mixes finals with previews: on a CPU, items that run one after another in a batch
only add to each other's wait, while another worker could have taken them. A
failing batch is retried item by item so that one bad item fails only its own caller. Admission control: a
full queue raises :class:`~voxserve.errors.Overloaded` at once.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from voxserve.config import AsrConfig
from voxserve.errors import BackendError, Overloaded
from voxserve.types import Priority

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger(__name__)


class BatchObserver(Protocol):
    """Receives one call per executed batch (for metrics)."""

    def on_batch(self, name: str, size: int, wait_s: float, run_s: float, queue_depth: int) -> None:
        """A batch of ``size`` items ran for ``run_s`` seconds after its oldest item waited ``wait_s``."""
        ...


_ASR = AsrConfig.model_fields
"""The batcher's defaults are the speech recogniser's settings (written once, in :mod:`voxserve.config`)."""


@dataclass(frozen=True)
class BatcherConfig:
    """Batching knobs.

    Attributes:
        max_batch_size: the most items in one call of the model function.
        max_wait_ms: how long a worker waits for a batch to fill once it has an urgent (live or agent) item.
        offline_wait_ms: the same when only offline work is queued (never shorter than ``max_wait_ms``): a
            CPU decoder is about twice as efficient per item at batch 4 as at batch 1, but a long file already
            sends its chunks in groups, so the engine's default is short (:class:`voxserve.config.AsrConfig`).
        workers: threads calling the model function concurrently.
        max_queue: queued items beyond which new work is refused.
        urgent_workers: more threads that take only work someone waits on now: live or agent items due
            within ``urgent_horizon_s`` (a caller's deadline, or the arrival time when none was given).
        urgent_horizon_s: how soon an item must be due for the urgent workers to take it.
        background_nice: on Linux, the ``workers`` run this much nicer than the rest of the process, so that
            an urgent worker's model call takes a core from them at once instead of queueing behind a call
            already running (0 = no change; nothing changes where the system refuses it).
    """

    max_batch_size: int = _ASR["max_batch_size"].default
    max_wait_ms: float = _ASR["max_wait_ms"].default
    offline_wait_ms: float = _ASR["offline_wait_ms"].default
    workers: int = 1
    max_queue: int = _ASR["max_queue"].default
    urgent_workers: int = 0
    urgent_horizon_s: float = 0.25
    background_nice: int = 0

    @classmethod
    def from_settings(cls, asr: AsrConfig, *, workers: int | None = None) -> BatcherConfig:
        """The speech recogniser's batching as the ``asr`` settings say (a Ray replica gives its own workers)."""
        return cls(max_batch_size=asr.max_batch_size, max_wait_ms=asr.max_wait_ms,
                   offline_wait_ms=asr.offline_wait_ms, workers=asr.workers if workers is None else workers,
                   max_queue=asr.max_queue)


@dataclass(order=True)
class _Entry:
    priority: int
    deadline: float
    seq: int
    item: object = field(compare=False)
    key: Hashable = field(compare=False)
    future: asyncio.Future[object] = field(compare=False)
    loop: asyncio.AbstractEventLoop = field(compare=False)
    enqueued: float = field(compare=False, default=0.0)


class MicroBatcher(Generic[T, R]):
    """Dynamic batching of ``fn(list[T]) -> list[R]`` across concurrent async callers."""

    def __init__(
        self,
        fn: Callable[[list[T]], Sequence[R]],
        config: BatcherConfig = BatcherConfig(),
        *,
        name: str = "model",
        observer: BatchObserver | None = None,
        key: Callable[[T], Hashable] | None = None,
    ) -> None:
        """``key``: items with equal keys share the model's calls inside ``fn`` (None: all of them do)."""
        if config.max_batch_size < 1 or config.workers < 1 or config.urgent_workers < 0:
            raise ValueError("max_batch_size and workers must be at least 1, urgent_workers at least 0")
        self._fn = fn
        self.config = config
        self.name = name
        self._observer = observer
        self._key = key
        self._heap: list[_Entry] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._waiting = 0  # workers inside _take
        self._closed = False
        self._threads = [
            threading.Thread(target=self._worker, args=(False,), name=f"{name}-batcher-{i}", daemon=True)
            for i in range(config.workers)
        ] + [
            threading.Thread(target=self._worker, args=(True,), name=f"{name}-urgent-{i}", daemon=True)
            for i in range(config.urgent_workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def queue_depth(self) -> int:
        """Items waiting for a worker."""
        with self._cond:
            return len(self._heap)

    async def submit(self, item: T, priority: Priority = Priority.OFFLINE, *, deadline: float | None = None) -> R:
        """Queue one item and wait for its result.

        ``deadline`` (a ``time.monotonic()`` instant) orders items within their priority class, earliest first;
        by default it is the arrival time (first come, first served).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[object] = loop.create_future()
        group = None if self._key is None else self._key(item)  # outside the lock: it may tokenize
        with self._cond:
            if self._closed:
                raise Overloaded(f"{self.name} is shutting down", retry_after_s=5.0)
            if len(self._heap) >= self.config.max_queue:
                raise Overloaded(f"{self.name} queue is full ({len(self._heap)} items)", retry_after_s=self._retry_after())
            now = time.monotonic()
            key = now if deadline is None else deadline
            heapq.heappush(self._heap, _Entry(int(priority), key, next(self._seq), item, group, future, loop, now))
            # A woken urgent worker goes back to sleep on work not due yet: wake everyone then, or that one
            # wake-up would be lost to the workers that may take it.
            if self.config.urgent_workers:
                self._cond.notify_all()
            else:
                self._cond.notify()
        return await future  # type: ignore[return-value]

    async def submit_many(self, items: Sequence[T], priority: Priority = Priority.OFFLINE) -> list[R]:
        """Queue several items (they may share batches) and wait for all results, in order."""
        return list(await asyncio.gather(*(self.submit(i, priority) for i in items)))

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop accepting work and wait (up to ``timeout_s``) for workers to finish what is queued."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def _retry_after(self) -> float:
        return max(1.0, math.ceil(len(self._heap) / max(1, self.config.max_batch_size * self.config.workers)))

    # ------------------------------------------------------------------------------ worker threads

    def _take(self, urgent: bool) -> list[_Entry] | None:
        with self._cond:
            self._waiting += 1
            try:
                return self._take_locked(urgent)
            finally:
                self._waiting -= 1

    def _take_locked(self, urgent: bool) -> list[_Entry] | None:
        while not self._closed:
            if not self._heap:
                due = math.inf
            elif urgent:  # sleeps until the head falls due (a newly queued item wakes it sooner)
                due = self._due_in(self._heap[0])
            else:
                break
            if due <= 0:
                break
            self._cond.wait(due if due < math.inf else None)
        if not self._heap:
            return None
        first_seen = time.monotonic()
        while len(self._heap) < self.config.max_batch_size and not self._closed:
            remaining = first_seen + self._wait_s() - time.monotonic()
            if remaining <= 0:
                break
            self._cond.wait(remaining)
        if not self._heap:  # another worker took it all while this one waited: wait again
            return []
        # Split the queue evenly over the workers that are free now.
        share = math.ceil(len(self._heap) / max(1, self._waiting))
        count = max(1, min(self.config.max_batch_size, share, len(self._heap)))
        batch = [heapq.heappop(self._heap)]
        head = batch[0]
        if head.priority < Priority.OFFLINE:
            # Someone waits on this batch: only what runs in the head's model call, and finals (live and
            # agent) only with finals (the heap pops by class, so a preview at the head has only previews
            # left in its class).
            last = Priority.AGENT if head.priority < Priority.PARTIAL else Priority.PARTIAL
            passed: list[_Entry] = []
            while len(batch) < count and self._heap and self._heap[0].priority <= last:
                entry = heapq.heappop(self._heap)
                (batch if entry.key == head.key else passed).append(entry)
            for entry in passed:
                heapq.heappush(self._heap, entry)
        else:
            batch += [heapq.heappop(self._heap) for _ in range(count - 1)]
        return [e for e in batch if not e.future.cancelled()]

    def _due_in(self, entry: _Entry) -> float:
        """Seconds until an urgent worker may take ``entry`` (never, for offline work)."""
        if entry.priority >= Priority.OFFLINE:
            return math.inf
        return entry.deadline - self.config.urgent_horizon_s - time.monotonic()

    def _wait_s(self) -> float:
        """How long to let a batch fill, given the most urgent queued item (call with the lock held)."""
        if self._heap and self._heap[0].priority < Priority.OFFLINE:
            return self.config.max_wait_ms / 1000.0
        return max(self.config.max_wait_ms, self.config.offline_wait_ms) / 1000.0

    def _worker(self, urgent: bool) -> None:
        if not urgent and self.config.background_nice > 0:
            _renice(self.config.background_nice)
        while True:
            batch = self._take(urgent)
            if batch is None:
                return
            if not batch:
                continue
            try:
                self._run(batch)
            except BaseException as exc:  # noqa: BLE001 - a worker outlives any one batch (an observer failing, ...)
                log.exception("%s worker: batch handling failed", self.name)
                for entry in batch:  # callers not answered yet get the error; the others keep their result
                    _resolve(entry, None, BackendError(f"{self.name} worker failed: {exc!r}"))

    def _run(self, batch: list[_Entry]) -> None:
        started = time.monotonic()
        try:
            results = list(self._fn([e.item for e in batch]))  # type: ignore[misc]
            if len(results) != len(batch):
                raise BackendError(f"{self.name} returned {len(results)} results for {len(batch)} items")
        except BaseException as exc:  # noqa: BLE001 - every failure must reach its callers
            self._fail_or_split(batch, exc)
            return
        for entry, result in zip(batch, results):
            _resolve(entry, result, None)
        self._observe(batch, started)

    def _fail_or_split(self, batch: list[_Entry], exc: BaseException) -> None:
        if len(batch) > 1:
            log.warning("%s batch of %d failed (%s); retrying items one by one", self.name, len(batch), exc)
            for entry in batch:
                self._run([entry])
            return
        if not isinstance(exc, Exception):
            exc = BackendError(f"{self.name} worker failed: {exc!r}")
        _resolve(batch[0], None, exc)

    def _observe(self, batch: list[_Entry], started: float) -> None:
        if self._observer is not None:
            wait = started - min(e.enqueued for e in batch)
            try:
                self._observer.on_batch(self.name, len(batch), wait, time.monotonic() - started, self.queue_depth)
            except Exception:  # noqa: BLE001 - metrics never cost a result or a worker
                log.exception("%s batch observer failed", self.name)


def _renice(increment: int) -> None:
    """Make the calling thread nicer by ``increment`` (Linux schedules threads one by one); where the system
    refuses or has no per-thread priority, nothing changes."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + increment)
    except (AttributeError, OSError) as exc:
        log.debug("could not renice a batcher thread: %s", exc)


def _resolve(entry: _Entry, result: object, exc: BaseException | None) -> None:
    def settle() -> None:
        if entry.future.done():
            return
        if exc is not None:
            entry.future.set_exception(exc)
        else:
            entry.future.set_result(result)

    try:
        entry.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
        pass
