"""Break-it suite for the SGLang 0.5.23 Python API (branch sgbreak).

What broke, and is held here:
- a wrong-typed ServerArgs keyword was serde's words without the attribute
  ("invalid type: string "8", expected i64"); a float NaN / infinity or an
  int beyond 64 bits was a TypeError although its type is right: now a
  TypeError naming the attribute and what it takes, or a ValueError naming
  the bound;
- check_sglang_argv: sys.argv's surrogates (bytes that are not UTF-8) were a
  UnicodeEncodeError; an iterator was read twice and checked empty; an argv
  of 10^5 unknown flags took minutes (a did-you-mean for each) and had no bound;
- --speculative-num-draft-tokens without steps and topk: the fix set steps
  only, and the launch it made was refused again (steps without topk);
- errors without a fix that did not say what to do.
Also held: the fixes of one report, applied together, leave no error that
has a fix (drawn launches), and threads calling check_sglang_argv with mixed
good and failing inputs get each the answer it gets alone.
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hisparse_rs
from conftest import MODELS

DSV32 = str(MODELS / "deepseek-v3.2")
BASE: dict[str, Any] = dict(engine="sglang", gpu="h200", enable_hisparse=True, disaggregation_mode="decode")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("tp_size", "8", 'tp_size must be an int (as SGLang\'s argparse gives it, e.g. 8), got str "8"'),
        ("tp_size", 8.0, "tp_size must be an int (as SGLang's argparse gives it, e.g. 8), got float 8.0"),
        (
            "enable_mixed_chunk",
            1,
            "enable_mixed_chunk must be a bool (as SGLang's argparse gives it, e.g. True), got int 1",
        ),
        ("mem_fraction_static", "0.9", "mem_fraction_static must be a float"),
        ("kv_cache_dtype", 8, "kv_cache_dtype must be a str"),
    ],
)
def test_a_wrong_type_names_the_attribute(name: str, value: object, expected: str) -> None:
    with pytest.raises(TypeError) as info:
        hisparse_rs.check(DSV32, **BASE, **{name: value})
    assert str(info.value).startswith(expected), info.value
    assert "invalid type" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        (
            "mem_fraction_static",
            float("nan"),
            "mem_fraction_static is nan: the check reads mem_fraction_static only as a finite float",
        ),
        ("mem_fraction_static", float("-inf"), "mem_fraction_static is -inf: "),
        ("tp_size", 2**63, "tp_size is 9223372036854775808: beyond the 64-bit integers the check reads"),
        ("max_running_requests", -(2**70), "max_running_requests is "),
    ],
)
def test_a_number_beyond_the_check_is_a_value_error(name: str, value: object, expected: str) -> None:
    for call in (hisparse_rs.check, hisparse_rs.resolve):
        with pytest.raises(ValueError) as info:
            call(DSV32, **BASE, **{name: value})
        assert str(info.value).startswith(expected), info.value
    with pytest.raises(ValueError, match=name):
        hisparse_rs.plan(DSV32, **BASE, host_memory_gib=2048, **{name: value})


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--mem-fraction-static", "nan"],
            "--mem-fraction-static nan: the check reads mem_fraction_static only as a finite float",
        ),
        (
            ["--tp=99999999999999999999"],
            "--tp=99999999999999999999: '99999999999999999999' is beyond the 64-bit integers",
        ),
        (["--max-total-tokens", "9999999999999999999Ki"], "--max-total-tokens 9999999999999999999Ki: "),
    ],
)
def test_argv_bounds_name_the_flag_as_given(argv: list[str], expected: str) -> None:
    with pytest.raises(ValueError) as info:
        hisparse_rs.check_sglang_argv(["--model-path", DSV32, *argv])
    assert str(info.value).startswith(expected), info.value
    assert "stops here" not in str(info.value)


def test_argv_words_that_are_not_utf8_are_a_value_error() -> None:
    # What sys.argv holds for the bytes b"\xff".
    word = b"/models/\xff".decode("utf-8", "surrogateescape")
    with pytest.raises(ValueError, match=r"argv\[1\] .* is not UTF-8 text"):
        hisparse_rs.check_sglang_argv(["--model-path", word])


def test_an_iterator_argv_is_read_once() -> None:
    words = ["--model-path", DSV32, "--enable-hisparse", "--disaggregation-mode", "decode"]
    alone = hisparse_rs.check_sglang_argv(words, gpu="h200")
    assert alone.valid, alone.errors
    assert hisparse_rs.check_sglang_argv(iter(words), gpu="h200").to_json() == alone.to_json()


def test_an_argv_beyond_the_word_bound_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="at most 16384 words"):
        hisparse_rs.check_sglang_argv(["--model-path", DSV32] + ["--port"] * 100_000)


def test_many_unknown_flags_are_reported_and_bounded_in_suggestions() -> None:
    typos = [f"--pagesize{i}" for i in range(10_000)]
    r = hisparse_rs.check_sglang_argv(["--model-path", DSV32, "--enable-hisparse", *typos])
    unknown = [e for e in r.errors if e.code == "unknown_key"]
    assert len(unknown) == 10_000
    assert sum(1 for e in unknown if (e.hint or "").startswith("did you mean")) == 32
    assert all(e.hint for e in unknown)


def test_the_speculation_fix_makes_a_launch_sglang_takes() -> None:
    kw = dict(BASE, speculative_algorithm="EAGLE", speculative_num_draft_tokens=3)
    r = hisparse_rs.check(DSV32, **kw)
    assert [e.code for e in r.errors] == ["speculative_num_steps_missing"]
    fixed = apply_fixes(kw, [op for e in r.errors for op in e.fix])
    assert fixed["speculative_eagle_topk"] == 1 and fixed["speculative_num_steps"] == 2
    again = hisparse_rs.check(DSV32, **fixed)
    assert again.valid, again.errors


@pytest.mark.parametrize(
    ("model", "kw", "code"),
    [
        ("llama-3.1-8b", {}, "hisparse_model_not_dsa"),
        ("glm-5", dict(device="xpu", speculative_algorithm="EAGLE"), "speculative_swap_on_xpu"),
        ("deepseek-v4-flash", dict(speculative_algorithm="EAGLE"), "speculative_index_topk_too_small"),
    ],
)
def test_an_error_without_a_fix_says_what_to_do(model: str, kw: dict[str, Any], code: str) -> None:
    r = hisparse_rs.check(str(MODELS / model), **BASE, **kw)
    [e] = [e for e in r.errors if e.code == code]
    assert e.fix == () and e.hint, (e.code, e.hint)


def apply_fixes(kw: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The fix ops on ServerArgs keywords; ``hisparse_config.KEY`` edits the JSON text."""
    out = copy.deepcopy(kw)
    for op in ops:
        head, _, key = op["path"].partition(".")
        assert op["op"] in ("set", "remove"), op
        if key:
            assert head == "hisparse_config", op
            text = out.get("hisparse_config")
            config = json.loads(text) if isinstance(text, str) else dict(text or {})
            if op["op"] == "set":
                config[key] = op["value"]
            else:
                config.pop(key, None)
            out["hisparse_config"] = json.dumps(config)
        elif op["op"] == "set":
            out[head] = op["value"]
        else:
            out.pop(head, None)
    return out


