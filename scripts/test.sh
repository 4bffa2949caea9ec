#!/usr/bin/env bash
# Run every test from a fresh clone: builds the wheel through maturin (the
# pyproject backend) into .venv, then Rust formatting, lints and tests, Python
# lints, type checks, stub check and pytest; then the vLLM plugin's tests
# against vLLM 0.33.0 in .venv-vllm, and the SGLang tests against SGLang
# 0.5.23's own argument code in .venv-sglang. Fails on any failure, and on a pytest run
# that collects no tests (pytest's exit 5).
#
#   bash scripts/test.sh            every step, in order (CI: .ci/run)
#   bash scripts/test.sh --list     the steps' ids
#   bash scripts/test.sh ID...      only these steps (e.g. `cargo_test pytest`;
#                                   later steps expect the venvs the first made)
#
# Each step prints "== [i/N] what" when it starts and "-- what: 1m02s" when it
# ends; the run ends with every step's time and the total. To add a step,
# write a function and one add_step line below.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export PIP_NO_CACHE_DIR=1 # pip builds the wheel and the bundle; uv installs (see venv_install)
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"

# --- helpers -----------------------------------------------------------------

duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# uv installs every venv's packages (pip only builds the wheel and makes the
# venvs). Disk is why: the four venvs hold four torch/CUDA stacks (the kernels
# run on torch 2.15, the GPU rehearsal on 2.11, vLLM pins 2.14.0, SGLang
# 2.14.1), ~30 GB through pip, and a CI run once failed with ENOSPC in the
# last one. uv unpacks each wheel once into its cache (.uv-cache, inside the
# checkout so that it is on the venvs' filesystem) and hardlinks it into every
# venv that takes it, so a CUDA wheel two venvs share is on disk once and no
# second copy waits in a download folder. The free space is printed at every
# step's end. The version is pinned: the install must be the same every run.
UV_VERSION=0.13.9
export UV_CACHE_DIR="$PWD/.uv-cache" UV_LINK_MODE=hardlink UV_HTTP_TIMEOUT=120 UV_HTTP_RETRIES=10
export UV_NO_PROGRESS=1 # a CI log, not a terminal
# The system's CA store, as pip has it (PIP_CERT on these machines), not uv's
# bundled roots: a registry reached through a proxy with its own CA still verifies.
export UV_NATIVE_TLS=1
uv_bin() {
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  if ! .venv/bin/uv --version 2>/dev/null | grep -qx "uv $UV_VERSION\( .*\)\?"; then
    .venv/bin/python -m pip install --quiet "uv==$UV_VERSION" >&2
  fi
  echo "$PWD/.venv/bin/uv"
}

# uv_log: uv's report (stderr) with its per-package " + name==version" lines
# counted, not shown: "Resolved/Prepared/Installed N packages", each large
# download and any error say what happened.
uv_log() {
  awk '
    /^ [+~-] / { n++; next }
    { print "  uv: " $0; fflush() }
    END { if (n) print "  uv: " n " packages installed or removed" }
  '
}

# venv_install VENV SPEC...: create VENV if needed and install SPEC (one
# requirement, or uv pip's arguments: `-r FILE`, `--no-deps NAME`) into it.
# torch and CUDA come as GB-sized wheels; a dropped connection must not fail
# the run, so uv retries each request and the whole install is retried.
venv_install() {
  local venv=$1 attempt uv
  shift
  uv=$(uv_bin)
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
  fi
  for attempt in 1 2 3; do
    # pipefail: the pipeline fails when uv does.
    if "$uv" pip install --python "$venv/bin/python" "$@" 2>&1 >/dev/null | uv_log; then
      return 0
    fi
    echo "uv pip install $* into $venv failed (attempt $attempt)" >&2
    if [ "$attempt" = 3 ]; then
      df -h . >&2
      exit 1
    fi
    sleep 10
  done
}

# .venv's tools first on PATH, for the steps after it (the venv need not exist yet).
use_venv() {
  export VIRTUAL_ENV="$PWD/$1"
  export PATH="$VIRTUAL_ENV/bin:$PATH"
}

# --- the steps -----------------------------------------------------------------

# add_step ID NAME [DETAIL]: the step runs the function step_ID; NAME is what
# the log and the summary call it, DETAIL what the start line adds.
STEP_IDS=()
STEP_NAMES=()
STEP_DETAILS=()
add_step() {
  STEP_IDS+=("$1")
  STEP_NAMES+=("$2")
  STEP_DETAILS+=("${3:-}")
}

# ci_wheel: the path of this checkout's wheel, built once per run (maturin, a
# release build: minutes on 2 cores) into target/ci-wheel/ and installed into
# every venv and the GPU bundle, instead of one build per `pip install .`.
# maturin itself comes from .venv (pyproject.toml's build requirement).
ci_wheel() {
  local dir=target/ci-wheel
  if ! ls "$dir"/hisparse_rs-*.whl >/dev/null 2>&1; then
    if [ ! -x .venv/bin/python ]; then
      python3 -m venv .venv
    fi
    .venv/bin/python -m pip install --quiet 'maturin>=1.9,<2' >&2
    .venv/bin/python -m maturin build --release --locked --out "$dir" --quiet >&2
  fi
  ls "$dir"/hisparse_rs-*.whl
}

