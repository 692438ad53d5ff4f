"""Capacity planning: how many replicas, GPUs and MIG slices a target needs, from measured per-replica results.

The arithmetic is the seed's, per replica kind (one resource shape: a whole GPU, a MIG slice, N CPU cores):

* long files: RTFx = audio seconds / wall seconds, so ``replicas = ceil(target RTFx / (RTFx per replica x
  efficiency))``, where efficiency is the worst measured ``RTFx(n replicas) / (n x RTFx(1 replica))`` (1 when
  only one replica was measured: linear scaling is then an assumption, and the plan says so);
* streams: ``replicas = ceil(streams wanted / streams one replica holds)`` (live transcription at its latency
  target, or real-time speech synthesis);
* each workload gets replicas of its own (long files never delay live streams); GPUs = ceil(replicas x GPUs
  per replica), where MIG slices of different workloads share GPUs;
* cost relative to one GPU: GPUs per replica / streams per replica (a fraction of one GPU per stream), and
  GPU-hours per audio hour = GPUs per replica / effective RTFx for long files. CPU-only kinds count cores.

``RESULTS.json`` (schema ``voxserve.capacity/1``, documented in ``docs/scale.md``)::

    {"schema": "voxserve.capacity/1",
     "machine": {...free-form: where it was measured...},
     "replicas": [{"name": "h200-mig-1g", "model": "whisper-large-v3-turbo", "gpus": 0.142857, "cpus": 2,
                   "gpu": "NVIDIA H200", "mig_slices_per_gpu": 7,
                   "asr": {"rtfx": 50.0, "scaling": [{"replicas": 1, "rtfx": 50.0}, {"replicas": 2, "rtfx": 95.0}]},
                   "live": {"streams": 24, "latency_target_ms": 200},
                   "tts": {"streams": 16}}]}
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from voxserve.errors import InvalidInput

SCHEMA = "voxserve.capacity/1"
_EPS = 1e-9


@dataclass(frozen=True)
class ScalingPoint:
    """Throughput measured with ``replicas`` replicas of one kind working on the same file."""

    replicas: int
    rtfx: float


@dataclass(frozen=True)
class ReplicaKind:
    """What one replica of a resource shape achieved (the fields of one ``replicas[]`` entry).

    Attributes:
        name: unique name of the shape (``cpu-1thread``, ``h200``, ``h200-mig-1g``).
        gpus: GPUs one replica uses (1, a fraction, or 0 for CPU-only).
        cpus: CPU cores one replica uses.
        mig_slices_per_gpu: K when a replica is one of K MIG slices of a GPU (then ``gpus`` is 1/K).
        asr_rtfx: long-file RTFx of one replica. scaling: RTFx with several replicas on one file.
        live_streams: live streams one replica holds at ``live_latency_ms``.
        tts_streams: real-time synthesis streams one replica holds.
    """

    name: str
    gpus: float = 0.0
    cpus: float = 1.0
    model: str = ""
    gpu: str = ""
    mig_slices_per_gpu: int | None = None
    asr_rtfx: float | None = None
    scaling: tuple[ScalingPoint, ...] = ()
    live_streams: float | None = None
    live_latency_ms: float | None = None
    tts_streams: float | None = None

    @property
    def efficiency(self) -> float:
        """Worst measured RTFx(n) / (n x RTFx(1)), at most 1; 1 without multi-replica measurements."""
        if not self.asr_rtfx:
            return 1.0
        ratios = [p.rtfx / (p.replicas * self.asr_rtfx) for p in self.scaling if p.replicas > 1]
        return min([1.0, *ratios])

    @property
    def measured_scaling(self) -> bool:
        """Whether the efficiency comes from a measurement with more than one replica."""
        return any(p.replicas > 1 for p in self.scaling)


@dataclass(frozen=True)
class Results:
    """A parsed ``RESULTS.json``."""

    kinds: tuple[ReplicaKind, ...]
    machine: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Targets:
    """What to plan for (None = not asked)."""

    rtfx: float | None = None
    live_streams: int | None = None
    tts_streams: int | None = None

    def validate(self) -> None:
        """At least one positive target."""
        values = [v for v in (self.rtfx, self.live_streams, self.tts_streams) if v is not None]
        if not values:
            raise InvalidInput("give at least one of --target-rtf, --live-streams, --tts-streams")
        if any(v <= 0 for v in values):
            raise InvalidInput("targets must be positive")


@dataclass(frozen=True)
class WorkloadPlan:
    """One workload on one replica kind.

    Attributes:
        workload: ``long files``, ``live streams`` or ``tts streams``.
        target: RTFx or streams wanted. per_replica: what one replica gives (RTFx already times efficiency).
        replicas_exact: target / per_replica. replicas: rounded up. gpus / slices / cpus: their resources.
        cost: GPUs (or cores, for CPU-only kinds) per stream, or GPU-hours (core-hours) per audio hour.
    """

    workload: str
    target: float
    per_replica: float
    replicas_exact: float
    replicas: int
    gpus: float
    slices: int | None
    cpus: float
    cost: float
    cost_unit: str


@dataclass(frozen=True)
class Plan:
    """Every asked workload on one replica kind, and the totals (MIG slices of all workloads share GPUs)."""

    kind: ReplicaKind
    workloads: tuple[WorkloadPlan, ...]
    replicas: int
    gpus: int
    slices: int | None
    cpus: float
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return asdict(self)


# ----------------------------------------------------------------------------------------------- parsing


def load_results(path: Path) -> Results:
    """Read and validate a ``RESULTS.json``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidInput(f"{path} does not exist") from exc
    except ValueError as exc:
        raise InvalidInput(f"{path} is not JSON: {exc}") from exc
    return parse_results(data)


