"""Turn taking and barge-in on scripted timelines (pure state machine, no models, no clock)."""

from __future__ import annotations

import pytest

from voxserve.agent.turn import (
    Completeness,
    Discard,
    Draft,
    EndOfTurn,
    Interrupt,
    PlaybackDone,
    TurnParams,
    TurnStarted,
    TurnTaker,
    completeness,
    dangling,
)
from voxserve.errors import InvalidInput

MS = 16  # samples per millisecond


def kinds(actions: list[object]) -> list[str]:
    return [type(a).__name__ for a in actions]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What is the wifi password?", Completeness.COMPLETE),
        ("Book it for Tuesday.", Completeness.COMPLETE),
        ("Stop!", Completeness.COMPLETE),
        ("My number is", Completeness.INCOMPLETE),
        ("I want to go to", Completeness.INCOMPLETE),
        ("and then,", Completeness.INCOMPLETE),
        ("Well...", Completeness.INCOMPLETE),
        ("I went there and.", Completeness.INCOMPLETE),
        ("um", Completeness.INCOMPLETE),
        ("", Completeness.INCOMPLETE),
        ("Tuesday at noon", Completeness.OPEN),
        ('He said "yes."', Completeness.COMPLETE),
    ],
)
def test_completeness(text: str, expected: Completeness) -> None:
    assert completeness(text) is expected


def test_dangling_words_are_no_place_to_cut() -> None:
    assert dangling("The office has a") and dangling("The password of") and dangling("It has")
    assert not dangling("The Blue Lagoon office") and not dangling("") and not dangling("seven.")


def test_end_of_turn_after_the_silence_with_a_draft_at_once() -> None:
    t = TurnTaker(TurnParams(silence_ms=500))
    assert kinds(t.speech_started(1000 * MS, 1100 * MS)) == ["TurnStarted"]
    assert t.speech_stopped(3000 * MS, 3200 * MS) == []  # the transcript is not in yet
    actions = t.transcript("What is the wifi password?", 3350 * MS)
    assert actions == [Draft(1, "What is the wifi password?")]  # speculative: the words look finished
    assert t.advance(3499 * MS) == []
    assert t.advance(3500 * MS) == [EndOfTurn(1, "What is the wifi password?", 3000 * MS, 3500 * MS, True)]
    assert t.user == "idle" and t.advance(4000 * MS) == []


def test_mid_sentence_waits_longer_and_drafts_nothing() -> None:
    t = TurnTaker(TurnParams(silence_ms=500, incomplete_silence_ms=1500))
    t.speech_started(0, 100 * MS)
    t.speech_stopped(2000 * MS, 2200 * MS)
    assert t.transcript("My phone number is", 2300 * MS) == []
    assert t.advance(2600 * MS) == [] and t.advance(3499 * MS) == []
    [end] = t.advance(3500 * MS)
    assert isinstance(end, EndOfTurn) and end.text == "My phone number is" and end.decided_at == 3500 * MS


def test_resuming_discards_the_draft_and_joins_the_words() -> None:
    t = TurnTaker(TurnParams(silence_ms=500))
    t.speech_started(0, 100 * MS)
    t.speech_stopped(1000 * MS, 1200 * MS)
    assert kinds(t.transcript("I need a taxi.", 1300 * MS)) == ["Draft"]
    assert t.speech_started(1400 * MS, 1500 * MS) == [Discard(1)]  # the same turn goes on: no TurnStarted
    t.speech_stopped(2500 * MS, 2700 * MS)
    assert t.advance(2900 * MS) == []  # waiting for the second utterance's transcript
    assert kinds(t.transcript("To the airport.", 3100 * MS)) == ["EndOfTurn"]  # 600 ms of silence already


def test_late_transcript_ends_the_turn_when_it_arrives() -> None:
    t = TurnTaker(TurnParams(silence_ms=500))
    t.speech_started(0, 100 * MS)
    t.speech_stopped(1000 * MS, 1200 * MS)
    assert t.advance(2000 * MS) == []  # silence is over, but there are no words yet
    [end] = t.transcript("Hello.", 2100 * MS)
    assert isinstance(end, EndOfTurn) and end.decided_at == 2100 * MS and end.speech_end == 1000 * MS


def test_noise_without_words_ends_quietly() -> None:
    t = TurnTaker()
    t.speech_started(0, 100 * MS)
    t.speech_stopped(300 * MS, 500 * MS)
    assert t.transcript("", 600 * MS) == [EndOfTurn(1, "", 300 * MS, 600 * MS, False)]
    assert t.user == "idle"
    assert kinds(t.speech_started(2000 * MS, 2100 * MS)) == ["TurnStarted"]  # the next speech is a new turn
    assert t.turn == 2


