"""Key terms: parsing, the glossary prompt, the copy check, and how the long-file recipe uses them (fake
recogniser: orchestration only; the real model's gains are in tests/integration/test_keyterms_real.py)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from voxserve.backends.base import DecodeOptions
from voxserve.backends.fakes import FakeAsr, FakeVad
from voxserve.engine.batcher import BatcherConfig, MicroBatcher
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import AsrService
from voxserve.errors import InvalidInput
from voxserve.pipelines.long_asr import LongAsrOptions, LongFileTranscriber
from voxserve.text.keyterms import MAX_TERM_CHARS, copies_glossary, glossary_prompt, parse_keyterms
from voxserve.types import SAMPLE_RATE, Transcript

TERMS = ("Montreal Forced Aligner", "CTranslate2")


def test_parse_accepts_repeats_json_and_comma_lists() -> None:
    assert parse_keyterms(["Voxserve", '["CTranslate2", "Piper"]', "Silero, voxserve ,  ", " Piper "]) == (
        "Voxserve", "CTranslate2", "Piper", "Silero")
    assert parse_keyterms([]) == ()


@pytest.mark.parametrize("bad", ['["a", 3]', "[not json", "x" * (MAX_TERM_CHARS + 1), ",".join(map(str, range(101)))])
def test_parse_refuses_malformed_terms(bad: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_keyterms([bad])
    assert err.value.param == "keyterms"


def test_glossary_leads_the_prompt_and_the_prompt_keeps_its_end() -> None:
    assert glossary_prompt(TERMS, "Earlier text.") == "Glossary: Montreal Forced Aligner, CTranslate2. Earlier text."
    assert glossary_prompt((), None) is None
    short = glossary_prompt(("Piper",), "one two three four", max_chars=24)
    assert short == "Glossary: Piper. ee four" and len(short) == 24
    assert glossary_prompt((), "abcdef", max_chars=3) == "def"


@pytest.mark.parametrize(("text", "copied"), [
    ("Glossary: Montreal Forced Aligner, CTranslate2.", True),
    ("Montreal Forced Aligner, CTranslate2", True),  # two terms in the glossary's order
    ("Montreal Forced Aligner.", True),  # nothing but a term: what silence decodes to
    ("glossary", True),
    ("This is the other Montreal Forced Aligner.", False),
    ("We run CTranslate2 and the Montreal Forced Aligner.", False),  # not in the glossary's order
    ("", False),
])
def test_copies_glossary(text: str, copied: bool) -> None:
    assert copies_glossary(text, TERMS) is copied


def _run(asr: FakeAsr, audio: np.ndarray, options: LongAsrOptions) -> Transcript:
    batcher = MicroBatcher(asr.transcribe_batch, BatcherConfig(max_batch_size=4, max_wait_ms=2, offline_wait_ms=10,
                                                               workers=1), name="fake")
    executor = BlockingExecutor()
    try:
        return asyncio.run(LongFileTranscriber(AsrService(asr, batcher), executor, FakeVad).run(audio, options))
    finally:
        batcher.close()
        executor.shutdown()


def _speech(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return np.concatenate([np.zeros(SAMPLE_RATE, np.float32), (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32),
                           np.zeros(SAMPLE_RATE, np.float32)])


def test_a_result_that_says_the_glossary_is_decoded_again_without_it() -> None:
    def parrot(audio: np.ndarray, options: DecodeOptions) -> str:
        return "Montreal Forced Aligner, CTranslate2." if options.prompt else "the words heard"

    asr = FakeAsr(script=parrot)
    transcript = _run(asr, _speech(3.0), LongAsrOptions(keyterms=TERMS))
    prompts = [r.options.prompt for batch in asr.batches for r in batch]
    assert prompts == ["Glossary: Montreal Forced Aligner, CTranslate2.", None]
    assert transcript.text == "the words heard"


def test_key_terms_stay_when_the_result_hears_them() -> None:
    asr = FakeAsr(script=lambda audio, options: "so CTranslate2 it is" if options.prompt else "so see translate it is")
    assert _run(asr, _speech(3.0), LongAsrOptions(keyterms=TERMS)).text == "so CTranslate2 it is"


def test_language_per_segment_keeps_each_chunks_language_among_the_allowed() -> None:
    asr = FakeAsr(script=lambda audio, options: "hallo welt", language="de")
    options = LongAsrOptions(decode=DecodeOptions(allowed_languages=("fr", "es")), language_per_segment=True)
    transcript = _run(asr, _speech(3.0), options)
    assert transcript.language == "fr" and [s.language for s in transcript.segments] == ["fr"]
    single = _run(asr, _speech(3.0), LongAsrOptions())
    assert single.language == "de" and [s.language for s in single.segments] == [None]


def test_the_facade_refuses_allowed_languages_with_a_given_language() -> None:
    from voxserve.service import Voxserve

    vox = Voxserve()
    try:
        with pytest.raises(InvalidInput) as err:
            vox.long_options(language="de", allowed_languages=("en",))
        assert err.value.param == "allowed_languages"
        options = vox.long_options(language="auto-per-segment", allowed_languages=("en", "de"), keyterms=["A, B"])
        assert options.language_per_segment and options.decode.language is None
        assert options.decode.allowed_languages == ("en", "de") and options.keyterms == ("A", "B")
        assert options.chunking.max_join_gap_s < vox.long_options().chunking.max_join_gap_s
    finally:
        vox.close()
