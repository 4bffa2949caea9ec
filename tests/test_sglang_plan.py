"""Issue 16, part 4: ``hisparse_rs.plan(..., engine="sglang")`` gives SGLang
0.5.23's own sizing. Each figure is worked out by hand from the wheel's
formulas (the arithmetic is in the comments; the same launch is pinned in
rust/hisparse-core/tests/sglang_plan.rs)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hisparse_rs
from conftest import HANG_S, MODELS

EXE = shutil.which("hisparse-check") or str(Path(sys.executable).parent / "hisparse-check")

DSV32 = str(MODELS / "deepseek-v3.2")
LAUNCH = dict(
    tp_size=8,
    enable_hisparse=True,
    disaggregation_mode="decode",
    hisparse_config='{"device_buffer_size": 4096}',
)


def plan_json(**extra: object) -> dict[str, object]:
    options: dict[str, object] = dict(gpu="h200", host_memory_gib=2048, weights_gib=78)
    plan = hisparse_rs.plan(DSV32, engine="sglang", **options, **{**LAUNCH, **extra})
    assert plan.valid
    out: dict[str, object] = json.loads(plan.to_json())
    return out


def test_sizes_as_sglang_computes_them() -> None:
    p = plan_json()
    sg = p["sglang"]
    assert isinstance(sg, dict)
    gpu = p["gpu"]
    assert isinstance(gpu, dict)
    # round((144,384 - max(512 + 1.5 x 2048 + 1024 + 512 x 2, 10240)) / 144,384, 3)
    assert gpu["gpu_memory_utilization"] == 0.929
    # int(141 GiB x 0.929) - 78 GiB
    assert gpu["kv_bytes_per_gpu"] == int(141 * 2**30 * 0.929) - 78 * 2**30 == 56_896_505_511
    # 61 x 1152 + 61 x 132 x 2
    assert sg["device_cell_bytes"] == 86_376
    # 56,896,505,511 // 86,376 // 64 x 64
    assert sg["device_slots"] == 658_688
    # (658,688 x 2 // 64 + 1) x 64
    assert sg["host_tokens"] == 1_317_440
    # min(max(min(int(658,688 / 163,840 x 512), 4096), 2048), 658,688 // 2)
    assert gpu["max_num_seqs"] == sg["max_running_requests"] == 2058
    host = p["host"]
    assert isinstance(host, dict)
    # 1,317,440 x 61 x 1152 B = 86.22 GiB, 2 decimals
    assert host["pool_bytes"] == 92_579_143_680
    assert host["host_pool_gib"] == 86.22
    # (2048 GiB - 10 GiB) // 8 ranks
    assert sg["host_budget_per_rank_bytes"] == (2048 - 10) * 2**30 // 8


def test_limits_and_the_ratio_needed() -> None:
    at = plan_json()["at_context"]
    assert isinstance(at, dict)
    # device 658,688 // (4096 + 64); host 1,317,440 // 163,840
    assert (at["gpu_limit"], at["host_limit"]) == (158, 8)
    assert (at["hisparse_requests"], at["hisparse_limit"]) == (8, "host")
    # ratio 10: N_dev 377,280, N_host 3,772,864 -> 23 requests; ratio 11 is over the budget
    assert at["host_to_device_ratio"] == 10
    assert at["min_host_pool_requests"] == 23
    assert at["target_requests"] == 377_280 // 4160


def test_speculation_resolves_48_and_adds_the_scratch() -> None:
    sg = plan_json(speculative_algorithm="EAGLE")["sglang"]
    assert isinstance(sg, dict)
    assert sg["max_running_requests"] == 48
    # W = 4 x 2048; min(W, max(1024, W - 4096))
    assert sg["speculative_scratch_slots"] == 4096
    assert sg["request_device_slots"] == 4096 + 64 + 4096


def test_pd_decode_receives_the_prompt_into_the_host_pool() -> None:
    # disaggregation/decode.py:2321-2330: logical ids only; :1418-1430 admits D + 64.
    p = json.loads(
        hisparse_rs.plan(
            DSV32,
            engine="sglang",
            gpu="h200",
            **{
                **LAUNCH,
                "max_total_tokens": 131072,
                "hisparse_config": '{"host_to_device_ratio": 4}',
            },
        ).to_json()
    )
    assert p["valid"], p["errors"]
    assert p["sglang"]["prompt_on_device"] is False
    at = p["at_context"]
    # device 131,072 // 4160 = 31; host (131,072 x 4 // 64 + 1) x 64 // 163,840 = 3
    assert (at["gpu_limit"], at["host_limit"]) == (31, 3)
    assert (at["hisparse_requests"], at["hisparse_limit"]) == (3, "host")


def test_mtp_draft_layer_in_the_device_cell() -> None:
    p = plan_json(speculative_algorithm="EAGLE")
    sizes = p["sizes"]
    sg = p["sglang"]
    assert isinstance(sizes, dict) and isinstance(sg, dict)
    assert sizes["draft_layers"] == 1
    # 61 x 1152 + 61 x 132 x 2 + 1 x (1152 + 132) x 2 (pool_configurator.py:260-311)
    assert sg["device_cell_bytes"] == 88_944


def test_weights_over_the_gpu_are_named_at_the_weight_load() -> None:
    glm5 = str(MODELS / "glm-5")
    p = json.loads(hisparse_rs.plan(glm5, engine="sglang", gpu="h200", **LAUNCH).to_json())
    assert not p["valid"]
    e = p["errors"][0]
    assert e["code"] == "sglang_plan_serves_no_requests"
    assert e["path"] == "mem_fraction_static"
    assert e["stage"] == "after_weights_load"
    assert "exceed the GPU's 141 GiB" in e["message"]


def sglang_plan(**extra: object) -> hisparse_rs.Plan:
    return hisparse_rs.plan(
        DSV32, engine="sglang", gpu="h200", host_memory_gib=2048, weights_gib=78, **{**LAUNCH, **extra}
    )


def test_an_sglang_plan_has_its_engine_and_sglang_fields_as_attributes() -> None:
    """Issue 22: `.engine`, and SGLang's fields as attributes, not only in to_json()."""
    p = sglang_plan()
    assert (p.engine, p.engine_version, p.vllm_version) == ("sglang", hisparse_rs.SGLANG_VERSION, None)
    sg = p.sglang
    assert isinstance(sg, hisparse_rs.SglangSizing)
    as_json = json.loads(p.to_json())
    assert {k: getattr(sg, k) for k in as_json["sglang"]} == as_json["sglang"]
    assert (sg.device_slots, sg.host_to_device_ratio, sg.device_cell_bytes) == (658_688, 2, 86_376)
    assert p.at_context.host_to_device_ratio == 10 == as_json["at_context"]["host_to_device_ratio"]
    assert [x.host_to_device_ratio for x in p.sweep] == [x["host_to_device_ratio"] for x in as_json["sweep"]]
    vllm = hisparse_rs.plan(
        DSV32,
        gpu="h200",
        host_memory_gib=2048,
        tensor_parallel_size=8,
        kv_transfer_config={
            "kv_connector": "HiSparseConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"host_pool_gib": 64},
        },
    )
    assert (vllm.engine, vllm.vllm_version, vllm.sglang) == ("vllm", hisparse_rs.VLLM_VERSION, None)
    assert vllm.at_context.host_to_device_ratio is None


