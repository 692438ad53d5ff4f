"""Speaker turns: binary per-frame activity of global speakers -> labelled turns on the file's timeline.

Pure numpy. Frame ``f`` owns the samples ``[f * step + size // 2 - step // 2, + step)`` (its centre plus
or minus half a step). Within one speaker, gaps shorter than ``min_gap_s`` are bridged and turns
shorter than ``min_turn_s`` dropped; turns of different speakers may overlap (overlapped speech).
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxserve.types import SAMPLE_RATE, SpeakerTurn

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TurnRules:
    """How frames become turns."""

    min_gap_s: float = 0.0
    min_turn_s: float = 0.0


def speaker_label(index: int) -> str:
    """OpenAI's labels: ``A`` .. ``Z``, then ``AA``, ``AB``, ..."""
    letters = string.ascii_uppercase
    label = ""
    index += 1
    while index > 0:
        index, rem = divmod(index - 1, 26)
        label = letters[rem] + label
    return label


def runs(active: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """Half-open index ranges [a, b) where ``active`` is True."""
    padded = np.concatenate([[False], active, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def bridge(spans: list[tuple[int, int]], min_gap: int, min_len: int) -> list[tuple[int, int]]:
    """Join spans separated by less than ``min_gap``, then drop spans shorter than ``min_len``."""
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if merged and a - merged[-1][1] < min_gap:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return [(a, b) for a, b in merged if b - a >= min_len]


def frames_to_turns(
    binary: F32, frame_step: int, frame_size: int, n_samples: int, rules: TurnRules = TurnRules(),
    names: Mapping[int, str] | None = None,
) -> tuple[tuple[SpeakerTurn, ...], tuple[str, ...]]:
    """Turns of every speaker column that speaks at all, labelled by ``names`` (column -> name) where given,
    the other columns ``A``, ``B``, ... by first turn; sorted by start time; and the labels in order."""
    turns, label_of = label_spans(turn_spans(binary, frame_step, frame_size, n_samples, rules), names)
    return turns, tuple(label_of.values())


def turn_spans(binary: F32, frame_step: int, frame_size: int, n_samples: int, rules: TurnRules = TurnRules()
               ) -> list[tuple[int, int, int]]:
    """(start sample, end sample, column) of every turn of every speaker column, gaps bridged."""
    offset = frame_size // 2 - frame_step // 2
    spans: list[tuple[int, int, int]] = []
    for g in range(binary.shape[1]):
        samples = [
            (max(0, a * frame_step + offset), min(n_samples, b * frame_step + offset))
            for a, b in runs(binary[:, g] > 0)
        ]
        kept = bridge(samples, int(rules.min_gap_s * SAMPLE_RATE), int(rules.min_turn_s * SAMPLE_RATE))
        spans.extend((a, b, g) for a, b in kept if b > a)
    return spans


def label_spans(spans: list[tuple[int, int, int]], names: Mapping[int, str] | None = None
                ) -> tuple[tuple[SpeakerTurn, ...], dict[int, str]]:
    """Labelled turns sorted by start, and each speaking column's label in order of first turn (``names``
    where given, else ``A``, ``B``, ... among the unnamed)."""
    names = names or {}
    first: dict[int, int] = {}
    label_of: dict[int, str] = {}
    for _a, _, g in sorted(spans):
        if g not in first:
            first[g] = len(first)
            label_of[g] = names.get(g) or speaker_label(sum(1 for h in label_of if h not in names))
    turns = tuple(SpeakerTurn(a, b, label_of[g]) for a, b, g in sorted(spans, key=lambda s: (s[0], first[s[2]])))
    return turns, label_of
