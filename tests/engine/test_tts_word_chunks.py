"""Word times through the stream's windows on fake models: each word arrives in the chunk its audio starts in,
at its own frames' seconds on the stream's timeline, after an SSML break and at another rate too."""

from __future__ import annotations

import asyncio
import re

from tests.engine.test_tts_service import collect, service
from voxserve.backends.tts.fakes import FAKE_RATE, FakeAcoustic
from voxserve.streaming.tts import SpeakOptions, TtsStreamParams
from voxserve.types import SynthesisChunk

SPF = 4  # FakeDecoder's samples per frame


def _speak(text: str, **options: object) -> list[SynthesisChunk]:
    tts = service(FakeAcoustic(), params=TtsStreamParams(max_ahead_s=0.0, first_frames=4, window_frames=8))
    try:
        async def run() -> list[SynthesisChunk]:
            stream = tts.stream(None, SpeakOptions(**options))  # type: ignore[arg-type]
            stream.push_text(text)
            stream.end_input()
            return await collect(stream)

        return asyncio.run(run())
    finally:
        tts.close()


def _check_placement(chunks: list[SynthesisChunk]) -> None:
    for c in chunks:
        for w in c.words:
            assert c.start_s <= w.start_s < c.start_s + c.duration_s, (w, c.start_s, c.duration_s)


def test_words_arrive_with_the_chunk_they_start_in() -> None:
    text = "Alpha beta gamma delta epsilon."
    chunks = _speak(text)
    assert len(chunks) > 4  # small windows: the words spread over many chunks
    _check_placement(chunks)
    words = [w for c in chunks for w in c.words]
    assert [w.text for w in words] == ["Alpha", "beta", "gamma", "delta", "epsilon"]
    for w, m in zip(words, re.finditer(r"\w+", text), strict=True):  # 2 frames a character, from sample 0
        assert (w.start_s, w.end_s) == (m.start() * 2 * SPF / FAKE_RATE, m.end() * 2 * SPF / FAKE_RATE)


def test_breaks_and_rate_move_the_words() -> None:
    chunks = _speak('<speak>One two.<break time="1s"/><prosody rate="50%">Three four.</prosody></speak>')
    _check_placement(chunks)
    words = {w.text: w for c in chunks for w in c.words}
    assert list(words) == ["One", "two", "Three", "four"]
    first_unit_s = len("One two.") * 2 * SPF / FAKE_RATE
    assert abs(words["Three"].start_s - (first_unit_s + 1.0)) < 1e-9  # the break's second, then the unit
    assert abs((words["four"].end_s - words["four"].start_s) - 2 * 4 * 2 * SPF / FAKE_RATE) < 1e-9  # half speed
