"""The VAD state machine and speech_regions, driven by lists of probabilities (no model)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.errors import InvalidInput
from voxserve.pipelines.vad import VadEvent, VadParams, VadStateMachine, speech_regions

# 10 ms frames make the arithmetic readable: min_speech 100 ms = 10 frames, min_silence 200 ms = 20 frames.
F = 160
P = VadParams(
    threshold=0.5, neg_threshold=0.35, min_speech_ms=100, min_silence_ms=200, speech_pad_ms=0, frame_samples=F
)


def run(probs: list[float], params: VadParams = P, start_sample: int = 0) -> list[VadEvent]:
    m = VadStateMachine(params, start_sample)
    return m.update_many(probs) + m.flush()


def emitted_at(probs: list[float], params: VadParams = P) -> list[tuple[int, VadEvent]]:
    """(frame index whose update returned the event, event)."""
    m = VadStateMachine(params)
    out = [(i, ev) for i, p in enumerate(probs) for ev in m.update(p)]
    return out + [(len(probs), ev) for ev in m.flush()]


# ------------------------------------------------------------------------------------------ params


def test_default_params_and_low_threshold() -> None:
    p = VadParams()
    assert p.low == pytest.approx(0.35)
    assert VadParams(threshold=0.1).low == 0.0  # never below 0
    assert VadParams(threshold=0.6, neg_threshold=0.2).low == 0.2
    assert p.ms_to_samples(100) == 1600
    assert p.ms_to_samples(0) == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 0.0},
        {"threshold": 1.0},
        {"threshold": -0.5},
        {"threshold": 1.5},
        {"threshold": 0.5, "neg_threshold": 0.6},
        {"threshold": 0.5, "neg_threshold": -0.1},
        {"min_speech_ms": -1},
        {"min_silence_ms": -1},
        {"speech_pad_ms": -1},
        {"frame_samples": 0},
        {"frame_samples": -512},
    ],
)
def test_invalid_params_raise_invalid_input(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidInput):
        VadParams(**kwargs)  # type: ignore[arg-type]


def test_boundary_params_are_valid() -> None:
    VadParams(threshold=0.5, neg_threshold=0.5)
    VadParams(threshold=0.5, neg_threshold=0.0)
    VadParams(min_speech_ms=0, min_silence_ms=0, speech_pad_ms=0, frame_samples=1)


# ---------------------------------------------------------------------------------- state machine


def test_one_utterance_gives_one_start_and_one_end_at_known_samples() -> None:
    probs = [0.1] * 10 + [0.9] * 20 + [0.1] * 30
    assert emitted_at(probs) == [(19, VadEvent("start", 10 * F)), (49, VadEvent("end", 30 * F))]


def test_position_and_in_speech_track_the_stream() -> None:
    m = VadStateMachine(P, start_sample=1000)
    assert m.position == 1000 and not m.in_speech
    m.update_many([0.9] * 10)
    assert m.position == 1000 + 10 * F and m.in_speech
    assert m.update_many([0.1] * 20) == [VadEvent("end", 1000 + 10 * F)]
    assert not m.in_speech


def test_start_sample_offsets_every_event() -> None:
    probs = [0.1] * 5 + [0.9] * 15 + [0.1] * 25
    base = run(probs)
    shifted = run(probs, start_sample=48_000)
    assert [(e.kind, e.sample + 48_000) for e in base] == [(e.kind, e.sample) for e in shifted]


def test_speech_shorter_than_min_speech_is_ignored() -> None:
    assert run([0.1] * 10 + [0.9] * 9 + [0.1] * 40) == []
    # exactly min_speech is enough
    assert run([0.1] * 10 + [0.9] * 10 + [0.1] * 40) == [VadEvent("start", 10 * F), VadEvent("end", 20 * F)]


def test_several_blips_separated_by_silence_do_not_add_up() -> None:
    probs = ([0.9] * 5 + [0.1] * 3) * 10
    assert run(probs) == []


def test_zero_min_speech_starts_on_the_first_loud_frame() -> None:
    params = VadParams(threshold=0.5, min_speech_ms=0, min_silence_ms=200, speech_pad_ms=0, frame_samples=F)
    assert emitted_at([0.1, 0.1, 0.9], params)[0] == (2, VadEvent("start", 2 * F))


def test_short_dip_inside_speech_does_not_end_it() -> None:
    probs = [0.9] * 20 + [0.1] * 19 + [0.9] * 20 + [0.1] * 20
    assert run(probs) == [VadEvent("start", 0), VadEvent("end", 59 * F)]


def test_silence_of_min_silence_ends_speech_at_its_beginning() -> None:
    probs = [0.9] * 20 + [0.1] * 20 + [0.9] * 20 + [0.1] * 20
    assert run(probs) == [
        VadEvent("start", 0),
        VadEvent("end", 20 * F),
        VadEvent("start", 40 * F),
        VadEvent("end", 60 * F),
    ]


def test_hysteresis_in_between_frames_keep_speech_going() -> None:
    # 0.4 is between neg_threshold (0.35) and threshold (0.5): it neither starts silence nor speech.
    probs = [0.9] * 20 + [0.4] * 100 + [0.1] * 20
    assert run(probs) == [VadEvent("start", 0), VadEvent("end", 120 * F)]


def test_hysteresis_in_between_frames_do_not_start_speech() -> None:
    assert run([0.1] * 5 + [0.4] * 100 + [0.1] * 5) == []


def test_hysteresis_in_between_frames_keep_a_speech_candidate() -> None:
    # 3 loud frames, then in-between frames, then loud again: the candidate survives and the start is
    # the first loud frame (a frame below neg_threshold would have reset it).
    assert run([0.1] * 2 + [0.9] * 3 + [0.4] * 10 + [0.9] + [0.1] * 30) == [
        VadEvent("start", 2 * F),
        VadEvent("end", 16 * F),
    ]
    assert run([0.1] * 2 + [0.9] * 3 + [0.2] + [0.9] * 7 + [0.1] * 30) == []


def test_in_between_frames_do_not_reset_a_started_silence() -> None:
    # silence began at frame 20; in-between frames neither end it nor reset it
    probs = [0.9] * 20 + [0.1] * 10 + [0.4] * 5 + [0.1] * 5
    assert run(probs) == [VadEvent("start", 0), VadEvent("end", 20 * F)]
    assert emitted_at(probs)[-1][0] == 39


def test_a_loud_frame_resets_a_started_silence() -> None:
    probs = [0.9] * 20 + [0.1] * 15 + [0.9] + [0.1] * 15 + [0.1] * 10
    assert run(probs) == [VadEvent("start", 0), VadEvent("end", 36 * F)]


def test_threshold_is_inclusive_and_neg_threshold_exclusive() -> None:
    assert run([0.5] * 10) == [VadEvent("start", 0), VadEvent("end", 10 * F)]
    # exactly neg_threshold is "in between", not silence
    assert run([0.9] * 10 + [0.35] * 50) == [VadEvent("start", 0), VadEvent("end", 60 * F)]


def test_flush_closes_open_speech_at_the_current_position() -> None:
    m = VadStateMachine(P)
    assert m.update_many([0.1] * 3 + [0.9] * 12) == [VadEvent("start", 3 * F)]
    assert m.flush() == [VadEvent("end", 15 * F)]
    assert not m.in_speech
    assert m.flush() == []


def test_flush_ends_at_the_start_of_trailing_silence() -> None:
    m = VadStateMachine(P)
    m.update_many([0.9] * 12 + [0.1] * 5)
    assert m.flush() == [VadEvent("end", 12 * F)]


def test_flush_drops_a_pending_candidate() -> None:
    m = VadStateMachine(P)
    assert m.update_many([0.1] * 3 + [0.9] * 5) == []
    assert m.flush() == []
    # the dropped candidate does not leak into later input
    assert m.update_many([0.9] * 5) == []


# --------------------------------------------------------------------------------- speech_regions


def params(pad_ms: int = 0, **kw: int) -> VadParams:
    return VadParams(
        threshold=0.5, neg_threshold=0.35, min_speech_ms=kw.get("min_speech_ms", 100),
        min_silence_ms=kw.get("min_silence_ms", 200), speech_pad_ms=pad_ms, frame_samples=F,
    )  # fmt: skip


def test_speech_regions_without_padding_are_the_events() -> None:
    probs = [0.1] * 10 + [0.9] * 20 + [0.1] * 30 + [0.9] * 15 + [0.1] * 25
    assert speech_regions(probs, params(), len(probs) * F) == [(10 * F, 30 * F), (60 * F, 75 * F)]


def test_speech_regions_are_padded() -> None:
    probs = [0.1] * 50 + [0.9] * 20 + [0.1] * 50
    assert speech_regions(probs, params(pad_ms=100), len(probs) * F) == [(40 * F, 80 * F)]


def test_speech_regions_padding_is_clamped_to_the_stream() -> None:
    probs = [0.9] * 20 + [0.1] * 30 + [0.9] * 15
    n = len(probs) * F
    assert speech_regions(probs, params(pad_ms=100), n) == [(0, 30 * F), (40 * F, n)]
    # clamped to start_sample and start_sample + n_samples on a shifted timeline
    assert speech_regions(probs, params(pad_ms=100), n, start_sample=5000) == [
        (5000, 5000 + 30 * F),
        (5000 + 40 * F, 5000 + n),
    ]


def test_speech_regions_clamp_to_n_samples_shorter_than_the_frames() -> None:
    # the last frame is zero padding beyond the audio: regions never pass n_samples
    probs = [0.1] * 10 + [0.9] * 20
    n = 29 * F + 37
    assert speech_regions(probs, params(pad_ms=100), n) == [(0, n)]


def test_speech_regions_merge_when_padding_overlaps() -> None:
    # gap of 20 frames (200 ms) between speech; pad 100 ms each side closes it exactly
    probs = [0.1] * 30 + [0.9] * 20 + [0.1] * 20 + [0.9] * 20 + [0.1] * 40
    assert speech_regions(probs, params(pad_ms=100), len(probs) * F) == [(20 * F, 100 * F)]
    # with 90 ms of padding a gap of 20 ms remains
    assert speech_regions(probs, params(pad_ms=90), len(probs) * F) == [
        (30 * F - 1440, 50 * F + 1440),
        (70 * F - 1440, 90 * F + 1440),
    ]


def test_speech_regions_empty_for_silence() -> None:
    assert speech_regions([0.1] * 100, params(pad_ms=200), 100 * F) == []
    assert speech_regions([], params(pad_ms=200), 0) == []


def test_speech_regions_open_speech_at_end_is_flushed() -> None:
    probs = [0.1] * 10 + [0.9] * 30
    assert speech_regions(probs, params(), len(probs) * F) == [(10 * F, 40 * F)]


# ----------------------------------------------------------------------------------- properties

prob_lists = st.lists(
    st.one_of(
        st.floats(0.0, 1.0),
        st.sampled_from([0.0, 0.1, 0.34, 0.35, 0.4, 0.5, 0.9, 1.0]),
    ),
    max_size=400,
)
# runs of equal values produce realistic utterances and pauses
run_lists = st.lists(st.tuples(st.sampled_from([0.05, 0.4, 0.95]), st.integers(1, 40)), max_size=25).map(
    lambda runs: [p for p, n in runs for _ in range(n)]
)


@st.composite
def valid_params(draw: st.DrawFn) -> VadParams:
    threshold = draw(st.sampled_from([0.3, 0.5, 0.7]))
    neg = draw(st.one_of(st.none(), st.floats(0.0, threshold)))
    return VadParams(
        threshold=threshold,
        neg_threshold=neg,
        min_speech_ms=draw(st.integers(0, 300)),
        min_silence_ms=draw(st.integers(0, 500)),
        speech_pad_ms=draw(st.integers(0, 300)),
        frame_samples=draw(st.sampled_from([160, 512])),
    )


@settings(max_examples=200, deadline=None)
@given(st.one_of(prob_lists, run_lists), valid_params(), st.integers(0, 10**6))
def test_events_alternate_increase_and_lie_in_the_stream(probs: list[float], p: VadParams, start: int) -> None:
    events = run(probs, p, start)
    kinds = [e.kind for e in events]
    assert kinds == ["start", "end"] * (len(events) // 2)
    samples = [e.sample for e in events]
    assert samples == sorted(samples)
    assert all(a < b for a, b in zip(samples, samples[1:]))  # no empty utterance, no zero-length gap
    end = start + len(probs) * p.frame_samples
    assert all(start <= s <= end for s in samples)
    assert all((s - start) % p.frame_samples == 0 for s in samples)  # on the frame grid


@settings(max_examples=200, deadline=None)
@given(st.one_of(prob_lists, run_lists), valid_params())
def test_utterances_respect_min_speech_and_cover_long_loud_runs(probs: list[float], p: VadParams) -> None:
    events = run(probs, p)
    spans = [(events[i].sample, events[i + 1].sample) for i in range(0, len(events), 2)]
    min_speech = p.ms_to_samples(p.min_speech_ms)
    for s, _ in spans:
        # a start needs min_speech of audio from the first loud frame, and the loud frame itself
        assert probs[s // p.frame_samples] >= p.threshold
    # every run of loud frames lasting at least min_speech lies inside an utterance
    i = 0
    while i < len(probs):
        if probs[i] < p.threshold:
            i += 1
            continue
        j = i
        while j < len(probs) and probs[j] >= p.threshold:
            j += 1
        if (j - i) * p.frame_samples >= max(min_speech, 1):
            a, b = i * p.frame_samples, j * p.frame_samples
            assert any(s <= a and b <= e for s, e in spans), (a, b, spans)
        i = j


@settings(max_examples=200, deadline=None)
@given(st.one_of(prob_lists, run_lists), valid_params(), st.integers(0, 10**5), st.integers(-600, 0))
def test_speech_regions_are_sorted_disjoint_and_clamped(
    probs: list[float], p: VadParams, start: int, short: int
) -> None:
    n = max(0, len(probs) * p.frame_samples + short)
    regions = speech_regions(probs, p, n, start)
    for s, e in regions:
        assert start <= s < e <= start + n
    for (_, e1), (s2, _) in zip(regions, regions[1:]):
        assert e1 < s2  # merged when touching
    # each utterance (clipped to the stream) is inside a region
    events = run(probs, p, start)
    for i in range(0, len(events), 2):
        s, e = events[i].sample, min(events[i + 1].sample, start + n)
        if s < e:
            assert any(rs <= s and e <= re for rs, re in regions)


@settings(max_examples=100, deadline=None)
@given(st.one_of(prob_lists, run_lists), valid_params(), st.integers(1, 50))
def test_feeding_in_pieces_equals_feeding_at_once(probs: list[float], p: VadParams, step: int) -> None:
    m = VadStateMachine(p)
    events = []
    for i in range(0, len(probs), step):
        events += m.update_many(probs[i : i + step])
    assert events + m.flush() == run(probs, p)
