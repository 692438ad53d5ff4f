"""Which joined pieces of a packed chunk the decoder skipped, judged from the words it said and their times."""

from __future__ import annotations

from voxserve.backends.base import AsrResult, TimedWord
from voxserve.pipelines.chunking import ChunkPlan, Piece
from voxserve.pipelines.long_asr import thin_pieces, unheard_pieces

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


def test_a_short_piece_with_one_word_is_heard() -> None:
    plan = _plan(4.0, 0.9, 4.0)  # "No." alone between two sentences
    assert unheard_pieces(plan, _said(*_words(0, 4, 2.5), (4.1, 4.6), *_words(4.9, 8.9, 2.5))) == []


def test_slow_speech_at_one_word_a_second_is_heard() -> None:
    plan = _plan(6.0, 6.0)
    assert unheard_pieces(plan, _said(*_words(0, 6, 1.0), *_words(6, 12, 2.0))) == []


def test_a_piece_of_fillers_the_model_leaves_out_is_heard() -> None:
    # "but um ... but um": Whisper writes fillers as nothing. Judging pieces by words per second called such a
    # piece unheard and re-decoded mfa_crossword in pieces, losing its key-term spelling; it is not a rule.
    plan = _plan(3.0, 2.6, 3.0)
    assert unheard_pieces(plan, _said(*_words(0, 3, 2.5), (4.0, 4.3), *_words(5.6, 8.6, 2.5))) == []


def test_words_stretched_over_a_skipped_piece_cover_nothing() -> None:
    # "you know, Montreal forced aligner. Unless a system ..." came back "Unless a system ...": the aligner laid
    # "Unless" and "a" over the skipped speech, 1.5 s each, so no stretch of it was left without a word.
    plan = _plan(1.0, 1.5, 2.7, 6.4)
    said = _said((1.5, 3.0), (3.0, 4.5), *_words(5.9, 11.6, 2.5))
    assert unheard_pieces(plan, said) == [2]
    slow = _said((1.5, 2.8), (2.8, 4.1), *_words(4.1, 11.6, 2.5))  # a slow reader's long words still count
    assert unheard_pieces(plan, slow) == []


def test_a_piece_with_a_word_or_two_spread_over_it_is_thin() -> None:
    # A skipped clip that came back as "On" and "the whole," (1.1 s each, 1-1.5 s apart): every stretch of it
    # lies within 2 s of a word, but its 5 s of speech hold three words.
    plan = _plan(4.0, 2.2, 2.9, 4.0)
    said = _said(*_words(0, 4, 2.5), (4.6, 5.7), (7.2, 7.3), (7.3, 8.4), *_words(9.1, 13.1, 2.5))
    assert unheard_pieces(plan, said) == []
    assert thin_pieces(plan, said) == [1, 2]


def test_slow_speech_fillers_and_short_pieces_are_not_thin() -> None:
    plan = _plan(6.0, 4.1, 1.9, 4.0)  # a slow reader; "Montreal forced um ... um"; "1813." alone
    said = _said(*_words(0, 6, 1.0), *_words(6, 10.1, 1.0), (10.3, 11.4), *_words(12.0, 16.0, 2.5))
    assert thin_pieces(plan, said) == []
    assert thin_pieces(plan, said, min_words_per_s=1.5) == [0, 1]  # the floor is the caller's
