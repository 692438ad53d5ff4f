"""Powerset decoding: a segmentation model's per-frame scores over speaker *sets* -> per-speaker activity.

pyannote's segmentation-3.0 scores, in each frame, every set of at most ``max_per_frame`` of its
``num_speakers`` local speakers (7 classes for 3 speakers, 2 at a time: {}, {1}, {2}, {3}, {1,2}, {1,3},
{2,3}). Hard decoding takes the best set per frame and marks its members active, which keeps overlapped
speech (two members) without any threshold.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import numpy.typing as npt


@functools.lru_cache(maxsize=8)
def powerset_classes(num_speakers: int, max_per_frame: int) -> tuple[tuple[int, ...], ...]:
    """The speaker sets in the model's class order: by size, then lexicographically."""
    return tuple(
        combo for size in range(max_per_frame + 1) for combo in itertools.combinations(range(num_speakers), size)
    )


@functools.lru_cache(maxsize=8)
def powerset_mapping(num_speakers: int, max_per_frame: int) -> npt.NDArray[np.float32]:
    """Matrix (classes, speakers) with 1 where the class's set contains the speaker."""
    classes = powerset_classes(num_speakers, max_per_frame)
    mapping = np.zeros((len(classes), num_speakers), dtype=np.float32)
    for i, combo in enumerate(classes):
        mapping[i, list(combo)] = 1.0
    return mapping


def powerset_to_multilabel(
    scores: npt.NDArray[np.float32], num_speakers: int, max_per_frame: int, *, soft: bool = False
) -> npt.NDArray[np.float32]:
    """Per-speaker activity of shape (..., frames, num_speakers) from class log-probabilities (..., frames, classes).

    Hard (default): 1 for the members of the most likely set, else 0. Soft: each speaker's marginal
    probability (the sum of the probabilities of the sets that contain it).
    """
    mapping = powerset_mapping(num_speakers, max_per_frame)
    if scores.shape[-1] != mapping.shape[0]:
        raise ValueError(f"expected {mapping.shape[0]} powerset classes, got {scores.shape[-1]}")
    if soft:
        return np.asarray(np.exp(scores) @ mapping, dtype=np.float32)
    return np.asarray(mapping[np.argmax(scores, axis=-1)], dtype=np.float32)
