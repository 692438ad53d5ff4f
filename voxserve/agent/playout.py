"""Which words of a reply were heard: audio time -> text position, for truncation after a barge-in.

Each synthesized chunk knows the span of reply text it speaks (``SynthesisChunk.text_start/text_end``). A
segment's audio may come in several chunks; inside a segment, words are assumed evenly spread over its audio,
and a word counts as heard only once all of its share has played.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Span:
    start_s: float
    end_s: float
    text_start: int
    text_end: int


@dataclass
class PlayoutLog:
    """The audio timeline of one reply against its text."""

    text: str = ""
    spans: list[_Span] = field(default_factory=list)

    @property
    def audio_s(self) -> float:
        """Seconds of audio logged."""
        return self.spans[-1].end_s if self.spans else 0.0

    def add(self, duration_s: float, text_start: int, text_end: int) -> None:
        """Log the next chunk of audio (``duration_s`` long) that speaks ``text[text_start:text_end]``."""
        start = self.audio_s
        last = self.spans[-1] if self.spans else None
        if last is not None and (last.text_start, last.text_end) == (text_start, text_end):
            last.end_s = start + duration_s  # another chunk of the same segment
            return
        self.spans.append(_Span(start, start + duration_s, text_start, text_end))

    def heard_chars(self, played_s: float) -> int:
        """How many characters of ``text`` were heard after ``played_s`` seconds (cut at a word end)."""
        heard = 0
        for span in self.spans:
            if played_s >= span.end_s - 1e-9:
                heard = span.text_end
                continue
            if played_s > span.start_s:
                fraction = (played_s - span.start_s) / max(span.end_s - span.start_s, 1e-9)
                heard = max(heard, self._words_within(span, fraction))
            break
        return heard

    def heard_text(self, played_s: float) -> str:
        """The reply's text as far as it was heard."""
        return self.text[: self.heard_chars(played_s)].rstrip()

    def _words_within(self, span: _Span, fraction: float) -> int:
        """The end of the last word of the span wholly inside the played ``fraction`` of its audio."""
        segment = self.text[span.text_start : span.text_end]
        limit = fraction * len(segment)
        end = 0
        position = 0
        for word in segment.split():
            position = segment.index(word, position) + len(word)
            if position > limit:
                break
            end = position
        return span.text_start + end
