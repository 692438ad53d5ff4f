"""Calls recorded with one speaker a channel: cross-talk suppression before recognition, and the channels'
transcripts merged by time afterwards, each channel a speaker (``channel_0``, ``channel_1``, ...).

Each channel of a call also carries the other speakers, leaked in at a lower level (headset bleed, a shared
room, the line's echo). Recognised on its own, a channel would repeat their words. So the channels are
compared frame by frame (20 ms, levels held over :data:`HOLD_S` so a word's quiet syllables count as the
word): where a channel is :data:`CROSSTALK_DB` or more below the loudest channel, what it holds there is the
other speaker's leak and is silenced before recognition. After it, a recognised word is dropped from a
channel :data:`CROSSTALK_DB` below the loudest over the word's span (what the silencing left of a leak at its
edges), and from a channel where a louder channel has the same word at the same time (within
:data:`ECHO_SLACK_S`: a leak loud enough to pass the level rule, as close as -6 dB). Different speech on two
channels at once at similar levels (real overlap) stays on both. A channel that
repeats an earlier one (a mono recording stored as stereo: what differs is :data:`SAME_CHANNEL_DB` or more
below the signal) is not transcribed again.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from voxserve.languages import NO_SPACE_LANGUAGES
from voxserve.pipelines.long_asr import ProgressHook
from voxserve.pipelines.stitching import transcript_text
from voxserve.types import (
    SAMPLE_RATE,
    Diarization,
    Float32Array,
    Segment,
    SpeakerTurn,
    Transcript,
    TranscriptStats,
    Word,
)

CROSSTALK_DB = 18.0
"""A channel this many dB below the loudest channel holds only the other speakers' leak there (a party
recorded 12 dB quieter than the other, talking at once, is still heard; louder leaks go by the echo rule)."""
HOLD_S = 0.2
"""Each frame's level is the loudest within this many seconds around it."""
ECHO_SLACK_S = 0.3
"""The same word on two channels within this many seconds is one word heard twice."""
_LONGEST_WORD = 10 * SAMPLE_RATE  # how far back a word overlapping a time may start
SAME_CHANNEL_DB = -20.0
"""A channel whose difference from an earlier channel is this far below that channel's level repeats it."""
FRAME_SAMPLES = 320
"""Level frames: 20 ms at 16 kHz."""
_FLOOR_DB = -120.0


def channel_label(index: int) -> str:
    """The speaker label of a channel: ``channel_0``, ``channel_1``, ..."""
    return f"channel_{index}"


def distinct_channels(audio: Float32Array) -> list[int]:
    """The channels of (channels, samples) audio that repeat no earlier channel, in order (channel 0 always)."""
    kept: list[int] = []
    limit = 10 ** (SAME_CHANNEL_DB / 10)
    for c in range(audio.shape[0]):
        x = audio[c].astype(np.float64)
        if not any(np.sum(np.square(x - audio[k])) <= limit * np.sum(np.square(audio[k].astype(np.float64)))
                   for k in kept):
            kept.append(c)
    return kept


