"""One model replica: the body of a Ray actor that holds a speech recogniser and its own MicroBatcher.

The class is plain Python (no Ray import), so it is testable in-process; :mod:`voxserve.distributed.cluster`
wraps it with ``ray.remote``. Inside the actor's process everything is the single-process engine: the model
comes from the registry's :func:`~voxserve.backends.registry.load_asr` and concurrent calls share batches
through :class:`~voxserve.engine.batcher.MicroBatcher`, live work ahead of offline work. The actor is an
async actor, so many requests wait on the batcher at once while its worker threads run the model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from voxserve.backends.base import AsrLoadOptions, AsrModel, AsrModelInfo, AsrRequest, AsrResult, DecodeOptions
from voxserve.backends.registry import load_asr
from voxserve.engine.batcher import BatcherConfig, MicroBatcher
from voxserve.types import SAMPLE_RATE, Priority


@dataclass(frozen=True)
class ReplicaSpec:
    """What one replica loads and how it batches (pickled and sent to the actor).

    Attributes:
        model: a registered model name or a model directory (on every node of the cluster).
        load: device, compute type, workers (concurrent batches) and threads per worker.
        batcher: the in-replica batching knobs (``workers`` is taken from ``load``).
        factory: builds the model instead of the registry (tests and custom backends); must be picklable.
        warmup: run one short decode when the replica starts, so the first request is not slow.
    """

    model: str
    load: AsrLoadOptions = AsrLoadOptions()
    batcher: BatcherConfig = BatcherConfig()
    factory: Callable[[], AsrModel] | None = None
    warmup: bool = True


@dataclass(frozen=True)
class ReplicaInfo:
    """What a started replica reports about itself.

    Attributes:
        model: the model's facts (name, languages, window).
        capacity: chunks it works on at once (workers x batch size).
        workers: concurrent model batches.
        pid: the actor's process id.
        node: the Ray node it runs on (``""`` outside Ray).
        resources: the Ray resources it was granted (``{"CPU": 1.0, "GPU": 0.5, ...}``).
        gpu_ids: the GPUs Ray assigned to it.
        device: where the model runs (``cpu`` or ``cuda``).
    """

    model: AsrModelInfo
    capacity: int
    workers: int
    pid: int
    node: str = ""
    resources: dict[str, float] = field(default_factory=dict)
    gpu_ids: tuple[str, ...] = ()
    device: str = "cpu"


class AsrReplica:
    """A model and its batcher, living in one actor process."""

    def __init__(self, spec: ReplicaSpec) -> None:
        self.spec = spec
        self.model: AsrModel = spec.factory() if spec.factory is not None else load_asr(spec.model, spec.load)
        config = replace(spec.batcher, workers=spec.load.workers)
        self.batcher: MicroBatcher[AsrRequest, AsrResult] = MicroBatcher(
            self.model.transcribe_batch, config, name=self.model.info.name, key=self.model.batch_key
        )

    def describe(self) -> ReplicaInfo:
        """The replica's model, capacity and placement."""
        node, resources, gpu_ids = _placement()
        c = self.batcher.config
        return ReplicaInfo(
            model=self.model.info,
            capacity=c.workers * c.max_batch_size,
            workers=c.workers,
            pid=os.getpid(),
            node=node,
            resources=resources,
            gpu_ids=gpu_ids,
            device=str(getattr(self.model, "device", self.spec.load.device)),
        )

    async def transcribe(self, request: AsrRequest, priority: Priority = Priority.OFFLINE) -> AsrResult:
        """Recognise one request through this replica's batcher."""
        return await self.batcher.submit(request, priority)

    async def warm_up(self) -> None:
        """One short decode of faint noise (lazy initialisation happens here, not in the first request)."""
        if self.spec.warmup:
            noise = (np.random.default_rng(0).standard_normal(SAMPLE_RATE) * 0.01).astype(np.float32)
            language = "en" if "en" in self.model.info.languages else None
            await self.transcribe(AsrRequest(noise, DecodeOptions(language=language, word_timestamps=False)))

    def ping(self) -> int:
        """The process id (answers once the replica is up; used to see whether a restarted one is back)."""
        return os.getpid()

    def queue_depth(self) -> int:
        """Items waiting in the batcher."""
        return self.batcher.queue_depth

    def close(self) -> None:
        """Stop the batcher's worker threads."""
        self.batcher.close(timeout_s=5.0)


def _placement() -> tuple[str, dict[str, float], tuple[str, ...]]:
    """(node id, granted resources, GPU ids) when running inside a Ray worker, else empty values."""
    try:
        import ray
    except ImportError:
        return "", {}, ()
    if not ray.is_initialized():
        return "", {}, ()
    ctx: Any = ray.get_runtime_context()
    assigned = {k: float(v) for k, v in ctx.get_assigned_resources().items()}
    return ctx.get_node_id(), assigned, tuple(str(g) for g in ray.get_gpu_ids())
