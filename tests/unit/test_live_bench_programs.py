"""The live benchmark's programs: the long-form reading cut into runs a live VAD must cut itself, spread among
the short clips (``voxserve.bench.longfile.reading_runs``, ``voxserve.bench.live.interleave``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxserve.bench.live import interleave, make_programs
from voxserve.bench.longfile import _long_form_half, reading_runs
from voxserve.eval.normalize import normalize_english
from voxserve.eval.split import LONG_FORM
from voxserve.types import SAMPLE_RATE


@pytest.mark.parametrize("half", ["tune", "check"])
def test_the_readings_half_is_cut_at_sentence_ends_into_runs_of_at_least_30_s(data_dir: Path, half: str) -> None:
    corpus = data_dir / "corpus"
    runs = reading_runs(corpus, half)  # type: ignore[arg-type]
    assert len(runs) >= 3
    assert all(len(audio) >= 30 * SAMPLE_RATE for audio, _ in runs)
    # nothing lost or doubled: the runs' references are the half's, in order, and cover its audio but the
    # silence before its first sentence and after its last
    audio, reference = _long_form_half(corpus / "long" / f"{LONG_FORM}.flac", half)  # type: ignore[arg-type]
    assert " ".join(text for _, text in runs) == reference
    covered = sum(len(a) for a, _ in runs)
    assert len(audio) - SAMPLE_RATE < covered <= len(audio)


def test_the_readings_words_in_parentheses_are_in_its_reference(data_dir: Path) -> None:
    # The reader says "(which also was printed at Maintz by Peter Schoeffer in the year fourteen sixty-two)"; the
    # WER normalizer drops text in parentheses, so the reference keeps the words without them.
    _, reference = _long_form_half(data_dir / "corpus" / "long" / f"{LONG_FORM}.flac", "check")
    assert "(" not in reference and ")" not in reference
    assert "which also was printed at maintz by peter schoeffer" in normalize_english(reference)


def test_a_corpus_without_the_reading_has_no_runs(tmp_path: Path) -> None:
    assert reading_runs(tmp_path, "check") == []


def test_runs_are_spread_among_the_clips_and_every_stream_starts_at_another_clip() -> None:
    clips = [(np.full(SAMPLE_RATE, i, np.float32), f"clip{i}") for i in range(10)]
    runs = [(np.zeros(SAMPLE_RATE, np.float32), f"run{k}") for k in range(3)]
    pool = interleave(clips, runs)
    assert [t for _, t in pool] == ["clip0", "clip1", "run0", "clip2", "clip3", "clip4", "run1", "clip5", "clip6",
                                    "run2", "clip7", "clip8", "clip9"]
    programs = make_programs(pool, 2, seconds=7.0)
    assert [p.reference.split()[0] for p in programs] == ["clip0", "clip1"]
    assert programs[0].reference.split()[:3] == ["clip0", "clip1", "run0"]


@pytest.mark.parametrize("system", ["voxserve", "whisperlive"])
def test_a_stream_that_cannot_connect_is_an_error_not_the_end_of_the_run(system: str) -> None:
    """A peer that refused (or timed out) one stream ended the whole run, and the levels already measured were
    lost with it; now each such stream counts as an error that heard nothing."""
    import asyncio

    from voxserve.bench.live import Program, free_port, run_level

    programs = [Program(np.zeros(SAMPLE_RATE, np.float32), "hello there")] * 2
    row = asyncio.run(run_level(system, f"ws://127.0.0.1:{free_port()}", programs, "unused"))
    assert row["errors"] == 2 and row["utterances"] == 0 and row["wer"] == 1.0