add_step venv "python environment .venv" "the wheel (maturin, a release build, once for every venv) and the test + kernels extras (torch, triton: ~4 GB the first time)"
# The whole run needs ~22 GB of disk (README.md, "Disk"): say so at once when
# it is short, not with ENOSPC twenty minutes in.
NEED_GB=22
step_venv() {
  df -h . | sed 's/^/  disk: /'
  local free_gb
  free_gb=$(($(df -Pk . | awk 'NR == 2 { print $4 }') / 1048576))
  if [ "$free_gb" -lt "$NEED_GB" ]; then
    echo "  disk: WARNING: ${free_gb} GB free; a run from a fresh clone needs about ${NEED_GB} GB (the venvs' torch and CUDA wheels)" >&2
  fi
  rm -rf target/ci-wheel # this checkout's sources, not a previous run's
  local wheel
  wheel=$(ci_wheel)
  echo "  wheel: $wheel"
  # The kernels extra (torch, triton, numpy) too: every kernel test runs in CI.
  # --reinstall --no-deps first: the same version number as an older build.
  venv_install .venv --reinstall --no-deps "$wheel"
  venv_install .venv "$wheel[test,kernels]"
}

add_step cargo_fmt "cargo fmt --check"
step_cargo_fmt() { cargo fmt --all -- --check; }

add_step clippy "cargo clippy -D warnings"
step_clippy() { cargo clippy --workspace --all-targets --locked -- -D warnings; }

add_step cargo_test "cargo test" "a dot per test (a failure prints in full)"
# RUST_BACKTRACE=0: a failing property test panics inside proptest's runner,
# whose backtrace says nothing about the case (its message and the minimal
# input print either way). Rerun one test with RUST_BACKTRACE=1 for a stack.
step_cargo_test() { RUST_BACKTRACE=0 cargo test --workspace --locked -- --quiet; }

add_step ruff "ruff check + format --check" "python tests benches scripts"
# The tools run as `python -m`: the venv's own, even where its console
# scripts live elsewhere (a venv layered on another through a .pth file).
step_ruff() {
  python -m ruff check python tests benches scripts
  python -m ruff format --check python tests benches scripts
}

add_step mypy "mypy --strict" "python/hisparse_rs benches"
step_mypy() { python -m mypy python/hisparse_rs benches; }

add_step stubtest "stubtest hisparse_rs._core"
step_stubtest() { python -m mypy.stubtest hisparse_rs._core; }

add_step pytest "pytest tests" "all but tests/vllm and tests/sglang; the kernels under Triton's interpreter when there is no GPU"
step_pytest() {
  # Without a GPU the Triton kernels run under Triton's interpreter on CPU
  # tensors (tests/conftest.py decides the same way; it must be set before
  # triton loads).
  if [ -z "${TRITON_INTERPRET:-}" ]; then
    TRITON_INTERPRET="$(python -c 'import torch; print(0 if torch.cuda.is_available() else 1)')"
    export TRITON_INTERPRET
  fi
  echo "  hypothesis profile: $HYPOTHESIS_PROFILE, TRITON_INTERPRET=$TRITON_INTERPRET"
  # From the repository root against the installed wheel (tests/conftest.py
  # puts nothing of python/ on sys.path). tests/vllm needs vLLM and
  # tests/sglang SGLang, each in its own venv: the last steps. Exit 5 (no
  # tests collected) fails the run.
  python -m pytest tests -p no:cacheprovider --ignore=tests/vllm --ignore=tests/sglang --durations=5
}

add_step gpu_rehearsal "GPU check rehearsal (CPU)" "the device bundle on the lowest supported torch 2.11 / triton 3.6 (~4.7 GB venv the first time)"
step_gpu_rehearsal() {
  # The .gpu/ bundle a lent GPU runs (docs/kernels.md, "GPU check"), then its
  # whole code path under the interpreter in a venv of the device image's
  # torch / triton, and the AOT compile on that Triton (scripts/gpu_rehearsal.sh).
  HISPARSE_RS_WHEEL="$(ci_wheel)" bash scripts/gpu_bundle.sh
  UV="$(uv_bin)" bash scripts/gpu_rehearsal.sh
}

add_step venv_vllm "python environment .venv-vllm" "vLLM 0.33.0 with its torch 2.14 (~7 GB the first time) and the test extra"
step_venv_vllm() {
  # vLLM pins torch 2.14.0 (the kernels above run on 2.15), so the plugin's
  # tests get their own venv, made from this project's files: the vllm extra
  # (vllm==0.33.0) and the test extra.
  local wheel
  wheel=$(ci_wheel)
  venv_install .venv-vllm --reinstall --no-deps "$wheel"
  venv_install .venv-vllm "$wheel[test,vllm]"
}

add_step pytest_vllm "pytest tests/vllm" "the plugin and the differential test (1,000 configurations) against vLLM 0.33.0"
step_pytest_vllm() {
  # One pytest session, one vLLM import; gcc builds the no-device driver stub
  # (tests/vllm/README.md).
  (cd tests/vllm && ../../.venv-vllm/bin/python -m pytest . -p no:cacheprovider --durations=5)
}