def parse_results(data: Any) -> Results:
    """Validate the ``voxserve.capacity/1`` structure (see the module doc)."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InvalidInput(f'results must be a JSON object with "schema": "{SCHEMA}"')
    entries = data.get("replicas")
    if not isinstance(entries, list) or not entries:
        raise InvalidInput('results need a non-empty "replicas" list')
    kinds = tuple(_kind(e, i) for i, e in enumerate(entries))
    names = [k.name for k in kinds]
    if len(set(names)) != len(names):
        raise InvalidInput("replica names must be unique")
    machine = data.get("machine", {})
    return Results(kinds, machine if isinstance(machine, dict) else {})


def _kind(entry: Any, index: int) -> ReplicaKind:
    where = f"replicas[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise InvalidInput(f"{where} needs a name")
    slices = entry.get("mig_slices_per_gpu")
    if slices is not None and (not isinstance(slices, int) or slices < 1):
        raise InvalidInput(f"{where}.mig_slices_per_gpu must be a positive integer")
    gpus = _number(entry.get("gpus", 1.0 / slices if slices else 0.0), f"{where}.gpus", allow_zero=True)
    if slices and abs(gpus * slices - 1.0) > 1e-3:
        raise InvalidInput(f"{where}: a MIG slice of {slices} per GPU is {1 / slices:.6f} GPUs, not {gpus}")
    asr, live, tts = (_section(entry, k, where) for k in ("asr", "live", "tts"))
    rtfx = _number(asr["rtfx"], f"{where}.asr.rtfx") if "rtfx" in asr else None
    scaling = tuple(_point(p, f"{where}.asr.scaling") for p in asr.get("scaling", []))
    if rtfx is None and scaling:
        rtfx = next((p.rtfx for p in scaling if p.replicas == 1), None)
    if not (rtfx or "streams" in live or "streams" in tts):
        raise InvalidInput(f"{where} has no measurement (asr.rtfx, live.streams or tts.streams)")
    return ReplicaKind(
        name=entry["name"], gpus=gpus, cpus=_number(entry.get("cpus", 1.0), f"{where}.cpus", allow_zero=True),
        model=str(entry.get("model", "")), gpu=str(entry.get("gpu", "")), mig_slices_per_gpu=slices,
        asr_rtfx=rtfx, scaling=scaling,
        live_streams=_number(live["streams"], f"{where}.live.streams") if "streams" in live else None,
        live_latency_ms=live.get("latency_target_ms"),
        tts_streams=_number(tts["streams"], f"{where}.tts.streams") if "streams" in tts else None,
    )


def _section(entry: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}.{key} must be an object")
    return value


def _point(p: Any, where: str) -> ScalingPoint:
    if not isinstance(p, dict) or not isinstance(p.get("replicas"), int) or p["replicas"] < 1:
        raise InvalidInput(f"{where} entries need an integer replicas >= 1 and an rtfx")
    return ScalingPoint(p["replicas"], _number(p.get("rtfx"), f"{where}.rtfx"))


def _number(value: Any, where: str, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"{where} must be a number")
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidInput(f"{where} must be {'non-negative' if allow_zero else 'positive'}")
    return float(value)


# ----------------------------------------------------------------------------------------------- planning


def plan(kind: ReplicaKind, targets: Targets) -> Plan:
    """The replicas and resources ``targets`` need on replicas of ``kind``."""
    targets.validate()
    lines: list[WorkloadPlan] = []
    notes: list[str] = []
    if targets.rtfx is not None:
        if kind.asr_rtfx is None:
            notes.append("no long-file measurement (asr.rtfx): long files not planned")
        else:
            per = kind.asr_rtfx * kind.efficiency
            lines.append(_line(kind, "long files", targets.rtfx, per, cost_of=1.0 / per))
            if not kind.measured_scaling:
                notes.append("long files: scaling over replicas not measured, assumed linear")
    for name, wanted, each in (
        ("live streams", targets.live_streams, kind.live_streams),
        ("tts streams", targets.tts_streams, kind.tts_streams),
    ):
        if wanted is None:
            continue
        if each is None:
            notes.append(f"no {name} measurement: not planned")
            continue
        lines.append(_line(kind, name, float(wanted), each, cost_of=1.0 / each))
    replicas = sum(w.replicas for w in lines)
    return Plan(
        kind=kind, workloads=tuple(lines), replicas=replicas, gpus=_whole_gpus(kind, replicas),
        slices=replicas if kind.mig_slices_per_gpu else None, cpus=replicas * kind.cpus, notes=tuple(notes),
    )


def plan_all(results: Results, targets: Targets, names: list[str] | None = None) -> list[Plan]:
    """One plan per measured replica kind (or per named one)."""
    kinds = [k for k in results.kinds if not names or k.name in names]
    if names and len(kinds) != len(set(names)):
        known = ", ".join(k.name for k in results.kinds)
        raise InvalidInput(f"unknown replica kind in {', '.join(names)}; the results have {known}")
    return [plan(k, targets) for k in kinds]


def _line(kind: ReplicaKind, workload: str, target: float, per_replica: float, *, cost_of: float) -> WorkloadPlan:
    exact = target / per_replica
    replicas = max(1, math.ceil(exact - _EPS))
    unit_resource = kind.gpus if kind.gpus else kind.cpus
    what = "GPU" if kind.gpus else "core"
    unit = f"{what}-hours per audio hour" if workload == "long files" else f"{what}s per stream"
    return WorkloadPlan(
        workload=workload, target=target, per_replica=per_replica, replicas_exact=exact, replicas=replicas,
        gpus=replicas * kind.gpus, slices=replicas if kind.mig_slices_per_gpu else None, cpus=replicas * kind.cpus,
        cost=unit_resource * cost_of, cost_unit=unit,
    )


def _whole_gpus(kind: ReplicaKind, replicas: int) -> int:
    if not kind.gpus:
        return 0
    if kind.mig_slices_per_gpu:
        return math.ceil(replicas / kind.mig_slices_per_gpu)
    return math.ceil(replicas * kind.gpus - _EPS)


# ----------------------------------------------------------------------------------------------- output


def format_plans(plans: list[Plan], targets: Targets) -> str:
    """Human-readable tables, one per replica kind."""
    return "\n\n".join(_format(p) for p in plans)


def _format(p: Plan) -> str:
    from voxserve.formats import text_table

    k = p.kind
    shape = _shape(k)
    rows = []
    for w in p.workloads:
        resources = _resources(k, w.replicas, w.gpus, w.slices, w.cpus)
        rows.append([w.workload, _num(w.target), _num(w.per_replica), f"{w.replicas_exact:.2f}", w.replicas,
                     resources, _cost(w)])
    rows.append(["total", "", "", "", p.replicas, _resources(k, p.replicas, p.gpus, p.slices, p.cpus), ""])
    head = f"replica kind {k.name}: {shape}" + (f", model {k.model}" if k.model else "")
    if k.asr_rtfx is not None and k.measured_scaling:
        head += f"\n  scaling efficiency {k.efficiency:.2f} (worst measured RTFx(n) / (n x RTFx(1)))"
    body = text_table(["workload", "target", "per replica", "exact", "replicas", "resources", "cost"], rows)
    notes = "".join(f"\n  note: {n}" for n in p.notes)
    return f"{head}\n{body}{notes}"


def _shape(k: ReplicaKind) -> str:
    if k.mig_slices_per_gpu:
        gpu = f"one MIG slice (1/{k.mig_slices_per_gpu} of a{' ' + k.gpu if k.gpu else ' GPU'})"
    elif k.gpus:
        gpu = f"{_num(k.gpus)} GPU{'' if k.gpus == 1 else 's'}" + (f" ({k.gpu})" if k.gpu else "")
    else:
        gpu = "no GPU"
    return f"{gpu}, {_num(k.cpus)} CPU core{'' if k.cpus == 1 else 's'} per replica"


def _resources(k: ReplicaKind, replicas: int, gpus: float, slices: int | None, cpus: float) -> str:
    if not k.gpus:
        return f"{_num(cpus)} cores"
    whole = _whole_gpus(k, replicas)
    if slices is not None:
        return f"{slices} slices = {whole} GPU{'' if whole == 1 else 's'}"
    return f"{whole} GPU{'' if whole == 1 else 's'}" + (f" ({_num(gpus)} used)" if abs(gpus - whole) > _EPS else "")


def _cost(w: WorkloadPlan) -> str:
    if w.workload == "long files":
        return f"{w.cost:.4g} {w.cost_unit}"
    per = 1.0 / w.cost
    unit = w.cost_unit.split("s per")[0]
    return f"1/{_num(per)} {unit} per stream ({w.cost:.4g})"


def _num(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 1e-6 else f"{x:.3g}" if x < 10 else f"{x:.1f}"
