"""The GPU benchmark (``run.sh`` calls it): long-file throughput of a large-v3-turbo-shaped Whisper on CUDA.

No real large weights exist here, so the model has random weights (:mod:`.random_whisper`) and every window
decodes exactly ``--decode-tokens`` tokens (end-of-text suppressed; 100 tokens per 30 s window is about what
English speech gives): the throughput is honest, the text is meaningless, and the hallucination guard is off
(random text fails every check). Steps, each timed and stopped early when ``--budget-s`` runs out:

1. check that CUDA gives the CPU's numbers on a tiny random model (catches a wrong cuBLAS, see ``run.sh``);
2. build (or reuse) the random large-v3-turbo model in float16;
3. engine: 30 s windows through the model's batcher at several batch sizes (model + features, no VAD);
4. pipeline: a long recording of the shipped test clips through the real long-file pipeline (decode, VAD and
   chunk planning, batched recognition, stitching), and the VAD's own speed on the same audio, since the
   single VAD thread bounds the pipeline.

Writes ``gpu_bench.json`` (everything) and ``RESULTS.json`` (a capacity entry for ``voxserve plan``) to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from voxserve.bench.gpu.random_whisper import LARGE_V3_TURBO, TINY_RANDOM, WhisperShape, build_random_whisper
from voxserve.types import SAMPLE_RATE

DATA = Path(__file__).resolve().parents[3] / "tests" / "data"
CLIPS = ("fw_jfk.flac", "mfa_ls_61-70968-0000.flac", "ami_dev00.flac")
WINDOW_S = 30


class FixedLength:
    """Wraps a ``ctranslate2.models.Whisper`` so that ``generate`` decodes exactly ``tokens`` tokens per window
    (CTranslate2 decodes at most ``max_length / 2`` new tokens; end-of-text is suppressed)."""

    def __init__(self, inner: Any, eot: int, tokens: int) -> None:
        self.inner, self.eot, self.tokens = inner, eot, tokens

    def generate(self, features: Any, prompts: Any, **kwargs: Any) -> Any:
        """Generate with the fixed length."""
        kwargs.update(max_length=2 * self.tokens, suppress_tokens=[-1, self.eot])
        return self.inner.generate(features, prompts, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def fix_decode_length(backend: Any, tokens: int) -> None:
    """Make a :class:`~voxserve.backends.asr.ctranslate2_whisper.CTranslate2Whisper` decode ``tokens`` per window."""
    if not 1 <= tokens <= 224:
        raise ValueError("a Whisper window decodes 1 to 224 tokens")
    backend._model = FixedLength(backend._model, backend._special["endoftext"], tokens)  # noqa: SLF001


def long_audio(minutes: float, pause_s: float = 0.8) -> np.ndarray:
    """The shipped English clips, repeated with pauses, to ``minutes`` of audio."""
    from voxserve.audio import decode_audio

    clips = [decode_audio(DATA / name) for name in CLIPS]
    pause = np.full(int(pause_s * SAMPLE_RATE), 1e-4, np.float32)
    parts, total, target = [], 0, int(minutes * 60 * SAMPLE_RATE)
    while total < target:
        for clip in clips:
            parts += [clip, pause]
            total += len(clip) + len(pause)
    return np.concatenate(parts)[:target]


def check_cuda(device: str, log: Any) -> dict[str, Any]:
    """Encoder output and greedy tokens of a tiny random model on ``device`` vs the CPU (float32 both)."""
    import tempfile

    import ctranslate2

    with tempfile.TemporaryDirectory() as tmp:
        path = build_random_whisper(Path(tmp) / "tiny", TINY_RANDOM, seed=1, quantization="float32")
        mel = np.random.default_rng(0).standard_normal((2, TINY_RANDOM.n_mels, 3000)).astype(np.float32)
        out = {}
        for dev in ("cpu", device):
            model = ctranslate2.models.Whisper(str(path), device=dev, compute_type="float32")
            enc = np.asarray(model.encode(ctranslate2.StorageView.from_array(mel), to_cpu=True))
            prompt = [[50258, 50259, 50360, 50364]] * 2
            res = model.generate(ctranslate2.StorageView.from_array(mel), prompt, max_length=32, beam_size=1)
            out[dev] = (enc, [r.sequences_ids[0] for r in res])
    diff = float(np.max(np.abs(out["cpu"][0] - out[device][0])) / (np.max(np.abs(out["cpu"][0])) + 1e-9))
    same_tokens = out["cpu"][1] == out[device][1]
    log(f"cuda check: encoder relative difference {diff:.2e}, greedy tokens {'equal' if same_tokens else 'differ'}")
    return {"encoder_rel_diff": diff, "tokens_equal": same_tokens, "passed": diff < 1e-3}


def engine_rtfx(model: Any, windows: list[np.ndarray], batch: int, workers: int, words: bool) -> dict[str, Any]:
    """30 s windows through one MicroBatcher: RTFx of model + features alone."""
    from voxserve.backends.base import AsrRequest, DecodeOptions
    from voxserve.engine.batcher import BatcherConfig, MicroBatcher

    batcher: MicroBatcher[Any, Any] = MicroBatcher(
        model.transcribe_batch, BatcherConfig(max_batch_size=batch, workers=workers, max_wait_ms=5, offline_wait_ms=50),
        name="engine",
    )
    options = DecodeOptions(language="en", word_timestamps=words)
    requests = [AsrRequest(w, options) for w in windows]
    try:
        asyncio.run(batcher.submit_many(requests[: batch * workers]))  # warm-up at this batch size
        started = time.perf_counter()
        results = asyncio.run(batcher.submit_many(requests))
        wall = time.perf_counter() - started
    finally:
        batcher.close()
    tokens = sum(len(r.tokens) for r in results)
    audio = len(windows) * WINDOW_S
    return {"batch": batch, "workers": workers, "windows": len(windows), "wall_s": wall, "rtfx": audio / wall,
            "tokens_per_s": tokens / wall, "tokens_per_window": tokens / len(windows)}


def pipeline_rtfx(model_dir: Path, args: argparse.Namespace, batch: int, audio: np.ndarray) -> dict[str, Any]:
    """The long-file pipeline end to end on the same model, and the VAD's own speed on the same audio."""
    from voxserve.audio.encode import encode_audio
    from voxserve.backends.registry import load_vad
    from voxserve.config import load_settings
    from voxserve.engine.pool import AsrService
    from voxserve.service import Voxserve

    flac = encode_audio(audio, SAMPLE_RATE, "flac")
    settings = load_settings(
        asr={"model": str(model_dir), "device": args.device, "compute_type": args.compute_type,
             "workers": args.workers, "max_batch_size": batch, "offline_wait_ms": 50.0},
        guard={"enabled": False},
    )
    vox = Voxserve(settings)
    try:
        service = vox.asr()
        assert isinstance(service, AsrService)  # settings without [ray]: the in-process engine
        fix_decode_length(service.model, args.decode_tokens)
        options = vox.long_options(language="en", word_timestamps=args.words)
        options = replace(options, decode=replace(options.decode, max_new_tokens=args.decode_tokens))
        asyncio.run(vox.atranscribe(encode_audio(audio[: 120 * SAMPLE_RATE], SAMPLE_RATE, "flac"), options))
        started = time.perf_counter()
        transcript = asyncio.run(vox.atranscribe(flac, options))
        wall = time.perf_counter() - started
    finally:
        vox.close()
    vad = load_vad(settings.chunking.vad_fresh_after_s)  # the VAD the pipeline ran
    started = time.perf_counter()
    vad.probabilities(audio)
    vad_s = time.perf_counter() - started
    seconds = len(audio) / SAMPLE_RATE
    return {"audio_s": seconds, "wall_s": wall, "rtfx": seconds / wall, "chunks": transcript.stats.chunks,
            "batch": batch, "workers": args.workers, "vad_s": vad_s, "vad_rtfx": seconds / vad_s,
            "words": args.words}


