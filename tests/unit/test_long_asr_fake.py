"""The long-file recipe end to end on synthetic audio, with the fake recogniser and the fake VAD.

Every "word" of a file is a tone burst at its own frequency; the fake recogniser finds the bursts in the
audio it is sent and names each one by its frequency, at its local position. So the tests know exactly
which words each request holds and where they must land on the file's timeline.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest

from voxserve.audio.encode import encode_audio
from voxserve.backends.base import AsrRequest, AsrResult, DecodeOptions, TimedWord
from voxserve.backends.fakes import FakeAsr, FakeVad
from voxserve.engine.batcher import BatcherConfig, MicroBatcher
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import AsrService
from voxserve.errors import InvalidInput, ModelUnavailable
from voxserve.formats import voxserve_block
from voxserve.pipelines.chunking import ChunkParams
from voxserve.pipelines.long_asr import LongAsrOptions, LongFileTranscriber, attempt_options
from voxserve.types import SAMPLE_RATE, ChunkReport, Transcript

SR = SAMPLE_RATE
NAMES = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()
LOOP = " ".join(["thank you"] * 15)


@dataclass(frozen=True)
class Burst:
    word: str
    freq: float
    start: int
    end: int


def synth(
    layout: list[tuple[float, float]],
    freq0: float = 300.0,
    step: float = 100.0,
    tail_s: float = 1.0,
    n_samples: int | None = None,
) -> tuple[np.ndarray, list[Burst]]:
    """Tone bursts after silences: ``layout`` is (silence before, burst length) in seconds."""
    parts, bursts, pos = [], [], 0
    for k, (gap_s, dur_s) in enumerate(layout):
        gap, dur = int(gap_s * SR), int(dur_s * SR)
        freq = freq0 + step * k
        t = np.arange(dur) / SR
        parts += [np.zeros(gap, np.float32), (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)]
        bursts.append(
            Burst(NAMES[k % len(NAMES)] + ("" if k < len(NAMES) else str(k)), freq, pos + gap, pos + gap + dur)
        )
        pos += gap + dur
    parts.append(np.zeros(int(tail_s * SR), np.float32))
    audio = np.concatenate(parts)
    if n_samples is not None:
        assert n_samples >= bursts[-1].end
        audio = np.pad(audio, (0, max(0, n_samples - len(audio))))[:n_samples]
    return audio, bursts


def wav(audio: np.ndarray) -> bytes:
    return encode_audio(audio, SR, "wav")


# 20 bursts of 1.5-3 s with 0.8-1.5 s of silence between them: about 70 s, two or three chunks
LAYOUT = [((1.0, 1.5, 0.8)[k % 3], (2.0, 3.0, 1.5, 2.5)[k % 4]) for k in range(20)]


# 60 bursts (up to 6.2 kHz, below Nyquist): about 210 s, seven or more chunks
LONG_LAYOUT = LAYOUT * 3


def loud_runs(audio: np.ndarray, frame: int = 160, level: float = 0.05) -> list[tuple[int, int]]:
    n = len(audio) // frame
    if n == 0:
        return []
    rms = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame) ** 2, axis=1))
    loud = np.concatenate([[False], rms > level, [False]])
    edges = np.flatnonzero(np.diff(loud.astype(np.int8)))
    return [(int(a) * frame, int(b) * frame) for a, b in zip(edges[::2], edges[1::2])]


def dominant_hz(x: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spectrum) * SR / len(x))


@dataclass
class BurstAsr(FakeAsr):
    """Recognises tone bursts: one word per burst, at the burst's place in the request audio.

    ``loops(freqs, options)`` may make the decoder loop ("thank you thank you ..." up to its token cap, as a
    real looping decoder does) for a request holding the bursts ``freqs``; ``detect(freqs)`` says which language is detected when none is requested.
    """

    bursts: list[Burst] = field(default_factory=list)
    loops: Callable[[set[float], DecodeOptions], bool] = lambda freqs, options: False
    detect: Callable[[set[float]], str] = lambda freqs: "en"

    def found(self, audio: np.ndarray) -> list[tuple[Burst, int, int]]:
        out = []
        for a, b in loud_runs(audio):
            if b - a < 1600:  # edges of a cut burst
                continue
            hz = dominant_hz(audio[a:b])
            burst = min(self.bursts, key=lambda x: abs(x.freq - hz))
            assert abs(burst.freq - hz) < 20, (hz, burst)
            out.append((burst, a, b))
        return out

    def _result(self, req: AsrRequest) -> AsrResult:
        found = self.found(req.audio)
        freqs = {b.freq for b, _, _ in found}
        language = req.options.language or self.detect(freqs)
        if self.loops(freqs, req.options):
            cap = req.options.max_new_tokens or 30
            tokens = (LOOP.split() * cap)[:cap]
            step = len(req.audio) // len(tokens)
            words = tuple(TimedWord(w, i * step, (i + 1) * step, 0.5, (i,)) for i, w in enumerate(tokens))
        else:
            suffix = "" if language == "en" else f"_{language}"
            words = tuple(TimedWord(b.word + suffix, a, e, 0.9, (i,)) for i, (b, a, e) in enumerate(found))
        text = " ".join(w.text for w in words)
        return AsrResult(
            text=text,
            tokens=tuple(range(len(words))),
            words=words if req.options.word_timestamps else (),
            language=language,
            language_probability=0.95,
            avg_logprob=self.logprob,
            no_speech_prob=self.no_speech_prob,
            temperature=req.options.temperature,
        )

    def requests(self) -> list[AsrRequest]:
        with self._lock:
            return [r for batch in self.batches for r in batch]


class ToneTranscriber(LongFileTranscriber):
    """The transcriber with the guard's word-rate floor of an earlier default, no limit on a word's length and no
    floor on a piece's words: a tone burst says one word in 2-3 s of "speech", slower than the floor for real
    speech (30 words a minute) allows, longer than a real word lasts (``GuardConfig.max_word_s``), and sparser
    than a piece of real speech (``GuardConfig.min_piece_words_per_s``)."""

    async def run(self, source: Any, options: LongAsrOptions | None = None, *args: Any, **kw: Any) -> Transcript:
        """Transcribe with the tones' word-rate floor and word length."""
        options = options or LongAsrOptions()
        tones = replace(options, guard=replace(options.guard, min_words_per_minute=12.0, max_word_s=math.inf,
                                                  min_piece_words_per_s=0.0))
        return await super().run(source, tones, *args, **kw)


