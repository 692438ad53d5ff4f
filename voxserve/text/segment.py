"""Incremental text segmentation for speech synthesis: sentences, and clauses where latency or length needs them.

Text may arrive in pieces (tokens from an LLM) or all at once (a document). :class:`TextSegmenter` returns a
segment as soon as its end is certain: a sentence end (``. ! ?`` then a space and a capital letter, not after
``Dr.`` or ``e.g.`` or an initial), a blank line, a clause end (``; : —``) and, for the first segment of a stream
or in a long sentence, a comma. Nothing is longer than ``hard_max_chars``: synthesis quality does not degrade
with the length of the input because no model ever sees more than one such segment.
"""

from __future__ import annotations

from dataclasses import dataclass

from voxserve.errors import InvalidInput
from voxserve.text.speakable import TITLES, has_speech

_CLOSERS = "\"')]}\u201d\u2019"
_SENTENCE_END = ".!?\u2026"
_NEVER_END = frozenset(k for k in TITLES if k not in ("no", "st", "dr")) | {"e.g", "i.e", "cf"}


@dataclass(frozen=True)
class SegmenterParams:
    """Where the segmenter may cut.

    Attributes:
        first_clause_min_chars: the first segment of a stream ends at a comma once it is this long, so that
            the first audio leaves after the first clause (0 disables comma cuts at the start).
        min_clause_chars: a clause end (``; : —``) cuts only once the segment is this long.
        soft_max_chars: past this length a sentence is cut at its next comma.
        hard_max_chars: past this length a segment is cut at its last space, punctuation or not.
    """

    first_clause_min_chars: int = 12
    min_clause_chars: int = 16
    soft_max_chars: int = 160
    hard_max_chars: int = 320

    def __post_init__(self) -> None:
        if not 0 < self.soft_max_chars <= self.hard_max_chars:
            raise InvalidInput("segmenter limits must satisfy 0 < soft_max_chars <= hard_max_chars")
        if min(self.first_clause_min_chars, self.min_clause_chars) < 0:
            raise InvalidInput("segmenter minimum lengths must not be negative")


@dataclass(frozen=True)
class TextSegment:
    """A piece of input text that is synthesized as one unit.

    Attributes:
        text: the segment's text, stripped.
        start: offset of its first character in everything pushed to the stream so far.
        end: offset one past its last character.
        index: 0 for the first segment of the stream, then 1, 2, ...
        ends_sentence: whether the segment ends a sentence (False for a clause or a forced cut).
    """

    text: str
    start: int
    end: int
    index: int
    ends_sentence: bool


