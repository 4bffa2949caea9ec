"""``hisparse_rs.plan(..., engine_log=...)``: the plan from an engine's start-up log
(tests/data/engine_logs/README.md says where each fixture comes from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hisparse_rs
from conftest import MODELS

LOGS = Path(__file__).resolve().parent / "data" / "engine_logs"
DSV32 = str(MODELS / "deepseek-v3.2")
HISPARSE = {
    "kv_connector": "HiSparseConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 128},
}
SGLANG = dict(
    tp_size=8,
    enable_hisparse=True,
    disaggregation_mode="decode",
    hisparse_config='{"device_buffer_size": 4096}',
)


def test_sglang_plan_takes_the_weights_and_room_of_its_log() -> None:
    plan = hisparse_rs.plan(
        DSV32,
        engine="sglang",
        gpu="h200",
        host_memory_gib=2048,
        engine_log=LOGS / "sglang-dsv32-tp8-hisparse.log",
        **SGLANG,
    )
    log = plan.engine_log
    assert log is not None and log["engine"] == "sglang" and log["logged_hisparse"]
    assert [m["input"] for m in log["measured"]] == ["weights_gib", "available_kv_cache_gib"]
    assert log["measured"][0]["value"] == 78.2
    gpu = json.loads(plan.to_json())["gpu"]
    assert gpu["kv_source"].startswith("measured:")
    assert gpu["kv_bytes_per_gpu"] == int((62.2 - (62.2 + 78.2) * (1 - 0.929)) * 2**30)


def test_a_log_of_another_layout_is_an_error_in_the_plan() -> None:
    plan = hisparse_rs.plan(
        DSV32,
        engine="sglang",
        gpu="h200",
        host_memory_gib=2048,
        engine_log=str(LOGS / "sglang-dsv32-tp8-hisparse.log"),
        **{**SGLANG, "tp_size": 4},
    )
    assert not plan.valid
    (mismatch,) = (e for e in plan.errors if e.code == "engine_log_mismatch")
    assert mismatch.path == "engine_log.tp_size"
    assert plan.engine_log is not None and plan.engine_log["measured"] == []


def test_vllm_reads_an_older_logs_capacity_lines() -> None:
    plan = hisparse_rs.plan(
        DSV32,
        tensor_parallel_size=8,
        kv_cache_dtype="fp8_ds_mla",
        kv_transfer_config=HISPARSE,
        gpu="h200",
        host_memory_gib=2048,
        engine_log=LOGS / "vllm-issue-15928-excerpt.log",
    )
    log = plan.engine_log
    assert log is not None and log["lines"] == 6 and log["measured"] == []
    assert log["compared"][0]["logged"] == 3.29
    assert hisparse_rs.plan(DSV32, kv_transfer_config=HISPARSE, gpu="h200").engine_log is None


def test_unreadable_logs_raise(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot open it"):
        hisparse_rs.plan(DSV32, kv_transfer_config=HISPARSE, gpu="h200", engine_log=tmp_path / "none.log")
    empty = tmp_path / "empty.log"
    empty.write_text("INFO nothing here\n")
    with pytest.raises(ValueError, match=r"no vLLM 0\.33\.0 start-up line in its one line"):
        hisparse_rs.plan(DSV32, kv_transfer_config=HISPARSE, gpu="h200", engine_log=empty)
    with pytest.raises(ValueError, match="SGLang's start-up lines instead"):
        hisparse_rs.plan(
            DSV32, kv_transfer_config=HISPARSE, gpu="h200", engine_log=LOGS / "sglang-dsv32-tp8-hisparse.log"
        )
    with pytest.raises(TypeError):
        hisparse_rs.plan(DSV32, kv_transfer_config=HISPARSE, gpu="h200", engine_log=3)  # type: ignore[arg-type]


def test_plan_figures_say_what_each_figure_is() -> None:
    """Issue 21 item 3: Plan.figures (the JSON's figures), both engines: estimated from
    config.json, measured from a log, unknown without GPU memory."""
    sglang = dict(engine="sglang", gpu="h200", host_memory_gib=2048, **SGLANG)
    estimated = hisparse_rs.plan(DSV32, **sglang)
    assert estimated.figures == {
        "sizes": "exact",
        "host_pool": "estimated",  # SGLang sizes the host pool from the device slots
        "weights": "estimated",
        "kv_room": "estimated",
        "gpu_blocks": "estimated",
        "host_limit": "estimated",
        "requests": "estimated",
    }
    logged = hisparse_rs.plan(DSV32, engine_log=LOGS / "sglang-dsv32-tp8-hisparse.log", **sglang)
    assert logged.figures["kv_room"] == logged.figures["requests"] == "measured"
    assert logged.figures["weights"] is None  # the room is measured: the weights are not used
    assert json.loads(logged.to_json())["figures"] == logged.figures
    vllm = dict(kv_transfer_config=HISPARSE, tensor_parallel_size=8, host_memory_gib=2048)
    given = hisparse_rs.plan(DSV32, gpu="h200", weights_gib=78.5, **vllm)
    assert given.figures["weights"] == "measured" and given.figures["kv_room"] == "estimated"
    assert given.figures["host_pool"] == given.figures["host_limit"] == "exact"
    none = hisparse_rs.plan(DSV32, **vllm)
    assert none.figures["kv_room"] == none.figures["requests"] == "unknown"
    assert none.at_context.hisparse_requests is None


def test_plan_explains_the_concurrency() -> None:
    """Issue 21 item 4 (vllm#51041): one request's blocks that grow with its context and
    those that do not, both engines, in Plan.concurrency and the JSON."""
    vllm = hisparse_rs.plan(
        DSV32,
        kv_transfer_config=HISPARSE,
        tensor_parallel_size=8,
        kv_cache_dtype="fp8_ds_mla",
        gpu_memory_gib=140,
        host_memory_gib=2048,
    )
    c = vllm.concurrency
    assert c is not None and c["unit"] == "blocks"
    # 163,840 / 64 = 2,560 indexer blocks; 6 hot groups x (4096 / 64 + 2 tail) = 396 fixed
    assert (c["per_token_units"], c["fixed_units"]) == (2560, 396)
    assert c["per_token_units"] + c["fixed_units"] == vllm.at_context.hisparse_gpu_blocks_per_request
    assert c["gpu_units"] == vllm.gpu.hisparse_blocks and "vllm#51041" in c["why"]
    short = hisparse_rs.plan(
        DSV32,
        kv_transfer_config=HISPARSE,
        tensor_parallel_size=8,
        kv_cache_dtype="fp8_ds_mla",
        gpu_memory_gib=140,
        host_memory_gib=2048,
        context_length=8192,
    ).concurrency
    assert short is not None and short["fixed_units"] == 396 and short["fixed_share"] > c["fixed_share"]
    sglang = hisparse_rs.plan(DSV32, engine="sglang", gpu="h200", host_memory_gib=2048, **SGLANG)
    s = sglang.concurrency
    assert s is not None and s["unit"] == "slots" and s["per_token_units"] == 0
    assert s["fixed_units"] == 4096 + 64 == json.loads(sglang.to_json())["sglang"]["request_device_slots"]
    assert json.loads(sglang.to_json())["concurrency"] == s


def test_vllm_log_made_by_vllm_replans_to_its_logged_capacity() -> None:
    """tests/data/engine_logs/vllm-dsv32-tp8-hisparse.log (tests/vllm/make_engine_logs.py:
    vLLM 0.33.0's own log statements and capacity functions): the re-plan from its
    measured room equals every capacity figure the log states."""
    plan = hisparse_rs.plan(
        DSV32,
        kv_transfer_config=HISPARSE,
        tensor_parallel_size=8,
        kv_cache_dtype="fp8_ds_mla",
        gpu="h200",
        host_memory_gib=2048,
        engine_log=LOGS / "vllm-dsv32-tp8-hisparse.log",
    )
    log = plan.engine_log
    assert log is not None and log["engine"] == "vllm" and log["logged_hisparse"]
    assert [(m["input"], m["value"]) for m in log["measured"]] == [
        ("weights_gib", 78.63),
        ("available_kv_cache_gib", 47.35),
    ]
    compared = {c["figure"]: (c["logged"], c["computed"]) for c in log["compared"]}
    assert compared == {
        "GPU pool blocks (the HiSparse HMA line)": (93152, 93152),
        "host pool blocks (the HiSparse HMA line)": (53601, 53601),
        # vLLM's admission concurrency: 93,152 / (2,560 + 6 x (64 hot + 256 in-flight window))
        "Maximum concurrency (GPU + host), requests at max_model_len": (20.79, 20.79),
        "KV cache size (max_concurrency x max_model_len, not a per-token capacity)": (3406701, 3406701),
    }
    assert all(c["difference"] == 0 for c in log["compared"])
    assert plan.figures["kv_room"] == "measured"
