"""Live transcription of one audio stream: VAD cuts utterances; each is recognised in order, with the
previous utterance's text as the prompt, through the engine's shared batcher at live priority.

A stream is an object: ``s = live.stream(options); s.push(samples); s.commit(); s.end_input()`` and
``async for event in s``. Transports only push audio in and forward events out.

Partial hypotheses are decoded while speech continues (every ``partial_interval_ms`` of new audio, never
more than one at a time per stream, and never ahead of a pending final). The words two consecutive
partial hypotheses agree on are emitted as append-only deltas; the final transcript of each utterance is
authoritative.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

import numpy as np

from voxserve.audio.ring_buffer import RingBuffer
from voxserve.backends.base import AsrRequest, AsrResult, DecodeOptions, VadModel
from voxserve.backends.vad.pool import VadPool
from voxserve.config import GuardSettings, LiveConfig
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import Recognizer
from voxserve.errors import InvalidInput, Overloaded, VoxserveError
from voxserve.languages import NO_SPACE_LANGUAGES
from voxserve.pipelines.guard import (
    GuardConfig,
    LoopEvidence,
    Verdict,
    any_repeat,
    assess,
    ends_in_repeat,
    is_repetitive,
    timed_repeat_reasons,
    token_cap,
    without_repeats,
)
from voxserve.pipelines.known_speakers import MIN_REFERENCE_SPEECH_S, KnownSpeaker
from voxserve.pipelines.vad import VadParams, VadStateMachine
from voxserve.streaming.live_events import (
    Cleared,
    Committed,
    LiveEvent,
    Partial,
    SpeechStarted,
    SpeechStopped,
    StreamError,
    TranscriptCompleted,
    TranscriptDelta,
    TranscriptFailed,
)
from voxserve.streaming.live_speakers import KnownVoices, OnlineSpeakers
from voxserve.text.keyterms import copies_glossary, glossary_prompt
from voxserve.types import SAMPLE_RATE, Priority, TokenLogprob

log = logging.getLogger(__name__)
_item_ids = itertools.count(1)


_LIVE = LiveConfig.model_fields
"""Defaults a stream shares with the ``live`` settings are written once, there."""


@dataclass(frozen=True)
class LiveOptions:
    """Per-stream options.

    Attributes:
        vad: server-side turn detection, or None for manual commits only.
        prefix_padding_ms: audio kept before detected speech.
        end_padding_ms: audio kept after the end of speech.
        decode: recognition options (language, prompt, fitted window step).
        partial_interval_ms: new audio between partial hypotheses (0 = no partials).
        max_utterance_s: speech longer than this is cut into several items.
        max_prompt_chars: how much previous text conditions the next utterance.
        prompt_gap_s: the previous utterance's text conditions the next one only when the pause between
            them is shorter than this (a sentence the VAD cut in two); after a longer pause a new utterance
            is decoded on its own audio (and the key terms), so nothing of one utterance leaks into the next.
        follow_on_s: a decode is heard after the speech it continues, that speech's text as the decoder's
            prefix (the result holds only the new words), when both fit an encoder window at most this much
            longer than the one the new audio alone gets (None = never): an utterance after the last decoded
            part of a trusted previous one (within ``follow_on_gap_s``), and the speech after a piece after that
            piece. A sentence's second half, a short answer or the next number of a count is heard with the
            speech before it, as in a long file. A result that fails the guard, says nothing, repeats the prefix
            or ends in a repeat is decoded again on its own (without the previous text as its prompt when the
            decoder read that text again). One window step (5 s) was chosen on the tune half (8 streams: 19 of
            53 utterances joined, WER 11.3 -> 10.6 %; allowing any window joined 23 for the same WER; 0 s, no
            extra encoder work, joined almost none).
        follow_on_gap_s: the previous utterance is continued by one that starts at most this long after it
            ended (its text is not the prompt then, only the prefix of the joined decode, so nothing of it
            can be copied into the new text). Tune half, one stream, 8 x 120 s programs: 2 s (the prompt's
            gap) gave live WER 5.08 %, 8 s with pieces continued too 4.46 %, the programs' WER as files 4.46 %.
        joined_pause_s: a longer pause between the previous utterance and the new one is shortened to this
            in the joined audio (its first and last halves kept), as a long file packs speech.
        keyterms: words recognition should favour (names, jargon): a glossary always at the start of the
            prompt (:func:`~voxserve.text.keyterms.glossary_prompt`), before the previous text (which fills the
            rest of ``max_prompt_chars``); a result that only says the glossary is decoded again without it.
        max_pending_s: audio accepted but not yet processed (scored by the VAD, or cut into utterances still
            waiting for their final transcript) before the client is told to slow down.
        retry_windows: what a final transcript that fails the guard is decoded again with: fitted windows
            in coarser steps, then the standard 30 s window (Whisper loops far less in longer windows; a
            result that failed only as unsure or thin, ``_UNSURE``, skips that last one).
        priority: the scheduling class of final transcripts (``AGENT`` for a voice agent's turns; partial
            hypotheses always run at ``PARTIAL``).
        logprobs: final transcripts carry their tokens' log-probabilities (the final decode is aligned, as
            for word timing: about 65 ms more per utterance on a CPU core).
        speculate_ms: a pause inside speech this long starts the utterance's final decode at once, on the
            audio up to the pause; when the pause turns out to end the utterance (``vad.min_silence_ms``
            later) the final is ready or nearly so, and when speech resumes the draft is dropped. A draft runs
            at the finals' priority, ahead of every queued preview, also when the engine is busy: held back
            then, 8 streams' finals waited the whole decode after speech stopped (0 = off).
        piece_s: at such a pause, once this much speech has come since the utterance's start (or its last
            piece), the speech up to the pause is decoded as a piece of the final and kept whatever follows:
            the final then decodes only the speech after the last piece, so its cost stays that of a short
            utterance however long the speaker goes on. Unlike drafts, pieces start only while the engine
            is not busy (nor does a draft start in their place): under load (16 streams on 2 cores, check
            half) they raised WER from 20.4 % to 27.5 % and did not shorten finals. 0 = off.
    """

    vad: VadParams | None = field(default_factory=lambda: VadParams(min_speech_ms=_LIVE["min_speech_ms"].default,
                                                                    min_silence_ms=500))
    prefix_padding_ms: int = 300
    end_padding_ms: int = 150
    decode: DecodeOptions = field(default_factory=lambda: DecodeOptions(
        window="fit", fit_step_s=_LIVE["fit_step_s"].default, word_timestamps=False))
    partial_interval_ms: int = _LIVE["partial_interval_ms"].default
    max_utterance_s: float = 28.0
    max_prompt_chars: int = 224
    prompt_gap_s: float = 2.0
    follow_on_s: float | None = _LIVE["follow_on_s"].default
    follow_on_gap_s: float = _LIVE["follow_on_gap_s"].default
    joined_pause_s: float = 1.0
    keyterms: tuple[str, ...] = ()
    max_pending_s: float = 30.0
    retry_windows: tuple[tuple[str, float], ...] = (("fit", 10.0), ("full", 30.0))
    guard: GuardConfig = field(default_factory=GuardConfig)
    speakers: bool = False
    speaker_similarity: float = _LIVE["speaker_similarity"].default
    speaker_min_s: float = 2.0
    known_speakers: tuple[KnownSpeaker, ...] = ()
    """Enrolled voices (all from one embedder): an utterance of at least ``naming_min_s`` whose embedding by
    that embedder reaches ``naming_threshold`` with one of them carries its name instead of a letter."""
    naming_threshold: float | None = None
    """The cosine similarity a name needs (None = the embedder's measured one; the facade fills it in)."""
    naming_min_s: float = MIN_REFERENCE_SPEECH_S
    """Shorter utterances are never named (as a reference needs this much speech)."""
    priority: Priority = Priority.LIVE
    logprobs: bool = False
    speculate_ms: int = _LIVE["speculate_ms"].default
    piece_s: float = _LIVE["piece_s"].default

    @classmethod
    def from_settings(cls, live: LiveConfig, guard: GuardSettings) -> LiveOptions:
        """A stream's options as the ``live`` and ``guard`` settings configure them (the other fields are the
        stream protocol's own defaults); ``tests/unit/test_settings_defaults.py`` checks both agree."""
        base = cls()
        return replace(
            base,
            vad=replace(base.vad, min_speech_ms=live.min_speech_ms) if base.vad is not None else None,
            decode=replace(base.decode, fit_step_s=live.fit_step_s),
            partial_interval_ms=live.partial_interval_ms,
            speaker_similarity=live.speaker_similarity,
            speculate_ms=live.speculate_ms,
            piece_s=live.piece_s,
            follow_on_s=live.follow_on_s if live.follow_on_s >= 0 else None,
            follow_on_gap_s=live.follow_on_gap_s,
            guard=GuardConfig.from_settings(guard),
        )


SpeakerEmbedder = Callable[[np.ndarray], Awaitable[np.ndarray]]
"""Turns an utterance's audio into a speaker embedding (through the engine's batcher)."""


@runtime_checkable
class StreamRouting(Protocol):
    """A recogniser spread over replicas that pins each stream to one of them (so its utterances run in
    order on one replica), e.g. :class:`~voxserve.distributed.router.RayRecognizer`."""

    def for_stream(self, key: str) -> Recognizer:
        """The recogniser one stream uses for all its requests."""
        ...


class LiveTranscriber:
    """Makes live streams that share one speech recogniser (and its batcher) with everything else."""

    def __init__(
        self,
        asr: Recognizer,
        vad_factory: Callable[[], VadModel] | VadPool,
        executor: BlockingExecutor,
        speaker_embedder: SpeakerEmbedder | None = None,
        naming_embedder: SpeakerEmbedder | None = None,
    ) -> None:
        """``vad_factory``: makes a stream's VAD (called in the executor); a :class:`VadPool` also takes back
        the VADs of ended streams. ``naming_embedder``: the embedder of the streams' known speakers, when it is
        not ``speaker_embedder`` (then each utterance worth naming is embedded by both)."""
        self.asr = asr
        self.vad_factory = vad_factory
        self.executor = executor
        self.speaker_embedder = speaker_embedder
        self.naming_embedder = naming_embedder

    def stream(self, options: LiveOptions = LiveOptions(), stream_id: str | None = None) -> LiveStream:
        """A new stream (call inside the event loop). When the recogniser routes streams to replicas
        (:class:`StreamRouting`), the stream is pinned by ``stream_id`` (default: a random one)."""
        self.asr.check_options(options.decode)
        asr = self.asr.for_stream(stream_id or uuid.uuid4().hex) if isinstance(self.asr, StreamRouting) else self.asr
        return LiveStream(self, options, asr)


_DETECT_MIN_S = 3.0
"""Utterances shorter than this are decoded in the stream's language (when no language was set): Whisper told
an English "Um..." of 1.2 s as Arabic and a "Thanks!" as Japanese."""
_DETECT_MIN_P = 0.7
"""A detection this sure, on an utterance of at least ``_DETECT_MIN_S``, sets the stream's language."""


@dataclass
class _Utterance:
    item_id: str
    start: int
    probs: list[float] = field(default_factory=list)
    speech_ends: list[int] = field(default_factory=list)  # where each frame the VAD called speech ends
    emitted: str = ""
    last_partial: str = ""
    partial_at: int = 0
    draft: _Draft | None = None
    pieces: list[_Draft] = field(default_factory=list)
    prior: asyncio.Future[None] | None = None  # the previous utterance's final (its text may be our context)
    completion: asyncio.Future[None] | None = None  # set when this utterance's final is out

    @property
    def cut(self) -> int:
        """Where the speech not yet in a piece starts."""
        return self.pieces[-1].end if self.pieces else self.start

    def drop_draft(self) -> None:
        """Cancel the draft: it decodes other audio than this utterance's final."""
        if self.draft is not None:
            self.draft.task.cancel()
            self.draft = None

    def cancel(self) -> None:
        """Cancel every decode of this utterance (its audio was cleared)."""
        self.drop_draft()
        for piece in self.pieces:
            piece.task.cancel()


@dataclass
class _Draft:
    """A final decode started at a pause, on the audio up to ``end`` (the pause's start plus end padding): a
    speculative draft of the whole rest of the utterance, or a piece kept whatever follows."""

    end: int
    task: asyncio.Task[tuple[str, bool, tuple[TokenLogprob, ...]]]


class LiveStream:
    """One live audio stream (16 kHz mono float32 in, :mod:`live_events` out)."""

    def __init__(self, owner: LiveTranscriber, options: LiveOptions, asr: Recognizer | None = None) -> None:
        self._owner = owner
        self._asr = asr or owner.asr
        self.options = options
        self._vad: VadModel | None = None  # loaded off the event loop when scanning starts (see _scan)
        self._scoring = False  # the VAD is scoring in the executor (an interrupted call may still run on it)
        self._machine = VadStateMachine(options.vad) if options.vad else None
        self._frame = 512  # the VAD's frame, once it is loaded
        ring_s = options.max_utterance_s + options.prefix_padding_ms / 1000 + 10
        self._ring = RingBuffer(int(ring_s * SAMPLE_RATE))
        self._inbox: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        self._events: asyncio.Queue[LiveEvent | None] = asyncio.Queue()
        self._finals: asyncio.Queue[tuple[_Utterance, np.ndarray, int, float] | None] = asyncio.Queue()
        self._finalizing = False  # a final is being recognised (drafts wait: it may change the context)
        self._drafts: set[asyncio.Task[tuple[str, bool, tuple[TokenLogprob, ...]]]] = set()
        self._pending_samples = 0
        self._backlog_samples = 0  # audio of utterances waiting for (or in) final recognition
        self._tail = np.zeros(0, np.float32)
        self._position = 0  # samples scored by the VAD
        self._utterance: _Utterance | None = None
        self._manual_start = 0
        self._previous_item: str | None = None
        self._prompt = options.decode.prompt or ""  # the client's prompt; always kept
        self._previous_text = ""  # the last utterance's accepted text, empty after a failed or empty one
        self._previous_end = -1  # where that utterance ended (samples)
        self._previous_tail: tuple[np.ndarray, str] | None = None  # its last decoded part's audio and trusted text
        self._language: str | None = None  # the stream's language, once a long enough utterance showed it
        self._last_completion: asyncio.Future[None] | None = None  # the last ended utterance's final
        self._partial_task: asyncio.Task[None] | None = None
        self._closed = False
        self._ended = False
        self._speakers = OnlineSpeakers(options.speaker_similarity) if options.speakers else None
        self._names = _known_voices(options) if options.speakers else None
        self._tasks = [asyncio.ensure_future(self._scan()), asyncio.ensure_future(self._finalize())]

    @property
    def pending_s(self) -> float:
        """Seconds of audio pushed but not yet processed: unscored, or in utterances awaiting their final
        transcript (how far the stream is behind real time)."""
        return (self._pending_samples + self._backlog_samples) / SAMPLE_RATE

    # --------------------------------------------------------------------------------- producer API

    def push(self, samples: np.ndarray) -> None:
        """Add audio (16 kHz mono float32). Raises Overloaded when the stream is far behind."""
        if self._closed or self._ended:
            raise InvalidInput("the stream is closed")
        if self._pending_samples + self._backlog_samples > self.options.max_pending_s * SAMPLE_RATE:
            raise Overloaded("audio is arriving faster than it can be processed", retry_after_s=1.0)
        block = np.asarray(samples, dtype=np.float32).reshape(-1)
        self._pending_samples += len(block)
        self._inbox.put_nowait(("audio", block))

    def commit(self, event_id: str | None = None) -> None:
        """End the current utterance now (manual turn taking); ``event_id`` is echoed if it fails."""
        self._inbox.put_nowait(("commit", event_id))

    def clear(self) -> None:
        """Drop audio not yet committed."""
        self._inbox.put_nowait(("clear", None))

    def end_input(self) -> None:
        """No more audio: finish open speech, then end the event iteration."""
        self._ended = True
        self._inbox.put_nowait(("end", None))

    async def aclose(self) -> None:
        """Stop everything at once (client gone)."""
        self._closed = True
        for task in [*self._tasks, self._partial_task, *self._drafts]:
            if task is not None:
                task.cancel()
        await asyncio.gather(*[t for t in self._tasks if t], return_exceptions=True)
        self._events.put_nowait(None)

    def __aiter__(self) -> AsyncIterator[LiveEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[LiveEvent]:
        while True:
            event = await self._events.get()
            if event is None:
                return
            yield event

    def _emit(self, event: LiveEvent) -> None:
        self._events.put_nowait(event)

    # ------------------------------------------------------------------------------- scanning (VAD)

    async def _scan(self) -> None:
        try:
            if self.options.vad:  # loading may take a model's load time: not inside the event loop
                self._vad = await self._owner.executor.run(self._owner.vad_factory)
                self._frame = self._vad.frame_samples
            while True:
                kind, payload = await self._inbox.get()
                if kind == "audio":
                    assert isinstance(payload, np.ndarray)
                    await self._on_audio(payload)
                elif kind == "commit":
                    self._on_commit(event_id=payload if isinstance(payload, str) else None)
                elif kind == "clear":
                    self._on_clear()
                else:
                    self._on_commit(final=True)
                    self._finals.put_nowait(None)
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the stream fails alone, with a reason
            log.exception("live stream failed")
            self._emit(StreamError("stream_failed", f"the stream failed: {type(exc).__name__}"))
            self._finals.put_nowait(None)
        finally:
            self._release_vad()

    def _release_vad(self) -> None:
        """Give the VAD back to the transcriber's pool for a later stream, unless a scoring call that was
        interrupted may still run on it (then it is dropped)."""
        vad, self._vad = self._vad, None
        pool = self._owner.vad_factory
        if vad is not None and not self._scoring and isinstance(pool, VadPool):
            pool.give(vad)

    async def _on_audio(self, block: np.ndarray) -> None:
        self._pending_samples -= len(block)
        self._ring.append(block)
        if self._vad is None or self._machine is None:
            self._position += len(block)
            self._maybe_partial(self._manual_utterance())
            return
        scored = np.concatenate([self._tail, block])
        usable = len(scored) // self._frame * self._frame
        self._tail = scored[usable:]
        if not usable:
            return
        self._scoring = True
        probs = await self._owner.executor.run(self._vad.probabilities, scored[:usable])
        self._scoring = False
        for p in probs:
            self._on_frame(float(p))
        if self._utterance is not None:
            self._maybe_partial(self._utterance)

    def _on_frame(self, prob: float) -> None:
        assert self._machine is not None
        for event in self._machine.update(prob):
            if event.kind == "start":
                self._start_utterance(event.sample)
            elif self._utterance is not None:
                self._end_utterance(event.sample + self._samples(self.options.end_padding_ms))
        self._position = self._machine.position
        if self._utterance is not None:
            self._utterance.probs.append(prob)
            if prob >= self._machine.params.threshold:
                self._utterance.speech_ends.append(self._position)
            if self._position - self._utterance.start >= self.options.max_utterance_s * SAMPLE_RATE:
                self._split_long_utterance()
            else:
                self._maybe_draft(self._utterance)

    def _samples(self, ms: int) -> int:
        return ms * SAMPLE_RATE // 1000

    def _start_utterance(self, speech_start: int) -> None:
        floor = max(self._ring.start_sample, self._manual_start)
        start = max(floor, speech_start - self._samples(self.options.prefix_padding_ms))
        self._utterance = _Utterance(f"item_{next(_item_ids):06d}", start, partial_at=start,
                                     prior=self._last_completion)
        self._emit(SpeechStarted(self._utterance.item_id, start))

    def _end_utterance(self, end: int) -> None:
        u = self._utterance
        assert u is not None
        end = min(max(end, u.start + 1), max(self._position, self._ring.end_sample))
        self._utterance = None
        self._manual_start = end
        u.completion = self._last_completion = asyncio.get_running_loop().create_future()
        if self._vad is not None:  # manual commits had no speech_started, so no speech_stopped either
            self._emit(SpeechStopped(u.item_id, end))
        self._emit(Committed(u.item_id, self._previous_item))
        self._previous_item = u.item_id
        audio = self._ring.read(max(u.start, self._ring.start_sample), end)  # copied now: the ring moves on
        if u.draft is not None and u.draft.end != end:  # the draft heard less (or more) than the utterance
            u.drop_draft()
        self._backlog_samples += len(audio)
        self._finals.put_nowait((u, audio, end, time.monotonic()))

    def _maybe_draft(self, u: _Utterance) -> None:
        """At a pause of ``speculate_ms`` inside speech, start the final decode of the speech so far; drop a
        draft whose pause ended in more speech."""
        assert self._machine is not None
        pause = self._machine.pause_from
        if u.draft is not None and (pause is None or u.draft.end != pause + self._samples(self.options.end_padding_ms)):
            u.drop_draft()
        wait = self._samples(self.options.speculate_ms)
        if pause is None or not wait or u.draft is not None or self._position - pause < wait:
            return
        end = pause + self._samples(self.options.end_padding_ms)
        cut = max(u.cut, self._ring.start_sample)
        if end > self._position or end <= cut:
            return
        piece = self.options.piece_s > 0 and end - cut >= self.options.piece_s * SAMPLE_RATE
        if piece and self._asr.busy:
            return  # no room: pieces cut a loaded engine's finals into more, worse-heard decodes (see piece_s)
        if not piece and (self._finalizing or not self._finals.empty()):
            return  # a draft may be wasted: only when the context is settled
        task = asyncio.ensure_future(self._rest_text(u, list(u.pieces), self._ring.read(cut, end)))
        self._drafts.add(task)
        task.add_done_callback(self._drafts.discard)
        if piece:
            u.pieces.append(_Draft(end, task))
        else:
            u.draft = _Draft(end, task)

    def _split_long_utterance(self) -> None:
        """Cut over-long speech at its quietest recent frame and carry on in a new item."""
        u = self._utterance
        assert u is not None
        recent = np.asarray(u.probs[-max(1, int(3 * SAMPLE_RATE / self._frame)):])
        back = int(np.argmin(recent[::-1])) + 1  # the latest of the quietest frames
        cut = self._position - back * self._frame
        self._end_utterance(cut)
        self._start_utterance(cut + self._samples(self.options.prefix_padding_ms))

    def _manual_utterance(self) -> _Utterance | None:
        if self._position <= self._manual_start:
            return None
        if self._utterance is None:
            self._utterance = _Utterance(f"item_{next(_item_ids):06d}", self._manual_start, partial_at=self._manual_start)
        return self._utterance

    def _on_commit(self, *, final: bool = False, event_id: str | None = None) -> None:
        if self._utterance is None and self._vad is None:
            self._manual_utterance()
        if self._utterance is None:
            if not final:
                self._emit(StreamError("input_audio_buffer_commit_empty", "there is no uncommitted audio to commit",
                                       event_id))
            return
        if self._vad is not None and self._machine is not None:
            self._machine = VadStateMachine(self._machine.params, self._position)
        self._end_utterance(self._position)

    def _on_clear(self) -> None:
        if self._utterance is not None:
            self._utterance.cancel()
        self._utterance = None
        self._manual_start = self._position
        if self._machine is not None:
            self._machine = VadStateMachine(self._machine.params, self._position)
        if self._partial_task is not None:
            self._partial_task.cancel()
        self._emit(Cleared())

    # -------------------------------------------------------------------------------- recognition

    def _follows_closely(self, start: int) -> bool:
        """Whether an utterance starting at ``start`` begins less than ``prompt_gap_s`` after the last one
        ended (a sentence the VAD cut in two)."""
        return self._previous_end >= 0 and start - self._previous_end <= self.options.prompt_gap_s * SAMPLE_RATE

    def _context(self, start: int) -> str:
        """The previous text that may condition an utterance starting at ``start``: the client's prompt, and
        the last utterance's text when it follows closely."""
        recent = self._previous_text if self._follows_closely(start) else ""
        return f"{self._prompt} {recent}".strip()

    def _request(self, audio: np.ndarray, context: str, window: tuple[str, float] | None = None,
                 keyterms: tuple[str, ...] | None = None, prefix: str = "", new_samples: int | None = None,
                 tight: bool = False) -> AsrRequest:
        """A decode of ``audio`` after ``context`` with the stream's key terms (or ``keyterms``) as a glossary;
        with a ``prefix``, the text of the audio's beginning: only its last ``new_samples`` are to be heard.
        ``tight``: the first attempt's token cap (:func:`first_token_cap`) when the language is known and
        written with spaces."""
        options = replace(self.options.decode, prefix=prefix or None)
        if window is not None:
            options = replace(options, window=window[0], fit_step_s=window[1])
        if options.language is None and self._language and len(audio) < _DETECT_MIN_S * SAMPLE_RATE:
            options = replace(options, language=self._language)  # too short to tell a language by
        terms = self.options.keyterms if keyterms is None else keyterms
        prompt = glossary_prompt(terms, context, self.options.max_prompt_chars)
        new = len(audio) if new_samples is None else new_samples
        language = options.language or self._language
        cap = first_token_cap(new) if tight and language and language not in NO_SPACE_LANGUAGES else token_cap(new)
        return AsrRequest(audio, replace(options, prompt=prompt, max_new_tokens=cap))

    def _maybe_partial(self, u: _Utterance | None) -> None:
        interval = self._samples(self.options.partial_interval_ms)
        if u is None or not interval or self._position - u.partial_at < interval or u.draft is not None:
            return
        if (self._partial_task is not None and not self._partial_task.done()) or not self._finals.empty():
            return
        if self._asr.busy:  # the engine has a queue: previews wait, finals do not
            return
        if u.pieces:  # each piece awaits the ones before it: the last one settles them all
            last = u.pieces[-1].task
            if not last.done() or last.cancelled() or last.exception() is not None:
                return  # no settled context yet, or a piece failed (the final will say so)
        said = " ".join(t for t in (p.task.result()[0] for p in u.pieces) if t)
        u.partial_at = self._position
        audio = self._ring.read(max(u.cut, self._ring.start_sample), self._position)
        self._partial_task = asyncio.ensure_future(self._partial(u, audio, self._position, said))

    async def _partial(self, u: _Utterance, audio: np.ndarray, end: int, pieces_text: str = "") -> None:
        """A preview of the utterance so far: its pieces' text, then the speech after them decoded now."""
        context = " ".join([self._context(u.start), pieces_text]).strip()
        try:
            result = await self._asr.transcribe(self._request(audio, context), Priority.PARTIAL)
        except Exception:  # noqa: BLE001 - a preview is best effort; the final reports failures
            return
        if (u is not self._utterance or not result.text or is_repetitive(result.text.split(), self.options.guard)
                or copies_glossary(result.text, self.options.keyterms)):
            return
        text = f"{pieces_text} {result.text}".strip()
        stable = _agreed_prefix(u.last_partial, text)
        u.last_partial = text
        self._emit(Partial(u.item_id, text, end))
        if len(stable) > len(u.emitted) and stable.startswith(u.emitted):
            self._emit(TranscriptDelta(u.item_id, stable[len(u.emitted):]))
            u.emitted = stable

    async def _finalize(self) -> None:
        while True:
            job = await self._finals.get()
            if job is None:
                self._events.put_nowait(None)
                return
            u, audio, end, stopped_at = job
            try:
                await self._complete(u, audio, end, stopped_at)
            finally:
                if u.completion is not None and not u.completion.done():
                    u.completion.set_result(None)

    async def _complete(self, u: _Utterance, audio: np.ndarray, end: int, stopped_at: float) -> None:
        """Recognise one ended utterance (its draft, or its pieces and the rest) and emit its final."""
        self._finalizing = True
        try:
            (text, trusted, logprobs, tail), speaker = await asyncio.gather(self._utterance_text(u, audio, end),
                                                                            self._speaker(audio))
        except VoxserveError as exc:
            self._fail(u, exc.message)
            return
        except Exception as exc:  # noqa: BLE001 - an untyped failure fails this item alone, not the stream
            log.exception("live recognition failed")
            self._fail(u, f"recognition failed: {type(exc).__name__}")
            return
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is None or current.cancelling():
                raise  # the stream is closing
            log.error("a decode of %s was cancelled under its final", u.item_id)  # a bug: fail the item, go on
            self._fail(u, "recognition was cancelled")
            return
        finally:
            self._backlog_samples -= len(audio)
            self._finalizing = False
        if text.startswith(u.emitted) and len(text) > len(u.emitted):
            self._emit(TranscriptDelta(u.item_id, text[len(u.emitted):]))
        self._emit(TranscriptCompleted(u.item_id, text, u.start, end, time.monotonic() - stopped_at, speaker,
                                       logprobs))
        self._previous_text, self._previous_end = (text if trusted else ""), end
        self._previous_tail = tail if trusted and text else None

    def _fail(self, u: _Utterance, message: str) -> None:
        """Report an utterance whose final failed; it gives the next one no context."""
        self._previous_text, self._previous_tail = "", None
        self._emit(TranscriptFailed(u.item_id, message))

    async def _utterance_text(self, u: _Utterance, audio: np.ndarray, end: int
                              ) -> tuple[str, bool, tuple[TokenLogprob, ...], tuple[np.ndarray, str] | None]:
        """The final text of an ended utterance: its pieces' texts, then the rest (its draft when the draft
        heard up to the end, else decoded now); and the audio and text of its last decoded part (the speech
        the next utterance may continue), or None when that part's text was not trusted or is empty."""
        start = end - len(audio)
        rest = audio[max(0, u.cut - start):]
        if u.draft is not None:
            tail = u.draft.task
        elif not u.pieces or any(u.cut < at and at - self._frame < end for at in u.speech_ends):
            tail = asyncio.ensure_future(self._rest_text(u, list(u.pieces), rest))
        else:  # no speech after the last piece (an utterance cut in its pause): Whisper heard "Thank you." there
            tail = None
        parts = [await piece.task for piece in u.pieces]
        if tail is not None:
            parts.append(await tail)
        text = " ".join(t for t, _, _ in parts if t)
        last: tuple[np.ndarray, str] | None = None
        if parts and parts[-1][1] and parts[-1][0]:
            begin = u.pieces[-2].end if tail is None and len(u.pieces) > 1 else (u.start if tail is None else u.cut)
            stop = u.pieces[-1].end if tail is None else end
            last = audio[max(0, begin - start):max(0, stop - start)], parts[-1][0]
        return text, all(trusted for _, trusted, _ in parts), tuple(lp for _, _, lps in parts for lp in lps), last

    async def _rest_text(self, u: _Utterance, pieces: list[_Draft], audio: np.ndarray
                         ) -> tuple[str, bool, tuple[TokenLogprob, ...]]:
        """Decode speech of ``u`` that follows ``pieces``, with the text before it (the previous utterance's,
        when close, and the pieces') as the context."""
        if u.prior is not None:
            await asyncio.shield(u.prior)
        # Shielded: a draft awaiting a piece is cancelled when speech resumes, and an unshielded await would
        # cancel the piece with it (the final, which needs the piece, then failed and the stream hung).
        heard = [await asyncio.shield(piece.task) for piece in pieces]
        said = [text for text, _, _ in heard]
        context = self._context(u.start)
        followed, reread = await self._follow_on_text(self._continued(u, pieces, heard), audio)
        if followed is not None:
            return followed
        if reread:  # the decoder read the previous text again: it would as a prompt too
            context, said = self._prompt, []
        return await self._final_text(audio, " ".join([context, *said]).strip())

    def _continued(self, u: _Utterance, pieces: list[_Draft], heard: list[tuple[str, bool, tuple[TokenLogprob, ...]]]
                   ) -> tuple[np.ndarray, str] | None:
        """The speech a decode of ``u`` after ``pieces`` continues, and its text (the pause before the decode's
        audio included, at most ``joined_pause_s`` of it): the last piece when there is one, else the previous
        utterance when it ended at most ``follow_on_gap_s`` before this one began; None when that text was not
        trusted, is empty, or its audio has left the ring."""
        if pieces:
            text, trusted, _ = heard[-1]
            start = pieces[-2].end if len(pieces) > 1 else u.start
            if not (trusted and text) or start < self._ring.start_sample:
                return None
            return self._ring.read(start, pieces[-1].end), text
        tail, end = self._previous_tail, self._previous_end  # set only beside a trusted, non-empty text
        if (tail is None or end < 0 or u.start - end > self.options.follow_on_gap_s * SAMPLE_RATE
                or end < self._ring.start_sample):
            return None
        before, text = tail
        pause = self._ring.read(end, u.start) if u.start > end else before[:0]
        keep = int(self.options.joined_pause_s * SAMPLE_RATE)
        if len(pause) > keep:
            pause = np.concatenate([pause[: keep // 2], pause[len(pause) - (keep - keep // 2):]])
        return np.concatenate([before, pause]), text

    async def _follow_on_text(self, before: tuple[np.ndarray, str] | None, audio: np.ndarray
                              ) -> tuple[tuple[str, bool, tuple[TokenLogprob, ...]] | None, bool]:
        """The text of ``audio`` heard after the speech it continues (``before``: that speech's audio and
        text, see ``follow_on_s``), or None when there is none, the joined audio does not fit a window at most
        ``follow_on_s`` longer than the one ``audio`` gets alone, or that decode is not to be trusted (then it
        is decoded on its own); and whether the decode read the previous text again (its text repeats the
        prefix, or holds more words than the new audio can): then that text conditions the decode on its own
        audio no more. Measured on the tune half: a 1.1 s "ah" after "... a bunch of different words ..."
        came back as that sentence from the joined audio, then again with it as the prompt, and only without
        it as "ah"."""
        extra, decode = self.options.follow_on_s, self.options.decode
        if extra is None or before is None:
            return None, False
        if decode.window_s(len(before[0]) + len(audio)) > decode.window_s(len(audio)) + extra:
            return None, False
        joined = np.concatenate([before[0], audio])
        prefix, keyterms = before[1], self.options.keyterms
        result, verdict = await self._decode(joined, self._prompt, None, keyterms, prefix=prefix,
                                             new_samples=len(audio))
        text = result.text.lstrip(_CLOSING)  # the prefix's closing punctuation (". Very bad aligner.")
        reread = bool(text) and (copies_prompt(text, prefix) or bool(_REREAD & set(verdict.reasons)))
        if (reread or not verdict.passed or verdict.silence or not text
                or ends_in_repeat(text.split(), self.options.guard.max_ngram)
                or (keyterms and copies_glossary(text, keyterms))):
            return None, reread
        return (text, True, self._logprobs(result)), False

    async def _speaker(self, audio: np.ndarray) -> str | None:
        """This utterance's speaker label (computed beside its text, so it adds no latency of its own)."""
        embed = self._owner.speaker_embedder
        if self._speakers is None or embed is None:
            return None
        reliable = len(audio) >= self.options.speaker_min_s * SAMPLE_RATE
        if self._names is None or len(audio) < self.options.naming_min_s * SAMPLE_RATE:
            return self._speakers.assign(await embed(audio), reliable=reliable)
        naming = self._owner.naming_embedder
        if naming is None or naming is embed:
            embedding = voice = await embed(audio)
        else:  # the known voices were embedded by another model: ask both, side by side
            embedding, voice = await asyncio.gather(embed(audio), naming(audio))
        name = self._names.name(voice)
        return name if name is not None else self._speakers.assign(embedding, reliable=reliable)

    async def _decode(self, audio: np.ndarray, context: str, window: tuple[str, float] | None,
                      keyterms: tuple[str, ...], *, timed: bool = False, prefix: str = "",
                      new_samples: int | None = None, tight: bool = False) -> tuple[AsrResult, Verdict]:
        """One final decode of an utterance (``keyterms`` as its glossary; ``timed``: with word timings; a
        ``prefix`` the text of all but the last ``new_samples`` of ``audio``) and the guard's verdict on it.

        ``tight``: a first attempt under :func:`first_token_cap`, where a looping decoder stops sooner; a result
        that reaches that cap and still passes the guard (fast speech, not a loop) is decoded again under the
        usual cap, so the tight cap never cuts words."""
        request = self._request(audio, context, window, keyterms, prefix, new_samples, tight)
        if timed or self.options.logprobs:  # token probabilities come from the aligner
            request = AsrRequest(request.audio, replace(request.options, word_timestamps=True))
        result = await self._asr.transcribe(request, self.options.priority)
        if (request.options.language is None and len(audio) >= _DETECT_MIN_S * SAMPLE_RATE
                and result.language_probability >= _DETECT_MIN_P):
            self._language = result.language
        cap = request.options.max_new_tokens
        evidence = LoopEvidence(hit_cap=cap is not None and len(result.tokens) >= cap)
        heard = len(audio) if new_samples is None else new_samples
        verdict = assess(result.text, result.avg_logprob, result.no_speech_prob, heard, result.language,
                         self.options.guard, evidence)
        if evidence.hit_cap and verdict.passed and not verdict.silence and cap != token_cap(heard):
            return await self._decode(audio, context, window, keyterms, timed=timed, prefix=prefix,
                                      new_samples=new_samples)
        return result, verdict

    async def _unlooped(self, audio: np.ndarray, context: str, window: tuple[str, float] | None,
                        next_window: tuple[str, float] | None, keyterms: tuple[str, ...], result: AsrResult
                        ) -> AsrResult:
        """A passing result, or a better one when it ends with a phrase said twice in a row
        (:func:`~voxserve.pipelines.guard.ends_in_repeat`) and looks looped. Its word timings judge first: a
        decoder that looped once packs the repeat into no time or past the speech ("two three" came back "2 3
        2 3", its second "2" 0 ms long), a person who said it twice took time for each. Timings that look
        looped get a second opinion in ``next_window``: a text without the repeat replaces the result; one that
        says it again confirms it (the aligner puts a short filler said twice, "um, um", in no time as well).
        At most two more decodes, asked for at once: one after the other, they put ~0.45 s of decoding after
        the first on a one-stream final's path (JFK's "And so my fellow Americans." looped in its 5 s window:
        its final came 0.27-0.32 s after speech stopped, against <= 0.06 s for every other utterance of the
        check half's clips played back to back); the second opinion is cancelled while it waits when the
        timings say a person said it twice."""
        strict = any_repeat(self.options.guard)
        max_ngram = self.options.guard.max_ngram
        if not self.options.guard.enabled or next_window is None or not ends_in_repeat(result.text.split(), max_ngram):
            return result
        timing = None if result.words else asyncio.ensure_future(
            self._decode(audio, context, window, keyterms, timed=True))
        opinion = asyncio.ensure_future(self._decode(audio, context, next_window, keyterms))
        try:
            timed = result if timing is None else (await timing)[0]
            evidence = LoopEvidence(word_times=tuple((w.start / SAMPLE_RATE, w.end / SAMPLE_RATE) for w in timed.words),
                                    speech_end_s=len(audio) / SAMPLE_RATE)
            if not timed_repeat_reasons(timed.text.split(), strict, evidence):
                return timed
            second, verdict = await opinion
        finally:
            for task in (timing, opinion):
                if task is not None and not task.done():
                    task.cancel()
        if verdict.passed and not verdict.silence and not ends_in_repeat(second.text.split(), max_ngram):
            return second
        return timed

    def _logprobs(self, result: AsrResult) -> tuple[TokenLogprob, ...]:
        """The final's token log-probabilities when the stream asked for them (a result aligned only to judge
        a repeat has them too, unasked)."""
        return tuple(lp for w in result.words for lp in w.logprobs) if self.options.logprobs else ()

    async def _final_text(self, audio: np.ndarray, context: str) -> tuple[str, bool, tuple[TokenLogprob, ...]]:
        """The utterance's text, whether it passed the guard (only such text conditions the next one), and its
        tokens' log-probabilities (when the stream asked for them).

        With previous text as the prompt, Whisper sometimes copies the prompt instead of hearing the audio
        ("8. The press yard" -> "8. The narrative ..."): a result that repeats the prompt is decoded again
        without it, and so is one that fails the guard; one that says the key terms' glossary is decoded again
        without the glossary (which then stays off for this utterance). A passing result that ends with a phrase
        said twice in a row is judged by its word timings and, when they look looped, a second opinion in the
        next window (:meth:`_unlooped`): a short utterance in a fitted window padded with silence came back "And so my
        fellow Americans. And so my fellow Americans.", and "two three" came back "2 3 2 3"; a person who
        really said it twice keeps both."""
        best: tuple[AsrResult, Verdict] | None = None
        contexts = (context, "") if context else ("",)
        windows = (None, *self.options.retry_windows)
        keyterms = self.options.keyterms
        for w, window in enumerate(windows):
            if window is not None and window[0] == "full" and best is not None and set(best[1].reasons) <= _UNSURE:
                break  # a 30 s window cures loops, not doubt: a 1.3 s filler's took 1.4 s to be unsure again
            for ctx in contexts:
                result, verdict = await self._decode(audio, ctx, window, keyterms, tight=window is None)
                if keyterms and copies_glossary(result.text, keyterms):
                    keyterms = ()
                    result, verdict = await self._decode(audio, ctx, window, keyterms, tight=window is None)
                if verdict.silence:
                    return "", False, ()
                copied = bool(ctx) and copies_prompt(result.text, ctx)
                if verdict.passed and not copied:
                    next_window = windows[w + 1] if w + 1 < len(windows) else None
                    result = await self._unlooped(audio, ctx, window, next_window, keyterms, result)
                    return result.text, True, self._logprobs(result)
                if not copied and (best is None or len(verdict.reasons) < len(best[1].reasons)):
                    best = (result, verdict)
            contexts = ("",)  # a failed first try: the retries decode without previous text
        if best is None:
            return "", False, ()
        result = without_repeats(best[0]) if "repetition" in best[1].reasons else best[0]
        return result.text, False, self._logprobs(result)


_UNSURE = {"avg_logprob", "too_few_words"}
"""Guard reasons that say a text is unsure or thin, not looped: a result failing only on these is not decoded
again in the standard 30 s window (Whisper loops far less there, but hears a short utterance no better)."""

_REREAD = {"too_many_words", "fast_words"}
"""Guard reasons that say a follow-on decode holds more words than its new audio: it read the previous
utterance's audio again."""

_FIRST_TOKENS_PER_S = 8
_FIRST_TOKEN_SLACK = 6


def first_token_cap(n_samples: int) -> int:
    """The token cap of an utterance's first decode in a language written with spaces: 6 + 8 a second. On the
    tune half (8 streams x 60 s, 111 passing finals) no final that did not copy its prompt ran above 4.1
    tokens a second of its audio; a decoder that loops in a short fitted window runs to its cap (a 2.7 s
    utterance said four times: 50 tokens, 1.1-1.4 s under the usual cap of 15 a second, 27 tokens under this
    one). Reaching it is never the end: a loop is retried as before, fast speech is decoded again under
    :func:`~voxserve.pipelines.guard.token_cap`."""
    return _FIRST_TOKEN_SLACK + int(_FIRST_TOKENS_PER_S * n_samples / SAMPLE_RATE)


_CLOSING = " .,;:!?\u3002\uff0c\u3001"
"""Punctuation a continuation may begin with that belongs to its prefix (Latin and CJK)."""

def _known_voices(options: LiveOptions) -> KnownVoices | None:
    """The stream's namer, when it has known speakers (``naming_threshold`` must be set by then)."""
    if not options.known_speakers:
        return None
    if options.naming_threshold is None:
        raise InvalidInput("known speakers need a naming threshold", param="known_speaker_names")
    return KnownVoices(options.known_speakers, options.naming_threshold)


def copies_prompt(text: str, prompt: str) -> bool:
    """Whether a result may repeat its prompt rather than the audio: its first two words are the prompt's or
    its last sentence's, or it holds four words in a row from the prompt. Loose on purpose: a false alarm
    costs one more decode without the prompt, a miss leaks text into the transcript."""
    said = _plain_words(text)
    if not said:
        return False
    before = _plain_words(prompt)
    tail = _plain_words(re.split(r"(?<=[.!?])\s+", prompt.strip())[-1])
    for ref in (before, tail):
        n = min(2, len(ref), len(said))
        if n and said[:n] == ref[:n]:
            return True
    grams = {tuple(before[i : i + 4]) for i in range(len(before) - 3)}
    return any(tuple(said[i : i + 4]) in grams for i in range(len(said) - 3))


def _plain_words(text: str) -> list[str]:
    return [w for w in re.sub(r"[^\w\s']", " ", text.lower()).split() if w]


def _agreed_prefix(a: str, b: str) -> str:
    """The words two hypotheses share from the start (LocalAgreement-2), as they appear in ``b``."""
    wa, wb = a.split(), b.split()
    n = 0
    while n < min(len(wa), len(wb)) and wa[n] == wb[n]:
        n += 1
    return " ".join(wb[:n])
