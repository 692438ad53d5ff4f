"""Subtitle cues shaped from a transcript's words: lines of bounded width, cues of bounded line count and
duration (broadcast practice: about 42 characters a line, 2 lines, 7 s).

Pure functions on the types, used by the srt and vtt writers of :mod:`voxserve.formats`. Cues break between
words (a word is never split), preferring the end of a sentence, then a clause, then a pause, and the longer
cue, and not leaving under half a line alone before a phrase ends; a pause of :data:`LONG_PAUSE_S` or a sentence end followed by :data:`SENTENCE_PAUSE_S` always ends a cue.
A cue never holds two speakers. Each cue keeps its words' timing: it starts at its first word's start and
ends at its last word's end. Bounds give way only to a single word: a word wider than a line gets a line of
its own, and a word longer than the duration bound a cue of its own.

Segments without word timings are split at spaces, with times shared out in proportion to the characters.
The speaker's label (``[A] `` in srt; the same room is kept for vtt's ``<v A>``) counts toward the first
line's width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from voxserve.errors import InvalidInput
from voxserve.languages import NO_SPACE_LANGUAGES
from voxserve.types import SAMPLE_RATE, Segment, Transcript, Word

LONG_PAUSE_S = 1.5
"""A silence this long between two words always ends a cue."""
SENTENCE_PAUSE_S = 0.4
"""A sentence end followed by a silence this long ends a cue."""
_SENTENCE_ENDS = (".", "?", "!", "…", "。", "？", "！")
_CLAUSE_ENDS = (",", ";", ":", "—", "–", "、", "，", "；", "：")
_FULL_PAUSE_S = 0.8  # a pause this long weighs almost as much as a sentence end
_ORPHAN_PENALTY = 0.6  # outweighs the fill a break gains by leaving a word or two to the next cue
_LIMITS = {"max_line_width": (8, 200), "max_line_count": (1, 10)}
_DURATION_LIMITS = (0.5, 60.0)


@dataclass(frozen=True)
class SubtitleOptions:
    """How srt and vtt cues are shaped.

    Attributes:
        max_line_width: characters per line (8-200).
        max_line_count: lines per cue (1-10).
        max_cue_duration_s: seconds per cue (0.5-60).
        speaker_labels: label cues with their speaker (``[A] text`` in srt, ``<v A>`` in vtt) when the
            transcript has speakers.

    Raises:
        InvalidInput: a field is out of range (``param`` names the field as the HTTP form spells it).
    """

    max_line_width: int = 42
    max_line_count: int = 2
    max_cue_duration_s: float = 7.0
    speaker_labels: bool = True

    def __post_init__(self) -> None:
        for name, (lo, hi) in _LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise InvalidInput(f"{name} must be a whole number between {lo} and {hi}", param=name)
        lo_s, hi_s = _DURATION_LIMITS
        d = self.max_cue_duration_s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not lo_s <= d <= hi_s:
            raise InvalidInput(f"max_cue_duration must be between {lo_s:g} and {hi_s:g} seconds",
                               param="max_cue_duration")


DEFAULT_SUBTITLES = SubtitleOptions()
"""Broadcast practice: 42 characters a line, 2 lines, 7 s, speaker labels on."""


@dataclass(frozen=True)
class Cue:
    """One subtitle: its words, their time span (samples), its text lines and its speaker."""

    words: tuple[Word, ...]
    lines: tuple[str, ...]
    speaker: str | None

    @property
    def start(self) -> int:
        """The first word's start (samples)."""
        return self.words[0].start

    @property
    def end(self) -> int:
        """The last word's end (samples), at least one sample after the start."""
        return max(self.words[-1].end, self.start + 1)


def label_width(speaker: str | None, options: SubtitleOptions) -> int:
    """Room the speaker's label takes on a cue's first line (``[A] ``)."""
    return len(speaker) + 3 if speaker and options.speaker_labels else 0


def shape_cues(transcript: Transcript, options: SubtitleOptions = DEFAULT_SUBTITLES) -> list[Cue]:
    """The transcript's words as cues, in order: every word in exactly one cue, no cue mixing speakers."""
    sep = "" if transcript.language in NO_SPACE_LANGUAGES else " "
    words = [w for s in transcript.segments for w in _words_of(s)]
    cues: list[Cue] = []
    for run in _speaker_runs(words):
        cues += _run_cues(run, options, sep)
    return cues