@contextmanager
def transcriber(
    asr: FakeAsr, config: BatcherConfig | None = None, vad: Callable[[], FakeVad] = FakeVad, *, tones: bool = True
) -> Iterator[LongFileTranscriber]:
    """A transcriber on ``asr``; ``tones``: with the guard loosened for bursts of 2-3 s (:class:`ToneTranscriber`),
    else the guard's defaults (bursts as short as words)."""
    config = config or BatcherConfig(max_batch_size=4, max_wait_ms=2, offline_wait_ms=10, workers=1)
    batcher = MicroBatcher(asr.transcribe_batch, config, name="fake")
    executor = BlockingExecutor()
    kind = ToneTranscriber if tones else LongFileTranscriber
    try:
        yield kind(AsrService(asr, batcher), executor, vad)
    finally:
        batcher.close()
        executor.shutdown()


def run(coro: object, timeout: float = 20.0) -> Transcript:
    async def main() -> Transcript:
        return await asyncio.wait_for(coro, timeout)  # type: ignore[arg-type]

    return asyncio.run(main())


def check_words(t: Transcript, bursts: list[Burst], tolerance: int = 160) -> None:
    """The transcript names every burst once, in order, at the burst's place in the file."""
    assert [w.text for w in t.words] == [b.word for b in bursts]
    assert t.text == " ".join(b.word for b in bursts)
    for w, b in zip(t.words, bursts):
        assert b.start - tolerance <= w.start <= w.end <= b.end + tolerance, (w, b)
        assert w.end - w.start >= (b.end - b.start) - 2 * tolerance


def report_with(t: Transcript, burst: Burst) -> ChunkReport:
    (report,) = [r for r in t.stats.chunk_reports if r.start <= burst.start and burst.end <= r.end]
    return report


def report_for(t: Transcript, request: AsrRequest, asr: BurstAsr) -> ChunkReport | None:
    """The report of the chunk whose audio a request holds (by the bursts in it)."""
    found = asr.found(request.audio)
    return report_with(t, found[0][0]) if found else None


# -------------------------------------------------------------------------------------------- tests


def test_transcript_has_the_words_in_order_at_their_file_times() -> None:
    audio, bursts = synth(LAYOUT)
    asr = BurstAsr(bursts=bursts)
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    check_words(t, bursts)
    assert t.language == "en" and t.duration == len(audio)
    s = t.stats
    assert s.chunks >= 2 and s.retries == 0 and s.rechunks == 0 and s.guard_failures == 0
    assert [r.index for r in s.chunk_reports] == list(range(s.chunks))
    assert all(r.passed and r.attempts == 1 for r in s.chunk_reports)
    assert all(0 < r.speech_samples <= 29 * SR for r in s.chunk_reports)
    assert sum(b.end - b.start for b in bursts) / SR <= s.speech_s <= (len(audio) - SR) / SR
    # every chunk was sent once, at temperature 0, and no request is longer than a chunk
    reqs = asr.requests()
    assert len(reqs) == s.chunks
    assert all(r.options.temperature == 0.0 and len(r.audio) <= 29 * SR for r in reqs)
    # segments: ordered, not overlapping, numbered
    assert [seg.id for seg in t.segments] == list(range(len(t.segments)))
    for a, b in zip(t.segments, t.segments[1:]):
        assert a.end <= b.start


