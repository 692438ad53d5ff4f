"""``voxserve bench diarize-process FILE...``: diarization as a user meets it, in whole processes.

Three commands run on the same files with the user's defaults, each a fresh process (imports, model
loading, decoding and everything else counted):

- ``voxserve diarize FILES... --quiet`` (RTTM on stdout, scored against the ``.rttm`` beside each file),
- ``voxserve transcribe FILES... --quiet --output-dir TMP`` (several files: one output each),
- ``voxserve transcribe --diarize FILES... --quiet --output-dir TMP``.

Each repeat runs the three in turn (their order rotates from repeat to repeat, so drift in the machine's
load hits all of them alike); the report has the median wall time of each, the two ratios the issue sets
targets for (diarize / transcribe <= 0.5, transcribe --diarize / transcribe <= 1.4), peak RSS and the
1-minute load average before every run.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxserve.audio import probe
from voxserve.bench.common import machine
from voxserve.bench.process_longform import Run, run_process

COMMANDS = ("diarize", "transcribe", "transcribe --diarize")
TARGETS = {"diarize": 0.5, "transcribe --diarize": 1.4}
"""The issue's ceilings on each command's wall time over plain transcription's."""


@dataclass(frozen=True)
class ProcessBenchConfig:
    """What to run: the files (all in one process per command), repeats, and extra CLI arguments for every
    command (engine flags such as ``--model``; empty: the user's defaults)."""

    files: tuple[Path, ...]
    repeats: int = 3
    extra_args: tuple[str, ...] = ()


def command_line(name: str, files: tuple[Path, ...], out_dir: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """The CLI invocation of one of :data:`COMMANDS` on ``files`` (outputs of transcribe go to ``out_dir``)."""
    base = [sys.executable, "-m", "voxserve.cli"]
    paths = [str(f) for f in files]
    if name == "diarize":
        return [*base, "diarize", *paths, "--quiet", *extra]
    flags = ["--diarize"] if name == "transcribe --diarize" else []
    return [*base, "transcribe", *flags, *paths, "--quiet", "--output-dir", str(out_dir), *extra]


def run_order(repeat: int) -> tuple[str, ...]:
    """The commands' order in repeat ``repeat`` (rotated by one each time)."""
    k = repeat % len(COMMANDS)
    return COMMANDS[k:] + COMMANDS[:k]


def bench_processes(config: ProcessBenchConfig, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Time the three commands ``config.repeats`` times each; a JSON-able report (see :func:`summarise`)."""
    runs: dict[str, list[Run]] = {name: [] for name in COMMANDS}
    before = machine()
    with tempfile.TemporaryDirectory(prefix="voxserve-bench-") as tmp:
        for r in range(config.repeats):
            for name in run_order(r):
                out = Path(tmp) / name.replace(" ", "_").replace("-", "")
                out.mkdir(exist_ok=True)
                run = run_process(command_line(name, config.files, out, config.extra_args))
                runs[name].append(run)
                log(f"repeat {r + 1} {name}: {run.wall_s:.2f} s (load {run.load_avg:.2f})")
    return summarise(config, runs, before)


def summarise(config: ProcessBenchConfig, runs: dict[str, list[Run]], before: dict[str, Any]) -> dict[str, Any]:
    """Medians, ratios to plain transcription, peak RSS, load averages, and the DER of the diarize runs' RTTM."""
    audio_s = sum(probe(f).duration_s or 0.0 for f in config.files)
    median = {name: statistics.median(r.wall_s for r in rs) for name, rs in runs.items()}
    base = median["transcribe"]
    report: dict[str, Any] = {
        "machine_before": before, "machine_after": machine(), "files": [str(f) for f in config.files],
        "audio_s": round(audio_s, 2), "repeats": config.repeats, "extra_args": list(config.extra_args),
        "commands": {},
    }
    for name, rs in runs.items():
        rss = [r.peak_rss_mb for r in rs if r.peak_rss_mb is not None]
        report["commands"][name] = {
            "wall_s": [round(r.wall_s, 3) for r in rs], "median_s": round(median[name], 3),
            "x_real_time": round(audio_s / median[name], 1) if median[name] else None,
            "ratio_to_transcribe": round(median[name] / base, 3) if base else None,
            "target_ratio": TARGETS.get(name), "peak_rss_mb": round(max(rss)) if rss else None,
            "load_avg": [round(r.load_avg, 2) for r in rs],
            "same_output_every_run": len({r.text for r in rs}) == 1,
        }
    report["der"] = rttm_der(config.files, runs["diarize"][0].text) if runs["diarize"] else None
    return report


def rttm_der(files: tuple[Path, ...], rttm_text: str) -> dict[str, float] | None:
    """Pooled DER (collars 0 and 0.25 s, overlap scored) of RTTM output against the ``.rttm`` beside each
    file (file ids are the files' stems, as ``voxserve diarize`` writes them)."""
    from voxserve.eval.der import pooled, read_rttm, score_der
    from voxserve.eval.diarization_eval import COLLARS

    with tempfile.NamedTemporaryFile("w", suffix=".rttm", delete=False, encoding="utf-8") as f:
        f.write(rttm_text)
    hyp = read_rttm(Path(f.name))
    Path(f.name).unlink()
    scored = []
    for path in files:
        ref_path = path.with_suffix(".rttm")
        if not ref_path.is_file():
            continue
        reference = [t for turns in read_rttm(ref_path).values() for t in turns]
        duration = probe(path).duration_s or 0.0
        scored.append({c: score_der(reference, hyp.get(path.stem, []), duration, c) for c in COLLARS})
    if not scored:
        return None
    return {f"collar_{c}": round(pooled(s[c] for s in scored).der, 4) for c in COLLARS}


def format_processes(report: dict[str, Any]) -> str:
    """The report as a text table."""
    from voxserve.formats import text_table

    rows = []
    for name, c in report["commands"].items():
        target = f"<= {c['target_ratio']}" if c["target_ratio"] is not None else "-"
        rows.append([f"voxserve {name}", c["median_s"], c["x_real_time"], c["ratio_to_transcribe"], target,
                     c["peak_rss_mb"] or "-", " ".join(f"{v:.2f}" for v in c["load_avg"])])
    lines = [text_table(["command", "median wall s", "x real time", "/ transcribe", "target", "peak RSS MB",
                         "load avg per run"], rows)]
    lines.append(f"{len(report['files'])} files, {report['audio_s']:.1f} s of audio, {report['repeats']} repeats, "
                 f"whole processes with user defaults{' + ' + ' '.join(report['extra_args']) if report['extra_args'] else ''}")
    if report["der"]:
        lines.append("pooled DER of the diarize runs: "
                     + ", ".join(f"{k} {100 * v:.1f}%" for k, v in report["der"].items()))
    m = report["machine_after"]
    lines.append(f"load average (1 min) before {report['machine_before']['load_1min']}, after {m['load_1min']}; "
                 f"{m['cpu']}, {m['cores']} cores")
    return "\n".join(lines)
