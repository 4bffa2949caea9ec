#!/usr/bin/env bash
# Build .gpu/, everything the GPU check needs on a bare device machine (Python
# 3.12, the image's torch and triton, no Rust, no package registry), in under
# 60 MiB, so one device call carries it (`carry: [".gpu"]`; DOCS_gpu.md):
#
#   .gpu/wheels/hisparse_rs-*-cp310-abi3-manylinux_*.whl   built here (maturin, release)
#   .gpu/wheels/sgl_flash_mla-1.0.0-*.whl                  FlashMLA's sparse decode (PyPI)
#   .gpu/src/{scripts,benches,tests}/...                   what scripts/gpu_check.sh runs
#   .gpu/MANIFEST.txt                                      files, sizes, sha256, tags, commit
#
# The image already has pytest, hypothesis and numpy (the device's KINDS.md), so no
# other wheel travels. Needs maturin (installed with pip when missing) and PyPI
# (once: sgl-flash-mla is kept in .gpu-cache/ between builds). Fails when the folder
# exceeds 60 MiB, or when the wheel's platform tag needs a glibc newer than 2.35
# (the oldest base the device image can have: its Python 3.12.3 with CUDA 13.0).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bundle=.gpu
cache=.gpu-cache  # beside the bundle, so it does not travel
limit_mib=60
flashmla=sgl-flash-mla==1.0.0
py="${PYTHON:-python3}"

rm -rf "$bundle/wheels" "$bundle/src" "$bundle/MANIFEST.txt"
mkdir -p "$bundle/wheels" "$cache"

# hisparse_rs: abi3 (PyO3 abi3-py310), so the device's CPython 3.12 loads it. maturin
# checks the .so against the manylinux policies (auditwheel rules) and tags it with
# the oldest glibc its symbols allow: built on this Debian 12 (glibc 2.36) that is
# manylinux_2_34 (Rust's std takes GLIBC_2.34 symbols). No zig or old sysroot is
# needed while the device's glibc is >= 2.34; gpu_check.sh reports it if not.
# (Through `pip wheel` maturin's PEP 517 backend tags it plain linux_x86_64, unchecked: so
# maturin itself, pyproject.toml's build requirement, installed where it is missing.)
if [ -n "${HISPARSE_RS_WHEEL:-}" ]; then
  # scripts/test.sh builds the wheel once for every venv and this bundle.
  cp "$HISPARSE_RS_WHEEL" "$bundle/wheels/"
elif command -v maturin >/dev/null; then
  maturin build --release --out "$bundle/wheels" --quiet
else
  "$py" -m pip install --quiet 'maturin>=1.9,<2'
  "$py" -m maturin build --release --out "$bundle/wheels" --quiet
fi
wheel=$(ls "$bundle"/wheels/hisparse_rs-*.whl)
case "$wheel" in
  *-cp310-abi3-manylinux_2_17_x86_64*|*-cp310-abi3-manylinux_2_2[0-9]_x86_64*|*-cp310-abi3-manylinux_2_3[0-5]_x86_64*) ;;
  *) echo "gpu_bundle: $wheel is not a cp310-abi3 manylinux (glibc <= 2.35) x86_64 wheel" >&2; exit 1 ;;
esac

# FlashMLA: the wheel for CPython 3.12 on x86_64 manylinux, no dependencies (it
# declares torch>=2.14.1; the device has 2.11, and gpu_check.sh reports whether it loads).
if ! ls "$cache"/sgl_flash_mla-1.0.0-*.whl >/dev/null 2>&1; then
  "$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$cache" "$flashmla"
fi
cp "$cache"/sgl_flash_mla-1.0.0-*.whl "$bundle/wheels/"

# What the check runs, from the bundle (so what runs on the device is what was rehearsed).
files=(
  scripts/gpu_check.sh
  benches/gpu_kernels.py benches/gpu_runtime.py benches/gpu_summary.py
  tests/conftest.py tests/kernel_cases.py
  tests/test_kernels_fp8.py tests/test_kernels_gather.py tests/test_kernels_decode_indices.py
  tests/test_kernels_decode.py tests/test_kernels_resolver.py tests/test_runtime_device.py
  tests/test_runtime_lossless.py
)
for f in "${files[@]}"; do
  mkdir -p "$bundle/src/$(dirname "$f")"
  cp "$f" "$bundle/src/$f"
done
# pytest's settings for the copied tests (the repo's pyproject.toml does not travel inside).
printf '[pytest]\naddopts = -ra --strict-markers\n' > "$bundle/src/pytest.ini"

{
  echo "hisparse_rs GPU bundle: built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD)" \
    "$(git diff --quiet HEAD 2>/dev/null && echo clean || echo '+ uncommitted changes')"
  echo "glibc symbols the hisparse_rs extension needs (newest): $(unzip -p "$wheel" 'hisparse_rs/_core*.so' \
    > "$cache/_core.so" && objdump -T "$cache/_core.so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
  (cd "$bundle" && find wheels src -type f | sort | while read -r f; do
    printf '%10d  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "$f"
  done)
} > "$bundle/MANIFEST.txt"
rm -f "$cache/_core.so"

size=$(du -sb "$bundle" | cut -f1)
echo "gpu_bundle: $bundle is $((size / 1024)) KiB (limit ${limit_mib} MiB):"
cat "$bundle/MANIFEST.txt"
if [ "$size" -gt $((limit_mib * 1024 * 1024)) ]; then
  echo "gpu_bundle: $bundle exceeds ${limit_mib} MiB" >&2
  exit 1
fi
