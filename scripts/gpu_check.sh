#!/usr/bin/env bash
# The GPU check: one command on a bare CUDA machine (no registry, no Rust), or its
# CPU rehearsal. Not part of CI itself; scripts/gpu_rehearsal.sh runs --rehearse there.
#
#   bash scripts/gpu_check.sh --bundle .gpu [--quick] [--out DIR]   # on the GPU
#   bash scripts/gpu_check.sh --bundle .gpu --rehearse [--out DIR]  # on a CPU, TRITON_INTERPRET=1
#
# --bundle DIR: what scripts/gpu_bundle.sh built. Its wheels (hisparse_rs, sgl-flash-mla)
#   are installed with `pip install --no-index --no-deps --target` into a scratch
#   folder under /tmp (nothing is resolved, nothing leaves the machine), and the
#   scripts and tests run from the bundle's copy, so what runs is what was rehearsed.
#   Without --bundle: the working tree and whatever hisparse_rs $PYTHON imports.
# Results go to --out, else $OUT (the device tool's folder), else gpu_results/:
#   summary.md (read first), summary.json, check.log, kernel_tests.xml,
#   gpu_kernels.json, gpu_runtime.json. summary.md is rewritten after every
#   part, so a run stopped at any point still says what it measured.
# Parts, in order, each under `timeout` with its own budget, all within one
# deadline (full 450 s, --quick 220 s; the rehearsal has none): environment,
# flash_mla load, kernel tests, decode (ours against FlashMLA), gather, resolver,
# 61-layer step; then, if time is left, the splits sweep and the AOT cross-check.
# Exit status: 0 when every part that ran passed, 1 when one failed or timed out,
# 2 when there is no usable CUDA device (and not --rehearse), 3 when the bundle
# does not install.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

usage() { sed -n '2,10p' "$0" >&2; exit 2; }
bundle="" mode=full out="${OUT:-gpu_results}"
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
    --quick) mode=quick; shift ;;
    --rehearse) mode=rehearse; shift ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "gpu_check: unknown argument $1" >&2; usage ;;
  esac
done
py="${PYTHON:-python3}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/summary.md "$out"/summary.json "$out"/kernel_tests.xml "$out"/gpu_kernels.json \
  "$out"/gpu_runtime.json
exec > >(tee "$out/check.log") 2>&1
t_start=$(date +%s)
case "$mode" in
  full) deadline=$((t_start + 450)) ;;
  quick) deadline=$((t_start + 220)) ;;
  rehearse) deadline=$((t_start + 86400)) ;;
esac

if [ "$mode" = rehearse ]; then
  export TRITON_INTERPRET=1
else
  unset TRITON_INTERPRET
fi

summary() { "$py" "$src/benches/gpu_summary.py" --out "$out" "$@"; }

# run_part NAME BUDGET_S CMD...: run CMD under `timeout` (SIGINT first, so pytest
# and Python finish their reports; SIGKILL 15 s later), within the deadline.
failed=0
run_part() {
  local name=$1 budget=$2 left rc t0 status
  shift 2
  left=$((deadline - $(date +%s)))
  [ "$budget" -gt "$left" ] && budget=$left
  echo
  echo "== $name (budget ${budget} s)"
  if [ "$budget" -lt 5 ]; then
    summary --part "$name" --status skipped --rc 0 --budget 0 --note "no time left before the deadline"
    return 0
  fi
  t0=$(date +%s)
  timeout -s INT -k 15 "$budget" "$@"
  rc=$?
  case "$rc" in
    0) status=ok ;;
    124|137) status=timeout; failed=1 ;;
    *) status=failed; failed=1 ;;
  esac
  summary --part "$name" --status "$status" --rc "$rc" --seconds $(($(date +%s) - t0)) --budget "$budget"
  return 0
}

if [ -n "$bundle" ]; then
  bundle=$(cd "$bundle" && pwd) || exit 3
  src="$bundle/src"
  site=$(mktemp -d /tmp/hisparse_gpu_site.XXXXXX)
  echo "gpu_check: installing $bundle/wheels into $site (no index, no dependencies)"
  if ! "$py" -m pip install --quiet --no-index --no-deps --no-compile --target "$site" \
      "$bundle"/wheels/hisparse_rs-*.whl; then
    note="the hisparse_rs wheel does not install with $py (its tag against this Python and glibc"
    note="$note $("$py" -c 'import platform; print(*platform.libc_ver())'); see check.log)"
    echo "gpu_check: $note" >&2
    "$py" "$src/benches/gpu_summary.py" --out "$out" --mode "$mode" --part install --status failed --rc 3 \
      --note "$note"
    exit 3
  fi
  # FlashMLA separately: its failure to install or load is a result, not the end of the run.
  fm_install="installed"
  if ! "$py" -m pip install --quiet --no-index --no-deps --no-compile --target "$site" \
      "$bundle"/wheels/sgl_flash_mla-*.whl; then
    fm_install="sgl-flash-mla did not install (see check.log)"
  fi
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
else
  src=$PWD
  fm_install="not from a bundle: whatever flash_mla $py imports"
  if ! "$py" -c 'import hisparse_rs' 2>/dev/null; then
    export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
  fi
