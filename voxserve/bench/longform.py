"""Long-file benchmark: voxserve vs faster-whisper (sequential and batched) in one process, same model.

Every system transcribes the same files from disk (decoding included) with the same model directory,
compute type, beam size, language setting and word timestamps; each is warmed up first, then timed over
``repeats`` runs (median reported). A lower bound is measured too: encoding every voxserve chunk once with
all cores busy, with no decoding at all.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voxserve.backends.base import DecodeOptions
from voxserve.bench.common import Timing, machine, timed
from voxserve.errors import InvalidInput
from voxserve.eval.normalize import normalize_english
from voxserve.eval.wer import score_wer
from voxserve.formats import text_table
from voxserve.service import Voxserve


@dataclass(frozen=True)
class LongformConfig:
    """What to run."""

    files: tuple[Path, ...]
    repeats: int = 3
    batch_sizes: tuple[int, ...] = (4, 8, 16)
    beam_size: int = 1
    language: str | None = None
    word_timestamps: bool = True
    model: str | None = None


def _reference(path: Path) -> str | None:
    ref = path.with_suffix(".txt")
    return ref.read_text(encoding="utf-8") if ref.is_file() else None


def _wer(texts: list[str], refs: list[str | None]) -> float | None:
    pairs = [(r, t) for r, t in zip(refs, texts) if r is not None]
    if not pairs:
        return None
    errors = words = 0
    for ref, hyp in pairs:
        s = score_wer(ref, hyp, normalizer=normalize_english)
        errors += s.substitutions + s.deletions + s.insertions
        words += s.ref_words
    return errors / max(1, words)


class LongformBench:
    """Runs the comparison; :meth:`run` returns a JSON-able report."""

    def __init__(self, vox: Voxserve, config: LongformConfig, log: Callable[[str], None] = print) -> None:
        self.vox = vox
        self.config = config
        self.log = log
        model = getattr(vox.asr(config.model), "model", None)  # the in-process engine's model
        self.model_dir = str(getattr(model, "directory", ""))
        self.compute_type = str(getattr(model, "compute_type", "int8"))

    def _peer_model(self) -> Any:
        from faster_whisper import WhisperModel

        return WhisperModel(
            self.model_dir, device="cpu", compute_type=self.compute_type, cpu_threads=os.cpu_count() or 1,
            local_files_only=True,
        )

    def _systems(self) -> dict[str, Callable[[Path], str]]:
        from faster_whisper import BatchedInferencePipeline

        c = self.config
        peer = self._peer_model()
        batched = BatchedInferencePipeline(model=peer)
        common = dict(beam_size=c.beam_size, word_timestamps=c.word_timestamps, language=c.language)

        def fw_sequential(path: Path) -> str:
            segments, _ = peer.transcribe(str(path), vad_filter=True, **common)
            return " ".join(s.text.strip() for s in segments)

        def fw_batched(bs: int) -> Callable[[Path], str]:
            def run(path: Path) -> str:
                segments, _ = batched.transcribe(str(path), batch_size=bs, **common)
                return " ".join(s.text.strip() for s in segments)
            return run

        options = self.vox.long_options(language=c.language, word_timestamps=c.word_timestamps)

        def voxserve(path: Path) -> str:
            return asyncio.run(self.vox.atranscribe(path, options, model=c.model)).text

        systems: dict[str, Callable[[Path], str]] = {"faster-whisper sequential": fw_sequential}
        for bs in c.batch_sizes:
            systems[f"faster-whisper batched bs{bs}"] = fw_batched(bs)
        systems["voxserve"] = voxserve
        return systems

    def run(self) -> dict[str, Any]:
        """Warm up and time every system; return the report."""
        c = self.config
        refs = [_reference(p) for p in c.files]
        from voxserve.audio import probe

        audio_s = sum(probe(p).duration_s or 0.0 for p in c.files)
        timings: list[Timing] = []
        for name, fn in self._systems().items():
            fn(c.files[0])  # warm-up
            t = Timing(name)
            texts: list[str] = []
            for _ in range(c.repeats):
                wall, texts = timed(lambda fn=fn: [fn(p) for p in c.files])  # type: ignore[misc]
                t.walls.append(wall)
            t.extra["wer"] = _wer(texts, refs)
            timings.append(t)
            self.log(f"{name}: median {t.median:.2f} s over {len(t.walls)} runs")
        bound = self.encoder_bound()
        return self._report(timings, audio_s, bound)

    def encoder_bound(self) -> float:
        """Seconds to run the encoder once over every voxserve chunk of the files, in the window of its
        first attempt, on all workers."""
        from voxserve.audio import decode_audio
        from voxserve.backends.registry import load_vad
        from voxserve.engine.pool import AsrService
        from voxserve.pipelines.chunking import plan_chunks
        from voxserve.pipelines.long_asr import attempt_options

        service = self.vox.asr(self.config.model)
        if not isinstance(service, AsrService):
            raise InvalidInput("the encoder-only bound needs the in-process engine (not Ray replicas)")
        model = service.model
        options = self.vox.long_options()
        windows: list[tuple[np.ndarray, DecodeOptions]] = []  # each chunk with its first attempt's window
        for path in self.config.files:
            audio = decode_audio(path)
            vad = load_vad(self.vox.settings.chunking.vad_fresh_after_s)
            probs = vad.probabilities(audio)
            for plan in plan_chunks(probs, len(audio), options.chunking):
                w = np.concatenate([audio[p.file_start : p.file_end] for p in plan.pieces])
                windows.append((w, attempt_options(len(w), options.decode, options)[0]))
        encode = getattr(model, "encode_only", None)
        if encode is None:
            raise InvalidInput(f"{type(model).__name__} has no encoder-only mode")
        workers = self.vox.settings.asr.workers
        parts = [windows[i::workers] for i in range(workers)]

        def encode_all(ws: list[tuple[np.ndarray, DecodeOptions]]) -> None:
            for w, first in ws:
                encode(w, first)

        def run_all() -> None:
            threads = [threading.Thread(target=encode_all, args=(ws,)) for ws in parts]
            for th in threads:
                th.start()
            for th in threads:
                th.join()

        return timed(run_all)[0]

    def _report(self, timings: list[Timing], audio_s: float, bound_s: float) -> dict[str, Any]:
        rows = [
            {"system": t.name, "wall_s": t.median, "rtfx": audio_s / t.median, "wer": t.extra["wer"], "runs": t.walls}
            for t in timings
        ]
        ours = next(r for r in rows if r["system"] == "voxserve")
        peers = [r for r in rows if r["system"] != "voxserve"]
        best = max(peers, key=lambda r: r["rtfx"])
        batched = [r for r in peers if "batched" in r["system"]]
        best_batched = max(batched, key=lambda r: r["rtfx"]) if batched else best
        return {
            "machine": machine(),
            "audio_s": audio_s,
            "files": [str(p) for p in self.config.files],
            "settings": {
                "beam_size": self.config.beam_size, "word_timestamps": self.config.word_timestamps,
                "language": self.config.language, "compute_type": self.compute_type,
                "workers": self.vox.settings.asr.workers, "max_batch_size": self.vox.settings.asr.max_batch_size,
                "guard": self.vox.settings.guard.enabled,
            },
            "systems": rows,
            "encoder_bound": {"wall_s": bound_s, "rtfx": audio_s / bound_s if bound_s > 0 else None},
            "best_peer": best["system"],
            "ratio_vs_best_peer": ours["rtfx"] / best["rtfx"],
            "ratio_vs_best_batched": ours["rtfx"] / best_batched["rtfx"],
        }


def format_longform(report: dict[str, Any]) -> str:
    """The report as a table plus the headline ratios."""
    rows = [
        [r["system"], r["wall_s"], r["rtfx"], "-" if r["wer"] is None else f"{100 * r['wer']:.2f}%"]
        for r in report["systems"]
    ]
    b = report["encoder_bound"]
    rows.append(["encoder-only lower bound", b["wall_s"], b["rtfx"] or 0.0, "-"])
    m = report["machine"]
    head = f"{report['audio_s']:.1f} s of audio; {m['cpu']}, {m['cores']} cores, load {m['load_1min']}"
    return "\n".join([
        head,
        text_table(["system", "wall s (median)", "RTFx", "WER"], rows),
        f"voxserve / best peer ({report['best_peer']}): {report['ratio_vs_best_peer']:.2f}x; "
        f"vs best batched: {report['ratio_vs_best_batched']:.2f}x",
    ])
