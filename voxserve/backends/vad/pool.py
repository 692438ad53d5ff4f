"""Reused VAD instances for live streams.

When the VAD ran in ONNX Runtime, loading one built a session: ~70 ms of CPU per recurrent state, and a live
stream keeps two (:data:`voxserve.backends.vad.silero.FRESH_AFTER_S`); a new realtime session waited ~145 ms
for ``session.created`` (measured through the real server, 2-core EPYC VM). Silero now runs in NumPy with its
weights read once per process (9 ms) and shared, so a new VAD costs 0.2 ms; the pool still hands a stream a VAD
that an ended stream gave back (reset), makes a new one only when none is idle, and the server loads the first
one at start-up, off any session's path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from voxserve.backends.base import VadModel

IDLE_KEPT = 16
"""Idle VADs kept for later streams (a few MB each); more given back are dropped."""


class VadPool:
    """A factory of per-stream VADs (call it) that takes back VADs whose stream has ended (:meth:`give`).

    Thread-safe: VADs are taken in the executor's threads and given back from the event loop.
    """

    def __init__(self, make: Callable[[], VadModel], keep: int = IDLE_KEPT) -> None:
        self._make = make
        self._keep = keep
        self._idle: list[VadModel] = []
        self._lock = threading.Lock()

    def __call__(self) -> VadModel:
        """An idle VAD (reset when it was given back), else a new one (blocking: it may load a model)."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._make()

    def give(self, vad: VadModel) -> None:
        """Take back the VAD of an ended stream; nothing may run on it any more. It is reset here."""
        vad.reset()
        with self._lock:
            if len(self._idle) < self._keep:
                self._idle.append(vad)

    @property
    def idle(self) -> int:
        """VADs waiting to be reused."""
        with self._lock:
            return len(self._idle)
