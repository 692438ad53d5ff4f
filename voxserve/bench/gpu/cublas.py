"""Find cuBLAS 12 for the CUDA build of CTranslate2 (the PyPI wheel loads ``libcublas.so.12`` at run time).

``python -m voxserve.bench.gpu.cublas`` prints the folder to prepend to ``LD_LIBRARY_PATH`` (empty when the
system already has it) and says on stderr where it came from; it exits 1 when there is none. In order:

1. ``libcublas.so.12`` already loadable (a CUDA 12 toolkit on the library path);
2. the ``nvidia-cublas-cu12`` wheel (``pip install nvidia-cublas-cu12``) in a ``sys.path`` folder;
3. a compatibility folder of links ``libcublas.so.12 -> libcublas.so.13`` over a CUDA 13 cuBLAS (the
   ``nvidia-cublas`` 13 wheel's ``nvidia/cu13/lib``, or the toolkit's ``/usr/local/cuda/lib64``, which is what
   CUDA 13 images such as PyTorch's ship): supported by neither NVIDIA nor CTranslate2, so
   ``bench.py`` first checks that CUDA gives the CPU's numbers on a tiny model and refuses to measure if not.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterable
from pathlib import Path

SHIM_DIR = Path("/tmp/voxserve-cublas12")
TOOLKIT_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")


def _library_dirs(search: Iterable[str], toolkit: Iterable[str]) -> list[Path]:
    """Wheel folders (CUDA 12 layout ``nvidia/cublas/lib``, CUDA 13 layout ``nvidia/cu13/lib``), then toolkits."""
    found = [Path(p) / "nvidia" / sub / "lib" for p in search if p for sub in ("cublas", "cu13")]
    return [d for d in [*found, *(Path(t) for t in toolkit)] if d.is_dir()]


def find_cublas12(search: Iterable[str] | None = None, shim_dir: Path = SHIM_DIR, try_system: bool = True,
                  toolkit: Iterable[str] = TOOLKIT_DIRS) -> tuple[str | None, str]:
    """(folder for ``LD_LIBRARY_PATH`` or ``""`` when none is needed, how it was found); (None, why) if absent."""
    if try_system:
        try:
            ctypes.CDLL("libcublas.so.12")
            return "", "libcublas.so.12 is on the library path"
        except OSError:
            pass
    dirs = _library_dirs(sys.path if search is None else search, toolkit)
    for d in dirs:
        if (d / "libcublas.so.12").is_file():
            return str(d), f"cuBLAS 12 in {d}"
    for d in dirs:
        if (d / "libcublas.so.13").is_file() and (d / "libcublasLt.so.13").is_file():
            shim_dir.mkdir(parents=True, exist_ok=True)
            for name in ("libcublas", "libcublasLt"):
                link = shim_dir / f"{name}.so.12"
                if link.is_symlink() or link.exists():
                    link.unlink()
                link.symlink_to(d / f"{name}.so.13")
            return str(shim_dir), f"compatibility links to the CUDA 13 cuBLAS in {d} (checked before measuring)"
    return None, "no cuBLAS 12 (nor 13): pip install nvidia-cublas-cu12, or carry it (see docs/scale.md)"


def main() -> int:
    """Print the folder; the reason goes to stderr."""
    folder, how = find_cublas12()
    print(f"cuBLAS: {how}", file=sys.stderr)
    if folder is None:
        return 1
    print(folder)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
