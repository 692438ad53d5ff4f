"""Replicas on a real local Ray instance, with the scripted fake recogniser inside the actors: placement by
resources, dispatch, faults (a replica killed with work in flight), sticky live streams, errors."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from voxserve.backends.base import AsrRequest, DecodeOptions
from voxserve.backends.fakes import FakeAsr, FakeVad
from voxserve.config import load_settings
from voxserve.distributed.cluster import ReplicaPool
from voxserve.distributed.router import RayRecognizer
from voxserve.engine.executor import BlockingExecutor
from voxserve.errors import BackendError, InvalidInput, ModelUnavailable
from voxserve.server.metrics import Metrics
from voxserve.streaming.live_asr import LiveOptions, LiveTranscriber
from voxserve.streaming.live_events import TranscriptCompleted
from voxserve.types import SAMPLE_RATE, Priority

pytestmark = pytest.mark.usefixtures("ray_session")


def _script() -> Any:
    def say(audio: Any, options: DecodeOptions) -> str:
        return f"pid{os.getpid()} n{len(audio)}"

    return say


_pid_script = _script()
"""The fake's answer names the process that ran it, so tests see which replica did the work (a nested
function: pickled by value, since the actors cannot import this test module)."""


def pool(factory: Any = None, observer: Any = None, **ray: Any) -> ReplicaPool:
    settings = load_settings(
        asr={"max_batch_size": ray.pop("batch", 2), "device": ray.pop("device", "cpu")},
        ray={"enabled": True, "replicas": 2, "start_timeout_s": 60, **ray},
    )
    return ReplicaPool(settings.asr, settings.ray, observer,
                       factory=factory or functools.partial(FakeAsr, script=_pid_script, delay_s=0.2))


@pytest.fixture
def closing() -> Iterator[list[ReplicaPool]]:
    pools: list[ReplicaPool] = []
    yield pools
    for p in pools:
        p.close()


def eventually(check: Any, timeout_s: float = 15.0) -> bool:
    """Ray frees the resources of killed actors asynchronously."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def request(seconds: float, language: str = "en") -> AsrRequest:
    audio = np.full(int(seconds * SAMPLE_RATE), 0.1, np.float32)
    return AsrRequest(audio, DecodeOptions(language=language, word_timestamps=False))


def test_replicas_reserve_the_configured_resources(ray_session: Any, closing: list[ReplicaPool]) -> None:
    # Two replicas at half a GPU each share one GPU (MIG-like); each also takes one mig_1g unit and a CPU.
    total = ray_session.cluster_resources()
    assert eventually(lambda: ray_session.available_resources().get("GPU") == total["GPU"])
    free = ray_session.available_resources()
    p = pool(gpus_per_replica=0.5, resources={"mig_1g": 1}, device="auto")
    closing.append(p)
    rec = p.asr()
    for r in rec.replicas:
        assert r.info.resources == {"CPU": 1.0, "GPU": 0.5, "mig_1g": 1.0}
        assert len(r.info.gpu_ids) == 1
    now = ray_session.available_resources()
    assert now["GPU"] == pytest.approx(free["GPU"] - 1.0)
    assert now["mig_1g"] == pytest.approx(free["mig_1g"] - 2)
    assert len({r.info.pid for r in rec.replicas}) == 2


