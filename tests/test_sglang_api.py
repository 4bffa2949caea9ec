"""Issue 16, part 5: the Python API for SGLang 0.5.23. ``check`` / ``resolve`` /
``plan`` with ``engine="sglang"`` and ``check_sglang_argv`` return the same
Report types as for vLLM, and an argv reads the same through the binding as
through ``hisparse-check --engine sglang --json``."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hisparse_rs
from conftest import HANG_S, MODELS

EXE = shutil.which("hisparse-check") or str(Path(sys.executable).parent / "hisparse-check")
DSV32 = str(MODELS / "deepseek-v3.2")
HS = '{"top_k": 2048, "device_buffer_size": 4096, "host_to_device_ratio": 2}'
VALID = dict(tp_size=8, enable_hisparse=True, disaggregation_mode="decode", hisparse_config=HS)


def cli_json(*argv: str) -> dict[str, object]:
    proc = subprocess.run(
        [EXE, "--json", "--engine", "sglang", *argv],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env={k: v for k, v in os.environ.items() if not k.startswith("HF_")},
    )
    assert proc.returncode in (0, 1), proc.stderr
    report: dict[str, object] = json.loads(proc.stdout)
    return report


def test_check_an_sglang_launch() -> None:
    report = hisparse_rs.check(DSV32, engine="sglang", gpu="h200", **VALID)
    assert report.valid, report.to_json()
    assert (report.engine, report.engine_version) == ("sglang", hisparse_rs.SGLANG_VERSION)
    h = report.hisparse
    assert isinstance(h, hisparse_rs.SglangHiSparseSettings)
    assert (h.device_buffer_size, h.top_k, h.index_topk, h.page_size) == (4096, 2048, 2048, 64)
    assert h.kv_cache_dtype == "bfloat16"  # SM 9.0: auto is bfloat16 (overrides.py:532-540)
    assert h.provenance["device_buffer_size"].source == "explicit"
    b200 = hisparse_rs.check(DSV32, engine="sglang", gpu="b200", **VALID).hisparse
    assert isinstance(b200, hisparse_rs.SglangHiSparseSettings)
    assert b200.kv_cache_dtype == "fp8_e4m3"


def test_top_k_is_pythons_value() -> None:
    """A float top_k SGLang accepts (a buffer given) is held as Python holds it
    (issue 23: the settings were integers, so a valid launch had none)."""
    import math

    for text, want in [("2048.5", 2048.5), ("NaN", math.nan), ("-Infinity", -math.inf), ("2048", 2048)]:
        config = '{"top_k": ' + text + ', "device_buffer_size": 6144}'
        report = hisparse_rs.check(DSV32, engine="sglang", gpu="h200", **{**VALID, "hisparse_config": config})
        assert report.valid, report.to_json()
        h = report.hisparse
        assert isinstance(h, hisparse_rs.SglangHiSparseSettings)
        assert type(h.top_k) is type(want), (text, h.top_k)
        assert h.top_k == want or (math.isnan(h.top_k) and math.isnan(want)), (text, h.top_k)
    assert json.loads(report.to_json())["hisparse"]["top_k"]["value"] == 2048


def test_resolve_raises_with_every_error_and_its_sglang_stage() -> None:
    with pytest.raises(hisparse_rs.ConfigError) as info:
        hisparse_rs.resolve(
            DSV32,
            engine="sglang",
            enable_hisparse=True,
            enable_mixed_chunk=True,
            hisparse_config='{"device_buffer_size": 4000}',
        )
    stages = {(d.code, d.stage) for d in info.value.report.errors}
    assert ("mixed_chunk_with_hisparse", "check") in stages, stages
    assert ("device_buffer_size_not_page_multiple", "coordinator_init") in stages, stages
    assert all("SGLang 0.5.23" in d.stage_sentence for d in info.value.report.errors)
    ok = hisparse_rs.resolve(DSV32, engine="sglang", **VALID)
    assert isinstance(ok.hisparse, hisparse_rs.SglangHiSparseSettings)


def test_plan_an_sglang_launch() -> None:
    plan = hisparse_rs.plan(DSV32, engine="sglang", gpu="h200", host_memory_gib=2048, **VALID)
    assert plan.valid
    assert json.loads(plan.to_json())["engine"] == "sglang"
    with pytest.raises(hisparse_rs.ConfigError):
        hisparse_rs.plan(DSV32, engine="sglang", enable_hisparse=True, enable_mixed_chunk=True)


def test_engine_and_argument_names_are_checked() -> None:
    with pytest.raises(ValueError, match="allowed vllm, sglang"):
        hisparse_rs.check(DSV32, engine="trtllm")
    with pytest.raises(ValueError, match="allowed vllm, sglang"):
        hisparse_rs.plan(DSV32, engine="SGLang")
    with pytest.raises(TypeError, match="tensor_parallel_size"):
        hisparse_rs.check(DSV32, engine="sglang", tensor_parallel_size=8)
    with pytest.raises(TypeError, match="tp_sise"):
        hisparse_rs.check(DSV32, engine="sglang", tp_sise=8)
    with pytest.raises(TypeError, match="engine='sglang'"):
        hisparse_rs.check(DSV32, tp_size=8)
    with pytest.raises(TypeError):
        hisparse_rs.check_sglang_argv("--model-path m")  # type: ignore[arg-type]


def test_check_sglang_argv_is_the_cli_s_reading() -> None:
    argv = [
        "--model-path",
        DSV32,
        "--tp",
        "8",
        "--enable-hisparse=1",
        "--kv-cache-dtype",
        "fp9",
        "--port",
        "1",
    ]
    report = hisparse_rs.check_sglang_argv(argv)
    assert not report.valid
    first = report.errors[0]
    assert (first.code, first.stage) == ("invalid_value", "argparse")
    assert "ignored explicit argument '1'" in first.message
    assert report.ignored_flags == ["--port 1"]
    assert json.loads(report.to_json()) == cli_json(*argv)
    # A leading program and a positional model, as `sglang serve MODEL`.
    assert json.loads(hisparse_rs.check_sglang_argv(["sglang", "serve", *argv[1:]]).to_json()) == cli_json(
        *argv
    )


FLAG_WORDS = st.sampled_from(
    [
        ["--tp", "8"],
        ["--tp-size=4"],
        ["--dp", "2"],
        ["--ep", "8"],
        ["--enable-hisparse"],
        ["--enable-hisparse=1"],
        ["--hisparse-config", HS],
        ["--hierarchical-sparse-attention-extra-config", '{"device_buffer_size": 4000}'],
        ["--hisparse-config", "not json"],
        ["--page-size", "32"],
        ["--kv-cache-dtype", "fp8_e4m3"],
        ["--kv-cache-dtype", "fp9"],
        ["--disable-radix-cache"],
        ["--disaggregation-mode", "decode"],
        ["--disaggregation-mode", "prefil"],
        ["--enable-mixed-chunk"],
        ["--chunked-prefill-size", "100"],
        ["--max-running-requests", "8192"],
        ["--mem-fraction-static", "0.8"],
        ["--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "6"],
        ["--port", "30000"],
        ["--trust-remote-code"],
        ["--pagesize", "64"],
        ["--enable-hi"],
        ["--tp-size", "x"],
    ]
)


# Each example runs the CLI once: 60 of them (derandomized by the ci profile) keep this under a minute.
@settings(max_examples=60)
@given(st.lists(FLAG_WORDS, max_size=6), st.sampled_from([None, "h200", "b200"]))
def test_binding_and_cli_agree_on_drawn_argvs(flags: list[list[str]], gpu: str | None) -> None:
    argv = ["--model-path", DSV32] + [w for f in flags for w in f]
    report = hisparse_rs.check_sglang_argv(argv, gpu=gpu)
    cli = cli_json(*argv, *(["--gpu", gpu] if gpu else []))
    assert json.loads(report.to_json()) == cli
    assert report.engine == "sglang"
    assert all(
        d.stage
        in (
            "argparse",
            "resolve",
            "check",
            "after_weights_load",
            "pool_build",
            "coordinator_init",
            "first_decode",
            "request",
            "never",
        )
        for d in report.errors
    )


def test_python_api_values_argparse_would_refuse_are_refused() -> None:
    """Issue 23, defect 13: a keyword value outside its flag's choices is
    argparse's refusal (stage argparse), as `--disaggregation-mode decoder` is."""
    r = hisparse_rs.check(DSV32, engine="sglang", disaggregation_mode="decoder")
    assert not r.valid
    e = r.errors[0]
    assert (e.code, e.stage, e.path) == ("invalid_value", "argparse", "disaggregation_mode")
    assert "invalid choice: 'decoder' (choose from" in e.message
    assert hisparse_rs.check(DSV32, engine="sglang", disaggregation_mode="decode").valid
    cli = hisparse_rs.check_sglang_argv(["--model-path", DSV32, "--disaggregation-mode", "decoder"])
    assert [(d.code, d.stage) for d in cli.errors][:1] == [("invalid_value", "argparse")]


