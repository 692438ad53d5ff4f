"""A clip Whisper skipped inside a packed chunk, with the aligner spreading the next words over it.

``tests/data/check_program4_43-64s.flac`` is 43.0-64.2 s of the check half's fifth live-bench program (`voxserve
bench live --half check`, program 4): the end of a long-form reading sentence, two short MFA clips ("m f a is
like this is so many words right here", "this is the other montreal forced aligner") 1-2 s apart, and the next
reading sentence. Packed into one chunk, whisper-base said "... easier to read. On the whole, ..." and the aligner
laid "On" and "the whole," (1.1 s each) over the two clips, so no 2 s stretch of them looked unheard: both clips
were lost. A piece that says under ``GuardConfig.min_piece_words_per_s`` is now decoded again in halves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from voxserve.eval.normalize import normalize_english
from voxserve.service import Voxserve

pytestmark = pytest.mark.slow
DATA = Path(__file__).resolve().parents[1] / "data"


def test_two_clips_skipped_in_a_packed_chunk_are_transcribed() -> None:
    with Voxserve() as vox:
        t = vox.transcribe(DATA / "check_program4_43-64s.flac", language="en")
    said = normalize_english(t.text)
    assert "many words right here" in said, t.text
    assert "the other montreal" in said, t.text
    assert "on the whole the type of this book" in said, t.text  # the sentence after them is still there
    assert any("thin_speech" in r.reasons for r in t.stats.chunk_reports)
    # The clips' speech (VAD pieces) lies at 4.86-7.08 s and 10.21-13.11 s of the excerpt: their words are there.
    for word, (lo, hi) in {"many": (4.86, 7.08), "montreal": (10.21, 13.11)}.items():
        (found,) = [w for w in t.words if w.text.strip(" ,.").lower() == word]
        assert lo <= found.start / 16_000 < found.end / 16_000 <= hi, (word, found)
