"""``voxserve bench tts --text-stream``: replies as LLM-paced deltas over the real server's speech WebSocket
(real voice); the pieces, the boundaries, and the report's structure and sanity (not speed: the machine is shared)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxserve.bench.tts_text_stream import REPLIES, boundary, paced, word_pieces


def test_word_pieces_are_llm_sized_and_join_back() -> None:
    pieces = [p for r in REPLIES for p in word_pieces(r)]
    assert all("".join(word_pieces(r)) == r for r in REPLIES)
    assert 3.5 < sum(map(len, pieces)) / len(pieces) < 5.0  # ~4 characters a token, as English BPE vocabularies
    assert word_pieces("Sure. Your booking") == ["Sure.", " Your", " book", "ing"]
    script = paced("one two three", 10.0)
    assert [d.at_s for d in script.deltas] == [0.0, 0.1, 0.2] and script.text == "one two three"
    assert script.generation_s == 0.2


def test_boundaries() -> None:
    assert boundary("Sure.") == "sentence" and boundary('He said "no."') == "sentence"
    assert boundary("Thanks for waiting,") == "comma" and boundary("Two things:") == "clause"
    assert boundary("The train to Boston") == "word"


@pytest.mark.slow
def test_text_stream_mode_reports_every_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("piper", reason="needs voxserve[tts]")
    from voxserve.cli import main

    out = tmp_path / "text-stream.json"
    assert main(["bench", "tts", "--text-stream", "--no-llm", "--replies", "2", "--token-rates", "40",
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert "whole reply / streamed" in capsys.readouterr().out
    rows = {r["mode"]: r for r in report["rows"]}
    assert set(rows) == {"streamed", "streamed, wait 50 ms", "whole reply"}
    for row in rows.values():
        assert row["pace"] == "40 tokens/s" and row["replies"] == 2 and row["tokens_per_s_p50"] == 40.0
        assert 0 < row["first_audio_p50_ms"] <= row["first_audio_p95_ms"] < 30_000
        assert sum(row["first_boundary"].values()) == 2 and len(row["load_before"]) == 3
    # the first two replies open on a short sentence ("Sure.") and a long one: the first audio is theirs
    assert rows["streamed"]["first_segments"] == ["Sure.", REPLIES[1].split(". ")[0] + "."]
    # sending the whole reply costs at least its generation time (its last token's time)
    generation = sorted((len(word_pieces(r)) - 1) / 40.0 * 1000 for r in REPLIES[:2])
    whole = rows["whole reply"]
    assert whole["generation_p50_ms"] == pytest.approx(sum(generation) / 2, abs=0.1)
    assert whole["first_audio_p50_ms"] > whole["generation_p50_ms"] and whole["before_last_delta"] == 0
    assert report["ratios"]["40 tokens/s"]["p50"] > 0 and report["llm"].startswith("not asked")
