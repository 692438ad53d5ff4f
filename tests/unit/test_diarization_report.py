"""The diarization eval report on a hand-made RTTM pair whose scores are worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyannote.metrics")

from voxserve.eval.corpus import CorpusItem  # noqa: E402
from voxserve.eval.der import read_rttm  # noqa: E402
from voxserve.eval.diarization_eval import DiarizationEvaluation, format_report, score_file  # noqa: E402
from voxserve.types import Diarization  # noqa: E402

REFERENCE = """SPEAKER f 1 0.00 10.00 <NA> <NA> ann <NA> <NA>
SPEAKER f 1 10.00 10.00 <NA> <NA> bob <NA> <NA>
"""
# ann is found whole (X); bob is split in two halves (Y, Z): 5 s of confusion, one speaker too many
HYPOTHESIS = """SPEAKER f 1 0.00 10.00 <NA> <NA> X <NA> <NA>
SPEAKER f 1 10.00 5.00 <NA> <NA> Y <NA> <NA>
SPEAKER f 1 15.00 5.00 <NA> <NA> Z <NA> <NA>
"""


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_report_of_a_known_pair(tmp_path: Path) -> None:
    item = CorpusItem(tmp_path / "f.wav", _file(tmp_path, "f.rttm", REFERENCE))
    turns = tuple(t for ts in read_rttm(_file(tmp_path, "h.rttm", HYPOTHESIS)).values() for t in ts)
    scored = score_file(item, Diarization(turns, ("X", "Y", "Z"), 20 * 16000))
    # collar 0: 5 s of bob's 10 s go to the wrong (unmapped) speaker, over 20 s of speech
    assert scored.der[0.0].confusion == pytest.approx(5.0) and scored.der[0.0].der == pytest.approx(0.25)
    assert scored.der[0.0].missed == pytest.approx(0.0) and scored.der[0.0].false_alarm == pytest.approx(0.0)
    # collar 0.25 s each side of 0, 10 and 20 s: 19 s scored; Z's 15-19.75 s is 4.75 s of confusion
    assert scored.der[0.25].total == pytest.approx(19.0) and scored.der[0.25].confusion == pytest.approx(4.75)
    # JER: ann 0, bob 1 - 5/10 (best match Y covers half of him): mean 0.25
    assert scored.jer == pytest.approx(0.25)
    assert (scored.ref_speakers, scored.hyp_speakers, scored.count_error) == (2, 3, 1)
    under = score_file(item, Diarization(turns[:1], ("X",), 20 * 16000))
    assert under.count_error == -1 and under.der[0.0].missed == pytest.approx(10.0)
    ev = DiarizationEvaluation([scored, under], wall_s=1.0)
    assert ev.mean_abs_count_error == pytest.approx(1.0)
    report = format_report(ev)
    assert "pooled DER (collar 0.00 s, overlap scored) 37.5%" in report  # (5 + 10) / 40
    assert "pooled DER (collar 0.25 s" in report and "mean |hyp - ref| 1.00 over 2 files" in report
    assert "   +1 " in report and "   -1 " in report
