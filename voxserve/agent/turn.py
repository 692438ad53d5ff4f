"""Turn taking and barge-in as a pure state machine: VAD and ASR events in, actions out; no models, no
asyncio and no clock of its own.

Time is the input stream's sample index (16 kHz). A Realtime client sends its microphone continuously, so the
input stream is the session's clock: VAD events carry their sample and the caller calls :meth:`advance` as
audio arrives. The same clock plays the reply out: audio released at input sample ``p0`` has played
``(now - p0) / rate`` seconds at ``now``, never more than was released.

The user's side: speech cuts into utterances at short pauses (the live stream's VAD); each utterance's final
transcript joins the turn. The turn ends once the silence after the last utterance reaches ``silence_ms``, or
``incomplete_silence_ms`` when the words so far stop mid-sentence ("... and", "my number is,"), so a short
pause does not cut the user off. When the words look complete the machine asks for a *draft* reply at once
(speculative generation: LLM and TTS run during the silence, their audio held back) and drops it if the user
goes on; at the end of turn the draft is released, so the silence hides the reply's latency.

The reply's side: speech that starts while a reply is pending or playing interrupts it at once (barge-in),
with how many seconds of it had played, so the caller cancels generation and truncates the reply's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from voxserve.errors import InvalidInput
from voxserve.text.endings import INCOMPLETE_ENDINGS as _INCOMPLETE_ENDINGS
from voxserve.text.endings import dangling as dangling  # re-exported: the turn's rule, also the stream's
from voxserve.types import SAMPLE_RATE

_WORD = re.compile(r"[\w']+")


class Completeness(Enum):
    """How finished the user's words look."""

    COMPLETE = "complete"  # ends with . ? or !
    OPEN = "open"  # no end punctuation, but no dangling word either
    INCOMPLETE = "incomplete"  # ends with a comma, dash, ellipsis, conjunction, article or preposition


def completeness(text: str) -> Completeness:
    """Whether a transcript ends a sentence, stops mid-sentence, or cannot tell."""
    t = text.strip().rstrip("\"')]\u201d")
    if not t:
        return Completeness.INCOMPLETE
    if t.endswith(("...", "\u2026", ",", ";", ":", "-", "\u2014")):
        return Completeness.INCOMPLETE
    words = _WORD.findall(t.lower())
    if t[-1] in ".?!":
        return Completeness.INCOMPLETE if words and words[-1] in ("and", "or", "but", "so", "the") else Completeness.COMPLETE
    if words and words[-1] in _INCOMPLETE_ENDINGS:
        return Completeness.INCOMPLETE
    return Completeness.OPEN


@dataclass(frozen=True)
class TurnParams:
    """Turn-taking settings (OpenAI ``turn_detection`` names where they exist).

    Attributes:
        silence_ms: silence that ends a turn whose words look finished (``silence_duration_ms``).
        incomplete_silence_ms: silence that ends a turn whose words stop mid-sentence (never less than
            ``silence_ms``).
        respond: reply automatically at the end of a turn (``create_response``).
        interrupt: user speech interrupts a pending or playing reply (``interrupt_response``).
        speculate: draft the reply as soon as the words look finished, before the silence is over.
    """

    silence_ms: int = 500
    incomplete_silence_ms: int = 1500
    respond: bool = True
    interrupt: bool = True
    speculate: bool = True

    def __post_init__(self) -> None:
        if min(self.silence_ms, self.incomplete_silence_ms) < 0:
            raise InvalidInput("turn silences must not be negative", param="turn_detection")


@dataclass(frozen=True)
class TurnStarted:
    """The user began a new turn (speech started while nobody was mid-turn)."""

    turn: int
    start: int


@dataclass(frozen=True)
class Draft:
    """Prepare a reply to ``text`` now; hold its audio until the turn ends."""

    turn: int
    text: str


@dataclass(frozen=True)
class Discard:
    """Drop the draft: the user went on speaking."""

    turn: int


@dataclass(frozen=True)
class EndOfTurn:
    """The user's turn is over. ``speech_end`` is where the speech stopped; ``respond`` whether to reply
    (release the draft when its text is ``text``). An empty ``text`` means the speech held no words."""

    turn: int
    text: str
    speech_end: int
    decided_at: int
    respond: bool


@dataclass(frozen=True)
class Interrupt:
    """Barge-in at ``at``: cancel the reply now; ``played_s`` seconds of its audio had played."""

    at: int
    played_s: float


@dataclass(frozen=True)
class PlaybackDone:
    """The reply's last audio has played."""

    at: int


TurnAction = TurnStarted | Draft | Discard | EndOfTurn | Interrupt | PlaybackDone


