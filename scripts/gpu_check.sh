#!/usr/bin/env bash
# GPU readiness check (not part of CI): on a CUDA machine, run the kernel tests
# with the kernels compiled for the GPU (no TRITON_INTERPRET), then the GPU
# benchmark (benches/gpu_kernels.py); then the decode runtime's device path
# tests (tests/test_runtime_device.py, tests/test_runtime_lossless.py) and the
# decode-step benchmark (benches/gpu_runtime.py: the Triton resolver against
# the Rust one, a whole 61-layer step eagerly and as CUDA graphs). Results go
# to the directory given as $1 (default: gpu_results/): kernel_tests.txt,
# kernel_tests.xml (JUnit), gpu_kernels.json, gpu_kernels.md, runtime_tests.txt,
# runtime_tests.xml, gpu_runtime.json, gpu_runtime.md. Exit status: the
# tests' (0 all passed), 2 when there is no usable GPU.
#
# Needs a Python with torch (CUDA build), triton, pytest and hypothesis:
# .venv after `bash scripts/test.sh` (or `pip install '.[test,kernels]'`), or
# $PYTHON. When hisparse_rs is not installed there, the source tree is used
# (python/ on PYTHONPATH), which needs the extension built in place
# (`maturin develop --release`).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out_dir="${1:-gpu_results}"
py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi

unset TRITON_INTERPRET
if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: $py has no torch with a usable CUDA device; nothing to check" >&2
  exit 2
fi
# Only now: without a GPU there are no results, and no empty directory for them.
mkdir -p "$out_dir"
if ! "$py" -c 'import hisparse_rs' 2>/dev/null; then
  export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
fi
"$py" -c 'import torch, triton, hisparse_rs; print("gpu_check:", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)'

echo "== kernel tests on the GPU"
HYPOTHESIS_PROFILE=ci "$py" -m pytest tests/test_kernels_*.py -p no:cacheprovider -q \
  --junitxml "$out_dir/kernel_tests.xml" 2>&1 | tee "$out_dir/kernel_tests.txt"
tests_rc=${PIPESTATUS[0]}

echo "== benchmark"
"$py" benches/gpu_kernels.py --out "$out_dir"
bench_rc=$?

echo "== decode runtime (device path) tests on the GPU"
HYPOTHESIS_PROFILE=ci "$py" -m pytest tests/test_runtime_device.py tests/test_runtime_lossless.py \
  tests/test_bench_gpu_runtime.py -p no:cacheprovider -q --junitxml "$out_dir/runtime_tests.xml" 2>&1 \
  | tee "$out_dir/runtime_tests.txt"
runtime_rc=${PIPESTATUS[0]}

echo "== decode-step benchmark"
"$py" benches/gpu_runtime.py --out "$out_dir"
runtime_bench_rc=$?

echo "gpu_check: tests exit $tests_rc, benchmark exit $bench_rc, runtime tests exit $runtime_rc," \
  "runtime benchmark exit $runtime_bench_rc; results in $out_dir/"
for rc in "$tests_rc" "$runtime_rc" "$bench_rc" "$runtime_bench_rc"; do
  if [ "$rc" -ne 0 ]; then exit "$rc"; fi
done
exit 0