LAUNCH = st.fixed_dictionaries(
    {},
    optional={
        "tp_size": st.sampled_from([1, 2, 8, 16]),
        "dp_size": st.sampled_from([1, 2, 3, 8]),
        "enable_dp_attention": st.booleans(),
        "disaggregation_mode": st.sampled_from(["null", "prefill", "decode"]),
        "enable_mixed_chunk": st.just(True),
        "page_size": st.sampled_from([1, 16, 64, 128]),
        "kv_cache_dtype": st.sampled_from(["auto", "fp8_e4m3", "bf16", "fp8_e5m2", "nvfp4", "mxfp8"]),
        "dsa_prefill_backend": st.sampled_from(["flashmla_sparse", "flashmla_kv", "tilelang", "fa3"]),
        "dsa_decode_backend": st.sampled_from(["flashmla_sparse", "flashmla_kv", "tilelang", "fa3"]),
        "attention_backend": st.sampled_from(["fa3", "flashinfer", "dsa", "triton"]),
        "disable_radix_cache": st.booleans(),
        "enable_hierarchical_cache": st.just(True),
        "chunked_prefill_size": st.sampled_from([-1, 0, 4096, 100_000]),
        "max_running_requests": st.sampled_from([1, 64, 10_000]),
        "context_length": st.sampled_from([1, 4096, 163_840, 10**6]),
        "speculative_algorithm": st.sampled_from(["EAGLE", "NEXTN", "NONE", "EAGLE3"]),
        "speculative_num_draft_tokens": st.sampled_from([1, 2, 4, 65]),
        "speculative_eagle_topk": st.sampled_from([1, 2]),
        "speculative_num_steps": st.sampled_from([1, 3]),
        "disaggregation_decode_enable_radix_cache": st.just(True),
        "device": st.sampled_from(["cuda", "xpu"]),
        "prefill_only_disable_kv_cache": st.just(True),
        "enable_kv_cache_sharding": st.just(True),
        "disaggregation_decode_allocation_policy": st.sampled_from(["early", "prefill_complete"]),
        "dcp_size": st.sampled_from([1, 2]),
        # Objects only: a config that is not one (or not JSON) stands for
        # every rule that reads it, so its fix can uncover them (see the report).
        "hisparse_config": st.sampled_from(
            [
                '{"device_buffer_size": 4000}',
                '{"top_k": 4096}',
                '{"top_k": 1000, "device_buffer_size": 1000}',
                '{"host_to_device_ratio": 0}',
                '{"host_to_device_ratio": 2.5}',
                '{"swap_in_block_size": 5000}',
                '{"device_buffer_size": 40000}',
                '{"swap_in_block_size": 0}',
            ]
        ),
    },
)
MODEL = st.sampled_from(["deepseek-v3.2", "glm-5", "glm-5-fp8", "deepseek-v4-flash", "deepseek-v3"])
GPU = st.sampled_from(["h200", "b200", "mi300x", None])


