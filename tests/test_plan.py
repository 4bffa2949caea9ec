"""The capacity planner from Python: the field cases of issue 3, hand-computed
figures for real DeepSeek-V3.2 / GLM-5.2 configs, properties (hypothesis), and
the plot. Host RAM is always given, so no test depends on this machine."""

from __future__ import annotations

import itertools
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hisparse_rs
from conftest import MODELS

DSV32 = MODELS / "deepseek-v3.2"
GLM52 = MODELS / "glm-5.2"
GIB = 2**30


def hisparse(host_pool_gib: float) -> dict[str, Any]:
    return {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": host_pool_gib},
    }


def plan(model: Path = DSV32, host_pool_gib: float = 128, **kwargs: Any) -> hisparse_rs.Plan:
    kwargs.setdefault("host_memory_gib", 2048)
    kwargs.setdefault("kv_cache_dtype", "fp8_ds_mla")
    return hisparse_rs.plan(model, kv_transfer_config=hisparse(host_pool_gib), **kwargs)


def test_one_million_tokens_of_dsv32_host_kv_are_656_bytes_per_layer() -> None:
    p = plan(
        host_pool_gib=64,
        hf_overrides={"max_position_embeddings": 1_048_576},
        max_model_len=1_000_000,
    )
    assert p.sizes.mla_row_bytes == 656 and p.sizes.sparse_mla_layers == 61
    assert p.at_context.host_kv_bytes_per_request == 656 * 61 * 1_000_000 == 40_016_000_000
    # Indexer keys separately: 132 B per token per layer, on the GPU.
    assert p.at_context.indexer_bytes_per_request == 132 * 61 * 1_000_000


@pytest.mark.parametrize("kv_gib", [1, 20, 80])
def test_gpu_room_never_resizes_the_host_pool(kv_gib: int) -> None:
    p = plan(host_pool_gib=32, block_size=64, kv_cache_memory_bytes=kv_gib * GIB)
    assert p.host.host_block_bytes == 2_561_024
    assert p.host.host_blocks == 13_416


def test_shared_and_private_pools_and_the_ram_check() -> None:
    shared = plan(host_pool_gib=100, tensor_parallel_size=4, host_memory_gib=256)
    assert shared.host.mode == "shared" and shared.host.pools_per_node == 1
    assert 99 * GIB < shared.host.pinned_bytes_per_node <= 100 * GIB
    assert shared.valid

    args = hisparse_rs.serve_args(
        DSV32,
        kv_transfer_config=hisparse(100),
        kv_cache_dtype="fp8_ds_mla",
        tensor_parallel_size=4,
        distributed_executor_backend="ray",
    )
    private = hisparse_rs.plan_args(args, host_memory_gib=256)
    assert private.host.mode == "private" and private.host.pools_per_node == 4
    assert 399 * GIB < private.host.pinned_bytes_per_node <= 400 * GIB
    assert not private.valid
    (err,) = private.errors
    assert err.code == "host_memory_exceeded"
    assert err.path == "kv_transfer_config.kv_connector_extra_config.host_pool_gib"
    fixed = hisparse_rs.plan_args(hisparse_rs.apply_fix(args, err.fix), host_memory_gib=256)
    assert fixed.valid, fixed.errors


def test_glm52_calculator_figures() -> None:
    # See rust/hisparse-core/tests/plan.rs glm52_calculator_case for why 80K gives 34, not 39.
    p = plan(
        GLM52,
        host_pool_gib=512,
        tensor_parallel_size=8,
        max_num_seqs=1024,
        kv_cache_memory_bytes=int(17.85 * GIB),
        context_length=81920,
    )
    assert (p.sizes.indexer_layers, p.sizes.hot_groups, p.sizes.hisparse_block_bytes) == (21, 20, 209_920)
    assert (p.at_context.baseline_requests, p.at_context.hisparse_requests) == (4, 34)
    assert p.at_context.hisparse_limit == "gpu"
    last = p.sweep[-1]
    assert (last.context_length, last.baseline_requests, last.hisparse_requests) == (1_048_576, 0, 5)


def test_estimated_weights_are_said_to_be_estimated() -> None:
    p = plan(tensor_parallel_size=8, gpu_memory_gib=140)
    assert p.gpu.weights_estimated and "estimated" in (p.gpu.weights_source or "")
    assert p.gpu.gpu_memory_utilization == 0.92 and p.gpu.max_num_seqs == 1024
    given_weights = plan(tensor_parallel_size=8, gpu_memory_gib=140, weights_gib=80)
    assert not given_weights.gpu.weights_estimated
    assert given_weights.gpu.weights_bytes_per_gpu == 80 * GIB


