"""The head's side of the replicas: a :class:`~voxserve.engine.pool.Recognizer` that sends each request to one
replica actor, so pipelines and live streams run on Ray without knowing it.

Dispatch. Offline work (chunks of long files) is sent to the least-loaded live replica that has a free slot
(``slots`` requests in flight per replica, by default two full batches: one running, one queued); the rest
waits at the head, most urgent and oldest first, and goes to whichever replica frees a slot first, so a slow
replica takes fewer chunks and a lost replica takes few with it. Urgent work (live, agent, partial) skips
the head queue and the slot limit; the replica's own batcher runs it ahead of offline work.

Sticky streams. :meth:`RayRecognizer.for_stream` gives a live stream its own view, pinned to the replica
that owns the stream's key on a consistent-hash ring of the live replicas. The pin moves only when that
replica is lost (to the key's next owner), so a stream's utterances run in order on one replica.

Faults. A call that fails because its replica died (or became unreachable) takes the replica out of service,
counts and logs the event, and runs the same request again on another replica, up to ``max_attempts`` calls
per request: the caller gets exactly one result per request, so no chunk is lost or duplicated. A thread
then pings the lost replica; if Ray restarts it (``max_restarts``), it is put back in service.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from voxserve.backends.asr.options import check_decode_options
from voxserve.backends.base import AsrModelInfo, AsrRequest, AsrResult, DecodeOptions
from voxserve.distributed.hashring import HashRing
from voxserve.distributed.replica import ReplicaInfo
from voxserve.errors import BackendError, ModelUnavailable, VoxserveError
from voxserve.types import Priority

log = logging.getLogger(__name__)


@runtime_checkable
class ReplicaObserver(Protocol):
    """Receives replica events (for metrics): ``started``, ``lost`` (taken out of service after a failed
    call), ``recovered`` (back after a restart), ``retried`` (a request re-sent to another replica)."""

    def on_replica_event(self, model: str, replica: str, event: str) -> None:
        """One event of one replica."""
        ...


@dataclass
class ReplicaState:
    """The head's view of one replica actor."""

    name: str
    handle: Any
    info: ReplicaInfo
    slots: int
    inflight: int = 0
    alive: bool = True
    served: int = 0
    failures: int = 0


@dataclass(frozen=True)
class ClusterStats:
    """Counters of one model's replicas, for metrics and tests.

    Attributes:
        replicas: replicas started. alive: replicas in service now.
        lost: times a replica was taken out of service. recovered: times one came back.
        retried: requests re-sent to another replica after theirs failed.
        queued: offline requests waiting at the head for a free slot.
        inflight / served: per replica, requests in flight now / answered so far.
    """

    model: str
    replicas: int
    alive: int
    lost: int
    recovered: int
    retried: int
    queued: int
    inflight: dict[str, int] = field(default_factory=dict)
    served: dict[str, int] = field(default_factory=dict)


@dataclass(order=True)
class _Waiter:
    priority: int
    seq: int
    future: asyncio.Future[ReplicaState] = field(compare=False)
    loop: asyncio.AbstractEventLoop = field(compare=False)


