"""Hallucination guard: decide whether one chunk's recognition result can be trusted.

Pure functions over the decoder's statistics and the chunk's speech duration. A result fails when the
whole window's text compresses too well (gzip ratio, Whisper's 2.4), the decoder was unsure (average
log-probability), or the number of words is implausible for the amount of speech (words per minute).

Repeated words alone never fail a result: people say the same sentence twice, read word lists, count and
call "hello? hello?". A repeated run fails only with evidence of a looping decoder beside it: the decoder
ran to its token cap, the words come faster than a person speaks (words per second of VAD speech), the
decoder was unsure of them, or (with word timings) the repeated words are squeezed into no time or run
past the end of the speech. A result that the model itself marks as silence (high no-speech probability
and low confidence) passes with empty text.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, fields, replace

from voxserve.backends.base import AsrResult
from voxserve.config import GuardSettings
from voxserve.languages import NO_SPACE_LANGUAGES
from voxserve.types import SAMPLE_RATE


@dataclass(frozen=True)
class GuardConfig:
    """Thresholds of the guard (Whisper's published defaults where they exist).

    Attributes:
        max_compression_ratio: fail above this gzip ratio (Whisper: 2.4).
        min_avg_logprob: fail below this mean token log-probability (Whisper: -1.0).
        no_speech_threshold: with a low log-probability, above this no-speech probability the chunk is
            silence (Whisper: 0.6).
        max_words_per_minute: fail when the text has more words than this rate allows (+ ``word_slack``).
        min_words_per_minute: fail when a chunk with at least ``min_speech_s_for_rate`` of speech has fewer
            (a fitted window's decoder sometimes stops after a few words and stretches them over the rest:
            "This one Montreal" for 14 s of casual speech; the slowest correctly heard chunks of the tune files had
            about 60 words per minute of their time span, more per minute of speech).
        max_repeats: a single word repeating this many times in a row is a repeated run; a two-word phrase
            one time fewer, three- and four-word phrases two fewer; a phrase of ``long_phrase`` words or more
            (up to ``max_ngram``) repeated once. A run is only evidence: see ``loop_words_per_s`` and
            ``loop_min_avg_logprob``.
        loop_words_per_s: a repeated run fails when the text has more words than this per second of speech
            (a looping decoder packs words into little audio; people who repeat themselves speak at 2-3.5).
        loop_min_avg_logprob: a repeated run fails when the decoder's mean log-probability is below this.
        min_word_s: with word timings, a repeated word shorter than this is squeezed into no time; a run
            fails when a quarter of its words are.
        loop_compression_ratio: text that compresses better than this is a loop by itself (a chorus said
            four times measured at most 4.1, decoder loops 7-18).
        max_word_s: a word the aligner stretched over this long covers no speech when a packed chunk is checked
            for skipped pieces: Whisper had stopped early or skipped ahead ("you know, Montreal forced aligner.
            Unless a system ..." came back "Unless a system ...", its "Unless" and "a" 1.5 s each over the
            skipped clip). Tune half (8 programs as files): the longest real word, a year read aloud, lasted
            1.06 s inside its chunk.
        min_piece_words_per_s: a piece of a packed chunk with at least 2 s of speech and fewer words than this
            a second (a word counted in the piece its middle lies in) may hold speech the decoder skipped while
            the aligner spread the next words over it: the chunk is decoded again cut at its joins, and the
            halves' text is kept only when it holds more words (see ``long_asr.thin_pieces``). Tune half (8
            programs as files): the sparsest piece of real speech said 0.98 words a second ("Montreal forced
            um ... um ..."), the pieces Whisper skipped 0-0.36.
    """

    max_compression_ratio: float = 2.4
    min_avg_logprob: float = -1.0
    no_speech_threshold: float = 0.6
    max_words_per_minute: float = 380.0
    min_words_per_minute: float = 30.0
    min_speech_s_for_rate: float = 8.0
    word_slack: int = 4
    max_repeats: int = 5
    long_phrase: int = 4
    max_ngram: int = 10
    loop_words_per_s: float = 4.5
    loop_min_avg_logprob: float = -0.7
    min_word_s: float = 0.03
    loop_compression_ratio: float = 6.0
    max_word_s: float = 1.4
    min_piece_words_per_s: float = 0.8
    enabled: bool = True

    @classmethod
    def from_settings(cls, settings: GuardSettings) -> GuardConfig:
        """The guard as the process settings configure it: every field the settings name (the others are
        tuning constants of the guard itself); ``tests/unit/test_settings_defaults.py`` checks both agree."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls) if f.name in type(settings).model_fields})


@dataclass(frozen=True)
class Verdict:
    """The guard's decision; ``silence`` means an empty transcript is the right answer."""

    passed: bool
    reasons: tuple[str, ...] = ()
    silence: bool = False
    compression_ratio: float = 0.0


def token_cap(n_samples: int) -> int:
    """The most tokens a chunk of ``n_samples`` may produce: 15 per second of speech (fast speech in any
    language stays well below), so a looping decoder stops early instead of running to the model's limit,
    and a decoder that reaches the cap is evidence of a loop (see :class:`LoopEvidence`)."""
    return 10 + int(15 * n_samples / SAMPLE_RATE)


def compression_ratio(text: str) -> float:
    """UTF-8 size over zlib-compressed size; repetitive text compresses well and scores high."""
    raw = text.encode("utf-8")
    return len(raw) / len(zlib.compress(raw)) if raw else 0.0


def word_count(text: str, language: str) -> int:
    """Words in ``text``; for languages written without spaces, characters / 2 as a rough equivalent."""
    if language in NO_SPACE_LANGUAGES:
        return len([c for c in text if c.isalnum()]) // 2
    return len(text.split())


def _plain_tokens(words: list[str]) -> list[str]:
    """Words as repetition is counted: lower case, without surrounding punctuation ("Words," == "words.")."""
    return [w.lower().strip(".,!?;:\"'") for w in words]


def repeat_runs(words: list[str], max_ngram: int) -> dict[int, int]:
    """For each n-gram size, the largest number of consecutive repetitions of one n-gram."""
    tokens = _plain_tokens(words)
    runs = {}
    for n in range(1, max_ngram + 1):
        best, i = 1, 0
        while i + 2 * n <= len(tokens):
            run = 1
            while i + (run + 1) * n <= len(tokens) and tokens[i + run * n : i + (run + 1) * n] == tokens[i : i + n]:
                run += 1
            best = max(best, run)
            i += (run - 1) * n if run > 1 else 1
        runs[n] = best
    return runs


def _allowed_run(n: int, config: GuardConfig) -> int:
    return 1 if n >= config.long_phrase else max(1, config.max_repeats - min(n - 1, 2) - 1)


def is_repetitive(words: list[str], config: GuardConfig) -> bool:
    """Whether some n-gram repeats in a row more often than the config allows (a repeated run)."""
    return any(run > _allowed_run(n, config) for n, run in repeat_runs(words, config.max_ngram).items())


def repeated_indices(words: list[str], config: GuardConfig) -> list[int]:
    """Indices of the words that belong to a repeated run beyond its first occurrence."""
    keep = set(collapse_repeats(words, config))
    return [i for i in range(len(words)) if i not in keep]


@dataclass(frozen=True)
class LoopEvidence:
    """What a result shows beside its repeated run (see :func:`loop_reasons`).

    Attributes:
        hit_cap: the decoder stopped at its token cap instead of at the end of text.
        word_times: (start_s, end_s) of each word, chunk-local, when the result has word timings.
        speech_end_s: where the chunk's speech ends (chunk-local seconds).
    """

    hit_cap: bool = False
    word_times: tuple[tuple[float, float], ...] = ()
    speech_end_s: float = 0.0


def loop_reasons(
    words: list[str], avg_logprob: float, speech_samples: int, ratio: float, config: GuardConfig,
    evidence: LoopEvidence,
) -> list[str]:
    """Why a repeated run looks like a looping decoder rather than a person repeating themselves (empty
    when nothing but the repetition itself speaks against the text); ``ratio``: the text's compression ratio."""
    reasons = []
    if evidence.hit_cap:
        reasons.append("token_cap")
    if ratio > config.loop_compression_ratio:
        reasons.append("extreme_compression")
    speech_s = speech_samples / SAMPLE_RATE
    if len(words) > config.loop_words_per_s * speech_s + config.word_slack:
        reasons.append("fast_words")
    if avg_logprob < config.loop_min_avg_logprob:
        reasons.append("unsure_words")
    reasons.extend(timed_repeat_reasons(words, config, evidence))
    return reasons


def timed_repeat_reasons(words: list[str], config: GuardConfig, evidence: LoopEvidence) -> list[str]:
    """What the word timings say against the repeated run(s) of ``words`` (the runs ``config`` counts):
    its repeated words squeezed into no time (a quarter of them shorter than ``min_word_s``), or starting
    past the end of the speech. Empty without timings, or when the repeats took time like real speech."""
    if not evidence.word_times or len(evidence.word_times) != len(words):
        return []
    times = [evidence.word_times[i] for i in repeated_indices(words, config)]
    reasons = []
    squeezed = sum(1 for start, end in times if end - start < config.min_word_s)
    if times and squeezed * 4 >= len(times):
        reasons.append("squeezed_words")
    if evidence.speech_end_s and any(start >= evidence.speech_end_s for start, _ in times):
        reasons.append("past_speech")
    return reasons


def ends_in_repeat(words: list[str], max_ngram: int) -> bool:
    """Whether the text ends with a phrase of 2 to ``max_ngram`` words (not all one word) said twice in a
    row: where a short decode that looped once puts its loop ("2 3 2 3", "And so my fellow Americans. And so
    my fellow Americans."). A word said twice ("um, um", "words, words") or a phrase repeated inside a
    sentence ("going on going on. We're just ...") is not asked about (each question costs a decode)."""
    tokens = _plain_tokens(words)
    return any(tokens[-2 * n : -n] == tokens[-n:] and len(set(tokens[-n:])) > 1
               for n in range(2, min(max_ngram, len(tokens) // 2) + 1))


def any_repeat(config: GuardConfig) -> GuardConfig:
    """``config`` with every word or phrase said twice in a row counted as a repeated run. A short decode
    that loops once ("two three" -> "2 3 2 3") looks like a person saying a thing twice: under this config
    :func:`is_repetitive` finds both, and only :func:`timed_repeat_reasons` tells them apart."""
    return replace(config, long_phrase=1)


def collapse_repeats(words: list[str], config: GuardConfig = GuardConfig()) -> list[int]:
    """Indices of the words to keep so that every over-repeated n-gram run keeps its first occurrence.

    The last resort for a chunk whose every attempt looped: "Ask not. Ask not. Ask not." -> "Ask not.".
    """
    tokens = _plain_tokens(words)
    keep: list[int] = []
    i = 0
    while i < len(tokens):
        skip = 0
        for n in range(1, min(config.max_ngram, (len(tokens) - i) // 2) + 1):
            run = 1
            while tokens[i + run * n : i + (run + 1) * n] == tokens[i : i + n] and i + (run + 1) * n <= len(tokens):
                run += 1
            if run > _allowed_run(n, config):
                keep.extend(range(i, i + n))
                skip = run * n
                break
        if skip:
            i += skip
        else:
            keep.append(i)
            i += 1
    return keep


def assess(
    text: str,
    avg_logprob: float,
    no_speech_prob: float,
    speech_samples: int,
    language: str,
    config: GuardConfig = GuardConfig(),
    evidence: LoopEvidence = LoopEvidence(),
) -> Verdict:
    """Judge one chunk's result; see the module docstring for the rules."""
    ratio = compression_ratio(text)
    if not config.enabled:
        return Verdict(True, compression_ratio=ratio)
    if no_speech_prob > config.no_speech_threshold and avg_logprob < config.min_avg_logprob:
        return Verdict(True, ("no_speech",), silence=True, compression_ratio=ratio)
    reasons = []
    words = text.split()
    spaced = language not in NO_SPACE_LANGUAGES
    loop = loop_reasons(words, avg_logprob, speech_samples, ratio, config, evidence) if spaced else []
    if ratio > config.max_compression_ratio and (loop or not spaced):
        # Text that compresses well is repetitive; a person repeating a chorus compresses as well as a loop,
        # so (where words can be counted) it fails only beside a loop's marks.
        reasons.append("compression_ratio")
    if text and avg_logprob < config.min_avg_logprob:
        reasons.append("avg_logprob")
    if spaced and loop and (is_repetitive(words, config) or "compression_ratio" in reasons):
        reasons.append("repetition")
        reasons.extend(r for r in loop if r not in reasons)
    reasons.extend(_rate_reasons(text, speech_samples, language, config))
    return Verdict(not reasons, tuple(reasons), compression_ratio=ratio)


def _rate_reasons(text: str, speech_samples: int, language: str, config: GuardConfig) -> list[str]:
    minutes = speech_samples / SAMPLE_RATE / 60.0
    words = word_count(text, language)
    if words > config.max_words_per_minute * minutes + config.word_slack:
        return ["too_many_words"]
    if minutes * 60.0 >= config.min_speech_s_for_rate and words < config.min_words_per_minute * minutes:
        return ["too_few_words"]
    return []


def without_repeats(result: AsrResult) -> AsrResult:
    """The result with over-repeated phrases collapsed to one occurrence (words too, when they line up)."""
    words = result.text.split()
    keep = collapse_repeats(words)
    text = " ".join(words[i] for i in keep)
    timed = tuple(result.words[i] for i in keep) if len(result.words) == len(words) else result.words
    return replace(result, text=text, words=timed, tokens=tuple(t for w in timed for t in w.tokens) or result.tokens)
