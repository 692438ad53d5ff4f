"""The compatibility suite's client environments: one virtual environment per third-party client.

Each client pins its own ``openai`` (and more), so each lives in a venv of its own, built from the registry by
``python tests/compat/envs.py`` (``.ci/run`` runs it) from the pinned requirements in ``tests/compat/envs/``. A
venv is cached by the hash of its requirements under ``$VOXSERVE_COMPAT_ENVS`` (default
``~/.cache/voxserve/compat``): a rerun with the same pins builds nothing. ``envs/<name>.lock`` (when present)
constrains every dependency to the versions the suite was last run with, so a build elsewhere resolves the
same environment; ``python tests/compat/envs.py --lock`` rewrites the locks from the built venvs. A build that
fails leaves a ``FAILED`` file with pip's last lines, which the tests quote when they skip.

Stdlib only: it runs before (and outside) the project's own environment.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SPECS = Path(__file__).with_name("envs")
NAMES = tuple(sorted(p.stem for p in SPECS.glob("*.txt")))


def root() -> Path:
    """Where the environments are kept."""
    return Path(os.environ.get("VOXSERVE_COMPAT_ENVS") or Path.home() / ".cache" / "voxserve" / "compat")


def env_dir(name: str) -> Path:
    """The venv for client ``name``, named by its requirements' hash (new pins, new venv)."""
    lock = SPECS / f"{name}.lock"
    pins = (SPECS / f"{name}.txt").read_bytes() + (lock.read_bytes() if lock.exists() else b"")
    digest = hashlib.sha256(pins).hexdigest()[:12]
    return root() / f"{name}-{digest}"


def python(name: str) -> Path | None:
    """The environment's interpreter, or None when it is not (successfully) built."""
    d = env_dir(name)
    exe = d / "bin" / "python"
    return exe if (d / "OK").exists() and exe.exists() else None


def problem(name: str) -> str:
    """Why client ``name`` cannot be tested here (empty when it can)."""
    if python(name) is not None:
        return ""
    failed = env_dir(name) / "FAILED"
    if failed.exists():
        return f"the {name} environment failed to build: {failed.read_text()[-400:]}"
    return f"the {name} environment is not built: run `python tests/compat/envs.py`"


def build(name: str) -> bool:
    """Build (or keep) the venv for ``name``; True when it is usable."""
    d = env_dir(name)
    if (d / "OK").exists():
        print(f"{name}: cached at {d}")
        return True
    for stale in d.parent.glob(f"{name}-*"):  # this client's venvs for older pins
        shutil.rmtree(stale, ignore_errors=True)
    d.parent.mkdir(parents=True, exist_ok=True)
    print(f"{name}: building {d}", flush=True)
    steps = [
        [sys.executable, "-m", "venv", str(d)],
        [str(d / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "-r", str(SPECS / f"{name}.txt"), *(["-c", str(lock)] if (lock := SPECS / f"{name}.lock").exists() else [])],
    ]
    for step in steps:
        run = subprocess.run(step, capture_output=True, text=True)
        if run.returncode != 0:
            (d / "FAILED").write_text((run.stdout + run.stderr)[-4000:])
            print(f"{name}: FAILED ({' '.join(step[:3])} ...)\n{(run.stdout + run.stderr)[-1500:]}", flush=True)
            return False
    freeze = subprocess.run([str(d / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True, text=True)
    (d / "OK").write_text(freeze.stdout)
    return True


def write_lock(name: str) -> None:
    """``envs/<name>.lock`` from the venv built for the current pins (what the suite ran with)."""
    exe = python(name)
    if exe is None:
        raise SystemExit(problem(name))
    freeze = subprocess.run([str(exe), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True,
                            check=True).stdout
    (SPECS / f"{name}.lock").write_text(freeze)


def main(argv: list[str]) -> int:
    """Build the named environments (all by default); exit 1 when any failed. ``--lock``: write the locks."""
    if argv[:1] == ["--lock"]:
        for name in argv[1:] or NAMES:
            write_lock(name)
        return 0
    names = argv or list(NAMES)
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        print(f"unknown environments {unknown}; known: {list(NAMES)}", file=sys.stderr)
        return 2
    with ThreadPoolExecutor(max_workers=len(names)) as pool:  # mostly downloads: build them side by side
        results = list(pool.map(build, names))
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
