"""Long-file transcription: decode -> VAD -> chunk plan -> batched recognition -> guard -> stitch.

Decoding, VAD and planning run in a worker thread and hand chunks over as soon as they are final, so the
models start before the file is fully decoded and a long file is never held whole in memory. Chunks go
through the model's shared batcher (so several files share batches). Every chunk is judged by the
hallucination guard; a failing chunk is retried (its retries share the batches too), then cut in two, and
what happened is recorded per chunk. A file's first chunks go to the model as soon as they are planned and
alone detect its language; a chunk that detected another one is redone in the file's at the end.

Retries are deterministic by default (the same file and settings give the same transcript on every run):
the standard 30 s window, then beam search, then a repetition penalty against a looping decoder, then the
chunk cut in two. Sampled retries at rising temperatures (Whisper's fallback) run only when configured:
CTranslate2 offers no per-call random seed, so sampled text differs from run to run. The accepted text is
the best of all attempts, the first included: a retry never replaces a better first result.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from voxserve.audio import iter_decode, probe
from voxserve.backends.base import AsrRequest, AsrResult, DecodeOptions, VadModel
from voxserve.config import Settings
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import Recognizer
from voxserve.errors import Cancelled, InvalidInput
from voxserve.pipelines.chunking import ChunkParams, ChunkPlan, StreamingPlanner, split_in_two
from voxserve.pipelines.guard import GuardConfig, LoopEvidence, Verdict, assess, token_cap, without_repeats
from voxserve.pipelines.stitching import ChunkText, stitch, transcript_text
from voxserve.pipelines.vad import VadParams
from voxserve.text.keyterms import copies_glossary, glossary_prompt, parse_keyterms
from voxserve.types import SAMPLE_RATE, AttemptReport, ChunkReport, Priority, Transcript, TranscriptStats

log = logging.getLogger(__name__)
ProgressHook = Callable[[float, float], None]
"""Called with (audio seconds done, audio seconds in total)."""
TextHook = Callable[[str], None]
"""Called with each chunk's accepted text, in file order, as soon as every earlier chunk is done."""
_QUEUE_CHUNKS = 32
_LEAD = 2
"""A file's first chunks, sent alone as soon as each is planned (one per worker on 2 cores): the workers start
while the VAD plans the rest, the file's language is known before the rest is sent, and streamed text comes
after one small batch. Waiting for a first group of chunks instead left both workers idle while the VAD planned
it (0.4 s on the check-half meetings, whose first chunks are short and far apart). Whole processes, alternating
rounds: meetings 9.02 -> 8.52 s medians (5 rounds, faster in each), check10 8.52 -> 8.59 s (5), at 8 kHz 8.93
-> 8.89 s (3): the same text on each (docs/benchmarks.md). At most the engine's capacity."""
_MIN_OPENING = 2  # chunks at the model before a file's language is known, at least (one per worker on 2 cores)
_BLOCK_SAMPLES = 30 * SAMPLE_RATE
_MIN_RECHUNK_SAMPLES = 2 * SAMPLE_RATE
PER_SEGMENT_JOIN_GAP_S = 0.5
"""With a language per segment, speech more than this far apart (a pause of about 0.9 s once the VAD's
padding is counted) starts a new chunk. Measured on five check-half clips in four languages joined by 1.5 s
pauses: the default 5 s gap packed all of them into one chunk, decoded in one language (3 of 10 segments in
the right one, 95 % WER); at 0.5 s, 7 chunks, every segment in its language, 15 % WER (docs/benchmarks.md)."""


