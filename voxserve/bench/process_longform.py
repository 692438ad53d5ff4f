"""Long files as a user meets them: whole processes, user defaults, the peer in the same run.

Each system is a fresh process per run (model loading, decoding and everything else counted): voxserve's
CLI (``voxserve transcribe FILE --format txt``, or ``srt`` for word timestamps) against a script that loads
faster-whisper's ``WhisperModel`` (the same model directory, int8) and runs ``BatchedInferencePipeline``
(``beam_size=1``, ``language="en"``, each batch size given), in interleaved rounds. Wall time is the median
over repeats; peak RSS comes from ``/usr/bin/time`` when it exists; the load average is printed with every
run, since these timings are only as good as the machine is quiet.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxserve.audio import probe
from voxserve.eval.wer import score_wer

PEER_SCRIPT = """
import sys
from faster_whisper import BatchedInferencePipeline, WhisperModel
model_dir, path, batch, words = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
model = WhisperModel(model_dir, device="cpu", compute_type="int8", local_files_only=True)
segments, _ = BatchedInferencePipeline(model).transcribe(path, batch_size=batch, beam_size=1, language="en",
                                                          word_timestamps=words)
print(" ".join(s.text.strip() for s in segments))
"""


@dataclass(frozen=True)
class Run:
    """One timed process."""

    wall_s: float
    peak_rss_mb: float | None
    text: str
    load_avg: float


def _srt_text(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.strip() and not ln.strip().isdigit() and "-->" not in ln]
    return " ".join(lines)


def run_process(cmd: list[str], timeout_s: float = 3600) -> Run:
    """Run ``cmd`` to completion; its stdout, wall time and (via /usr/bin/time) peak RSS."""
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    full = [timer, "-f", "VOXSERVE_MAXRSS_KB=%M", *cmd] if timer else cmd
    load = os.getloadavg()[0]
    started = time.perf_counter()
    r = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wall = time.perf_counter() - started
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {r.stderr[-2000:]}")
    found = re.search(r"VOXSERVE_MAXRSS_KB=(\d+)", r.stderr)
    return Run(wall, int(found.group(1)) / 1024 if found else None, r.stdout, load)


def compare(files: list[Path], model_dir: str, batch_sizes: tuple[int, ...] = (8, 16), repeats: int = 3,
            words: bool = False, log: Callable[[str], None] = print,
            run: Callable[[list[str]], Run] = run_process) -> dict[str, Any]:
    """Time voxserve's CLI and faster-whisper's batched pipeline on each file; a JSON-able report.

    The runs are interleaved: each of ``repeats`` rounds runs every system once, the order turning by one
    system a round, so a shared machine's drift (15-20 % within minutes on the VMs these figures come from)
    falls on every system alike rather than on whichever ran its repeats last. ``ratio_to_best_peer`` is the
    best peer's median over voxserve's; ``ratio_per_round`` gives the same ratio within each round."""
    fmt = "srt" if words else "txt"
    systems: dict[str, Callable[[Path], list[str]]] = {
        "voxserve": lambda f: [sys.executable, "-m", "voxserve.cli", "transcribe", str(f), "--format", fmt, "--quiet"],
    }
    def peer(bs: int) -> Callable[[Path], list[str]]:
        return lambda f: [sys.executable, "-c", PEER_SCRIPT, model_dir, str(f), str(bs), "1" if words else "0"]

    for bs in batch_sizes:
        systems[f"faster-whisper batched bs{bs}"] = peer(bs)
    names = list(systems)
    report: dict[str, Any] = {"words": words, "repeats": repeats, "order": "interleaved", "files": []}
    for f in files:
        audio_s = probe(f).duration_s or 0.0
        ref = f.with_suffix(".txt").read_text() if f.with_suffix(".txt").is_file() else None
        runs: dict[str, list[Run]] = {name: [] for name in names}
        for i in range(repeats):
            for name in names[i % len(names):] + names[: i % len(names)]:
                timed = run(systems[name](f))
                runs[name].append(timed)
                log(f"{f.name} round {i + 1} {name}: {timed.wall_s:.1f} s, load {timed.load_avg:.2f}")
        rows: dict[str, dict[str, Any]] = {}
        for name in names:
            done = runs[name]
            text = done[0].text if not words or name != "voxserve" else _srt_text(done[0].text)
            wall = statistics.median(r.wall_s for r in done)
            rss = [r.peak_rss_mb for r in done if r.peak_rss_mb is not None]
            rows[name] = {
                "wall_s": round(wall, 2), "rtfx": round(audio_s / wall, 1) if wall else None,
                "runs_s": [round(r.wall_s, 2) for r in done],
                "peak_rss_mb": round(max(rss)) if rss else None,
                "wer": round(score_wer(ref, text).wer, 4) if ref else None,
                "load_avg": [round(r.load_avg, 2) for r in done],
                "same_text_every_run": len({r.text for r in done}) == 1,
            }
        peers = [n for n in names if n != "voxserve"]
        best = min((float(rows[n]["wall_s"]) for n in peers), default=None)
        per_round = [round(min(runs[n][i].wall_s for n in peers) / runs["voxserve"][i].wall_s, 2)
                     for i in range(repeats)] if peers else []
        report["files"].append({"file": str(f), "audio_s": round(audio_s, 1), "systems": rows,
                                "ratio_to_best_peer": round(best / rows["voxserve"]["wall_s"], 2) if best else None,
                                "ratio_per_round": per_round})
    return report


def format_report(report: dict[str, Any]) -> str:
    """A plain-text table per file."""
    out = []
    for f in report["files"]:
        out.append(f"{f['file']} ({f['audio_s']} s audio, word timestamps: {report['words']})")
        out.append(f"  {'system':34} {'wall s':>8} {'RTFx':>7} {'WER':>7} {'peak RSS MB':>12}  load avg  same text")
        for name, r in f["systems"].items():
            wer = f"{100 * r['wer']:.1f}%" if r["wer"] is not None else "-"
            out.append(f"  {name:34} {r['wall_s']:8.1f} {r['rtfx']:7.1f} {wer:>7} {r['peak_rss_mb'] or '-':>12}  "
                       f"{r['load_avg']}  {r['same_text_every_run']}")
        out.append(f"  voxserve vs the best peer: {f['ratio_to_best_peer']}x (medians); round by round: "
                   f"{f['ratio_per_round']}")
    return "\n".join(out)
