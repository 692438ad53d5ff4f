"""Sliding-window speaker activity: window planning, aggregation on the file's frame grid, the number of
speakers per frame, and the choice of the most active speakers in each frame.

Pure numpy. Time is in frames of the segmentation model (``frame_step`` samples); every window starts on
a frame boundary, so window frame ``j`` of a window starting at frame ``s`` is file frame ``s + j``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class WindowPlan:
    """Where the windows of one file start, in frames, and the size of the file's frame grid."""

    starts: tuple[int, ...]
    window_frames: int
    total_frames: int


def plan_windows(n_samples: int, window_samples: int, step_samples: int, frame_step: int, window_frames: int) -> WindowPlan:
    """Windows every ``step_samples`` (rounded to whole frames) that cover all ``n_samples``.

    The regular grid is completed by one window aligned to the end of the audio (moving the last regular
    window there instead measured 1.6 points worse DER on the corpus); a file shorter than one window gets
    one window (zero-padded by the model).
    """
    if n_samples <= 0:
        return WindowPlan((), window_frames, 0)
    step = max(1, round(step_samples / frame_step))
    total = max(1, int(np.ceil(n_samples / frame_step)))
    last = max(0, int(np.ceil((n_samples - window_samples) / frame_step)))
    starts = list(range(0, last + 1, step))
    if starts[-1] < last:
        starts.append(last)
    return WindowPlan(tuple(starts), window_frames, max(total, starts[-1] + 1))


def aggregate(values: F32, plan: WindowPlan, *, average: bool = True) -> F32:
    """Overlap-add per-window frame values (windows, frames, k) onto the file grid (total_frames, k).

    With ``average``, each file frame gets the mean over the windows that cover it; otherwise the sum.
    """
    windows, frames, k = values.shape
    total = plan.total_frames
    out = np.zeros((total + frames, k), dtype=np.float64)
    hits = np.zeros((total + frames, 1), dtype=np.float64)
    for c, start in enumerate(plan.starts[:windows]):
        out[start : start + frames] += values[c]
        hits[start : start + frames] += 1.0
    out, hits = out[:total], hits[:total]
    if average:
        out = np.divide(out, hits, out=np.zeros_like(out), where=hits > 0)
    return out.astype(np.float32)


def speaker_count(activity: F32, plan: WindowPlan) -> I64:
    """Instantaneous number of speakers per file frame: the rounded mean of the windows' local counts."""
    local = activity.sum(axis=2, keepdims=True).astype(np.float32)
    return np.rint(aggregate(local, plan)[:, 0]).astype(np.int64)


def top_speakers(scores: F32, count: I64) -> F32:
    """Binary (frames, speakers): in each frame, the ``count`` speakers with the highest positive score."""
    frames, speakers = scores.shape
    binary = np.zeros((frames, speakers), dtype=np.float32)
    if speakers == 0:
        return binary
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(speakers)[None, :].repeat(frames, axis=0), axis=1)
    keep = (ranks < np.minimum(count, speakers)[:, None]) & (scores > 0)
    binary[keep] = 1.0
    return binary