fi
export PYTHONUNBUFFERED=1
summary --mode "$mode" --env

if [ "$mode" != rehearse ] && ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: $py has no torch with a usable CUDA device; nothing to measure (--rehearse runs on CPU)" >&2
  summary --part environment --status failed --rc 2 --note "torch sees no CUDA device"
  exit 2
fi

# flash_mla: on the GPU a plain import; on a CPU its libraries need libcuda.so.1, so a
# stub with that soname (no symbols: the extensions reach the driver through cudart)
# proves that they load and register their ops under this torch.
fm_probe='import flash_mla, torch
ops = torch.ops.flash_mla_legacy if flash_mla.has_legacy() else torch.ops.flash_mla
print("flash_mla", flash_mla.__version__, "legacy (sm_90) kernels:", flash_mla.has_legacy(),
      "sparse_decode_fwd:", ops.sparse_decode_fwd.default._schema.name, "under torch", torch.__version__)'
if [ "$mode" = rehearse ]; then
  stub=$(mktemp -d /tmp/hisparse_gpu_stub.XXXXXX)
  if echo 'int hisparse_no_driver;' | gcc -x c -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stub/libcuda.so.1" -; then
    run_part "flash_mla load ($fm_install; CPU: libcuda stub)" 60 env LD_LIBRARY_PATH="$stub" "$py" -c "$fm_probe"
  else
    summary --part "flash_mla load" --status skipped --note "no gcc for the libcuda stub; not run on CPU"
  fi
else
  run_part "flash_mla load ($fm_install)" 15 "$py" -c "$fm_probe"
fi

# Fastest first, so a budget that runs out still covers the most kernels. The rehearsal
# leaves out test_runtime_lossless.py (340 of its 620 s under the interpreter on 2 cores;
# CI runs it on the newest torch in the main suite).
tests=(tests/test_kernels_fp8.py tests/test_kernels_gather.py tests/test_kernels_decode_indices.py
  tests/test_kernels_decode.py tests/test_kernels_resolver.py tests/test_runtime_device.py)
[ "$mode" = rehearse ] || tests+=(tests/test_runtime_lossless.py)
case "$mode" in
  full) b_tests=90 b_decode=120 b_gather=30 b_resolver=45 b_step=110 b_extra=40 rt=() kn=() ;;
  quick) b_tests=30 b_decode=60 b_gather=15 b_resolver=20 b_step=60 b_extra=0 rt=(--quick) kn=(--quick) ;;
  rehearse) b_tests=1500 b_decode=600 b_gather=300 b_resolver=600 b_step=600 b_extra=300 rt=(--smoke)
    kn=(--rehearse) ;;
esac
# HYPOTHESIS_PROFILE=device: few examples per property (tests/conftest.py); CI runs the
# full profile under the interpreter.
run_part "kernel tests" "$b_tests" env -C "$src" HYPOTHESIS_PROFILE=device "$py" -m pytest "${tests[@]}" \
  -p no:cacheprovider -q --durations=8 -W ignore::DeprecationWarning --junitxml "$out/kernel_tests.xml"
run_part "decode: ours and FlashMLA" "$b_decode" "$py" "$src/benches/gpu_kernels.py" --parts decode \
  --out "$out" "${kn[@]}"
run_part "gather against a pinned copy" "$b_gather" "$py" "$src/benches/gpu_kernels.py" --parts gather \
  --out "$out" "${kn[@]}"
run_part "resolver: Triton against Rust" "$b_resolver" "$py" "$src/benches/gpu_runtime.py" \
  --parts resolver --out "$out" "${rt[@]}"
run_part "61-layer step, eager and CUDA graphs" "$b_step" "$py" "$src/benches/gpu_runtime.py" \
  --parts step --out "$out" "${rt[@]}"
if [ "$mode" != quick ]; then
  run_part "decode splits sweep" "$b_extra" "$py" "$src/benches/gpu_kernels.py" --parts splits --out "$out" "${kn[@]}"
  run_part "AOT cross-check (driver against aot.py)" $((b_extra + 20)) "$py" "$src/benches/gpu_kernels.py" --parts aot \
    --out "$out" "${kn[@]}"
fi
if [ "$mode" = rehearse ]; then
  # The compile the device will do, for sm_90 with this Triton's ptxas (no GPU needed).
  run_part "AOT compile and SASS mix, sm_90 (this Triton)" 300 env -u TRITON_INTERPRET "$py" \
    -m hisparse_rs.kernels.aot --target sm_90 --mix
fi

echo
echo "gpu_check: $mode run done in $(($(date +%s) - t_start)) s; results in $out/"
cat "$out/summary.md"
exit "$failed"
