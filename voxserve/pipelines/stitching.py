"""Stitching: chunk results on chunk-local time -> one transcript on the file's timeline.

The only place where chunk time becomes file time. Guarantees: words keep their order, never overlap,
start at or after their chunk's start and end at or before its end; segments are built from words
(sentence ends, pauses, piece borders, a maximum length) and never overlap either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from voxserve.backends.base import TimedWord
from voxserve.languages import NO_SPACE_LANGUAGES
from voxserve.pipelines.chunking import ChunkPlan
from voxserve.types import SAMPLE_RATE, Segment, Word

SENTENCE_END = (".", "?", "!", "。", "？", "！")


@dataclass(frozen=True)
class ChunkText:
    """The accepted recognition of one chunk, on chunk-local time."""

    plan: ChunkPlan
    text: str
    tokens: tuple[int, ...]
    words: tuple[TimedWord, ...]
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0
    language: str = ""


@dataclass(frozen=True)
class SegmentRules:
    """Where segments break: after sentence ends once ``min_s`` long, at pauses, and at ``max_s``."""

    min_s: float = 1.0
    max_s: float = 12.0
    pause_s: float = 1.0


def _inside_one_piece(plan: ChunkPlan, start: int, end: int) -> tuple[int, int]:
    """A chunk-local span cut to the piece that holds most of it."""
    best, best_overlap = (start, end), -1
    for p in plan.pieces:
        lo, hi = max(start, p.local_start), min(end, p.local_start + p.length)
        if hi - lo > best_overlap:
            best, best_overlap = ((lo, hi) if hi > lo else (start, end)), hi - lo
    return best


def words_to_file_time(chunk: ChunkText, floor: int) -> list[Word]:
    """Map a chunk's words to file time, monotonic and not before ``floor`` (the previous word's end).

    A word whose chunk-local span crosses the join of two pieces belongs to the piece holding most of it: it
    is clipped to that piece, so it never spans the gap between them (which may be a minute of silence)."""
    out: list[Word] = []
    limit = chunk.plan.file_end
    for w in chunk.words:
        lo, hi = _inside_one_piece(chunk.plan, w.start, w.end)
        start = max(chunk.plan.to_file(lo), floor, chunk.plan.file_start)
        end = min(max(chunk.plan.to_file(hi, is_end=True), start), limit)
        start = min(start, end)
        out.append(Word(w.text, start, end, w.probability, logprobs=w.logprobs))
        floor = end
    return out


def _join(texts: Sequence[str], language: str) -> str:
    return ("" if language in NO_SPACE_LANGUAGES else " ").join(t for t in texts if t).strip()


def _break_after(words: list[Word], i: int, seg_start: int, rules: SegmentRules, borders: set[int]) -> bool:
    w, nxt = words[i], words[i + 1]
    duration = (w.end - seg_start) / SAMPLE_RATE
    if (nxt.start - w.end) / SAMPLE_RATE >= rules.pause_s or i in borders:
        return True
    if w.text.endswith(SENTENCE_END) and duration >= rules.min_s:
        return True
    return (nxt.end - seg_start) / SAMPLE_RATE > rules.max_s


def _piece_borders(chunk: ChunkText, words: list[Word]) -> set[int]:
    """Indices of words after which the next word lies in another piece (a removed stretch of audio)."""
    ends = [p.file_end for p in chunk.plan.pieces[:-1]]
    borders = set()
    for i in range(len(words) - 1):
        if any(words[i].end <= e <= words[i + 1].start for e in ends):
            borders.add(i)
    return borders


_Stats = tuple[float, float, float, float]
"""A chunk's decoding statistics in Segment's field order: temperature, avg_logprob, compression ratio,
no-speech probability."""


def chunk_segments(chunk: ChunkText, floor: int, language: str, rules: SegmentRules) -> list[Segment]:
    """Segments of one chunk (ids are filled in by :func:`stitch`)."""
    stats: _Stats = (chunk.temperature, chunk.avg_logprob, chunk.compression_ratio, chunk.no_speech_prob)
    if not chunk.words:
        if not chunk.text.strip():
            return []
        start = max(chunk.plan.file_start, floor)
        return [Segment(0, start, max(start, chunk.plan.file_end), chunk.text.strip(), (), chunk.tokens, *stats)]
    words = words_to_file_time(chunk, floor)
    local = {id(w): lw for w, lw in zip(words, chunk.words)}
    borders = _piece_borders(chunk, words)
    segments, group = [], [words[0]]
    for i in range(len(words) - 1):
        if _break_after(words, i, group[0].start, rules, borders):
            segments.append(_segment(group, local, language, stats))
            group = []
        group.append(words[i + 1])
    segments.append(_segment(group, local, language, stats))
    return segments


def _segment(group: list[Word], local: dict[int, TimedWord], language: str, stats: _Stats) -> Segment:
    tokens = tuple(t for w in group for t in local[id(w)].tokens)
    text = _join([w.text for w in group], language)
    return Segment(0, group[0].start, group[-1].end, text, tuple(group), tokens, *stats)


def stitch(chunks: Sequence[ChunkText], language: str, rules: SegmentRules = SegmentRules(), *,
           segment_languages: bool = False) -> tuple[Segment, ...]:
    """All chunks' segments on file time, in order, numbered from 0. With ``segment_languages`` each segment
    is in its chunk's language (``ChunkText.language``; ``language`` when empty) and records it."""
    out: list[Segment] = []
    floor = 0
    for chunk in sorted(chunks, key=lambda c: c.plan.file_start):
        spoken = (chunk.language or language) if segment_languages else None
        for seg in chunk_segments(chunk, floor, spoken or language, rules):
            if spoken is not None:
                seg = replace(seg, language=spoken)
            out.append(Segment(**{**seg.__dict__, "id": len(out)}))
            floor = seg.end
    return tuple(out)


def transcript_text(segments: Sequence[Segment], language: str) -> str:
    """The plain text of a transcript."""
    return _join([s.text for s in segments], language)