def test_a_chunk_that_loops_greedily_is_retried_deterministically() -> None:
    audio, bursts = synth(LAYOUT)
    bad = bursts[8]
    asr = BurstAsr(bursts=bursts, loops=lambda freqs, o: bad.freq in freqs and o.beam_size == 1)
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    check_words(t, bursts)
    assert "thank" not in t.text
    assert t.stats.retries >= 1 and t.stats.guard_failures == 0
    report = report_with(t, bad)
    assert report.passed and report.attempts >= 2 and not report.rechunked
    assert report.temperature == 0.0  # no sampling: the same file gives the same text on every run
    assert "repetition" in report.reasons and "token_cap" in report.reasons
    for r in t.stats.chunk_reports:
        if r.index != report.index:
            assert r.attempts == 1 and r.passed and r.reasons == ()
    assert t.stats.retries == report.attempts - 1
    assert all(r.options.temperature == 0.0 for r in asr.requests())
    beams = [r for r in asr.requests() if r.options.beam_size > 1]
    assert len(beams) == 1 and beams[0].options.window == "full"
    assert bad.freq in {b.freq for b, _, _ in asr.found(beams[0].audio)}


def _ladder(requests: list[AsrRequest]) -> list[tuple[str, int, float, float]]:
    return [(r.options.window, r.options.beam_size, r.options.repetition_penalty, r.options.temperature) for r in requests]


def test_a_chunk_that_always_loops_is_rechunked_then_reported_as_failed() -> None:
    audio, bursts = synth(LAYOUT)
    bad = bursts[8]
    asr = BurstAsr(bursts=bursts, loops=lambda freqs, o: bad.freq in freqs)
    options = LongAsrOptions()
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio), options))
    assert t.stats.guard_failures == 1
    report = report_with(t, bad)
    assert not report.passed
    assert "repetition" in report.reasons
    whole = [r for r in asr.requests() if len(r.audio) == report.speech_samples]
    # every deterministic retry was tried, in order, and no sampling (none is configured by default)
    assert _ladder(whole)[-3:] == [("full", 1, 1.0, 0.0), ("full", 5, 1.0, 0.0), ("full", 1, 1.3, 0.0)]
    assert report.attempts >= len(whole)
    others = [r for r in t.stats.chunk_reports if r.index != report.index]
    assert others and all(r.passed and r.attempts == 1 for r in others)
    # then it was cut in two, and the half holding the loop went through the same retries again
    halves = [
        r
        for r in asr.requests()
        if len(r.audio) < report.speech_samples and bad.freq in {b.freq for b, _, _ in asr.found(r.audio)}
    ]
    assert _ladder(halves)[-3:] == _ladder(whole)[-3:]
    other_half = [r for r in asr.requests() if r not in whole and r not in halves and report_for(t, r, asr) is report]
    assert other_half and len(other_half) == 1  # it passed at once
    # the words of the other chunks are all there, in order, and the loop is collapsed to one "thank you"
    good = [b.word for b in bursts if not (report.start <= b.start < report.end)]
    got = [w.text for w in t.words if w.text not in ("thank", "you")]
    assert [w for w in got if w in good] == good
    assert t.text.count("thank") <= 2


def check_history(report: ChunkReport) -> list[tuple[str, bool, bool]]:
    """The report's history agrees with its counts; returns (part, passed, accepted) of each attempt."""
    assert len(report.history) == report.attempts
    accepted = [a.part for a in report.history if a.accepted]
    assert accepted, "no attempt's text is in the transcript"
    if "" in accepted:  # the chunk kept its own text: one attempt of its own, none of its halves
        assert accepted == [""]
    else:  # its halves' texts: one accepted attempt for each part that was not cut further
        assert len(accepted) == len(set(accepted)) and all(not b.startswith(a + ".") for a in accepted for b in accepted)
    for a in report.history:
        assert report.start <= a.start < a.end <= report.end
        assert a.passed == (a.reasons == ())
    return [(a.part, a.passed, a.accepted) for a in report.history]


def test_verbose_history_lists_every_attempt_of_a_chunk_and_of_its_halves() -> None:
    audio, bursts = synth(LAYOUT)
    bad = bursts[8]
    asr = BurstAsr(bursts=bursts, loops=lambda freqs, o: bad.freq in freqs)
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    report = report_with(t, bad)
    rows = check_history(report)
    whole = [a for a in report.history if a.part == ""]
    # the ladder as it ran: the fitted window, the 30 s one, the wider beam, the repetition penalty; all failed
    assert [(a.window_s < 30, a.beam_size, a.repetition_penalty) for a in whole] == [
        (True, 1, 1.0), (False, 1, 1.0), (False, 5, 1.0), (False, 1, 1.3)]
    assert all(not a.passed and "repetition" in a.reasons and a.language == "en" for a in whole)
    assert sum(a.accepted for a in whole) == 1  # the least bad of its own: the halves did not all pass
    parts = [part for part, _, _ in rows if part]
    assert set(parts) == {"1", "2"} and parts == sorted(parts)
    looped = [a for a in report.history if a.part and not a.passed]
    assert looped and all(bad.start < a.end and a.start < bad.end for a in looped)  # the half that held the loop
    assert any(a.passed for a in report.history if a.part)  # the other half passed at once
    for other in t.stats.chunk_reports:
        if other is not report:
            assert check_history(other) == [("", True, True)]
    block = voxserve_block(t)
    (listed,) = [c for c in block["chunk_reports"] if c["index"] == report.index]
    assert [(h["part"], h["passed"], h["accepted"]) for h in listed["history"]] == rows
    assert listed["history"][2]["beam_size"] == 5 and listed["history"][0]["reasons"] == list(whole[0].reasons)


