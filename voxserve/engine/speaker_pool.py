"""The diarization models of the engine: local speaker segmentation and speaker embedders, each with its
one shared :class:`~voxserve.engine.batcher.MicroBatcher`, so windows and embeddings of concurrent
requests share model batches like ASR chunks do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from voxserve.backends.base import EmbedderInfo, SegmentationInfo, SegmentationModel, SpeakerEmbedder
from voxserve.config import DiarizationConfig
from voxserve.engine.batcher import BatcherConfig, BatchObserver, MicroBatcher
from voxserve.types import Float32Array, Priority


@dataclass(frozen=True)
class SpeakerModelsConfig:
    """Placement and batching of the diarization models (defaults: ``DiarizationConfig``'s, via
    :meth:`from_settings`; the settings are where each default is written)."""

    embedder: str
    workers: int
    threads_per_worker: int
    max_batch_size: int
    max_wait_ms: float
    max_queue: int = 65536

    @classmethod
    def from_settings(cls, d: DiarizationConfig) -> SpeakerModelsConfig:
        """The diarization section of the settings."""
        return cls(d.embedder, d.workers, d.threads_per_worker, d.max_batch_size, d.max_wait_ms)


@dataclass
class SegmentationService:
    """A loaded segmentation model and its batcher."""

    model: SegmentationModel
    batcher: MicroBatcher[Float32Array, Float32Array]

    @property
    def info(self) -> SegmentationInfo:
        """Window and frame geometry."""
        return self.model.info

    async def segment(self, windows: Sequence[Float32Array], priority: Priority = Priority.OFFLINE) -> list[Float32Array]:
        """Local speaker activity of each window, through the shared batcher."""
        return await self.batcher.submit_many(windows, priority)


@dataclass
class EmbeddingService:
    """A loaded speaker embedder and its batcher."""

    model: SpeakerEmbedder
    batcher: MicroBatcher[Float32Array, Float32Array]

    @property
    def info(self) -> EmbedderInfo:
        """What the embedder produces."""
        return self.model.info

    async def embed(self, audios: Sequence[Float32Array], priority: Priority = Priority.OFFLINE) -> list[Float32Array]:
        """One embedding per input, through the shared batcher."""
        return await self.batcher.submit_many(audios, priority)


class SpeakerModelPool:
    """Loads the segmentation model and embedders on first use (thread-safe) and keeps them."""

    def __init__(
        self,
        config: SpeakerModelsConfig,
        observer: BatchObserver | None = None,
        *,
        load_segmentation: Callable[[int], SegmentationModel] | None = None,
        load_embedder: Callable[[str, int], SpeakerEmbedder] | None = None,
    ) -> None:
        from voxserve.backends import registry

        self.config = config
        self._observer = observer
        self._load_segmentation = load_segmentation or registry.load_segmentation
        self._load_embedder = load_embedder or registry.load_embedder
        self._segmentation: SegmentationService | None = None
        self._embedders: dict[str, EmbeddingService] = {}
        self._lock = threading.Lock()

    def segmentation(self) -> SegmentationService:
        """The segmentation service."""
        with self._lock:
            if self._segmentation is None:
                model = self._load_segmentation(self.config.threads_per_worker)
                self._segmentation = SegmentationService(model, self._batcher(model.segment_batch, model.info.name))
            return self._segmentation

    def embedder(self, name: str | None = None) -> EmbeddingService:
        """The service of a registered embedder (default: the configured one)."""
        key = name or self.config.embedder
        with self._lock:
            service = self._embedders.get(key)
            if service is None:
                model = self._load_embedder(key, self.config.threads_per_worker)
                service = EmbeddingService(model, self._batcher(model.embed_batch, f"embedder-{key}"))
                self._embedders[key] = service
            return service

    def _batcher(
        self, fn: Callable[[list[Float32Array]], Sequence[Float32Array]], name: str
    ) -> MicroBatcher[Float32Array, Float32Array]:
        c = self.config
        return MicroBatcher(
            fn,
            BatcherConfig(
                max_batch_size=c.max_batch_size, max_wait_ms=c.max_wait_ms, offline_wait_ms=c.max_wait_ms,
                workers=c.workers, max_queue=c.max_queue,
            ),
            name=name,
            observer=self._observer,
        )

    def close(self) -> None:
        """Stop every batcher."""
        with self._lock:
            services: list[SegmentationService | EmbeddingService] = list(self._embedders.values())
            if self._segmentation is not None:
                services.append(self._segmentation)
            self._segmentation = None
            self._embedders.clear()
        for service in services:
            service.batcher.close()