def test_python_api_hisparse_config_dict_keys_as_json_dumps_writes_them() -> None:
    """Issue 23, defect 13: ``hisparse_config={1: 2}`` is ``{"1": 2}`` (json.dumps),
    a key SGLang does not read: the unknown-key warning."""
    r = hisparse_rs.check(
        DSV32, engine="sglang", enable_hisparse=True, disable_radix_cache=True, hisparse_config={1: 2}
    )
    assert ("hisparse_config_unknown_key", "hisparse_config.1") in [(w.code, w.path) for w in r.warnings]


def test_sglang_serve_model_type_diffusion_is_not_checked_silently() -> None:
    """Issue 23, defect 13: `--model-type diffusion` runs SGLang's diffusion server."""
    with pytest.raises(ValueError, match="--model-type diffusion"):
        hisparse_rs.check_sglang_argv(["sglang", "serve", DSV32, "--model-type", "diffusion"])


# Issue 22, Python API parity: serve_args / check_args / apply_fix and the fix
# loop for SGLang, in both forms a launch comes in (ServerArgs keywords, argv words).
BROKEN = dict(
    tp_size=8,
    enable_hisparse=True,
    kv_cache_dtype="fp8_e5m2",
    mem_fraction_static=0.85,
    hisparse_config='{"top_k": 2048, "device_buffer_size": 4000}',
)
BROKEN_ARGV = [
    "sglang",
    "serve",
    DSV32,
    "--tp",
    "8",
    "--enable-hisparse=1",
    "--kv-cache-dtype",
    "fp8_e5m2",
    "--mem-frac",
    "0.85",
    "--hisp",
    '{"top_k": 2048, "device_buffer_size": 4000}',
]
MACHINE = dict(gpu="h200", host_memory_gib=2048)