def test_a_file_where_every_window_loops_costs_a_bounded_multiple_of_its_first_pass() -> None:
    """Work per chunk is bounded by its ladder (four attempts) and one cut in two (four for each half), so a
    file whose every window loops costs at most twelve decodes a chunk, then reports every chunk failed."""
    audio, bursts = synth(LAYOUT)
    asr = BurstAsr(bursts=bursts, loops=lambda freqs, o: True)
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    ladder = len(attempt_options(14 * SR, DecodeOptions(), LongAsrOptions()))
    assert ladder == 4
    assert t.stats.guard_failures == t.stats.chunks > 1
    assert len(asr.requests()) == sum(r.attempts for r in t.stats.chunk_reports) <= t.stats.chunks * ladder * 3
    for report in t.stats.chunk_reports:
        rows = check_history(report)
        assert len(rows) <= ladder * 3 and {part for part, _, _ in rows} <= {"", "1", "2"}
    assert t.text.count("thank") <= 2 * t.stats.chunks  # each kept attempt without its loop


def test_sampled_retries_only_when_configured() -> None:
    audio, bursts = synth(LAYOUT)
    bad = bursts[8]
    asr = BurstAsr(bursts=bursts, loops=lambda freqs, o: bad.freq in freqs and o.temperature == 0.0)
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio), LongAsrOptions(temperatures=(0.2, 0.6))))
    report = report_with(t, bad)
    assert report.passed and report.temperature == 0.2 and not report.rechunked
    retried = [r for r in asr.requests() if r.options.temperature > 0]
    assert len(retried) == 1 and retried[0].options.best_of == 3


def test_a_chunk_that_passes_first_is_not_retried() -> None:
    """Where only a later window would loop, the first (fitted) attempt passes and nothing is retried."""
    audio, bursts = synth(LAYOUT)
    bad = bursts[8]
    asr = BurstAsr(bursts=bursts, loops=lambda freqs, o: bad.freq in freqs and o.window == "full")
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio), LongAsrOptions(fit_below_s=30.0)))
    report = report_with(t, bad)
    assert report.passed and report.attempts == 1  # the fitted first attempt was good: nothing retried
    check_words(t, bursts)


@dataclass
class StopsEarlyAsr(BurstAsr):
    """Says only the first burst of a fitted window of three bursts or more (``always``: of every such
    window), as whisper-base did for 14 s of casual speech ("This one Montreal")."""

    always: bool = False

    def _result(self, req: AsrRequest) -> AsrResult:
        result = super()._result(req)
        if not (self.always or req.options.window == "fit") or len(result.text.split()) < 3:
            return result
        first = result.text.split()[0]
        return replace(result, text=first, tokens=result.tokens[:1], words=result.words[:1])


@pytest.mark.parametrize("always", [False, True])
def test_a_window_that_stops_early_is_heard_in_the_full_window_then_in_halves_never_with_a_wider_beam(
    always: bool,
) -> None:
    audio, bursts = synth([(0.2, 2.0)] * 20)  # one region, cut at its short pauses: chunks of one piece each
    asr = StopsEarlyAsr(bursts=bursts, always=always)
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    assert all(r.options.beam_size == 1 and r.options.repetition_penalty == 1.0 for r in asr.requests())
    reasons = {r for report in t.stats.chunk_reports for r in report.reasons}
    assert reasons == {"too_few_words"}
    if always:  # thin in every window: the first try, the 30 s window, then each half tried the same way
        assert all(report.attempts <= 2 + 2 * 2 for report in t.stats.chunk_reports)
        assert len(t.text.split()) < len(bursts)
    else:
        check_words(t, bursts)
        assert all(report.attempts <= 2 and not report.rechunked for report in t.stats.chunk_reports)


# Three pieces of five word-long bursts each (2.6 s of speech a piece), 1 s apart: one packed chunk.
WORDS_LAYOUT = [(1.0 if k % 5 == 0 else 0.15, 0.4) for k in range(15)]


@dataclass
class SkipsPieceAsr(BurstAsr):
    """Says only the middle word of the second piece in a window that holds ``skip_in`` bursts or more, as
    whisper-base skipped a clip of a packed chunk while the aligner spread other words over it (``whole``:
    says nothing of that piece, as whisper-base stopped before joined speech)."""

    skip_in: int = 15
    whole: bool = False

    def _result(self, req: AsrRequest) -> AsrResult:
        result = super()._result(req)
        if len(self.found(req.audio)) < self.skip_in:
            return result
        gone = {b.word for b in self.bursts[5:10]} - (set() if self.whole else {self.bursts[7].word})
        words = tuple(w for w in result.words if w.text not in gone)
        text = " ".join(w for w in result.text.split() if w not in gone)
        return replace(result, text=text, tokens=result.tokens[: len(text.split())], words=words)


def test_a_piece_the_whole_window_skipped_is_heard_in_halves() -> None:
    audio, bursts = synth(WORDS_LAYOUT)
    asr = SkipsPieceAsr(bursts=bursts)
    with transcriber(asr, tones=False) as tr:
        t = run(tr.run(wav(audio)))
    assert t.text == " ".join(b.word for b in bursts)
    (report,) = t.stats.chunk_reports
    assert report.rechunked and report.passed and "thin_speech" in report.reasons
    assert report.attempts == 3  # the whole window once, then each half once
    assert check_history(report) == [("", True, False), ("1", True, True), ("2", True, True)]


