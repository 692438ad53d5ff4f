"""SSML and pronunciations in the synthesis stream, on fake models (orchestration only: what reaches the
acoustic model, where silences go, at what speed; real output is tested in tests/integration/test_tts_ssml.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest

from tests.engine.test_tts_service import collect, expected_audio, service
from voxserve.backends.tts.fakes import FAKE_RATE, FakeAcoustic
from voxserve.errors import InvalidInput
from voxserve.streaming.tts import SpeakOptions
from voxserve.streaming.tts_service import TtsService
from voxserve.text.lexicon import Lexicon
from voxserve.types import SynthesisChunk


@pytest.fixture
def acoustic() -> FakeAcoustic:
    return FakeAcoustic()


@pytest.fixture
def tts(acoustic: FakeAcoustic) -> Iterator[TtsService]:
    s = service(acoustic)
    yield s
    s.close()


def test_ssml_in_pieces_waits_for_its_end_and_places_the_break(tts: TtsService, acoustic: FakeAcoustic) -> None:
    async def run() -> list[SynthesisChunk]:
        stream = tts.stream(options=SpeakOptions(pronunciations={"Nguyen": "win"}))
        for piece in (" <spe", "ak>Hello Nguyen.<break time='0.5s'/>", "Bye now.</speak>"):
            stream.push_text(piece)
            stream.flush()  # an SSML document is not spoken before it is complete
        await asyncio.sleep(0.05)
        assert acoustic.texts == []
        stream.end_input()
        return await collect(stream)

    chunks = asyncio.run(run())
    assert acoustic.texts == ["Hello win.", "Bye now."]
    first = expected_audio("Hello win.")
    silence = [c for c in chunks if c.text == ""]
    assert len(silence) == 1 and silence[0].num_samples == round(0.5 * FAKE_RATE)
    assert silence[0].start_sample == len(first)
    audio = np.concatenate([c.audio for c in chunks])
    expected = np.concatenate([first, np.zeros(round(0.5 * FAKE_RATE), np.float32), expected_audio("Bye now.")])
    assert np.array_equal(audio, expected)


def test_prosody_rate_scales_the_speed_and_pauses_merge(tts: TtsService, acoustic: FakeAcoustic) -> None:
    doc = ('<speak><prosody rate="x-slow">Slow words.</prosody><break time="1s"/><p>Normal words.</p>'
           '<prosody rate="400%">Fast words.</prosody></speak>')
    result = asyncio.run(tts.synthesize(doc, options=SpeakOptions(speed=2.0)))
    assert acoustic.texts == ["Slow words.", "Normal words.", "Fast words."]
    frames = [len(t) * 2 / speed for t, speed in zip(acoustic.texts, (1.0, 2.0, 4.0), strict=True)]  # 4x is the cap
    breaks = round(1.0 * FAKE_RATE) + round(0.75 * FAKE_RATE)  # the break, and the paragraph's pause after it
    assert len(result.audio) == sum(round(f) * 4 for f in frames) + breaks


def test_malformed_ssml_fails_the_stream_with_the_input_param(tts: TtsService, acoustic: FakeAcoustic) -> None:
    async def run() -> None:
        async with tts.stream() as stream:
            stream.push_text("<speak>Hello <break time='2'/></speak>")
            stream.end_input()
            await collect(stream)

    with pytest.raises(InvalidInput, match="break time") as caught:
        asyncio.run(run())
    assert caught.value.param == "input" and acoustic.texts == []


def test_plain_text_and_forced_modes(tts: TtsService, acoustic: FakeAcoustic) -> None:
    asyncio.run(tts.synthesize("<speak>Hi there.</speak>", options=SpeakOptions(ssml=False)))
    asyncio.run(tts.synthesize("Hi <break time='1s'/> there.", options=SpeakOptions(ssml=True)))
    asyncio.run(tts.synthesize("<3 is not SSML. I Nguyen."))
    assert acoustic.texts == ["speak Hi there. /speak", "Hi", "there.", "three is not SSML.", "I Nguyen."]


def test_a_word_split_across_pieces_still_matches_and_the_server_lexicon_yields(acoustic: FakeAcoustic) -> None:
    tts = service(acoustic)
    tts.lexicon = Lexicon.from_mapping({"Nguyen": "win", "SQL": "sequel"})
    try:
        async def run() -> None:
            async with tts.stream(options=SpeakOptions(pronunciations={"sql": "S Q L"})) as stream:
                for piece in ("Ask Ngu", "yen about SQ", "L today."):
                    stream.push_text(piece)
                stream.end_input()
                await collect(stream)

        asyncio.run(run())
    finally:
        tts.close()
    assert acoustic.texts == ["Ask win about S Q L today."]
