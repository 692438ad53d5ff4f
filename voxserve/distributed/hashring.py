"""Consistent hashing: which replica owns a key (a live stream's id), stable when replicas come and go.

Each member is placed on a 64-bit ring at ``vnodes`` pseudo-random points; a key belongs to the first member
point at or after the key's own point. Removing a member moves only the keys it owned (to their next
members); the others keep their owner. Hashes are BLAKE2b, so every process (and every run) agrees.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


class HashRing:
    """An immutable ring of member names; build a new one when membership changes."""

    def __init__(self, members: Iterable[str], vnodes: int = 64) -> None:
        if vnodes < 1:
            raise ValueError("vnodes must be at least 1")
        self.members: tuple[str, ...] = tuple(sorted(set(members)))
        points = sorted((_point(f"{m}#{v}"), m) for m in self.members for v in range(vnodes))
        self._keys = [p for p, _ in points]
        self._owners = [m for _, m in points]

    def __len__(self) -> int:
        return len(self.members)

    def owner(self, key: str) -> str:
        """The member that owns ``key``. Raises LookupError on an empty ring."""
        if not self._keys:
            raise LookupError("the ring has no members")
        i = bisect.bisect_left(self._keys, _point(key))
        return self._owners[i % len(self._owners)]

    def without(self, member: str) -> HashRing:
        """The same ring less one member (every key it did not own keeps its owner)."""
        return HashRing((m for m in self.members if m != member), self._vnodes())

    def _vnodes(self) -> int:
        return len(self._keys) // len(self.members) if self.members else 64
