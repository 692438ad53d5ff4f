"""The GPU benchmark's code path on the CPU: the random-weight Whisper builder, the fixed decode length, the
helper end to end on a tiny model, the CUDA check's comparison, and the cuBLAS search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from voxserve.backends.asr.ctranslate2_whisper import CTranslate2Whisper
from voxserve.backends.base import AsrRequest, DecodeOptions
from voxserve.bench.gpu import bench
from voxserve.bench.gpu.cublas import find_cublas12
from voxserve.bench.gpu.random_whisper import LARGE_V3_TURBO, TINY_RANDOM, build_random_whisper
from voxserve.distributed.planner import load_results
from voxserve.types import SAMPLE_RATE

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_whisper(tmp_path_factory.mktemp("tiny"), TINY_RANDOM, quantization="float32")


def test_turbo_shape_matches_the_published_model() -> None:
    assert LARGE_V3_TURBO.parameters() == pytest.approx(809e6, rel=0.005)  # openai/whisper-large-v3-turbo
    assert (LARGE_V3_TURBO.languages, LARGE_V3_TURBO.n_mels, LARGE_V3_TURBO.vocab) == (100, 128, 51866)


def test_random_model_loads_as_a_multilingual_whisper(tiny: Path) -> None:
    model = CTranslate2Whisper(tiny, "random")
    assert model.info.multilingual and len(model.info.languages) == 100 and "yue" in model.info.languages
    audio = np.random.default_rng(0).standard_normal(5 * SAMPLE_RATE).astype(np.float32) * 0.1
    (result,) = model.transcribe_batch([AsrRequest(audio, DecodeOptions(language="en"))])
    assert result.language == "en" and result.words  # word alignment runs on it too


def test_fixed_decode_length(tiny: Path) -> None:
    model = CTranslate2Whisper(tiny, "random")
    bench.fix_decode_length(model, 17)
    rng = np.random.default_rng(1)
    requests = [AsrRequest(rng.standard_normal(n * SAMPLE_RATE).astype(np.float32) * 0.1,
                           DecodeOptions(language="en", word_timestamps=False, max_new_tokens=40))
                for n in (3, 12, 29)]
    assert [len(r.tokens) for r in model.transcribe_batch(requests)] == [17, 17, 17]
    with pytest.raises(ValueError):
        bench.fix_decode_length(model, 300)


def test_helper_end_to_end_on_cpu(tmp_path: Path) -> None:
    code = bench.main(["--out", str(tmp_path / "out"), "--shape", "tiny", "--device", "cpu", "--compute-type",
                       "float32", "--model-dir", str(tmp_path / "model"), "--minutes", "1.5", "--batch-sizes", "2,4",
                       "--workers", "1", "--engine-windows", "4", "--decode-tokens", "12"])
    assert code == 0
    report = json.loads((tmp_path / "out" / "gpu_bench.json").read_text())
    assert [r["batch"] for r in report["engine"]] == [2, 4]
    assert all(r["tokens_per_window"] == 12 for r in report["engine"])
    pipeline = report["pipeline"]
    assert pipeline["audio_s"] == 90 and pipeline["chunks"] >= 3 and pipeline["rtfx"] > 0 and pipeline["vad_rtfx"] > 0
    (kind,) = load_results(tmp_path / "out" / "RESULTS.json").kinds
    assert kind.gpus == 1 and kind.asr_rtfx == pytest.approx(pipeline["rtfx"], rel=1e-2)


def test_cuda_check_compares_two_devices() -> None:
    result = bench.check_cuda("cpu", log=lambda _: None)  # the comparison itself, CPU against CPU
    assert result == {"encoder_rel_diff": 0.0, "tokens_equal": True, "passed": True}


def test_cublas_search_prefers_cuda12_and_links_cuda13(tmp_path: Path) -> None:
    cu12, cu13 = tmp_path / "a" / "nvidia" / "cublas" / "lib", tmp_path / "b" / "nvidia" / "cu13" / "lib"
    for folder, names in ((cu12, ("libcublas.so.12",)), (cu13, ("libcublas.so.13", "libcublasLt.so.13"))):
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_bytes(b"")
    shim = tmp_path / "shim"
    both = [str(tmp_path / "a"), str(tmp_path / "b")]
    assert find_cublas12(both, shim, try_system=False, toolkit=())[0] == str(cu12)
    folder, how = find_cublas12(both[1:], shim, try_system=False, toolkit=())
    assert folder == str(shim) and "CUDA 13" in how
    assert (shim / "libcublasLt.so.12").resolve() == (cu13 / "libcublasLt.so.13").resolve()
    assert find_cublas12([], shim, try_system=False, toolkit=())[0] is None


def test_run_sh_dry_run_on_cpu(tmp_path: Path) -> None:
    args = (f"--device cpu --compute-type float32 --shape tiny --model-dir {tmp_path / 'model'} --minutes 0.5 "
            "--batch-sizes 2 --workers 1 --engine-windows 2 --decode-tokens 8")
    done = subprocess.run(["bash", str(ROOT / "voxserve/bench/gpu/run.sh"), str(tmp_path / "out")],
                          env={**os.environ, "VOXSERVE_GPU_ARGS": args, "PYTHON": sys.executable}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "out" / "RESULTS.json").is_file() and "finished in" in done.stdout
