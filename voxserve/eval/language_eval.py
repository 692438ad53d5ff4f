"""Language per segment on a file of clips in several languages joined by pauses: how many segments carry
their clip's language, and each clip's WER, in per-segment mode and in the single-language mode."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voxserve.audio import decode_audio
from voxserve.eval.asr_eval import NO_SPACE
from voxserve.eval.corpus import CorpusItem
from voxserve.eval.normalize import normalize_basic, normalize_english
from voxserve.eval.wer import WerScore, pooled, score_cer, score_wer
from voxserve.languages import PER_SEGMENT
from voxserve.service import Voxserve
from voxserve.types import SAMPLE_RATE, Transcript


@dataclass(frozen=True)
class Span:
    """Where one clip lies in the joined file, in samples."""

    item: CorpusItem
    start: int
    end: int


@dataclass(frozen=True)
class ClipScore:
    """One clip of the joined file: its segments' languages and its text's error rate."""

    name: str
    language: str
    segment_languages: tuple[str, ...]
    score: WerScore
    hypothesis: str

    @property
    def right(self) -> int:
        """Segments in the clip's language."""
        return sum(1 for code in self.segment_languages if code == self.language)


@dataclass(frozen=True)
class MixedScore:
    """A transcript of the joined file, clip by clip."""

    mode: str
    language: str
    clips: list[ClipScore]

    @property
    def accuracy(self) -> float:
        """Segments in their clip's language over all segments (0 without segments)."""
        total = sum(len(c.segment_languages) for c in self.clips)
        return sum(c.right for c in self.clips) / total if total else 0.0

    @property
    def pooled(self) -> WerScore:
        """All clips' errors over all their reference words (characters for languages without spaces)."""
        return pooled(c.score for c in self.clips)


def join_clips(items: list[CorpusItem], pause_s: float = 1.5) -> tuple[np.ndarray, list[Span]]:
    """The clips' audio one after another, each followed by ``pause_s`` of silence, and where each lies."""
    parts, spans, pos = [], [], 0
    gap = np.zeros(int(pause_s * SAMPLE_RATE), np.float32)
    for item in items:
        audio = decode_audio(item.audio)
        spans.append(Span(item, pos, pos + len(audio)))
        parts += [audio, gap]
        pos += len(audio) + len(gap)
    return np.concatenate(parts), spans


def score_clips(transcript: Transcript, spans: list[Span], mode: str) -> MixedScore:
    """Each clip's segments (by their middle) against its reference and language; a segment without a
    language counts as the transcript's."""
    clips = []
    for span in spans:
        inside = [s for s in transcript.segments if span.start <= (s.start + s.end) // 2 < span.end + SAMPLE_RATE // 2]
        codes = tuple(s.language or transcript.language for s in inside)
        item = span.item
        reference = item.reference.read_text(encoding="utf-8").strip()
        text = ("" if item.language in NO_SPACE else " ").join(s.text for s in inside)
        if item.language in NO_SPACE:
            score = score_cer(reference, text)
        else:
            score = score_wer(reference, text, normalizer=normalize_english if item.language == "en" else normalize_basic)
        clips.append(ClipScore(item.name, item.language, codes, score, text))
    return MixedScore(mode, transcript.language, clips)


async def evaluate_languages(vox: Voxserve, items: list[CorpusItem], *, pause_s: float = 1.5,
                             allowed: tuple[str, ...] = (), model: str | None = None) -> list[MixedScore]:
    """The joined file transcribed in the single-language mode (detected from the first speech) and with a
    language per segment (among ``allowed`` when given)."""
    audio, spans = join_clips(items, pause_s)
    out = []
    for mode in ("single", PER_SEGMENT):
        options = vox.long_options(language=PER_SEGMENT if mode == PER_SEGMENT else None,
                                   allowed_languages=allowed if mode == PER_SEGMENT else ())
        transcript = await vox.atranscribe(audio, options, model=model)
        out.append(score_clips(transcript, spans, mode))
    return out


def format_report(scores: list[MixedScore]) -> str:
    """Per mode: the transcript's language, segment accuracy, pooled error rate and each clip's."""
    lines = []
    for m in scores:
        lines.append(f"{m.mode}: transcript language {m.language}; segments in the right language "
                     f"{100 * m.accuracy:.0f}%; pooled error {100 * m.pooled.wer:.1f}%")
        for c in m.clips:
            lines.append(f"  {c.name[:30]:<30} {c.language:>3} segments {','.join(c.segment_languages) or '-':<12} "
                         f"error {100 * c.score.wer:5.1f}%")
    return "\n".join(lines)
