"""Decoder windows over a unit of frames that may still be growing: pure planning, no model.

A neural vocoder (HiFi-GAN, SNAC) is convolutional: the audio of frame ``t`` depends only on frames near ``t``.
Decoding a window of frames with ``context`` extra frames on each side and keeping only the middle gives the
same samples as decoding the whole unit at once (within float tolerance), so a sentence can be decoded in
pieces, the first piece small (time to first audio) and the rest large (little context overhead).

After the first window, sizes grow ``growth``-fold up to ``window_frames`` (16, 64, 128 frames by default):
each window then takes less time to decode than the audio already sent lasts (64 + 20 frames decode in ~60 ms
on one Xeon core, against 186 ms of audio from the first 16), so a stream that starts early does not run dry,
while few windows keep the context overhead small (every seam decodes ``2 * context`` frames twice: with
doubling, a ~420-frame sentence in two clauses decoded 1.37x its frames). With ``uniform`` (for decoders
that stack batches), full-size and last windows are grown to one standard length (``context + window +
context``) by taking more context where frames exist, so that windows from many streams have equal shapes and
stack into one batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from voxserve.errors import InvalidInput


@dataclass(frozen=True)
class WindowParams:
    """Window sizes in frames.

    Attributes:
        first_frames: output frames of the unit's first window.
        window_frames: output frames of each later window.
        context_frames: extra input frames on each side of a window (where the unit has them).
        growth: each window after the first is this many times the one before (up to ``window_frames``).
        uniform: grow full-size and last windows to the standard length (equal shapes stack into batches).
    """

    first_frames: int = 16
    window_frames: int = 128
    context_frames: int = 12
    growth: int = 4
    uniform: bool = False

    def __post_init__(self) -> None:
        if self.first_frames < 1 or self.window_frames < 1 or self.context_frames < 0:
            raise InvalidInput("window sizes must be positive and context frames not negative")
        if self.growth < 1:
            raise InvalidInput("window growth must be at least 1")

    @property
    def standard_frames(self) -> int:
        """Input frames of a full-size window."""
        return self.window_frames + 2 * self.context_frames


@dataclass(frozen=True)
class Window:
    """Decode input frames ``[start, end)`` of a unit and keep the audio of frames ``[keep_start, keep_end)``."""

    start: int
    end: int
    keep_start: int
    keep_end: int

    @property
    def frames(self) -> int:
        """Input frames."""
        return self.end - self.start

    def trim(self, samples_per_frame: int) -> tuple[int, int]:
        """The sample range to keep from the decoded window."""
        return (self.keep_start - self.start) * samples_per_frame, (self.keep_end - self.start) * samples_per_frame


class WindowPlanner:
    """Plans the windows of one unit whose frames arrive over time.

    Call :meth:`push` with the number of frames available so far (each call may return windows that are now
    certain: their right context exists), then :meth:`finish` with the final count. The kept ranges of all
    returned windows tile ``[0, total)`` in order, without gaps or overlaps.
    """

    def __init__(self, params: WindowParams, first_frames: int | None = None) -> None:
        self.params = params
        self._first = first_frames if first_frames is not None else params.first_frames
        self._done = 0  # frames whose audio is planned
        self._count = 0  # windows planned
        self._finished = False

    @property
    def planned_frames(self) -> int:
        """Frames whose audio is covered by the windows returned so far."""
        return self._done

    def push(self, available: int) -> list[Window]:
        """Windows that can be decoded now that ``available`` frames exist (the unit may still grow)."""
        if self._finished:
            raise RuntimeError("push after finish")
        out: list[Window] = []
        while True:
            keep_end = self._done + self._size()
            if keep_end + self.params.context_frames > available:
                return out
            out.append(self._window(keep_end, available))

    def finish(self, total: int) -> list[Window]:
        """The remaining windows of a unit of ``total`` frames."""
        out = self.push(total) if not self._finished else []
        self._finished = True
        while self._done < total:
            keep_end = min(total, self._done + self._size())
            if total - keep_end < max(1, self.params.window_frames // 4):
                keep_end = total  # no tiny last window
            out.append(self._window(keep_end, total))
        return out

    def needed(self, windows: int) -> int:
        """Frames that must exist before the next ``windows`` windows can be planned (their right context
        included)."""
        return self._done + sum(self._size(self._count + k) for k in range(windows)) + self.params.context_frames

    def _size(self, count: int | None = None) -> int:
        n = self._count if count is None else count
        return min(max(self._first, self.params.window_frames), self._first * int(self.params.growth ** min(n, 32)))

    def _window(self, keep_end: int, available: int) -> Window:
        p = self.params
        keep_start = self._done
        start = max(0, keep_start - p.context_frames)
        end = min(available, keep_end + p.context_frames)
        full = keep_end - keep_start >= p.window_frames or keep_end == available
        if p.uniform and self._count > 0 and full and end - start < p.standard_frames:
            start = max(0, end - p.standard_frames)
            end = min(available, start + p.standard_frames)
        self._done = keep_end
        self._count += 1
        return Window(start, end, keep_start, keep_end)
