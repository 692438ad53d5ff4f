"""Coverage-guided fuzzing of the audio decoder with atheris (libFuzzer): any input must decode or raise
InvalidInput; another exception, a crash, a hang (``-timeout``) or runaway memory (``-rss_limit_mb``) is a finding.

    python tests/reliability/atheris_decode.py -runs=20000 -timeout=30 -rss_limit_mb=3072 CORPUS_DIR

The corpus folder is seeded with small valid WAV, FLAC, MP3, Ogg and AIFF files (tests/reliability/fuzz_media.py)
when it is empty. ``test_fuzz_decode.py::test_atheris`` runs a bounded sample of this.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["voxserve"]):
    from voxserve.audio import decode_audio
    from voxserve.errors import InvalidInput


def one_input(data: bytes) -> None:
    try:
        audio = decode_audio(data, max_duration_s=30.0)
    except InvalidInput:
        return
    if audio.ndim != 1 or len(audio) > 31 * 16000:
        raise AssertionError(f"bad output: shape {audio.shape}")


def seed(folder: Path) -> None:
    from tests.reliability.fuzz_media import seeds

    folder.mkdir(parents=True, exist_ok=True)
    if not any(folder.iterdir()):
        for name, data in seeds().items():
            (folder / f"seed-{name}").write_bytes(data)


if __name__ == "__main__":
    folders = [Path(a) for a in sys.argv[1:] if not a.startswith("-")]
    for f in folders:
        seed(f)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