def test_context_length_is_the_planned_length_not_sglangs_flag() -> None:
    """Issue 22: plan(context_length=) is the planned tokens per request;
    SGLang's --context-length is the launch's (a ServerArgs attribute, via
    plan_args), and the errors say which is which."""
    p = sglang_plan(context_length=None)
    assert (p.context_length, p.max_model_len) == (163_840, 163_840)
    short = hisparse_rs.plan(DSV32, engine="sglang", gpu="h200", context_length=32_768, **LAUNCH)
    assert (short.context_length, short.max_model_len) == (32_768, 163_840)
    args = hisparse_rs.serve_args(DSV32, engine="sglang", context_length=65_536, **LAUNCH)
    launch = hisparse_rs.plan_args(args, engine="sglang", gpu="h200")
    assert (launch.context_length, launch.max_model_len) == (65_536, 65_536)
    with pytest.raises(
        ValueError,
        match=r"planned context length \(--plan-context-length; Python: plan\(context_length=\)\) "
        r"100000 is longer than the launch's --context-length 65536",
    ):
        hisparse_rs.plan_args(args, engine="sglang", gpu="h200", context_length=100_000)
    with pytest.raises(ValueError, match="163840, the model's context length"):
        hisparse_rs.plan(DSV32, engine="sglang", gpu="h200", context_length=10**6, **LAUNCH)
    with pytest.raises(ValueError, match=r"^the planned context length .* must be at least 1 token"):
        hisparse_rs.plan(DSV32, engine="sglang", gpu="h200", context_length=0, **LAUNCH)


def test_the_plan_text_prints_its_ratio_as_a_flag_to_paste() -> None:
    """Issue 22: the SGLang plan prints its suggested host_to_device_ratio as the
    --hisparse-config to paste (the launch's other keys kept), and the pasted
    launch plans that ratio as its own (no flag line again)."""
    argv = ["--plan", "--gpu", "h200", "--host-memory-gib", "2048", "--weights-gib", "78", "--"]
    launch = ["sglang", "serve", DSV32, "--tp", "8", "--enable-hisparse", "--disaggregation-mode", "decode"]
    config = ["--hisparse-config", '{"device_buffer_size": 4096}']
    text = cli_text(*argv, *launch, *config)
    line = next(x for x in text.splitlines() if x.startswith("  to serve it "))
    flag = '--hisparse-config \'{"device_buffer_size": 4096, "host_to_device_ratio": 10}\''
    assert line.startswith(f"  to serve it       {flag} (in place of"), line
    pasted = cli_text(*argv, *launch, *shlex.split(flag))
    assert "to serve it" not in pasted
    assert "\n  host_to_device_ratio 10 is the largest the RAM budget per rank allows" in pasted


def cli_text(*argv: str) -> str:
    proc = subprocess.run([EXE, *argv], capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout
