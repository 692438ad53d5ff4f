"""Pieces of local speaker tracks: each window's local speaker is cut into pieces of a few seconds of its
speech, and each piece gets its own voice embedding and its own speaker.

Pure numpy. A piece is a set of frames of one local speaker in one window. Cutting tracks into pieces
lets clustering undo the segmentation model's mistake of giving two similar voices the same local
speaker inside a window, while pieces of *different* local speakers of one window stay apart
(cannot-link), which is what the model is good at.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxserve.pipelines.speaker_turns import runs

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Piece:
    """Frames (window-local indices, sorted) where local speaker ``local`` of window ``window`` speaks."""

    window: int
    local: int
    frames: I64


def split_track(active: npt.NDArray[np.bool_], piece_frames: int, min_frames: int) -> list[I64]:
    """Cut the active frames of one track into consecutive groups of about ``piece_frames`` active frames.

    Speech runs are added to a piece until it holds ``piece_frames``; a run longer than that is cut in
    equal parts; a last piece shorter than ``min_frames`` joins the one before it.
    """
    pieces: list[list[int]] = []
    current: list[int] = []
    for a, b in runs(active):
        parts = max(1, int(np.ceil((b - a) / piece_frames))) if b - a > piece_frames else 1
        edges = np.linspace(a, b, parts + 1).round().astype(int)
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            current.extend(range(lo, hi))
            if len(current) >= piece_frames:
                pieces.append(current)
                current = []
    if current:
        if len(current) < min_frames and pieces:
            pieces[-1].extend(current)
        else:
            pieces.append(current)
    return [np.asarray(p, dtype=np.int64) for p in pieces]


def cut_pieces(activity: F32, piece_frames: int, min_frames: int) -> list[Piece]:
    """Pieces of every local speaker of every window (activity: windows, frames, local)."""
    windows, _, local = activity.shape
    return [
        Piece(c, k, frames)
        for c in range(windows)
        for k in range(local)
        for frames in split_track(activity[c, :, k] > 0, piece_frames, min_frames)
    ]


def cannot_link(pieces: list[Piece]) -> npt.NDArray[np.bool_]:
    """(N, N): True for pieces of different local speakers of the same window."""
    window = np.array([p.window for p in pieces])
    local = np.array([p.local for p in pieces])
    return np.asarray((window[:, None] == window[None, :]) & (local[:, None] != local[None, :]))


def piece_activity(pieces: list[Piece], labels: I64, windows: int, frames: int, num_clusters: int) -> F32:
    """Per window, the activity of each cluster (windows, frames, num_clusters) from the labelled pieces
    (label -1: left out)."""
    out = np.zeros((windows, frames, max(1, num_clusters)), dtype=np.float32)
    for piece, g in zip(pieces, labels, strict=True):
        if g >= 0:
            out[piece.window, piece.frames, g] = 1.0
    return out
