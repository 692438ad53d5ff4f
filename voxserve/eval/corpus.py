"""Evaluation corpora on disk: audio files with a reference beside them (``name.txt``, ``name.rttm``).

Layout of ``../shared/corpus`` (also any folder that follows it): ``asr/`` and ``long/`` hold English clips
with ``.txt`` references; ``lang/`` holds ``<iso639-1>__<name>.<ext>`` clips; ``diar/`` holds ``.rttm``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".webm", ".mp4", ".mkv")


@dataclass(frozen=True)
class CorpusItem:
    """One audio file and its reference."""

    audio: Path
    reference: Path
    language: str = "en"

    @property
    def name(self) -> str:
        """The file name without extension."""
        return self.audio.stem


def find_items(root: Path, subsets: tuple[str, ...] = ("asr", "long"), reference_suffix: str = ".txt") -> list[CorpusItem]:
    """Audio files under ``root/<subset>`` (or ``root`` itself when it has no such folders) with a reference."""
    folders = [root / s for s in subsets if (root / s).is_dir()] or [root]
    items = []
    for folder in folders:
        for audio in sorted(folder.iterdir()):
            if audio.suffix.lower() not in AUDIO_EXTENSIONS:
                continue
            ref = audio.with_suffix(reference_suffix)
            if ref.is_file():
                lang = audio.stem.split("__", 1)[0] if "__" in audio.stem else "en"
                items.append(CorpusItem(audio, ref, lang))
    return items


def default_corpus() -> Path | None:
    """``../shared/corpus`` relative to the working directory or the source tree, when present."""
    here = Path(__file__).resolve()
    for candidate in (Path.cwd() / ".." / "shared" / "corpus", here.parents[3] / "shared" / "corpus"):
        if candidate.is_dir():
            return candidate.resolve()
    return None
