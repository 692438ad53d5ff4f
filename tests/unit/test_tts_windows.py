"""Decoder window planning: kept ranges tile the unit, context where it exists, equal shapes for batching."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.backends.tts.fakes import fake_decode
from voxserve.errors import InvalidInput
from voxserve.streaming.tts_windows import Window, WindowParams, WindowPlanner


def plan(params: WindowParams, total: int, pushes: list[int]) -> list[Window]:
    planner = WindowPlanner(params)
    out: list[Window] = []
    for available in pushes:
        out += planner.push(min(available, total))
    return out + planner.finish(total)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 12), st.integers(1, 64), st.integers(0, 16), st.integers(1, 600),
    st.lists(st.integers(0, 600), max_size=20), st.integers(1, 5),
)
def test_windows_tile_the_unit_with_context(first: int, size: int, context: int, total: int, pushes: list[int],
                                            growth: int) -> None:
    params = WindowParams(first, size, context, growth, uniform=bool(total % 2))
    windows = plan(params, total, sorted(pushes))
    assert windows[0].keep_start == 0 and windows[-1].keep_end == total
    for a, b in zip(windows, windows[1:], strict=False):
        assert a.keep_end == b.keep_start
    for w in windows:
        assert 0 <= w.start <= w.keep_start < w.keep_end <= w.end <= total
        assert w.keep_start - w.start >= min(context, w.keep_start)
        assert w.end - w.keep_end >= min(context, total - w.keep_end)


def test_windows_grow_fourfold_to_full_size_then_share_one_shape() -> None:
    windows = plan(WindowParams(16, 128, 12, uniform=True), 1000, [])
    assert [w.keep_end - w.keep_start for w in windows[:5]] == [16, 64, 128, 128, 128]
    assert windows[0].frames == 16 + 12
    assert {w.frames for w in windows[2:]} == {152}  # full-size and last windows stack into one batch
    doubling = plan(WindowParams(16, 128, 12, growth=2), 1000, [])
    assert [w.keep_end - w.keep_start for w in doubling[:5]] == [16, 32, 64, 128, 128]
    plain = plan(WindowParams(16, 128, 12), 1000, [])
    assert [(w.keep_start, w.keep_end) for w in plain] == [(w.keep_start, w.keep_end) for w in windows]
    assert plain[-1].frames < 152  # without uniform shapes no frame is decoded twice more than needed


def test_incremental_frames_emit_windows_once_their_right_context_exists() -> None:
    planner = WindowPlanner(WindowParams(2, 8, 2, growth=2))
    assert planner.push(3) == []
    assert planner.push(4) == [Window(0, 4, 0, 2)]
    assert [(w.keep_start, w.keep_end) for w in planner.push(8)] == [(2, 6)]
    assert planner.push(15) == []  # the next window keeps (6, 14) and needs frames up to 16
    assert [(w.keep_start, w.keep_end) for w in planner.push(16)] == [(6, 14)]
    assert planner.planned_frames == 14


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.integers(1, 64), st.integers(0, 16), st.integers(1, 5), st.integers(1, 4),
       st.integers(0, 300))
def test_needed_is_exactly_the_frames_that_plan_the_next_windows(first: int, size: int, context: int, growth: int,
                                                                 n: int, pushed: int) -> None:
    """With ``needed(n)`` frames the next ``n`` windows are planned, with one frame fewer they are not (the
    stream asks its acoustic model for that many frames first)."""
    params = WindowParams(first, size, context, growth)
    planner = WindowPlanner(params)
    planner.push(pushed)
    need = planner.needed(n)
    assert need > pushed
    short, enough = WindowPlanner(params), WindowPlanner(params)
    short.push(pushed), enough.push(pushed)
    assert len(short.push(need - 1)) < n and len(enough.push(need)) >= n
    assert WindowPlanner(WindowParams(16, 128, 10)).needed(2) == 16 + 64 + 10


def test_first_window_size_can_be_chosen_per_unit() -> None:
    assert WindowPlanner(WindowParams(4, 32, 2), first_frames=32).finish(100)[0].keep_end == 32


def test_windowed_decoding_equals_whole_decoding_with_enough_context() -> None:
    frames = np.arange(300, dtype=np.float32).reshape(1, -1) * 3 % 17
    whole = fake_decode(frames, 4)
    for context, exact in ((0, False), (1, True), (3, True)):
        windows = WindowPlanner(WindowParams(5, 32, context)).finish(300)
        pieces = [fake_decode(frames[:, w.start : w.end], 4)[slice(*w.trim(4))] for w in windows]
        assert np.array_equal(np.concatenate(pieces), whole) is exact


def test_bad_params() -> None:
    with pytest.raises(InvalidInput):
        WindowParams(0, 10, 2)
    with pytest.raises(InvalidInput):
        WindowParams(4, 10, 2, growth=0)
    with pytest.raises(RuntimeError):
        planner = WindowPlanner(WindowParams())
        planner.finish(10)
        planner.push(20)
