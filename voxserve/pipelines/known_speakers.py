"""Known speakers: clusters of a diarization named after enrolled voices.

A known speaker is a name and the voice embedding of a reference clip (made by the same embedder as the
diarization's). After clustering, each cluster's centroid is compared with every reference (cosine
similarity); pairs are taken greedily from the most similar down, one name per cluster and one cluster per
name, and only while the similarity reaches the embedder's naming threshold (measured so that no voice
of the tune half took a name not its own; see docs/benchmarks.md). Clusters left unnamed keep the generic
labels ``A``, ``B``, ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from voxserve.errors import InvalidInput
from voxserve.types import Float32Array

MAX_KNOWN_SPEAKERS = 16
"""The most known speakers one request may name (OpenAI takes up to 4)."""
MIN_REFERENCE_SPEECH_S = 1.0
"""A reference clip needs at least this much speech (as the segmentation model hears it)."""
MAX_REFERENCE_S = 30.0
"""A reference clip may be at most this long (OpenAI asks for 2-10 s)."""

NAMING_THRESHOLDS = {"resemblyzer": 0.80, "campplus": 0.67}
"""Cosine similarity a cluster centroid needs with a reference to take its name, per embedder: on the tune
half (``voxserve eval naming --half tune``), the middle of the thresholds that give no false name and every
name the tune half can give (docs/benchmarks.md)."""


@dataclass(frozen=True)
class KnownSpeaker:
    """An enrolled voice: its name and the unit-length embedding of its reference speech."""

    name: str
    embedding: Float32Array
    embedder: str
    """The embedder that made ``embedding``: only a diarization with the same embedder can use it."""
    speech_s: float = 0.0
    """Seconds of reference speech behind the embedding."""


def check_known(known: Sequence[KnownSpeaker], embedder: str | None = None, dim: int | None = None) -> None:
    """Raise :class:`InvalidInput` (param ``known_speaker_names``) for empty or repeated names, too many
    speakers, or embeddings of another embedder or size."""
    param = "known_speaker_names"
    if len(known) > MAX_KNOWN_SPEAKERS:
        raise InvalidInput(f"at most {MAX_KNOWN_SPEAKERS} known speakers", param=param)
    names = [k.name for k in known]
    if any(not n.strip() or len(n) > 100 for n in names):
        raise InvalidInput("known speaker names must be 1-100 characters", param=param)
    if len(set(names)) != len(names):
        raise InvalidInput("known speaker names must differ", param=param)
    for k in known:
        if embedder is not None and k.embedder != embedder:
            raise InvalidInput(f"{k.name!r} was enrolled with the {k.embedder} embedder, not {embedder}", param=param)
        if dim is not None and k.embedding.shape != (dim,):
            raise InvalidInput(f"{k.name!r} has an embedding of shape {k.embedding.shape}, not ({dim},)", param=param)


def similarities(centroids: Float32Array, known: Sequence[KnownSpeaker]) -> Float32Array:
    """Cosine similarity of each cluster centroid (rows) to each known speaker (columns)."""
    if not len(centroids) or not known:
        return np.zeros((len(centroids), len(known)), dtype=np.float32)
    refs = np.stack([k.embedding for k in known]).astype(np.float32)
    refs /= np.maximum(np.linalg.norm(refs, axis=1, keepdims=True), 1e-8)
    cents = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-8)
    return np.asarray(cents @ refs.T, dtype=np.float32)


def match_names(sims: Float32Array, names: Sequence[str], threshold: float) -> dict[int, str]:
    """Cluster index -> name: greedily by best similarity, one name per cluster and one cluster per name,
    never below ``threshold``."""
    order = np.dstack(np.unravel_index(np.argsort(-sims, axis=None), sims.shape))[0] if sims.size else []
    named: dict[int, str] = {}
    used: set[int] = set()
    for c, k in order:
        if sims[c, k] < threshold:
            break
        if int(c) not in named and int(k) not in used:
            named[int(c)] = names[int(k)]
            used.add(int(k))
    return named
