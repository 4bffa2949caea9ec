#!/usr/bin/env bash
# Run every test from a fresh clone: builds the wheel through maturin (the
# pyproject backend) into .venv, then Rust formatting, lints and tests, Python
# lints, type checks, stub check and pytest; then the vLLM plugin's tests
# against vLLM 0.33.0 in .venv-vllm. Fails on any failure or on no tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*"; }

# Disk: the two venvs hold ~15 GB once installed (torch and CUDA wheels twice:
# the kernels run on torch 2.15, vLLM pins 2.14). pip keeps no second copy of
# the wheels in its cache, and the free space is printed first, so a full disk
# reads as one (a run once failed with ENOSPC in the first pip install).
export PIP_NO_CACHE_DIR=1
df -h . | sed 's/^/disk: /'

# venv_install VENV SPEC: create VENV if needed and pip install SPEC into it.
# torch and CUDA come as GB-sized wheels; a dropped connection must not fail
# the run, so pip resumes downloads and the whole install is retried.
venv_install() {
  local venv=$1 spec=$2 attempt
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  for attempt in 1 2 3; do
    if "$venv/bin/python" -m pip install --quiet --retries 10 --resume-retries 10 --timeout 60 "$spec"; then
      return 0
    fi
    echo "pip install $spec into $venv failed (attempt $attempt)" >&2
    if [ "$attempt" = 3 ]; then
      df -h . >&2
      exit 1
    fi
    sleep 10
  done
}

step "python environment (.venv)"
# The kernels extra (torch, triton, numpy) too: every kernel test runs in CI
# (torch from PyPI brings ~4 GB of CUDA wheels).
venv_install .venv ".[test,kernels]"
# shellcheck disable=SC1091
. .venv/bin/activate

step "rust: fmt, clippy, tests"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked

step "python: ruff, mypy --strict, stubtest"
ruff check python tests benches
ruff format --check python tests benches
mypy python/hisparse_rs benches
python -m mypy.stubtest hisparse_rs._core

# Without a GPU the Triton kernels run under Triton's interpreter on CPU tensors
# (tests/conftest.py decides the same way; it must be set before triton loads).
if [ -z "${TRITON_INTERPRET:-}" ]; then
  TRITON_INTERPRET="$(python -c 'import torch; print(0 if torch.cuda.is_available() else 1)')"
  export TRITON_INTERPRET
fi

step "pytest (hypothesis profile: ${HYPOTHESIS_PROFILE:-ci}, TRITON_INTERPRET=${TRITON_INTERPRET})"
# Run from tests/ against the installed wheel, not the source tree. tests/vllm
# needs vLLM, which has its own venv: the next step.
HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" python -m pytest tests -p no:cacheprovider --ignore=tests/vllm

step "GPU check rehearsal: the device bundle on the lowest supported torch / triton (CPU)"
# The .gpu/ bundle a lent GPU runs (DOCS: scripts/gpu_check.sh), then its whole code
# path under the interpreter in a venv of torch 2.11 / triton 3.6 (~4.7 GB, ~2 min to
# install) and the AOT compile on that Triton (scripts/gpu_rehearsal.sh).
bash scripts/gpu_bundle.sh
bash scripts/gpu_rehearsal.sh

step "vLLM 0.33.0: the plugin and the differential test (.venv-vllm)"
# vLLM pins torch 2.14.0 (the kernels above run on 2.15), so the plugin's
# tests get their own venv, made from this project's files: the vllm extra
# (vllm==0.33.0) and the test extra (vLLM brings ~7 GB of wheels: torch and CUDA).
deactivate
venv_install .venv-vllm ".[test,vllm]"
# One pytest session, one vLLM import; gcc builds the no-device driver stub
# (tests/vllm/README.md).
(cd tests/vllm && HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" ../../.venv-vllm/bin/python -m pytest . -p no:cacheprovider)