def test_a_half_that_again_skips_joined_speech_is_cut_again_at_its_join() -> None:
    audio, bursts = synth(WORDS_LAYOUT)
    asr = SkipsPieceAsr(bursts=bursts, skip_in=10, whole=True)  # skips the second piece beside another one
    with transcriber(asr, tones=False) as tr:
        t = run(tr.run(wav(audio)))
    assert t.text == " ".join(b.word for b in bursts)
    (report,) = t.stats.chunk_reports
    rows = check_history(report)
    assert rows[0] == ("", False, False) and "unheard_speech" in report.history[0].reasons
    cut_again = [part for part, _, _ in rows if "." in part]
    assert len(cut_again) == 2 and all(accepted for part, _, accepted in rows if part in cut_again)


def test_halves_that_hear_no_more_leave_the_chunk_its_own_text() -> None:
    # A piece the decoder writes as one word however it is cut (fillers, a year): the halves add nothing.
    audio, bursts = synth(WORDS_LAYOUT)
    asr = SkipsPieceAsr(bursts=bursts, skip_in=5)
    with transcriber(asr, tones=False) as tr:
        t = run(tr.run(wav(audio)))
    assert t.text.split() == [b.word for k, b in enumerate(bursts) if not 5 <= k < 10 or k == 7]
    (report,) = t.stats.chunk_reports
    # The whole window and its halves, counted in the chunk's report; the half that still holds the thin piece
    # beside another piece is not cut again for it (a half is cut again only where it skipped joined speech).
    assert report.rechunked and report.passed and report.attempts == 3
    assert "thin_speech" not in report.reasons
    rows = check_history(report)  # the chunk's own text is kept; its halves' attempts are listed, none accepted
    assert rows == [("", True, True), ("1", True, False), ("2", True, False)]


def test_progress_is_monotonic_and_ends_at_the_total() -> None:
    audio, bursts = synth(LAYOUT)
    calls: list[tuple[float, float]] = []
    with transcriber(BurstAsr(bursts=bursts)) as tr:
        t = run(tr.run(wav(audio), progress=lambda done, total: calls.append((done, total))))
    total = len(audio) / SR
    assert len(calls) >= 2
    done = [d for d, _ in calls]
    assert done == sorted(done)
    assert all(0 < d <= tot for d, tot in calls)
    assert calls[-1] == pytest.approx((total, total), abs=1e-3)
    assert t.duration_s == pytest.approx(total)


def test_text_hook_streams_the_chunks_in_file_order() -> None:
    audio, bursts = synth(LAYOUT)
    texts: list[str] = []
    with transcriber(BurstAsr(bursts=bursts, delay_s=0.01)) as tr:
        t = run(tr.run(wav(audio), on_text=texts.append))
    assert " ".join(texts) == t.text
    assert len(texts) == t.stats.chunks


def test_streamed_text_starts_after_one_small_batch_not_after_the_file() -> None:
    """With a text hook, the first chunks go alone (one per worker) and their text is out before the rest of
    the file is decoded; the rest is then batched as usual. (OpenAI's stream=True sent nine deltas at the end
    of a 3.9 min file: every chunk was in the same two batches.)"""
    audio, bursts = synth(LONG_LAYOUT)
    events: list[tuple[str, int]] = []

    @dataclass
    class Recording(BurstAsr):
        def transcribe_batch(self, requests):  # type: ignore[no-untyped-def]
            events.append(("batch", len(requests)))
            return super().transcribe_batch(requests)

    config = BatcherConfig(max_batch_size=8, max_wait_ms=2, offline_wait_ms=10, workers=2)
    with transcriber(Recording(bursts=bursts, delay_s=0.05), config) as tr:
        t = run(tr.run(wav(audio), on_text=lambda text: events.append(("text", len(text)))))
    check_words(t, bursts)
    batches = [n for kind, n in events if kind == "batch"]
    assert t.stats.chunks >= 6 and batches[:2] == [1, 1], batches
    first_text = next(i for i, (kind, _) in enumerate(events) if kind == "text")
    third_batch = [i for i, (kind, _) in enumerate(events) if kind == "batch"][2]
    assert first_text < third_batch, events
    assert max(batches[2:]) > 1  # the rest is batched


def test_without_a_text_hook_the_first_chunks_also_go_alone_and_alone_detect_the_language() -> None:
    """The workers start on the first chunks as soon as they are planned, not once a group of them is: one
    chunk per worker, the only ones that detect a language; the rest is batched in the file's language."""
    audio, bursts = synth(LONG_LAYOUT)
    asr = BurstAsr(bursts=bursts, delay_s=0.05)
    config = BatcherConfig(max_batch_size=8, max_wait_ms=2, offline_wait_ms=10, workers=2)
    with transcriber(asr, config) as tr:
        t = run(tr.run(wav(audio)))
    check_words(t, bursts)
    sizes = [len(b) for b in asr.batches]
    assert t.stats.chunks >= 6 and sizes[:2] == [1, 1] and max(sizes[2:]) > 1, sizes
    assert [r.options.language for b in asr.batches[:2] for r in b] == [None, None]
    assert all(r.options.language == "en" for b in asr.batches[2:] for r in b)


