"""The composition root: settings -> engine (models, batchers, executor) -> pipelines.

The CLI and the server both build one :class:`Voxserve` and call its pipelines; nothing below this module
knows about either of them.
"""

from __future__ import annotations

from typing import Any

from voxserve.backends.base import DecodeOptions
from voxserve.backends.registry import load_vad
from voxserve.config import Settings
from voxserve.engine.batcher import BatchObserver
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import AsrService, ModelPool
from voxserve.pipelines.chunking import ChunkParams
from voxserve.pipelines.guard import GuardConfig
from voxserve.pipelines.long_asr import LongAsrOptions, LongFileTranscriber, ProgressHook, TextHook
from voxserve.streaming.vad import VadParams
from voxserve.types import Priority, Task, Transcript


class Voxserve:
    """One engine shared by every request of the process."""

    def __init__(self, settings: Settings, observer: BatchObserver | None = None) -> None:
        self.settings = settings
        self.pool = ModelPool(settings.asr, observer)
        self.executor = BlockingExecutor(max_workers=max(4, settings.asr.workers * 2))

    def asr(self, model: str | None = None) -> AsrService:
        """The shared service of a model (loaded on first use)."""
        return self.pool.asr(model)

    def long_options(
        self,
        *,
        language: str | None = None,
        task: Task = "transcribe",
        prompt: str | None = None,
        temperature: float = 0.0,
        word_timestamps: bool = True,
        max_duration_s: float | None = None,
    ) -> LongAsrOptions:
        """Per-request options for a long file, completed from the process settings."""
        s = self.settings
        g, c = s.guard, s.chunking
        return LongAsrOptions(
            decode=DecodeOptions(
                language=language, task=task, prompt=prompt, temperature=temperature,
                beam_size=s.asr.beam_size, word_timestamps=word_timestamps,
            ),
            chunking=ChunkParams(
                max_chunk_s=c.max_chunk_s,
                vad=VadParams(threshold=c.vad_threshold, min_silence_ms=c.min_silence_ms, speech_pad_ms=c.speech_pad_ms),
            ),
            guard=GuardConfig(
                enabled=g.enabled, max_compression_ratio=g.max_compression_ratio, min_avg_logprob=g.min_avg_logprob,
                no_speech_threshold=g.no_speech_threshold, max_words_per_minute=g.max_words_per_minute,
                min_words_per_minute=g.min_words_per_minute,
            ),
            temperatures=g.temperatures,
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

    def close(self) -> None:
        """Stop batchers and helper threads."""
        self.pool.close()
        self.executor.shutdown()
