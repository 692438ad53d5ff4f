"""The voice agent cascade: VAD/ASR (a live stream at agent priority) -> turn taking -> LLM -> TTS -> audio.

A session is an object (DESIGN principle 2)::

    session = agent.session(options)
    session.push(samples_16k)           # microphone audio, in real time
    async for event in session: ...     # UserSpeechStarted, UserTurnEnded, ResponseStarted, ResponseAudio, ...

The pure :class:`~voxserve.agent.turn.TurnTaker` decides; this module only carries its actions out: a draft
reply when the user's words look finished, its release at the end of the turn, its cancellation at a barge-in
(within the audio frame that confirmed the speech), and the truncation of what was not heard.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from voxserve.agent.context import KnowledgeBase, Retriever, TextEmbedder
from voxserve.agent.events import (
    AgentError,
    AgentEvent,
    InputCleared,
    ItemAdded,
    ItemTruncated,
    ReplyLatency,
    ResponseAudio,
    ResponseDone,
    UserSpeechStarted,
    UserTurnEnded,
)
from voxserve.agent.llm import LlmClient
from voxserve.agent.options import AgentObserver, AgentOptions
from voxserve.agent.prompt import ChatMessage, Exchange, History, PromptParams, build_messages
from voxserve.agent.reply import Reply, ReplyParts, new_id
from voxserve.agent.turn import (
    Discard,
    Draft,
    EndOfTurn,
    Interrupt,
    TurnAction,
    TurnParams,
    TurnStarted,
    TurnTaker,
)
from voxserve.backends.base import VadModel
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import Recognizer
from voxserve.errors import BackendError, InvalidInput
from voxserve.streaming.live_asr import LiveStream, LiveTranscriber
from voxserve.streaming.live_events import (
    Cleared,
    LiveEvent,
    Partial,
    SpeechStarted,
    SpeechStopped,
    StreamError,
    TranscriptCompleted,
    TranscriptFailed,
)
from voxserve.streaming.tts import SpeakOptions
from voxserve.streaming.tts_service import TtsService
from voxserve.types import SAMPLE_RATE, Priority


@dataclass
class Agent:
    """What every session shares: the recogniser and VAD, the executor, synthesis, the LLM and retrieval."""

    asr: Recognizer
    vad_factory: Callable[[], VadModel]
    executor: BlockingExecutor
    tts: TtsService
    llm: LlmClient
    embedder: TextEmbedder | None = None
    knowledge: KnowledgeBase | None = None
    observer: AgentObserver | None = None

    def session(self, options: AgentOptions | None = None) -> AgentSession:
        """A new conversation (call inside the event loop); default options when None."""
        options = options or AgentOptions()
        options.llm.validate()
        return AgentSession(self, options)

    async def aclose(self) -> None:
        """Release the LLM client."""
        await self.llm.aclose()

    def close(self) -> None:
        """Release the LLM's threads (without a loop)."""
        self.llm.close()


class _ArrivalClock:
    """When each input sample arrived (wall time of the block that carried it)."""

    def __init__(self) -> None:
        self._ends: list[int] = []
        self._walls: list[float] = []

    def add(self, end: int) -> None:
        self._ends.append(end)
        self._walls.append(time.monotonic())
        if len(self._ends) > 4096:
            del self._ends[:2048], self._walls[:2048]

    def wall_at(self, sample: int) -> float:
        i = bisect.bisect_right(self._ends, sample)
        return self._walls[i] if i < len(self._walls) else time.monotonic()


@dataclass
class _VoiceTurn:
    """Timing of the voice turn a reply answers (wall clock)."""

    speech_end: float
    decided: float
    asr_s: float
    speculative: bool


