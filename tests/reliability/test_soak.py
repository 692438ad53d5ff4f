"""The soak test (``voxserve bench soak``): a short sample in CI (4 streams x 20 s, one slow reader, one that
vanishes, uploads at the same time), the long run (``VOXSERVE_LONG=1``: ``VOXSERVE_SOAK_STREAMS`` streams, 16
by default, for ``VOXSERVE_SOAK_SECONDS``, 180 by default). Nothing lost, mixed or out of order; the server
process's descriptors back to baseline and its memory near it; latencies recorded."""

from __future__ import annotations

import json
import os

import pytest

from tests.reliability.report import record
from voxserve.bench.soak import (
    WARM_UP_S,
    SoakConfig,
    _second_half_growth,
    default_clips,
    format_soak,
    run_soak,
    warm_up,
)


def _run(config: SoakConfig) -> dict[str, object]:
    clips = default_clips()
    assert len(clips) >= 2, "needs at least two clips with references"
    report = run_soak(config, clips)
    print(format_soak(report))
    record("soak", **{k: report[k] for k in ("ok", "wall_s", "streams", "streams_by_kind", "audio_s", "latency_s",
                                             "slow_reader_latency_s", "server_latency_ms", "uploads", "resources",
                                             "load_1min", "close_codes", "rss_second_half_growth_mb")},
           config={"streams": config.streams, "seconds": config.seconds})
    path = os.environ.get("VOXSERVE_SOAK_JSON")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return report


def _check(report: dict[str, object]) -> None:
    streams = report["streams"]
    assert isinstance(streams, dict)
    assert (streams["lost"], streams["mixed"], streams["out_of_order"]) == (0, 0, 0), streams
    uploads = report["uploads"]
    assert isinstance(uploads, dict) and uploads["mixed"] == 0 and uploads["ok"] > 0, uploads
    resources = report["resources"]
    assert isinstance(resources, dict) and resources["live_streams_left"] == 0
    before, after = resources["before"], resources["after"]
    assert after["fds"] <= before["fds"] + 2, (before, after)
    assert report["ok"], report


def test_soak_sample() -> None:
    report = _run(SoakConfig(streams=4, seconds=20.0, slow=0.25, vanish=0.25, uploads=1))
    _check(report)
    streams = report["streams"]
    assert isinstance(streams, dict) and streams["items"] >= 6 and streams["shed"] == 0


@pytest.mark.long
def test_soak_long() -> None:
    streams = int(os.environ.get("VOXSERVE_SOAK_STREAMS", "16"))
    seconds = float(os.environ.get("VOXSERVE_SOAK_SECONDS", "180"))
    report = _run(SoakConfig(streams=streams, seconds=seconds, slow=0.125, vanish=0.125, uploads=2,
                             model=os.environ.get("VOXSERVE_SOAK_MODEL") or None))
    _check(report)
    growth = report["rss_second_half_growth_mb"]
    assert growth is None or growth < 100, growth  # a leak keeps growing; an allocator levels off


def test_the_checks_catch_lost_mixed_and_reordered_text() -> None:
    """The soak's verdict can fail: swapped, missing and reordered transcripts are each counted."""
    import numpy as np

    from voxserve.bench.soak_clients import Clip, StreamOutcome

    clips = [Clip("a", None, "the quick brown fox jumps over the lazy dog", np.zeros(1)),  # type: ignore[arg-type]
             Clip("b", None, "she sells sea shells by the sea shore every day", np.zeros(1))]  # type: ignore[arg-type]
    good = StreamOutcome("normal", clips=["a", "b"], committed_ids=["i1", "i2"], completed_order=["i1", "i2"],
                         completed={"i1": "the quick brown fox jumps over the lazy dog", "i2": "she sells sea shells"})
    assert good.check(clips)["lost"] == good.check(clips)["mixed"] == good.check(clips)["out_of_order"] == 0
    mixed = StreamOutcome("normal", clips=["a", "b"], committed_ids=["i1", "i2"], completed_order=["i1", "i2"],
                          completed={"i1": "she sells sea shells by the sea shore", "i2": "she sells sea shells"})
    assert mixed.check(clips)["mixed"] == 1
    lost = StreamOutcome("normal", clips=["a", "b"], committed_ids=["i1", "i2"], completed_order=["i1"],
                         completed={"i1": "the quick brown fox"})
    assert lost.check(clips)["lost"] == 1
    assert StreamOutcome("vanish", clips=["a", "b"], committed_ids=["i1"]).check(clips)["lost"] == 0
    reordered = StreamOutcome("normal", clips=["a", "b"], committed_ids=["i1", "i2"], completed_order=["i2", "i1"],
                              completed={"i1": "the quick brown fox", "i2": "she sells sea shells"})
    assert reordered.check(clips)["out_of_order"] == 1


def test_the_warm_up_forms_the_soak_s_batches_before_the_baseline() -> None:
    """The warm-up runs as many streams and upload clients as the soak (a 20 s soak with one warm-up stream read
    its first 4-stream batches' allocations as 139 MB of growth), briefly, with no client vanishing."""
    config = SoakConfig(streams=16, seconds=180.0, slow=0.125, vanish=0.125, uploads=2, model="whisper-base")
    warm = warm_up(config)
    assert (warm.streams, warm.uploads, warm.slow, warm.model) == (16, 2, 0.125, "whisper-base")
    assert warm.vanish == 0 and warm.seconds == WARM_UP_S
    assert warm_up(SoakConfig(streams=4, seconds=2.0)).seconds == 2.0


def test_second_half_growth_reads_a_leak_not_an_early_dip_below_the_baseline() -> None:
    """Measured in a clean-clone run: RSS fell from its 666 MB baseline to 623 MB early and ended at 733 MB; that
    is 67 MB above the warm baseline, not 110 MB of growth. A steady leak still shows in full."""
    dip = [(2.0 * i, mb) for i, mb in enumerate([640, 623, 625, 630, 628, 626, 700, 715, 725, 733])]
    assert _second_half_growth(dip, baseline_mb=665.6) == 67.4
    assert _second_half_growth(dip) == 93.0  # without the baseline: the dip's own peak (640 MB) as reference
    leak = [(2.0 * i, 666.0 + 25 * i) for i in range(12)]  # 25 MB every 2 s
    growth = _second_half_growth(leak, baseline_mb=666.0)
    assert growth is not None and growth >= 100
    assert _second_half_growth(leak[:5], baseline_mb=666.0) is None  # too short to tell