@dataclass(frozen=True)
class LongAsrOptions:
    """Options of one long-file transcription.

    ``fit_below_s``: chunks shorter than this are encoded in a fitted window (see
    :class:`~voxserve.backends.base.DecodeOptions`) instead of a padded 30 s one.

    ``keyterms``: words and names to favour; they lead the decoder prompt as a glossary
    (:func:`~voxserve.text.keyterms.glossary_prompt`), and a chunk whose text only copies the glossary is
    decoded again without it.

    ``language_per_segment``: every chunk keeps the language it detected (among
    ``decode.allowed_languages`` when given) and its segments carry it; chunks are not packed across pauses
    longer than :data:`PER_SEGMENT_JOIN_GAP_S` so that one chunk rarely holds two languages. Off: the file
    is in its first speech's language.
    """

    decode: DecodeOptions = DecodeOptions()
    chunking: ChunkParams = ChunkParams()
    guard: GuardConfig = GuardConfig()
    temperatures: tuple[float, ...] = ()
    rechunk: bool = True
    best_of: int = 3
    retry_beam_size: int = 5
    loop_repetition_penalty: float = 1.3
    max_duration_s: float | None = None
    fit_below_s: float = 20.0
    keyterms: tuple[str, ...] = ()
    language_per_segment: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, decode: DecodeOptions, *, vad: VadParams | None = None,
                      max_duration_s: float | None = None, keyterms: tuple[str, ...] = (),
                      language_per_segment: bool = False) -> LongAsrOptions:
        """One request's options: its ``decode`` choices (the beam width comes from ``asr.beam_size``),
        ``vad`` (None = the settings' speech detection), its ``keyterms`` (after the settings' ``asr.keyterms``)
        and language mode, the rest from the guard, chunking and ASR settings.
        ``tests/unit/test_settings_defaults.py`` checks that the defaults of both agree."""
        g, c = settings.guard, settings.chunking
        chunking = ChunkParams.from_settings(c, vad)
        if language_per_segment:
            chunking = replace(chunking, max_join_gap_s=min(chunking.max_join_gap_s, PER_SEGMENT_JOIN_GAP_S))
        return cls(
            decode=replace(decode, beam_size=settings.asr.beam_size),
            keyterms=parse_keyterms((*settings.asr.keyterms, *keyterms)),
            language_per_segment=language_per_segment,
            chunking=chunking,
            guard=GuardConfig.from_settings(g),
            temperatures=g.temperatures,
            rechunk=g.rechunk,
            best_of=settings.asr.best_of,
            retry_beam_size=g.retry_beam_size,
            loop_repetition_penalty=g.loop_repetition_penalty,
            max_duration_s=max_duration_s,
            fit_below_s=c.fit_below_s,
        )


@dataclass
class _Outcome:
    """The accepted text of a chunk (several when it was re-chunked) and its report."""

    texts: list[ChunkText]
    report: ChunkReport
    language: str = ""
    language_probability: float = 0.0


@dataclass
class _Progress:
    hook: ProgressHook | None
    total_s: float
    on_text: TextHook | None = None
    done: dict[int, tuple[int, str]] = field(default_factory=dict)
    spans: dict[int, int] = field(default_factory=dict)
    frontier: int = 0
    frontier_end: int = 0
    reported: float = 0.0

    def chunk_done(self, plan: ChunkPlan, text: str) -> None:
        """A chunk is final: its text goes out once every earlier chunk's has; progress counts it at once.

        Progress is the file up to the last chunk of the contiguous done run, plus the spans of the chunks
        done beyond it (batches finish out of order: counting the run alone sat at 12 % of a file and then
        jumped to 100 %). It only grows."""
        self.done[plan.index] = (plan.file_end, text)
        self.spans[plan.index] = plan.file_end - plan.file_start
        while self.frontier in self.done:
            if self.on_text is not None and self.done[self.frontier][1]:
                self.on_text(self.done[self.frontier][1])
            self.frontier_end = self.done[self.frontier][0]
            self.frontier += 1
        if self.hook is not None:
            ahead = sum(span for i, span in self.spans.items() if i >= self.frontier)
            done = max(self.reported, min(self.total_s, (self.frontier_end + ahead) / SAMPLE_RATE))
            self.reported = done
            self.hook(done, self.total_s)

    def finish(self, total_samples: int) -> None:
        if self.hook is not None:
            total = max(self.total_s, total_samples / SAMPLE_RATE)
            self.hook(total, total)