def test_with_the_language_given_the_rest_does_not_wait_for_a_lead_chunk_that_retries() -> None:
    """The rest of a file waits for its lead chunks only to learn its language: given one, a lead chunk whose
    decoder loops (retried, then cut in halves) holds nothing back."""
    audio, bursts = synth(LAYOUT)
    slow = bursts[6]  # in the second chunk
    asr = BurstAsr(bursts=bursts, delay_s=0.05, loops=lambda freqs, options: slow.freq in freqs)
    config = BatcherConfig(max_batch_size=8, max_wait_ms=2, offline_wait_ms=10, workers=2)
    with transcriber(asr, config) as tr:
        t = run(tr.run(wav(audio), LongAsrOptions(decode=DecodeOptions(language="en"))))
    order = [report_for(t, r, asr) for r in asr.requests()]
    indices = [r.index for r in order if r is not None]
    assert t.stats.chunks >= 3 and indices.count(1) > 2, indices
    assert indices.index(2) < len(indices) - 1 - indices[::-1].index(1), indices  # sent while chunk 1 retried


def test_a_model_still_loading_does_not_hold_back_reading_the_file() -> None:
    """Given a loader (a cold start), the transcriber reads and scores the file while the model loads: the
    loader sees the VAD at work before it returns, and a loader's failure is the run's."""
    audio, bursts = synth(LAYOUT)
    asr = BurstAsr(bursts=bursts)
    scoring = threading.Event()

    def vad() -> FakeVad:
        scoring.set()
        return FakeVad()

    def load() -> AsrService:
        assert scoring.wait(10), "the file was not read while the model loaded"
        return service

    def missing() -> AsrService:
        raise ModelUnavailable("no such model")

    batcher = MicroBatcher(asr.transcribe_batch, BatcherConfig(max_batch_size=4, max_wait_ms=2, offline_wait_ms=10),
                           name="fake")
    service = AsrService(asr, batcher)
    executor = BlockingExecutor()
    try:
        check_words(run(ToneTranscriber(load, executor, vad).run(wav(audio))), bursts)
        with pytest.raises(ModelUnavailable):
            run(ToneTranscriber(missing, executor, FakeVad).run(wav(audio)))
    finally:
        batcher.close()
        executor.shutdown()


def test_files_transcribed_concurrently_share_batches() -> None:
    layouts = [LAYOUT[:12], LAYOUT[5:17], LAYOUT[2:14]]
    files = [synth(layout, freq0=300 + 2000 * i) for i, layout in enumerate(layouts)]
    bursts = [b for _, bs in files for b in bs]
    asr = BurstAsr(bursts=bursts, delay_s=0.03)
    config = BatcherConfig(max_batch_size=8, max_wait_ms=5, offline_wait_ms=60, workers=1)
    with transcriber(asr, config) as tr:

        async def main() -> list[Transcript]:
            return list(await asyncio.gather(*(tr.run(wav(audio)) for audio, _ in files)))

        results = run(main())
    for t, (_, bs) in zip(results, files):
        check_words(t, bs)
    owner = {b.freq: i for i, (_, bs) in enumerate(files) for b in bs}
    mixed = [
        batch for batch in asr.batches if len({owner[b.freq] for r in batch for b, _, _ in asr.found(r.audio)}) > 1
    ]
    assert mixed, [len(b) for b in asr.batches]
    assert max(len(b) for b in asr.batches) <= 8


def test_chunks_in_another_language_are_redone_in_the_first_chunks_language() -> None:
    audio, bursts = synth(LAYOUT)
    german = bursts[6]  # in the second chunk: the first group's chunks detect their language
    asr = BurstAsr(bursts=bursts, detect=lambda freqs: "de" if german.freq in freqs else "en")
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    assert t.language == "en"
    check_words(t, bursts)  # no "_de" words left
    report = report_with(t, german)
    assert report.index > 0
    redone = [r for r in asr.requests() if german.freq in {b.freq for b, _, _ in asr.found(r.audio)}]
    assert [r.options.language for r in redone] == [None, "en"]
    assert all(r.options.language in (None, "en") for r in asr.requests())  # no chunk decoded as German


def test_a_chunk_in_another_language_stops_retrying_once_the_files_language_is_known() -> None:
    """A first-group chunk that detected German and loops in it is not retried in German nor cut in halves
    in German once the first chunk's English is in: it is redone in English at the end, once."""
    audio, bursts = synth(LAYOUT)
    german = bursts[6]  # in the second chunk, sent with the first before the file's language is known
    asr = BurstAsr(bursts=bursts, detect=lambda freqs: "de" if german.freq in freqs else "en",
                   loops=lambda freqs, options: german.freq in freqs and options.language != "en")
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    assert t.language == "en"
    check_words(t, bursts)
    assert [r.options.language for r in _holding(asr, german)] == [None, "en"]
    # its report lists both decodes: the German one first (not kept), then the English redo (kept)
    report = report_with(t, german)
    assert check_history(report) == [("", False, False), ("", True, True)]
    assert [a.language for a in report.history] == ["de", "en"]