def test_replicas_that_cannot_fit_fail_at_once(ray_session: Any) -> None:
    total = ray_session.cluster_resources()
    slices, gpus = int(total["mig_1g"]), int(total["GPU"])
    with pytest.raises(ModelUnavailable, match=f"mig_1g={2 * (slices // 2 + 1)}.*mig_1g={slices}"):
        pool(resources={"mig_1g": slices // 2 + 1}).asr()
    with pytest.raises(ModelUnavailable, match="GPU"):
        pool(gpus_per_replica=gpus, device="auto").asr()
    with pytest.raises(InvalidInput, match="asr.device"):
        pool(gpus_per_replica=1).asr()  # a GPU reserved for a CPU model is a configuration mistake
    assert eventually(lambda: ray_session.available_resources().get("mig_1g") == slices)  # nothing leaked


def test_a_model_that_cannot_load_is_reported() -> None:
    settings = load_settings(asr={"model": "no-such-model"}, ray={"enabled": True, "start_timeout_s": 60})
    with pytest.raises(ModelUnavailable, match="no-such-model"):
        ReplicaPool(settings.asr, settings.ray).asr()


def test_killed_replica_loses_no_request_and_duplicates_none(ray_session: Any, closing: list[ReplicaPool]) -> None:
    metrics = Metrics()
    p = pool(observer=metrics)
    closing.append(p)
    rec = p.asr()
    lengths = [1 + i * 0.25 for i in range(16)]

    async def run() -> list[Any]:
        async def killer() -> None:
            while not any(r.inflight for r in rec.replicas) or sum(rec.stats().served.values()) < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            ray_session.kill(max(rec.replicas, key=lambda r: r.inflight).handle)

        results, _ = await asyncio.gather(asyncio.gather(*(rec.transcribe(request(s)) for s in lengths)), killer())
        return list(results)

    results = asyncio.run(run())
    assert [r.text.split()[1] for r in results] == [f"n{int(s * SAMPLE_RATE)}" for s in lengths]
    stats = rec.stats()
    assert (stats.lost, stats.alive) == (1, 1) and stats.retried >= 1
    assert sum(stats.served.values()) == len(lengths)  # every request answered exactly once
    survivor = next(r for r in rec.replicas if r.alive)
    assert {r.text.split()[0] for r in results[-4:]} == {f"pid{survivor.info.pid}"}
    text = metrics.render().decode()
    assert 'voxserve_replica_events_total{event="lost",model="fake"} 1.0' in text
    assert 'voxserve_replicas_in_service{model="fake"} 1.0' in text


def test_offline_work_waits_at_the_head_and_spreads(closing: list[ReplicaPool]) -> None:
    p = pool(max_inflight_per_replica=2)
    closing.append(p)
    rec = p.asr()

    async def run() -> tuple[int, list[Any]]:
        tasks = [asyncio.ensure_future(rec.transcribe(request(1))) for _ in range(10)]
        await asyncio.sleep(0.05)
        queued = rec.queue_depth
        return queued, list(await asyncio.gather(*tasks))

    queued, results = asyncio.run(run())
    assert queued == 6  # 2 replicas x 2 slots in flight, the rest at the head
    assert len({r.text.split()[0] for r in results}) == 2
    served = sorted(rec.stats().served.values())
    assert sum(served) == 10 and served[0] >= 3  # freed slots go to whichever replica frees them first


def test_live_streams_stick_to_one_replica_until_it_dies(ray_session: Any, closing: list[ReplicaPool]) -> None:
    p = pool(replicas=3, batch=4)
    closing.append(p)
    rec = p.asr()
    streams = [rec.for_stream(f"session-{i}") for i in range(12)]

    async def round_() -> list[str]:
        results = await asyncio.gather(*(s.transcribe(request(1), Priority.LIVE) for s in streams))
        return [r.text.split()[0] for r in results]

    first, second = asyncio.run(round_()), asyncio.run(round_())
    assert first == second and len(set(first)) >= 2
    victim = streams[0].replica
    ray_session.kill(rec._replicas[victim].handle)
    third = asyncio.run(round_())
    moved = [i for i, s in enumerate(streams) if first[i] != third[i]]
    assert 0 in moved
    assert all(streams[i].moves == 1 and first[i] == first[0] for i in moved)  # only the victim's streams moved
    assert all(s.moves == 0 for i, s in enumerate(streams) if i not in moved)
    assert asyncio.run(round_()) == third


def test_live_transcriber_pins_each_stream(closing: list[ReplicaPool]) -> None:
    p = pool(replicas=2)
    closing.append(p)
    rec = p.asr()
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(SAMPLE_RATE) / SAMPLE_RATE)).astype(np.float32)
    silence = np.zeros(SAMPLE_RATE, np.float32)

    async def one(stream_id: str) -> set[str]:
        executor = BlockingExecutor(2)
        live = LiveTranscriber(rec, lambda: FakeVad(), executor)
        stream = live.stream(LiveOptions(partial_interval_ms=0), stream_id=stream_id)
        for _ in range(3):
            stream.push(tone)
            stream.push(silence)
        stream.end_input()
        finals = [ev.text for ev in [e async for e in stream] if isinstance(ev, TranscriptCompleted)]
        executor.shutdown()
        assert len(finals) == 3
        return {t.split()[0] for t in finals}

    async def run() -> list[set[str]]:
        return list(await asyncio.gather(*(one(f"s{i}") for i in range(6))))

    per_stream = asyncio.run(run())
    assert all(len(pids) == 1 for pids in per_stream)
    expected = {f"s{i}": rec._replicas[rec.for_stream(f"s{i}").replica].info.pid for i in range(6)}
    assert [next(iter(p)) for p in per_stream] == [f"pid{expected[f's{i}']}" for i in range(6)]


def test_replica_errors_reach_the_caller_without_retries(closing: list[ReplicaPool]) -> None:
    fails = functools.partial(FakeAsr, fail_on=lambda req: len(req.audio) == 3 * SAMPLE_RATE)
    p = pool(factory=fails)
    closing.append(p)
    rec = p.asr()
    with pytest.raises(InvalidInput):
        rec.check_options(DecodeOptions(language="xx"))
    with pytest.raises(BackendError, match="scripted failure"):
        asyncio.run(rec.transcribe(request(3)))
    assert asyncio.run(rec.transcribe(request(2))).text
    assert (rec.stats().lost, rec.stats().retried) == (0, 0)


def test_recognizer_needs_replicas() -> None:
    with pytest.raises(ValueError):
        RayRecognizer([])
