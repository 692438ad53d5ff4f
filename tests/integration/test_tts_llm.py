"""The LLM-TTS code path (Orpheus-style token model + SNAC decoder) on tiny random-weight models.

No Orpheus or SNAC weights exist here: these models are random, so the audio is noise. What is tested is the
real code: prompt layout, constrained sampling of audio tokens, frames leaving one at a time, windowed SNAC
decoding (equal to whole decoding), batching across streams, and streams not mixing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("snac")

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from voxserve.backends.base import SpeechOptions  # noqa: E402
from voxserve.backends.tts.catalog import VoiceCatalog  # noqa: E402
from voxserve.backends.tts.orpheus import OrpheusAcoustic, OrpheusLm, OrpheusSampling, orpheus_voice_entries  # noqa: E402
from voxserve.backends.tts.orpheus_codes import CODES_PER_FRAME, OrpheusTokens  # noqa: E402
from voxserve.backends.tts.snac_decoder import SnacDecoder, snac_from_config  # noqa: E402
from voxserve.engine.batcher import BatcherConfig  # noqa: E402
from voxserve.engine.tts_pool import VoicePool  # noqa: E402
from voxserve.errors import Unsupported  # noqa: E402
from voxserve.streaming.tts import SpeakOptions, TtsStreamParams  # noqa: E402
from voxserve.streaming.tts_service import TtsService  # noqa: E402
from voxserve.streaming.tts_windows import WindowParams, WindowPlanner  # noqa: E402

# Orpheus' layout on a small vocabulary: bytes are text tokens, specials follow, then 7 codebooks of 64.
TOKENS = OrpheusTokens(start_of_human=257, end_of_text=258, end_of_human=259, start_of_ai=260, start_of_speech=261,
                       end_of_speech=262, audio_offset=266, codebook_size=64)
# SNAC 24 kHz's structure (hop 512, strides 4/2/1) with small widths and no noise blocks (deterministic output).
SNAC_CONFIG = dict(sampling_rate=24000, encoder_dim=8, encoder_rates=[2, 4, 8, 8], decoder_dim=64,
                   decoder_rates=[8, 8, 4, 2], attn_window_size=None, codebook_size=64, codebook_dim=4,
                   vq_strides=[4, 2, 1], noise=False, depthwise=True)


def tiny_lm(max_frames: int = 12) -> OrpheusLm:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=TOKENS.vocab_end, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024)
    return OrpheusLm(LlamaForCausalLM(config), lambda s: list(s.encode()), TOKENS, OrpheusSampling(max_frames=max_frames))


@pytest.fixture(scope="module")
def models() -> tuple[OrpheusLm, SnacDecoder]:
    return tiny_lm(), SnacDecoder(snac_from_config(SNAC_CONFIG), name="snac-tiny")


@pytest.fixture
def tts(models: tuple[OrpheusLm, SnacDecoder]) -> Iterator[TtsService]:
    catalog = VoiceCatalog(default_voice="tara")
    for entry in orpheus_voice_entries(lambda: models, ("tara", "leo")):
        catalog.register(entry)
    service = TtsService(VoicePool(catalog, BatcherConfig(max_batch_size=8, max_wait_ms=15.0)),
                         TtsStreamParams(max_ahead_s=0.0))
    yield service
    service.close()


def test_generated_frames_are_valid_codes_one_frame_at_a_time(models: tuple[OrpheusLm, SnacDecoder]) -> None:
    lm, _ = models
    blocks = list(lm.generate("tara: Hello there.", seed=3))
    assert blocks[-1].end_of_unit and all(not b.end_of_unit for b in blocks[:-1])
    assert all(b.frames.shape == (CODES_PER_FRAME, 1) for b in blocks[:-1])
    frames = np.concatenate([b.frames for b in blocks], axis=-1)
    assert 0 < frames.shape[1] <= 12
    assert frames.min() >= 0 and frames.max() < TOKENS.codebook_size
    again = np.concatenate([b.frames for b in lm.generate("tara: Hello there.", seed=3)], axis=-1)
    assert np.array_equal(frames, again)  # a seed makes generation repeatable


def test_windowed_snac_decoding_equals_whole_decoding(models: tuple[OrpheusLm, SnacDecoder]) -> None:
    _, decoder = models
    frames = np.random.default_rng(0).integers(0, 64, (CODES_PER_FRAME, 30))
    whole = decoder.decode_batch([frames])[0]
    assert whole.shape == (30 * decoder.info.samples_per_frame,)
    windows = WindowPlanner(WindowParams(1, 8, decoder.info.context_frames)).finish(30)
    decoded = decoder.decode_batch([frames[:, w.start : w.end] for w in windows])  # one stacked batch
    windowed = np.concatenate([a[slice(*w.trim(decoder.info.samples_per_frame))] for a, w in zip(decoded, windows, strict=True)])
    assert float(np.max(np.abs(windowed - whole))) < 1e-4  # measured ~3e-7 with 3 context frames
    no_context = WindowPlanner(WindowParams(1, 8, 0)).finish(30)
    rough = decoder.decode_batch([frames[:, w.start : w.end] for w in no_context])
    seams = np.concatenate([a[slice(*w.trim(decoder.info.samples_per_frame))] for a, w in zip(rough, no_context, strict=True)])
    assert float(np.max(np.abs(seams - whole))) > 1e-2  # without context the windows differ: the test can fail


def test_concurrent_llm_streams_do_not_mix_and_share_decoder_batches(tts: TtsService) -> None:
    texts = ["Hello there.", "A different sentence entirely.", "Third one!"]
    batcher = tts.pool.voice("tara").decoder.batcher
    decode = batcher._fn
    calls: list[list[bytes]] = []
    owner: dict[bytes, set[int]] = {}  # each window's frames -> the streams (by index) that decoded them alone
    together_started = threading.Event()  # set once each text was synthesized alone
    streams_queued = threading.Event()

    def queued_owners() -> set[int]:
        with batcher._cond:
            frames = [np.asarray(e.item).tobytes() for e in batcher._heap]
        return set().union(*(owner.get(f, set()) for f in frames))

    def recording(items: list[Any]) -> Any:
        calls.append([np.asarray(i).tobytes() for i in items])
        if together_started.is_set() and not streams_queued.is_set():
            # Hold the first call until windows of two other streams wait behind it (how streams overlap on a
            # busy decoder), whatever this CPU's speed: the next call must then take them as one batch.
            deadline = time.monotonic() + 20
            while len(queued_owners()) < 2 and time.monotonic() < deadline:
                time.sleep(0.005)
            streams_queued.set()
        return decode(items)

    batcher._fn = recording

    async def one(text: str, seed: int) -> np.ndarray:
        return (await tts.synthesize(text, options=SpeakOptions(seed=seed))).audio

    expected = []
    for i, text in enumerate(texts):
        first = len(calls)
        expected.append(asyncio.run(one(text, i)))
        for call in calls[first:]:
            for frames in call:
                owner.setdefault(frames, set()).add(i)
    together_started.set()
    first = len(calls)

    async def together() -> list[np.ndarray]:
        return list(await asyncio.gather(*(one(t, i) for i, t in enumerate(texts))))

    got = asyncio.run(together())
    for e, g in zip(expected, got, strict=True):
        assert e.shape == g.shape and e.shape[0] % 2048 == 0
        assert float(np.max(np.abs(e - g))) < 1e-4
    assert sum(len(c) for c in calls[first:]) == sum(len(c) for c in calls[:first])  # the same windows, once each
    mixed = [c for c in calls[first:] if len(c) > 1 and len(set().union(*(owner[f] for f in c))) > 1]
    assert mixed, "windows of different streams were never decoded in one batch"


def test_stream_chunks_and_voices(tts: TtsService) -> None:
    async def run() -> list[Any]:
        stream = tts.stream("leo", SpeakOptions(seed=1, sample_format="int16"))
        stream.push_text("Streaming from a token model, ")
        stream.push_text("frame by frame.")
        stream.end_input()
        return [c async for c in stream]

    chunks = asyncio.run(run())
    assert chunks and chunks[0].sample_rate == 24000 and chunks[0].audio.dtype == np.int16
    assert chunks[0].num_samples == 2048  # the first window keeps one frame: 85 ms
    assert [c.sequence for c in chunks] == list(range(len(chunks)))
    assert [v.name for v in tts.voices()] == ["tara", "leo"] and tts.voices()[0].backend == "orpheus"


def test_speed_is_unsupported(models: tuple[OrpheusLm, SnacDecoder]) -> None:
    acoustic = OrpheusAcoustic(models[0], orpheus_voice_entries(lambda: models, ("tara",))[0].info)
    with pytest.raises(Unsupported):
        acoustic.check_options(SpeechOptions(speed=1.5))
