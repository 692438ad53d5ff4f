"""Which joined pieces of a packed chunk the decoder skipped, judged from the words it said and their times."""

from __future__ import annotations

from voxserve.backends.base import AsrResult, TimedWord
from voxserve.pipelines.chunking import ChunkPlan, Piece
from voxserve.pipelines.long_asr import unheard_pieces

SR = 16_000


def _plan(*lengths_s: float) -> ChunkPlan:
    pieces, local, file_at = [], 0, 0
    for length in lengths_s:
        n = int(length * SR)
        pieces.append(Piece(file_at, file_at + n, local))
        local += n
        file_at += n + 5 * SR  # far apart in the file
    return ChunkPlan(0, tuple(pieces))


def _said(*spans_s: tuple[float, float]) -> AsrResult:
    words = tuple(TimedWord(f"w{i}", int(a * SR), int(b * SR), 0.9) for i, (a, b) in enumerate(spans_s))
    return AsrResult(text=" ".join(w.text for w in words), tokens=(), words=words, language="en",
                     language_probability=1.0, avg_logprob=-0.2, no_speech_prob=0.0, temperature=0.0)


def _words(start_s: float, end_s: float, per_s: float) -> list[tuple[float, float]]:
    n = int((end_s - start_s) * per_s)
    step = (end_s - start_s) / n
    return [(start_s + k * step, start_s + (k + 0.8) * step) for k in range(n)]


def test_every_piece_spoken_at_a_speaking_rate_is_heard() -> None:
    plan = _plan(4.0, 3.0, 5.0)
    assert unheard_pieces(plan, _said(*_words(0, 4, 2.5), *_words(4, 7, 2.0), *_words(7, 12, 3.0))) == []


def test_a_piece_no_word_reaches_is_unheard() -> None:
    plan = _plan(4.0, 3.0, 5.0)
    assert unheard_pieces(plan, _said(*_words(0, 4, 2.5), *_words(7, 12, 3.0))) == [1]


def test_a_skipped_piece_under_one_word_stretched_over_it_is_unheard() -> None:
    # Seen: Whisper stopped after the first piece; the aligner laid the next sentence's first words ("On",
    # "the whole,") over two clips of 4 and 2 s that were never transcribed. The 4 s one is caught, and the
    # chunk is then decoded again cut at every join.
    plan = _plan(5.0, 4.0, 2.0, 3.0)
    result = _said(*_words(0, 5, 2.5), (5.1, 8.8), (9.0, 9.5), (9.6, 10.9), *_words(11, 14, 2.5))
    assert unheard_pieces(plan, result) == [1]


def test_a_short_piece_with_one_word_is_heard() -> None:
    plan = _plan(4.0, 0.9, 4.0)  # "No." alone between two sentences
    assert unheard_pieces(plan, _said(*_words(0, 4, 2.5), (4.1, 4.6), *_words(4.9, 8.9, 2.5))) == []


def test_slow_speech_at_one_word_a_second_is_heard() -> None:
    plan = _plan(6.0, 6.0)
    assert unheard_pieces(plan, _said(*_words(0, 6, 1.0), *_words(6, 12, 2.0))) == []


def test_a_piece_of_two_seconds_with_no_word_in_its_middle_is_unheard() -> None:
    plan = _plan(3.0, 2.5, 3.0)
    # one word reaches into the 2.5 s piece from its neighbour, its middle outside: no uncovered 2 s stretch
    result = _said(*_words(0, 2.5, 2.0), (2.6, 3.6), *_words(5.5, 8.5, 2.0))
    assert unheard_pieces(plan, result) == [1]