@given(model=MODEL, gpu=GPU, kw=LAUNCH)
def test_the_fixes_of_a_report_pass_together(model: str, gpu: str | None, kw: dict[str, Any]) -> None:
    args = dict(kw, engine="sglang", gpu=gpu, enable_hisparse=True)
    r = hisparse_rs.check(str(MODELS / model), **args)
    for e in r.errors:
        assert e.fix or e.hint, f"{e.code}: no fix and nothing to do"
    ops = [op for e in r.errors for op in e.fix]
    if r.valid or not ops:
        return
    again = hisparse_rs.check(str(MODELS / model), **apply_fixes(args, ops))
    left = [(e.code, e.fix) for e in again.errors if e.fix]
    assert not left, (sorted(e.code for e in r.errors), ops, left)


def test_threads_with_mixed_inputs_get_what_they_get_alone() -> None:
    inputs: list[list[str]] = [
        ["--model-path", DSV32, "--enable-hisparse", "--disaggregation-mode", "decode"],
        ["--model-path", DSV32, "--enable-hisparse", "--mem-fraction-static", "nan"],
        ["--model-path", DSV32, "--enable-hisparse", "--enable-mixed-chunk", "--pagesize", "64"],
        ["--model-path", b"\xff".decode("utf-8", "surrogateescape")],
        ["--model-path", DSV32, "--tp", "99999999999999999999"],
        ["--model-path", DSV32, "--hisparse-config", "{" * 1000],
    ]

    def once(argv: list[str]) -> str:
        try:
            return hisparse_rs.check_sglang_argv(argv, gpu="b200").to_json()
        except (TypeError, ValueError) as e:
            return f"{type(e).__name__}: {e}"

    alone = [once(a) for a in inputs]
    results: dict[tuple[int, int], str] = {}

    def worker(t: int) -> None:
        for k in range(24):
            i = (t + k) % len(inputs)
            results[(t, k)] = once(inputs[i])

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for (t, k), got in results.items():
        assert got == alone[(t + k) % len(inputs)], (t, k)
    # A failing call leaves nothing behind: the first input reads as before.
    assert once(inputs[0]) == alone[0]


def test_a_config_json_that_is_not_a_regular_file_is_a_model_load_error(tmp_path: Any) -> None:
    # Issue 23 defect 12: a FIFO, a directory named config.json or a device was
    # model_config_missing at resolve (exit 1); it is the ModelLoadError vLLM
    # raises (exit 2 on the CLI), from every SGLang entry point.
    import os

    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "config.json")
    directory = tmp_path / "dir"
    (directory / "config.json").mkdir(parents=True)
    for model in (fifo, directory, "/dev/zero"):
        with pytest.raises(hisparse_rs.ModelLoadError) as info:
            hisparse_rs.check_sglang_argv(["--model-path", str(model), "--enable-hisparse"])
        assert info.value.code == "not_a_regular_file", (model, str(info.value))
        with pytest.raises(hisparse_rs.ModelLoadError):
            hisparse_rs.check(model, engine="sglang", enable_hisparse=True)
        with pytest.raises(hisparse_rs.ModelLoadError):
            hisparse_rs.plan(model, engine="sglang", gpu="h200", enable_hisparse=True)
    with pytest.raises(hisparse_rs.ModelLoadError) as info:
        hisparse_rs.check_sglang_argv(["--model-path", str(directory)])
    assert "block" not in str(info.value)