def _words_of(segment: Segment) -> list[Word]:
    """A segment's words with its speaker where they have none, or its text cut at spaces when untimed."""
    if segment.words:
        return [w if w.speaker is not None or segment.speaker is None else replace(w, speaker=segment.speaker)
                for w in segment.words if w.text.strip()]
    parts = segment.text.split()
    total = sum(len(p) for p in parts)
    span = max(0, segment.end - segment.start)
    out, done = [], 0
    for p in parts:
        start = segment.start + span * done // max(1, total)
        done += len(p)
        out.append(Word(p, start, segment.start + span * done // max(1, total), speaker=segment.speaker))
    return out


def _speaker_runs(words: Sequence[Word]) -> list[list[Word]]:
    runs: list[list[Word]] = []
    for w in words:
        if runs and runs[-1][-1].speaker == w.speaker:
            runs[-1].append(w)
        else:
            runs.append([w])
    return runs


def _run_cues(words: list[Word], options: SubtitleOptions, sep: str) -> list[Cue]:
    """Cues of one speaker's run of words: fill a cue until the next word does not fit, then end it at its
    best break and carry the words after that break over."""
    limit = round(options.max_cue_duration_s * SAMPLE_RATE)
    reserve = label_width(words[0].speaker, options)
    cues: list[Cue] = []
    current: list[Word] = []
    for i, w in enumerate(words):
        if current and not _fits([*current, w], limit, options, reserve, sep):
            cut = _best_break(current, _phrase_chars(words, i), options)
            cues.append(_cue(current[:cut], options, reserve, sep))
            current = current[cut:]
            if current and not _fits([*current, w], limit, options, reserve, sep):
                cues.append(_cue(current, options, reserve, sep))  # what is carried over cannot take w either
                current = []
        current.append(w)
        nxt = words[i + 1] if i + 1 < len(words) else None
        if nxt is not None and _must_end(w, nxt):
            cues.append(_cue(current, options, reserve, sep))
            current = []
    if current:
        cues.append(_cue(current, options, reserve, sep))
    return cues


def _phrase_chars(words: Sequence[Word], i: int) -> int:
    """Characters from word ``i`` to the next place a cue must end (a long pause, a sentence end with a pause,
    the run's end): what follows a break before word ``i`` at least."""
    total = 0
    for j in range(i, len(words)):
        total += len(words[j].text.strip()) + 1
        if j + 1 < len(words) and _must_end(words[j], words[j + 1]):
            break
    return total


def _must_end(w: Word, nxt: Word) -> bool:
    gap = (nxt.start - w.end) / SAMPLE_RATE
    return gap >= LONG_PAUSE_S or (gap >= SENTENCE_PAUSE_S and w.text.strip().endswith(_SENTENCE_ENDS))


def _fits(words: Sequence[Word], limit: int, options: SubtitleOptions, reserve: int, sep: str) -> bool:
    if words[-1].end - words[0].start > limit:
        return False
    return _wrap([w.text.strip() for w in words], options.max_line_width, options.max_line_count, reserve, sep) \
        is not None


def _best_break(words: Sequence[Word], ahead: int, options: SubtitleOptions) -> int:
    """How many of ``words`` the cue keeps: the break scoring highest on fill (the share of the cue's
    characters kept) plus punctuation and pause bonuses, less a penalty for leaving the next cue an orphan
    (under half a line, counting the ``ahead`` characters that must go with it)."""
    sizes = [len(w.text.strip()) + 1 for w in words]
    total = sum(sizes)
    short = options.max_line_width // 2
    best, best_score, kept = len(words), -1.0, 0
    for n in range(1, len(words) + 1):
        kept += sizes[n - 1]
        text = words[n - 1].text.strip()
        bonus = 1.0 if text.endswith(_SENTENCE_ENDS) else 0.5 if text.endswith(_CLAUSE_ENDS) else 0.0
        if n < len(words):
            bonus += min(1.0, (words[n].start - words[n - 1].end) / SAMPLE_RATE / _FULL_PAUSE_S) * 0.8
        orphan = total - kept + ahead < short
        score = kept / total + bonus - (_ORPHAN_PENALTY if orphan else 0.0)
        if score > best_score:
            best, best_score = n, score
    return best


def _cue(words: Sequence[Word], options: SubtitleOptions, reserve: int, sep: str) -> Cue:
    texts = [w.text.strip() for w in words]
    lines = _wrap(texts, options.max_line_width, options.max_line_count, reserve, sep)
    if lines is None:  # a single word wider than the bounds allow
        lines = _greedy(texts, options.max_line_width, reserve, sep)
    return Cue(tuple(words), tuple(lines), words[0].speaker)


def _wrap(texts: Sequence[str], width: int, count: int, reserve: int, sep: str) -> list[str] | None:
    """The words in as few lines as fit (at most ``count``) of at most ``width`` characters (the first
    holding ``reserve`` more), balanced: the narrowest width at which greedy filling needs no more lines.
    None when they do not fit."""
    lines = _greedy(texts, width, reserve, sep)
    if not _within(lines, width, len(lines) if len(lines) <= count else 0, reserve):
        return None
    lo, hi = 1, width  # greedy line count only falls as the width grows: find the narrowest that keeps it
    while lo < hi:
        mid = (lo + hi) // 2
        if _within(_greedy(texts, mid, reserve, sep), mid, len(lines), reserve):
            hi = mid
        else:
            lo = mid + 1
    return _greedy(texts, lo, reserve, sep)


def _within(lines: Sequence[str], width: int, count: int, reserve: int) -> bool:
    return len(lines) <= count and all(len(line) <= width - (reserve if i == 0 else 0) for i, line in enumerate(lines))


def _greedy(texts: Sequence[str], width: int, reserve: int, sep: str) -> list[str]:
    """Fill lines word by word; a word that does not fit starts a new line (a too wide word stands alone)."""
    lines: list[str] = []
    line = ""
    room = width - reserve
    for t in texts:
        joined = f"{line}{sep}{t}" if line else t
        if line and len(joined) > room:
            lines.append(line)
            line, room = t, width
        else:
            line = joined
    if line or not lines:
        lines.append(line)
    return lines
