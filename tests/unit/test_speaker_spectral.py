"""Spectral clustering with the eigen-gap count on synthetic embeddings (clusters of known size)."""

from __future__ import annotations

import numpy as np

from voxserve.pipelines.speaker_clustering import ClusteringParams, SpeakerCount, cluster_embeddings, normalise
from voxserve.pipelines.speaker_spectral import SpectralParams, affinity, eigen_gap_count, spectral_labels


def _blobs(k: int, per: int, spread: float = 0.15, dim: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, dim))
    x = np.concatenate([c + spread * np.linalg.norm(c) / np.sqrt(dim) * rng.normal(size=(per, dim)) for c in centres])
    return normalise(x.astype(np.float32)).astype(np.float64), np.repeat(np.arange(k), per)


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all((a[:, None] == a[None, :]) == (b[:, None] == b[None, :])))


def test_eigen_gap_finds_the_number_of_blobs() -> None:
    for k in (2, 3, 5):
        x, truth = _blobs(k, 20, seed=k)
        labels = spectral_labels(x, SpectralParams())
        assert len(set(labels.tolist())) == k
        assert _same_partition(labels, truth)


def test_given_count_and_determinism() -> None:
    x, _ = _blobs(4, 15, seed=1)
    assert len(set(spectral_labels(x, SpectralParams(), count=2).tolist())) == 2
    assert spectral_labels(x, SpectralParams()).tolist() == spectral_labels(x, SpectralParams()).tolist()


def test_affinity_is_symmetric_pruned_and_respects_cannot_link() -> None:
    x, _ = _blobs(2, 10)
    apart = np.zeros((20, 20), dtype=bool)
    apart[0, 1] = apart[1, 0] = True
    a = affinity(x, 0.2, apart)
    assert np.allclose(a, a.T) and a[0, 1] == 0.0
    assert (a > 0).sum() < 20 * 20 // 2  # each row keeps its 4 nearest (plus those that kept it)
    assert np.all((a > 0).sum(axis=1) >= 3)
    assert eigen_gap_count(np.array([0.0, 0.01, 0.02, 0.9, 0.95]), 4) == 3


def test_cluster_embeddings_switches_to_spectral_from_a_size() -> None:
    x, truth = _blobs(3, 20, seed=3)
    params = ClusteringParams(threshold=1.9, spectral_from=50)  # a cut that would merge everything
    assert len(set(cluster_embeddings(x[:30].astype(np.float32), params).tolist())) == 1
    labels = cluster_embeddings(x.astype(np.float32), params)
    assert _same_partition(labels, truth)
    assert len(set(cluster_embeddings(x.astype(np.float32), params, SpeakerCount(max_speakers=2)).tolist())) == 2
