"""The package's imports run one way (docs/architecture.md): no module imports a higher layer, and no two
modules import each other, directly or around a circle. Function-level imports count: a lazy import is
still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "voxserve"

LAYERS: dict[str, int] = {
    # the vocabulary every layer shares
    "types": 0, "errors": 0, "languages": 0, "stats": 0, "records": 0,
    "config": 1, "formats": 1, "subtitles": 1,
    # media and text handling, then models behind protocols
    "audio": 2, "text": 2,
    "backends": 3,
    # batching and scheduling, in this process or on Ray replicas
    "engine": 4,
    "distributed": 5,
    # the jobs: file recipes and shared building blocks, then live streams, then the voice agent
    "pipelines": 6,
    "streaming": 7,
    "agent": 8,
    # the front door
    "service": 9, "__init__": 9,
    # what stands on the front door: evaluation, the server, benchmarks, the command line
    "eval": 10, "jobs": 10,
    "server": 11,
    "bench": 12,
    "cli": 13,
}


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (function bodies included)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("voxserve"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("voxserve"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return {m for m in found if m in known and m != name}


def layer(module: str) -> tuple[str, int]:
    parts = module.split(".")
    area = parts[1] if len(parts) > 1 else "__init__"
    assert area in LAYERS, f"{module}: its area {area!r} has no layer in LAYERS (and docs/architecture.md)"
    return area, LAYERS[area]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for module, targets in graph().items():
        area, rank = layer(module)
        for target in targets:
            target_area, target_rank = layer(target)
            if target_rank > rank:
                upward.append(f"{module} ({area}, {rank}) -> {target} ({target_area}, {target_rank})")
    assert not upward, "\n".join(sorted(upward))


def test_no_import_cycles() -> None:
    edges = graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the path, 2 = done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_function_level_imports() -> None:
    """The graph is only as good as its parser: a lazy import inside a function is an edge."""
    edges = graph()
    assert "voxserve.service" in edges["voxserve"]  # the package's lazy __getattr__ import
    assert "voxserve.agent.build" in edges["voxserve.service"]  # imported inside Voxserve.agent()


def test_one_percentile_helper() -> None:
    """Percentiles are computed in one place (voxserve.stats); no module defines its own."""
    import re

    own = [str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py") if p.name != "stats.py"
           and re.search(r"^def percentile\(|np\.percentile|np\.quantile|statistics\.quantiles", p.read_text(), re.M)]
    assert not own, own
