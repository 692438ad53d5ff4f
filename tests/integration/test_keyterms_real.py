"""Custom vocabulary on the real model (whisper-base) and real clips: the Montreal Forced Aligner clips of the
corpus's check half, which whisper-base spells "Montreal for Solinar" and "Montreal Forestliner" without
key terms (terms chosen on the tune half: voxserve.eval.split)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from voxserve.audio import decode_audio
from voxserve.eval.keyterms_eval import count_phrase, probe_leaks
from voxserve.eval.normalize import normalize_english
from voxserve.eval.wer import score_wer
from voxserve.service import Voxserve
from voxserve.streaming.live_events import TranscriptCompleted

pytestmark = pytest.mark.slow
TERM = "Montreal Forced Aligner"
TERMS = (TERM, "thereunder")
NAMED = ("mfa_crossword.flac", "mfa_theother.flac")  # check half, one occurrence each
PLAIN = ("fw_jfk.flac", "sb_example1.wav")  # check half, no term


def _reference(path: Path) -> str:
    return path.with_suffix(".txt").read_text(encoding="utf-8")


def test_key_terms_spell_the_names_the_model_gets_wrong(vox: Voxserve, corpus: Path) -> None:
    found = {False: 0, True: 0}
    for name in NAMED:
        path = corpus / "asr" / name
        for with_terms in (False, True):
            text = vox.transcribe(path, language="en", keyterms=TERMS if with_terms else ()).text
            found[with_terms] += min(count_phrase(TERM, text), count_phrase(TERM, _reference(path)))
    assert found == {False: 0, True: len(NAMED)}  # measured: 0 of 2 without, 2 of 2 with


def test_key_terms_do_not_hurt_speech_without_them(vox: Voxserve, corpus: Path) -> None:
    for name in PLAIN:
        path = corpus / "asr" / name
        before = score_wer(_reference(path), vox.transcribe(path, language="en").text).errors
        after = vox.transcribe(path, language="en", keyterms=TERMS)
        assert score_wer(_reference(path), after.text).errors <= before, after.text
        assert "glossary" not in normalize_english(after.text)


def test_the_glossary_does_not_leak_into_audio_without_speech(vox: Voxserve) -> None:
    probes = asyncio.run(probe_leaks(vox, TERMS))
    assert probes and all(not p.leaked or p.caught for p in probes), probes  # measured: no probe leaked


def test_a_live_stream_hears_its_key_terms(vox: Voxserve, corpus: Path) -> None:
    audio = np.concatenate([decode_audio(corpus / "asr" / "mfa_theother.flac"), np.zeros(16000, np.float32)])

    async def texts(keyterms: tuple[str, ...]) -> str:
        stream = vox.live(vox.live_options(keyterms=keyterms))
        for i in range(0, len(audio), 3200):
            stream.push(audio[i : i + 3200])
        stream.end_input()
        return " ".join([ev.text async for ev in stream if isinstance(ev, TranscriptCompleted)])

    assert count_phrase(TERM, asyncio.run(texts(()))) == 0
    assert count_phrase(TERM, asyncio.run(texts(TERMS))) == 1


def test_the_cli_takes_key_terms_from_flags_and_a_file(corpus: Path, tmp_path: Path) -> None:
    terms = tmp_path / "terms.txt"
    terms.write_text(f"# names\n{TERM}\n", encoding="utf-8")
    path = str(corpus / "asr" / "mfa_theother.flac")
    for flags in (["--keyterm", TERM, "--keyterm", "thereunder"], ["--keyterms-file", str(terms)]):
        out = subprocess.run([sys.executable, "-m", "voxserve.cli", "transcribe", path, "--language", "en", "--quiet",
                              *flags], capture_output=True, text=True, timeout=300, check=True).stdout
        assert count_phrase(TERM, out) == 1, out
    bad = subprocess.run([sys.executable, "-m", "voxserve.cli", "transcribe", path, "--keyterms-file",
                          str(tmp_path / "missing.txt")], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "keyterms-file" in bad.stderr