class TurnTaker:
    """The turn-taking state of one conversation (see the module docstring)."""

    def __init__(self, params: TurnParams = TurnParams(), sample_rate: int = SAMPLE_RATE) -> None:
        self.params = params
        self.rate = sample_rate
        self.turn = 0
        self.user = "idle"  # idle | speaking | paused
        self.reply = "none"  # none | pending (committed, no audio yet) | playing
        self._texts: list[str] = []
        self._partial = ""
        self._pending = 0  # utterances whose transcript has not arrived
        self._silence_from = 0
        self._draft: str | None = None
        self._ending = False
        self._playout_start: int | None = None
        self._released_s = 0.0
        self._generated = False

    # ------------------------------------------------------------------------------------------ user

    @property
    def text(self) -> str:
        """The words of the current turn so far (final transcripts, then the latest partial)."""
        return " ".join([*self._texts, self._partial]).strip()

    def speech_started(self, start: int, now: int) -> list[TurnAction]:
        """VAD: speech began at ``start`` (confirmed at ``now``)."""
        actions: list[TurnAction] = []
        if self.reply != "none" and self.params.interrupt:
            actions.append(Interrupt(now, self.played_s(now)))
            self._reset_reply()
        if self.user == "idle":
            self.turn += 1
            self._texts, self._partial, self._pending, self._ending = [], "", 0, False
            actions.append(TurnStarted(self.turn, start))
        elif self._draft is not None:
            self._draft = None
            actions.append(Discard(self.turn))
        self.user = "speaking"
        return actions

    def speech_stopped(self, end: int, now: int) -> list[TurnAction]:
        """VAD: the utterance's speech stopped at ``end``; its transcript will follow."""
        if self.user != "speaking":
            return []
        self.user = "paused"
        self._silence_from = end
        self._pending += 1
        return self._check(now)

    def transcript(self, text: str, now: int, *, final: bool = True) -> list[TurnAction]:
        """ASR: an utterance's final text, or (``final=False``) a partial hypothesis of the open one."""
        if self.user == "idle":
            return []
        if not final:
            self._partial = text.strip()
            return []
        self._pending = max(0, self._pending - 1)
        self._partial = ""
        if text.strip():
            self._texts.append(text.strip())
        return self._check(now)

    def advance(self, now: int) -> list[TurnAction]:
        """The input clock reached ``now`` (call as audio arrives)."""
        actions = self._check(now)
        if self.reply == "playing" and self._generated and self.played_s(now) >= self._released_s:
            self._reset_reply()
            actions.append(PlaybackDone(now))
        return actions

    def end_turn(self, now: int) -> list[TurnAction]:
        """The turn is over whatever the silence (a manual commit, or no more audio will come): it ends as soon
        as its transcripts are in."""
        self._ending = True
        if self.user == "speaking":  # the stream closes the open utterance; its transcript follows
            self.user = "paused"
            self._silence_from = now
            self._pending += 1
        return self._check(now)

    def clear(self) -> list[TurnAction]:
        """Forget the current turn (``input_audio_buffer.clear``)."""
        actions: list[TurnAction] = [Discard(self.turn)] if self._draft is not None else []
        self.user, self._texts, self._partial, self._pending, self._draft = "idle", [], "", 0, None
        return actions

    def _check(self, now: int) -> list[TurnAction]:
        if self.user != "paused" or self._pending:
            return []
        text = self.text
        if not text:
            self.user = "idle"
            actions: list[TurnAction] = [Discard(self.turn)] if self._draft is not None else []
            self._draft = None
            return [*actions, EndOfTurn(self.turn, "", self._silence_from, now, False)]
        kind = completeness(text)
        wait = self.params.silence_ms
        if kind is Completeness.INCOMPLETE:
            wait = max(wait, self.params.incomplete_silence_ms)
        if self._ending or now - self._silence_from >= wait * self.rate // 1000:
            self.user = "idle"
            self._draft = None
            return [EndOfTurn(self.turn, text, self._silence_from, now, self.params.respond)]
        p = self.params
        if p.speculate and p.respond and kind is Completeness.COMPLETE and self.reply == "none" and self._draft != text:
            self._draft = text
            return [Draft(self.turn, text)]
        return []

    # ------------------------------------------------------------------------------------------ reply

    def reply_started(self) -> None:
        """A reply was committed (at an end of turn, or by the client's ``response.create``)."""
        self._reset_reply()
        self.reply = "pending"

    def reply_audio(self, seconds: float, now: int) -> None:
        """``seconds`` more of the reply's audio went to the client at ``now``."""
        if self.reply == "none":
            return
        if self._playout_start is None:
            self._playout_start = now
        self.reply = "playing"
        self._released_s += seconds

    def reply_generated(self, now: int) -> list[TurnAction]:
        """The reply will produce no more audio."""
        if self.reply == "none":
            return []
        self._generated = True
        if self.reply == "pending":  # nothing was said
            self._reset_reply()
            return [PlaybackDone(now)]
        return self.advance(now)

    def reply_stopped(self) -> None:
        """The reply was cancelled or failed for another reason than barge-in."""
        self._reset_reply()

    def played_s(self, now: int) -> float:
        """Seconds of the reply's audio played by ``now``."""
        if self._playout_start is None:
            return 0.0
        return max(0.0, min(self._released_s, (now - self._playout_start) / self.rate))

    def _reset_reply(self) -> None:
        self.reply = "none"
        self._playout_start = None
        self._released_s = 0.0
        self._generated = False