def test_serve_args_and_check_args_are_check_for_sglang() -> None:
    args = hisparse_rs.serve_args(DSV32, engine="sglang", **BROKEN)
    assert args == {"model_path": DSV32, **BROKEN}
    report = hisparse_rs.check_args(args, engine="sglang", **MACHINE)
    assert report.engine == "sglang"
    assert json.loads(report.to_json()) == json.loads(
        hisparse_rs.check(DSV32, engine="sglang", **MACHINE, **BROKEN).to_json()
    )
    with pytest.raises(TypeError, match="tp_sise"):
        hisparse_rs.serve_args(DSV32, engine="sglang", tp_sise=8)


def test_the_fix_loop_converges_on_server_args() -> None:
    """The README loop, for SGLang: apply the first error's fix, check again."""
    args = hisparse_rs.serve_args(DSV32, engine="sglang", **BROKEN)
    report = hisparse_rs.check_args(args, engine="sglang", **MACHINE)
    first = [e.code for e in report.errors]
    assert first == [
        "dsa_kv_cache_dtype_unsupported",
        "radix_cache_enabled",
        "device_buffer_size_not_page_multiple",
    ]
    rounds = 0
    while report.errors and report.errors[0].fix:
        args = hisparse_rs.apply_fix(args, report.errors[0].fix, engine="sglang")
        report = hisparse_rs.check_args(args, engine="sglang", **MACHINE)
        rounds += 1
    assert report.valid and rounds == len(first), [e.code for e in report.errors]
    # A fix keeps what the user meant (fp8, not auto) and the hisparse_config form given (text).
    assert args["kv_cache_dtype"] == "fp8_e4m3" and args["disable_radix_cache"] is True
    assert args["hisparse_config"] == '{"top_k": 2048, "device_buffer_size": 4032}'
    assert isinstance(report.hisparse, hisparse_rs.SglangHiSparseSettings)
    assert report.hisparse.device_buffer_size == 4032
    # A dict hisparse_config stays a dict.
    as_dict = hisparse_rs.serve_args(
        DSV32, engine="sglang", **{**BROKEN, "hisparse_config": {"device_buffer_size": 4000}}
    )
    fix = hisparse_rs.check_args(as_dict, engine="sglang").errors[-1].fix
    assert hisparse_rs.apply_fix(as_dict, fix, engine="sglang")["hisparse_config"] == {
        "device_buffer_size": 4032
    }


