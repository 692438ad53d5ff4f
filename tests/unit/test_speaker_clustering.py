"""Clustering of synthetic embeddings: automatic count, requested counts, outliers, cannot-link."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("scipy")

from voxserve.errors import InvalidInput  # noqa: E402
from voxserve.pipelines.speaker_clustering import (  # noqa: E402
    ClusteringParams,
    SpeakerCount,
    centroids_of,
    cluster_embeddings,
    nearest_centroid,
    normalise,
)

P = ClusteringParams(threshold=0.4, min_cluster_size=2)


def voices(sizes: list[int], spread: float = 0.1, dim: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings around ``len(sizes)`` random orthogonal-ish centres, and their true labels."""
    rng = np.random.default_rng(seed)
    # orthonormal centres (voices that really differ): random Gaussian ones are sometimes close by chance
    q, _ = np.linalg.qr(rng.normal(size=(dim, len(sizes))))
    centres = normalise(q.T.astype(np.float32))
    x = np.concatenate([c + spread * rng.normal(size=(n, dim)) for c, n in zip(centres, sizes, strict=True)])
    return x.astype(np.float32), np.repeat(np.arange(len(sizes)), sizes)


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return len({(x, y) for x, y in zip(a, b, strict=True)}) == len(set(a)) == len(set(b))


@given(st.lists(st.integers(2, 12), min_size=1, max_size=5), st.integers(0, 10_000))
@settings(max_examples=60, deadline=None)
def test_automatic_count_finds_separated_voices(sizes: list[int], seed: int) -> None:
    # spread 0.05 in 32 dims: same-voice pairs stay within cosine distance ~0.1 of each other; at 0.1 two
    # embeddings of one voice can drift past the 0.4 cut and the test would measure the noise, not the code
    x, truth = voices(sizes, spread=0.05, seed=seed)
    labels = cluster_embeddings(x, P)
    assert same_partition(labels, truth)
    assert labels[0] == 0 and set(labels) == set(range(len(sizes)))  # numbered by first appearance


def test_requested_counts() -> None:
    x, _ = voices([6, 6, 6])
    assert len(set(cluster_embeddings(x, P, SpeakerCount(num_speakers=2)))) == 2
    assert len(set(cluster_embeddings(x, P, SpeakerCount(max_speakers=2)))) == 2
    x1, _ = voices([10])
    assert len(set(cluster_embeddings(x1, P, SpeakerCount(min_speakers=2)))) == 2
    assert len(set(cluster_embeddings(x1, P, SpeakerCount(num_speakers=5)))) <= 5


def test_an_outlier_does_not_take_a_speaker_when_the_count_is_given() -> None:
    """Fixed-count average linkage made one odd embedding a speaker and merged the two real voices."""
    x, truth = voices([12, 12], spread=0.05)
    outlier = -normalise(x[:1] + x[12:13])  # far from both voices
    labels = cluster_embeddings(np.concatenate([x, outlier]), P, SpeakerCount(num_speakers=2))
    assert same_partition(labels[:24], truth)
    assert labels[24] in (0, 1)


def test_cannot_link_keeps_two_speakers_of_one_window_apart() -> None:
    rng = np.random.default_rng(3)
    base = normalise(rng.normal(size=(1, 16)).astype(np.float32))
    close = np.concatenate([base + 0.2 * normalise(rng.normal(size=(1, 16)).astype(np.float32)) for _ in range(4)])
    x = normalise(close.astype(np.float32))  # four similar voices: one cluster without constraints
    assert len(set(cluster_embeddings(x, ClusteringParams(threshold=0.5, min_cluster_size=1)))) == 1
    apart = np.zeros((4, 4), bool)
    apart[0, 1] = apart[1, 0] = True  # embeddings 0 and 1 were two local speakers of one window
    labels = cluster_embeddings(x, ClusteringParams(threshold=0.5, min_cluster_size=1), apart=apart)
    assert labels[0] != labels[1]


def test_centroids_and_nearest() -> None:
    x, truth = voices([5, 5])
    labels = cluster_embeddings(x, P)
    centroids = centroids_of(x, labels)
    assert centroids.shape == (2, 32) and np.allclose(np.linalg.norm(centroids, axis=1), 1.0)
    with_nan = np.concatenate([x, np.full((1, 32), np.nan, np.float32)])
    assert nearest_centroid(with_nan, centroids).tolist() == labels.tolist() + [-1]
    assert cluster_embeddings(np.zeros((0, 4), np.float32), P).tolist() == []
    assert cluster_embeddings(x[:1], P).tolist() == [0]


def test_count_validation() -> None:
    with pytest.raises(InvalidInput):
        SpeakerCount(num_speakers=0).validate()
    with pytest.raises(InvalidInput):
        SpeakerCount(min_speakers=4, max_speakers=2).validate()
    assert SpeakerCount(min_speakers=2, max_speakers=3).clamp(1) == 2
    assert SpeakerCount(max_speakers=3).clamp(7) == 3
    assert SpeakerCount(num_speakers=4).clamp(1) == 4
