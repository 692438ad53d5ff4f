"""Chunk planning: speech regions -> windows of at most ``max_chunk_s`` of packed speech.

Silence between regions is dropped; consecutive regions are packed into one window until it is full, so no
encoder work is spent on padding; a region longer than a window is cut at its quietest frame (a pause, not a
word). Each plan records where its pieces sit on the file's timeline, and that map is the only way back from
chunk time to file time.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from voxserve.config import ChunkSettings
from voxserve.pipelines.vad import Scores, VadEvent, VadParams, VadStateMachine, padded_regions, speech_regions
from voxserve.types import SAMPLE_RATE


@dataclass(frozen=True)
class Piece:
    """A stretch of the file ``[file_start, file_end)`` placed at ``local_start`` inside its chunk."""

    file_start: int
    file_end: int
    local_start: int

    @property
    def length(self) -> int:
        """Length in samples."""
        return self.file_end - self.file_start


@dataclass(frozen=True)
class ChunkPlan:
    """One window of packed speech."""

    index: int
    pieces: tuple[Piece, ...]

    @property
    def length(self) -> int:
        """Samples of audio in the chunk."""
        return sum(p.length for p in self.pieces)

    @property
    def file_start(self) -> int:
        """Where the first piece starts in the file."""
        return self.pieces[0].file_start

    @property
    def file_end(self) -> int:
        """Where the last piece ends in the file."""
        return self.pieces[-1].file_end

    def to_file(self, local: int, *, is_end: bool = False) -> int:
        """Map a chunk-local sample index to the file's timeline.

        A time exactly on the border of two pieces belongs to the earlier piece when ``is_end`` (a word
        ending there) and to the later one otherwise (a word starting there).
        """
        starts = [p.local_start for p in self.pieces]
        local = max(0, min(local, self.length))
        i = (bisect.bisect_left(starts, local) if is_end else bisect.bisect_right(starts, local)) - 1
        piece = self.pieces[max(0, i)]
        return piece.file_start + min(local - piece.local_start, piece.length)

    def with_index(self, index: int) -> ChunkPlan:
        """The same plan renumbered."""
        return ChunkPlan(index, self.pieces)


@dataclass(frozen=True)
class ChunkParams:
    """How to cut and pack speech.

    Attributes:
        max_chunk_s: the most audio in one chunk. Whisper's window is 30 s, but on CPU a 15 s window costs
            half of what a 30 s one does per second of audio (encoder attention grows with the square of its
            length: 18.5 vs 39 ms per audio second, whisper-base int8, one thread), so chunks of 14 s of speech
            go in fitted 15 s windows (tune half: 1.4-1.8x faster for +0.4-0.8 points of WER).
        min_cut_s: a region with no pause is never cut into a piece shorter than this.
        min_fill_s: a chunk with less room left than this is closed rather than filled with a cut region.
        max_join_gap_s: speech more than this far from the chunk's last piece starts a new chunk. Whisper
            decoding without timestamps often stops at the first sentence of a window that joins speech from
            far apart (another speaker, another recording): measured on corpus clips joined by 30 s of quiet
            noise, the second and third clip were lost.
        vad: the speech detector settings used to find regions.
    """

    max_chunk_s: float = 14.0
    min_cut_s: float = 12.0
    min_fill_s: float = 3.0
    max_join_gap_s: float = 5.0
    vad: VadParams = VadParams(threshold=0.3, min_silence_ms=300, speech_pad_ms=200)

    @classmethod
    def from_settings(cls, settings: ChunkSettings, vad: VadParams | None = None) -> ChunkParams:
        """Chunking as the process settings configure it (``vad``: a request's own speech detection)."""
        return cls(max_chunk_s=settings.max_chunk_s, vad=vad or VadParams(
            threshold=settings.vad_threshold, min_silence_ms=settings.min_silence_ms,
            speech_pad_ms=settings.speech_pad_ms))

    @property
    def max_samples(self) -> int:
        """``max_chunk_s`` in samples."""
        return int(self.max_chunk_s * SAMPLE_RATE)


class _Packer:
    """Fills chunks with regions in order, cutting a region at a pause to fill a chunk to the brim.

    A region is cut only inside silence (frames below the VAD's silence threshold), in the middle of the
    pause; a region longer than a whole chunk with no pause in it is cut at its quietest frame.
    """

    def __init__(self, probs: Scores, probs_start: int, params: ChunkParams, first_index: int) -> None:
        self.probs = np.asarray(probs, dtype=np.float32)
        self.probs_start = probs_start
        self.params = params
        self.frame = params.vad.frame_samples
        self.plans: list[ChunkPlan] = []
        self.pieces: list[Piece] = []
        self.used = 0
        self.first_index = first_index

    def add(self, start: int, end: int) -> None:
        max_len = self.params.max_samples
        min_fill = int(self.params.min_fill_s * SAMPLE_RATE)
        if self.pieces and start - self.pieces[-1].file_end > self.params.max_join_gap_s * SAMPLE_RATE:
            self.close()
        while start < end:
            room = max_len - self.used
            if end - start <= room:
                self._put(start, end)
                return
            cut = self._cut(start + room // 3, start + room, silent_only=True) if room >= min_fill else None
            if cut is None and not self.pieces:
                cut = self._cut(start + int(self.params.min_cut_s * SAMPLE_RATE), start + max_len, silent_only=False)
            if cut is not None and start < cut:
                self._put(start, cut)
                start = cut
            self.close()

    def close(self) -> None:
        if self.pieces:
            self.plans.append(ChunkPlan(self.first_index + len(self.plans), tuple(self.pieces)))
            self.pieces, self.used = [], 0

    def _put(self, start: int, end: int) -> None:
        self.pieces.append(Piece(start, end, self.used))
        self.used += end - start

    def _cut(self, lo: int, hi: int, *, silent_only: bool) -> int | None:
        """A cut sample in ``[lo, hi]``: the middle of the latest pause there (or the quietest frame)."""
        f_lo = max(0, -(-(lo - self.probs_start) // self.frame))
        f_hi = min(len(self.probs), (hi - self.probs_start) // self.frame)
        if f_hi <= f_lo:
            return None if silent_only else hi
        window = self.probs[f_lo:f_hi]
        low = self.params.vad.low
        quiet = np.flatnonzero(window < low)
        if len(quiet):
            i = int(quiet[-1])
        elif silent_only:
            return None
        else:
            i = len(window) - 1 - int(np.argmin(window[::-1]))
        j = i
        while j > 0 and window[j - 1] < max(low, window[i]):
            j -= 1
        middle = f_lo + (i + j) // 2
        return min(hi, self.probs_start + middle * self.frame + self.frame // 2)


def pack_regions(
    regions: Sequence[tuple[int, int]],
    probs: Scores,
    probs_start: int,
    params: ChunkParams,
    first_index: int = 0,
) -> list[ChunkPlan]:
    """Pack consecutive speech regions into chunks (cutting regions at pauses, see :class:`_Packer`)."""
    packer = _Packer(probs, probs_start, params, first_index)
    for start, end in regions:
        packer.add(start, end)
    packer.close()
    return packer.plans


def plan_chunks(
    probs: Scores,
    n_samples: int,
    params: ChunkParams,
    start_sample: int = 0,
    first_index: int = 0,
    not_before: int = 0,
) -> list[ChunkPlan]:
    """Plan the chunks of ``n_samples`` of audio (from ``start_sample``) whose frames scored ``probs``.

    No chunk starts before ``not_before`` (audio already given to earlier chunks).
    """
    found = speech_regions(probs, params.vad, n_samples, start_sample)
    regions = [(max(s, not_before), e) for s, e in found if e > not_before]
    return pack_regions(regions, probs, start_sample, params, first_index)


class StreamingPlanner:
    """Plans chunks while the file is still being decoded, so recognition starts before decoding ends.

    Feed the VAD probabilities of consecutive frames; chunks are released once later audio can no longer
    change them (a newer chunk has started after them), so the chunks equal :func:`plan_chunks` on the
    whole file. One speech detector runs over the whole stream (restarting it after a release inside an
    utterance would lose that utterance's short tail). Audio before :attr:`base` is no longer needed.
    """

    def __init__(self, params: ChunkParams) -> None:
        self.params = params
        self.base = 0
        self._released_until = 0
        self._probs: list[float] = []
        self._next_index = 0
        self._vad = VadStateMachine(params.vad)
        self._events: list[VadEvent] = []  # speech events that may still reach into a chunk

    def feed(self, probs: Scores) -> list[ChunkPlan]:
        """Add frames; return the chunks that are now final."""
        new = [float(p) for p in probs]
        self._probs.extend(new)
        self._events.extend(self._vad.update_many(new))
        buffered = len(self._probs) * self.params.vad.frame_samples
        if buffered < 2 * self.params.max_samples:
            return []
        plans = self._plan(buffered)
        if len(plans) > 1:
            return self._release(plans[:-1])
        # Nothing final yet: forget the silence before the pending chunk (or all but the last window).
        self._advance_to(plans[0].file_start if plans else self.base + buffered - self.params.max_samples)
        return []

    def finish(self, n_samples: int) -> list[ChunkPlan]:
        """End of audio at ``n_samples``: every remaining chunk is final."""
        return self._release(self._plan(max(0, n_samples - self.base)))

    def _plan(self, n_samples: int) -> list[ChunkPlan]:
        events = self._events + copy.copy(self._vad).flush()
        found = padded_regions(events, self.params.vad, 0, self.base + n_samples)
        not_before = max(self._released_until, self.base)
        regions = [(max(s, not_before), e) for s, e in found if e > not_before]
        return pack_regions(regions, self._probs, self.base, self.params, self._next_index)

    def _release(self, plans: list[ChunkPlan]) -> list[ChunkPlan]:
        if plans:
            self._released_until = plans[-1].file_end
            self._next_index = plans[-1].index + 1
            self._advance_to(self._released_until)
        return plans

    def _advance_to(self, sample: int) -> None:
        frame = self.params.vad.frame_samples
        drop = max(0, (sample - self.base) // frame)
        self._probs = self._probs[drop:]
        self.base += drop * frame
        # Utterances wholly before the audio still to plan can no longer change a chunk.
        pad = self.params.vad.ms_to_samples(self.params.vad.speech_pad_ms)
        done = max(self.base, self._released_until)
        while len(self._events) >= 2 and self._events[1].sample + pad <= done:
            del self._events[:2]


def split_in_two(plan: ChunkPlan, audio: np.ndarray, frame_samples: int = 320) -> list[tuple[ChunkPlan, np.ndarray]]:
    """Cut a chunk into two smaller chunks: at the piece border nearest its middle, or else at its
    quietest 20 ms frame between 35% and 65% of its length. Used to re-chunk a chunk that keeps failing."""
    half = plan.length // 2
    borders = [p.local_start for p in plan.pieces[1:]]
    if borders:
        cut = min(borders, key=lambda b: abs(b - half))
    else:
        lo, hi = int(plan.length * 0.35) // frame_samples, int(plan.length * 0.65) // frame_samples
        frames = audio[: (len(audio) // frame_samples) * frame_samples].reshape(-1, frame_samples)
        energy = np.sqrt(np.mean(frames[lo:hi] ** 2, axis=1)) if hi > lo else np.zeros(0)
        cut = (lo + int(np.argmin(energy))) * frame_samples + frame_samples // 2 if len(energy) else half
    if cut <= 0 or cut >= plan.length:
        return [(plan, audio)]
    return [(_sub_plan(plan, 0, cut), audio[:cut]), (_sub_plan(plan, cut, plan.length), audio[cut:])]


def _sub_plan(plan: ChunkPlan, local_start: int, local_end: int) -> ChunkPlan:
    pieces = []
    for p in plan.pieces:
        lo, hi = max(p.local_start, local_start), min(p.local_start + p.length, local_end)
        if hi > lo:
            offset = lo - p.local_start
            pieces.append(Piece(p.file_start + offset, p.file_start + offset + (hi - lo), lo - local_start))
    return ChunkPlan(plan.index, tuple(pieces))
