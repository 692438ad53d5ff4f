"""The embedded models' int8 copies against CTranslate2 quantizing the float16 models while loading them: the
same encoder output bit for bit, the same tokens and scores, on real speech."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxserve.audio import decode_audio
from voxserve.backends.asr.ctranslate2_whisper import CTranslate2Whisper
from voxserve.backends.asr.embedded import int8_dir, whisper_base_dir, whisper_tiny_en_dir
from voxserve.backends.asr.int8_store import MODEL_BIN, read_model

ctranslate2 = pytest.importorskip("ctranslate2")


@pytest.mark.parametrize("locate", [whisper_base_dir, whisper_tiny_en_dir], ids=["base", "tiny.en"])
def test_the_int8_copy_computes_what_ctranslate2_computes_from_the_float16_model(corpus: Path, locate) -> None:
    source = locate()
    copy = int8_dir(source)
    assert copy != source
    assert read_model(copy / MODEL_BIN).variables["decoder/embeddings/weight"].dtype == np.int8
    frontend = CTranslate2Whisper(source)
    clips = [decode_audio(corpus / "asr" / name)[: 14 * 16000] for name in ("mfa_crossword.flac", "mfa_theother.flac")]
    mel = ctranslate2.StorageView.from_array(np.stack([frontend._mel(a, "full") for a in clips]))
    start = [frontend._special["startoftranscript"]]
    if frontend.info.multilingual:
        start += [frontend._token("<|en|>"), frontend._special["transcribe"]]
    start.append(frontend._special["notimestamps"])
    outputs = []
    for weights in (source, copy):  # the float16 directory is quantized by CTranslate2 while it loads
        model = ctranslate2.models.Whisper(str(weights), device="cpu", compute_type="int8")
        encoded = np.asarray(model.encode(mel, to_cpu=True))
        results = model.generate(ctranslate2.StorageView.from_array(encoded), [start] * len(clips), return_scores=True)
        outputs.append((encoded, [r.sequences_ids[0] for r in results], [r.scores[0] for r in results]))
    (enc_a, ids_a, score_a), (enc_b, ids_b, score_b) = outputs
    np.testing.assert_array_equal(enc_a, enc_b)
    assert ids_a == ids_b and sum(map(len, ids_a)) > 10
    assert score_a == score_b


def test_a_directory_that_is_not_embedded_is_loaded_as_it_is(tmp_path: Path) -> None:
    assert int8_dir(tmp_path) == tmp_path
