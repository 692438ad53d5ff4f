"""Live transcription through the library's front door (``Voxserve.live``) on real speech."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.quality import READER, jfk_wer, wer
from voxserve import Voxserve
from voxserve.audio import decode_audio
from voxserve.streaming.live_events import TranscriptCompleted

pytestmark = pytest.mark.slow


def live_texts(vox: Voxserve, audio: np.ndarray) -> list[str]:
    """The completed transcripts of one stream fed ``audio`` (all at once: faster than real time)."""

    async def main() -> list[str]:
        stream = vox.live()
        for i in range(0, len(audio), 3200):
            stream.push(audio[i : i + 3200])
        stream.end_input()
        return [ev.text async for ev in stream if isinstance(ev, TranscriptCompleted)]

    return asyncio.run(main())


@pytest.fixture(scope="module")
def facade() -> object:
    with Voxserve() as vox:
        yield vox


def test_a_short_utterance_is_not_doubled(facade: Voxserve, data_dir: object) -> None:
    """JFK's first utterance (2.6 s) in a 5 s fitted window came back "And so my fellow Americans. And so my
    fellow Americans." (no loop marks: a phrase said twice is normal speech); a second opinion in a longer
    window hears it once."""
    texts = live_texts(facade, decode_audio(data_dir / "fw_jfk.flac"))  # type: ignore[operator]
    assert jfk_wer(" ".join(texts)) <= 0.1, texts


def test_a_sentence_really_said_twice_stays_twice(facade: Voxserve, data_dir: object) -> None:
    """The same recording twice with a short pause (no utterance break): the speaker said it twice."""
    clip = decode_audio(data_dir / "mfa_ls_61-70968-0000.flac")  # type: ignore[operator]
    audio = np.concatenate([clip, np.zeros(4000, np.float32), clip, np.zeros(16000, np.float32)])
    texts = live_texts(facade, audio)
    assert wer(f"{READER} {READER}", " ".join(texts)) <= 0.15, texts