def test_the_first_chunks_language_wins_even_when_not_english() -> None:
    audio, bursts = synth(LAYOUT)
    asr = BurstAsr(bursts=bursts, detect=lambda freqs: "de" if bursts[0].freq in freqs else "en")
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    assert t.language == "de"
    assert [w.text for w in t.words] == [b.word + "_de" for b in bursts]


def test_requested_language_is_used_for_every_chunk() -> None:
    audio, bursts = synth(LAYOUT[:6])
    asr = BurstAsr(bursts=bursts, detect=lambda freqs: "de")
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio), LongAsrOptions(decode=DecodeOptions(language="fr"))))
    assert t.language == "fr" and t.language_probability == 1.0
    assert all(r.options.language == "fr" for r in asr.requests())


def _detections(asr: BurstAsr) -> list[AsrRequest]:
    """The requests that left the language to the recogniser: each one a detection."""
    return [r for r in asr.requests() if r.options.language is None]


def _holding(asr: BurstAsr, burst: Burst) -> list[AsrRequest]:
    return [r for r in asr.requests() if burst.freq in {b.freq for b, _, _ in asr.found(r.audio)}]


def test_the_language_is_detected_once_per_file() -> None:
    """With groups of one chunk, only the file's first chunk detects its language: every later chunk is sent
    once its text is in, with its language (before: every chunk of the file detected its own)."""
    audio, bursts = synth(LONG_LAYOUT)
    asr = BurstAsr(bursts=bursts)
    config = BatcherConfig(max_batch_size=1, max_wait_ms=2, offline_wait_ms=10, workers=1)  # groups of 1 chunk
    with transcriber(asr, config) as tr:
        t = run(tr.run(wav(audio)))
    check_words(t, bursts)
    assert t.stats.chunks >= 6 and len(asr.requests()) == t.stats.chunks
    assert _detections(asr) == _holding(asr, bursts[0])  # one detection: the first chunk's
    assert t.language == "en" and t.language_probability == 0.95  # the detection's, as before



@dataclass
class TimedBurstAsr(BurstAsr):
    """BurstAsr that records when each batch ran (to see whether the workers started together)."""

    spans: list[tuple[float, float]] = field(default_factory=list)

    def transcribe_batch(self, requests):  # type: ignore[no-untyped-def]
        began = time.monotonic()
        out = super().transcribe_batch(requests)
        self.spans.append((began, time.monotonic()))
        return out

def test_the_first_chunks_keep_both_workers_busy_and_later_chunks_skip_detection() -> None:
    """Two workers: the first two chunks go alone as soon as they are planned, one per worker, each detecting
    its own language; the chunks sent after the first chunk's text is in carry the file's language, so a later
    chunk that would have detected German is decoded in English at once, not detected and then redone."""
    audio, bursts = synth(LAYOUT * 6, step=45)  # 120 bursts (up to 5.7 kHz): about 400 s, 14 or more chunks
    german = bursts[100]
    asr = TimedBurstAsr(bursts=bursts, delay_s=0.2, detect=lambda freqs: "de" if german.freq in freqs else "en")
    config = BatcherConfig(max_batch_size=4, max_wait_ms=2, offline_wait_ms=10, workers=2)  # groups of 4
    with transcriber(asr, config) as tr:
        t = run(tr.run(wav(audio)), timeout=60)
    check_words(t, bursts)
    assert t.language == "en" and t.stats.chunks >= 12
    first, second = sorted(asr.spans)[:2]
    assert second[0] < first[1]  # the second worker did not wait for the first chunk
    detected = _detections(asr)
    assert sorted(report_for(t, r, asr).index for r in detected) == [0, 1]  # type: ignore[union-attr]
    assert [r.options.language for r in _holding(asr, german)] == ["en"]
    assert len(asr.requests()) == t.stats.chunks  # nothing redone


def test_with_batches_of_one_chunk_both_workers_start_at_once() -> None:
    """Two workers taking one chunk each: a group is one chunk, but two go before the language is known."""
    audio, bursts = synth(LONG_LAYOUT)
    asr = TimedBurstAsr(bursts=bursts, delay_s=0.2)
    config = BatcherConfig(max_batch_size=1, max_wait_ms=2, offline_wait_ms=10, workers=2)
    with transcriber(asr, config) as tr:
        t = run(tr.run(wav(audio)), timeout=60)
    check_words(t, bursts)
    first, second = sorted(asr.spans)[:2]
    assert second[0] < first[1]
    assert 2 <= len(_detections(asr)) <= 3 < t.stats.chunks