class LongFileTranscriber:
    """Transcribes files of any length with one shared speech recogniser."""

    def __init__(
        self,
        asr: Recognizer | Callable[[], Recognizer],
        executor: BlockingExecutor,
        vad_factory: Callable[[], VadModel],
        priority: Priority = Priority.OFFLINE,
    ) -> None:
        """``asr``: the recogniser, or a function that returns it and may load its model first (a cold
        start): it is then called in ``executor`` while the file is already being decoded and scored, so
        the model's load and the planning of the first chunks overlap (measured: the first batch started
        1.4 s after the load ended, the whole 1 s load before it, on a 10 min file; both now run at once)."""
        self._load: Callable[[], Recognizer] | None = asr if callable(asr) else None
        self._asr: Recognizer | None = None if callable(asr) else asr
        self.executor = executor
        self.vad_factory = vad_factory
        self.priority = priority

    @property
    def asr(self) -> Recognizer:
        """The recogniser (loaded by :meth:`run` when a loader was given)."""
        if self._asr is None:
            raise RuntimeError("the recogniser is loaded when run() starts")
        return self._asr

    async def run(
        self,
        source: Any,
        options: LongAsrOptions = LongAsrOptions(),
        progress: ProgressHook | None = None,
        on_text: TextHook | None = None,
    ) -> Transcript:
        """Transcribe ``source``: a path, bytes or binary file object (decoded as it is read), or audio
        already decoded to 16 kHz mono float32 (a 1-D array)."""
        started = time.monotonic()
        if self._asr is not None:
            self._asr.check_options(options.decode)
        duration_s = await self.executor.run(_duration_s, source)
        if options.max_duration_s and duration_s and duration_s > options.max_duration_s:
            raise InvalidInput(
                f"audio is {duration_s:.0f} s long; the limit is {options.max_duration_s:.0f} s",
                param="file",
                code="audio_too_long",
            )
        queue: asyncio.Queue[tuple[ChunkPlan, np.ndarray] | int | BaseException] = asyncio.Queue(_QUEUE_CHUNKS)
        stop = threading.Event()
        producer = asyncio.ensure_future(self.executor.run(self._produce, source, options, queue, asyncio.get_running_loop(), stop))
        try:
            if self._asr is None and self._load is not None:
                self._asr = await self.executor.run(self._load)
                self._asr.check_options(options.decode)
            tracker = _Progress(progress, duration_s or 0.0, on_text)
            outcomes, n_samples = await self._consume(queue, options, tracker)
        finally:
            stop.set()
            await asyncio.gather(producer, return_exceptions=True)
        return self._assemble(outcomes, n_samples, options, time.monotonic() - started)

    # ------------------------------------------------------------------------------------ producer

    def _produce(
        self,
        source: Any,
        options: LongAsrOptions,
        queue: asyncio.Queue[Any],
        loop: asyncio.AbstractEventLoop,
        stop: threading.Event,
    ) -> None:
        """Worker thread: decode, score frames, plan, and queue (plan, audio); last an int (total samples)."""

        def put(item: Any) -> None:
            # One put per item: a put that times out is still pending, so wait on it rather than put again.
            pending = asyncio.run_coroutine_threadsafe(queue.put(item), loop)
            while not stop.is_set():
                try:
                    pending.result(timeout=0.5)
                    return
                except TimeoutError:
                    continue
            pending.cancel()

        try:
            put(self._scan(source, options, put, stop))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
            put(exc)

    def _scan(self, source: Any, options: LongAsrOptions, put: Callable[[Any], None], stop: threading.Event) -> int:
        vad = self.vad_factory()
        frame = vad.frame_samples
        planner = StreamingPlanner(options.chunking)
        buffer, buffer_start, total, tail = np.zeros(0, np.float32), 0, 0, np.zeros(0, np.float32)
        for block in _blocks(source, options.max_duration_s):
            if stop.is_set():
                raise Cancelled("transcription cancelled")
            total += len(block)
            buffer = np.concatenate([buffer, block])
            scored = np.concatenate([tail, block])
            usable = len(scored) // frame * frame
            tail = scored[usable:]
            for plan in planner.feed(vad.probabilities(scored[:usable])):
                put((plan, _cut(buffer, buffer_start, plan)))
            drop = planner.base - buffer_start
            buffer, buffer_start = buffer[drop:], planner.base
        if len(tail):  # the last, partial frame may complete the planning window and release chunks
            for plan in planner.feed(vad.probabilities(np.pad(tail, (0, frame - len(tail))))):
                put((plan, _cut(buffer, buffer_start, plan)))
        for plan in planner.finish(total):
            put((plan, _cut(buffer, buffer_start, plan)))
        return total

    # ------------------------------------------------------------------------------------ consumer

    async def _consume(
        self, queue: asyncio.Queue[Any], options: LongAsrOptions, progress: _Progress
    ) -> tuple[list[_Outcome], int]:
        """Hand the planned chunks to a :class:`_Dispatcher` as they come; at the end, every chunk's outcome
        (the file's language settled) and the number of samples in the file."""

        def start(plan: ChunkPlan, audio: np.ndarray, decode: DecodeOptions) -> asyncio.Task[_Outcome]:
            known = dispatcher.file_language if once else None
            return asyncio.ensure_future(self._chunk(plan, audio, decode, options, progress, known))

        once = options.decode.language is None and not options.language_per_segment and self.asr.info.multilingual
        group = max(1, self.asr.capacity // 2)
        dispatcher = _Dispatcher(
            start, options.decode, group=group, opening=max(group, min(self.asr.capacity, _MIN_OPENING)),
            lead=min(_LEAD, self.asr.capacity),
            total_s=progress.total_s, max_chunk_s=options.chunking.max_chunk_s, language_once=once,
        )
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, int):
                    outcomes = await self._settle_language(await dispatcher.results(), dispatcher.items, options)
                    progress.finish(item)
                    return outcomes, item
                dispatcher.add(item)
        except BaseException:
            dispatcher.cancel()
            raise

    async def _settle_language(
        self, outcomes: list[_Outcome], items: list[tuple[ChunkPlan, np.ndarray]], options: LongAsrOptions
    ) -> list[_Outcome]:
        """The file's language is its first speech's; chunks that detected another one are redone in it.

        The chunks sent before the first speech was decoded (see :class:`_Dispatcher`) each detected their
        language from their own encoder output, so no worker waited for the first chunk; the later ones carry
        the file's language. On single-language audio nothing is redone. The first speech is the first chunk
        that produced text (a first chunk of music or noise says little).
        """
        if options.decode.language is not None or options.language_per_segment or not outcomes:
            return outcomes
        first = next((o for o in outcomes if any(t.text for t in o.texts)), outcomes[0])
        language = first.language
        decode = replace(options.decode, language=language)
        redo = [i for i, o in enumerate(outcomes) if o.language != language]
        redone = await asyncio.gather(
            *(self._recognize(*items[i], decode, options) for i in redo)
        )
        for i, outcome in zip(redo, redone):
            outcome.language_probability = first.language_probability
            outcome.report = _after(outcomes[i].report.history, outcome.report)
            outcomes[i] = outcome
        outcomes[0].language, outcomes[0].language_probability = language, first.language_probability
        return outcomes

    async def _chunk(
        self, plan: ChunkPlan, audio: np.ndarray, decode: DecodeOptions, options: LongAsrOptions, progress: _Progress,
        file_language: Callable[[], str | None] | None,
    ) -> _Outcome:
        outcome = await self._recognize(plan, audio, decode, options, file_language=file_language)
        progress.chunk_done(plan, " ".join(t.text for t in outcome.texts if t.text).strip())
        return outcome

    async def _recognize(
        self, plan: ChunkPlan, audio: np.ndarray, decode: DecodeOptions, options: LongAsrOptions, *, half: bool = False,
        file_language: Callable[[], str | None] | None = None,
    ) -> _Outcome:
        """A chunk's attempts until one passes the guard, then its halves when it must be cut (``half``: this is
        a half of a chunk, cut again only where it skipped joined speech).

        ``file_language``: for a chunk sent before the file's language was known (``decode.language`` None), the
        file's language once it is (None before). A chunk that detected another one stops retrying as soon as
        the file's is known (``_settle_language`` redoes it in that language, so retries in its own were wasted
        work: on meetings, short chunks that heard Welsh retried and were cut in Welsh first); one that detected
        the file's language retries in it without detecting again."""
        attempts: list[tuple[AsrResult, Verdict]] = []
        history: list[AttemptReport] = []  # each attempt as verbose_json reports it

        def settled() -> str | None:  # the file's language, once known, for a chunk that detected its own
            return file_language() if file_language is not None and decode.language is None and attempts else None

        def redone() -> bool:  # detected another language than the file's: _settle_language redoes the chunk
            known = settled()
            return bool(known) and known != attempts[0][0].language

        allow_rechunk = options.rechunk and not half
        joined = len(plan.pieces) > 1 and options.guard.enabled  # speech from several places: check each is heard
        unheard = False
        with_glossary = bool(options.keyterms)
        for opts in attempt_options(len(audio), decode, options):
            if redone():
                return self._accept(plan, attempts, history, rechunked=False)
            if known := settled():
                opts = replace(opts, language=known)
            if joined:
                opts = replace(opts, word_timestamps=True)
            result = await self._decode(audio, opts, options.keyterms if with_glossary else ())
            if with_glossary and copies_glossary(result.text, options.keyterms):
                with_glossary = False  # the glossary was said, not heard: this and later attempts go without it
                result = await self._decode(audio, opts, ())
            evidence = LoopEvidence(
                hit_cap=opts.max_new_tokens is not None and len(result.tokens) >= opts.max_new_tokens,
                word_times=tuple((w.start / SAMPLE_RATE, w.end / SAMPLE_RATE) for w in result.words),
                speech_end_s=len(audio) / SAMPLE_RATE,
            )
            verdict = assess(result.text, result.avg_logprob, result.no_speech_prob, len(audio), result.language,
                             options.guard, evidence)
            unheard = joined and not verdict.silence and bool(unheard_pieces(plan, result, options.guard.max_word_s))
            if unheard:
                verdict = replace(verdict, passed=False, reasons=(*verdict.reasons, "unheard_speech"))
            attempts.append((result, verdict))
            history.append(_attempt_report(plan, len(audio), opts, result, verdict))
            if verdict.passed:
                accepted = self._accept(plan, attempts, history, rechunked=False)
                thin = thin_pieces(plan, result, options.guard.min_piece_words_per_s) if joined and not half else []
                if thin and len(audio) >= _MIN_RECHUNK_SAMPLES and not redone():
                    return await self._heard_more(plan, audio, decode, options, attempts, history, accepted, thin)
                return accepted
            if unheard:  # Whisper stopped before some of the joined speech: cut at the joins, not retry whole
                break
            if opts.window == "full" and set(verdict.reasons) <= _THIN:  # beam search and penalties add no words
                break
        tried: tuple[AttemptReport, ...] = ()
        if (allow_rechunk or unheard) and len(audio) >= _MIN_RECHUNK_SAMPLES and not redone():
            subs = await self._halves(plan, audio, decode, options, attempts)
            if subs and (all(s.report.passed for s in subs) or unheard):  # halves hear more than the whole did
                return self._merge(plan, attempts, history, subs)
            tried = _halves_history(subs, accepted=False)
        return self._accept(plan, attempts, history, rechunked=bool(tried), failed=True, tried=tried)

    async def _halves(
        self, plan: ChunkPlan, audio: np.ndarray, decode: DecodeOptions, options: LongAsrOptions,
        attempts: list[tuple[AsrResult, Verdict]],
    ) -> list[_Outcome]:
        """The chunk cut in two (:func:`split_in_two`) and each half recognised in the language of the chunk's
        first attempt, without further re-chunking of its own (a half that again drops joined speech is cut
        again, bounded by its number of pieces) and without a check for thin pieces (on the three tune-half
        programs, a half cut again for thin pieces never kept the cut's text: four decodes in vain); empty
        when the chunk cannot be cut."""
        parts = split_in_two(plan, audio)
        if len(parts) != 2:
            return []
        first_lang = replace(decode, language=decode.language or attempts[0][0].language)
        return list(await asyncio.gather(
            *(self._recognize(p, a, first_lang, options, half=True) for p, a in parts)
        ))

    async def _heard_more(
        self, plan: ChunkPlan, audio: np.ndarray, decode: DecodeOptions, options: LongAsrOptions,
        attempts: list[tuple[AsrResult, Verdict]], history: list[AttemptReport], accepted: _Outcome, thin: list[int],
    ) -> _Outcome:
        """A passing chunk with thin pieces (:func:`thin_pieces`) decoded again cut at its joins: the halves'
        text replaces the chunk's only when it holds at least one more word per second of the thin pieces'
        speech (speech the whole decode skipped); otherwise the chunk keeps its own text (halves that only
        spell a word differently, or hear a filler as a word, change nothing), and its report counts the
        halves' attempts (and its history lists them, none accepted)."""
        subs = await self._halves(plan, audio, decode, options, attempts)
        if not subs:
            return accepted
        thin_s = sum(plan.pieces[i].length for i in thin) / SAMPLE_RATE
        if _word_count(subs) >= _word_count([accepted]) + math.ceil(thin_s):
            merged = self._merge(plan, attempts, history, subs)
            return replace(merged, report=replace(merged.report, reasons=(*merged.report.reasons, "thin_speech")))
        return self._accept(plan, attempts, history, rechunked=True, tried=_halves_history(subs, accepted=False))

    async def _decode(self, audio: np.ndarray, opts: DecodeOptions, keyterms: tuple[str, ...]) -> AsrResult:
        """One decode, with the key terms' glossary ahead of the prompt when there are any."""
        if keyterms:
            opts = replace(opts, prompt=glossary_prompt(keyterms, opts.prompt))
        return await self.asr.transcribe(AsrRequest(audio, opts), self.priority)

    @staticmethod
    def _accept(
        plan: ChunkPlan,
        attempts: list[tuple[AsrResult, Verdict]],
        history: list[AttemptReport],
        *,
        rechunked: bool,
        failed: bool = False,
        tried: tuple[AttemptReport, ...] = (),
    ) -> _Outcome:
        """The outcome of a chunk's own attempts (``history``: as reported; ``tried``: those spent on its halves
        in vain): the best of them, the first included (passed first, then fewest reasons, then most likely)."""
        best = min(range(len(attempts)),
                   key=lambda i: (not attempts[i][1].passed, len(attempts[i][1].reasons), -attempts[i][0].avg_logprob))
        result, verdict = attempts[best]
        if failed and "repetition" in verdict.reasons:  # the least bad attempt, without its loops
            result = without_repeats(result)
        listed = (*(replace(a, accepted=i == best) for i, a in enumerate(history)), *tried)
        report = ChunkReport(
            index=plan.index, start=plan.file_start, end=plan.file_end, speech_samples=plan.length,
            attempts=len(listed), temperature=result.temperature, rechunked=rechunked,
            passed=not failed, reasons=tuple(r for _, v in attempts for r in v.reasons), history=listed,
        )
        text = ChunkText(
            plan=plan,
            text="" if verdict.silence else result.text,
            tokens=() if verdict.silence else result.tokens,
            words=() if verdict.silence else result.words,
            temperature=result.temperature,
            avg_logprob=result.avg_logprob,
            compression_ratio=verdict.compression_ratio,
            no_speech_prob=result.no_speech_prob,
            language=result.language,
        )
        return _Outcome([text], report, result.language, result.language_probability)

    @staticmethod
    def _merge(plan: ChunkPlan, attempts: list[tuple[AsrResult, Verdict]], history: list[AttemptReport],
               subs: list[_Outcome]) -> _Outcome:
        """The outcome of a chunk whose halves' texts replace its own."""
        listed = (*history, *_halves_history(subs))
        report = ChunkReport(
            index=plan.index, start=plan.file_start, end=plan.file_end, speech_samples=plan.length,
            attempts=len(listed),
            temperature=max(s.report.temperature for s in subs), rechunked=True,
            passed=all(s.report.passed for s in subs),
            reasons=tuple(r for _, v in attempts for r in v.reasons),
            history=listed,
        )
        return _Outcome([t for s in subs for t in s.texts], report, subs[0].language, subs[0].language_probability)

    # ------------------------------------------------------------------------------------ assembly

    def _assemble(self, outcomes: list[_Outcome], n_samples: int, options: LongAsrOptions, wall_s: float) -> Transcript:
        outcomes.sort(key=lambda o: o.report.index)
        if options.language_per_segment and not options.decode.language:
            language = _main_language(outcomes)
        else:
            language = options.decode.language or (outcomes[0].language if outcomes else "") or "en"
        text_language = "en" if options.decode.task == "translate" else language
        per_segment = options.language_per_segment and options.decode.task == "transcribe"
        segments = stitch([t for o in outcomes for t in o.texts], text_language, segment_languages=per_segment)
        reports = tuple(o.report for o in outcomes)
        stats = TranscriptStats(
            wall_s=wall_s,
            chunks=len(reports),
            retries=sum(max(0, r.attempts - 1) for r in reports),
            rechunks=sum(1 for r in reports if r.rechunked),
            guard_failures=sum(1 for r in reports if not r.passed),
            speech_s=sum(r.speech_samples for r in reports) / SAMPLE_RATE,
            chunk_reports=reports,
        )
        return Transcript(
            text=transcript_text(segments, text_language),
            language=language,
            duration=n_samples,
            segments=segments,
            language_probability=outcomes[0].language_probability if outcomes and not options.decode.language else 1.0,
            task=options.decode.task,
            stats=stats,
        )


