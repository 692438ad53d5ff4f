"""The engine's voice pool: each loaded voice's acoustic model, and one shared decoder batcher per decoder.

Every window of audio of every stream goes through its decoder's :class:`MicroBatcher`, so windows from
concurrent streams share decoder batches (max batch size and a short max wait, ~15 ms, as configured).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy.typing as npt

from voxserve.backends.base import AcousticModel, AudioDecoder, FrameBlock, VoiceInfo
from voxserve.backends.tts.catalog import VoiceCatalog
from voxserve.engine.batcher import BatcherConfig, BatchObserver, MicroBatcher
from voxserve.types import Float32Array, Priority


@dataclass
class DecoderService:
    """A loaded audio decoder and its batcher."""

    decoder: AudioDecoder
    batcher: MicroBatcher[npt.NDArray[Any], Float32Array]

    async def decode(
        self, window: npt.NDArray[Any], priority: Priority = Priority.LIVE, deadline: float | None = None
    ) -> Float32Array:
        """Decode one window of frames through the shared batcher (earliest ``deadline`` first in its class)."""
        return await self.batcher.submit(window, priority, deadline=deadline)


@dataclass
class LoadedVoice:
    """A voice ready to speak: its acoustic model and its decoder's shared service."""

    info: VoiceInfo
    acoustic: AcousticModel
    decoder: DecoderService


class VoicePool:
    """Loads voices on first use (thread-safe) and keeps them for the life of the process."""

    def __init__(self, catalog: VoiceCatalog, batcher: BatcherConfig, observer: BatchObserver | None = None) -> None:
        self.catalog = catalog
        self.batcher_config = batcher
        self._observer = observer
        self._voices: dict[str, LoadedVoice] = {}
        self._decoders: dict[str, DecoderService] = {}
        self._lock = threading.Lock()

    def voice(self, name: str | None = None) -> LoadedVoice:
        """The loaded voice of a name, alias or path (loading it now if needed; blocking)."""
        entry = self.catalog.resolve(name)
        key = entry.info.name
        with self._lock:
            loaded = self._voices.get(key)
            if loaded is None:
                acoustic, decoder = entry.load()
                loaded = LoadedVoice(acoustic.voice, acoustic, self._decoder_service(decoder))
                self._voices[key] = loaded
        return loaded

    def decoders(self) -> list[DecoderService]:
        """The decoder services in use."""
        with self._lock:
            return list(self._decoders.values())

    def _decoder_service(self, decoder: AudioDecoder) -> DecoderService:
        name = decoder.info.name
        service = self._decoders.get(name)
        if service is None:
            batcher: MicroBatcher[npt.NDArray[Any], Float32Array] = MicroBatcher(
                decoder.decode_batch, self.batcher_config, name=name, observer=self._observer
            )
            service = DecoderService(decoder, batcher)
            self._decoders[name] = service
        return service

    def close(self) -> None:
        """Stop every decoder batcher."""
        with self._lock:
            services = list(self._decoders.values())
            self._decoders.clear()
            self._voices.clear()
        for service in services:
            service.batcher.close()


class AcousticRunner:
    """Runs stage-1 steps (``next()`` of acoustic models' frame iterators) on worker threads, most urgent first.

    The same :class:`MicroBatcher` as the decoders, with batches of one: a new stream's first sentence does
    not wait behind the sentences other streams prepare ahead of time.
    """

    def __init__(self, config: BatcherConfig | None = None) -> None:
        """``config``: its workers, urgent workers and niceness (batches are always of one, never waited for)."""
        base = config or BatcherConfig(workers=2)
        config = replace(base, max_batch_size=1, max_wait_ms=0.0, offline_wait_ms=0.0)
        self._batcher: MicroBatcher[Iterator[FrameBlock], FrameBlock | None] = MicroBatcher(
            _step_each, config, name="tts-acoustic"
        )

    async def step(
        self, frames: Iterator[FrameBlock], priority: Priority = Priority.LIVE, deadline: float | None = None
    ) -> FrameBlock | None:
        """The next block of an acoustic model's iterator (None when it is exhausted)."""
        return await self._batcher.submit(frames, priority, deadline=deadline)

    def close(self) -> None:
        """Stop the worker threads."""
        self._batcher.close()


def _step_each(iterators: list[Iterator[FrameBlock]]) -> list[FrameBlock | None]:
    return [next(it, None) for it in iterators]
