"""Orpheus-style codec tokens <-> SNAC codes: pure numpy, no model.

An Orpheus LLM speaks in frames of 7 tokens. Token ``k`` of a frame (``k = position % 7``) is
``audio_offset + k * codebook_size + code``; the 7 codes of a frame are SNAC's 3 levels for 4 latent steps:
level 0 gets code 0; level 1 gets codes 1 and 4; level 2 gets codes 2, 3, 5 and 6 (in that order). A frame is
therefore ``4 * hop`` samples (2048 at SNAC 24 kHz: 85.3 ms), and real-time speech needs ~82 tokens per second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

CODES_PER_FRAME = 7
_LEVEL1 = (1, 4)
_LEVEL2 = (2, 3, 5, 6)


@dataclass(frozen=True)
class OrpheusTokens:
    """The special token ids of an Orpheus-style model (defaults: Orpheus 3B on Llama 3's vocabulary)."""

    start_of_human: int = 128259
    end_of_text: int = 128009
    end_of_human: int = 128260
    start_of_ai: int = 128261
    start_of_speech: int = 128257
    end_of_speech: int = 128258
    audio_offset: int = 128266
    codebook_size: int = 4096

    @property
    def vocab_end(self) -> int:
        """One past the last audio token id."""
        return self.audio_offset + CODES_PER_FRAME * self.codebook_size

    def prompt(self, text_ids: Sequence[int]) -> list[int]:
        """The model input for a text: start-of-human, the text's ids, end markers, start of speech."""
        return [self.start_of_human, *text_ids, self.end_of_text, self.end_of_human, self.start_of_ai,
                self.start_of_speech]

    def audio_range(self, position: int) -> tuple[int, int]:
        """The token ids allowed at an audio position (``[lo, hi)``)."""
        lo = self.audio_offset + (position % CODES_PER_FRAME) * self.codebook_size
        return lo, lo + self.codebook_size

    def code(self, token: int, position: int) -> int:
        """The SNAC code of an audio token at ``position``.

        Raises:
            ValueError: the token is not an audio token of that position.
        """
        lo, hi = self.audio_range(position)
        if not lo <= token < hi:
            raise ValueError(f"token {token} is not an audio token for position {position} ([{lo}, {hi}))")
        return token - lo


def frames_from_codes(codes: Sequence[int]) -> npt.NDArray[np.int64]:
    """Codes in generation order -> frames of shape (7, n); an incomplete last frame is dropped."""
    n = len(codes) // CODES_PER_FRAME
    return np.asarray(codes[: n * CODES_PER_FRAME], dtype=np.int64).reshape(n, CODES_PER_FRAME).T.copy()


def snac_levels(frames: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
    """Frames of shape (..., 7, n) -> SNAC's three code levels of shapes (..., n), (..., 2n), (..., 4n)."""
    level0 = frames[..., 0, :]
    level1 = np.stack([frames[..., k, :] for k in _LEVEL1], axis=-1).reshape(*frames.shape[:-2], -1)
    level2 = np.stack([frames[..., k, :] for k in _LEVEL2], axis=-1).reshape(*frames.shape[:-2], -1)
    return level0, level1, level2


def frames_from_levels(level0: npt.NDArray[np.int64], level1: npt.NDArray[np.int64],
                       level2: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The inverse of :func:`snac_levels` for one sequence (used to turn encoded audio into frames)."""
    n = level0.shape[-1]
    frames = np.empty((CODES_PER_FRAME, n), dtype=np.int64)
    frames[0] = level0
    l1 = level1.reshape(n, 2)
    l2 = level2.reshape(n, 4)
    for j, k in enumerate(_LEVEL1):
        frames[k] = l1[:, j]
    for j, k in enumerate(_LEVEL2):
        frames[k] = l2[:, j]
    return frames