class RayRecognizer:
    """Speech recognition on a set of replica actors of one model (implements ``Recognizer``)."""

    def __init__(
        self,
        replicas: Sequence[tuple[str, Any, ReplicaInfo]],
        *,
        slots: int = 0,
        max_attempts: int = 3,
        observer: ReplicaObserver | None = None,
        probe_timeout_s: float = 300.0,
    ) -> None:
        """``replicas``: (name, actor handle, what it reported) of each started replica; ``slots``: offline
        requests in flight per replica (0 = two full batches)."""
        if not replicas:
            raise ValueError("at least one replica is needed")
        self._info: AsrModelInfo = replicas[0][2].model
        self._replicas = {
            name: ReplicaState(name, handle, info, slots or 2 * info.capacity) for name, handle, info in replicas
        }
        self.max_attempts = max(1, max_attempts)
        self._observer = observer
        self._probe_timeout_s = probe_timeout_s
        self._lock = threading.RLock()
        self._ring = HashRing(self._replicas)
        self._waiters: list[_Waiter] = []
        self._seq = itertools.count()
        self._probing: set[str] = set()
        self._lost = self._recovered = self._retried = 0
        self._closed = False

    # ------------------------------------------------------------------------------- Recognizer

    @property
    def info(self) -> AsrModelInfo:
        """Facts about the model (every replica serves the same one)."""
        return self._info

    @property
    def capacity(self) -> int:
        """Chunks the live replicas work on at once (the sum of workers x batch size)."""
        with self._lock:
            return max(1, sum(r.info.capacity for r in self._replicas.values() if r.alive))

    @property
    def busy(self) -> bool:
        """Work waits at the head, or every live replica has a full batch per worker in flight."""
        with self._lock:
            live = [r for r in self._replicas.values() if r.alive]
            return bool(self._waiters) or all(r.inflight >= r.info.capacity for r in live)

    @property
    def queue_depth(self) -> int:
        """Offline requests waiting at the head for a replica."""
        with self._lock:
            return len(self._waiters)

    def check_options(self, options: DecodeOptions) -> None:
        """Raise for options the model cannot run (checked here, from the model's facts)."""
        check_decode_options(self._info, options)

    async def transcribe(self, request: AsrRequest, priority: Priority = Priority.OFFLINE) -> AsrResult:
        """Recognise one request on one replica (another one if that one is lost meanwhile)."""
        return await self._run(request, priority, None)

    # ------------------------------------------------------------------------------- sticky streams

    def for_stream(self, key: str) -> StickyRecognizer:
        """A recogniser for one live stream: all its requests go to one replica (see the module doc)."""
        return StickyRecognizer(self, key)

    def _owner(self, key: str) -> str:
        with self._lock:
            if not self._ring.members:
                raise ModelUnavailable(f"no replica of {self._info.name} is in service")
            return self._ring.owner(key)

    def _pinned_alive(self, name: str) -> bool:
        with self._lock:
            return self._replicas[name].alive

    # ------------------------------------------------------------------------------- state

    @property
    def replicas(self) -> list[ReplicaState]:
        """Every replica, in service or not."""
        with self._lock:
            return list(self._replicas.values())

    def stats(self) -> ClusterStats:
        """Counters for metrics."""
        with self._lock:
            rs = list(self._replicas.values())
            return ClusterStats(
                model=self._info.name, replicas=len(rs), alive=sum(r.alive for r in rs), lost=self._lost,
                recovered=self._recovered, retried=self._retried, queued=len(self._waiters),
                inflight={r.name: r.inflight for r in rs}, served={r.name: r.served for r in rs},
            )

    def close(self) -> None:
        """Fail waiting requests; the owner kills the actors."""
        with self._lock:
            self._closed = True
            waiters, self._waiters = self._waiters, []
        for w in waiters:
            _settle(w, None, ModelUnavailable(f"{self._info.name} is shutting down"), self._release)

    # ------------------------------------------------------------------------------- dispatch

    async def _run(self, request: AsrRequest, priority: Priority, sticky: StickyRecognizer | None) -> AsrResult:
        from ray.exceptions import RayError, RayTaskError

        seq = next(self._seq)  # kept across attempts: a retried chunk keeps its place in the head queue
        for attempt in range(1, self.max_attempts + 1):
            replica = await self._acquire(priority, seq, sticky)
            ref = replica.handle.transcribe.remote(request, priority)
            try:
                result: AsrResult = await ref
            except RayTaskError as exc:  # the replica raised: its own error, not a fault of the replica
                self._release(replica)
                raise _domain_error(exc, replica.name) from None
            except RayError as exc:  # the replica died, is unreachable, or lost the result
                self._on_failure(replica, exc)  # out of service first, so its freed slot goes elsewhere
                self._release(replica)
                if attempt == self.max_attempts:
                    raise BackendError(
                        f"{self._info.name}: {attempt} replicas failed on one request", retryable=True
                    ) from exc
                self._event(replica.name, "retried")
                continue
            except asyncio.CancelledError:
                self._release(replica)
                _cancel(ref)
                raise
            with self._lock:
                replica.served += 1
            self._release(replica)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _acquire(self, priority: Priority, seq: int, sticky: StickyRecognizer | None) -> ReplicaState:
        """A replica with the request counted in flight on it; offline work may wait for a free slot."""
        with self._lock:
            if self._closed:
                raise ModelUnavailable(f"{self._info.name} is shutting down")
            live = [r for r in self._replicas.values() if r.alive]
            if not live:
                raise ModelUnavailable(f"no replica of {self._info.name} is in service ({self._lost} lost)")
            if sticky is not None:
                chosen: ReplicaState | None = self._replicas[sticky.current()]
            elif priority < Priority.OFFLINE:
                chosen = min(live, key=_load)
            else:
                chosen = None if self._waiters else _least_loaded_free(live)
            if chosen is not None:
                chosen.inflight += 1
                return chosen
            loop = asyncio.get_running_loop()
            waiter = _Waiter(int(priority), seq, loop.create_future(), loop)
            heapq.heappush(self._waiters, waiter)
            self._wake()  # a slot may be free behind waiters that gave up
        return await waiter.future

    def _release(self, replica: ReplicaState) -> None:
        with self._lock:
            replica.inflight -= 1
            self._wake()

    def _wake(self) -> None:
        """Hand free slots to waiting requests (call with the lock held)."""
        while self._waiters:
            free = _least_loaded_free([r for r in self._replicas.values() if r.alive])
            if free is None:
                return
            waiter = heapq.heappop(self._waiters)
            if waiter.future.done():
                continue
            free.inflight += 1
            _settle(waiter, free, None, self._release)

    def _fail_waiters(self, error: VoxserveError) -> None:
        """Every waiting request fails (no replica left; call with the lock held)."""
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            _settle(w, None, error, self._release)

    # ------------------------------------------------------------------------------- faults

    def _on_failure(self, replica: ReplicaState, exc: BaseException) -> None:
        with self._lock:
            if not replica.alive:
                return
            replica.alive = False
            replica.failures += 1
            self._lost += 1
            self._ring = HashRing(r.name for r in self._replicas.values() if r.alive)
            left = len(self._ring)
            probe = replica.name not in self._probing and not self._closed
            if probe:
                self._probing.add(replica.name)
            if left:
                self._wake()
            else:
                self._fail_waiters(ModelUnavailable(f"every replica of {self._info.name} is lost"))
        log.warning("replica %s lost (%s: %s); %d in service, its requests go to the others",
                    replica.name, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "", left)
        self._event(replica.name, "lost")
        if probe:
            threading.Thread(target=self._probe, args=(replica,), name=f"probe-{replica.name}", daemon=True).start()

    def _probe(self, replica: ReplicaState) -> None:
        """Wait for a lost replica to answer again (Ray restarts it when ``max_restarts`` allows)."""
        import ray

        try:
            ray.get(replica.handle.ping.remote(), timeout=self._probe_timeout_s)
        except Exception as exc:  # noqa: BLE001 - any failure: the replica stays out of service
            log.warning("replica %s is gone for good (%s)", replica.name, type(exc).__name__)
            return
        finally:
            with self._lock:
                self._probing.discard(replica.name)
        with self._lock:
            if self._closed:
                return
            replica.alive = True
            self._recovered += 1
            self._ring = HashRing(r.name for r in self._replicas.values() if r.alive)
            self._wake()
        log.warning("replica %s is back in service", replica.name)
        self._event(replica.name, "recovered")

    def _event(self, replica: str, event: str) -> None:
        if event == "retried":
            with self._lock:
                self._retried += 1
        if self._observer is not None:
            try:
                self._observer.on_replica_event(self._info.name, replica, event)
            except Exception:  # noqa: BLE001 - metrics never break dispatch
                log.exception("replica observer failed")


