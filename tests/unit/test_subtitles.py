"""Subtitle cue shaping (voxserve.subtitles): bounds on lines and cues, word order and timing, speakers, and the
srt/vtt writers that render through it (parsed back with the ``srt`` and ``webvtt`` libraries)."""

from __future__ import annotations

import io

import pytest
import srt
import webvtt
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.errors import InvalidInput
from voxserve.formats import render
from voxserve.subtitles import SubtitleOptions, label_width, shape_cues
from voxserve.types import SAMPLE_RATE, Segment, Transcript, Word

_S = SAMPLE_RATE


def _transcript(words: list[Word], language: str = "en") -> Transcript:
    text = " ".join(w.text for w in words)
    seg = Segment(0, words[0].start, words[-1].end, text, tuple(words))
    return Transcript(text, language, words[-1].end, (seg,))


def _timed(texts: list[str], step_s: float = 0.3, speakers: list[str | None] | None = None) -> list[Word]:
    step = round(step_s * _S)
    return [Word(t, i * step, i * step + step - 800, speaker=(speakers[i] if speakers else None))
            for i, t in enumerate(texts)]


_word_text = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=14).flatmap(
    lambda w: st.sampled_from([w, w + ",", w + ".", w + "?"]))


@st.composite
def _words(draw: st.DrawFn) -> list[Word]:
    n = draw(st.integers(1, 60))
    out, t = [], 0
    for _ in range(n):
        t += draw(st.integers(0, 2 * _S))  # pause before the word
        length = draw(st.integers(1, 3 * _S)) if draw(st.booleans()) else draw(st.integers(1, _S // 2))
        out.append(Word(draw(_word_text), t, t + length, speaker=draw(st.sampled_from([None, "A", "B"]))))
        t += length
    return out


@settings(max_examples=150, deadline=None)
@given(_words(), st.integers(8, 60), st.integers(1, 3), st.floats(0.5, 10.0), st.booleans())
def test_cues_keep_every_word_once_in_order_within_bounds(words: list[Word], width: int, count: int,
                                                           duration: float, labels: bool) -> None:
    options = SubtitleOptions(width, count, duration, labels)
    cues = shape_cues(_transcript(words), options)
    assert [w for c in cues for w in c.words] == words
    for c in cues:
        assert len({w.speaker for w in c.words}) == 1 and c.speaker == c.words[0].speaker
        assert c.start == c.words[0].start and c.end == max(c.words[-1].end, c.start + 1)
        if len(c.words) > 1:
            assert c.end - c.start <= round(duration * _S)
            assert len(c.lines) <= count
        assert " ".join(c.lines).split() == [w.text for w in c.words]
        for i, line in enumerate(c.lines):
            room = width - (label_width(c.speaker, options) if i == 0 else 0)
            assert len(line) <= room or " " not in line, (line, room)


def test_breaks_prefer_sentence_ends_and_balance_lines() -> None:
    texts = "This is the first sentence. And here comes the second one which keeps going on for a while".split()
    cues = shape_cues(_transcript(_timed(texts)), SubtitleOptions(max_line_width=30, max_cue_duration_s=6.0))
    assert cues[0].lines == ("This is the first sentence.",)
    second = cues[1].lines
    assert len(second) == 2 and abs(len(second[0]) - len(second[1])) <= 8  # balanced, not 30 + a stub


def test_a_long_pause_ends_a_cue_and_a_long_word_stands_alone() -> None:
    words = [Word("Hello", 0, 8000), Word("again", 3 * _S, 3 * _S + 8000),
             Word("Supercalifragilisticexpialidocious", 4 * _S, 13 * _S), Word("yes", 13 * _S, 14 * _S)]
    cues = shape_cues(_transcript(words), SubtitleOptions(max_line_width=20, max_cue_duration_s=5.0))
    assert [[w.text for w in c.words] for c in cues] == [["Hello"], ["again"],
                                                         ["Supercalifragilisticexpialidocious"], ["yes"]]


def test_untimed_segments_and_no_space_languages() -> None:
    seg = Segment(0, 0, 10 * _S, " ".join(["word"] * 40))
    cues = shape_cues(Transcript(seg.text, "en", 10 * _S, (seg,)), SubtitleOptions(max_line_width=20))
    assert sum(len(c.words) for c in cues) == 40 and all(len(line) <= 20 for c in cues for line in c.lines)
    assert cues[0].start == 0 and cues[-1].end == 10 * _S
    ja = shape_cues(_transcript(_timed(["今日", "は", "良い", "天気", "です"]), "ja"))
    assert ja[0].lines == ("今日は良い天気です",)


def test_srt_and_vtt_render_through_the_shaper_with_speaker_labels() -> None:
    texts = "Good morning everyone, thanks for joining. Morning! Glad to be here today.".split()
    speakers: list[str | None] = ["A"] * 6 + ["B"] * 6
    words = _timed(texts, speakers=speakers)
    segs = (Segment(0, words[0].start, words[5].end, " ".join(texts[:6]), tuple(words[:6]), speaker="A"),
            Segment(1, words[6].start, words[-1].end, " ".join(texts[6:]), tuple(words[6:]), speaker="B"))
    t = Transcript(" ".join(texts), "en", words[-1].end, segs)
    options = SubtitleOptions(max_line_width=24)
    cues = list(srt.parse(render(t, "srt", subtitles=options)))
    assert cues[0].content.startswith("[A] Good morning") and any(c.content.startswith("[B] ") for c in cues)
    assert all(len(line) <= 24 for c in cues for line in c.content.splitlines())
    assert cues[0].start.total_seconds() == words[0].start / _S
    vtt = webvtt.from_buffer(io.StringIO(render(t, "vtt", subtitles=options)))
    assert [c.voice for c in vtt.captions][0] == "A" and "B" in {c.voice for c in vtt.captions}
    plain = render(t, "srt", subtitles=SubtitleOptions(speaker_labels=False))
    assert "[A]" not in plain and "Good morning" in plain


@pytest.mark.parametrize("fields,param", [
    ({"max_line_width": 3}, "max_line_width"), ({"max_line_count": 0}, "max_line_count"),
    ({"max_cue_duration_s": 0.1}, "max_cue_duration"), ({"max_cue_duration_s": float("nan")}, "max_cue_duration"),
    ({"max_line_width": True}, "max_line_width"),
])
def test_bad_options_name_their_field(fields: dict[str, object], param: str) -> None:
    with pytest.raises(InvalidInput) as err:
        SubtitleOptions(**fields)  # type: ignore[arg-type]
    assert err.value.param == param


def test_no_orphan_word_at_a_phrase_end() -> None:
    cues = shape_cues(_transcript(_timed("ask what you can do for your country.".split())),
                      SubtitleOptions(max_line_width=32, max_line_count=1))
    assert [c.lines[0] for c in cues] == ["ask what you can do", "for your country."]
