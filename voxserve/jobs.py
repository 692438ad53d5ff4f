"""Asynchronous transcription jobs, persisted in SQLite so that a restart loses no finished result.

A job's input file is kept until the job ends. On start, jobs that were queued or running when the
previous process stopped are queued again (``restarts`` counts how often that happened); jobs whose input
is gone are marked ``interrupted``.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from voxserve.errors import BackendError, Cancelled, InvalidInput, VoxserveError
from voxserve.records import from_record, to_record

log = logging.getLogger(__name__)
T = TypeVar("T")


class JobStatus(StrEnum):
    """Life cycle of a job."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def final(self) -> bool:
        """Whether the job will not change any more."""
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.INTERRUPTED)


class CallbackStatus(StrEnum):
    """Delivery state of a job's callback."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


@dataclass
class Callback:
    """A job's callback (a POST to ``url`` when the job ends) and how its delivery went."""

    url: str
    result_url: str
    status: CallbackStatus = CallbackStatus.PENDING
    attempts: int = 0
    last_status: int | None = None
    delivered_at: float | None = None
    error: str | None = None

    def public(self) -> dict[str, Any]:
        """The delivery state as the job's public JSON shows it."""
        shown = dict(to_record(self))
        del shown["result_url"]
        shown["delivered_at"] = int(self.delivered_at) if self.delivered_at is not None else None
        return shown


@dataclass
class Job:
    """One job's record."""

    id: str
    status: JobStatus
    params: dict[str, Any]
    input_path: str
    created_at: float
    updated_at: float
    duration_s: float = 0.0
    progress_s: float = 0.0
    wall_s: float = 0.0
    restarts: int = 0
    error: dict[str, Any] | None = None
    result: dict[str, Any] | None = field(default=None, repr=False)
    callback: Callback | None = None

    @property
    def rtfx(self) -> float:
        """Audio seconds done per wall second so far."""
        return self.progress_s / self.wall_s if self.wall_s > 0 else 0.0

    def public(self) -> dict[str, Any]:
        """The job as the API shows it (without the result body)."""
        return {
            "id": self.id,
            "object": "transcription.job",
            "status": self.status.value,
            "created_at": int(self.created_at),
            "updated_at": int(self.updated_at),
            "model": self.params.get("model_name", self.params.get("model")),  # the name the client asked for
            "duration_s": round(self.duration_s, 3),
            "progress_s": round(self.progress_s, 3),
            "progress": round(self.progress_s / self.duration_s, 4) if self.duration_s else 0.0,
            "rtfx": round(self.rtfx, 2),
            "restarts": self.restarts,
            "error": self.error,
            "callback": self.callback.public() if self.callback else None,
        }


_COLUMNS = (
    "id", "status", "params", "input_path", "created_at", "updated_at", "duration_s", "progress_s", "wall_s",
    "restarts", "error", "result", "callback",
)
_SAVED = _COLUMNS[1:-1]  # save() leaves the callback to save_callback(): the job runner and the sender both write


