"""Two backend properties the replicas rely on: features do not depend on the BLAS thread count (Ray workers
run with OMP_NUM_THREADS=1, the head does not), and chunks with different token caps share decoder calls."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxserve.backends.asr.ctranslate2_whisper import CTranslate2Whisper, _LogMel
from voxserve.backends.base import AsrRequest, DecodeOptions
from voxserve.bench.gpu.random_whisper import TINY_RANDOM, build_random_whisper
from voxserve.types import SAMPLE_RATE

FEATURES = """
import hashlib, numpy as np
from voxserve.backends.asr.ctranslate2_whisper import _LogMel
audio = (np.random.default_rng(0).standard_normal(30 * 16000) * 0.1).astype(np.float32)
print(hashlib.sha256(_LogMel(80)(audio).tobytes()).hexdigest())
"""


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_features_do_not_depend_on_blas_threads(threads: str) -> None:
    audio = (np.random.default_rng(0).standard_normal(30 * SAMPLE_RATE) * 0.1).astype(np.float32)
    here = hashlib.sha256(_LogMel(80)(audio).tobytes()).hexdigest()
    env = {**os.environ, "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
    there = subprocess.run([sys.executable, "-c", FEATURES], env=env, capture_output=True, text=True, timeout=120,
                           check=True).stdout.strip()
    assert there == here


def test_features_match_faster_whisper() -> None:
    from faster_whisper.feature_extractor import FeatureExtractor

    audio = (np.random.default_rng(1).standard_normal(7 * SAMPLE_RATE) * 0.1).astype(np.float32)
    ours, theirs = _LogMel(80)(audio), FeatureExtractor(feature_size=80)(audio, padding=0)
    assert ours.shape == theirs.shape and np.max(np.abs(ours - theirs)) < 1e-5


def test_chunks_with_different_caps_share_one_decoder_call(tmp_path: Path) -> None:
    model = CTranslate2Whisper(build_random_whisper(tmp_path / "tiny", TINY_RANDOM, quantization="float32"), "random")
    calls: list[int] = []
    inner = model._model

    class Spy:
        def generate(self, features: Any, prompts: Any, **kwargs: Any) -> Any:
            calls.append(len(prompts))
            return inner.generate(features, prompts, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

    model._model = Spy()
    rng = np.random.default_rng(2)
    requests = [AsrRequest(rng.standard_normal(n * SAMPLE_RATE).astype(np.float32) * 0.1,
                           DecodeOptions(language="en", word_timestamps=False, max_new_tokens=cap))
                for n, cap in ((22, 40), (25, 50), (29, 60))]
    results = model.transcribe_batch(requests)
    assert calls == [3] and len(results) == 3
