"""The composition root: settings -> engine (models, batchers, executor) -> pipelines.

The CLI and the server both build one :class:`Voxserve` and call its pipelines; nothing below this module
knows about either of them.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from voxserve.backends.base import DecodeOptions
from voxserve.backends.registry import load_vad
from voxserve.config import Settings
from voxserve.engine.batcher import BatchObserver
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import ModelPool, Recognizer
from voxserve.pipelines.chunking import ChunkParams
from voxserve.pipelines.guard import GuardConfig
from voxserve.pipelines.long_asr import LongAsrOptions, LongFileTranscriber, ProgressHook, TextHook
from voxserve.streaming.tts_service import TtsService, build_tts_service
from voxserve.streaming.vad import VadParams
from voxserve.types import Diarization, Priority, Task, Transcript

if TYPE_CHECKING:
    from voxserve.distributed.cluster import ReplicaPool


class Voxserve:
    """One engine shared by every request of the process."""

    def __init__(self, settings: Settings, observer: BatchObserver | None = None) -> None:
        self.settings = settings
        self.pool: ModelPool | ReplicaPool = _asr_pool(settings, observer)
        self.executor = BlockingExecutor(max_workers=max(4, settings.asr.workers * 2))
        self._batch_observer = observer
        self._tts: TtsService | None = None  # built on first use by tts()
        self._speakers: Any = None  # SpeakerModelPool, built on first use by speakers()
        self._agent: Any = None  # voxserve.agent.cascade.Agent, built on first use by agent()
        self._agent_lock = threading.Lock()

    def asr(self, model: str | None = None) -> Recognizer:
        """The shared service of a model (loaded on first use): in this process, or its replicas on Ray."""
        return self.pool.asr(model)

    def guard_config(self) -> GuardConfig:
        """The hallucination guard as the process settings configure it (long files and live streams)."""
        g = self.settings.guard
        return GuardConfig(
            enabled=g.enabled, max_compression_ratio=g.max_compression_ratio, min_avg_logprob=g.min_avg_logprob,
            no_speech_threshold=g.no_speech_threshold, max_words_per_minute=g.max_words_per_minute,
            min_words_per_minute=g.min_words_per_minute, loop_words_per_s=g.loop_words_per_s,
            loop_min_avg_logprob=g.loop_min_avg_logprob,
        )

    def long_options(
        self,
        *,
        language: str | None = None,
        task: Task = "transcribe",
        prompt: str | None = None,
        temperature: float = 0.0,
        word_timestamps: bool = True,
        max_duration_s: float | None = None,
        vad: VadParams | None = None,
    ) -> LongAsrOptions:
        """Per-request options for a long file, completed from the process settings (``vad``: this request's
        speech detection instead of the settings', e.g. OpenAI's ``chunking_strategy``)."""
        s = self.settings
        g, c = s.guard, s.chunking
        return LongAsrOptions(
            decode=DecodeOptions(
                language=language, task=task, prompt=prompt, temperature=temperature,
                beam_size=s.asr.beam_size, word_timestamps=word_timestamps,
            ),
            chunking=ChunkParams(
                max_chunk_s=c.max_chunk_s,
                vad=vad or VadParams(threshold=c.vad_threshold, min_silence_ms=c.min_silence_ms,
                                     speech_pad_ms=c.speech_pad_ms),
            ),
            guard=self.guard_config(),
            temperatures=g.temperatures,
            retry_beam_size=g.retry_beam_size,
            loop_repetition_penalty=g.loop_repetition_penalty,
            rechunk=g.rechunk,
            best_of=s.asr.best_of,
            max_duration_s=max_duration_s,
            fit_below_s=c.fit_below_s,
        )

    async def transcribe_file(
        self,
        source: Any,
        options: LongAsrOptions,
        *,
        model: str | None = None,
        progress: ProgressHook | None = None,
        on_text: TextHook | None = None,
        priority: Priority = Priority.OFFLINE,
    ) -> Transcript:
        """Transcribe a file of any length (``on_text`` receives each chunk's text in order, for streaming)."""
        transcriber = LongFileTranscriber(self.asr(model), self.executor, load_vad, priority)
        return await transcriber.run(source, options, progress, on_text)

    def tts(self) -> TtsService:
        """The shared speech synthesis service (voices load on first use). Its ``observer`` attribute receives
        stream metrics; decoder batches go to this engine's batch observer."""
        if self._tts is None:
            self._tts = build_tts_service(self.settings.tts, batch_observer=self._batch_observer)
        return self._tts

    # ------------------------------------------------------------------------------ diarization

    def agent(self) -> Any:
        """The shared voice agent (:class:`~voxserve.agent.cascade.Agent`, ``[agent]`` extra): this engine's
        recogniser, executor and synthesis plus the configured LLM and knowledge index. Built on first use;
        blocking (models load), so call it off the event loop.

        Raises:
            ModelUnavailable: the ``[agent]`` extra is not installed.
        """
        with self._agent_lock:
            if self._agent is None:
                from voxserve.agent.build import build_agent

                a = self.settings.agent
                self._agent = build_agent(a, self.asr(a.asr_model or None), self.executor, self.tts())
            return self._agent

    def speakers(self) -> Any:
        """The shared diarization models (:class:`~voxserve.engine.speaker_pool.SpeakerModelPool`)."""
        if self._speakers is None:
            from voxserve.engine.speaker_pool import SpeakerModelPool, SpeakerModelsConfig

            d = self.settings.diarization
            self._speakers = SpeakerModelPool(
                SpeakerModelsConfig(d.embedder, d.workers, d.threads_per_worker, d.max_batch_size, d.max_wait_ms),
                self._batch_observer,
            )
        return self._speakers

    def live_speaker_embedder(self) -> Any:
        """An async function: utterance audio -> speaker embedding, through the shared embedder's batcher
        at live priority (for speaker labels on live streams; needs ``voxserve[diarize]``)."""
        service = self.speakers().embedder()

        async def embed(audio: Any) -> Any:
            return (await service.embed([audio], Priority.LIVE))[0]

        return embed

    def diarize_options(
        self,
        *,
        num_speakers: int | None = None,
        min_speakers: int | None = None,
        max_speakers: int | None = None,
        max_duration_s: float | None = None,
    ) -> Any:
        """Per-request diarization options (:class:`~voxserve.pipelines.diarization.DiarizeOptions`)."""
        from voxserve.pipelines.diarization import DiarizeOptions
        from voxserve.pipelines.speaker_clustering import SpeakerCount

        options = DiarizeOptions(SpeakerCount(num_speakers, min_speakers, max_speakers), max_duration_s)
        options.validate()
        return options

    async def diarize_file(
        self,
        source: Any,
        options: Any = None,
        *,
        embedder: str | None = None,
        progress: ProgressHook | None = None,
        priority: Priority = Priority.OFFLINE,
    ) -> Diarization:
        """Who spoke when in a file of any length: speaker turns (overlap kept), labels ``A``, ``B``, ...
        and per-stage wall times. ``options`` come from :meth:`diarize_options` (default: automatic count).

        Raises:
            ModelUnavailable: the ``[diarize]`` extra is not installed, or ``embedder`` is unknown.
            InvalidInput: bad audio or options.
        """
        from voxserve.backends.diarization.weights import check_installed
        from voxserve.pipelines.diarization import DiarizationParams, Diarizer

        d = self.settings.diarization
        name = embedder or d.embedder
        check_installed(name)
        pool = self.speakers()
        segmentation, embedding = await self.executor.run(lambda: (pool.segmentation(), pool.embedder(name)))
        params = DiarizationParams.for_embedder(name, step_s=d.step_s)
        if d.threshold is not None:
            params = replace(params, clustering=replace(params.clustering, threshold=d.threshold))
        diarizer = Diarizer(segmentation, embedding, self.executor, params, priority)
        return await diarizer.run(source, options or self.diarize_options(), progress)

    async def transcribe_with_speakers(
        self,
        source: Any,
        options: LongAsrOptions,
        diarize: Any = None,
        *,
        model: str | None = None,
        embedder: str | None = None,
        progress: ProgressHook | None = None,
        priority: Priority = Priority.OFFLINE,
    ) -> Transcript:
        """Transcribe and diarize a file at the same time; every word and segment gets a speaker, segments
        are split at speaker changes and ``Transcript.diarization`` holds the turns. Word timestamps in
        ``options`` give word-level speakers; without them each segment gets the speaker who overlaps it most.
        """
        from voxserve.pipelines.speaker_words import assign_speakers

        if hasattr(source, "read"):  # both pipelines read the source: keep one copy of a stream's bytes
            source = await self.executor.run(source.read)
        transcript, diarization = await asyncio.gather(
            self.transcribe_file(source, options, model=model, progress=progress, priority=priority),
            self.diarize_file(source, diarize, embedder=embedder, priority=priority),
        )
        return assign_speakers(transcript, diarization)

    def close(self) -> None:
        """Stop batchers and helper threads."""
        if self._agent is not None:
            self._agent.close()
        if self._tts is not None:
            self._tts.close()
        if self._speakers is not None:
            self._speakers.close()
        self.pool.close()
        self.executor.shutdown()


def _asr_pool(settings: Settings, observer: BatchObserver | None) -> ModelPool | ReplicaPool:
    """Speech recognisers in this process, or replicas on Ray when ``settings.ray.enabled`` (``[ray]`` extra)."""
    if settings.ray.enabled:
        from voxserve.distributed.cluster import ReplicaPool

        return ReplicaPool(settings.asr, settings.ray, observer)
    return ModelPool(settings.asr, observer)
