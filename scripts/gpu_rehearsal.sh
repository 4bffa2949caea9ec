#!/usr/bin/env bash
# CPU rehearsal of the GPU check, on the lowest torch and triton the kernels
# support (pyproject.toml's `kernels` extra; the device image's own versions), so
# an API the older Triton lacks fails here and not on a lent GPU:
#
# 1. a venv (.venv-gpu-rehearsal, kept between runs) with torch==2.11.0 and
#    triton==3.6.0 from PyPI (the CUDA wheels: about 4.7 GB, about 2 minutes;
#    through $UV, uv, when it is set, as scripts/test.sh does),
#    numpy, pytest and hypothesis, and nothing of this project;
# 2. the bundle (scripts/gpu_bundle.sh) installed --no-index --no-deps, exactly as
#    on the device, and `scripts/gpu_check.sh --bundle .gpu --rehearse`: every
#    part of the device run under TRITON_INTERPRET=1 at small shapes, FlashMLA's
#    extensions loaded against a libcuda stub, the CUDA-only parts reported as
#    "not run on CPU";
# 3. tests/test_kernels_aot.py on that Triton: every kernel compiles for sm_90 and
#    sm_100 with its ptxas, without spills, and the committed table's rows match.
#
# Results: gpu_results/rehearsal/ (summary.md first). Needs a built bundle: run
# scripts/gpu_bundle.sh first (scripts/test.sh does).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=${GPU_REHEARSAL_VENV:-.venv-gpu-rehearsal}
out=${GPU_REHEARSAL_OUT:-gpu_results/rehearsal}
# The lowest supported versions (pyproject.toml `kernels`). numpy < 2.4: Triton 3.6's
# interpreter converts 1-element arrays to ints, which numpy 2.4 made an error; the
# compiled kernels (the device) do not use the interpreter.
pins=(torch==2.11.0 triton==3.6.0 "numpy>=1.24,<2.4" pytest hypothesis)
stamp="$venv/.hisparse-pins"

[ -d .gpu/wheels ] || { echo "gpu_rehearsal: no .gpu/ bundle; run scripts/gpu_bundle.sh first" >&2; exit 1; }
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${pins[*]}" ]; then
  t0=$(date +%s)
  rm -rf "$venv"
  python3 -m venv "$venv"
  if [ -n "${UV:-}" ]; then
    # scripts/test.sh passes its uv: the CUDA wheels this venv shares with the
    # others are hardlinked from uv's cache, not a second copy (test.sh, venv_install).
    "$UV" pip install --quiet --python "$venv/bin/python" "${pins[@]}"
  else
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    PIP_NO_CACHE_DIR=1 "$venv/bin/python" -m pip install --quiet --retries 10 --timeout 60 "${pins[@]}"
  fi
  echo "${pins[*]}" > "$stamp"
  echo "gpu_rehearsal: $venv installed in $(($(date +%s) - t0)) s ($(du -sh "$venv" | cut -f1))"
fi
"$venv/bin/python" -c 'import torch, triton; print("gpu_rehearsal: torch", torch.__version__, "triton", triton.__version__)'

rc=0
PYTHON="$PWD/$venv/bin/python" bash scripts/gpu_check.sh --bundle .gpu --rehearse --out "$out" || rc=$?

# The AOT proof on this Triton, against the bundle's wheel (installed as gpu_check does).
site=$(mktemp -d /tmp/hisparse_aot_site.XXXXXX)
"$venv/bin/python" -m pip install --quiet --no-index --no-deps --no-compile --target "$site" .gpu/wheels/hisparse_rs-*.whl
(cd tests && PYTHONPATH="$site" "../$venv/bin/python" -m pytest test_kernels_aot.py -p no:cacheprovider -q) || rc=1
rm -rf "$site"
exit "$rc"
