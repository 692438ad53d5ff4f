"""An in-memory recorder of synthesis metrics: TTFB, time to first sentence, real-time factor, active streams,
decoder batch sizes. It implements both :class:`~voxserve.streaming.tts.TtsObserver` and
:class:`~voxserve.engine.batcher.BatchObserver`; a metrics exporter can read :meth:`TtsMetrics.summary` or
subclass it.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from voxserve.stats import percentile
from voxserve.streaming.tts import StreamStatus, TtsStreamStats


def _percentile(values: list[float], q: float) -> float | None:
    """``percentile`` for JSON snapshots: None when empty."""
    return percentile(values, q) if values else None


class TtsMetrics:
    """Collects stream and decoder-batch events (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ttfb_s: list[float] = []
        self.first_sentence_s: list[float] = []
        self.rtf: list[float] = []
        self.underrun_streams = 0
        self.active_streams = 0
        self.peak_active_streams = 0
        self.status: Counter[str] = Counter()
        self.batch_sizes: Counter[int] = Counter()
        self.batch_wait_s: list[float] = []

    def on_stream_start(self, stream_id: int, voice: str, active_streams: int) -> None:
        """Count an admitted stream."""
        with self._lock:
            self.active_streams = active_streams
            self.peak_active_streams = max(self.peak_active_streams, active_streams)

    def on_first_audio(self, stream_id: int, ttfb_s: float) -> None:
        """Record a time to first audio."""
        with self._lock:
            self.ttfb_s.append(ttfb_s)

    def on_first_sentence(self, stream_id: int, seconds: float) -> None:
        """Record a time to first complete sentence."""
        with self._lock:
            self.first_sentence_s.append(seconds)

    def on_stream_end(self, stats: TtsStreamStats, status: StreamStatus, active_streams: int) -> None:
        """Record a stream's outcome and real-time factor."""
        with self._lock:
            self.active_streams = active_streams
            self.status[status] += 1
            if stats.rtf is not None:
                self.rtf.append(stats.rtf)
            if stats.underruns:
                self.underrun_streams += 1

    def on_batch(self, name: str, size: int, wait_s: float, run_s: float, queue_depth: int) -> None:
        """Record a decoder batch."""
        with self._lock:
            self.batch_sizes[size] += 1
            self.batch_wait_s.append(wait_s)

    def summary(self) -> dict[str, Any]:
        """p50/p95 of the timings, counts and the batch-size histogram."""
        with self._lock:
            return {
                "ttfb_p50_s": _percentile(self.ttfb_s, 50), "ttfb_p95_s": _percentile(self.ttfb_s, 95),
                "first_sentence_p50_s": _percentile(self.first_sentence_s, 50),
                "first_sentence_p95_s": _percentile(self.first_sentence_s, 95),
                "rtf_p50": _percentile(self.rtf, 50), "rtf_max": max(self.rtf) if self.rtf else None,
                "streams": dict(self.status), "underrun_streams": self.underrun_streams,
                "active_streams": self.active_streams, "peak_active_streams": self.peak_active_streams,
                "decoder_batch_sizes": dict(sorted(self.batch_sizes.items())),
                "decoder_wait_p95_s": _percentile(self.batch_wait_s, 95),
            }