def test_errors() -> None:
    with pytest.raises(hisparse_rs.ConfigError) as info:
        plan(block_size=16)
    assert [e.code for e in info.value.errors] == ["block_size_unsupported"]
    with pytest.raises(ValueError, match=r"not configured, and it cannot be.*model_not_dsa"):
        hisparse_rs.plan(MODELS / "llama-3.1-8b", host_memory_gib=64)
    with pytest.raises(ValueError, match="not a GPU hisparse-check knows; did you mean h200"):
        plan(gpu="h2000")
    with pytest.raises(ValueError, match="longer than max_model_len"):
        plan(context_length=1_000_000)
    with pytest.raises(TypeError):
        hisparse_rs.plan(DSV32, no_such_flag=1)


def test_json_schema_is_stable() -> None:
    out = json.loads(plan(tensor_parallel_size=8, gpu_memory_gib=140).to_json())
    assert set(out) == {
        "schema_version",
        "engine",
        "engine_version",
        "vllm_version",
        "valid",
        "model",
        "context_length",
        "max_model_len",
        "sizes",
        "host",
        "gpu",
        "at_context",
        "sweep",
        "errors",
        "warnings",
        "figures",  # issue 21 item 3: fields are only added within a schema version
        "concurrency",  # issue 21 item 4
    }
    assert out["schema_version"] == 2
    assert set(out["at_context"]) == {
        "context_length",
        "host_kv_bytes_per_request",
        "indexer_bytes_per_request",
        "baseline_gpu_bytes_per_request",
        "hisparse_gpu_blocks_per_request",
        "hisparse_gpu_bytes_per_request",
        "host_blocks_per_request",
        "baseline_requests",
        "baseline_limit",
        "gpu_limit",
        "host_limit",
        "hisparse_requests",
        "hisparse_limit",
        "target_requests",
        "min_host_pool_gib",
        "min_host_pool_requests",
    }
    # The Python objects expose the same fields as the JSON.
    p = plan(tensor_parallel_size=8, gpu_memory_gib=140)
    for section in ("sizes", "host", "gpu", "at_context"):
        for key, value in out[section].items():
            assert getattr(getattr(p, section), key) == value, (section, key)


# ---------------------------------------------------------------------------
# Properties.

KV_GIB = st.integers(min_value=1, max_value=2048)
POOL_GIB = st.sampled_from([16, 64, 256, 1024])


@given(kv_gib=KV_GIB, pool=POOL_GIB, tp=st.sampled_from([1, 4, 8]), seqs=st.integers(1, 4096))
def test_monotone_in_context_and_never_below_baseline(kv_gib: int, pool: int, tp: int, seqs: int) -> None:
    p = plan(
        host_pool_gib=pool,
        tensor_parallel_size=tp,
        kv_cache_memory_bytes=kv_gib * GIB,
        max_num_seqs=seqs,
        max_model_len=65536,
    )
    points = p.sweep
    for a, b in itertools.pairwise(points):
        assert a.context_length < b.context_length
        assert b.hisparse_requests is not None and a.hisparse_requests is not None
        assert b.hisparse_requests <= a.hisparse_requests
        assert b.baseline_requests is not None and a.baseline_requests is not None
        assert b.baseline_requests <= a.baseline_requests
    for x in points:
        assert x.hisparse_requests is not None and x.baseline_requests is not None
        assert x.baseline_requests <= x.hisparse_requests <= seqs


def test_the_suggested_pool_fits_the_nodes_ram() -> None:
    # A 160 GiB node: the pool for what the GPUs hold (201.74 GiB) does not fit,
    # so the plan suggests the most it pins, which holds fewer and passes the check.
    p = plan(tensor_parallel_size=8, gpu_memory_gib=140, host_memory_gib=160)
    at = p.at_context
    assert at.target_requests == 32 and at.min_host_pool_gib == 152
    assert at.min_host_pool_requests == 24
    report = hisparse_rs.check(
        DSV32,
        tensor_parallel_size=8,
        kv_cache_dtype="fp8_ds_mla",
        kv_transfer_config=hisparse(at.min_host_pool_gib),
        host_memory_gib=160,
    )
    assert report.valid, report.errors
    roomy = plan(tensor_parallel_size=8, gpu_memory_gib=140).at_context
    assert roomy.min_host_pool_requests == roomy.target_requests == 32


@given(kv_gib=KV_GIB, pool=POOL_GIB, extra=st.integers(1, 1024))
def test_monotone_in_host_pool(kv_gib: int, pool: int, extra: int) -> None:
    small = plan(host_pool_gib=pool, kv_cache_memory_bytes=kv_gib * GIB, max_model_len=65536)
    big = plan(host_pool_gib=pool + extra, kv_cache_memory_bytes=kv_gib * GIB, max_model_len=65536)
    assert big.host.host_blocks >= small.host.host_blocks
    for a, b in zip(small.sweep, big.sweep, strict=True):
        assert b.host_limit >= a.host_limit
        assert (b.hisparse_requests or 0) >= (a.hisparse_requests or 0)