class AgentSession:
    """One conversation: 16 kHz float32 audio and text in, :mod:`voxserve.agent.events` out."""

    def __init__(self, agent: Agent, options: AgentOptions) -> None:
        self.agent = agent
        self.options = options
        self._events: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._turns = TurnTaker(options.turn or TurnParams(respond=False, speculate=False, interrupt=False))
        self._history = History()
        self._replies: dict[str, tuple[Reply, Exchange | None]] = {}  # assistant item -> its reply
        self._retriever = Retriever(agent.embedder, agent.knowledge, options.retrieval) if agent.embedder else None
        self._clock = _ArrivalClock()
        self._position = 0
        self._last_item: str | None = None
        self._user_item: str | None = None
        self._asr_s = 0.0
        self._reply: Reply | None = None
        self._draft: Reply | None = None
        self._unsettled = 0  # committed audio whose transcript has not arrived (manual turns)
        self._settled = asyncio.Event()
        self._settled.set()
        self._input_ended = False
        self._closed = False
        self._background: set[asyncio.Future[Any]] = set()
        self._offset = 0  # where the current live stream's timeline starts on the session's
        self._live = self._open_live()

    # ------------------------------------------------------------------------------------------ input

    def push(self, samples: np.ndarray) -> None:
        """Microphone audio (16 kHz mono float32), in real time."""
        self._live.push(samples)
        self._position += len(samples)
        self._clock.add(self._position)
        self._act(self._turns.advance(self._position))

    def commit(self) -> None:
        """The user's audio turn is over now (``input_audio_buffer.commit``)."""
        self._unsettled += 1
        self._settled.clear()
        self._live.commit()
        self._act(self._turns.end_turn(self._position))

    def clear(self) -> None:
        """Drop the user's uncommitted audio (``input_audio_buffer.clear``)."""
        self._live.clear()
        self._user_item = None
        self._act(self._turns.clear())

    def end_input(self) -> None:
        """No more audio: finish the turn in progress, its reply, then end the event iteration."""
        self._input_ended = True
        self._live.end_input()
        self._act(self._turns.end_turn(self._position))

    def add_text(self, role: Literal["user", "assistant"], text: str, item_id: str | None = None) -> str:
        """Add a text message to the conversation (``conversation.item.create``); returns its item id (the
        client's ``item_id`` when given)."""
        if not text.strip():
            raise InvalidInput("the message has no text", param="item.content")
        if role == "user":
            self._history.add_user(text.strip())
        else:
            self._history.add_assistant(text.strip())
        item = item_id or new_id("item")
        self._emit(ItemAdded(item, self._last_item, role, text.strip()))
        self._last_item = item
        return item

    def respond(self, instructions: str | None = None) -> str:
        """Reply to the conversation now (``response.create``); returns the response id.

        Raises:
            InvalidInput: a response is already in progress.
        """
        if self._reply is not None and not self._reply.finished:
            raise InvalidInput("the conversation already has an active response",
                               code="conversation_already_has_active_response")
        self._discard_draft()
        reply = self._new_reply(None, instructions)  # answers the latest user message once transcribed
        self._commit(reply, None)
        return reply.response_id

    def cancel_response(self) -> None:
        """Stop the reply in progress (``response.cancel``).

        Raises:
            InvalidInput: no response is in progress.
        """
        reply = self._reply
        if reply is None or reply.finished:
            raise InvalidInput("there is no active response to cancel", code="response_cancel_not_active")
        reply.cancel("client_cancelled", self._turns.played_s(self._position))
        self._turns.reply_stopped()

    def truncate(self, item_id: str, audio_end_ms: int) -> None:
        """Cut an assistant item's text to its first ``audio_end_ms`` of audio (``conversation.item.truncate``).

        Raises:
            InvalidInput: unknown item, or a time outside its audio.
        """
        found = self._replies.get(item_id)
        if found is None:
            raise InvalidInput(f"no assistant audio item {item_id!r}", code="item_not_found", param="item_id")
        reply, exchange = found
        if not 0 <= audio_end_ms <= reply.playout.audio_s * 1000 + 1:
            raise InvalidInput(f"audio_end_ms must be between 0 and {int(reply.playout.audio_s * 1000)}",
                               code="invalid_value", param="audio_end_ms")
        if not reply.finished:
            reply.cancel("client_cancelled", audio_end_ms / 1000)
            self._turns.reply_stopped()
        text = reply.playout.heard_text(audio_end_ms / 1000)
        if exchange is not None:
            exchange.assistant = text
        self._emit(ItemTruncated(item_id, audio_end_ms, text))

    def update(self, options: AgentOptions) -> None:
        """New session options; the audio stream restarts when its own options change (pending audio is lost)."""
        options.llm.validate()
        old, self.options = self.options, options
        self._turns.params = options.turn or TurnParams(respond=False, speculate=False, interrupt=False)
        if old.live_options() != options.live_options():  # (the same key terms on both sides)
            stale, self._live = self._live, self._open_live()
            self._keep(stale.aclose())

    async def aclose(self) -> None:
        """Stop everything now (the client left)."""
        self._closed = True
        for reply in (self._reply, self._draft):
            if reply is not None:
                reply.cancel("client_gone")
        await self._live.aclose()
        for task in list(self._background):
            task.cancel()
        self._events.put_nowait(None)

    def __aiter__(self) -> AgentSession:
        return self

    async def __anext__(self) -> AgentEvent:
        event = await self._events.get()
        if event is None:
            self._events.put_nowait(None)
            raise StopAsyncIteration
        return event

    # ------------------------------------------------------------------------------------------ listening

    def _open_live(self) -> LiveStream:
        a = self.agent
        keyterms = a.knowledge.keyterms() if a.knowledge is not None else ()
        self._offset = self._position
        live = LiveTranscriber(a.asr, a.vad_factory, a.executor).stream(self.options.live_options(keyterms))
        self._keep(self._listen(live))
        return live

    async def _listen(self, live: LiveStream) -> None:
        async for event in live:
            if live is self._live:
                self._on_live(event)
        if live is self._live and self._input_ended:
            self._act(self._turns.end_turn(self._position))  # every transcript is in: the last turn is over
            while (reply := self._reply or self._draft) is not None and not reply.finished:
                await reply.wait()
            self._events.put_nowait(None)

    def _on_live(self, ev: LiveEvent) -> None:
        now, offset = self._position, self._offset  # stream samples -> session samples
        if isinstance(ev, SpeechStarted):
            self._act(self._turns.speech_started(offset + ev.start, now))
        elif isinstance(ev, SpeechStopped):
            end = max(0, ev.end - self._live.options.end_padding_ms * SAMPLE_RATE // 1000)
            self._act(self._turns.speech_stopped(offset + end, now))
        elif isinstance(ev, TranscriptCompleted):
            self._asr_s = ev.latency_s
            self._on_transcript(ev.text, offset + ev.end)
        elif isinstance(ev, TranscriptFailed):
            self._emit(AgentError(BackendError(f"transcription failed: {ev.message}")))
            self._on_transcript("", now)
        elif isinstance(ev, Partial):
            self._act(self._turns.transcript(ev.text, now, final=False))
        elif isinstance(ev, StreamError):
            self._emit(AgentError(InvalidInput(ev.message, code=ev.code)))
            if ev.code == "input_audio_buffer_commit_empty":
                self._settle()
        elif isinstance(ev, Cleared):
            self._emit(InputCleared())

    def _on_transcript(self, text: str, end: int) -> None:
        if self.options.turn is None:  # manual turns: each commit is one user message
            if text.strip():
                self._user_turn(new_id("item"), end, text.strip())
        else:
            self._act(self._turns.transcript(text, self._position))
        self._settle()

    def _settle(self) -> None:
        self._unsettled = max(0, self._unsettled - 1)
        if not self._unsettled:
            self._settled.set()

    def _act(self, actions: list[TurnAction]) -> None:
        for action in actions:
            if isinstance(action, TurnStarted):
                self._user_item = new_id("item")
                self._emit(UserSpeechStarted(self._user_item, action.start))
            elif isinstance(action, Draft):
                self._start_draft(action.text)
            elif isinstance(action, EndOfTurn):
                self._end_of_turn(action)
            elif isinstance(action, Interrupt):
                self._interrupt(action)
            elif isinstance(action, Discard):
                self._discard_draft()
            # PlaybackDone needs nothing here

    def _user_turn(self, item: str, end: int, text: str) -> Exchange:
        exchange = self._history.add_user(text)
        self._emit(UserTurnEnded(item, self._last_item, end, text))
        self._last_item = item
        return exchange

    def _end_of_turn(self, action: EndOfTurn) -> None:
        item, self._user_item = self._user_item or new_id("item"), None
        if not action.text:
            self._discard_draft()
            self._emit(UserTurnEnded(item, self._last_item, action.speech_end, ""))
            return
        exchange = self._user_turn(item, action.speech_end, action.text)
        if not action.respond:
            self._discard_draft()
            return
        draft, self._draft = self._draft, None
        speculative = draft is not None and draft.question == exchange.user and draft.can_release
        if draft is not None and not speculative:
            draft.cancel("discarded")
        reply = draft if speculative and draft is not None else self._new_reply(exchange.user)
        turn = _VoiceTurn(self._clock.wall_at(action.speech_end), time.monotonic(), self._asr_s, speculative)
        self._commit(reply, turn)

    # ------------------------------------------------------------------------------------------ replies

    def _new_reply(self, question: str | None, instructions: str | None = None) -> Reply:
        """A started reply to ``question`` (None: the latest unanswered user message when the prompt is built)."""
        o = self.options
        prompt = replace(o.prompt, instructions=instructions) if instructions else o.prompt
        parts = ReplyParts(self.agent.llm, self.agent.tts, o.voice, o.llm, SpeakOptions(priority=Priority.AGENT),
                           o.first_segment_wait_s)
        reply = Reply(parts, lambda: self._prepare(question, prompt), self._on_reply_event, question=question or "")
        reply.start()
        return reply

    def _start_draft(self, text: str) -> None:
        question = self._history.question(text)
        if self._draft is not None and self._draft.question == question:
            return
        self._discard_draft()
        self._draft = self._new_reply(question)

    def _discard_draft(self) -> None:
        draft, self._draft = self._draft, None
        if draft is not None:
            draft.cancel("discarded")

    def _commit(self, reply: Reply, turn: _VoiceTurn | None) -> None:
        previous = self._reply
        self._reply = reply
        reply.previous_item_id = self._last_item
        self._last_item = reply.item_id
        if turn is not None:
            reply.on_first_audio = lambda r: self._first_audio(r, turn)
        if (previous is not None and not previous.finished) or not self._settled.is_set():
            self._keep(self._release_after(previous, reply))  # after the reply playing, or the user's words
            return
        self._turns.reply_started()
        reply.release()

    async def _release_after(self, previous: Reply | None, reply: Reply) -> None:
        if previous is not None:
            await previous.wait()
        await self._settled.wait()
        if reply.can_release:
            self._turns.reply_started()
            reply.release()

    async def _prepare(self, question: str | None, params: PromptParams) -> list[ChatMessage]:
        await self._settled.wait()  # committed audio is transcribed first
        exchanges = list(self._history.exchanges)
        unanswered = exchanges[-1].user if exchanges and not exchanges[-1].assistant else ""
        question = unanswered if question is None else question
        if unanswered and unanswered == question:
            exchanges = exchanges[:-1]
        return await self.agent.executor.run(self._build_prompt, exchanges, question, params)

    def _build_prompt(self, exchanges: list[Exchange], question: str, params: PromptParams) -> list[ChatMessage]:
        """Blocking (token counts, the retrieval embedding): runs in the executor."""
        window = History(exchanges).window(params.history_tokens, self.agent.llm.count_tokens)
        facts: list[str] = []
        if self._retriever is not None and question:
            recall_before = window[0].number if window else len(exchanges)
            previous = exchanges[-1].user if exchanges else ""
            facts = [h.prompt_text for h in self._retriever.search(question, recall_before, previous)]
        return build_messages(params, window, question, facts)

    def _first_audio(self, reply: Reply, turn: _VoiceTurn) -> None:
        t = reply.timing
        latency = ReplyLatency(
            total_s=time.monotonic() - turn.speech_end, end_of_turn_s=turn.decided - turn.speech_end,
            asr_s=turn.asr_s, llm_ttft_s=t.llm_ttft_s, tts_ttfb_s=t.tts_ttfb_s or 0.0, retrieval_s=t.retrieval_s,
            speculative=turn.speculative,
        )
        reply.latency = latency
        if self.agent.observer is not None:
            self.agent.observer.on_reply_latency(latency)

    def _interrupt(self, action: Interrupt) -> None:
        reply = self._reply
        if reply is None:
            return
        if not reply.finished:
            reply.cancel("turn_detected", action.played_s)  # its response.done carries what was heard
        elif action.played_s * 1000 < reply.playout.audio_s * 1000 - 1:  # generated, but still playing
            self.truncate(reply.item_id, int(action.played_s * 1000))
        if self.agent.observer is not None:
            self.agent.observer.on_interruption()

    def _on_reply_event(self, reply: Reply, event: AgentEvent) -> None:
        if isinstance(event, ResponseAudio):
            self._turns.reply_audio(event.chunk.duration_s, self._position)
        elif isinstance(event, ResponseDone):
            self._reply_done(reply, event)
        self._emit(event)

    def _reply_done(self, reply: Reply, done: ResponseDone) -> None:
        if reply is self._reply:
            if done.status == "completed":
                self._act(self._turns.reply_generated(self._position))
            elif done.reason != "turn_detected":
                self._turns.reply_stopped()
        exchange = None
        if done.transcript:
            exchange = self._history.add_assistant(done.transcript, reply.sent)
            if self._retriever is not None:
                self._keep(self.agent.executor.run(self._retriever.remember, exchange.number, exchange.user,
                                                   exchange.assistant))
        self._replies[done.item_id] = (reply, exchange)
        if done.error is not None:
            self._emit(AgentError(done.error))
        if self.agent.observer is not None:
            self.agent.observer.on_response_done(done.status)

    def _emit(self, event: AgentEvent) -> None:
        if not self._closed:
            self._events.put_nowait(event)

    def _keep(self, awaitable: Awaitable[Any]) -> None:
        task: asyncio.Future[Any] = asyncio.ensure_future(awaitable)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
