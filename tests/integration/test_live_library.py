"""Live transcription through the library's front door (``Voxserve.live``) on real speech."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

import numpy as np
import pytest

from tests.quality import READER, jfk_wer, wer
from voxserve import Voxserve
from voxserve.audio import decode_audio
from voxserve.streaming.live_asr import LiveOptions
from voxserve.streaming.live_events import TranscriptCompleted

pytestmark = pytest.mark.slow


def live_texts(vox: Voxserve, audio: np.ndarray, options: LiveOptions | None = None) -> list[str]:
    """The completed transcripts of one stream fed ``audio`` (all at once: faster than real time)."""

    async def main() -> list[str]:
        stream = vox.live(options)
        for i in range(0, len(audio), 3200):
            stream.push(audio[i : i + 3200])
        stream.end_input()

        async def completed() -> list[str]:
            return [ev.text async for ev in stream if isinstance(ev, TranscriptCompleted)]

        return await asyncio.wait_for(completed(), 120)  # a stream that never ends fails here

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


def test_a_short_utterance_that_loops_once_is_decoded_again(facade: Voxserve, data_dir: object) -> None:
    """"one ... two three" in English: after "1" as the prompt, the 2 s "two three" came back "2 3 2 3" (one
    loop: no repeated run the guard counts, a plausible word rate); its word timings show the second "2" in no
    time, so it is decoded again (without the prompt: "2, 3")."""
    options = facade.live_options()
    audio = decode_audio(data_dir / "corpus" / "asr" / "ub_english_123.wav")  # type: ignore[operator]
    texts = live_texts(facade, audio, replace(options, decode=replace(options.decode, language="en")))
    digits = {"one": "1", "two": "2", "three": "3"}
    said = [digits.get(w, w) for w in re.findall(r"\w+", " ".join(texts).lower())]
    assert said == ["1", "2", "3"], texts


def test_casual_speech_fed_at_once_completes_every_utterance(facade: Voxserve, data_dir: object) -> None:
    """Casual speech with fillers and pauses, faster than real time, in English: a draft dropped at a pause
    while the piece before it was decoding cancelled that piece, and the stream hung without its finals."""
    options = facade.live_options()
    clip = data_dir / "corpus" / "asr" / "mfa_acoustic_corpus"  # type: ignore[operator]
    texts = live_texts(facade, decode_audio(clip.with_suffix(".wav")),
                       replace(options, decode=replace(options.decode, language="en")))
    # measured 0.19 (4 utterances; "there's some speakers", "and I should be all", a filler heard as "Qaham")
    assert len(texts) >= 3 and wer(clip.with_suffix(".txt").read_text(), " ".join(texts)) <= 0.25, texts


def test_a_sentence_really_said_twice_stays_twice(facade: Voxserve, data_dir: object) -> None:
    """The same recording twice with a short pause (no utterance break): the speaker said it twice."""
    clip = decode_audio(data_dir / "mfa_ls_61-70968-0000.flac")  # type: ignore[operator]
    audio = np.concatenate([clip, np.zeros(4000, np.float32), clip, np.zeros(16000, np.float32)])
    texts = live_texts(facade, audio)
    assert wer(f"{READER} {READER}", " ".join(texts)) <= 0.15, texts


def test_a_prefix_is_continued_and_left_out(data_dir: object) -> None:
    """Whisper's prefix: the decoder continues after the known text of the audio's beginning; the result (text
    and word timings) holds only what follows it."""
    from voxserve.backends.base import AsrRequest, DecodeOptions
    from voxserve.backends.registry import load_asr
    from voxserve.config import load_settings

    model = load_asr(load_settings().asr.model)
    audio = decode_audio(data_dir / "fw_jfk.flac")  # type: ignore[operator]
    options = DecodeOptions(language="en", window="fit", prefix="And so my fellow Americans,")
    result = model.transcribe_batch([AsrRequest(audio, options)])[0]
    assert re.findall(r"\w+", result.text.lower())[:4] == ["ask", "not", "what", "your"], result.text
    assert "americans" not in result.text.lower()
    assert result.words and result.words[0].text.lower().startswith("ask")
    assert result.words[0].start >= 2.0 * 16000  # "Americans" ends near 2.3 s; no word of the prefix is kept


def _followed_texts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that gathers the text of every decode heard after the speech it continues."""
    from voxserve.streaming.live_asr import LiveStream

    followed: list[str] = []
    original = LiveStream._follow_on_text

    async def spy(self: LiveStream, before: object, audio: np.ndarray) -> object:
        result, reread = await original(self, before, audio)  # type: ignore[arg-type]
        if result is not None:
            followed.append(result[0])
        return result, reread

    monkeypatch.setattr(LiveStream, "_follow_on_text", spy)
    return followed


def test_utterances_that_follow_closely_are_heard_after_the_speech_before(
    facade: Voxserve, data_dir: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JFK's four utterances are each less than 2 s after the one before: the last three are decoded after the
    previous one's audio, its text as the prefix; each comes back once, without the prefix's words."""
    followed = _followed_texts(monkeypatch)
    texts = live_texts(facade, decode_audio(data_dir / "fw_jfk.flac"))  # type: ignore[operator]
    assert jfk_wer(" ".join(texts)) <= 0.1, texts
    assert len(followed) >= 2 and set(followed) <= set(texts), (followed, texts)
    for before, after in zip(texts, texts[1:]):
        assert not after.lower().startswith(before.lower()[:12]), texts


def _with_longer_pauses(audio: np.ndarray, pause_s: float) -> np.ndarray:
    """``audio`` with ``pause_s`` of silence put in the middle of each of its pauses of 0.3 s or more (20 ms
    frames under -40 dBFS)."""
    frame = 320
    rms = np.sqrt(np.mean(audio[: len(audio) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    quiet = rms < 0.01
    cuts, run = [], 0
    for i, q in enumerate(quiet):
        run = run + 1 if q else 0
        if run == 15:  # 0.3 s of quiet so far: cut 0.15 s back, in its middle
            cuts.append((i - 7) * frame)
    parts, last = [], 0
    for cut in cuts:
        parts += [audio[last:cut], np.zeros(int(pause_s * 16000), dtype=np.float32)]
        last = cut
    return np.concatenate([*parts, audio[last:]])


def test_utterances_after_longer_pauses_are_heard_after_the_speech_before(
    facade: Voxserve, data_dir: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JFK with 4 s of silence in each pause: past the 2 s within which the previous text is the prompt, within
    ``follow_on_gap_s``; each utterance is decoded after the previous one's audio (the pause shortened to 1 s),
    its text as the prefix, and comes back once, without the prefix's words."""
    followed = _followed_texts(monkeypatch)
    audio = _with_longer_pauses(decode_audio(data_dir / "fw_jfk.flac"), 4.0)  # type: ignore[operator]
    assert len(audio) > 16000 * 19  # at least two pauses were lengthened
    texts = live_texts(facade, audio)
    assert jfk_wer(" ".join(texts)) <= 0.1, texts
    assert len(followed) >= 2 and set(followed) <= set(texts), (followed, texts)
    for before, after in zip(texts, texts[1:]):
        assert not after.lower().startswith(before.lower()[:12]), texts