class TextSegmenter:
    """Cuts text pushed in pieces into segments.

    Example::

        seg = TextSegmenter()
        seg.push("Hello Dr. Smith. How ")   # -> [TextSegment("Hello Dr. Smith.", ...)]
        seg.push("are you?")                # -> [] (the end of the text may still grow)
        seg.flush()                         # -> [TextSegment("How are you?", ...)]
    """

    def __init__(self, params: SegmenterParams = SegmenterParams()) -> None:
        self.params = params
        self._text = ""
        self._base = 0  # absolute offset of self._text[0]
        self._cut = 0  # start of the pending text, in self._text
        self._pos = 0  # next character to examine, in self._text
        self._count = 0

    @property
    def pending(self) -> str:
        """Text pushed but not yet returned in a segment."""
        return self._text[self._cut :]

    @property
    def total_chars(self) -> int:
        """Characters pushed so far."""
        return self._base + len(self._text)

    def push(self, text: str) -> list[TextSegment]:
        """Add text; return the segments whose end is now certain."""
        self._text += text
        out: list[TextSegment] = []
        while True:
            cut = self._next_cut()
            if cut is None:
                break
            end, ends_sentence = cut
            self._emit(end, ends_sentence, out)
        self._compact()
        return out

    def flush(self) -> list[TextSegment]:
        """Return all pending text as segments (at most ``hard_max_chars`` each), whatever its end."""
        out = self.push("")
        while self._cut < len(self._text):
            end = len(self._text)
            if end - self._cut > self.params.hard_max_chars:
                end = self._forced_cut()
            ends = self._text[self._cut : end].rstrip().rstrip(_CLOSERS)[-1:] in tuple(_SENTENCE_END)
            self._emit(end, ends, out)
        self._pos = self._cut
        return out

    # ------------------------------------------------------------------------------------------ scanning

    def _next_cut(self) -> tuple[int, bool] | None:
        """The end (exclusive, in self._text) of the next certain segment, or None to wait for more text."""
        text, p = self._text, self.params
        i = max(self._pos, self._cut)
        while i < len(text):
            length = i - self._cut
            if length >= p.hard_max_chars:
                return self._forced_cut(), False
            c = text[i]
            if c in _SENTENCE_END:
                decision = self._sentence_end(i)
                if decision is None:
                    self._pos = i
                    return None
                if decision:
                    if decision - self._cut > p.hard_max_chars:  # a long run of "?!..." after the text
                        return self._forced_cut(), False
                    return decision, True
            elif c == "\n" and text[i + 1 : i + 2] == "":
                self._pos = i
                return None
            elif c == "\n" and self._blank_line_after(i):
                return i + 1, True
            elif c in ",;:\u2014" and length >= self._clause_min(c) and text[i + 1 : i + 2].isspace():
                return i + 1, False
            elif c in ",;:\u2014" and length >= self._clause_min(c) and text[i + 1 : i + 2] == "":
                self._pos = i
                return None
            i += 1
        self._pos = i
        return None

    def _blank_line_after(self, i: int) -> bool:
        """Whether the line break at ``i`` is followed by an empty line (scanning only that line's blanks, not
        the rest of the text: text with many line breaks stays linear)."""
        text, j = self._text, i + 1
        while j < len(text) and text[j] in " \t\r":
            j += 1
        return text[j : j + 1] == "\n"

    def _clause_min(self, c: str) -> int:
        p = self.params
        if c == ",":
            first = self._count == 0 and p.first_clause_min_chars > 0
            return p.first_clause_min_chars if first else p.soft_max_chars
        return p.min_clause_chars

    def _sentence_end(self, i: int) -> int | bool | None:
        """At a terminator: the cut position, False (not an end), or None (undecided until more text)."""
        text = self._text
        j = i
        while j < len(text) and (text[j] in _SENTENCE_END or text[j] in _CLOSERS):
            j += 1
        if j == len(text):
            return None
        if not text[j].isspace():
            return False  # 3.14, e.g.x, "U.S.A"
        if text[i] != "." and text[i] != "\u2026":
            return j
        k = j
        while k < len(text) and text[k].isspace():
            k += 1
        if k == len(text):
            return None
        return j if _period_ends_sentence(text[self._cut : i], text[k]) else False

    def _forced_cut(self) -> int:
        """Cut a too-long segment at its last space (or hard, mid-word, when it has none)."""
        limit = self._cut + self.params.hard_max_chars
        space = self._text.rfind(" ", self._cut + 1, limit)
        return space + 1 if space > self._cut else limit

    def _emit(self, end: int, ends_sentence: bool, out: list[TextSegment]) -> None:
        raw = self._text[self._cut : end]
        self._cut = self._pos = end
        if not has_speech(raw):
            return
        lead = len(raw) - len(raw.lstrip())
        stripped = raw.strip()
        start = self._base + (end - len(raw)) + lead
        out.append(TextSegment(stripped, start, start + len(stripped), self._count, ends_sentence))
        self._count += 1

    def _compact(self) -> None:
        if self._cut > 4096:
            self._text = self._text[self._cut :]
            self._base += self._cut
            self._pos -= self._cut
            self._cut = 0


def _period_ends_sentence(before: str, next_char: str) -> bool:
    """Whether a period (or ellipsis) ends the sentence, given the text before it and the next visible character."""
    if not (next_char.isupper() or next_char in "\"'(\u201c"):
        return False  # sentences start with a capital letter: "e.g. this", "3. the", "... and then"
    word = before.rsplit(None, 1)[-1].lstrip("\"'(\u201c").lower() if before.strip() else ""
    if word in _NEVER_END:
        return False
    if word in ("st", "dr"):
        return False  # "St. Louis", "Dr. Who": a title before a capitalised name
    return not (len(word) == 1 and word.isalpha())  # an initial: "J. R. R. Tolkien"
