"""Word timing from Whisper's cross-attention alignment.

CTranslate2's ``align`` returns the dynamic-time-warping path between the text tokens (plus the end-of-text
token) and the encoder frames (20 ms each). A token starts where the path first reaches it; a word spans
from the start of its first token to the start of the next word's first token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from voxserve.backends.base import TimedWord
from voxserve.types import TokenLogprob

SAMPLES_PER_FRAME = 320
"""Encoder frames are 20 ms (16 kHz samples per frame)."""
NO_SPACE_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "my", "yue"})
_MAX_WORD_MEDIANS = 3.0
_MIN_CLIP_SAMPLES = 16_000  # never shrink words shorter than 1 s


def token_units(tokenizer: Any, tokens: Sequence[int]) -> list[tuple[str, list[int]]]:
    """Group byte-level tokens into units that decode to whole characters."""
    units: list[tuple[str, list[int]]] = []
    pending: list[int] = []
    for token in tokens:
        pending.append(token)
        text = tokenizer.decode(pending)
        if "\ufffd" not in text:
            units.append((text, pending))
            pending = []
    if pending:
        units.append((tokenizer.decode(pending), pending))
    return units


def split_words(tokenizer: Any, tokens: Sequence[int], language: str = "en") -> list[tuple[str, list[int]]]:
    """Split tokens into words: a unit starting with a space opens a new word; other units join the last one.

    For languages written without spaces, every unit is a word.
    """
    words: list[tuple[str, list[int]]] = []
    for text, unit in token_units(tokenizer, tokens):
        starts_word = language in NO_SPACE_LANGUAGES or text.startswith(" ") or not words
        if starts_word:
            words.append((text, list(unit)))
        else:
            prev_text, prev_tokens = words[-1]
            words[-1] = (prev_text + text, prev_tokens + list(unit))
    return [(text, toks) for text, toks in words if text.strip()]


def token_start_frames(alignments: Sequence[Sequence[int]], n_tokens: int) -> np.ndarray | None:
    """Frame where each of ``n_tokens`` tokens (end-of-text included) starts, from the DTW path."""
    if not alignments:
        return None
    pairs = np.asarray(alignments, dtype=np.int64)
    text_idx, time_idx = pairs[:, 0], pairs[:, 1]
    jumps = np.concatenate([[True], np.diff(text_idx) != 0])
    starts = time_idx[jumps]
    if len(starts) < n_tokens:
        return None
    return np.asarray(starts[:n_tokens], dtype=np.int64)


def words_from_alignment(
    tokenizer: Any,
    tokens: Sequence[int],
    alignments: Sequence[Sequence[int]],
    token_probs: Sequence[float],
    eot: int,
    n_samples: int,
    language: str = "en",
) -> tuple[TimedWord, ...]:
    """Timed words (sample offsets within the request audio) for decoded ``tokens``."""
    words = split_words(tokenizer, tokens, language)
    if not words:
        return ()
    starts = token_start_frames(alignments, len(tokens) + 1)
    if starts is None:
        return _even_spread(words, n_samples)
    probs = np.asarray(token_probs, dtype=np.float64)
    out: list[TimedWord] = []
    cursor = 0
    for text, word_tokens in words:
        first = _index_of(tokens, word_tokens, cursor)
        last = first + len(word_tokens)
        cursor = last
        spoken_end = first + _spoken_length(tokenizer, word_tokens)
        start = int(starts[first]) * SAMPLES_PER_FRAME
        end = int(starts[min(spoken_end, len(starts) - 1)]) * SAMPLES_PER_FRAME
        p = float(np.mean(probs[first:last])) if last <= len(probs) and last > first else 0.0
        logprobs = _logprobs(tokenizer, word_tokens, probs[first:last]) if last <= len(probs) else ()
        out.append(TimedWord(text.strip(), min(start, n_samples), min(max(end, start), n_samples), p,
                             tuple(word_tokens), logprobs))
    return tuple(_clip_long_words(out))


def _logprobs(tokenizer: Any, tokens: Sequence[int], probs: np.ndarray) -> tuple[TokenLogprob, ...]:
    """Each token's log-probability (from the aligner's forced decode: the decoder's own, token by token)."""
    out = []
    for token, p in zip(tokens, probs):
        raw = token_bytes(tokenizer, token)
        out.append(TokenLogprob(raw.decode("utf-8", errors="replace"), round(float(np.log(max(p, 1e-12))), 6), raw))
    return tuple(out)


def _byte_alphabet() -> dict[str, int]:
    """Byte-level BPE's printable stand-in for each byte (as GPT-2 defined it), mapped back to the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


_BYTES = _byte_alphabet()


def token_bytes(tokenizer: Any, token: int) -> bytes:
    """The raw bytes a byte-level BPE token stands for."""
    piece = tokenizer.id_to_token(token) or ""
    if all(ch in _BYTES for ch in piece):
        return bytes(_BYTES[ch] for ch in piece)
    return str(tokenizer.decode([token])).encode()


def _spoken_length(tokenizer: Any, word_tokens: Sequence[int]) -> int:
    """Tokens of the word before trailing punctuation (the alignment gives a pause to a final comma)."""
    n = len(word_tokens)
    while n > 1 and _is_punctuation(tokenizer.decode([word_tokens[n - 1]])):
        n -= 1
    return n


def _is_punctuation(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and all(not ch.isalnum() for ch in stripped)


def _index_of(tokens: Sequence[int], word_tokens: Sequence[int], cursor: int) -> int:
    n = len(word_tokens)
    for i in range(cursor, len(tokens) - n + 1):
        if list(tokens[i : i + n]) == list(word_tokens):
            return i
    return cursor


def _even_spread(words: list[tuple[str, list[int]]], n_samples: int) -> tuple[TimedWord, ...]:
    step = n_samples // max(1, len(words))
    return tuple(TimedWord(t.strip(), i * step, (i + 1) * step, 0.0, tuple(toks)) for i, (t, toks) in enumerate(words))


def _clip_long_words(words: list[TimedWord]) -> list[TimedWord]:
    """Shrink words that swallowed a pause (alignment spreads a word over trailing or leading silence)."""
    durations = [w.end - w.start for w in words if w.end > w.start]
    if not durations:
        return words
    limit = max(_MIN_CLIP_SAMPLES, int(float(np.median(durations)) * _MAX_WORD_MEDIANS))
    out = []
    for i, w in enumerate(words):
        if w.end - w.start > limit:
            if i == 0:
                w = replace(w, start=w.end - limit)
            else:
                w = replace(w, end=w.start + limit)
        out.append(w)
    return out