class _Dispatcher:
    """Sends one file's chunks to the recogniser, in groups, and with the file's language once it is known.

    Groups are about half the engine's capacity, so batches split evenly over workers (a CPU decoder does far
    more per second at batch 4 than at batch 1); near the end of the file the rest waits to be split evenly
    once. The first ``lead`` chunks go alone, as soon as they are planned (:data:`_LEAD`), so the workers start
    before a group is planned and streamed text comes after one small batch rather than after the whole file's.

    ``language_once`` (no language given, none kept per segment, a multilingual model): the file is in its
    first speech's language, detected once. The lead chunks go without a language (each detects its own); the
    rest waits until the file's language is known, and every chunk sent after that carries it and skips
    detection. When the lead chunks are done and none gave text (music, noise), the rest goes on without a
    language, no more than ``opening`` chunks of the file at the model until the first speech is decoded (a
    group, at least two: with batches of one chunk a group is half the workers; a chunk that finishes is
    replaced at once, so no worker waits on the first speech). Chunks that detected another language are redone
    in the file's at the end (``_settle_language``). Without ``language_once`` the rest follows the lead at once.
    """

    def __init__(
        self,
        start: Callable[[ChunkPlan, np.ndarray, DecodeOptions], asyncio.Task[_Outcome]],
        decode: DecodeOptions,
        *,
        group: int,
        opening: int,
        lead: int,
        total_s: float,
        max_chunk_s: float,
        language_once: bool,
    ) -> None:
        self._start = start
        self._decode = decode
        self._group, self._opening, self._lead = group, opening, lead
        self._total_s, self._max_chunk_s = total_s, max_chunk_s
        self._once = language_once
        self._language: str | None = None
        self._eof = self._closed = False
        self.items: list[tuple[ChunkPlan, np.ndarray]] = []
        self.tasks: list[asyncio.Task[_Outcome]] = []

    def add(self, item: tuple[ChunkPlan, np.ndarray]) -> None:
        """A newly planned chunk (in file order)."""
        self.items.append(item)
        self._dispatch()

    async def results(self) -> list[_Outcome]:
        """Every chunk has been planned: send the rest and return every chunk's outcome, in file order."""
        self._eof = True
        self._dispatch()
        while len(self.tasks) < len(self.items):  # held back until the first speech is decoded
            done, _ = await asyncio.wait([t for t in self.tasks if not t.done()], return_when=asyncio.FIRST_COMPLETED)
            await asyncio.gather(*done)  # a failed chunk fails the file now
            self._dispatch()
        return list(await asyncio.gather(*self.tasks))

    def cancel(self) -> None:
        """Stop sending and cancel every chunk sent."""
        self._closed = True
        for task in self.tasks:
            task.cancel()

    def _dispatch(self) -> None:
        pending = len(self.items) - len(self.tasks)
        if self._closed or pending == 0:
            return
        if len(self.items) <= self._lead:
            self._send(pending)
            return
        unknown = self._once and self.file_language() is None
        if unknown and not all(t.done() for t in self.tasks[: self._lead]):
            return  # the rest goes in the file's language, or once the lead chunks gave none
        if not self._eof:
            left_s = self._total_s - self.items[-1][0].file_end / SAMPLE_RATE
            few_left = 0 < left_s < self._group * self._max_chunk_s / 2  # wait: one even split of all
            if pending < self._group or few_left:
                return
        if unknown:
            pending = min(pending, self._opening - sum(1 for t in self.tasks if not t.done()))
        self._send(pending)

    def _send(self, count: int) -> None:
        decode = self._decode if self._language is None else replace(self._decode, language=self._language)
        for plan, audio in self.items[len(self.tasks) : len(self.tasks) + max(0, count)]:
            task = self._start(plan, audio, decode)
            if self._once:
                task.add_done_callback(lambda _: self._dispatch())
            self.tasks.append(task)

    def file_language(self) -> str | None:
        """The language of the first chunk that gave text, once it and every chunk before it are done (as
        ``_settle_language`` chooses it); None before."""
        if self._language is None:
            for task in self.tasks:
                if not task.done() or task.cancelled() or task.exception() is not None:
                    return None
                outcome = task.result()
                if any(t.text for t in outcome.texts):
                    self._language = outcome.language or None
                    break
        return self._language