def test_a_file_whose_first_speech_is_german_is_german_throughout() -> None:
    """The second chunk, sent before the first's text was in, detected English; it is redone in German (the
    first speech's language) at the end, and every chunk sent later carries German."""
    audio, bursts = synth(LAYOUT * 6, step=45)
    asr = BurstAsr(bursts=bursts, delay_s=0.05, detect=lambda freqs: "de" if bursts[0].freq in freqs else "en")
    config = BatcherConfig(max_batch_size=4, max_wait_ms=2, offline_wait_ms=10, workers=2)
    with transcriber(asr, config) as tr:
        t = run(tr.run(wav(audio)), timeout=60)
    assert t.language == "de" and t.language_probability == 0.95
    assert [w.text for w in t.words] == [b.word + "_de" for b in bursts]
    detected = _detections(asr)
    assert len(detected) == 2, len(detected)
    sent: dict[int, list[str | None]] = {}
    for r in asr.requests():
        sent.setdefault(report_for(t, r, asr).index, []).append(r.options.language)  # type: ignore[union-attr]
    first_group = {report_for(t, r, asr).index for r in detected}  # type: ignore[union-attr]
    assert sent.pop(0) == [None]
    for index, languages in sent.items():  # detected English, then redone in German; or German at once
        assert languages == ([None, "de"] if index in first_group else ["de"]), (index, languages)


_RNG = np.random.default_rng(7)


@pytest.mark.parametrize(
    "data",
    [b"", _RNG.bytes(4000), b"RIFF" + _RNG.bytes(100), b"hello, this is not audio\n" * 50],
    ids=["empty", "random", "riff-garbage", "text"],
)
def test_bad_input_is_invalid_input(data: bytes) -> None:
    asr = BurstAsr()
    with transcriber(asr) as tr, pytest.raises(InvalidInput):
        run(tr.run(data))
    assert asr.batches == []


def test_audio_over_the_limit_is_refused() -> None:
    audio, _ = synth([(0.5, 2.0)] * 3)  # 8.5 s
    asr = BurstAsr()
    with transcriber(asr) as tr, pytest.raises(InvalidInput) as info:
        run(tr.run(wav(audio), LongAsrOptions(max_duration_s=5.0)))
    assert info.value.code == "audio_too_long"
    assert asr.batches == []


def test_silence_only_gives_an_empty_transcript() -> None:
    audio = np.zeros(5 * SR, np.float32)
    asr = BurstAsr()
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio)))
    assert t.text == "" and t.segments == () and t.stats.chunks == 0
    assert t.duration == 5 * SR
    assert asr.batches == []


def test_no_chunk_is_lost_when_the_last_partial_frame_completes_the_planning_window() -> None:
    """Speech whose last, partial VAD frame brings the planner's buffer to two chunk windows: the chunks
    that this last frame makes final must be transcribed too."""
    frame = FakeVad().frame_samples
    options = LongAsrOptions(chunking=ChunkParams(max_chunk_s=29.0))  # a window that is no whole number of frames
    window = 2 * options.chunking.max_samples  # the planner plans from two windows of audio
    n = (window // frame) * frame + 100  # all frames but the last complete, and the last one completes it
    assert n % frame and (n // frame) * frame < window <= (n // frame + 1) * frame
    layout = [(0.5, 2.0)] * int(n / SR / 2.5 - 1)
    audio, bursts = synth(layout, n_samples=n)
    asr = BurstAsr(bursts=bursts)
    with transcriber(asr) as tr:
        t = run(tr.run(wav(audio), options))
    assert t.duration == n
    assert t.stats.chunks >= 2
    check_words(t, bursts)


def test_a_busy_event_loop_does_not_duplicate_chunks() -> None:
    """The decoder thread hands chunks to the event loop; when the loop is slow to take one, the chunk
    must still arrive exactly once."""
    audio, bursts = synth(LAYOUT[:10])
    asr = BurstAsr(bursts=bursts)
    holder: dict[str, asyncio.AbstractEventLoop] = {}

    def slow_loop_vad() -> FakeVad:
        holder["loop"].call_soon_threadsafe(time.sleep, 0.8)  # something blocks the loop for a while
        time.sleep(0.05)
        return FakeVad()

    with transcriber(asr, vad=slow_loop_vad) as tr:

        async def main() -> Transcript:
            holder["loop"] = asyncio.get_running_loop()
            return await tr.run(wav(audio))

        t = run(main())
    check_words(t, bursts)
    assert len(asr.requests()) == t.stats.chunks
    assert len({r.index for r in t.stats.chunk_reports}) == t.stats.chunks


def test_progress_counts_chunks_that_finish_out_of_order() -> None:
    """Batches finish out of order: progress must count a late chunk's audio at once, not wait for the first."""
    from voxserve.pipelines.chunking import ChunkPlan, Piece
    from voxserve.pipelines.long_asr import _Progress

    plans = [ChunkPlan(i, (Piece(i * 30 * SR, i * 30 * SR + 25 * SR, 0),)) for i in range(4)]
    calls: list[float] = []
    texts: list[str] = []
    tracker = _Progress(lambda done, total: calls.append(done), 120.0, texts.append)
    for i in (3, 2, 1):
        tracker.chunk_done(plans[i], f"t{i}")
    assert calls == [25.0, 50.0, 75.0] and texts == []  # counted, but no text goes out before chunk 0's
    tracker.chunk_done(plans[0], "t0")
    assert calls[-1] == 115.0 and texts == ["t0", "t1", "t2", "t3"]
    assert calls == sorted(calls)
