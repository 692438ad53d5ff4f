"""Stitching chunk results (chunk-local time) into one transcript on the file's timeline."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.backends.base import TimedWord
from voxserve.pipelines.chunking import ChunkPlan, Piece
from voxserve.pipelines.stitching import (
    ChunkText,
    SegmentRules,
    chunk_segments,
    stitch,
    transcript_text,
    words_to_file_time,
)
from voxserve.types import SAMPLE_RATE, Word

S = SAMPLE_RATE


def tw(text: str, start_s: float, end_s: float, tokens: tuple[int, ...] = ()) -> TimedWord:
    return TimedWord(text, int(start_s * S), int(end_s * S), 0.9, tokens)


def chunk(plan: ChunkPlan, words: list[TimedWord], text: str | None = None, **stats: float) -> ChunkText:
    if text is None:
        text = " ".join(w.text for w in words)
    tokens = tuple(t for w in words for t in w.tokens)
    return ChunkText(plan, text, tokens, tuple(words), **stats)


def one_piece(file_start_s: float, length_s: float, index: int = 0) -> ChunkPlan:
    a = int(file_start_s * S)
    return ChunkPlan(index, (Piece(a, a + int(length_s * S), 0),))


# --------------------------------------------------------------------------------- time mapping


def test_words_are_mapped_through_the_pieces() -> None:
    plan = ChunkPlan(0, (Piece(1 * S, 3 * S, 0), Piece(5 * S, 7 * S, 2 * S)))
    words = words_to_file_time(chunk(plan, [tw("a", 0.5, 1.0), tw("b", 2.5, 2.75)]), 0)
    assert [(w.text, w.start, w.end) for w in words] == [("a", int(1.5 * S), 2 * S), ("b", int(5.5 * S), int(5.75 * S))]
    assert words[0].probability == 0.9


def test_word_across_a_piece_border_is_clipped_to_its_pieces() -> None:
    """A word crossing the join of two pieces belongs to the piece holding most of it (the earlier on a tie)
    and never spans the gap between them in the file."""
    plan = ChunkPlan(0, (Piece(1 * S, 3 * S, 0), Piece(5 * S, 7 * S, 2 * S)))
    (w,) = words_to_file_time(chunk(plan, [tw("x", 1.5, 2.5)]), 0)
    assert (w.start, w.end) == (int(2.5 * S), 3 * S)
    (w,) = words_to_file_time(chunk(plan, [tw("y", 1.8, 3.0)]), 0)
    assert (w.start, w.end) == (5 * S, 6 * S)
    # a word ending exactly on the border ends in the first piece; one starting there starts in the second
    first, second = words_to_file_time(chunk(plan, [tw("a", 1.0, 2.0), tw("b", 2.0, 2.5)]), 0)
    assert first.end == 3 * S and second.start == 5 * S


def test_overlapping_and_out_of_range_words_are_made_monotonic() -> None:
    plan = one_piece(10, 5)
    words = words_to_file_time(
        chunk(plan, [tw("a", 1.0, 2.0), tw("b", 1.5, 1.8), tw("c", 4.0, 9.0), tw("d", 3.0, 2.0)]), 0
    )
    spans = [(w.start, w.end) for w in words]
    assert spans == [(11 * S, 12 * S), (12 * S, 12 * S), (14 * S, 15 * S), (15 * S, 15 * S)]


def test_floor_pushes_words_after_the_previous_end() -> None:
    plan = one_piece(10, 5)
    (w,) = words_to_file_time(chunk(plan, [tw("a", 0.0, 1.0)]), floor=int(10.5 * S))
    assert (w.start, w.end) == (int(10.5 * S), 11 * S)


# --------------------------------------------------------------------------------------- segments


def test_break_after_sentence_end_once_long_enough() -> None:
    plan = one_piece(0, 20)
    words = [
        tw("Hello", 0.0, 0.5),
        tw("there.", 0.6, 1.2),
        tw("How", 1.3, 1.5),
        tw("are", 1.6, 1.8),
        tw("you?", 1.9, 2.2),
    ]
    segs = stitch([chunk(plan, words)], "en")
    assert [s.text for s in segs] == ["Hello there.", "How are you?"]
    assert [(s.start, s.end) for s in segs] == [(0, int(1.2 * S)), (int(1.3 * S), int(2.2 * S))]
    # a sentence end before min_s does not break
    short = [tw("Hi.", 0.0, 0.3), tw("Yes", 0.4, 0.6), tw("indeed.", 0.7, 1.1)]
    assert [s.text for s in stitch([chunk(plan, short)], "en")] == ["Hi. Yes indeed."]


def test_break_at_a_long_pause() -> None:
    plan = one_piece(0, 20)
    words = [tw("one", 0.0, 0.3), tw("two", 0.4, 0.6), tw("three", 1.6, 1.9), tw("four", 2.8, 3.0)]
    segs = stitch([chunk(plan, words)], "en")
    assert [s.text for s in segs] == ["one two", "three four"]  # 1.0 s pause breaks, 0.9 s does not


def test_break_at_piece_borders() -> None:
    plan = ChunkPlan(0, (Piece(0, 2 * S, 0), Piece(2 * S + 160, 4 * S, 2 * S)))
    words = [tw("a", 0.0, 0.5), tw("b", 1.2, 2.0), tw("c", 2.0, 2.5), tw("d", 2.6, 3.0)]
    segs = stitch([chunk(plan, words)], "en")
    assert [s.text for s in segs] == ["a b", "c d"]
    assert segs[0].end == 2 * S and segs[1].start == 2 * S + 160


def test_break_at_max_length() -> None:
    rules = SegmentRules(min_s=1.0, max_s=3.0, pause_s=1.0)
    plan = one_piece(0, 20)
    words = [tw(f"w{i}", 0.5 * i, 0.5 * i + 0.4) for i in range(14)]
    segs = stitch([chunk(plan, words)], "en", rules)
    assert [len(s.words) for s in segs] == [6, 6, 2]
    assert all(s.end - s.start <= 3 * S for s in segs)


def test_segments_carry_the_chunk_statistics_and_tokens() -> None:
    plan = one_piece(2, 10)
    words = [tw("Good", 0, 0.5, (1, 2)), tw("morning.", 0.6, 1.5, (3,)), tw("Hi", 2.0, 2.3, (4, 5))]
    (s1, s2) = stitch(
        [chunk(plan, words, temperature=0.4, avg_logprob=-0.3, compression_ratio=1.2, no_speech_prob=0.1)], "en"
    )
    assert s1.tokens == (1, 2, 3) and s2.tokens == (4, 5)
    assert (s1.temperature, s1.avg_logprob, s1.compression_ratio, s1.no_speech_prob) == (0.4, -0.3, 1.2, 0.1)
    assert (s1.id, s2.id) == (0, 1)


def test_chunk_with_text_but_no_words_is_one_segment() -> None:
    plan = ChunkPlan(0, (Piece(3 * S, 5 * S, 0), Piece(8 * S, 9 * S, 2 * S)))
    (seg,) = stitch([ChunkText(plan, "  some text ", (7, 8), ())], "en")
    assert (seg.start, seg.end, seg.text, seg.words, seg.tokens) == (3 * S, 9 * S, "some text", (), (7, 8))


def test_empty_text_gives_no_segment() -> None:
    plan = one_piece(0, 5)
    assert stitch([ChunkText(plan, "", (), ())], "en") == ()
    assert stitch([ChunkText(plan, "   ", (), ())], "en") == ()
    assert chunk_segments(ChunkText(plan, "", (), ()), 0, "en", SegmentRules()) == []


def test_chunks_are_stitched_in_file_order_and_numbered() -> None:
    c1 = chunk(one_piece(0, 10, 0), [tw("first.", 1.0, 2.5)])
    c2 = chunk(one_piece(10, 10, 1), [tw("second", 0.0, 0.4), tw("part.", 0.5, 1.0)])
    c3 = ChunkText(one_piece(30, 5, 2), "", (), ())
    segs = stitch([c2, c3, c1], "en")
    assert [(s.id, s.text) for s in segs] == [(0, "first."), (1, "second part.")]
    assert segs[1].start == 10 * S
    assert transcript_text(segs, "en") == "first. second part."


def test_languages_without_spaces_join_without_spaces() -> None:
    plan = one_piece(0, 10)
    segs = stitch([chunk(plan, [tw("今天", 0, 0.5), tw("很好。", 0.5, 1.2), tw("是", 1.3, 1.5)])], "zh")
    assert [s.text for s in segs] == ["今天很好。", "是"]
    assert transcript_text(segs, "zh") == "今天很好。是"


# ------------------------------------------------------------------------------------- properties


@st.composite
def chunk_texts(draw: st.DrawFn) -> list[ChunkText]:
    chunks: list[ChunkText] = []
    pos = draw(st.integers(0, 5 * S))
    for index in range(draw(st.integers(1, 4))):
        pieces, local = [], 0
        for _ in range(draw(st.integers(1, 4))):
            length = draw(st.integers(1, 8 * S))
            pieces.append(Piece(pos, pos + length, local))
            local += length
            pos += length + draw(st.one_of(st.just(0), st.integers(1, 3 * S)))
        plan = ChunkPlan(index, tuple(pieces))
        n_words = draw(st.integers(0, 30))
        # local times as a model gives them: mostly ordered, sometimes overlapping or past the end
        starts = sorted(draw(st.lists(st.integers(-S // 10, local + S // 10), min_size=n_words, max_size=n_words)))
        words = []
        for i, start in enumerate(starts):
            dur = draw(st.integers(-S // 10, S))
            text = f"c{index}w{i}" + draw(st.sampled_from(["", "", "", ".", "?", ","]))
            words.append(TimedWord(text, start, start + dur, 0.5, (index * 100 + i,)))
        text = " ".join(w.text for w in words) if words else draw(st.sampled_from(["", " ", "no words here"]))
        chunks.append(ChunkText(plan, text, tuple(t for w in words for t in w.tokens), tuple(words)))
    return draw(st.permutations(chunks))


rules_st = st.builds(
    SegmentRules,
    min_s=st.sampled_from([0.0, 1.0, 2.0]),
    max_s=st.sampled_from([2.0, 5.0, 12.0]),
    pause_s=st.sampled_from([0.3, 1.0]),
)


@settings(max_examples=300, deadline=None)
@given(chunk_texts(), rules_st)
def test_stitch_properties(chunks: list[ChunkText], rules: SegmentRules) -> None:
    segs = stitch(chunks, "en", rules)
    ordered = sorted(chunks, key=lambda c: c.plan.file_start)
    # every input word appears exactly once, in order
    out_words = [w for s in segs for w in s.words]
    assert [w.text for w in out_words] == [w.text for c in ordered for w in c.words]
    # words are monotonic and inside their chunk
    owner = {w.text: c.plan for c in ordered for w in c.words}
    prev_end = 0
    for w in out_words:
        assert w.start <= w.end
        assert w.start >= prev_end
        prev_end = w.end
        plan = owner[w.text]
        assert plan.file_start <= w.start and w.end <= plan.file_end
    # segments: numbered, ordered, not overlapping, text from their words, within one chunk
    assert [s.id for s in segs] == list(range(len(segs)))
    for a, b in zip(segs, segs[1:]):
        assert a.start <= a.end <= b.start <= b.end
    for s in segs:
        if s.words:
            assert (s.start, s.end) == (s.words[0].start, s.words[-1].end)
            assert s.text == " ".join(w.text for w in s.words)
            assert len({id(owner[w.text]) for w in s.words}) == 1
            assert s.tokens == tuple(t for w in s.words for t in _tokens(chunks, w.text))
            if len(s.words) > 1:
                assert s.end - s.start <= rules.max_s * S
        else:
            assert s.text == "no words here"
            assert any(c.plan.file_start == s.start and c.plan.file_end == s.end for c in chunks)
    # text-only chunks give one segment each, empty chunks none
    expected_wordless = sum(1 for c in chunks if not c.words and c.text.strip())
    assert sum(1 for s in segs if not s.words) == expected_wordless
    assert transcript_text(segs, "en") == " ".join(s.text for s in segs)


def _tokens(chunks: list[ChunkText], text: str) -> tuple[int, ...]:
    return next(w.tokens for c in chunks for w in c.words if w.text == text)


def must_break(words: list[Word], i: int, seg_start: int, ends: list[int], rules: SegmentRules) -> bool:
    """The segment rules, restated: a pause, a piece border, a sentence end once long enough, the maximum."""
    w, nxt = words[i], words[i + 1]
    if (nxt.start - w.end) / S >= rules.pause_s:
        return True
    if any(w.end <= e <= nxt.start for e in ends):
        return True
    if w.text.endswith((".", "?", "!")) and (w.end - seg_start) / S >= rules.min_s:
        return True
    return (nxt.end - seg_start) / S > rules.max_s


@settings(max_examples=300, deadline=None)
@given(chunk_texts(), rules_st)
def test_segment_breaks_follow_the_rules(chunks: list[ChunkText], rules: SegmentRules) -> None:
    for c in chunks:
        if not c.words:
            continue
        segs = chunk_segments(c, 0, "en", rules)
        words = [w for s in segs for w in s.words]
        ends = [p.file_end for p in c.plan.pieces[:-1]]
        last_of_segment = {id(s.words[-1]) for s in segs[:-1]}
        seg_start = words[0].start
        for i in range(len(words) - 1):
            broke = id(words[i]) in last_of_segment
            assert broke == must_break(words, i, seg_start, ends, rules), (i, words[i], words[i + 1])
            if broke:
                seg_start = words[i + 1].start
