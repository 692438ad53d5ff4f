"""Clustering of local speaker embeddings into global speakers, with an automatic speaker count.

Agglomerative clustering (centroid linkage on L2-normalised embeddings) cut at a distance threshold gives
the automatic count. Clusters smaller than ``min_cluster_size`` are not speakers of their own: their
members join the nearest large cluster, so one outlier embedding cannot take a whole cluster (the failure
of fixed-count average linkage on a real call). A requested count (``num_speakers``, or the automatic
count clamped to ``min_speakers``..``max_speakers``) re-cuts the tree to that many *large* clusters (or,
when no cut has that many, to that many clusters of any size).
Embeddings known to come from different people (two local speakers of one window) are kept apart
(cannot-link). Finally every embedding, short ones included, takes its nearest centroid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxserve.errors import InvalidInput

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SpeakerCount:
    """What the caller knows about the number of speakers (all None: estimate it)."""

    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None

    def validate(self) -> None:
        """Raise :class:`InvalidInput` for impossible counts."""
        for name in ("num_speakers", "min_speakers", "max_speakers"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= 64:
                raise InvalidInput(f"{name} must be between 1 and 64", param=name)
        if self.min_speakers and self.max_speakers and self.min_speakers > self.max_speakers:
            raise InvalidInput("min_speakers is larger than max_speakers", param="min_speakers")

    def clamp(self, estimate: int) -> int:
        """The count to use given the automatic ``estimate``."""
        if self.num_speakers is not None:
            return self.num_speakers
        low = self.min_speakers or 1
        high = self.max_speakers or max(estimate, low)
        return min(max(estimate, low), high)


@dataclass(frozen=True)
class ClusteringParams:
    """Tuned constants (chosen by measurement on the development corpus)."""

    threshold: float = 0.4
    """Where the tree is cut: a linkage distance (cosine distance 1 - cos for ``average``; Euclidean
    distance between unit vectors for ``centroid``)."""
    min_cluster_size: int = 2
    """Clusters with fewer embeddings are absorbed by the nearest large cluster."""
    linkage: str = "average"
    """``average`` (on cosine distances, with cannot-link pairs), ``centroid``, or ``spectral``
    (:mod:`voxserve.pipelines.speaker_spectral`: eigen-gap count, ``threshold`` unused)."""
    spectral_from: int | None = None
    """With at least this many embeddings, spectral clustering (eigen-gap count) replaces the agglomerative
    cut; None: never (unless ``linkage`` is ``spectral``)."""
    cannot_link: bool = True
    """Two local speakers of one window are different people: their distance is set to the maximum (2)."""


def normalise(embeddings: F32) -> F32:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    return np.asarray(embeddings / np.maximum(norms, 1e-8), dtype=np.float32)


def cluster_embeddings(
    embeddings: F32,
    params: ClusteringParams,
    count: SpeakerCount = SpeakerCount(),
    apart: npt.NDArray[np.bool_] | None = None,
) -> I64:
    """Cluster labels 0..K-1 (K large clusters, numbered by first appearance) for (N, D) embeddings.

    ``apart`` (N, N) marks pairs known to be different speakers: with ``params.cannot_link`` their
    distance is set to the maximum, so they merge last.
    """
    n = len(embeddings)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    x = normalise(embeddings).astype(np.float64)
    if params.linkage == "spectral" or (params.spectral_from is not None and n >= params.spectral_from):
        return _spectral(x, params, count, apart)
    tree = _tree(x, params, apart)
    from scipy.cluster.hierarchy import fcluster

    min_size = min(params.min_cluster_size, n)
    labels = fcluster(tree, params.threshold, criterion="distance") - 1
    target = min(count.clamp(_num_large(labels, min_size)), n)
    if _num_large(labels, min_size) != target:
        labels = _recut(tree, n, target, min_size)
        if _num_large(labels, min_size) != target:  # no cut has that many large clusters: honour the count
            labels = fcluster(tree, target, criterion="maxclust") - 1
            min_size = 1
    return _absorb_small(x, labels, min_size)


def _spectral(x: npt.NDArray[np.float64], params: ClusteringParams, count: SpeakerCount,
              apart: npt.NDArray[np.bool_] | None) -> I64:
    """Spectral clustering with the eigen-gap count (clamped to the caller's count), small clusters absorbed."""
    from voxserve.pipelines.speaker_spectral import SpectralParams, spectral_labels

    spectral = SpectralParams()
    apart = apart if params.cannot_link else None
    labels = spectral_labels(x, spectral, count.num_speakers, apart)
    target = count.clamp(int(labels.max()) + 1 if len(labels) else 1)
    if target != int(labels.max()) + 1:
        labels = spectral_labels(x, spectral, target, apart)
    return _absorb_small(x, labels, min(params.min_cluster_size, len(x)))


def _tree(x: npt.NDArray[np.float64], params: ClusteringParams, apart: npt.NDArray[np.bool_] | None) -> npt.NDArray[np.float64]:
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    if params.linkage == "centroid":
        return np.asarray(linkage(x, method="centroid", metric="euclidean"))
    distance = np.clip(1.0 - x @ x.T, 0.0, 2.0)
    if params.cannot_link and apart is not None:
        distance[apart] = 2.0
    np.fill_diagonal(distance, 0.0)
    return np.asarray(linkage(squareform(distance, checks=False), method=params.linkage))


def _num_large(labels: I64, min_size: int) -> int:
    _, sizes = np.unique(labels, return_counts=True)
    return int(np.sum(sizes >= min_size))


def _recut(tree: npt.NDArray[np.float64], n: int, target: int, min_size: int) -> I64:
    """The cut of the tree whose number of large clusters is closest to ``target`` (fewest clusters first)."""
    from scipy.cluster.hierarchy import fcluster

    best, best_gap = np.zeros(n, dtype=np.int64), abs(1 - target)
    for m in range(1, n + 1):
        labels = fcluster(tree, m, criterion="maxclust") - 1
        gap = abs(_num_large(labels, min_size) - target)
        if gap < best_gap:
            best, best_gap = labels, gap
        if gap == 0:
            break
    return np.asarray(best, dtype=np.int64)


def _absorb_small(x: npt.NDArray[np.float64], labels: I64, min_size: int) -> I64:
    """Members of small clusters join the most similar large centroid; labels renumbered 0..K-1."""
    ids, sizes = np.unique(labels, return_counts=True)
    large = ids[sizes >= min_size]
    if len(large) == 0:
        return np.zeros(len(labels), dtype=np.int64)
    centroids = normalise(np.stack([x[labels == g].mean(axis=0) for g in large]).astype(np.float32))
    out = labels.copy()
    small = ~np.isin(labels, large)
    if small.any():
        out[small] = large[np.argmax(x[small] @ centroids.T, axis=1)]
    _, first = np.unique(out, return_index=True)
    order = out[np.sort(first)]
    remap = {int(g): i for i, g in enumerate(order)}
    return np.array([remap[int(g)] for g in out], dtype=np.int64)


def centroids_of(embeddings: F32, labels: I64) -> F32:
    """Unit-length mean embedding of each cluster, shape (K, D)."""
    k = int(labels.max()) + 1 if len(labels) else 0
    x = normalise(embeddings)
    return normalise(np.stack([x[labels == g].mean(axis=0) for g in range(k)])) if k else np.zeros((0, x.shape[1]), np.float32)


def nearest_centroid(embeddings: F32, centroids: F32) -> I64:
    """Index of the most similar centroid for each row (-1 for rows with NaN, or when there are none)."""
    out = np.full(len(embeddings), -1, dtype=np.int64)
    valid = ~np.isnan(embeddings).any(axis=1)
    if len(centroids) and valid.any():
        out[valid] = np.argmax(normalise(embeddings[valid]) @ centroids.T, axis=1)
    return out