def test_the_fix_loop_converges_on_argv_words() -> None:
    argv = list(BROKEN_ARGV)
    report = hisparse_rs.check_sglang_argv(argv, **MACHINE)
    assert report.errors[0].code == "invalid_value"  # --enable-hisparse=1, argparse's refusal
    rounds = 0
    while report.errors and report.errors[0].fix:
        argv = hisparse_rs.apply_fix(argv, report.errors[0].fix, engine="sglang")
        report = hisparse_rs.check_sglang_argv(argv, **MACHINE)
        rounds += 1
        assert rounds <= 4, (argv, [e.code for e in report.errors])
    assert report.valid, [(e.code, e.message) for e in report.errors]
    # Each fixed flag's words replaced (its abbreviation and =value form too), the rest in place.
    assert argv == [
        "sglang",
        "serve",
        DSV32,
        "--tp",
        "8",
        "--mem-frac",
        "0.85",
        "--enable-hisparse",
        "--kv-cache-dtype",
        "fp8_e4m3",
        "--disable-radix-cache",
        "--hisparse-config",
        '{"top_k": 2048, "device_buffer_size": 4032}',
    ]
    # The words and the keywords arrive at the same launch.
    args = hisparse_rs.serve_args(DSV32, engine="sglang", **BROKEN)
    for e in hisparse_rs.check_args(args, engine="sglang", **MACHINE).errors:
        args = hisparse_rs.apply_fix(args, e.fix, engine="sglang")
    by_words = hisparse_rs.check_sglang_argv(argv, **MACHINE).hisparse
    assert by_words == hisparse_rs.check_args(args, engine="sglang", **MACHINE).hisparse


def test_every_fix_of_one_report_at_once_is_its_fixed_flags() -> None:
    """Each error's fix applied in turn to the words gives the launch Report.fixed_flags prints."""
    report = hisparse_rs.check_sglang_argv(BROKEN_ARGV, **MACHINE)
    argv = list(BROKEN_ARGV)
    for e in report.errors:
        argv = hisparse_rs.apply_fix(argv, e.fix, engine="sglang")
    assert hisparse_rs.check_sglang_argv(argv, **MACHINE).valid
    assert report.fixed_flags is not None
    # sglang serve MODEL --tp 8 --mem-frac 0.85: no fix names them, they stay in place
    assert argv[:7] == BROKEN_ARGV[:5] + BROKEN_ARGV[8:10]

    def flags(words: list[str]) -> list[tuple[str, ...]]:
        cut = [i for i, w in enumerate(words) if w.startswith("--")] + [len(words)]
        return sorted(tuple(words[a:b]) for a, b in itertools.pairwise(cut))

    assert flags(argv[7:]) == flags(shlex.split(report.fixed_flags))


def test_apply_fix_refuses_what_does_not_apply() -> None:
    args = hisparse_rs.serve_args(DSV32, engine="sglang", tp_size=8)
    with pytest.raises(ValueError, match="tp_size must be an int"):
        hisparse_rs.apply_fix(args, [{"op": "set", "path": "tp_size", "value": "8"}], engine="sglang")
    assert args == {"model_path": DSV32, "tp_size": 8}  # unchanged
    with pytest.raises(ValueError, match="tp_size must be an int"):
        hisparse_rs.apply_fix(
            ["--model-path", DSV32], [{"op": "set", "path": "tp_size", "value": "8"}], engine="sglang"
        )
    with pytest.raises(ValueError, match="not a list of fix operations"):
        hisparse_rs.apply_fix(args, [{"op": "paint"}], engine="sglang")
    with pytest.raises(TypeError, match="engine='sglang'"):
        hisparse_rs.apply_fix(["--model-path", DSV32], [], engine="vllm")