def _main_language(outcomes: list[_Outcome]) -> str:
    """The language of most of the transcribed speech (by samples of chunks that gave text)."""
    spoken: dict[str, int] = {}
    for o in outcomes:
        for t in o.texts:
            if t.text and t.language:
                spoken[t.language] = spoken.get(t.language, 0) + t.plan.length
    if not spoken:
        return (outcomes[0].language if outcomes else "") or "en"
    return max(spoken, key=lambda code: spoken[code])


def attempt_options(n_samples: int, decode: DecodeOptions, options: LongAsrOptions) -> list[DecodeOptions]:
    """The decoding attempts of a chunk, in order, until one passes the guard.

    A short chunk first gets a fitted window (fast); if that fails, the standard 30 s window (Whisper loops
    far less there); then beam search; then a repetition penalty; then, only when configured, sampling at
    rising temperatures.
    """
    base = replace(decode, max_new_tokens=decode.max_new_tokens or token_cap(n_samples), best_of=1)
    fitted = n_samples < options.fit_below_s * SAMPLE_RATE
    attempts = [replace(base, window="fit" if fitted else "full")]
    if not options.guard.enabled:
        return attempts
    full = replace(base, window="full")
    if fitted:
        attempts.append(full)
    if decode.temperature == 0 and options.retry_beam_size > decode.beam_size:
        attempts.append(replace(full, beam_size=options.retry_beam_size))
    if options.loop_repetition_penalty > 1.0:
        attempts.append(replace(full, repetition_penalty=options.loop_repetition_penalty))
    hotter = [t for t in options.temperatures if t > decode.temperature]
    attempts += [replace(full, temperature=t, best_of=options.best_of) for t in hotter]
    return attempts


