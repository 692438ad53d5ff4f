"""Chunk planning: packing speech regions into windows, cutting at pauses, streaming planning, re-chunking."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.pipelines.chunking import (
    ChunkParams,
    ChunkPlan,
    Piece,
    StreamingPlanner,
    pack_regions,
    plan_chunks,
    split_in_two,
)
from voxserve.pipelines.vad import VadParams
from voxserve.types import SAMPLE_RATE

F = 160  # 10 ms frames
VAD = VadParams(
    threshold=0.5, neg_threshold=0.35, min_speech_ms=50, min_silence_ms=150, speech_pad_ms=30, frame_samples=F
)
# 2 s chunks (200 frames), so that properties run over many chunks with short arrays
CP = ChunkParams(max_chunk_s=2.0, min_cut_s=0.8, min_fill_s=0.3, vad=VAD)
MAX = CP.max_samples
MIN_SPEECH_FRAMES = -(-VAD.ms_to_samples(VAD.min_speech_ms) // F)


def frames(*runs: tuple[float, int]) -> list[float]:
    return [p for p, n in runs for _ in range(n)]


def pieces_of(plans: list[ChunkPlan]) -> list[Piece]:
    return [p for plan in plans for p in plan.pieces]


def coverage(plans: list[ChunkPlan], n: int) -> np.ndarray:
    covered = np.zeros(n, dtype=bool)
    for p in pieces_of(plans):
        assert not covered[p.file_start : p.file_end].any(), "pieces overlap"
        covered[p.file_start : p.file_end] = True
    return covered


def long_loud_frames(probs: list[float], threshold: float, min_frames: int) -> list[int]:
    """Frames at or above ``threshold`` that belong to a run of at least ``min_frames`` such frames."""
    out, i = [], 0
    while i < len(probs):
        if probs[i] < threshold:
            i += 1
            continue
        j = i
        while j < len(probs) and probs[j] >= threshold:
            j += 1
        if j - i >= min_frames:
            out.extend(range(i, j))
        i = j
    return out


def check_plan_shape(plans: list[ChunkPlan], params: ChunkParams = CP, first_index: int = 0) -> None:
    assert [p.index for p in plans] == list(range(first_index, first_index + len(plans)))
    for plan in plans:
        assert plan.pieces, "a chunk without audio"
        assert 0 < plan.length <= params.max_samples
        local = 0
        for a, b in zip(plan.pieces, plan.pieces[1:]):
            assert a.file_end <= b.file_start  # increasing, not overlapping in the file
        for p in plan.pieces:
            assert p.file_start < p.file_end
            assert p.local_start == local  # contiguous in chunk time
            local += p.length
    for a, b in zip(plans, plans[1:]):
        assert a.file_end <= b.file_start


# ---------------------------------------------------------------------------------------- to_file

PLAN = ChunkPlan(3, (Piece(1000, 2000, 0), Piece(5000, 5500, 1000), Piece(9000, 9100, 1500)))


def test_plan_geometry() -> None:
    assert PLAN.length == 1600
    assert (PLAN.file_start, PLAN.file_end) == (1000, 9100)
    assert PLAN.with_index(7) == ChunkPlan(7, PLAN.pieces)


@pytest.mark.parametrize(
    ("local", "is_end", "expected"),
    [
        (0, False, 1000),
        (0, True, 1000),
        (999, False, 1999),
        (1000, False, 5000),  # a word starting on a border belongs to the later piece
        (1000, True, 2000),  # a word ending on a border belongs to the earlier piece
        (1200, False, 5200),
        (1500, True, 5500),
        (1500, False, 9000),
        (1550, True, 9050),
        (1600, False, 9100),
        (1600, True, 9100),
        (-50, False, 1000),  # clamped to the chunk
        (10**6, False, 9100),
        (10**6, True, 9100),
    ],
)
def test_to_file_known_values(local: int, is_end: bool, expected: int) -> None:
    assert PLAN.to_file(local, is_end=is_end) == expected


def test_to_file_is_monotonic_over_every_sample() -> None:
    starts = np.array([PLAN.to_file(x) for x in range(-5, PLAN.length + 5)])
    ends = np.array([PLAN.to_file(x, is_end=True) for x in range(-5, PLAN.length + 5)])
    assert (np.diff(starts) >= 0).all() and (np.diff(ends) >= 0).all()
    assert (ends <= starts).all()


# ------------------------------------------------------------------------------------ pack_regions


def test_regions_that_fit_are_packed_into_one_chunk_without_the_silence() -> None:
    probs = [0.9] * 600
    plans = pack_regions([(1000, 9000), (20_000, 26_000), (40_000, 41_000)], probs, 0, CP)
    assert plans == [ChunkPlan(0, (Piece(1000, 9000, 0), Piece(20_000, 26_000, 8000), Piece(40_000, 41_000, 14_000)))]


def test_first_index_numbers_the_chunks() -> None:
    plans = pack_regions([(0, MAX), (MAX + 100, MAX + 200)], [0.9] * 500, 0, CP, first_index=5)
    assert [p.index for p in plans] == [5, 6]
    assert plans[0].pieces == (Piece(0, MAX, 0),)


def test_long_region_is_cut_in_the_middle_of_a_pause() -> None:
    # 300 loud frames with a pause at frames 100..109: the cut is at the middle of the pause
    probs = frames((0.9, 100), (0.1, 10), (0.9, 190))
    plans = pack_regions([(0, 300 * F)], probs, 0, CP)
    check_plan_shape(plans)
    assert plans[0].pieces == (Piece(0, 104 * F + F // 2, 0),)
    assert plans[1].pieces == (Piece(104 * F + F // 2, 300 * F, 0),)


def test_long_region_is_cut_at_the_latest_pause_in_range() -> None:
    probs = frames((0.9, 80), (0.1, 4), (0.9, 76), (0.2, 6), (0.9, 134))
    plans = pack_regions([(0, 300 * F)], probs, 0, CP)
    assert plans[0].file_end == 162 * F + F // 2  # pause at frames 160..165
    assert 160 * F <= plans[0].file_end < 166 * F


def test_cut_respects_probs_start_offset() -> None:
    offset = 7 * F
    probs = frames((0.9, 100), (0.1, 10), (0.9, 190))
    plans = pack_regions([(offset, offset + 300 * F)], probs, offset, CP)
    assert plans[0].file_end == offset + 104 * F + F // 2


def test_a_pause_before_a_third_of_the_room_is_not_used() -> None:
    # the only pause is at frames 20..25, too early (a cut there would leave a tiny chunk):
    # the cut falls at the quietest frame between min_cut_s and max_chunk_s instead
    probs = frames((0.9, 20), (0.1, 6), (0.9, 124), (0.6, 1), (0.9, 149))
    plans = pack_regions([(0, 300 * F)], probs, 0, CP)
    check_plan_shape(plans)
    assert plans[0].file_end == 150 * F + F // 2


def test_region_without_any_pause_is_cut_at_the_max() -> None:
    probs = [0.9] * 700
    plans = pack_regions([(0, 700 * F)], probs, 0, CP)
    check_plan_shape(plans)
    assert len(plans) == 4
    assert sum(p.length for p in plans) == 700 * F
    for p in plans[:-1]:  # cut at the last frame centre that fits: the chunks are as full as allowed
        assert MAX - F <= p.length <= MAX
        assert p.file_end % F == F // 2


def test_region_beyond_the_scored_frames_is_cut_at_the_max() -> None:
    plans = pack_regions([(0, 5 * MAX + 17)], [], 0, CP)
    check_plan_shape(plans)
    assert [p.length for p in plans] == [MAX] * 5 + [17]


def test_region_is_cut_to_fill_the_room_left_in_a_chunk() -> None:
    # chunk 0 holds 1 s; the next 2 s region has a pause in the room that is left: it is cut there
    probs = frames((0.9, 100), (0.1, 100), (0.9, 50), (0.1, 4), (0.9, 146))
    plans = pack_regions([(0, 100 * F), (200 * F, 400 * F)], probs, 0, CP)
    check_plan_shape(plans)
    assert plans[0].pieces == (Piece(0, 100 * F, 0), Piece(200 * F, 251 * F + F // 2, 100 * F))
    assert plans[1].pieces == (Piece(251 * F + F // 2, 400 * F, 0),)


def test_region_without_pause_in_the_room_left_starts_a_new_chunk() -> None:
    probs = frames((0.9, 100), (0.1, 100), (0.9, 200))
    plans = pack_regions([(0, 100 * F), (200 * F, 400 * F)], probs, 0, CP)
    assert plans == [
        ChunkPlan(0, (Piece(0, 100 * F, 0),)),
        ChunkPlan(1, (Piece(200 * F, 400 * F, 0),)),
    ]


def test_chunk_with_little_room_left_is_closed_without_cutting() -> None:
    # 1.8 s used, 0.2 s left < min_fill_s (0.3 s): the next region is not cut although it has a pause
    probs = frames((0.9, 180), (0.1, 20), (0.9, 5), (0.1, 5), (0.9, 90))
    plans = pack_regions([(0, 180 * F), (200 * F, 300 * F)], probs, 0, CP)
    assert plans == [
        ChunkPlan(0, (Piece(0, 180 * F, 0),)),
        ChunkPlan(1, (Piece(200 * F, 300 * F, 0),)),
    ]


# -------------------------------------------------------------------------------------- plan_chunks


def test_plan_chunks_drops_silence_and_pads_speech() -> None:
    probs = frames((0.05, 100), (0.9, 50), (0.05, 200), (0.9, 30), (0.05, 100))
    n = len(probs) * F
    plans = plan_chunks(probs, n, CP)
    pad = VAD.ms_to_samples(VAD.speech_pad_ms)
    assert plans == [
        ChunkPlan(0, (Piece(100 * F - pad, 150 * F + pad, 0), Piece(350 * F - pad, 380 * F + pad, 50 * F + 2 * pad)))
    ]


def test_plan_chunks_of_silence_is_empty() -> None:
    assert plan_chunks([0.0] * 1000, 1000 * F, CP) == []
    assert plan_chunks([], 0, CP) == []


def test_plan_chunks_not_before_clips_regions() -> None:
    probs = frames((0.05, 100), (0.9, 50), (0.05, 200), (0.9, 30), (0.05, 100))
    plans = plan_chunks(probs, len(probs) * F, CP, not_before=120 * F)
    assert plans[0].file_start == 120 * F
    plans = plan_chunks(probs, len(probs) * F, CP, not_before=200 * F)
    assert plans[0].file_start == 350 * F - VAD.ms_to_samples(VAD.speech_pad_ms)


def test_plan_chunks_on_a_shifted_timeline() -> None:
    probs = frames((0.05, 10), (0.9, 50), (0.05, 50))
    base = 1_000 * F
    plans = plan_chunks(probs, len(probs) * F, CP, start_sample=base, first_index=4)
    pad = VAD.ms_to_samples(VAD.speech_pad_ms)
    assert plans == [ChunkPlan(4, (Piece(base + 10 * F - pad, base + 60 * F + pad, 0),))]


def test_default_params_on_a_long_monologue() -> None:
    """Whisper-sized defaults: 5 minutes of speech with a short pause every 7 s."""
    params = ChunkParams()
    frame = params.vad.frame_samples
    per_s = 16000 / frame
    probs: list[float] = []
    for _ in range(43):
        probs += [0.95] * int(6.6 * per_s) + [0.05] * int(0.4 * per_s)
    plans = plan_chunks(probs, len(probs) * frame, params)
    check_plan_shape(plans, params)
    assert all(p.length > 0.6 * params.max_samples for p in plans[:-1])  # chunks are filled, not cut at every pause
    low = params.vad.low
    for a, b in zip(plans, plans[1:]):
        if a.file_end == b.file_start:  # a region was cut: the cut lies inside a pause
            assert probs[a.file_end // frame] < low


# ----------------------------------------------------------------------------------- properties

LEVELS = [0.0, 0.2, 0.34, 0.4, 0.5, 0.7, 1.0]
run_probs = st.lists(st.tuples(st.sampled_from(LEVELS), st.integers(1, 260)), max_size=30).map(
    lambda runs: [p for p, n in runs for _ in range(n)]
)
noisy_probs = st.lists(st.floats(0.0, 1.0), max_size=800)
prob_arrays = st.one_of(run_probs, run_probs, noisy_probs)


@settings(max_examples=150, deadline=None)
@given(prob_arrays, st.integers(0, F - 1))
def test_plan_chunks_properties(probs: list[float], short: int) -> None:
    n = max(0, len(probs) * F - short)  # the last frame may be padding beyond the audio
    plans = plan_chunks(probs, n, CP)
    check_plan_shape(plans)
    covered = coverage(plans, max(n, 1))
    assert all(p.file_end <= n for p in pieces_of(plans))
    # nothing lost: every frame of a real speech run lies inside some piece
    for f in long_loud_frames(probs, VAD.threshold, MIN_SPEECH_FRAMES):
        a, b = f * F, min((f + 1) * F, n)
        assert covered[a:b].all(), f"speech frame {f} is in no chunk"
    # silence is dropped: every covered sample is near speech (within the padding, or in a pause too short
    # to end an utterance)
    near = VAD.ms_to_samples(VAD.speech_pad_ms) + VAD.ms_to_samples(VAD.min_silence_ms)
    loud = np.zeros(max(n, 1), dtype=bool)
    for f, p in enumerate(probs):
        if p >= VAD.low:
            loud[max(0, f * F - near) : min(n, (f + 1) * F + near)] = True
    assert not (covered & ~loud).any()


@settings(max_examples=150, deadline=None)
@given(prob_arrays)
def test_to_file_properties_on_planned_chunks(probs: list[float]) -> None:
    for plan in plan_chunks(probs, len(probs) * F, CP):
        xs = np.unique(
            np.concatenate([np.linspace(0, plan.length, 50).astype(int), [p.local_start for p in plan.pieces]])
        )
        starts = [plan.to_file(int(x)) for x in xs]
        ends = [plan.to_file(int(x), is_end=True) for x in xs]
        assert starts == sorted(starts) and ends == sorted(ends)
        assert plan.to_file(0) == plan.pieces[0].file_start
        assert plan.to_file(plan.length, is_end=True) == plan.pieces[-1].file_end
        assert plan.to_file(plan.length) == plan.pieces[-1].file_end
        for x in xs:
            assert plan.file_start <= plan.to_file(int(x)) <= plan.file_end
        for p in plan.pieces:  # inside a piece the map is a shift
            mid = p.local_start + p.length // 2
            assert plan.to_file(mid) == p.file_start + p.length // 2


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.1, 0.3, 0.4, 0.6, 0.9]), st.integers(1, 60)), min_size=1, max_size=60))
def test_long_region_is_cut_in_the_latest_pause_when_there_is_one(runs: list[tuple[float, int]]) -> None:
    probs = [p for p, n in runs for _ in range(n)]
    n = len(probs) * F
    plans = pack_regions([(0, n)], probs, 0, CP)
    check_plan_shape(plans)
    assert sum(p.length for p in plans) == n  # one region, cut into consecutive chunks
    quiet = [p < VAD.low for p in probs]
    for a, b in zip(plans, plans[1:]):
        assert a.file_end == b.file_start
        lo = -(-(a.file_start + MAX // 3) // F)
        hi = (a.file_start + MAX) // F
        window = range(lo, min(hi, len(probs)))
        cut_frame = a.file_end // F
        if any(quiet[f] for f in window):
            assert cut_frame in window and quiet[cut_frame], "a pause was available but not used"
            assert not any(quiet[f] for f in range(cut_frame, window.stop) if not all(quiet[cut_frame : f + 1])), (
                "a later pause was available"
            )
        else:  # no pause: as late as allowed, at the quietest frame after min_cut_s
            assert a.length >= CP.min_cut_s * SAMPLE_RATE


def feed_in_blocks(probs: list[float], sizes: list[int], n: int, params: ChunkParams = CP) -> list[ChunkPlan]:
    planner = StreamingPlanner(params)
    out: list[ChunkPlan] = []
    i, k, base = 0, 0, 0
    while i < len(probs):
        step = sizes[k % len(sizes)]
        released = planner.feed(probs[i : i + step])
        # audio before base is dropped by the caller: no chunk released later may reach back before it
        assert all(p.file_start >= base for p in released)
        out += released
        assert planner.base % params.vad.frame_samples == 0
        assert planner.base >= base
        base = planner.base
        i += step
        k += 1
    final = planner.finish(n)
    assert all(p.file_start >= base for p in final)
    return out + final


long_run_probs = st.lists(st.tuples(st.sampled_from(LEVELS), st.integers(1, 400)), min_size=1, max_size=40).map(
    lambda runs: [p for p, n in runs for _ in range(n)]
)


@settings(max_examples=120, deadline=None)
@given(st.one_of(long_run_probs, run_probs), st.lists(st.integers(1, 700), min_size=1, max_size=8))
def test_streaming_planner_covers_the_same_speech_as_plan_chunks(probs: list[float], sizes: list[int]) -> None:
    n = len(probs) * F
    streamed = feed_in_blocks(probs, sizes, n)
    whole = plan_chunks(probs, n, CP)
    check_plan_shape(streamed)
    check_plan_shape(whole)
    s_cov, w_cov = coverage(streamed, max(n, 1)), coverage(whole, max(n, 1))
    for f in long_loud_frames(probs, VAD.threshold, MIN_SPEECH_FRAMES):
        assert w_cov[f * F : (f + 1) * F].all()
        assert s_cov[f * F : (f + 1) * F].all(), f"speech frame {f} lost by the streaming planner"
    # released chunks are final: streaming gives exactly the whole-file plan
    assert streamed == whole


def test_streaming_planner_releases_chunks_before_the_end() -> None:
    # 20 s of speech with a pause every 1.5 s: chunks are released while feeding, and the rest on finish
    probs = frames(*[(0.9, 140), (0.05, 20)] * 12)
    planner = StreamingPlanner(CP)
    early: list[ChunkPlan] = []
    for i in range(0, len(probs), 100):
        early += planner.feed(probs[i : i + 100])
    assert early, "nothing released before the end of input"
    assert planner.base > 0  # audio before base is forgotten
    assert planner.base <= early[-1].file_end
    rest = planner.finish(len(probs) * F)
    plans = early + rest
    check_plan_shape(plans)
    assert plans == plan_chunks(probs, len(probs) * F, CP)  # the same cuts: released chunks were final


def test_streaming_planner_keeps_a_short_utterance_tail_after_a_cut() -> None:
    # 4 s of unbroken speech fed frame by frame: the chunk released at 2 * max is cut at its end, and the
    # last 1.5 frames (shorter than min_speech) still belong to the utterance (the detector keeps its state)
    probs = [0.5] * 400
    plans = feed_in_blocks(probs, [1], 400 * F)
    assert plans[-1].file_end == 400 * F
    assert sum(p.length for p in plans) == 400 * F
    assert plans == plan_chunks(probs, 400 * F, CP)


def test_streaming_planner_memory_stays_bounded() -> None:
    # 10 minutes of 1 s utterances and 1 s pauses, fed in 30 s blocks
    probs = frames(*[(0.9, 100), (0.05, 100)] * 300)
    planner = StreamingPlanner(CP)
    released: list[ChunkPlan] = []
    for i in range(0, len(probs), 3000):
        released += planner.feed(probs[i : i + 3000])
        assert len(planner._probs) <= 3000 + 2 * MAX // F
        assert len(planner._events) <= 2 * (3000 + 2 * MAX // F) // 200 + 4
    released += planner.finish(len(probs) * F)
    assert len(released) == 300
    assert planner.base >= len(probs) * F - 2 * MAX


def test_streaming_planner_forgets_long_silence() -> None:
    planner = StreamingPlanner(CP)
    for _ in range(50):
        assert planner.feed([0.0] * 100) == []
    assert planner.base >= 50 * 100 * F - 2 * MAX
    assert planner.finish(50 * 100 * F) == []


def test_streaming_planner_finish_with_short_input() -> None:
    planner = StreamingPlanner(CP)
    assert planner.feed(frames((0.0, 20), (0.9, 30), (0.0, 20))) == []
    pad = VAD.ms_to_samples(VAD.speech_pad_ms)
    assert planner.finish(70 * F - 100) == [ChunkPlan(0, (Piece(20 * F - pad, 50 * F + pad, 0),))]


# ------------------------------------------------------------------------------------- split_in_two


def test_split_in_two_at_the_piece_border_nearest_the_middle() -> None:
    plan = ChunkPlan(2, (Piece(0, 1000, 0), Piece(3000, 4000, 1000), Piece(6000, 8000, 2000)))
    audio = np.arange(4000, dtype=np.float32)
    (a, xa), (b, xb) = split_in_two(plan, audio)
    assert a == ChunkPlan(2, (Piece(0, 1000, 0), Piece(3000, 4000, 1000)))
    assert b == ChunkPlan(2, (Piece(6000, 8000, 0),))
    np.testing.assert_array_equal(xa, audio[:2000])
    np.testing.assert_array_equal(xb, audio[2000:])


def test_split_in_two_single_piece_at_the_quietest_frame() -> None:
    frame = 320
    n = 100 * frame
    rng = np.random.default_rng(0)
    audio = (0.5 * rng.standard_normal(n)).astype(np.float32)
    audio[55 * frame : 56 * frame] *= 0.01  # the quiet frame, between 35% and 65%
    audio[10 * frame : 11 * frame] = 0.0  # quieter, but outside the allowed range
    plan = ChunkPlan(0, (Piece(16000, 16000 + n, 0),))
    (a, xa), (b, xb) = split_in_two(plan, audio, frame)
    cut = 55 * frame + frame // 2
    assert a == ChunkPlan(0, (Piece(16000, 16000 + cut, 0),))
    assert b == ChunkPlan(0, (Piece(16000 + cut, 16000 + n, 0),))
    assert len(xa) == cut and len(xb) == n - cut


def test_split_in_two_of_tiny_audio() -> None:
    plan = ChunkPlan(0, (Piece(0, 100, 0),))
    parts = split_in_two(plan, np.zeros(100, np.float32))
    assert [p.length for p, _ in parts] == [50, 50]
    one = ChunkPlan(0, (Piece(0, 1, 0),))
    assert split_in_two(one, np.zeros(1, np.float32))[0][0] == one  # cannot be cut


@st.composite
def plans_with_audio(draw: st.DrawFn) -> tuple[ChunkPlan, np.ndarray]:
    lengths = draw(st.lists(st.integers(1, 20_000), min_size=1, max_size=6))
    gaps = draw(st.lists(st.integers(0, 50_000), min_size=len(lengths), max_size=len(lengths)))
    pieces, pos, local = [], 0, 0
    for length, gap in zip(lengths, gaps):
        pos += gap
        pieces.append(Piece(pos, pos + length, local))
        pos += length
        local += length
    seed = draw(st.integers(0, 2**32 - 1))
    audio = np.random.default_rng(seed).uniform(-1, 1, local).astype(np.float32)
    return ChunkPlan(draw(st.integers(0, 100)), tuple(pieces)), audio


def merge_touching(pieces: list[Piece]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for p in pieces:
        if out and out[-1][1] == p.file_start:
            out[-1] = (out[-1][0], p.file_end)
        else:
            out.append((p.file_start, p.file_end))
    return out


@settings(max_examples=200, deadline=None)
@given(plans_with_audio())
def test_split_in_two_properties(plan_audio: tuple[ChunkPlan, np.ndarray]) -> None:
    plan, audio = plan_audio
    parts = split_in_two(plan, audio)
    if plan.length < 2:
        assert len(parts) == 1
    if len(parts) == 1:
        assert parts[0][0] == plan
        return
    (a, xa), (b, xb) = parts
    assert a.index == b.index == plan.index
    assert len(xa) == a.length > 0 and len(xb) == b.length > 0
    np.testing.assert_array_equal(np.concatenate([xa, xb]), audio)
    # the pieces together are the original's (a piece may be cut in two)
    assert merge_touching([*a.pieces, *b.pieces]) == merge_touching(list(plan.pieces))
    check_plan_shape([a.with_index(0), b.with_index(1)], ChunkParams(max_chunk_s=10))
    # the local -> file maps agree
    for x in np.linspace(0, a.length - 1, 20).astype(int):
        assert a.to_file(int(x)) == plan.to_file(int(x))
    for x in np.linspace(0, b.length - 1, 20).astype(int):
        assert b.to_file(int(x)) == plan.to_file(a.length + int(x))
    if len(plan.pieces) > 1:  # at a piece border, the one nearest the middle
        borders = [p.local_start for p in plan.pieces[1:]]
        assert a.length in borders
        assert abs(a.length - plan.length // 2) == min(abs(x - plan.length // 2) for x in borders)
    else:
        assert 0.35 * plan.length - 320 <= a.length <= 0.65 * plan.length + 320