def test_commit_ends_the_turn_once_transcribed() -> None:
    t = TurnTaker(TurnParams(silence_ms=5000))
    t.speech_started(0, 100 * MS)
    assert t.end_turn(900 * MS) == []  # the open utterance is closed; its transcript follows
    [end] = t.transcript("Go.", 1000 * MS)
    assert isinstance(end, EndOfTurn) and end.speech_end == 900 * MS


def test_no_auto_response_still_ends_turns() -> None:
    t = TurnTaker(TurnParams(respond=False))
    t.speech_started(0, 100 * MS)
    t.speech_stopped(1000 * MS, 1200 * MS)
    assert t.transcript("Hello there.", 1300 * MS) == []  # no draft without auto-response
    [end] = t.advance(1500 * MS)
    assert isinstance(end, EndOfTurn) and not end.respond


def test_barge_in_interrupts_with_what_was_played() -> None:
    t = TurnTaker()
    t.reply_started()
    assert t.reply == "pending"
    t.reply_audio(3.0, 10_000 * MS)  # three seconds released at once: playback starts at 10 s
    assert t.played_s(10_800 * MS) == pytest.approx(0.8)
    actions = t.speech_started(10_700 * MS, 10_800 * MS)
    assert actions[0] == Interrupt(10_800 * MS, pytest.approx(0.8))
    assert isinstance(actions[1], TurnStarted) and t.reply == "none"


def test_played_time_never_exceeds_the_audio_released() -> None:
    t = TurnTaker()
    t.reply_started()
    t.reply_audio(0.5, 0)
    [interrupt, _] = t.speech_started(1900 * MS, 2000 * MS)
    assert isinstance(interrupt, Interrupt) and interrupt.played_s == pytest.approx(0.5)


def test_speech_while_the_reply_is_pending_interrupts_it() -> None:
    t = TurnTaker()
    t.reply_started()
    [interrupt, _] = t.speech_started(100 * MS, 200 * MS)
    assert interrupt == Interrupt(200 * MS, 0.0)


def test_no_interruption_when_disabled() -> None:
    t = TurnTaker(TurnParams(interrupt=False))
    t.reply_started()
    t.reply_audio(2.0, 0)
    assert kinds(t.speech_started(500 * MS, 600 * MS)) == ["TurnStarted"]
    assert t.reply == "playing"


def test_playback_done_after_the_last_audio_played() -> None:
    t = TurnTaker()
    t.reply_started()
    t.reply_audio(1.0, 0)
    t.reply_audio(1.0, 200 * MS)
    assert t.reply_generated(500 * MS) == []
    assert t.advance(1999 * MS) == []
    assert t.advance(2000 * MS) == [PlaybackDone(2000 * MS)]
    assert t.reply == "none" and t.speech_started(2100 * MS, 2200 * MS)[0] == TurnStarted(1, 2100 * MS)


def test_an_empty_reply_is_done_at_once() -> None:
    t = TurnTaker()
    t.reply_started()
    assert t.reply_generated(100) == [PlaybackDone(100)]


def test_no_draft_while_a_reply_plays() -> None:
    t = TurnTaker(TurnParams(interrupt=False))
    t.reply_started()
    t.reply_audio(5.0, 0)
    t.speech_started(100 * MS, 200 * MS)
    t.speech_stopped(1000 * MS, 1200 * MS)
    assert t.transcript("Thanks.", 1300 * MS) == []
    assert kinds(t.advance(1500 * MS)) == ["EndOfTurn"]


def test_clear_forgets_the_turn() -> None:
    t = TurnTaker()
    t.speech_started(0, 100 * MS)
    t.speech_stopped(1000 * MS, 1200 * MS)
    t.transcript("Hello there.", 1300 * MS)
    assert t.clear() == [Discard(1)]
    assert t.advance(5000 * MS) == [] and t.user == "idle"


def test_bad_params_and_a_long_base_silence() -> None:
    with pytest.raises(InvalidInput):
        TurnParams(silence_ms=-1)
    t = TurnTaker(TurnParams(silence_ms=2000, incomplete_silence_ms=1500))  # mid-sentence never waits less
    t.speech_started(0, 100 * MS)
    t.speech_stopped(1000 * MS, 1200 * MS)
    assert t.transcript("My number is", 1300 * MS) == [] and t.advance(2999 * MS) == []
    assert kinds(t.advance(3000 * MS)) == ["EndOfTurn"]