_THIN = {"too_few_words"}
"""Reasons a wider beam or a repetition penalty cannot mend: the decoder stopped early. After the 30 s
window (the fitted window's usual fault) only halves are tried."""

MAX_UNHEARD_S = 2.0
"""A stretch of joined speech at least this long in which no word of the chunk's text lies is speech the
decoder skipped (Whisper's word timings stretch words over short pauses; VAD pieces hold speech)."""


def unheard_pieces(plan: ChunkPlan, result: AsrResult, max_word_s: float = GuardConfig.max_word_s) -> list[int]:
    """Indices of the plan's pieces holding a stretch of :data:`MAX_UNHEARD_S` or more that no word of the
    result covers (a word stretched over ``max_word_s`` or more covers nothing,
    :attr:`~voxserve.pipelines.guard.GuardConfig.max_word_s`): speech the decoder skipped."""
    limit = int(MAX_UNHEARD_S * SAMPLE_RATE)
    words = [w for w in result.words if w.end - w.start < max_word_s * SAMPLE_RATE]
    missing = []
    for i, piece in enumerate(plan.pieces):
        lo, hi = piece.local_start, piece.local_start + piece.length
        inside = sorted((max(lo, w.start), min(hi, w.end)) for w in words if w.end > lo and w.start < hi)
        edge = lo
        for start, end in inside:
            if start - edge >= limit:
                break
            edge = max(edge, end)
        else:
            if hi - edge < limit:
                continue
        missing.append(i)
    return missing