add_step venv_sglang "python environment .venv-sglang" "SGLang 0.5.23 --no-deps, torch 2.14.1 and the few packages its argument code imports (~6 GB the first time), the test extra"
step_venv_sglang() {
  # SGLang's METADATA asks for ~80 packages, mostly GPU kernels its argument
  # code never imports: it comes --no-deps, and tests/sglang/requirements.txt
  # names what prepare_server_args, resolve_once, check_server_args and the
  # HiSparse allocator / coordinator modules import (with SGLang's pins).
  # Then this project with the test extra, as .venv-vllm has it.
  venv_install .venv-sglang -r tests/sglang/requirements.txt
  venv_install .venv-sglang --no-deps sglang==0.5.23
  local wheel
  wheel=$(ci_wheel)
  venv_install .venv-sglang --reinstall --no-deps "$wheel"
  venv_install .venv-sglang "$wheel[test]"
}

add_step pytest_sglang "pytest tests/sglang" "SGLang's real parser, resolution and HiSparse checks: the flag table, the oracle, the differential test"
step_pytest_sglang() {
  # One pytest session, one SGLang import (tests/sglang/README.md).
  (cd tests/sglang && ../../.venv-sglang/bin/python -m pytest . -p no:cacheprovider --durations=5)
}

# --- run -----------------------------------------------------------------------

if [ "${1:-}" = --list ]; then
  for i in "${!STEP_IDS[@]}"; do printf '%-14s %s\n' "${STEP_IDS[$i]}" "${STEP_NAMES[$i]}"; done
  exit 0
fi

selected=()
if [ $# -eq 0 ]; then
  selected=("${!STEP_IDS[@]}")
else
  for want in "$@"; do
    found=
    for i in "${!STEP_IDS[@]}"; do
      if [ "${STEP_IDS[$i]}" = "$want" ]; then
        selected+=("$i")
        found=1
      fi
    done
    [ -n "$found" ] || {
      echo "scripts/test.sh: no step '$want' (bash scripts/test.sh --list)" >&2
      exit 2
    }
  done
fi

# Every step but the venv installs runs with .venv's tools; the vLLM and
# SGLang steps name their own python.
use_venv .venv

START=$SECONDS
SUMMARY=()
CURRENT=
CURRENT_START=
# On any failure (set -e), the failed step and its time, then the times so far.
report() {
  local rc=$?
  if [ "$rc" != 0 ] && [ -n "$CURRENT" ]; then
    SUMMARY+=("$(printf '  %-32s %8s  FAILED (exit %s)' "$CURRENT" "$(duration $((SECONDS - CURRENT_START)))" "$rc")")
    printf '\n-- %s: FAILED (exit %s) after %s\n' "$CURRENT" "$rc" "$(duration $((SECONDS - CURRENT_START)))"
  fi
  if [ "${#SUMMARY[@]}" -gt 0 ]; then
    printf '\nsteps:\n'
    printf '%s\n' "${SUMMARY[@]}"
    printf 'total: %s (%s)\n' "$(duration $((SECONDS - START)))" "$([ "$rc" = 0 ] && echo passed || echo FAILED)"
  fi
  # A failure ends the run (set -e): name the steps it never reached, and how
  # to run the failed one and those alone once it is mended.
  if [ "$rc" != 0 ] && [ -n "$CURRENT" ]; then
    local rest=("${selected[@]:k}") ids=() j
    for j in "${selected[@]:k-1}"; do ids+=("${STEP_IDS[$j]}"); done
    if [ "${#rest[@]}" -gt 0 ]; then
      printf 'not run:\n'
      for j in "${rest[@]}"; do printf '  %s\n' "${STEP_NAMES[$j]}"; done
    fi
    printf 'to run from the failed step on: bash scripts/test.sh %s\n' "${ids[*]}"
  fi
}
trap report EXIT

n=${#selected[@]}
k=0
if [ $# -eq 0 ]; then
  # The figure README.md gives (measured; see "The two commands" there).
  echo "scripts/test.sh: $n steps; from a fresh clone about 30 minutes on 2 cores, downloads included (longer when the cores are busy)"
fi
for i in "${selected[@]}"; do
  k=$((k + 1))
  CURRENT="${STEP_NAMES[$i]}"
  CURRENT_START=$SECONDS
  detail="${STEP_DETAILS[$i]:+: ${STEP_DETAILS[$i]}}"
  printf '\n== [%d/%d] %s%s (%s UTC)\n' "$k" "$n" "$CURRENT" "$detail" "$(date -u +%H:%M:%S)"
  "step_${STEP_IDS[$i]}"
  took=$(duration $((SECONDS - CURRENT_START)))
  # The free disk after each step: the log says which step filled it.
  printf -- '-- %s: %s (disk: %s free)\n' "$CURRENT" "$took" "$(df -h --output=avail . | tail -1 | tr -d ' ')"
  SUMMARY+=("$(printf '  %-32s %8s' "$CURRENT" "$took")")
done
CURRENT=
