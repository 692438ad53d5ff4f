"""The synthesis service on fake models: order, windowing, batching across streams, cancel, admission, errors."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import numpy as np
import pytest

from voxserve.backends.base import VoiceEntry
from voxserve.backends.tts.catalog import VoiceCatalog
from voxserve.backends.tts.fakes import FakeAcoustic, FakeDecoder, fake_decode, fake_frames
from voxserve.engine.batcher import BatcherConfig
from voxserve.engine.tts_pool import VoicePool
from voxserve.errors import BackendError, InvalidInput, Overloaded
from voxserve.streaming.tts import SpeakOptions, TtsStream, TtsStreamParams
from voxserve.streaming.tts_metrics import TtsMetrics
from voxserve.streaming.tts_service import TtsService
from voxserve.text import TextSegmenter, to_speakable
from voxserve.types import SynthesisChunk

BATCH = BatcherConfig(max_batch_size=8, max_wait_ms=5.0, offline_wait_ms=5.0)
UNPACED = TtsStreamParams(max_ahead_s=0.0)
TEXT = "Good morning, and thank you for calling. Your order shipped on May 3rd. It costs $5.20! Goodbye."


def service(
    acoustic: FakeAcoustic | None = None,
    decoder: FakeDecoder | None = None,
    *,
    max_streams: int = 8,
    batch: BatcherConfig = BATCH,
    params: TtsStreamParams = UNPACED,
    metrics: TtsMetrics | None = None,
) -> TtsService:
    acoustic = acoustic or FakeAcoustic()
    decoder = decoder or FakeDecoder()
    catalog = VoiceCatalog(default_voice="fake")
    catalog.register(VoiceEntry(acoustic.voice, lambda: (acoustic, decoder), ("alias",)))
    return TtsService(VoicePool(catalog, batch, metrics), params, max_streams=max_streams, observer=metrics)


@pytest.fixture
def tts() -> Iterator[TtsService]:
    s = service()
    yield s
    s.close()


def expected_audio(text: str, spf: int = 4) -> np.ndarray:
    seg = TextSegmenter()
    parts = [fake_decode(fake_frames(to_speakable(s.text)), spf) for s in seg.push(text) + seg.flush()]
    return np.concatenate(parts)


async def collect(stream: TtsStream) -> list[SynthesisChunk]:
    return [chunk async for chunk in stream]


def check_chunks(chunks: list[SynthesisChunk], text: str) -> np.ndarray:
    assert [c.sequence for c in chunks] == list(range(len(chunks)))
    position = 0
    for c in chunks:
        assert c.start_sample == position and c.sample_rate == 8000
        assert text[c.text_start : c.text_end] == c.text
        position += c.num_samples
    return np.concatenate([c.audio for c in chunks])


def test_stream_audio_equals_whole_decoding_of_each_segment(tts: TtsService) -> None:
    async def run() -> list[SynthesisChunk]:
        stream = tts.stream()
        stream.push_text(TEXT)
        stream.end_input()
        return await collect(stream)

    chunks = asyncio.run(run())
    assert np.array_equal(check_chunks(chunks, TEXT), expected_audio(TEXT))
    assert chunks[0].text == "Good morning,"  # the first audio leaves after the first clause
    assert len(chunks) > 4  # windows inside segments


def test_text_arriving_token_by_token_gives_the_same_audio(tts: TtsService) -> None:
    async def run() -> list[SynthesisChunk]:
        stream = tts.stream()

        async def feed() -> None:
            for i in range(0, len(TEXT), 3):
                stream.push_text(TEXT[i : i + 3])
                await asyncio.sleep(0)
            stream.end_input()

        feeder = asyncio.ensure_future(feed())
        chunks = await collect(stream)
        await feeder
        return chunks

    assert np.array_equal(check_chunks(asyncio.run(run()), TEXT), expected_audio(TEXT))


def test_a_clause_after_planned_audio_starts_without_a_small_window() -> None:
    # "Good morning," is 26 frames (13 ms at 4 samples a frame and 8 kHz): planned but, with a 50 ms decoder, not
    # yet out when the second clause's frames come. Counted from audio out, the second clause began with a
    # 4-frame window again (each small window costs its context twice); counted with planned audio, only the
    # stream's first window is small.
    decoder = FakeDecoder(delay_s=0.05)
    tts = service(decoder=decoder, params=TtsStreamParams(max_ahead_s=0.0, urgent_buffer_s=0.005))
    text = "Good morning, and thank you for calling."
    try:
        result = asyncio.run(tts.synthesize(text))
    finally:
        tts.close()
    assert np.array_equal(result.audio, expected_audio(text))
    sizes = [n for batch in decoder.batches for n in batch]
    first, full = decoder.first_frames + decoder.context_frames, decoder.window_frames + decoder.context_frames
    assert sizes[:4] == [first, full + decoder.context_frames, 6 + decoder.context_frames, full]  # 4 + 16 + 6 = 26


def test_a_unit_the_listener_waits_for_asks_for_the_frames_of_its_first_two_windows_first() -> None:
    # The stream's first clause: nothing is planned ahead, so the model is asked for the frames that plan its first
    # two windows (4 + 16 + 2 context) as soon as they exist; the second clause follows planned audio: no hurry.
    acoustic, decoder = FakeAcoustic(), FakeDecoder(delay_s=0.05)
    tts = service(acoustic, decoder=decoder, params=TtsStreamParams(max_ahead_s=0.0, urgent_buffer_s=0.005))
    try:
        asyncio.run(tts.synthesize("Good morning, and thank you for calling."))
    finally:
        tts.close()
    assert decoder.first_frames + decoder.first_frames * 4 + decoder.context_frames == 22
    assert acoustic.asked_first == [22, 0]


def test_incremental_acoustic_model_like_an_llm() -> None:
    tts = service(FakeAcoustic(incremental=True))
    try:
        result = asyncio.run(tts.synthesize(TEXT))
    finally:
        tts.close()
    assert np.array_equal(result.audio, expected_audio(TEXT))


def test_concurrent_streams_get_their_own_audio_and_share_batches() -> None:
    decoder = FakeDecoder(delay_s=0.004)
    tts = service(decoder=decoder, batch=BatcherConfig(max_batch_size=8, max_wait_ms=20.0, offline_wait_ms=20.0))
    texts = [f"Stream number {i} says hello. It then says {i * 7} more words, and stops." for i in range(6)]
    try:
        results = asyncio.run(_all(tts, texts))
    finally:
        tts.close()
    for text, audio in zip(texts, results, strict=True):
        assert np.array_equal(audio, expected_audio(text))
    assert max(len(b) for b in decoder.batches) > 1  # windows of different streams shared decoder batches


async def _all(tts: TtsService, texts: list[str]) -> list[np.ndarray]:
    results = await asyncio.gather(*(tts.synthesize(t) for t in texts))
    return [r.audio for r in results]


def test_cancel_mid_utterance_stops_output() -> None:
    decoder = FakeDecoder(delay_s=0.01, window_frames=4, first_frames=2)
    tts = service(decoder=decoder, batch=BatcherConfig(max_batch_size=1))

    async def run() -> tuple[int, list[SynthesisChunk], TtsStream]:
        stream = tts.stream()
        stream.push_text("A long sentence that takes many windows to speak. " * 20)
        stream.end_input()
        first = [await stream.__anext__(), await stream.__anext__()]
        stream.cancel()
        after = [c async for c in stream]
        await asyncio.sleep(0.1)
        calls = len(decoder.batches)
        await asyncio.sleep(0.1)
        assert len(decoder.batches) == calls  # nothing more is decoded
        return len(first), after, stream

    try:
        n_first, after, stream = asyncio.run(run())
        assert n_first == 2 and after == []
        assert stream.done and stream.cancelled and tts.active_streams == 0
    finally:
        tts.close()


def test_admission_control_refuses_streams_beyond_the_limit() -> None:
    tts = service(max_streams=2)

    async def run() -> None:
        a, b = tts.stream(), tts.stream()
        with pytest.raises(Overloaded) as info:
            tts.stream()
        assert info.value.retry_after_s > 0
        a.push_text("Done.")
        a.end_input()
        await collect(a)
        c = tts.stream()  # a slot is free again
        for s in (b, c):
            await s.aclose()
        assert tts.active_streams == 0

    try:
        asyncio.run(run())
    finally:
        tts.close()


@pytest.mark.parametrize(
    "text,options,code",
    [
        ("", SpeakOptions(), "empty_input"),
        ("  \n ... ", SpeakOptions(), "empty_input"),
        ("a" * 100_001, SpeakOptions(), "input_too_long"),
        ("Hello.", SpeakOptions(speed=9.0), "invalid_input"),
        ("Hello.", SpeakOptions(sample_format="wav"), "invalid_input"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_is_refused_clearly(tts: TtsService, text: str, options: SpeakOptions, code: str) -> None:
    with pytest.raises(InvalidInput) as info:
        asyncio.run(tts.synthesize(text, options=options))
    assert info.value.code == code and info.value.message
    assert tts.active_streams == 0


def test_unknown_voice_names_the_available_ones(tts: TtsService) -> None:
    with pytest.raises(InvalidInput) as info:
        asyncio.run(tts.synthesize("Hello.", voice="nobody"))
    assert info.value.code == "invalid_voice" and "fake" in info.value.message and info.value.param == "voice"
    assert asyncio.run(tts.synthesize("Hello.", voice="alias")).voice == "fake"


def test_stream_input_errors(tts: TtsService) -> None:
    async def run() -> None:
        stream = tts.stream()
        with pytest.raises(InvalidInput):
            stream.push_text(b"bytes")  # type: ignore[arg-type]
        stream.end_input()
        with pytest.raises(InvalidInput):
            stream.push_text("late")
        assert await collect(stream) == []  # no text: no audio, a clean end

    asyncio.run(run())


def test_a_failing_stream_reports_its_error_and_others_finish() -> None:
    metrics = TtsMetrics()
    tts = service(FakeAcoustic(fail_on="BOOM"), metrics=metrics)

    async def run() -> None:
        bad = tts.stream()
        bad.push_text("This part is fine. Then BOOM happens. Never said.")
        bad.end_input()
        good = asyncio.ensure_future(tts.synthesize("A healthy stream, speaking on."))
        got: list[SynthesisChunk] = []
        with pytest.raises(BackendError):
            async for chunk in bad:
                got.append(chunk)
        assert got and got[-1].text == "This part is fine."
        assert np.array_equal((await good).audio, expected_audio("A healthy stream, speaking on."))

    try:
        asyncio.run(run())
    finally:
        tts.close()
    assert metrics.status == {"failed": 1, "done": 1} and tts.active_streams == 0


def test_int16_chunks_and_metrics() -> None:
    metrics = TtsMetrics()
    tts = service(metrics=metrics)

    async def run() -> list[SynthesisChunk]:
        stream = tts.stream(options=SpeakOptions(sample_format="int16"))
        stream.push_text("Hi there, friend. Bye.")
        stream.end_input()
        return await collect(stream)

    try:
        chunks = asyncio.run(run())
    finally:
        tts.close()
    assert all(c.audio.dtype == np.int16 and len(c.pcm16()) == 2 * c.num_samples for c in chunks)
    summary = metrics.summary()
    assert summary["ttfb_p50_s"] is not None and summary["first_sentence_p50_s"] >= summary["ttfb_p50_s"]
    assert summary["streams"] == {"done": 1} and summary["rtf_p50"] > 0
    assert sum(k * n for k, n in summary["decoder_batch_sizes"].items()) == len(chunks)  # one window per chunk


def test_live_stream_paces_itself_to_playback() -> None:
    decoder = FakeDecoder(samples_per_frame=400, first_frames=1, window_frames=2, context_frames=1)  # 50 ms frames
    tts = service(FakeAcoustic(incremental=True, frames_per_char=1), decoder,
                  params=TtsStreamParams(max_ahead_s=0.3, urgent_buffer_s=0.1))

    text = "Twenty four characters."  # 23 frames = 1.15 s of audio

    async def run() -> tuple[float, float]:
        started = time.monotonic()
        async with tts.stream() as stream:
            stream.push_text(text)
            stream.end_input()
            chunks = [c async for c in stream]
        paced = time.monotonic() - started
        assert sum(c.num_samples for c in chunks) == len(text) * 400  # one 50 ms frame per character
        started = time.monotonic()
        await tts.synthesize(text)  # whole-text synthesis is never paced: its caller waits for all of it
        return paced, time.monotonic() - started

    try:
        paced, whole = asyncio.run(run())
    finally:
        tts.close()
    assert paced > 0.6 and whole < 0.4  # paced: about audio length - max_ahead
