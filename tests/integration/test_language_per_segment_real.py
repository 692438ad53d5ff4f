"""A language per segment on the real model: clips in German, Spanish and Portuguese between English ones
(the corpus's check half), joined by 1.5 s pauses. The single-language mode takes the first speech's
language for the whole file; per-segment mode must give every clip its own language and text."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from voxserve.eval.corpus import CorpusItem
from voxserve.eval.language_eval import MixedScore, evaluate_languages, join_clips
from voxserve.service import Voxserve

pytestmark = pytest.mark.slow
CLIPS = (("en", "asr/fw_jfk.flac"), ("de", "lang/de__pv_test_de.wav"), ("es", "lang/es__pv_test_es.wav"),
         ("pt", "lang/pt__pv_test_pt.wav"), ("en", "asr/sb_example1.wav"))


@pytest.fixture(scope="module")
def items(corpus: Path) -> list[CorpusItem]:
    return [CorpusItem(corpus / p, (corpus / p).with_suffix(".txt"), lang) for lang, p in CLIPS]


@pytest.fixture(scope="module")
def scores(vox: Voxserve, items: list[CorpusItem]) -> dict[str, MixedScore]:
    return {m.mode: m for m in asyncio.run(evaluate_languages(vox, items, allowed=("en", "de", "es", "pt")))}


def test_every_clip_gets_its_own_language(scores: dict[str, MixedScore]) -> None:
    per = scores["auto-per-segment"]
    assert all(c.segment_languages and set(c.segment_languages) == {c.language} for c in per.clips), per.clips
    assert per.language == "en"  # most of the speech


def test_per_segment_beats_one_language_for_the_file(scores: dict[str, MixedScore]) -> None:
    single, per = scores["single"], scores["auto-per-segment"]
    assert per.accuracy > single.accuracy
    assert per.pooled.wer < 0.35 and per.pooled.wer < single.pooled.wer  # measured: see docs/benchmarks.md
    for c in per.clips:
        assert c.score.wer <= 0.6, (c.name, c.hypothesis)


def test_the_cli_writes_languages_per_segment(items: list[CorpusItem], tmp_path: Path) -> None:
    import soundfile as sf

    audio, _ = join_clips(items[:2])
    path = tmp_path / "mixed.wav"
    sf.write(path, audio, 16000)
    out = subprocess.run([sys.executable, "-m", "voxserve.cli", "transcribe", str(path), "--format", "verbose_json",
                          "--language", "auto-per-segment", "--allowed-languages", "en,de", "--quiet"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    languages = [s["language"] for s in json.loads(out)["segments"]]
    assert languages[0] == "english" and languages[-1] == "german", languages