class JobStore:
    """SQLite persistence of jobs (thread-safe; one connection guarded by a lock; WAL journal).

    A database that cannot be used (closed, locked, disk errors) raises :class:`BackendError` with code
    ``job_store_unavailable`` (retryable); :meth:`reopen` connects again.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, status TEXT NOT NULL, params TEXT NOT NULL,"
            " input_path TEXT NOT NULL, created_at REAL, updated_at REAL, duration_s REAL, progress_s REAL,"
            " wall_s REAL, restarts INTEGER, error TEXT, result TEXT, callback TEXT)"
        )
        if "callback" not in {row[1] for row in db.execute("PRAGMA table_info(jobs)")}:  # a database of before callbacks
            db.execute("ALTER TABLE jobs ADD COLUMN callback TEXT")
        return db

    @contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                err = BackendError(f"the job store is unavailable ({exc}); retry", retryable=True)
                err.code = "job_store_unavailable"
                raise err from exc

    def reopen(self) -> None:
        """Connect to the database again (after :meth:`close`, or when the connection was lost)."""
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = self._connect()

    def create(self, params: dict[str, Any], input_path: str, duration_s: float = 0.0, job_id: str | None = None) -> Job:
        """Record a new queued job."""
        now = time.time()
        job = Job(job_id or f"job_{uuid.uuid4().hex}", JobStatus.QUEUED, params, input_path, now, now, duration_s)
        with self._locked() as db:
            db.execute(f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})", self._row(job))
        return job

    def get(self, job_id: str) -> Job | None:
        """The job, or None."""
        with self._locked() as db:
            row = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return self._job(row) if row else None

    def list(self, limit: int = 100) -> list[Job]:
        """The newest jobs first."""
        with self._locked() as db:
            rows = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs ORDER BY created_at DESC LIMIT ?", (limit,)).fetchall()
        return [self._job(r) for r in rows]

    def save(self, job: Job) -> None:
        """Write every field of the job but its callback's delivery state (see :meth:`save_callback`)."""
        job.updated_at = time.time()
        row = self._row(job)
        with self._locked() as db:
            db.execute(f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in _SAVED)} WHERE id = ?", (*row[1:-1], row[0]))

    def save_callback(self, job_id: str, callback: Callback) -> None:
        """Write a job's callback and its delivery state."""
        with self._locked() as db:
            db.execute("UPDATE jobs SET callback = ? WHERE id = ?", (_callback_json(callback), job_id))

    def pending_callbacks(self) -> builtins.list[Job]:
        """Finished jobs whose callback is not yet delivered nor given up (oldest first)."""
        finals = [s.value for s in JobStatus if s.final]
        with self._locked() as db:
            rows = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE json_extract(callback, '$.status') = ?"
                f" AND status IN ({', '.join('?' * len(finals))}) ORDER BY updated_at",
                (CallbackStatus.PENDING.value, *finals),
            ).fetchall()
        return [self._job(r) for r in rows]

    def unfinished(self) -> builtins.list[Job]:  # (`list` is a method of this class)
        """Jobs that were queued or running (oldest first)."""
        with self._locked() as db:
            rows = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE status IN (?, ?) ORDER BY created_at",
                (JobStatus.QUEUED.value, JobStatus.RUNNING.value),
            ).fetchall()
        return [self._job(r) for r in rows]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    @staticmethod
    def _row(job: Job) -> tuple[Any, ...]:
        return (
            job.id, job.status.value, json.dumps(job.params), job.input_path, job.created_at, job.updated_at,
            job.duration_s, job.progress_s, job.wall_s, job.restarts,
            json.dumps(job.error) if job.error is not None else None,
            json.dumps(job.result) if job.result is not None else None,
            _callback_json(job.callback) if job.callback is not None else None,
        )

    @staticmethod
    def _job(row: tuple[Any, ...]) -> Job:
        d = dict(zip(_COLUMNS, row))
        return Job(
            id=d["id"], status=JobStatus(d["status"]), params=json.loads(d["params"]), input_path=d["input_path"],
            created_at=d["created_at"], updated_at=d["updated_at"], duration_s=d["duration_s"] or 0.0,
            progress_s=d["progress_s"] or 0.0, wall_s=d["wall_s"] or 0.0, restarts=d["restarts"] or 0,
            error=json.loads(d["error"]) if d["error"] else None,
            result=json.loads(d["result"]) if d["result"] else None,
            callback=from_record(Callback, json.loads(d["callback"])) if d["callback"] else None,
        )


def _callback_json(callback: Callback) -> str:
    return json.dumps(to_record(callback))


async def until_stored(fn: Callable[..., T], *args: Any) -> T:
    """Call a store method, waiting while the store is unavailable (a job's state is never dropped)."""
    delay = 0.1
    while True:
        try:
            return fn(*args)
        except BackendError as exc:
            log.warning("%s; retrying in %.1f s", exc.message, delay)
            await asyncio.sleep(delay)
            delay = min(5.0, delay * 2)


Work = Callable[[Job, Callable[[float, float], None]], Awaitable[dict[str, Any]]]
"""Runs one job: given the job and a progress hook (done_s, total_s), returns the result document."""

OnEnd = Callable[[Job], None]
"""Told of a job that ended (succeeded, failed or cancelled) once its final state is stored."""