def frame_levels(audio: Float32Array) -> npt.NDArray[np.float64]:
    """Per channel and 20 ms frame, the RMS level in dB held over :data:`HOLD_S` (a (channels, frames) array
    for (channels, samples) audio; the last partial frame counts as a frame)."""
    channels, n = audio.shape
    frames = -(-n // FRAME_SAMPLES)
    padded = np.zeros((channels, frames * FRAME_SAMPLES), np.float64)
    padded[:, :n] = audio
    power = np.mean(np.square(padded.reshape(channels, frames, FRAME_SAMPLES)), axis=2)
    level = np.maximum(_FLOOR_DB, 10.0 * np.log10(np.maximum(power, 1e-30)))
    hold = round(HOLD_S * SAMPLE_RATE / FRAME_SAMPLES / 2)
    held = level.copy()
    for shift in range(1, hold + 1):  # a running maximum over ±hold frames
        held[:, shift:] = np.maximum(held[:, shift:], level[:, :-shift])
        held[:, :-shift] = np.maximum(held[:, :-shift], level[:, shift:])
    return np.asarray(held, dtype=np.float64)


def crosstalk_frames(levels: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Per channel and frame: whether the channel is :data:`CROSSTALK_DB` or more below the loudest one."""
    return np.asarray(levels <= levels.max(axis=0, keepdims=True) - CROSSTALK_DB, dtype=bool)


def suppress_crosstalk(audio: Float32Array) -> Float32Array:
    """(channels, samples) audio with each channel silenced where it holds only the others' leak."""
    if audio.shape[0] < 2:
        return audio
    leak = np.repeat(crosstalk_frames(frame_levels(audio)), FRAME_SAMPLES, axis=1)[:, : audio.shape[1]]
    return np.where(leak, np.float32(0.0), audio).astype(np.float32)


def channel_progress(hook: ProgressHook | None, channels: int) -> list[ProgressHook | None]:
    """One progress hook per channel, reporting to ``hook`` the channels' mean progress."""
    if hook is None:
        return [None] * channels
    done = [0.0] * channels
    total = [0.0] * channels

    def one(i: int) -> ProgressHook:
        def update(done_s: float, total_s: float) -> None:
            done[i], total[i] = done_s, total_s
            hook(sum(done) / channels, max(total))

        return update

    return [one(i) for i in range(channels)]


def merge_channels(transcripts: Sequence[Transcript], audio: Float32Array, channels: Sequence[int],
                   wall_s: float) -> Transcript:
    """The transcripts of ``audio``'s rows ``channels`` as one: segments in time order, each with its channel
    and the channel's speaker label (words too), words of another channel's leak dropped (see the module),
    and the channels' speech as speaker turns."""
    levels = frame_levels(audio[list(channels)])
    heard = [_Heard(t.words) for t in transcripts]
    language = next((t.language for t in transcripts if t.text), transcripts[0].language)
    segments: list[Segment] = []
    for row, (channel, t) in enumerate(zip(channels, transcripts, strict=True)):
        label = channel_label(channel)
        for seg in t.segments:
            kept = _own_words(seg, row, levels, heard, label, t.language)
            if kept is not None:
                segments.append(replace(kept, speaker=label, channel=channel))
    segments.sort(key=lambda s: (s.start, s.channel or 0))
    segments = [replace(s, id=i) for i, s in enumerate(segments)]
    labels = tuple(channel_label(c) for c in channels)
    turns = tuple(SpeakerTurn(s.start, max(s.end, s.start + 1), s.speaker or labels[0]) for s in segments)
    duration = audio.shape[1]
    return Transcript(
        text=transcript_text(segments, language),
        language=language,
        duration=duration,
        segments=tuple(segments),
        language_probability=transcripts[0].language_probability,
        task=transcripts[0].task,
        stats=_stats(transcripts, wall_s),
        diarization=Diarization(turns, labels, duration),
    )


class _Heard:
    """One channel's recognised words, found by time and text."""

    def __init__(self, words: Sequence[Word]) -> None:
        timed = sorted((w.start, w.end, _key(w.text)) for w in words)
        self.starts = [w[0] for w in timed]
        self.words = timed

    def says(self, key: str, start: int, end: int) -> bool:
        """Whether this channel has the word ``key`` within :data:`ECHO_SLACK_S` of [start, end)."""
        slack = round(ECHO_SLACK_S * SAMPLE_RATE)
        lo = bisect.bisect_left(self.starts, start - slack - _LONGEST_WORD)
        hi = bisect.bisect_right(self.starts, end + slack)
        return any(k == key and e > start - slack for _, e, k in self.words[lo:hi])


def _key(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def _own_words(seg: Segment, row: int, levels: npt.NDArray[np.float64], heard: Sequence[_Heard], label: str,
               language: str) -> Segment | None:
    """The segment with its speaker on its words and without the other channels' leak (``row``: the channel's
    row of ``levels`` and ``heard``; None when no word is left; an untimed segment is judged by level over its
    whole span)."""
    if not seg.words:
        return seg if _heard_here(seg.start, seg.end, row, levels) and seg.text else None
    words = [replace(w, speaker=label) for w in seg.words
             if _heard_here(w.start, w.end, row, levels) and not _echo(w, row, levels, heard)]
    if not words:
        return None
    if len(words) == len(seg.words):
        return replace(seg, words=tuple(words))
    return replace(seg, start=words[0].start, end=words[-1].end, text=_join(words, seg.language or language), tokens=(),
                   words=tuple(words))


def _span_levels(start: int, end: int, levels: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each channel's mean level over [start, end)."""
    a = min(start // FRAME_SAMPLES, levels.shape[1] - 1)
    b = max(a + 1, min(-(-end // FRAME_SAMPLES), levels.shape[1]))
    return np.asarray(levels[:, a:b].mean(axis=1), dtype=np.float64)


def _heard_here(start: int, end: int, row: int, levels: npt.NDArray[np.float64]) -> bool:
    span = _span_levels(start, end, levels)
    return bool(span[row] > span.max() - CROSSTALK_DB)


def _echo(w: Word, row: int, levels: npt.NDArray[np.float64], heard: Sequence[_Heard]) -> bool:
    """Whether a louder channel has the same word at the same time: the word is that channel's, leaked here."""
    key = _key(w.text)
    if not key:
        return False
    span = _span_levels(w.start, w.end, levels)
    return any(other != row and span[other] > span[row] and h.says(key, w.start, w.end)
               for other, h in enumerate(heard))


def _join(words: Sequence[Word], language: str) -> str:
    sep = "" if language in NO_SPACE_LANGUAGES else " "
    return sep.join(w.text.strip() for w in words).strip()


def _stats(transcripts: Sequence[Transcript], wall_s: float) -> TranscriptStats:
    stats = [t.stats for t in transcripts]
    return TranscriptStats(
        wall_s=wall_s,
        chunks=sum(s.chunks for s in stats),
        retries=sum(s.retries for s in stats),
        rechunks=sum(s.rechunks for s in stats),
        guard_failures=sum(s.guard_failures for s in stats),
        speech_s=sum(s.speech_s for s in stats),
        chunk_reports=tuple(r for s in stats for r in s.chunk_reports),
    )
