"""Pure parts of diarization on synthetic arrays: powerset decoding, window plans, aggregation, counts,
frames -> turns, pieces of local speaker tracks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.backends.diarization.powerset import powerset_classes, powerset_mapping, powerset_to_multilabel
from voxserve.pipelines.speaker_activity import aggregate, plan_windows, speaker_count, top_speakers
from voxserve.pipelines.speaker_pieces import Piece, cannot_link, cut_pieces, piece_activity, split_track
from voxserve.pipelines.speaker_turns import TurnRules, bridge, frames_to_turns, runs, speaker_label

# ---------------------------------------------------------------------------------------------- powerset


def test_powerset_classes_match_segmentation_3_0_order() -> None:
    assert powerset_classes(3, 2) == ((), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2))
    assert powerset_mapping(3, 2).shape == (7, 3)


@given(st.lists(st.lists(st.floats(-20, 0), min_size=7, max_size=7), min_size=1, max_size=40))
def test_hard_decoding_marks_the_members_of_the_best_set(rows: list[list[float]]) -> None:
    scores = np.array(rows, dtype=np.float32)
    activity = powerset_to_multilabel(scores, 3, 2)
    classes = powerset_classes(3, 2)
    for row, act in zip(scores, activity, strict=True):
        best = classes[int(np.argmax(row))]
        assert set(np.flatnonzero(act)) == set(best)
        assert act.sum() <= 2


def test_soft_decoding_gives_marginals() -> None:
    probs = np.array([[0.1, 0.2, 0.0, 0.0, 0.7, 0.0, 0.0]], dtype=np.float32)  # mostly {0, 1}
    soft = powerset_to_multilabel(np.log(np.maximum(probs, 1e-12)), 3, 2, soft=True)
    assert soft[0] == pytest.approx([0.9, 0.7, 0.0], abs=1e-5)
    with pytest.raises(ValueError):
        powerset_to_multilabel(np.zeros((2, 5), np.float32), 3, 2)


# ---------------------------------------------------------------------------------------------- windows

W, STEP, FRAME = 160_000, 40_000, 270
WF = 1 + (W - 991) // FRAME


@given(st.integers(1, 2_000_000), st.sampled_from([16_000, 40_000, 80_000, 160_000]))
@settings(max_examples=200)
def test_window_plan_covers_every_sample(n: int, step: int) -> None:
    plan = plan_windows(n, W, step, FRAME, WF)
    starts = [s * FRAME for s in plan.starts]
    assert starts[0] == 0 and starts == sorted(set(starts))
    assert starts[-1] + W >= n  # the last window reaches the end
    assert all(b - a <= step + FRAME for a, b in itertools.pairwise(starts))  # no gap beyond one step
    assert plan.total_frames * FRAME >= n - FRAME


def test_short_file_gets_one_window_and_empty_none() -> None:
    assert plan_windows(16_000, W, STEP, FRAME, WF).starts == (0,)
    assert plan_windows(0, W, STEP, FRAME, WF).starts == ()


def test_aggregate_averages_overlapping_windows() -> None:
    plan = plan_windows(W + 2 * 148 * FRAME, W, 148 * FRAME, FRAME, 10)
    values = np.stack([np.full((10, 1), float(c)) for c in range(len(plan.starts))]).astype(np.float32)
    plan = type(plan)(plan.starts, 10, plan.starts[-1] + 10)
    mean = aggregate(values, plan)
    assert mean[plan.starts[1] + 2, 0] == pytest.approx(1.0)
    summed = aggregate(np.ones((len(plan.starts), 10, 1), np.float32), plan, average=False)
    assert summed.max() == 1.0  # these windows do not overlap: every frame is covered once


def test_speaker_count_rounds_the_mean_local_count() -> None:
    plan = type(plan_windows(1, W, STEP, FRAME, WF))((0, 2), 4, 6)
    activity = np.zeros((2, 4, 3), np.float32)
    activity[0, :, 0] = 1
    activity[0, 2:, 1] = 1  # frames 2, 3: two speakers in window 0
    activity[1, :2, 0] = 1  # window 1 covers frames 2..5, one speaker on frames 2, 3
    activity[1, :2, 2] = 1
    assert speaker_count(activity, plan).tolist() == [1, 1, 2, 2, 0, 0]


def test_top_speakers_keeps_count_highest_positive() -> None:
    scores = np.array([[0.9, 0.5, 0.0], [0.2, 0.8, 0.7], [0.0, 0.0, 0.0], [0.4, 0.0, 0.0]], np.float32)
    count = np.array([1, 2, 1, 2])
    assert top_speakers(scores, count).tolist() == [[1, 0, 0], [0, 1, 1], [0, 0, 0], [1, 0, 0]]


# ---------------------------------------------------------------------------------------------- turns


@given(st.lists(st.booleans(), max_size=200))
def test_runs_reconstruct_the_mask(mask: list[bool]) -> None:
    rebuilt = np.zeros(len(mask), bool)
    for a, b in runs(np.array(mask, bool)):
        assert a < b
        rebuilt[a:b] = True
    assert rebuilt.tolist() == mask


def test_bridge_joins_short_gaps_and_drops_short_spans() -> None:
    assert bridge([(0, 10), (12, 20), (40, 41)], min_gap=5, min_len=2) == [(0, 20)]
    assert bridge([(0, 10), (12, 20)], min_gap=0, min_len=0) == [(0, 10), (12, 20)]


def test_speaker_labels_follow_openai() -> None:
    assert [speaker_label(i) for i in (0, 1, 25, 26, 27)] == ["A", "B", "Z", "AA", "AB"]


def test_frames_to_turns_orders_labels_by_first_turn_and_keeps_overlap() -> None:
    binary = np.zeros((100, 3), np.float32)
    binary[50:90, 0] = 1  # column 0 speaks second
    binary[10:60, 2] = 1  # column 2 speaks first, overlapping column 0 on 50..60
    turns, labels = frames_to_turns(binary, 160, 400, 100 * 160)
    assert labels == ("A", "B")
    assert [(t.speaker, t.start, t.end) for t in turns] == [("A", 10 * 160 + 120, 60 * 160 + 120),
                                                            ("B", 50 * 160 + 120, 90 * 160 + 120)]
    bridged, _ = frames_to_turns(np.r_[np.ones(10), np.zeros(3), np.ones(10)][:, None].astype(np.float32),
                                 160, 400, 23 * 160, TurnRules(min_gap_s=0.05))
    assert len(bridged) == 1 and bridged[0].end <= 23 * 160


# ---------------------------------------------------------------------------------------------- pieces


@given(st.lists(st.booleans(), max_size=600), st.integers(5, 200), st.integers(1, 20))
@settings(max_examples=200)
def test_split_track_partitions_the_active_frames(mask: list[bool], piece: int, minimum: int) -> None:
    active = np.array(mask, bool)
    pieces = split_track(active, piece, minimum)
    joined = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
    assert joined.tolist() == np.flatnonzero(active).tolist()  # every active frame once, in order
    for p in pieces[:-1]:
        assert len(p) >= min(piece, minimum) or len(pieces) == 1
    assert all(len(p) <= 2 * piece + minimum for p in pieces)


def test_cannot_link_only_between_local_speakers_of_one_window() -> None:
    activity = np.zeros((2, 50, 3), np.float32)
    activity[0, :20, 0] = activity[0, 25:, 1] = activity[1, :, 0] = 1
    pieces = cut_pieces(activity, piece_frames=100, min_frames=5)
    assert [(p.window, p.local) for p in pieces] == [(0, 0), (0, 1), (1, 0)]
    apart = cannot_link(pieces)
    assert apart.tolist() == [[False, True, False], [True, False, False], [False, False, False]]


def test_piece_activity_places_labelled_pieces() -> None:
    pieces = [Piece(0, 0, np.arange(0, 5)), Piece(0, 1, np.arange(3, 8)), Piece(1, 0, np.arange(2, 4))]
    out = piece_activity(pieces, np.array([1, 0, -1]), windows=2, frames=10, num_clusters=2)
    assert out[0, :, 1].tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    assert out[0, :, 0].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 0, 0]
    assert out[1].sum() == 0
