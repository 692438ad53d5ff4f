"""Speakers on a transcript: each word gets the speaker whose turns overlap it most, and segments are split
where the speaker changes.

Pure functions on the types. Ties (two speakers overlap a word equally, as in overlapped speech) go to the
previous word's speaker when it is one of them, else to the speaker who started talking first; a word in
a gap between turns takes the nearest speaker in time (the previous word's speaker on equal distance).
Segments without word times take the speaker who overlaps them most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from voxserve.languages import NO_SPACE_LANGUAGES
from voxserve.types import Diarization, Segment, SpeakerTurn, Transcript, Word

_RESOLUTION = 160  # samples per timeline cell (10 ms)


class SpeakerTimeline:
    """Per-speaker activity on a 10 ms grid, for overlap and distance queries in constant time."""

    def __init__(self, turns: Sequence[SpeakerTurn], speakers: Sequence[str], n_samples: int) -> None:
        self.speakers = tuple(speakers) or tuple(dict.fromkeys(t.speaker for t in turns))
        cells = max(1, -(-max([n_samples, *(t.end for t in turns)]) // _RESOLUTION))
        index = {s: i for i, s in enumerate(self.speakers)}
        active = np.zeros((len(self.speakers), cells), dtype=bool)
        for t in turns:
            active[index[t.speaker], t.start // _RESOLUTION : -(-t.end // _RESOLUTION)] = True
        self._cumulative = np.concatenate([np.zeros((len(self.speakers), 1)), np.cumsum(active, axis=1)], axis=1)
        self._distance = _distance_to_active(active)

    def overlaps(self, start: int, end: int) -> npt.NDArray[np.float64]:
        """Cells of [start, end) during which each speaker is active."""
        cells = self._cumulative.shape[1] - 1
        a = min(max(0, start // _RESOLUTION), cells)
        b = min(max(a + 1, -(-end // _RESOLUTION)), cells)
        return np.asarray(self._cumulative[:, b] - self._cumulative[:, a])

    def distances(self, start: int, end: int) -> npt.NDArray[np.float64]:
        """Cells from [start, end) to each speaker's nearest activity (inf when the speaker never speaks)."""
        cells = self._distance.shape[1]
        a = min(max(0, start // _RESOLUTION), cells - 1)
        b = min(max(a + 1, -(-end // _RESOLUTION)), cells)
        return np.asarray(self._distance[:, a:b].min(axis=1))

    def speaker_of(self, start: int, end: int, previous: str | None = None) -> str | None:
        """The speaker of the span [start, end) under the module's rules (None when nobody ever speaks)."""
        if not self.speakers:
            return None
        overlap = self.overlaps(start, end)
        if overlap.max() > 0:
            return self._pick(overlap == overlap.max(), previous)
        distance = self.distances(start, end)
        if not np.isfinite(distance.min()):
            return None
        return self._pick(distance == distance.min(), previous)

    def _pick(self, best: npt.NDArray[np.bool_], previous: str | None) -> str:
        if previous is not None and previous in self.speakers and best[self.speakers.index(previous)]:
            return previous
        return self.speakers[int(np.argmax(best))]


def _distance_to_active(active: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """For each speaker and cell, the number of cells to the nearest active cell (inf if none)."""
    speakers, cells = active.shape
    out = np.full((speakers, cells), np.inf)
    positions = np.arange(cells)
    for s in range(speakers):
        on = np.flatnonzero(active[s])
        if len(on) == 0:
            continue
        right = np.clip(np.searchsorted(on, positions), 0, len(on) - 1)
        left = np.clip(right - 1, 0, len(on) - 1)
        out[s] = np.minimum(np.abs(on[right] - positions), np.abs(positions - on[left]))
    return out


def label_words(words: Sequence[Word], timeline: SpeakerTimeline) -> list[Word]:
    """The words with their speakers, in order."""
    out: list[Word] = []
    previous: str | None = None
    for w in words:
        speaker = timeline.speaker_of(w.start, max(w.end, w.start + 1), previous)
        out.append(replace(w, speaker=speaker))
        previous = speaker or previous
    return out


def split_by_speaker(segment: Segment, words: Sequence[Word], language: str) -> list[Segment]:
    """The segment cut wherever its words change speaker (token ids stay only on an uncut segment)."""
    groups: list[list[Word]] = []
    for w in words:
        if groups and groups[-1][-1].speaker == w.speaker:
            groups[-1].append(w)
        else:
            groups.append([w])
    if len(groups) <= 1:
        return [replace(segment, words=tuple(words), speaker=words[0].speaker if words else segment.speaker)]
    sep = "" if language in NO_SPACE_LANGUAGES else " "
    return [
        replace(segment, start=g[0].start, end=g[-1].end, text=sep.join(w.text.strip() for w in g).strip(),
                words=tuple(g), tokens=(), speaker=g[0].speaker)
        for g in groups
    ]


def assign_speakers(transcript: Transcript, diarization: Diarization) -> Transcript:
    """The transcript with a speaker on every word and segment, segments split at speaker changes and
    renumbered, and the diarization attached."""
    timeline = SpeakerTimeline(diarization.turns, diarization.speakers, max(transcript.duration, diarization.duration))
    segments: list[Segment] = []
    previous: str | None = None
    for seg in transcript.segments:
        if seg.words:
            words = label_words(seg.words, timeline)
            parts = split_by_speaker(seg, words, transcript.language)
        else:
            parts = [replace(seg, speaker=timeline.speaker_of(seg.start, max(seg.end, seg.start + 1), previous))]
        for part in parts:
            segments.append(replace(part, id=len(segments)))
            previous = part.speaker or previous
    return replace(transcript, segments=tuple(segments), diarization=diarization)
