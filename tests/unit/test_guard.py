"""The hallucination guard: pure rules over text, decoder statistics and the amount of speech."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxserve.pipelines.guard import (
    GuardConfig,
    LoopEvidence,
    Verdict,
    any_repeat,
    assess,
    compression_ratio,
    ends_in_repeat,
    is_repetitive,
    repeat_runs,
    timed_repeat_reasons,
    word_count,
)
from voxserve.types import SAMPLE_RATE

S = SAMPLE_RATE
NORMAL = (
    "The committee met on Tuesday to review the budget for next year. After a long discussion, "
    "they agreed to fund the new library and to repair the bridge over the river before winter."
)


def random_words(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 8))) for _ in range(n))


def ok(text: str, speech_s: float = 10.0, logprob: float = -0.3, no_speech: float = 0.05, lang: str = "en") -> Verdict:
    return assess(text, logprob, no_speech, int(speech_s * S), lang)


# ------------------------------------------------------------------------------------------ helpers


def test_compression_ratio_values() -> None:
    assert compression_ratio("") == 0.0
    assert compression_ratio("thank you " * 50) > 10
    assert compression_ratio(NORMAL) < 2.0


def test_word_count_with_and_without_spaces() -> None:
    assert word_count("one two  three\tfour\n", "en") == 4
    assert word_count("", "en") == 0
    assert word_count("今天天气很好。", "zh") == 3  # six letters (punctuation not counted) / 2
    assert word_count("今天天气很好。", "en") == 1


def test_repeat_runs_finds_the_longest_run_per_ngram_size() -> None:
    assert repeat_runs("a b c".split(), 3) == {1: 1, 2: 1, 3: 1}
    assert repeat_runs("x a a a y".split(), 2)[1] == 3
    assert repeat_runs("x thank you thank you thank you y".split(), 3) == {1: 1, 2: 3, 3: 1}
    assert repeat_runs("a b c a b c a b c a b c".split(), 4)[3] == 4
    # case and punctuation do not hide a repetition
    assert repeat_runs("Thank you. thank you, THANK YOU!".split(), 2)[2] == 3


def test_a_long_phrase_may_not_repeat_at_all() -> None:
    cfg = GuardConfig()
    assert not is_repetitive("the quick brown the quick brown".split(), cfg)  # 3 words twice
    assert is_repetitive("the quick brown fox the quick brown fox".split(), cfg)  # 4 words twice
    assert is_repetitive("the quick brown fox jumps the quick brown fox jumps".split(), cfg)  # 5 words twice
    assert not is_repetitive("the quick brown fox jumps over the lazy dog".split(), cfg)
    assert not is_repetitive("the quick brown fox jumps".split(), GuardConfig(long_phrase=3, max_repeats=5))
    assert is_repetitive("one two three one two three".split(), GuardConfig(long_phrase=3))


def test_repetition_thresholds_per_ngram_size() -> None:
    cfg = GuardConfig()
    assert not is_repetitive("no no no no".split(), cfg)
    assert is_repetitive("no no no no no".split(), cfg)  # one word 5 times
    assert not is_repetitive("I think I think I think".split(), cfg)
    assert is_repetitive("I think I think I think I think".split(), cfg)  # two words 4 times
    assert not is_repetitive("one two three one two three".split(), cfg)
    assert is_repetitive("one two three one two three one two three".split(), cfg)  # longer: 3 times


# ------------------------------------------------------------------------------------------- assess


def test_looped_thank_you_fails() -> None:
    text = " ".join(["Thank you."] * 40)
    v = ok(text, speech_s=25.0)
    assert not v.passed
    assert "repetition" in v.reasons and "compression_ratio" in v.reasons
    assert v.compression_ratio > 2.4
    assert not v.silence


def test_normal_english_passes() -> None:
    v = ok(NORMAL, speech_s=12.0)
    assert v == Verdict(True, (), False, compression_ratio(NORMAL))
    for sentence in [
        "Hello, how are you today?",
        "I think, I think we should go now.",
        "Yes, yes, yes, that's exactly right.",
        "She sells sea shells by the sea shore.",
    ]:
        assert ok(sentence, speech_s=3.0).passed, sentence


def test_silence_rule() -> None:
    v = assess("Thank you.", -1.5, 0.9, 10 * S, "en")
    assert v.passed and v.silence and v.reasons == ("no_speech",)
    # either condition alone is not silence
    assert not assess("Thank you.", -0.5, 0.9, 10 * S, "en").silence
    assert not assess("Thank you.", -1.5, 0.3, 10 * S, "en").silence
    # the threshold is strict
    assert not assess("Thank you.", -1.5, 0.6, 2 * S, "en").silence


def test_low_avg_logprob_fails() -> None:
    v = ok(NORMAL, speech_s=12.0, logprob=-1.2)
    assert not v.passed and v.reasons == ("avg_logprob",)
    assert ok(NORMAL, speech_s=12.0, logprob=-1.0).passed  # the threshold itself passes
    # no text: nothing to distrust
    assert ok("", speech_s=2.0, logprob=-2.0).passed


def test_too_many_words_for_the_speech() -> None:
    text = random_words(100)
    assert compression_ratio(text) < 2.4  # only the rate is wrong
    v = ok(text, speech_s=2.0)
    assert not v.passed and v.reasons == ("too_many_words",)
    # 380 words per minute plus 4 of slack: 16 words fit 2 s, 17 are too many
    assert ok(random_words(16), speech_s=2.0).passed
    assert ok(random_words(17), speech_s=2.0).reasons == ("too_many_words",)


def test_too_few_words_for_long_speech() -> None:
    v = ok("Hello.", speech_s=30.0)
    assert not v.passed and v.reasons == ("too_few_words",)
    # 30 words per minute: 15 words in 30 s are enough, 14 too few
    assert ok(random_words(15), speech_s=30.0).passed
    assert ok(random_words(14), speech_s=30.0).reasons == ("too_few_words",)
    assert ok("", speech_s=30.0).reasons == ("too_few_words",)


def test_no_rate_check_for_short_speech() -> None:
    assert ok("Hello.", speech_s=7.9).passed
    assert ok("", speech_s=7.9).passed
    assert not ok("Hello.", speech_s=8.0).passed


def test_disabled_guard_always_passes() -> None:
    cfg = GuardConfig(enabled=False)
    loop = "thank you " * 100
    v = assess(loop, -3.0, 0.99, 1 * S, "en", cfg)
    assert v.passed and v.reasons == () and not v.silence
    assert v.compression_ratio == pytest.approx(compression_ratio(loop))


def test_languages_without_spaces_are_not_checked_for_word_repetition() -> None:
    text = "好 好 好 好 好 好"
    assert "repetition" in ok(text, speech_s=5.0, logprob=-0.8, lang="en").reasons  # a run the decoder was unsure of
    v = ok(text, speech_s=5.0, logprob=-0.8, lang="zh")
    assert v.passed, v.reasons
    assert ok(text, speech_s=5.0, logprob=-0.8, lang="ja").passed


def test_no_space_languages_are_still_checked_for_compression_and_rate() -> None:
    loop = "谢谢大家" * 60
    v = ok(loop, speech_s=5.0, lang="zh")
    assert not v.passed
    assert "compression_ratio" in v.reasons and "too_many_words" in v.reasons
    assert "repetition" not in v.reasons


def test_custom_thresholds() -> None:
    cfg = GuardConfig(max_repeats=3, min_avg_logprob=-0.5, max_words_per_minute=60, min_words_per_minute=12, word_slack=0)
    assert assess("no no no", -0.1, 0.0, 10 * S, "en", cfg).passed  # a repeated run alone is no loop
    assert assess("no no no", -0.1, 0.0, 10 * S, "en", cfg, LoopEvidence(hit_cap=True)).reasons == (
        "repetition", "token_cap")
    assert assess("fine words here", -0.6, 0.0, 10 * S, "en", cfg).reasons == ("avg_logprob",)
    assert assess("one two three four five six seven eight nine ten eleven", -0.1, 0.0, 10 * S, "en", cfg).reasons == (
        "too_many_words",
    )


# --------------------------------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=400),
    st.floats(-10.0, 0.0),
    st.floats(0.0, 1.0),
    st.integers(0, 60 * S),
    st.sampled_from(["en", "de", "zh", "ja", "th", "", "xx"]),
)
def test_assess_never_raises(text: str, logprob: float, no_speech: float, samples: int, lang: str) -> None:
    v = assess(text, logprob, no_speech, samples, lang)
    assert isinstance(v.passed, bool)
    assert v.passed == (not v.reasons or v.silence)
    assert v.compression_ratio == pytest.approx(compression_ratio(text))
    if v.silence:
        assert v.passed and v.reasons == ("no_speech",)
    assert set(v.reasons) <= {
        "no_speech",
        "compression_ratio",
        "avg_logprob",
        "repetition",
        "too_many_words",
        "too_few_words",
        "squeezed_words",
        "extreme_compression",
        "past_speech",
        "token_cap",
        "fast_words",
        "unsure_words",
    }


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["thank", "you", "so", "much", "bye"]), min_size=1, max_size=4), st.integers(6, 30))
def test_any_phrase_looped_many_times_fails(phrase: list[str], times: int) -> None:
    """A run with a looping decoder's mark beside it (stopped at its token cap) always fails."""
    text = " ".join(phrase * times)
    v = assess(text, -0.2, 0.01, 20 * S, "en", evidence=LoopEvidence(hit_cap=True))
    assert not v.passed
    assert "repetition" in v.reasons and "token_cap" in v.reasons


