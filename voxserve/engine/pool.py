"""The engine's model pool: each loaded model with its one shared batcher.

Every request that uses a model goes through that model's :class:`MicroBatcher`, so work from concurrent
requests (files, streams, clients) shares batches.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from voxserve.backends.base import AsrLoadOptions, AsrModel, AsrModelInfo, AsrRequest, AsrResult, DecodeOptions
from voxserve.backends.registry import load_asr, resolve_asr
from voxserve.config import AsrConfig
from voxserve.engine.batcher import BatcherConfig, BatchObserver, MicroBatcher
from voxserve.types import Priority


class Recognizer(Protocol):
    """What pipelines and streams need of a speech recogniser service (local, or replicas on Ray)."""

    @property
    def info(self) -> AsrModelInfo:
        """Facts about the model."""
        ...

    @property
    def capacity(self) -> int:
        """Chunks it can work on at once (workers x batch size): how much to queue for full batches."""
        ...

    @property
    def busy(self) -> bool:
        """Whether work is already waiting (previews such as partial hypotheses should hold back)."""
        ...

    def check_options(self, options: DecodeOptions) -> None:
        """Raise for options the model cannot run."""
        ...

    async def transcribe(self, request: AsrRequest, priority: Priority = Priority.OFFLINE) -> AsrResult:
        """Recognise one request."""
        ...


@dataclass
class AsrService:
    """A loaded speech recogniser and its batcher (the in-process :class:`Recognizer`)."""

    model: AsrModel
    batcher: MicroBatcher[AsrRequest, AsrResult]

    @property
    def info(self) -> AsrModelInfo:
        """Facts about the model."""
        return self.model.info

    @property
    def capacity(self) -> int:
        """Workers x batch size."""
        return self.batcher.config.workers * self.batcher.config.max_batch_size

    @property
    def busy(self) -> bool:
        """At least one queued item per worker."""
        return self.batcher.queue_depth >= self.batcher.config.workers

    @property
    def queue_depth(self) -> int:
        """Items waiting for a worker."""
        return self.batcher.queue_depth

    def check_options(self, options: DecodeOptions) -> None:
        """Raise for options the model cannot run."""
        self.model.check_options(options)

    async def transcribe(self, request: AsrRequest, priority: Priority = Priority.OFFLINE) -> AsrResult:
        """Recognise one request through the shared batcher."""
        return await self.batcher.submit(request, priority)


class ModelPool:
    """Loads models on first use (thread-safe) and keeps them for the life of the process."""

    def __init__(self, config: AsrConfig, observer: BatchObserver | None = None) -> None:
        self.config = config
        self._observer = observer
        self._asr: dict[str, AsrService] = {}
        self._lock = threading.Lock()

    def asr(self, name: str | None = None) -> AsrService:
        """The service for a registered model name or directory (default: the configured model)."""
        key = resolve_asr(name or self.config.model)[0] if name else self.config.model
        with self._lock:
            service = self._asr.get(key)
            if service is None:
                service = self._load(key)
                self._asr[key] = service
        return service

    def loaded(self) -> list[str]:
        """Names of the loaded models."""
        with self._lock:
            return list(self._asr)

    def _load(self, name: str) -> AsrService:
        c = self.config
        model = load_asr(name, AsrLoadOptions.from_settings(c))
        batcher: MicroBatcher[AsrRequest, AsrResult] = MicroBatcher(
            model.transcribe_batch,
            BatcherConfig.from_settings(c),
            name=model.info.name,
            observer=self._observer,
            key=model.batch_key,
        )
        return AsrService(model, batcher)

    def close(self) -> None:
        """Stop every batcher and release the models (before interpreter shutdown tears down their threads)."""
        with self._lock:
            services = list(self._asr.values())
            self._asr.clear()
        for service in services:
            service.batcher.close()
