"""The long-file pipeline on two real Whisper replicas (a real local Ray instance): the same text as the
single-process engine, also when one replica is killed in the middle of the file.

The single-process reference is the session's default engine (whisper-base, in this process). Features are
computed independently of the BLAS thread count (Ray workers run with ``OMP_NUM_THREADS=1``), so the two
paths see bit-identical inputs and decode the same text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.quality import JFK, contains_speech
from voxserve.audio import decode_audio
from voxserve.audio.encode import encode_audio
from voxserve.config import load_settings
from voxserve.service import Voxserve
from voxserve.types import SAMPLE_RATE, Transcript

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]
LONG = "long/lj_LJ001-0001-0032_concat.flac"


@pytest.fixture(scope="module")
def shipped_long(data_dir: Path) -> bytes:
    """About 100 s of the English test clips joined by pauses (runs on a fresh clone: several chunks)."""
    names = ["fw_jfk.flac", "mfa_ls_61-70968-0000.flac", "ami_dev00.flac"] * 2
    pause = np.zeros(SAMPLE_RATE, np.float32)
    parts = [piece for name in names for piece in (decode_audio(data_dir / name), pause)]
    return encode_audio(np.concatenate(parts), SAMPLE_RATE, "flac")


def replicas(batch: int = 8) -> Voxserve:
    """An engine whose recognition runs on two one-thread replicas in the session's Ray instance."""
    return Voxserve(load_settings(asr={"max_batch_size": batch}, ray={"enabled": True, "replicas": 2}))


@pytest.fixture(scope="module")
def shipped_local(vox: Voxserve, shipped_long: bytes) -> Transcript:
    """The single-process engine's transcript of ``shipped_long`` (the reference of both tests that use it)."""
    return transcribe(vox, shipped_long)


@pytest.fixture(scope="module")
def ray_vox() -> Iterator[Voxserve]:
    engine = replicas()
    engine.asr()
    yield engine
    engine.close()


def transcribe(engine: Any, source: Any, progress: Any = None) -> Transcript:
    return asyncio.run(engine.atranscribe(source, engine.long_options(), progress=progress))


def killed_midway(source: Any) -> tuple[Transcript, Any]:
    """Transcribe on fresh replicas (small batches: work stays in flight) and kill the busier replica as soon
    as the first chunk is done."""
    import ray

    engine = replicas(batch=1)
    try:
        rec = engine.asr()
        killed: list[str] = []

        def progress(done_s: float, total_s: float) -> None:
            if not killed and done_s < total_s:
                victim = max(rec.replicas, key=lambda r: r.inflight)
                killed.append(victim.name)
                ray.kill(victim.handle)

        transcript = transcribe(engine, source, progress)
        assert killed, "no chunk finished before the end: nothing was killed"
        return transcript, rec.stats()
    finally:
        engine.close()


def check_fan_out(transcript: Transcript, stats: Any) -> None:
    reports = transcript.stats.chunk_reports
    assert [r.index for r in reports] == list(range(len(reports)))  # every chunk once, in order
    assert sum(stats.served.values()) >= len(reports)


def test_shipped_clips_match_the_single_process_path(ray_vox: Voxserve, shipped_long: bytes,
                                                     shipped_local: Transcript) -> None:
    spread = transcribe(ray_vox, shipped_long)
    assert spread.text == shipped_local.text and contains_speech(JFK, spread.text)
    assert len(spread.stats.chunk_reports) >= 3
    stats = ray_vox.asr().stats()
    assert all(n > 0 for n in stats.served.values()), "both replicas worked"
    check_fan_out(spread, stats)


def test_shipped_clips_survive_a_killed_replica(shipped_long: bytes, shipped_local: Transcript) -> None:
    transcript, stats = killed_midway(shipped_long)
    assert transcript.text == shipped_local.text
    assert (stats.lost, stats.alive) == (1, 1) and stats.retried >= 1
    check_fan_out(transcript, stats)


def test_corpus_long_file_matches_and_survives_a_kill(vox: Voxserve, ray_vox: Voxserve, corpus: Path) -> None:
    path = corpus / LONG
    if not path.is_file():
        pytest.skip(f"{LONG} is not in the corpus")
    local = transcribe(vox, path)
    spread = transcribe(ray_vox, path)
    assert spread.text == local.text
    check_fan_out(spread, ray_vox.asr().stats())
    transcript, stats = killed_midway(path)
    assert transcript.text == local.text
    assert stats.lost == 1 and stats.retried >= 1
    check_fan_out(transcript, stats)