def describe_gpu() -> str:
    """``nvidia-smi``'s name of the first GPU, when there is one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def main(argv: list[str] | None = None) -> int:
    """Run the steps and write the results."""
    p = argparse.ArgumentParser(prog="python -m voxserve.bench.gpu.bench", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for gpu_bench.json and RESULTS.json")
    p.add_argument("--model-dir", default="/tmp/voxserve-random-turbo", help="where the random model is built")
    p.add_argument("--shape", choices=("turbo", "tiny"), default="turbo", help="tiny: the same code path in seconds")
    p.add_argument("--device", default="cuda")
    p.add_argument("--compute-type", default="float16")
    p.add_argument("--decode-tokens", type=int, default=100, help="tokens decoded per window (fixed)")
    p.add_argument("--batch-sizes", default="16,32,64")
    p.add_argument("--workers", type=int, default=2, help="concurrent batches (CTranslate2 inter_threads)")
    p.add_argument("--engine-windows", type=int, default=256, help="30 s windows per engine measurement")
    p.add_argument("--minutes", type=float, default=60.0, help="length of the pipeline's recording")
    p.add_argument("--words", action="store_true", help="word timestamps on (off by default)")
    p.add_argument("--budget-s", type=float, default=420.0, help="skip what would start after this many seconds")
    p.add_argument("--skip-check", action="store_true", help="do not compare CUDA with the CPU first")
    args = p.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f} s] {message}", file=sys.stderr, flush=True)

    import ctranslate2

    report: dict[str, Any] = {
        "note": "random weights, fixed decode length: throughput only, the text is meaningless",
        "gpu": describe_gpu(), "ctranslate2": ctranslate2.__version__, "python": platform.python_version(),
        "cuda_devices": ctranslate2.get_cuda_device_count(), "cpu_cores": os.cpu_count(), "args": vars(args),
    }
    log(f"{report['gpu'] or 'no nvidia-smi'}; ctranslate2 {report['ctranslate2']}, {report['cuda_devices']} CUDA device(s)")
    if args.device == "cuda" and not report["cuda_devices"]:
        log("no CUDA device visible to CTranslate2")
        return 2
    if not args.skip_check and args.device != "cpu":
        report["cuda_check"] = check_cuda(args.device, log)
        if not report["cuda_check"]["passed"]:
            (out_dir / "gpu_bench.json").write_text(json.dumps(report, indent=2))
            log("CUDA results differ from the CPU's: not measuring (see run.sh about cuBLAS)")
            return 3
    shape: WhisperShape = LARGE_V3_TURBO if args.shape == "turbo" else TINY_RANDOM
    model_dir = Path(args.model_dir)
    if not (model_dir / "model.bin").is_file():
        started = time.perf_counter()
        build_random_whisper(model_dir, shape, quantization="float16" if args.device != "cpu" else "float32")
        report["build_s"] = time.perf_counter() - started
        log(f"built {args.shape} ({shape.parameters() / 1e6:.0f} M weights) in {report['build_s']:.1f} s")
    results = run_steps(model_dir, args, report, log, t0)
    (out_dir / "gpu_bench.json").write_text(json.dumps(report, indent=2))
    if results is not None:
        (out_dir / "RESULTS.json").write_text(json.dumps(results, indent=2))
    log(f"done; wrote {out_dir}")
    return 0


def run_steps(model_dir: Path, args: argparse.Namespace, report: dict[str, Any], log: Any, t0: float) -> Any:
    """Engine at each batch size, then the pipeline at the best one; returns the capacity document."""
    from voxserve.backends.asr.ctranslate2_whisper import CTranslate2Whisper
    from voxserve.backends.base import AsrLoadOptions
    from voxserve.bench.common import machine
    from voxserve.distributed.planner import SCHEMA

    started = time.perf_counter()
    model = CTranslate2Whisper(model_dir, "random-large-v3-turbo", AsrLoadOptions(
        device=args.device, compute_type=args.compute_type, workers=args.workers))
    fix_decode_length(model, args.decode_tokens)
    log(f"loaded on {args.device} ({args.compute_type}) in {time.perf_counter() - started:.1f} s")
    audio = long_audio(args.minutes)
    step = WINDOW_S * SAMPLE_RATE
    windows = [audio[i * step: (i + 1) * step] for i in range(min(args.engine_windows, len(audio) // step))]
    report["engine"] = []
    for batch in (int(b) for b in args.batch_sizes.split(",") if b.strip()):
        if time.perf_counter() - t0 > args.budget_s:
            log(f"budget spent: batch {batch} skipped")
            break
        row = engine_rtfx(model, windows, batch, args.workers, args.words)
        report["engine"].append(row)
        log(f"engine batch {batch} x {args.workers} workers: RTFx {row['rtfx']:.0f}, {row['tokens_per_s']:.0f} tokens/s")
    del model
    if not report["engine"]:
        return None
    best = max(report["engine"], key=lambda r: r["rtfx"])
    if time.perf_counter() - t0 > args.budget_s:
        log("budget spent: pipeline skipped")
    else:
        row = pipeline_rtfx(model_dir, args, best["batch"], audio)
        report["pipeline"] = row
        log(f"pipeline {row['audio_s'] / 60:.0f} min: RTFx {row['rtfx']:.0f} ({row['chunks']} chunks, batch "
            f"{row['batch']}); the VAD alone runs at {row['vad_rtfx']:.0f}x on one thread")
    rtfx = report.get("pipeline", best)["rtfx"]
    return {
        "schema": SCHEMA, "machine": {**machine(), "gpu": report["gpu"]},
        "replicas": [{
            "name": "gpu-random-large-v3-turbo", "model": "large-v3-turbo shape, random weights",
            "gpus": 1, "cpus": os.cpu_count() or 1, "gpu": report["gpu"].split(",")[0],
            "asr": {"rtfx": round(rtfx, 1)},
            "measured": {"decode_tokens_per_window": args.decode_tokens, "engine_best": best,
                         "pipeline": report.get("pipeline")},
        }],
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
