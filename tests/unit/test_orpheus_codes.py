"""Orpheus codec tokens <-> SNAC code levels (pure numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from voxserve.backends.tts.orpheus_codes import (
    CODES_PER_FRAME,
    OrpheusTokens,
    frames_from_codes,
    frames_from_levels,
    snac_levels,
)


def test_token_ids_of_each_position() -> None:
    t = OrpheusTokens()
    assert t.audio_range(0) == (128266, 128266 + 4096)
    assert t.audio_range(8) == (128266 + 4096, 128266 + 2 * 4096)
    assert t.code(128266 + 5 * 4096 + 17, 5) == 17
    assert t.code(128266 + 5 * 4096 + 17, 12) == 17  # position 12 is the 6th code of the 2nd frame
    with pytest.raises(ValueError):
        t.code(128266 + 17, 1)
    assert t.vocab_end == 128266 + 7 * 4096


def test_prompt_layout() -> None:
    t = OrpheusTokens()
    assert t.prompt([1, 2]) == [128259, 1, 2, 128009, 128260, 128261, 128257]


def test_levels_follow_the_orpheus_layout() -> None:
    # Two frames: codes 0..6 and 10..16.
    frames = frames_from_codes([0, 1, 2, 3, 4, 5, 6, 10, 11, 12, 13, 14, 15, 16, 99])
    assert frames.shape == (CODES_PER_FRAME, 2)
    l0, l1, l2 = snac_levels(frames)
    assert l0.tolist() == [0, 10]
    assert l1.tolist() == [1, 4, 11, 14]
    assert l2.tolist() == [2, 3, 5, 6, 12, 13, 15, 16]


def test_levels_round_trip_and_batch() -> None:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 4096, (CODES_PER_FRAME, 9))
    assert np.array_equal(frames_from_levels(*snac_levels(frames)), frames)
    batch = np.stack([frames, frames[:, ::-1]])
    levels = snac_levels(batch)
    assert [lv.shape for lv in levels] == [(2, 9), (2, 18), (2, 36)]
    assert np.array_equal(levels[2][1], snac_levels(frames[:, ::-1].copy())[2])
