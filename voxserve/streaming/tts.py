"""A streaming synthesis session: text pieces in, audio chunks out, in order, as early as possible.

``stream.push_text(...)`` feeds a :class:`~voxserve.text.TextSegmenter`; each certain segment is made speakable
(numbers, abbreviations), turned into frames by the voice's acoustic model (stage 1, on the acoustic runner's
threads, one call at a time per stream) and cut into windows by a :class:`~voxserve.streaming.tts_windows.WindowPlanner`;
each window is decoded through the decoder's shared batcher (stage 2) and the kept middle of its audio leaves
as a :class:`~voxserve.types.SynthesisChunk`.

Scheduling: a stream's work (acoustic steps and decoder windows) runs at the stream's priority class (live by
default) with a deadline, the moment its listener will need that audio (for the first audio: 150 ms after the
first segment); the shared batchers run the earliest deadline first, so first audio and streams about to run
dry go before streams that are ahead; work due soon also has urgent threads of its own while the others run
nicer (:class:`~voxserve.engine.batcher.BatcherConfig`). A live stream also stops working ahead once it is ``max_ahead_s`` ahead. Each stream has at most ``max_inflight_windows``
windows queued, so one long document cannot flood the decoder.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from voxserve.backends.base import FrameBlock, FrameWord, SpeechOptions
from voxserve.engine.tts_pool import AcousticRunner, LoadedVoice
from voxserve.errors import BackendError, InvalidInput, VoxserveError
from voxserve.streaming.tts_windows import Window, WindowParams, WindowPlanner
from voxserve.text.endings import dangling
from voxserve.text.lexicon import EMPTY_LEXICON, Lexicon
from voxserve.text.segment import SegmenterParams, TextSegment, TextSegmenter
from voxserve.text.speakable import has_speech, to_speakable, without_controls
from voxserve.text.ssml import Pause, SsmlPiece, as_document, parse_ssml, ssml_start
from voxserve.types import Priority, SpokenWord, SynthesisChunk

log = logging.getLogger(__name__)
SampleFormat = Literal["float32", "int16"]
StreamStatus = Literal["done", "cancelled", "failed"]
QUIET = 1e-3  # -60 dBFS: a voice's own quiet end of a sentence counts as part of a following SSML break
_ids = itertools.count(1)


@dataclass(frozen=True)
class TtsStreamParams:
    """Process-level knobs of every synthesis stream.

    Attributes:
        first_frames: output frames of a unit's first window when the listener waits (None: the decoder's).
        window_frames: output frames of later windows (None: the decoder's recommended size).
        context_frames: context frames on each side of a window (None: the decoder's recommended count).
        segmenter: where text is cut into segments.
        max_inflight_windows: windows of one stream queued at the decoder at once.
        urgent_buffer_s: a unit (clause or sentence) starts with a small first window when the stream has less
            than this much audio planned ahead of playback.
        first_audio_target_s: the deadline of a stream's first audio, after its first segment is known.
        max_ahead_s: a live stream pauses synthesis while this far ahead of playback (0 = never pause).
        max_queued_chunks: chunks produced but not yet read before synthesis waits for the reader.
        max_input_chars: most characters one stream accepts.
    """

    first_frames: int | None = None
    window_frames: int | None = None
    context_frames: int | None = None
    segmenter: SegmenterParams = field(default_factory=SegmenterParams)
    max_inflight_windows: int = 3
    urgent_buffer_s: float = 1.0
    first_audio_target_s: float = 0.15
    max_ahead_s: float = 6.0
    max_queued_chunks: int = 256
    max_input_chars: int = 100_000


@dataclass(frozen=True)
class SpeakOptions:
    """Per-request synthesis options.

    Attributes:
        speed: speaking rate, 0.25 to 4.0.
        sample_format: ``float32`` samples in [-1, 1] or ``int16``.
        priority: the class of this stream's urgent windows (live, agent, or offline for batch work that
            never paces itself to real time).
        normalize_text: rewrite numbers, money, times and abbreviations in words first.
        seed: repeatable sampling where the model samples.
        ssml: None: the input is SSML when it starts with ``<speak>`` (see :mod:`voxserve.text.ssml`); True:
            always SSML (wrapped in ``<speak>`` when it has no root); False: always plain text.
        pronunciations: word or phrase -> respelling (or ``[[ phonemes ]]``), over the server's lexicon (see
            :mod:`voxserve.text.lexicon`).
        first_segment_wait_s: for text arriving in pieces (an LLM's tokens): when no segment has been cut this
            long after the first text, the text so far (at least three words, ending at a word, not on "a",
            "of", "has" ...) is synthesized when the next word starts, so a slow writer costs a prosody break
            instead of the listener's wait. None: only clause and sentence ends cut (the default).
    """

    speed: float = 1.0
    sample_format: SampleFormat = "float32"
    priority: Priority = Priority.LIVE
    normalize_text: bool = True
    seed: int | None = None
    ssml: bool | None = None
    pronunciations: Mapping[str, str] = field(default_factory=dict)
    first_segment_wait_s: float | None = None

    def validate(self) -> None:
        """Raise :class:`InvalidInput` for bad values."""
        SpeechOptions(self.speed, self.seed).validate()
        wait = self.first_segment_wait_s
        if wait is not None and not 0.0 <= wait <= 60.0:
            raise InvalidInput("first_segment_wait_s must be between 0 and 60 seconds", param="first_segment_wait_s")
        Lexicon.from_mapping(self.pronunciations)
        if self.sample_format not in ("float32", "int16"):
            raise InvalidInput(f"sample_format must be 'float32' or 'int16', not {self.sample_format!r}",
                               param="sample_format")

    @property
    def speech(self) -> SpeechOptions:
        """The options the acoustic model sees."""
        return SpeechOptions(self.speed, self.seed)

    def speech_at(self, rate: float) -> SpeechOptions:
        """The acoustic model's options for text at ``rate`` times this speed (kept within 0.25 to 4.0)."""
        return SpeechOptions(min(4.0, max(0.25, self.speed * rate)), self.seed)


@dataclass
class TtsStreamStats:
    """Timing of one stream (monotonic clock seconds; None until it happened)."""

    stream_id: int
    voice: str
    created: float
    first_text_at: float | None = None
    first_segment_at: float | None = None
    first_audio_at: float | None = None
    first_sentence_at: float | None = None
    finished_at: float | None = None
    sample_rate: int = 0
    audio_samples: int = 0
    chunks: int = 0
    windows: int = 0
    underruns: int = 0
    max_lateness_s: float = 0.0

    @property
    def audio_s(self) -> float:
        """Seconds of audio produced."""
        return self.audio_samples / self.sample_rate if self.sample_rate else 0.0

    @property
    def ttfb_s(self) -> float | None:
        """First text pushed -> first audio out."""
        return _delta(self.first_text_at, self.first_audio_at)

    @property
    def first_sentence_s(self) -> float | None:
        """First text pushed -> all audio of the first complete sentence out."""
        return _delta(self.first_text_at, self.first_sentence_at)

    @property
    def rtf(self) -> float | None:
        """Real-time factor: synthesis wall time / audio duration (below 1 is faster than real time)."""
        wall = _delta(self.first_text_at, self.finished_at)
        return wall / self.audio_s if wall is not None and self.audio_s > 0 else None


def _delta(a: float | None, b: float | None) -> float | None:
    return b - a if a is not None and b is not None else None


class TtsObserver(Protocol):
    """Receives stream events (for metrics). Called on the event loop; must not block."""

    def on_stream_start(self, stream_id: int, voice: str, active_streams: int) -> None:
        """A stream was admitted."""
        ...

    def on_first_audio(self, stream_id: int, ttfb_s: float) -> None:
        """A stream's first chunk left, ``ttfb_s`` after its first text."""
        ...

    def on_first_sentence(self, stream_id: int, seconds: float) -> None:
        """All audio of a stream's first sentence left, ``seconds`` after its first text."""
        ...

    def on_stream_end(self, stats: TtsStreamStats, status: StreamStatus, active_streams: int) -> None:
        """A stream ended (done, cancelled or failed); ``stats.rtf`` is its real-time factor."""
        ...


@dataclass(frozen=True)
class _Spoken:
    """A segment to synthesize, at ``rate`` times the stream's speed, its samples scaled by ``gain``."""

    segment: TextSegment
    rate: float = 1.0
    gain: float = 1.0


@dataclass(frozen=True)
class _Silence:
    """Silence of ``seconds`` (an SSML break), placed at character ``at`` of the spoken text."""

    seconds: float
    at: int


@dataclass
class _Pending:
    task: asyncio.Future[Any]
    window: Window
    unit: _Spoken
    words: tuple[FrameWord, ...] = ()  # the block's words that start in the window's kept frames


@dataclass
class _SegmentDone:
    segment: TextSegment


_END = object()


class TtsStream:
    """One synthesis session. Create it with ``TtsService.stream()`` inside a running event loop.

    Example::

        stream = tts.stream(voice="joe")
        stream.push_text("Hello there, ")
        stream.push_text("how are you today?")
        stream.end_input()
        async for chunk in stream:
            send(chunk.pcm16())
    """

    def __init__(
        self,
        load_voice: Callable[[], Awaitable[LoadedVoice]],
        acoustic: AcousticRunner,
        params: TtsStreamParams,
        options: SpeakOptions,
        *,
        voice_name: str,
        observer: TtsObserver | None = None,
        on_finish: Callable[[TtsStream, StreamStatus], int] | None = None,
        paced: bool = True,
        lexicon: Lexicon = EMPTY_LEXICON,
    ) -> None:
        self.id = next(_ids)
        self._paced = paced
        self.options = options
        self.params = params
        self.stats = TtsStreamStats(self.id, voice_name, time.monotonic())
        self._load_voice = load_voice
        self._acoustic = acoustic
        self._observer = observer
        self._on_finish = on_finish
        self._segmenter = TextSegmenter(params.segmenter)
        self._lexicon = lexicon
        # SSML: None until the first text tells (``<speak`` or not); the document is parsed when input ends.
        self._ssml: bool | None = options.ssml
        self._held = ""  # text not yet segmented: an SSML document, or a start that may become one
        self._chars = 0
        self._segments: asyncio.Queue[_Spoken | _Silence | InvalidInput | None] = asyncio.Queue()
        self._out: asyncio.Queue[Any] = asyncio.Queue()  # chunks, then one final item (_END or an error)
        self._room = asyncio.Semaphore(params.max_queued_chunks)  # back-pressure from a slow reader
        self._input_ended = False
        self._cancelled = False
        self._done = False
        self._sequence = 0
        self._next_sample = 0
        self._quiet_tail = 0  # samples below QUIET at the end of the audio out so far
        self._planned_samples = 0  # audio of the windows submitted so far
        self._inflight: list[asyncio.Future[Any]] = []
        self._task = asyncio.ensure_future(self._run())
        # A task cancelled before it started never runs its finally: finish it here in that case.
        self._task.add_done_callback(lambda _: self._finish("cancelled"))

    # ------------------------------------------------------------------------------------------ input

    def push_text(self, text: str) -> None:
        """Append text (any piece: a token, a sentence, a whole document)."""
        if not isinstance(text, str):
            raise InvalidInput("text must be a string", param="input")
        if self._input_ended:
            raise InvalidInput("this stream's input has ended", param="input")
        if self._chars + len(text) > self.params.max_input_chars:
            raise InvalidInput(f"input is longer than {self.params.max_input_chars} characters", param="input",
                               code="input_too_long")
        self._chars += len(text)
        if self.stats.first_text_at is None and has_speech(text):
            self.stats.first_text_at = time.monotonic()
        if self._ssml is None:
            self._held += text
            self._ssml = ssml_start(self._held)
            if self._ssml is None:
                return  # still maybe "<speak"
            text, self._held = self._held, ""
        if self._ssml:
            self._held += text  # an SSML document is spoken once it is complete
        else:
            if text[:1].isspace() and self._first_segment_late():
                self._enqueue(self._segmenter.flush())  # the text so far ends at a word: speak it now
            self._enqueue(self._segmenter.push(without_controls(text)))

    def _first_segment_late(self) -> bool:
        """Whether the first segment is overdue (``first_segment_wait_s``) and the text so far may be cut."""
        wait, first = self.options.first_segment_wait_s, self.stats.first_text_at
        if wait is None or first is None or self.stats.first_segment_at is not None:
            return False
        pending = self._segmenter.pending
        # at least three words, and not "... has a": a break there is heard as a stumble
        return time.monotonic() - first >= wait and len(pending.split()) >= 3 and not dangling(pending)

    def flush(self) -> None:
        """Synthesize all text pushed so far now, even without a sentence end (e.g. when an LLM pauses); an
        SSML document waits for :meth:`end_input`."""
        if not self._input_ended and not self._ssml and not self._held:
            self._enqueue(self._segmenter.flush())

    def end_input(self) -> None:
        """No more text: synthesize what is pending and end the stream after its audio.

        SSML input is parsed here; when it is malformed the stream fails with that :class:`InvalidInput`
        (``param="input"``), which its reader gets instead of audio."""
        if self._input_ended:
            return
        if self._ssml:
            try:
                self._enqueue_pieces(parse_ssml(as_document(self._held)))
            except InvalidInput as exc:
                self._segments.put_nowait(exc)
        else:
            self._enqueue(self._segmenter.push(without_controls(self._held)) + self._segmenter.flush())
        self._held = ""
        self._input_ended = True
        self._segments.put_nowait(None)

    def cancel(self) -> None:
        """Stop now: no further chunk is returned and queued work is dropped."""
        if self._done or self._cancelled:
            return
        self._cancelled = True
        self._input_ended = True
        while not self._out.empty():
            self._out.get_nowait()
        self._out.put_nowait(_END)
        self._task.cancel()

    async def aclose(self) -> None:
        """Cancel if still running and wait until the stream has released its resources."""
        self.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - errors were reported to the reader
            pass

    @property
    def done(self) -> bool:
        """Whether the stream has ended (all audio produced, cancelled, or failed)."""
        return self._done

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    def _enqueue(self, segments: list[TextSegment], rate: float = 1.0, gain: float = 1.0) -> None:
        for segment in segments:
            self._put_unit(_Spoken(segment, rate, gain))

    def _enqueue_pieces(self, pieces: list[SsmlPiece]) -> None:
        """SSML pieces in order: each piece's text is segmented on its own (its style ends with it)."""
        for piece in pieces:
            if isinstance(piece, Pause):
                if piece.seconds > 0:
                    self._put_unit(_Silence(piece.seconds, self._segmenter.total_chars))
            else:
                segments = self._segmenter.push(without_controls(piece.text) + " ") + self._segmenter.flush()
                self._enqueue(segments, piece.rate, piece.gain)

    def _put_unit(self, unit: _Spoken | _Silence) -> None:
        if self.stats.first_segment_at is None:
            self.stats.first_segment_at = time.monotonic()
        self._segments.put_nowait(unit)

    # ------------------------------------------------------------------------------------------ output

    def __aiter__(self) -> TtsStream:
        return self

    async def __anext__(self) -> SynthesisChunk:
        if self._cancelled:
            raise StopAsyncIteration
        item = await self._out.get()
        if self._cancelled:
            raise StopAsyncIteration
        if isinstance(item, SynthesisChunk):
            self._room.release()
            return item
        if item is _END:
            self._out.put_nowait(_END)  # later calls end too
            raise StopAsyncIteration
        self._out.put_nowait(_END)
        raise item

    async def __aenter__(self) -> TtsStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------------------------------ pipeline

    async def _run(self) -> None:
        status: StreamStatus = "done"
        pending: asyncio.Queue[_Pending | _SegmentDone | _Silence | None] = asyncio.Queue()
        slots = asyncio.Semaphore(self.params.max_inflight_windows)
        emitter: asyncio.Task[None] | None = None
        try:
            voice = await self._load_voice()
            voice.acoustic.check_options(self.options.speech)
            self.stats.sample_rate = voice.decoder.decoder.info.sample_rate
            emitter = asyncio.ensure_future(self._emit(voice, pending, slots))
            failure: Exception | None = None
            try:
                while (unit := await self._segments.get()) is not None:
                    if isinstance(unit, InvalidInput):
                        raise unit
                    if isinstance(unit, _Silence):
                        self._planned_samples += round(unit.seconds * self.stats.sample_rate)
                        await pending.put(unit)
                    else:
                        await self._synthesize(voice, unit, pending, slots)
            except Exception as exc:  # noqa: BLE001 - deliver the audio already on its way, then the error
                failure = exc
            await pending.put(None)
            await emitter
            if failure is not None:
                raise failure
        except asyncio.CancelledError:
            status = "cancelled"
        except VoxserveError as exc:
            status = "failed"
            self._fail(exc)
        except Exception as exc:  # noqa: BLE001 - one failing stream must not take others down
            log.exception("synthesis stream %d failed", self.id)
            status = "failed"
            self._fail(BackendError(f"synthesis failed: {exc}"))
        finally:
            for future in [*self._inflight, *([emitter] if emitter else [])]:
                future.cancel()
            self._finish(status)

    async def _synthesize(
        self, voice: LoadedVoice, unit: _Spoken, pending: asyncio.Queue[Any], slots: asyncio.Semaphore
    ) -> None:
        segment = unit.segment
        text = self._lexicon.apply(segment.text, to_speakable if self.options.normalize_text else str)
        if has_speech(text):
            params = self._window_params(voice)
            parts: list[npt.NDArray[Any]] = []
            urgent = self._urgent()
            planner = self._planner(params, urgent)
            # A listener waits for this unit's audio: the model gives the frames of its first two windows as soon
            # as they exist. Two, so that the second decodes beside the first and the rest of the unit has the
            # audio of both to arrive in (with only the first 16 frames, 186 ms of audio, it left gaps).
            first = planner.needed(2) if urgent else 0
            blocks = voice.acoustic.frames(text, self.options.speech_at(unit.rate), first)
            while True:
                await self._pace()
                block: FrameBlock | None = await self._acoustic.step(blocks, self.options.priority, self._deadline())
                if block is None:
                    break
                parts.append(block.frames)
                frames = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)
                parts = [frames]
                total = frames.shape[-1]
                windows = planner.finish(total) if block.end_of_unit else planner.push(total)
                for window in windows:
                    words = tuple(w for w in block.words if window.keep_start <= w.start_frame < window.keep_end)
                    await self._submit(voice, frames[..., window.start : window.end], window, unit, pending, slots,
                                       words)
                if block.end_of_unit:
                    parts, planner = [], self._planner(params, self._urgent())
        await pending.put(_SegmentDone(segment))

    def _window_params(self, voice: LoadedVoice) -> WindowParams:
        info, p = voice.decoder.decoder.info, self.params
        return WindowParams(
            p.first_frames if p.first_frames is not None else info.first_frames,
            p.window_frames if p.window_frames is not None else info.window_frames,
            p.context_frames if p.context_frames is not None else info.context_frames,
            uniform=info.stacks_batches,
        )

    def _urgent(self) -> bool:
        """Whether the listener may wait for the next unit's audio: counted with the audio planned but still
        decoding, a sentence's second clause follows the first's ~2 s without a new ramp (counted from audio
        out, every clause began again at 16 frames)."""
        return self._planned_ahead_s() < self.params.urgent_buffer_s

    @staticmethod
    def _planner(params: WindowParams, urgent: bool) -> WindowPlanner:
        """A small first window only for an urgent unit."""
        return WindowPlanner(params, params.first_frames if urgent else params.window_frames)

    async def _submit(
        self,
        voice: LoadedVoice,
        frames: npt.NDArray[Any],
        window: Window,
        unit: _Spoken,
        pending: asyncio.Queue[Any],
        slots: asyncio.Semaphore,
        words: tuple[FrameWord, ...],
    ) -> None:
        await slots.acquire()
        deadline = self._deadline()
        self._planned_samples += (window.keep_end - window.keep_start) * voice.decoder.decoder.info.samples_per_frame
        task = asyncio.ensure_future(voice.decoder.decode(np.ascontiguousarray(frames), self.options.priority, deadline))
        self._inflight.append(task)
        self.stats.windows += 1
        await pending.put(_Pending(task, window, unit, words))

    def _deadline(self) -> float:
        """When the listener needs the audio planned next (``time.monotonic()``): the shared batchers run the
        earliest deadline first, so a new stream's first audio (due ``first_audio_target_s`` after its first
        segment) and streams about to run dry go before streams that are ahead."""
        start = self.stats.first_audio_at
        if start is None:
            start = (self.stats.first_segment_at or time.monotonic()) + self.params.first_audio_target_s
        return start + self._planned_samples / self.stats.sample_rate

    async def _pace(self) -> None:
        """A live stream waits while it is far ahead of playback (work for others meanwhile)."""
        limit = self.params.max_ahead_s
        if not self._paced or limit <= 0 or self.options.priority == Priority.OFFLINE:
            return
        ahead = self._ahead_s()
        if ahead > limit:
            await asyncio.sleep(ahead - limit)  # playback consumes one second of audio per second

    def _planned_ahead_s(self) -> float:
        """Seconds of audio planned (out or still decoding) beyond what real-time playback has consumed."""
        if not self.stats.sample_rate:
            return 0.0
        played = 0.0 if self.stats.first_audio_at is None else time.monotonic() - self.stats.first_audio_at
        return self._planned_samples / self.stats.sample_rate - played

    def _ahead_s(self) -> float:
        """Seconds of audio produced beyond what real-time playback from the first chunk has consumed."""
        if self.stats.first_audio_at is None or not self.stats.sample_rate:
            return 0.0
        played = time.monotonic() - self.stats.first_audio_at
        return self._next_sample / self.stats.sample_rate - played

    async def _emit(self, voice: LoadedVoice, pending: asyncio.Queue[Any], slots: asyncio.Semaphore) -> None:
        spf = voice.decoder.decoder.info.samples_per_frame
        # A break's pause between the audio before and after is the break's length: the voice's quiet end of the
        # sentence before and quiet start of the one after count in it, so its silence waits for that audio.
        silence: _Silence | None = None
        held = 0
        while (item := await pending.get()) is not None:
            if isinstance(item, _SegmentDone):
                self._segment_done(item.segment)
                continue
            if isinstance(item, _Silence):
                held += max(0, round(item.seconds * self.stats.sample_rate) - self._quiet_tail)
                silence = item
                continue
            try:
                audio = await item.task
            finally:
                slots.release()
                self._inflight.remove(item.task)
            a, b = item.window.trim(spf)
            kept = np.asarray(audio[a:b])
            gain = item.unit.gain
            kept = kept if gain == 1.0 else np.clip(kept * gain, -1.0, 1.0)
            if silence is not None:
                loud = np.flatnonzero(np.abs(kept) >= QUIET)
                await self._put_silence(max(0, held - (int(loud[0]) if len(loud) else len(kept))), silence.at)
                silence, held = None, 0
            first = item.window.keep_start
            words = [(w.text, (w.start_frame - first) * spf, (w.end_frame - first) * spf) for w in item.words]
            await self._put_chunk(kept, item.unit.segment, words)
        if silence is not None:
            await self._put_silence(held, silence.at)

    async def _put_silence(self, samples: int, at: int) -> None:
        await self._put_chunk(np.zeros(samples, np.float32), TextSegment("", at, at, -1, False))

    async def _put_chunk(self, samples: npt.NDArray[np.float32], segment: TextSegment,
                         words: list[tuple[str, int, int]] | None = None) -> None:
        """Queue a chunk; ``words``: (text, start, end) in samples from the chunk's start."""
        if self.options.sample_format == "int16":
            data: npt.NDArray[Any] = np.clip(np.rint(samples * 32768.0), -32768, 32767).astype(np.int16)
        else:
            data = samples.astype(np.float32, copy=False)
        now = time.monotonic()
        stats = self.stats
        rate, at = stats.sample_rate, self._next_sample
        timed = tuple(SpokenWord(text, (at + a) / rate, (at + b) / rate) for text, a, b in words or ())
        chunk = SynthesisChunk(data, rate, self._sequence, at, segment.start, segment.end, segment.text, timed)
        if stats.first_audio_at is None:
            stats.first_audio_at = now
            if self._observer is not None and stats.ttfb_s is not None:
                self._observer.on_first_audio(self.id, stats.ttfb_s)
        else:
            lateness = now - (stats.first_audio_at + chunk.start_s)
            if lateness > 0:
                stats.underruns += 1
                stats.max_lateness_s = max(stats.max_lateness_s, lateness)
        loud = np.flatnonzero(np.abs(samples) >= QUIET)
        self._quiet_tail = len(samples) - 1 - int(loud[-1]) if len(loud) else self._quiet_tail + len(samples)
        self._sequence += 1
        self._next_sample += chunk.num_samples
        stats.audio_samples = self._next_sample
        stats.chunks += 1
        await self._room.acquire()
        if not self._cancelled:
            self._out.put_nowait(chunk)

    def _segment_done(self, segment: TextSegment) -> None:
        stats = self.stats
        if segment.ends_sentence and stats.first_sentence_at is None and stats.first_audio_at is not None:
            stats.first_sentence_at = time.monotonic()
            if self._observer is not None and stats.first_sentence_s is not None:
                self._observer.on_first_sentence(self.id, stats.first_sentence_s)

    def _fail(self, exc: VoxserveError) -> None:
        self._out.put_nowait(exc)  # after the chunks already produced: the reader sees them first

    def _finish(self, status: StreamStatus) -> None:
        if self._done:
            return
        self._done = True
        self.stats.finished_at = time.monotonic()
        if self.stats.first_sentence_at is None and status == "done" and self.stats.first_audio_at is not None:
            self.stats.first_sentence_at = self.stats.finished_at  # the text never ended a sentence
        active = self._on_finish(self, status) if self._on_finish is not None else 0
        if self._observer is not None:
            self._observer.on_stream_end(self.stats, status, active)
        if status != "failed":
            self._out.put_nowait(_END)