@pytest.mark.parametrize(
    "text,speech_s",
    [
        ("The birch canoe slid on the smooth planks. The birch canoe slid on the smooth planks.", 7.0),
        ("one two three one two three one two three one two three", 11.0),
        ("Hello? Hello? Hello? Hello? Hello? Hello?", 4.0),
        ("words words words words words um and that should be all", 6.0),
        ("Ask not. Ask not. Ask not. Ask not.", 4.0),
    ],
)
def test_a_person_repeating_themselves_passes(text: str, speech_s: float) -> None:
    """Repetition alone never fails a result whose evidence is good (plausible rate, confident decoder)."""
    v = ok(text, speech_s=speech_s, logprob=-0.25)
    assert v.passed, v.reasons


def test_loop_evidence_from_word_timings() -> None:
    words = "the birch canoe slid on the smooth planks the birch canoe slid on the smooth planks".split()
    spread = tuple((0.5 * i, 0.5 * i + 0.4) for i in range(len(words)))
    assert ok(" ".join(words), speech_s=8.0).passed
    fine = assess(" ".join(words), -0.3, 0.05, 8 * S, "en", evidence=LoopEvidence(word_times=spread, speech_end_s=8.0))
    assert fine.passed, fine.reasons
    squeezed = tuple((4.0, 4.0) if i >= 8 else t for i, t in enumerate(spread))
    v = assess(" ".join(words), -0.3, 0.05, 8 * S, "en", evidence=LoopEvidence(word_times=squeezed, speech_end_s=8.0))
    assert "squeezed_words" in v.reasons and not v.passed
    late = tuple((8.5 + i, 8.9 + i) if i >= 12 else t for i, t in enumerate(spread))
    v = assess(" ".join(words), -0.3, 0.05, 8 * S, "en", evidence=LoopEvidence(word_times=late, speech_end_s=8.0))
    assert "past_speech" in v.reasons and not v.passed