def test_no_overflow_at_one_million_tokens_and_one_tib_pools() -> None:
    p = plan(
        GLM52,
        host_pool_gib=1024,
        kv_cache_dtype="bfloat16",
        tensor_parallel_size=8,
        data_parallel_size=8,
        kv_cache_memory_bytes=2**62,
        host_memory_gib=1e9,
    )
    last = p.sweep[-1]
    assert last.context_length == 1_048_576
    assert last.host_kv_bytes_per_request == 1_048_576 * 1152 * 78
    assert p.host.pinned_bytes_per_node > 8 * 1023 * GIB


# ---------------------------------------------------------------------------
# The plot.


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_plot_writes_a_valid_png(tmp_path: Path) -> None:
    from matplotlib.image import imread

    p = plan(tensor_parallel_size=8, gpu_memory_gib=140)
    out = hisparse_rs.plot_plan(p, tmp_path / "plan.png")
    width, height = png_size(out)
    assert width > 400 and height > 200
    pixels = imread(out)  # decodes
    assert pixels.shape[:2] == (height, width)


def test_plot_needs_gpu_figures(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gpu_memory_gib"):
        hisparse_rs.plot_plan(plan(), tmp_path / "plan.png")
    assert not (tmp_path / "plan.png").exists()


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("host_memory_gib", float("nan"), ValueError),
        ("weights_gib", float("inf"), ValueError),
        ("gpu_memory_gib", -1.0, ValueError),
        ("context_length", -1, ValueError),
        ("context_length", 1.5, TypeError),
        ("target_requests", "3", TypeError),
    ],
)
def test_bad_planner_options_are_named(option: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=option):
        plan(**{option: value})


# ---------------------------------------------------------------------------
# Issue 10 items 9 and 10, issue 9 item 5: what the plan says about the machines.


def test_without_hisparse_the_plan_assumes_the_connector_it_would_take() -> None:
    p = hisparse_rs.plan(
        DSV32, kv_cache_dtype="fp8_ds_mla", tensor_parallel_size=8, gpu="h200", host_memory_gib=2048
    )
    assert p.valid and p.assumed is not None
    assumed = p.assumed
    assert assumed["kv_transfer_config"]["kv_connector"] == "HiSparseConnector"
    # With the GPU known, the assumed pool is the one that lets the GPUs bind.
    assert assumed["host_pool_gib"] == p.at_context.min_host_pool_gib
    assert "lets the GPUs bind" in assumed["host_pool_rule"]
    assert p.at_context.hisparse_limit == "gpu"
    # Without it, the start-up minimum, and the plan says so.
    bare = hisparse_rs.plan(DSV32, kv_cache_dtype="fp8_ds_mla", host_memory_gib=2048)
    assert bare.assumed is not None and "start-up minimum" in bare.assumed["host_pool_rule"]
    assert bare.assumed["host_pool_gib"] == bare.host.min_host_pool_gib


def test_gpu_fills_the_memory_and_is_named() -> None:
    by_name = plan(tensor_parallel_size=8, gpu="h200")
    assert by_name.gpu.gpu_memory_gib == 141 and by_name.gpu.gpu_name == "h200"
    given = plan(tensor_parallel_size=8, gpu="h200", gpu_memory_gib=140)
    assert given.gpu.gpu_memory_gib == 140  # the given figure wins


def test_a_plan_that_serves_no_request_is_invalid_with_a_fix_that_passes() -> None:
    args = hisparse_rs.serve_args(
        DSV32, kv_transfer_config=hisparse(128), kv_cache_dtype="fp8_ds_mla",
        tensor_parallel_size=8, kv_cache_memory_bytes=GIB,
    )  # fmt: skip
    p = hisparse_rs.plan_args(args, host_memory_gib=2048)
    assert p.at_context.hisparse_requests == 0 and not p.valid
    (err,) = p.errors
    assert err.code == "plan_serves_no_requests" and "the GPUs bind" in err.message
    fixed = hisparse_rs.plan_args(hisparse_rs.apply_fix(args, err.fix), host_memory_gib=2048)
    assert fixed.valid and (fixed.at_context.hisparse_requests or 0) >= 1


def test_this_machines_ram_is_said_and_only_warned_about() -> None:
    # No host_memory_gib: this machine's MemAvailable, and 100 TiB of pools only warn.
    p = hisparse_rs.plan(
        DSV32, kv_transfer_config=hisparse(100_000), kv_cache_dtype="fp8_ds_mla", tensor_parallel_size=8
    )
    assert not p.host.host_memory_given and "MemAvailable" in p.host.host_memory_source
    assert p.valid and p.errors == ()
    assert "host_memory_not_given" in [w.code for w in p.warnings]
    # Given, the same pools are an error.
    given = plan(host_pool_gib=100_000, tensor_parallel_size=8, host_memory_gib=2048)
    assert given.host.host_memory_given and not given.valid
    assert [e.code for e in given.errors] == ["host_memory_exceeded"]
