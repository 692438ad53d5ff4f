"""Speakers on words and segments: overlap, ties, gaps, splitting at speaker changes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.pipelines.speaker_words import SpeakerTimeline, assign_speakers, label_words
from voxserve.types import Diarization, Segment, SpeakerTurn, Transcript, Word

S = 16_000


def w(text: str, a: float, b: float) -> Word:
    return Word(text, int(a * S), int(b * S))


def turns(*spans: tuple[str, float, float]) -> tuple[SpeakerTurn, ...]:
    return tuple(SpeakerTurn(int(a * S), int(b * S), s) for s, a, b in spans)


def timeline(*spans: tuple[str, float, float]) -> SpeakerTimeline:
    t = turns(*spans)
    return SpeakerTimeline(t, tuple(dict.fromkeys(x.speaker for x in t)), 20 * S)


def test_word_takes_the_speaker_it_overlaps_most() -> None:
    tl = timeline(("A", 0, 2.0), ("B", 1.9, 4))
    words = label_words([w("one", 0.5, 1.0), w("two", 1.8, 2.3), w("three", 3.0, 3.5)], tl)
    assert [x.speaker for x in words] == ["A", "B", "B"]


def test_ties_keep_the_previous_speaker_and_gaps_take_the_nearest() -> None:
    tl = timeline(("A", 0, 3), ("B", 1, 3), ("A", 6, 7), ("B", 9, 10))
    words = label_words([w("x", 0.2, 0.5), w("both", 1.5, 2.0), w("gap", 4.0, 4.5), w("late", 8.6, 8.9)], tl)
    assert [x.speaker for x in words] == ["A", "A", "A", "B"]
    starts_b = label_words([w("y", 1.2, 1.5), w("both", 1.5, 2.0)], timeline(("B", 1, 3), ("A", 1, 3)))
    assert [x.speaker for x in starts_b] == ["B", "B"]


def test_no_turns_means_no_speaker() -> None:
    assert label_words([w("x", 0, 1)], SpeakerTimeline((), (), S))[0].speaker is None


def transcript(segments: list[Segment]) -> Transcript:
    return Transcript(" ".join(s.text for s in segments), "en", 20 * S, tuple(segments))


def test_segments_split_at_speaker_changes() -> None:
    words = (w("Hello", 0, 0.5), w("there.", 0.6, 1.0), w("Hi", 1.6, 1.9), w("back.", 2.0, 2.4))
    seg = Segment(0, words[0].start, words[-1].end, "Hello there. Hi back.", words, tokens=(1, 2, 3, 4))
    d = Diarization(turns(("A", 0, 1.3), ("B", 1.3, 3)), ("A", "B"), 20 * S)
    out = assign_speakers(transcript([seg, Segment(1, 5 * S, 6 * S, "no words")]), d)
    assert [(s.id, s.speaker, s.text) for s in out.segments] == [
        (0, "A", "Hello there."), (1, "B", "Hi back."), (2, "B", "no words")
    ]
    assert out.segments[0].start == words[0].start and out.segments[1].end == words[-1].end
    assert out.segments[0].tokens == () and out.diarization is d and out.text == "Hello there. Hi back. no words"


@given(st.lists(st.tuples(st.sampled_from("AB"), st.floats(0, 18), st.floats(0.05, 3)), min_size=1, max_size=12),
       st.lists(st.floats(0, 19), min_size=1, max_size=30))
@settings(max_examples=100, deadline=None)
def test_every_word_gets_a_known_speaker_and_text_survives(spans: list, starts: list[float]) -> None:
    d = Diarization(turns(*[(s, a, min(a + dur, 20)) for s, a, dur in spans]), ("A", "B"), 20 * S)
    ws = tuple(w(f"w{i}", a, min(a + 0.3, 20)) for i, a in enumerate(sorted(starts)))
    seg = Segment(0, ws[0].start, ws[-1].end, " ".join(x.text for x in ws), ws)
    out = assign_speakers(transcript([seg]), d)
    spoken = {t.speaker for t in d.turns}
    assert all(x.speaker in spoken for x in out.words)
    assert " ".join(s.text for s in out.segments) == seg.text
    assert all(s.speaker == s.words[0].speaker and all(x.speaker == s.speaker for x in s.words) for s in out.segments)
    assert [s.id for s in out.segments] == list(range(len(out.segments)))