class StickyRecognizer:
    """One live stream's recogniser: every request goes to the stream's replica (implements ``Recognizer``)."""

    def __init__(self, router: RayRecognizer, key: str) -> None:
        self.router = router
        self.key = key
        self.replica = router._owner(key)
        self.moves = 0

    def current(self) -> str:
        """The stream's replica; re-pinned to the key's next owner only when that one is lost."""
        if not self.router._pinned_alive(self.replica):
            previous, self.replica = self.replica, self.router._owner(self.key)
            self.moves += 1
            log.info("stream %s moves from replica %s to %s", self.key, previous, self.replica)
        return self.replica

    @property
    def info(self) -> AsrModelInfo:
        """Facts about the model."""
        return self.router.info

    @property
    def capacity(self) -> int:
        """The stream's replica's workers x batch size."""
        return self.router._replicas[self.replica].info.capacity

    @property
    def busy(self) -> bool:
        """The stream's replica has a full batch per worker in flight."""
        r = self.router._replicas[self.replica]
        return r.inflight >= r.info.capacity

    def check_options(self, options: DecodeOptions) -> None:
        """Raise for options the model cannot run."""
        self.router.check_options(options)

    async def transcribe(self, request: AsrRequest, priority: Priority = Priority.LIVE) -> AsrResult:
        """Recognise one request on the stream's replica."""
        return await self.router._run(request, priority, self)


def _load(r: ReplicaState) -> float:
    return r.inflight / max(1, r.info.capacity)


def _least_loaded_free(replicas: list[ReplicaState]) -> ReplicaState | None:
    free = [r for r in replicas if r.inflight < r.slots]
    return min(free, key=_load) if free else None


def _settle(waiter: _Waiter, replica: ReplicaState | None, error: BaseException | None, release: Any) -> None:
    """Resolve a waiter on its own loop; a slot given to a waiter that gave up meanwhile is handed back."""

    def deliver() -> None:
        if waiter.future.done():
            if replica is not None:
                release(replica)
        elif error is not None:
            waiter.future.set_exception(error)
        else:
            waiter.future.set_result(replica)  # type: ignore[arg-type]

    try:
        waiter.loop.call_soon_threadsafe(deliver)
    except RuntimeError:  # the waiter's loop is closed
        if replica is not None:
            release(replica)


def _domain_error(exc: BaseException, replica: str) -> VoxserveError:
    """The replica's own error (InvalidInput, Overloaded, BackendError...) as raised there."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, VoxserveError):
        return cause
    first = str(cause or exc).strip().splitlines()
    return BackendError(f"replica {replica} failed: {first[-1] if first else type(exc).__name__}")


def _cancel(ref: Any) -> None:
    import ray

    try:
        ray.cancel(ref)
    except Exception:  # noqa: BLE001 - best effort: the replica may be gone already
        pass