class JobRunner:
    """Runs queued jobs, ``workers`` at a time, and keeps their records current."""

    def __init__(self, store: JobStore, work: Work, workers: int = 2, on_end: OnEnd | None = None) -> None:
        self.store = store
        self._work = work
        self._on_end = on_end
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._running: dict[str, asyncio.Task[dict[str, Any]]] = {}
        self._live: dict[str, Job] = {}

    def start(self) -> None:
        """Resume unfinished jobs and start the workers (call inside the event loop)."""
        for job in self.store.unfinished():
            if Path(job.input_path).is_file():
                job.status, job.restarts, job.progress_s, job.wall_s = JobStatus.QUEUED, job.restarts + 1, 0.0, 0.0
                self.store.save(job)
                self._queue.put_nowait(job.id)
                log.info("job %s resumed after a restart", job.id)
            else:
                job.status = JobStatus.INTERRUPTED
                job.error = {"message": "the server stopped and the job's input is gone", "code": "interrupted"}
                self.store.save(job)
        self._tasks = [asyncio.ensure_future(self._worker()) for _ in range(self._workers)]

    def submit(self, job: Job) -> None:
        """Queue a stored job."""
        self._queue.put_nowait(job.id)

    def get(self, job_id: str) -> Job | None:
        """The job with live progress when it is running."""
        return self._live.get(job_id) or self.store.get(job_id)

    def cancel(self, job_id: str) -> Job | None:
        """Cancel a queued or running job; finished jobs are left as they are."""
        job = self.get(job_id)
        if job is None or job.status.final:
            return job
        task = self._running.get(job_id)
        if task is not None:
            task.cancel()
        job.status = JobStatus.CANCELLED
        self.store.save(job)
        _remove(job.input_path)
        if task is None:  # a running job's end is told by its worker
            self._ended(job)
        return job

    def _ended(self, job: Job) -> None:
        if self._on_end is not None:
            self._on_end(job)

    async def stop(self) -> None:
        """Stop the workers; running jobs stay 'running' in the store and resume on the next start."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _worker(self) -> None:
        while True:
            job_id = await self._queue.get()
            job = await until_stored(self.store.get, job_id)
            if job is None or job.status != JobStatus.QUEUED:
                continue
            await self._run(job)

    async def _run(self, job: Job) -> None:
        job.status = JobStatus.RUNNING
        self._live[job.id] = job
        await until_stored(self.store.save, job)
        started = time.monotonic()

        def progress(done_s: float, total_s: float) -> None:
            job.progress_s, job.wall_s = done_s, time.monotonic() - started
            job.duration_s = max(job.duration_s, total_s)

        task = asyncio.ensure_future(self._work(job, progress))
        self._running[job.id] = task
        try:
            job.result = await task
            job.status, job.progress_s = JobStatus.SUCCEEDED, job.duration_s
        except asyncio.CancelledError:
            if job.status != JobStatus.CANCELLED:  # the server is stopping: leave it to resume
                raise
        except Cancelled:
            job.status = JobStatus.CANCELLED
        except VoxserveError as exc:
            job.status = JobStatus.FAILED
            job.error = {"message": exc.message, "code": exc.code, "type": type(exc).__name__}
        except Exception as exc:  # noqa: BLE001 - a job's failure must not stop the runner
            log.exception("job %s failed", job.id)
            job.status = JobStatus.FAILED
            job.error = {"message": f"internal error: {type(exc).__name__}", "code": "internal_error"}
        finally:
            self._running.pop(job.id, None)
            self._live.pop(job.id, None)
        job.wall_s = time.monotonic() - started
        self._live[job.id] = job  # still answered from memory while the store is down
        await until_stored(self.store.save, job)
        self._live.pop(job.id, None)
        if job.status.final:
            _remove(job.input_path)
            self._ended(job)


def _remove(path: str) -> None:
    try:
        Path(path).unlink(missing_ok=True)
    except OSError:
        log.warning("could not remove job input %s", path)


def validate_job_id(job_id: str) -> str:
    """Job ids are generated here; anything else is refused before touching the store."""
    if not job_id.startswith("job_") or not job_id[4:].isalnum() or len(job_id) > 64:
        raise InvalidInput(f"no job {job_id!r}", param="id", code="job_not_found")
    return job_id
