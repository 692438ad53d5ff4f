"""The server's enrolled voices: name -> speaker embedding, one per embedder, in ``voices.sqlite3`` beside the
jobs database. Only embeddings are kept, never the reference audio (so a voice enrolled with one embedder
must be enrolled again to be used with another).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxserve.pipelines.known_speakers import KnownSpeaker


@dataclass(frozen=True)
class EnrolledVoice:
    """A stored voice: its name, the embedders it has an embedding of, and when it was last enrolled."""

    name: str
    embedders: tuple[str, ...]
    created_at: int


class VoiceLibrary:
    """Enrolled voices in one SQLite file (a connection per call: enrollment is rare)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=10)) as db, db:
            db.execute("CREATE TABLE IF NOT EXISTS voices (name TEXT NOT NULL, embedder TEXT NOT NULL, "
                       "vector BLOB NOT NULL, speech_s REAL NOT NULL, created_at INTEGER NOT NULL, "
                       "PRIMARY KEY (name, embedder))")
            yield db

    def put(self, voice: KnownSpeaker) -> None:
        """Store (or replace) ``voice``'s embedding for its embedder."""
        vector = np.asarray(voice.embedding, dtype="<f4").tobytes()
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO voices VALUES (?, ?, ?, ?, ?)",
                       (voice.name, voice.embedder, vector, voice.speech_s, int(time.time())))

    def get(self, name: str, embedder: str) -> KnownSpeaker | None:
        """The voice ``name`` as enrolled with ``embedder``, or None."""
        with self._db() as db:
            row = db.execute("SELECT vector, speech_s FROM voices WHERE name = ? AND embedder = ?",
                             (name, embedder)).fetchone()
        if row is None:
            return None
        return KnownSpeaker(name, np.frombuffer(row[0], dtype="<f4").astype(np.float32), embedder, float(row[1]))

    def list(self) -> list[EnrolledVoice]:
        """Every enrolled name, sorted."""
        with self._db() as db:
            rows = db.execute("SELECT name, group_concat(embedder), max(created_at) FROM voices "
                              "GROUP BY name ORDER BY name").fetchall()
        return [EnrolledVoice(n, tuple(sorted(e.split(","))), int(c)) for n, e, c in rows]

    def delete(self, name: str) -> bool:
        """Forget ``name`` (every embedder's); False when it was not enrolled."""
        with self._db() as db:
            return db.execute("DELETE FROM voices WHERE name = ?", (name,)).rowcount > 0
