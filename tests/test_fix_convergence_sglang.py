"""Issue 22's property, SGLang half: advice that is right the first time.

For generated refused ``sglang serve`` launches (deterministic under the ``ci``
profile, tests/conftest.py), the printed flags (``Report.fixed_flags``) are
applied once, as argv words, in place of the user's (tests/sglang/sglang_argv.py,
shared with the SGLang differential test), and the launch is checked again:

1. no error whose fix was printed comes back (same code at the same path);
2. no fix lowers the GPU count (tp x pp, x dp without DP attention), the KV
   precision (bits of ``--kv-cache-dtype``) or ``--context-length`` the user
   gave, unless its message or hint says why (names what it lowers);
3. each fix sets a path once;
4. the printed flags apply: every word names a flag of SGLang 0.5.23's parser.

This runs in the main pytest step, without SGLang installed (the flag table is
the parser's dump); tests/sglang/test_differential.py also holds the fixed
launches to SGLang's own stages.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import hisparse_rs
from conftest import MODELS

_spec = importlib.util.spec_from_file_location(
    "sglang_argv", Path(__file__).resolve().parent / "sglang" / "sglang_argv.py"
)
assert _spec is not None and _spec.loader is not None
sglang_argv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sglang_argv)
apply_fixed_flags = sglang_argv.apply_fixed_flags

# Bits per KV value of each --kv-cache-dtype a user gives or a fix writes. "auto" is
# the model's dtype (bfloat16 below SM 10): 16, so a fix from auto to fp8 must say why.
KV_BITS = {None: 16, "auto": 16, "bfloat16": 16, "bf16": 16, "fp8_e4m3": 8, "fp8_e5m2": 8}

HS_KEYS: dict[str, list[Any]] = {
    "host_to_device_ratio": [1, 2, 8, 16, 32, 64, 0, 1.5],
    "device_buffer_size": [4096, 2048, 4000, 1000, 8192],
    "top_k": [2048, 1024],
    "swap_in_block_size": [960, 0],
}


@st.composite
def hisparse_config(draw: st.DrawFn) -> str:
    doc: dict[str, Any] = {}
    for key, values in HS_KEYS.items():
        # The ratio half the time: against the node's RAM it is what host_pool_over_ram_budget fixes.
        if draw(st.integers(0, 1 if key == "host_to_device_ratio" else 2)) == 0:
            doc[key] = draw(st.sampled_from(values))
    return json.dumps(doc)


@st.composite
def launches(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    """A HiSparse launch (`sglang serve` argv without the words) and the machine it is checked for."""
    model = draw(st.sampled_from(["deepseek-v3.2", "deepseek-v3.2", "glm-5"]))
    argv = ["--model-path", str(MODELS / model), "--enable-hisparse"]
    if draw(st.integers(0, 3)):
        argv.append("--disable-radix-cache")
    if draw(st.booleans()):
        argv += ["--hisparse-config", draw(hisparse_config())]
    valued: list[tuple[str, list[Any]]] = [
        ("--tp-size", [1, 2, 4, 8, 8, 16]),
        ("--pp-size", [1, 2]),
        ("--dp-size", [1, 2, 8]),
        ("--kv-cache-dtype", ["auto", "bf16", "fp8_e4m3", "fp8_e5m2"]),
        ("--page-size", [1, 16, 64]),
        ("--mem-fraction-static", [0.7, 0.85, 0.9]),
        ("--context-length", [4096, 131072, 163840, 262144]),
        ("--disaggregation-mode", ["decode", "decode", "prefill"]),
        ("--max-running-requests", [16, 256, 8192]),
        ("--chunked-prefill-size", [4096, 1000]),
    ]
    for flag, values in valued:
        if draw(st.integers(0, 2)) == 0:
            argv += [flag, str(draw(st.sampled_from(values)))]
    if draw(st.integers(0, 5)) == 0:
        argv.append("--enable-dp-attention")
    if draw(st.integers(0, 5)) == 0:
        steps = draw(st.sampled_from([1, 3, 5]))
        drafts = draw(st.sampled_from([steps + 1, 6]))
        argv += ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", str(steps)]
        argv += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(drafts)]
    machine: dict[str, Any] = {}
    gpu = draw(st.sampled_from([None, "h200", "h200", "b200"]))
    if gpu is not None:
        machine["gpu"] = gpu
    ram = draw(st.sampled_from([None, 64, 256, 512, 1024, 2048]))
    if ram is not None:
        machine["host_memory_gib"] = ram
    if draw(st.booleans()):
        machine["gpus_per_node"] = 8
    return argv, machine


def flag_values(argv: list[str]) -> dict[str, str]:
    """The last value of each valued flag of `argv` (argparse: the last one wins), by dest."""
    values: dict[str, str] = {}
    for dest, words in sglang_argv._words(argv):
        if dest is not None and len(words) == 2:
            values[dest] = words[1]
        elif dest is not None and len(words) == 1 and "=" in words[0]:
            values[dest] = words[0].split("=", 1)[1]
    return values


def gpus(values: dict[str, Any], dp_attention: bool) -> int:
    size = 1
    for name in ("tp_size", "pp_size") + (() if dp_attention else ("dp_size",)):
        size *= max(int(values.get(name) or 1), 1)
    return size


def says(e: hisparse_rs.Diagnostic, *words: str) -> bool:
    text = f"{e.message} {e.hint or ''}"
    return any(w in text for w in words)


def trail(report: hisparse_rs.Report) -> str:
    return "\n  ".join(f"{e.code}@{e.path}: {list(e.fix)}" for e in report.errors)


@settings(max_examples=200)
@given(launches())
def test_printed_flags_pass_once_and_keep_what_the_user_meant(
    case: tuple[list[str], dict[str, Any]],
) -> None:
    argv, machine = case
    first = hisparse_rs.check_sglang_argv(argv, **machine)
    if first.valid:
        return
    given_values = flag_values(argv)
    dp_attention = "--enable-dp-attention" in argv
    for e in first.errors:
        sets = [op["path"] for op in e.fix if op["op"] == "set"]
        assert len(sets) == len(set(sets)), f"{e.code} sets a path twice: {list(e.fix)}"
        # What this fix alone writes over the user's values.
        alone = dict(given_values)
        for op in e.fix:
            if op["op"] == "set" and "." not in op["path"]:
                alone[op["path"]] = op["value"]
        if gpus(alone, dp_attention) < gpus(given_values, dp_attention):
            assert says(e, "GPU", "tp_size", "--tp", "pp_size", "dp_size"), f"{e.code} lowers the GPU count"
        if "kv_cache_dtype" in alone and alone["kv_cache_dtype"] != given_values.get("kv_cache_dtype"):
            before = KV_BITS.get(given_values.get("kv_cache_dtype"), 8)
            if KV_BITS.get(alone["kv_cache_dtype"], 8) < before:
                assert says(e, "kv_cache_dtype", "kv-cache-dtype", "precision"), (
                    f"{e.code} lowers the KV precision: {list(e.fix)}"
                )
        given_length = given_values.get("context_length")
        length = alone.get("context_length")
        if given_length and length and int(length) < int(given_length):
            assert says(e, "context_length", "context-length", "context"), (
                f"{e.code} shortens the context: {list(e.fix)}"
            )
    if first.fixed_flags is None:
        assert not [e for e in first.errors if e.fix], f"fixes but no flags line:\n  {trail(first)}"
        return
    fixed = apply_fixed_flags(argv, first.fixed_flags)
    after = hisparse_rs.check_sglang_argv(fixed, **machine)
    printed = {(e.code, e.path) for e in first.errors if e.fix}
    back = printed & {(e.code, e.path) for e in after.errors}
    assert not back, (
        f"printed fixes come back: {sorted(back)}\n  sglang serve {' '.join(argv[2:])}\n  "
        f"machine {machine}\n  fixed_flags {first.fixed_flags}\n  {trail(first)}\nafter:\n  {trail(after)}"
    )
    # Every error had a fix: the fixed launch passes.
    if all(e.fix for e in first.errors):
        assert after.valid, (
            f"every error had a fix, the fixed launch does not pass:\n  sglang serve {' '.join(fixed[2:])}\n"
            f"  machine {machine}\n  fixed_flags {first.fixed_flags}\n  {trail(first)}\n"
            f"after:\n  {trail(after)}"
        )


def test_the_generator_draws_refused_launches_with_fixes() -> None:
    """The property is not vacuous: the launches it draws include refused ones with fixes of
    each kind it checks (the RAM ratio, the KV dtype, the radix cache)."""
    seen: set[str] = set()

    @settings(max_examples=200, database=None)
    @given(launches())
    def collect(case: tuple[list[str], dict[str, Any]]) -> None:
        argv, machine = case
        report = hisparse_rs.check_sglang_argv(argv, **machine)
        seen.update(e.code for e in report.errors if e.fix)

    collect()
    wanted = {"host_pool_over_ram_budget", "dsa_kv_cache_dtype_unsupported", "radix_cache_enabled"}
    assert wanted <= seen, sorted(wanted - seen)