def thin_pieces(plan: ChunkPlan, result: AsrResult, min_words_per_s: float = GuardConfig.min_piece_words_per_s
                ) -> list[int]:
    """Indices of the plan's pieces of :data:`MAX_UNHEARD_S` or more in which the result says fewer than
    ``min_words_per_s`` words a second (a word counted in the piece its middle lies in): speech the decoder may
    have skipped while the aligner spread the next words over it, each shorter than
    :attr:`~voxserve.pipelines.guard.GuardConfig.max_word_s` and closer together than :data:`MAX_UNHEARD_S`
    (check half: a skipped clip came back as "On" and "the whole," 1.1 s each)."""
    limit = int(MAX_UNHEARD_S * SAMPLE_RATE)
    thin = []
    for i, piece in enumerate(plan.pieces):
        if piece.length < limit:
            continue
        lo, hi = piece.local_start, piece.local_start + piece.length
        said = sum(1 for w in result.words if lo <= (w.start + w.end) // 2 < hi)
        if said < min_words_per_s * piece.length / SAMPLE_RATE:
            thin.append(i)
    return thin


def _attempt_report(plan: ChunkPlan, n_samples: int, opts: DecodeOptions, result: AsrResult, verdict: Verdict
                    ) -> AttemptReport:
    """One attempt as verbose_json reports it (not accepted: :meth:`LongFileTranscriber._accept` marks the
    one whose text is kept)."""
    return AttemptReport(
        part="", start=plan.file_start, end=plan.file_end, window_s=float(opts.window_s(n_samples)),
        beam_size=opts.beam_size, temperature=opts.temperature, repetition_penalty=opts.repetition_penalty,
        language=result.language, passed=verdict.passed, reasons=verdict.reasons, avg_logprob=result.avg_logprob,
        compression_ratio=verdict.compression_ratio, no_speech_prob=result.no_speech_prob,
        words=len(result.text.split()),
    )


def _halves_history(subs: list[_Outcome], *, accepted: bool = True) -> tuple[AttemptReport, ...]:
    """The attempts of a chunk's halves, each labelled with its half (``"1"``, ``"2"``, ``"2.1"``...);
    ``accepted=False`` when the chunk keeps its own text."""
    return tuple(
        replace(a, part=f"{k}.{a.part}" if a.part else str(k), accepted=accepted and a.accepted)
        for k, sub in enumerate(subs, 1) for a in sub.report.history
    )


def _after(earlier: tuple[AttemptReport, ...], report: ChunkReport) -> ChunkReport:
    """``report`` of a chunk redone in the file's language, its first attempts (in its own) listed first."""
    listed = (*(replace(a, accepted=False) for a in earlier), *report.history)
    return replace(report, attempts=len(listed), history=listed)


def _word_count(outcomes: list[_Outcome]) -> int:
    """Words in the accepted texts of several outcomes."""
    return sum(len(t.text.split()) for o in outcomes for t in o.texts)


def _cut(buffer: np.ndarray, buffer_start: int, plan: ChunkPlan) -> np.ndarray:
    """The audio of a plan's pieces, joined, from a buffer that starts at ``buffer_start``."""
    parts = [buffer[p.file_start - buffer_start : p.file_end - buffer_start] for p in plan.pieces]
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def _duration_s(source: Any) -> float | None:
    """The length of a source in seconds (from its container, or the samples of decoded audio)."""
    if isinstance(source, np.ndarray):
        return len(source) / SAMPLE_RATE
    return probe(source).duration_s


def _blocks(source: Any, max_duration_s: float | None) -> Iterator[np.ndarray]:
    """A source's audio in blocks of ``_BLOCK_SAMPLES``: decoded as it is read, or sliced when decoded already."""
    if not isinstance(source, np.ndarray):
        yield from iter_decode(source, block_samples=_BLOCK_SAMPLES, max_duration_s=max_duration_s)
        return
    if source.ndim != 1 or not len(source):
        raise InvalidInput("decoded audio must be a non-empty 1-D array of 16 kHz samples", param="file")
    audio = np.ascontiguousarray(source, dtype=np.float32)
    for start in range(0, len(audio), _BLOCK_SAMPLES):
        yield audio[start:start + _BLOCK_SAMPLES]
