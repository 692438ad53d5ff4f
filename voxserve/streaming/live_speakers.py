"""Speaker labels on a live stream: online clustering of utterance embeddings (pure; no model here).

Each final utterance's embedding joins the known speaker whose centroid is most similar (cosine) when the
similarity reaches ``threshold``; otherwise it starts a new speaker (``A``, ``B``, ...), up to
``max_speakers``. Limits, documented for users: labels are per stream and never revised (an early
utterance is not relabelled when later ones show two voices were one); utterances shorter than the
embedder's minimum get the most similar known speaker without moving its centroid; voices that the
embedder finds alike (two similar voices on a phone line) can share a label.

Known speakers (:class:`KnownVoices`): an utterance whose embedding by the enrolled voices' own embedder
reaches the naming threshold with one of them carries that name instead of a letter; letters are then given
among the other utterances only.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np

from voxserve.pipelines.known_speakers import KnownSpeaker, similarities


class OnlineSpeakers:
    """Assigns speaker labels to utterance embeddings of one stream, in order."""

    def __init__(self, threshold: float = 0.7, max_speakers: int = 8) -> None:
        if not -1.0 <= threshold <= 1.0 or max_speakers < 1:
            raise ValueError("threshold must be a cosine similarity and max_speakers at least 1")
        self.threshold = threshold
        self.max_speakers = max_speakers
        self._sums: list[np.ndarray] = []
        self._labels: list[str] = []

    @property
    def labels(self) -> list[str]:
        """Speakers seen so far."""
        return list(self._labels)

    def assign(self, embedding: np.ndarray, *, reliable: bool = True) -> str:
        """The label of this utterance's speaker (``reliable=False`` for too-short audio: no new speaker,
        no centroid update)."""
        e = _unit(np.asarray(embedding, dtype=np.float64).reshape(-1))
        if not self._sums:
            return self._new(e) if reliable else "A"
        sims = [float(_unit(s) @ e) for s in self._sums]
        best = int(np.argmax(sims))
        if not reliable:
            return self._labels[best]
        if sims[best] >= self.threshold or len(self._sums) >= self.max_speakers:
            self._sums[best] = self._sums[best] + e
            return self._labels[best]
        return self._new(e)

    def _new(self, e: np.ndarray) -> str:
        label = _label(len(self._labels))
        self._sums.append(e.copy())
        self._labels.append(label)
        return label


class KnownVoices:
    """Names utterances after enrolled voices: the most similar one (cosine), only at ``threshold`` or above.

    Each utterance is judged on its own embedding (by the embedder that made the voices' embeddings), so a
    name never spreads to an utterance through a label the stream's clustering shares between two voices."""

    def __init__(self, known: Sequence[KnownSpeaker], threshold: float) -> None:
        if not known or not -1.0 <= threshold <= 1.0:
            raise ValueError("give at least one known speaker and a cosine similarity as the threshold")
        self.known = tuple(known)
        self.threshold = threshold

    def scores(self, embedding: np.ndarray) -> dict[str, float]:
        """Cosine similarity of an utterance's embedding to each known voice, by name."""
        e = np.asarray(embedding, dtype=np.float32).reshape(1, -1)
        return {k.name: float(s) for k, s in zip(self.known, similarities(e, self.known)[0], strict=True)}

    def name(self, embedding: np.ndarray) -> str | None:
        """The name of the most similar known voice when the similarity reaches the threshold, else None."""
        scores = self.scores(embedding)
        best = max(scores, key=lambda n: scores[n])
        return best if scores[best] >= self.threshold else None


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _label(i: int) -> str:
    letters = string.ascii_uppercase
    return letters[i] if i < len(letters) else f"S{i}"
