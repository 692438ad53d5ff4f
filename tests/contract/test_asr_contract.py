"""The speech recogniser contract (:class:`~voxserve.backends.base.AsrModel`), for Whisper base and FakeAsr.

- Results: one per request, in order; a language the model knows; probabilities in [0, 1]; a finite
  ``avg_logprob`` <= 0; words ordered, inside the request's audio (and its 30 s window), whose text is the
  result's text and whose tokens are the result's, in order; no words without word timestamps.
- The window: only the first ``window_samples`` (30 s) are heard: a longer request gives exactly what its
  first 30 s give, and its words end inside them. A single sample is still a request.
- Batching: a batch of requests (mixed options) gives the results of the same requests one by one.
- Bad input raises InvalidInput before any model call: no samples (Whisper heard "you" in them), a NaN or
  infinite sample (Whisper returned an empty text with a log-probability of -inf), two channels, integer PCM.
  Options it cannot run raise InvalidInput from ``check_options``.

What the contract leaves open: the words themselves, and what is heard in silence (Whisper says "you" with a
high ``no_speech_prob``; the fake's script speaks on any audio).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from contract_support import load_or_skip, seconds

from voxserve.backends.base import AsrModel, AsrRequest, AsrResult, DecodeOptions
from voxserve.backends.fakes import FakeAsr
from voxserve.errors import InvalidInput

FIT = DecodeOptions(language="en", window="fit")
"""Short fitted windows: the cheap way to run Whisper on short clips."""


@pytest.fixture(scope="module", params=[pytest.param("whisper-base", marks=pytest.mark.slow), "fake"])
def asr(request: pytest.FixtureRequest) -> AsrModel:
    if request.param == "fake":
        return FakeAsr()
    from voxserve.backends.registry import load_asr

    return load_or_skip(lambda: load_asr("whisper-base"))


@pytest.fixture(scope="module")
def full_and_long(asr: AsrModel, speech: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[AsrResult]]:
    """JFK padded with silence to exactly the 30 s window, the same followed by JFK again (41 s), and their
    results from one batch."""
    window = asr.info.window_samples
    full = np.zeros(window, np.float32)
    full[: len(speech["jfk"])] = speech["jfk"]
    longer = np.concatenate([full, speech["jfk"]])
    options = DecodeOptions(language="en")
    return full, longer, asr.transcribe_batch([AsrRequest(full, options), AsrRequest(longer, options)])


def check_result(asr: AsrModel, request: AsrRequest, result: AsrResult) -> None:
    """Everything the contract says of one result."""
    assert isinstance(result, AsrResult)
    assert isinstance(result.text, str) and result.text == result.text.strip()
    assert all(isinstance(t, int) for t in result.tokens) and isinstance(result.tokens, tuple)
    assert result.language in asr.info.languages
    assert 0.0 < result.language_probability <= 1.0
    assert 0.0 <= result.no_speech_prob <= 1.0
    assert math.isfinite(result.avg_logprob) and result.avg_logprob <= 0.0
    assert result.temperature == request.options.temperature
    if not request.options.word_timestamps:
        assert result.words == ()
        return
    heard = min(len(request.audio), asr.info.window_samples)
    words = result.words
    assert bool(words) == bool(result.text), "a text with word timestamps has words"
    assert all(0 <= w.start <= w.end <= heard for w in words), [(w.start, w.end) for w in words]
    assert all(a.start <= b.start and a.end <= b.end for a, b in zip(words, words[1:]))
    assert all(0.0 <= w.probability <= 1.0 for w in words)
    assert "".join(w.text for w in words) == "".join(result.text.split())
    assert is_subsequence([t for w in words for t in w.tokens], result.tokens)


def is_subsequence(part: Sequence[int], whole: Sequence[int]) -> bool:
    it = iter(whole)
    return all(any(t == u for u in it) for t in part)


def test_info(asr: AsrModel) -> None:
    info = asr.info
    assert info.window_samples == seconds(30)
    assert info.max_text_tokens > 0 and "en" in info.languages and info.name


def test_results_are_well_formed(asr: AsrModel, speech: dict[str, np.ndarray]) -> None:
    requests = [AsrRequest(speech["ldc"], FIT), AsrRequest(speech["ls260"], replace(FIT, language=None)),
                AsrRequest(speech["lj"], replace(FIT, word_timestamps=False))]
    results = asr.transcribe_batch(requests)
    assert len(results) == len(requests)
    for request, result in zip(requests, results, strict=True):
        check_result(asr, request, result)
        assert result.text
    assert asr.transcribe_batch([]) == []


def test_a_window_of_audio_is_heard_whole(asr: AsrModel, full_and_long: Any) -> None:
    full, _, (result, _) = full_and_long
    check_result(asr, AsrRequest(full), result)
    assert result.words[-1].end > seconds(8)  # JFK speaks until 10.4 s


def test_only_the_first_window_is_heard(asr: AsrModel, full_and_long: Any) -> None:
    _, longer, (first, result) = full_and_long
    check_result(asr, AsrRequest(longer, DecodeOptions(language="en")), result)
    assert (result.text, result.tokens) == (first.text, first.tokens)
    assert result.words[-1].end <= asr.info.window_samples


def test_a_single_sample_is_a_request(asr: AsrModel) -> None:
    request = AsrRequest(np.zeros(1, np.float32), FIT)
    (result,) = asr.transcribe_batch([request])  # Whisper hears "you" in it, the fake "w0"
    check_result(asr, request, result)


def test_a_batch_equals_its_requests_one_by_one(asr: AsrModel, speech: dict[str, np.ndarray]) -> None:
    requests = [AsrRequest(speech["lj"], FIT), AsrRequest(speech["ldc"], replace(FIT, language=None)),
                AsrRequest(speech["ls260"], FIT), AsrRequest(speech["ldc"], replace(FIT, word_timestamps=False))]
    batch = asr.transcribe_batch(requests)
    alone = [asr.transcribe_batch([r])[0] for r in requests]
    for b, a in zip(batch, alone, strict=True):
        assert (b.text, b.tokens, b.language) == (a.text, a.tokens, a.language)
        assert [(w.text, w.start, w.end) for w in b.words] == [(w.text, w.start, w.end) for w in a.words]
        assert b.avg_logprob == pytest.approx(a.avg_logprob, abs=1e-6)
        assert b.no_speech_prob == pytest.approx(a.no_speech_prob, abs=1e-6)


def test_no_samples_are_refused(asr: AsrModel, speech: dict[str, np.ndarray]) -> None:
    empty = np.zeros(0, np.float32)
    with pytest.raises(InvalidInput) as caught:
        asr.transcribe_batch([AsrRequest(speech["lj"], FIT), AsrRequest(empty, FIT)])
    assert caught.value.code == "empty_audio"
    with pytest.raises(InvalidInput):
        asr.detect_language(empty)


def test_bad_samples_are_refused(asr: AsrModel, speech: dict[str, np.ndarray],
                                 spoil: Callable[[np.ndarray], Any]) -> None:
    bad = spoil(speech["lj"])
    with pytest.raises(InvalidInput):
        asr.transcribe_batch([AsrRequest(bad, FIT)])
    with pytest.raises(InvalidInput):
        asr.transcribe_batch([AsrRequest(speech["lj"], FIT), AsrRequest(bad, FIT)])
    with pytest.raises(InvalidInput):
        asr.detect_language(bad)


def test_a_refused_batch_runs_nothing(speech: dict[str, np.ndarray]) -> None:
    fake = FakeAsr()
    with pytest.raises(InvalidInput):
        fake.transcribe_batch([AsrRequest(speech["lj"]), AsrRequest(np.zeros(0, np.float32))])
    assert fake.batches == []


def test_detect_language(asr: AsrModel, speech: dict[str, np.ndarray]) -> None:
    ranking = asr.detect_language(speech["ldc"])
    assert ranking and ranking[0][0] == "en"
    assert all(lang in asr.info.languages and 0.0 <= p <= 1.0 for lang, p in ranking)
    assert [p for _, p in ranking] == sorted((p for _, p in ranking), reverse=True)
    assert sum(p for _, p in ranking) <= 1.0 + 1e-3


@pytest.mark.parametrize("options", [DecodeOptions(language="xx"), DecodeOptions(temperature=1.5),
                                     DecodeOptions(beam_size=0), DecodeOptions(window="half")],
                         ids=["language", "temperature", "beam", "window"])
def test_bad_options_are_refused(asr: AsrModel, options: DecodeOptions) -> None:
    asr.check_options(FIT)
    with pytest.raises(InvalidInput):
        asr.check_options(options)