def test_a_phrase_said_twice_is_judged_by_its_timings() -> None:
    """"two three" decoded "2 3 2 3" (the live path, measured): the repeat is a run only under any_repeat, and
    its timings (the second "2" 0 ms long, as the aligner put it) fail it; the same words spoken at a person's
    pace pass, and so does a text without a repeat."""
    words = "2 3 2 3".split()
    strict = any_repeat(GuardConfig())
    assert not is_repetitive(words, GuardConfig()) and is_repetitive(words, strict)
    assert not is_repetitive("2 3 4 5".split(), strict)
    looped = LoopEvidence(word_times=((0.0, 0.58), (0.58, 1.3), (1.3, 1.3), (1.3, 1.56)), speech_end_s=1.98)
    assert timed_repeat_reasons(words, strict, looped) == ["squeezed_words"]
    spoken = LoopEvidence(word_times=((0.1, 0.4), (0.45, 0.8), (1.0, 1.3), (1.35, 1.7)), speech_end_s=1.98)
    assert timed_repeat_reasons(words, strict, spoken) == []
    late = LoopEvidence(word_times=((0.1, 0.4), (0.45, 0.8), (2.0, 2.3), (2.35, 2.7)), speech_end_s=1.98)
    assert timed_repeat_reasons(words, strict, late) == ["past_speech"]
    assert timed_repeat_reasons(words, strict, LoopEvidence()) == []  # no timings, no verdict


def test_only_a_phrase_repeated_at_the_end_is_asked_about() -> None:
    assert ends_in_repeat("2 3 2 3".split(), 10)
    assert ends_in_repeat("And so my fellow Americans. And so my fellow Americans.".split(), 10)
    assert ends_in_repeat("Montreal but... but... Montreal but... but...".split(), 10)
    assert not ends_in_repeat("um, um, for a still liner.".split(), 10)
    assert not ends_in_repeat("more words. Words, words, words.".split(), 10)
    assert not ends_in_repeat("nothing going on going on. We're just".split(), 10)
    assert not ends_in_repeat([], 10) and not ends_in_repeat(["a"], 10)


def test_fast_and_unsure_runs_fail() -> None:
    loop = " ".join(["thank you"] * 12)  # 24 words in 3 s: faster than anyone speaks
    assert "fast_words" in ok(loop, speech_s=3.0).reasons
    assert "unsure_words" in ok("so so so so so so", speech_s=5.0, logprob=-0.8).reasons
