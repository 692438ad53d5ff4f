"""The diarization recipe end to end with fake models (tones as voices): turns, counts, batching, progress."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("scipy")

from voxserve.backends.fakes import FakeEmbedder, FakeSegmentation  # noqa: E402
from voxserve.config import DiarizationConfig  # noqa: E402
from voxserve.engine.executor import BlockingExecutor  # noqa: E402
from voxserve.engine.speaker_pool import SpeakerModelPool, SpeakerModelsConfig  # noqa: E402
from voxserve.errors import InvalidInput  # noqa: E402
from voxserve.pipelines.diarization import DiarizationParams, DiarizeOptions, Diarizer  # noqa: E402
from voxserve.pipelines.speaker_clustering import ClusteringParams, SpeakerCount  # noqa: E402
from voxserve.types import SAMPLE_RATE  # noqa: E402

SR = SAMPLE_RATE
TONES = {"x": 440.0, "y": 1250.0, "z": 2500.0}


def conversation(script: list[tuple[str, float, float]], total_s: float, seed: int = 0) -> np.ndarray:
    """Tones (speaker, start s, end s) over a faint noise floor."""
    rng = np.random.default_rng(seed)
    audio = rng.normal(0, 1e-4, int(total_s * SR)).astype(np.float32)
    for speaker, start, end in script:
        t = np.arange(int(start * SR), int(end * SR))
        audio[t] += 0.3 * np.sin(2 * np.pi * TONES[speaker] * t / SR).astype(np.float32)
    return audio


SCRIPT = [("x", 0.5, 6.0), ("y", 6.5, 12.0), ("x", 12.5, 17.0), ("y", 17.5, 24.0), ("x", 24.5, 29.0)]


@pytest.fixture()
def engine():
    segmentation, embedder = FakeSegmentation(), FakeEmbedder()
    pool = SpeakerModelPool(
        replace(SpeakerModelsConfig.from_settings(DiarizationConfig()), max_batch_size=4, max_wait_ms=20.0),
        load_segmentation=lambda threads: segmentation,
        load_embedder=lambda name, threads: embedder,
    )
    executor = BlockingExecutor()
    params = DiarizationParams(clustering=ClusteringParams(threshold=0.3))
    diarizer = Diarizer(pool.segmentation(), pool.embedder(), executor, params)
    yield diarizer, segmentation, embedder
    pool.close()
    executor.shutdown()


def speaker_at(diarization, t: float) -> set[str]:
    return {turn.speaker for turn in diarization.turns if turn.start_s <= t < turn.end_s}


def test_two_voices_alternating(engine) -> None:
    diarizer, _, _ = engine
    d = asyncio.run(diarizer.run(conversation(SCRIPT, 30.0)))
    assert d.speakers == ("A", "B")
    for speaker, start, end in SCRIPT:
        label = "A" if speaker == "x" else "B"
        for t in np.arange(start + 0.2, end - 0.2, 0.5):
            assert speaker_at(d, t) == {label}, (t, speaker_at(d, t))
    for gap_start in (6.1, 12.1, 17.1, 24.1):  # silences between turns stay unlabelled
        assert speaker_at(d, gap_start + 0.2) == set()
    assert [name for name, _ in d.stats.stages] == ["decode", "segmentation", "embeddings", "clustering", "turns"]
    assert d.stats.windows == 10 and d.stats.embeddings >= 9


def test_overlapped_speech_keeps_both_speakers(engine) -> None:
    diarizer, _, _ = engine
    script = [("x", 0.5, 12.0), ("y", 9.0, 20.0), ("x", 21.0, 29.0)]
    d = asyncio.run(diarizer.run(conversation(script, 30.0)))
    assert len(d.speakers) == 2
    assert speaker_at(d, 10.5) == {"A", "B"}
    assert speaker_at(d, 5.0) == {"A"} and speaker_at(d, 15.0) == {"B"}


def test_speaker_count_options(engine) -> None:
    diarizer, _, _ = engine
    script = [("x", 0.5, 9.0), ("y", 9.5, 19.0), ("z", 19.5, 29.0)]
    audio = conversation(script, 30.0)
    assert len(asyncio.run(diarizer.run(audio)).speakers) == 3
    assert len(asyncio.run(diarizer.run(audio, DiarizeOptions(SpeakerCount(max_speakers=2)))).speakers) == 2
    assert len(asyncio.run(diarizer.run(audio, DiarizeOptions(SpeakerCount(num_speakers=2)))).speakers) == 2
    one = asyncio.run(diarizer.run(conversation([("x", 0.5, 29.0)], 30.0), DiarizeOptions(SpeakerCount(min_speakers=1))))
    assert one.speakers == ("A",)


def test_files_at_once_share_model_batches(engine) -> None:
    diarizer, segmentation, embedder = engine

    async def three() -> list:
        return list(await asyncio.gather(*(diarizer.run(conversation(SCRIPT, 30.0, seed=i)) for i in range(3))))

    results = asyncio.run(three())
    assert all(r.speakers == ("A", "B") for r in results)
    assert max(segmentation.batches) == 4 and max(embedder.batches) == 4


def test_progress_reaches_the_end_and_never_goes_back(engine) -> None:
    diarizer, _, _ = engine
    seen: list[tuple[float, float]] = []
    asyncio.run(diarizer.run(conversation(SCRIPT, 30.0), progress=lambda done, total: seen.append((done, total))))
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == pytest.approx(30.0) and all(t == pytest.approx(30.0) for _, t in seen)


def test_silence_short_and_empty_inputs(engine) -> None:
    diarizer, _, _ = engine
    quiet = asyncio.run(diarizer.run(np.zeros(5 * SR, np.float32)))
    assert quiet.turns == () and quiet.speakers == ()
    short = asyncio.run(diarizer.run(conversation([("y", 0.2, 2.8)], 3.0)))
    assert short.speakers == ("A",) and short.duration == 3 * SR
    with pytest.raises(InvalidInput):
        asyncio.run(diarizer.run(np.zeros(0, np.float32)))
    with pytest.raises(InvalidInput):
        asyncio.run(diarizer.run(np.zeros(SR, np.float32), DiarizeOptions(SpeakerCount(min_speakers=3, max_speakers=2))))
