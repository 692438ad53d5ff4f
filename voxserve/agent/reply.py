"""One assistant reply: prompt -> LLM pieces -> synthesis stream (first audio after the first clause) -> audio.

The pieces go into a :class:`~voxserve.streaming.tts.TtsStream` exactly as the speech WebSocket's
``text.append`` deltas do (one path from text deltas to audio: segmentation, the first-segment wait, synthesis).

A reply may start as a *draft* before the user's turn is known to be over: it generates and synthesizes, but
its events stay inside until :meth:`Reply.release`; a discarded draft was never visible. Once released, its
events go out as they happen. :meth:`Reply.cancel` stops the LLM and the synthesis at once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace

from voxserve.agent.events import (
    AgentEvent,
    ReplyLatency,
    ResponseAudio,
    ResponseDone,
    ResponseStarted,
    ResponseStatus,
)
from voxserve.agent.llm import LlmClient, LlmOptions, LlmUnavailable
from voxserve.agent.playout import PlayoutLog
from voxserve.agent.prompt import ChatMessage
from voxserve.errors import BackendError, VoxserveError
from voxserve.streaming.tts import SpeakOptions, TtsStream
from voxserve.streaming.tts_service import TtsService
from voxserve.types import Priority, SynthesisChunk

log = logging.getLogger(__name__)
_MARKUP = re.compile(r"[*#_`~|<>\[\]]+")
_ids = itertools.count(1)


def strip_markup(piece: str) -> str:
    """An LLM piece without markdown and markup characters (``*``, ``#``, backticks, brackets), which a
    listener should not hear."""
    return _MARKUP.sub("", piece)


def new_id(prefix: str) -> str:
    """A unique id in OpenAI's style (``resp_...``, ``item_...``)."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}{next(_ids):04d}"


@dataclass(frozen=True)
class ReplyParts:
    """What every reply of a session uses."""

    llm: LlmClient
    tts: TtsService
    voice: str | None = None
    llm_options: LlmOptions = LlmOptions()
    speak_options: SpeakOptions = SpeakOptions(priority=Priority.AGENT)
    first_segment_wait_s: float = 0.15
    """When the LLM has not finished a first clause this long after its first words, the text so far (at
    least three words, cut at a word end, not after "a", "of", "has" ...) is synthesized at once: a slow LLM
    then costs a prosody break instead of the listener's wait (the stream's
    :attr:`~voxserve.streaming.tts.SpeakOptions.first_segment_wait_s`, as on the speech WebSocket). Negative
    turns it off."""

    @property
    def stream_options(self) -> SpeakOptions:
        """The options of each reply's synthesis stream."""
        wait = self.first_segment_wait_s
        return replace(self.speak_options, first_segment_wait_s=wait if wait >= 0 else None)


@dataclass
class ReplyTiming:
    """When each step of the reply happened (``time.monotonic()``; None until it did)."""

    started: float
    prompt_ready: float | None = None
    first_token: float | None = None
    first_audio: float | None = None
    released: float | None = None
    tts_ttfb_s: float | None = None

    @property
    def retrieval_s(self) -> float:
        """Start -> prompt ready (retrieval embedding, history window)."""
        return _delta(self.started, self.prompt_ready)

    @property
    def llm_ttft_s(self) -> float:
        """Prompt ready -> first LLM piece."""
        return _delta(self.prompt_ready, self.first_token)


def _delta(a: float | None, b: float | None) -> float:
    return b - a if a is not None and b is not None else 0.0


class Reply:
    """One response of the assistant (create with a started event loop; call :meth:`start`)."""

    def __init__(
        self,
        parts: ReplyParts,
        prepare: Callable[[], Awaitable[list[ChatMessage]]],
        emit: Callable[[Reply, AgentEvent], None],
        *,
        question: str = "",
        previous_item_id: str | None = None,
    ) -> None:
        self.parts = parts
        self.question = question
        self.response_id = new_id("resp")
        self.item_id = new_id("item")
        self.previous_item_id = previous_item_id
        self.timing = ReplyTiming(time.monotonic())
        self.playout = PlayoutLog()
        self.messages: list[ChatMessage] = []  # the prompt, once prepared
        self.on_first_audio: Callable[[Reply], None] | None = None
        self.latency: ReplyLatency | None = None  # set by the session when the first audio goes out
        self._prepare = prepare
        self._emit_out = emit
        self._held: list[AgentEvent] = []
        self._released = False
        self._finished = False
        self._last_span: tuple[int, int] | None = None
        self._tts: TtsStream | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def text(self) -> str:
        """Everything the LLM said so far (what the synthesizer was given)."""
        return self.playout.text

    @property
    def released(self) -> bool:
        """Whether its events go out."""
        return self._released

    @property
    def can_release(self) -> bool:
        """Whether :meth:`release` would make something audible (not released, not a discarded draft)."""
        return not self._released and not (self._finished and not self._held)

    @property
    def finished(self) -> bool:
        """Whether it ended (completed, cancelled or failed)."""
        return self._finished

    def start(self) -> None:
        """Begin generating."""
        self._task = asyncio.ensure_future(self._run())

    async def wait(self) -> None:
        """Until the reply has ended."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def release(self) -> None:
        """Let the reply be heard: ``ResponseStarted``, then everything held, then live events."""
        if not self.can_release:
            return
        self._released = True
        self.timing.released = time.monotonic()
        self._emit_out(self, ResponseStarted(self.response_id, self.item_id, self.previous_item_id))
        held, self._held = self._held, []
        for event in held:
            self._deliver(event)

    def cancel(self, reason: str, played_s: float | None = None) -> ResponseDone | None:
        """Stop generation and synthesis now. Returns the ``ResponseDone`` (status cancelled, transcript cut
        to ``played_s`` seconds of audio when given) that was emitted, or None for a draft nobody heard."""
        if self._finished:
            return None
        if self._tts is not None:
            self._tts.cancel()
        if self._task is not None:
            self._task.cancel()
        heard = self.playout.heard_text(played_s) if played_s is not None else self.text.strip()
        if not self._released:
            self._finished = True
            self._held.clear()
            return None
        return self._finish("cancelled", heard, reason=reason)

    # ------------------------------------------------------------------------------------------ running

    async def _run(self) -> None:
        try:
            messages = self.messages = await self._prepare()
            self.timing.prompt_ready = time.monotonic()
            self._tts = self.parts.tts.stream(self.parts.voice, self.parts.stream_options)
            generator = asyncio.ensure_future(self._generate(messages, self._tts))
            try:
                async for chunk in self._tts:
                    self._on_chunk(chunk)
                await generator
            finally:
                generator.cancel()
                await asyncio.gather(generator, return_exceptions=True)
                await self._tts.aclose()
            if not self.text.strip():
                raise LlmUnavailable("the LLM returned an empty reply")
            self._finish("completed", self.text.strip())
        except asyncio.CancelledError:
            return
        except VoxserveError as exc:
            self._finish("failed", self.text.strip(), error=exc)
        except Exception as exc:  # noqa: BLE001 - one failing reply must not end the session
            log.exception("reply failed")
            self._finish("failed", self.text.strip(), error=BackendError(f"reply failed: {type(exc).__name__}"))

    @property
    def sent(self) -> str:
        """The user message of the prompt (with its facts), once prepared."""
        return self.messages[-1].content if self.messages and self.messages[-1].role == "user" else ""

    async def _generate(self, messages: list[ChatMessage], tts: TtsStream) -> None:
        try:
            async with aclosing(self.parts.llm.stream(messages, self.parts.llm_options)) as pieces:
                async for piece in pieces:
                    if self.timing.first_token is None:
                        self.timing.first_token = time.monotonic()
                    clean = strip_markup(piece)
                    if not self.text and not clean.strip():
                        continue
                    if clean:
                        self.playout.text += clean
                        tts.push_text(clean)
        finally:
            tts.end_input()

    def _on_chunk(self, chunk: SynthesisChunk) -> None:
        if self.timing.first_audio is None:
            self.timing.first_audio = time.monotonic()
            assert self._tts is not None
            self.timing.tts_ttfb_s = self._tts.stats.ttfb_s
        span = (chunk.text_start, chunk.text_end)
        delta = ""
        if span != self._last_span:
            delta = chunk.text if self._last_span is None else " " + chunk.text
            self._last_span = span
        self.playout.add(chunk.duration_s, chunk.text_start, chunk.text_end)
        self._deliver(ResponseAudio(self.response_id, self.item_id, chunk, delta))

    def _finish(self, status: ResponseStatus, transcript: str, *, reason: str | None = None,
                error: VoxserveError | None = None) -> ResponseDone | None:
        if self._finished:
            return None
        self._finished = True
        done = ResponseDone(self.response_id, self.item_id, status, transcript, self.playout.audio_s, reason,
                            None, error)
        self._deliver(done)
        return done

    def _deliver(self, event: AgentEvent) -> None:
        if not self._released:
            self._held.append(event)
            return
        if isinstance(event, ResponseAudio) and self.on_first_audio is not None:
            callback, self.on_first_audio = self.on_first_audio, None
            callback(self)
        if isinstance(event, ResponseDone):
            event = replace(event, latency=self.latency)
        self._emit_out(self, event)
