"""DecodeRuntime: built from a resolved configuration, its step protocol and its errors."""

from __future__ import annotations

import pytest
import torch

import hisparse_rs
from conftest import MODELS
from hisparse_rs.kernels import D_QK

DSV32 = MODELS / "deepseek-v3.2"


def connector(host_pool_gib: float) -> dict[str, object]:
    return {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": host_pool_gib},
    }


def small_runtime(**kw: object) -> hisparse_rs.DecodeRuntime:
    args: dict[str, object] = {
        "num_layers": 2,
        "index_topk": 4,
        "device_buffer_size": 8,
        "softmax_scale": 0.1,
        "block_size": 4,
        "num_host_blocks": 16,
        "max_num_seqs": 2,
    }
    args.update(kw)
    return hisparse_rs.DecodeRuntime(**args)  # type: ignore[arg-type]


def prefill(rt: hisparse_rs.DecodeRuntime, n: int) -> torch.Tensor:
    return torch.randn(rt.num_layers, n, D_QK).div(10).bfloat16()


def step_inputs(batch: int, heads: int = 8, s_q: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch, s_q, heads, D_QK).bfloat16(), torch.randn(batch, s_q, D_QK).div(10).bfloat16()


def test_from_a_resolved_deepseek_v32_configuration() -> None:
    cfg = hisparse_rs.resolve(
        DSV32,
        kv_cache_dtype="fp8_ds_mla",
        max_model_len=8192,
        kv_transfer_config=connector(0.5),
    )
    rt = hisparse_rs.DecodeRuntime.from_config(cfg, softmax_scale=0.1352338, max_num_seqs=1)
    assert cfg.hisparse is not None
    assert (rt.num_layers, rt.row_bytes, rt.device_buffer_size, rt.index_topk) == (61, 656, 4096, 2048)
    assert rt.pool.num_blocks == cfg.hisparse.host_blocks
    rt.add_request("r", prefill(rt, 4200))
    rt.begin_step(["r"])
    q, kv = step_inputs(1, heads=128)
    g = torch.Generator().manual_seed(0)
    topk = torch.randperm(4201, generator=g)[:2048].to(torch.int32)[None, None]
    first = rt.forward_layer(0, q, kv, topk)
    assert first.out.shape == (1, 1, 128, 512) and first.lse.shape == (1, 128, 1)
    # Cold hot buffer: every selected row outside the tail pages is copied in.
    assert first.misses + first.tail == 2048 and first.hits == 0
    assert first.host_to_device_bytes == first.misses * 656
    for layer in range(1, 61):
        rt.forward_layer(layer, q, kv, topk)
    rt.end_step()
    assert rt.num_tokens("r") == 4201
    m = rt.metrics.to_dict()
    assert m["hisparse_cache_misses"] == 61 * first.misses
    assert m["hisparse_host_to_device_bytes"] == 61 * first.misses * 656


def test_index_group_layers_replay_the_leaders_plan_and_count_their_bytes() -> None:
    rt = small_runtime(num_layers=3, index_groups=[7, 7, 9])
    assert rt.num_index_groups == 2
    rt.add_request("a", prefill(rt, 20))
    rt.begin_step(["a"])
    q, kv = step_inputs(1)
    topk = torch.tensor([[[0, 1, 2, 3]]], dtype=torch.int32)
    r0 = rt.forward_layer(0, q, kv, topk)
    # A follower's own top-k is not read: it replays the leader's.
    r1 = rt.forward_layer(1, q, kv, torch.tensor([[[5, 6, 7, 8]]], dtype=torch.int32))
    r2 = rt.forward_layer(2, q, kv, topk)
    rt.end_step()
    assert r0.misses == r1.misses == r2.misses == 4
    m = rt.metrics.to_dict()
    # hits/misses per group resolve (2), bytes for every layer that copied (3).
    assert m["hisparse_cache_misses"] == 8
    assert m["hisparse_host_to_device_bytes"] == 3 * 4 * rt.row_bytes


def test_requests_are_admitted_and_finished_between_steps() -> None:
    rt = small_runtime()
    rt.add_request("a", prefill(rt, 5))
    rt.add_request("b", prefill(rt, 9))
    with pytest.raises(ValueError, match="device regions"):
        rt.add_request("c", prefill(rt, 3))
    with pytest.raises(hisparse_rs.PoolError) as dup:
        rt.add_request("a", prefill(rt, 3))
    assert dup.value.code == "duplicate_request"
    positions = rt.begin_step(["b", "a"])
    assert positions.tolist() == [[9], [5]]
    with pytest.raises(ValueError, match="between steps"):
        rt.finish_request("a")
    q, kv = step_inputs(2)
    for layer in range(2):
        rt.forward_layer(layer, q, kv, torch.full((2, 1, 4), -1, dtype=torch.int32))
    rt.end_step()
    blocks_before = rt.pool.free_blocks
    rt.finish_request("a")
    assert rt.pool.free_blocks == blocks_before + 2
    assert rt.request_ids == ["b"]
    rt.add_request("c", prefill(rt, 3))  # the freed region is reused
    assert rt.request_ids == ["b", "c"]


def test_host_pool_exhaustion_changes_nothing() -> None:
    rt = small_runtime(num_host_blocks=4)
    rt.add_request("a", prefill(rt, 12))
    with pytest.raises(hisparse_rs.HostPoolExhausted) as err:
        rt.add_request("b", prefill(rt, 8))
    assert (err.value.needed, err.value.free) == (2, 1)
    assert rt.request_ids == ["a"] and rt.pool.free_blocks == 1
    rt.add_request("b", prefill(rt, 4))  # a region was not leaked


def test_step_protocol_errors() -> None:
    rt = small_runtime()
    rt.add_request("a", prefill(rt, 6))
    q, kv = step_inputs(1)
    topk = torch.tensor([[[0, 1, -1, -1]]], dtype=torch.int32)
    with pytest.raises(ValueError, match="no open step"):
        rt.forward_layer(0, q, kv, topk)
    with pytest.raises(hisparse_rs.PoolError) as unknown:
        rt.begin_step(["zz"])
    assert unknown.value.code == "unknown_request"
    rt.begin_step(["a"])
    with pytest.raises(ValueError, match="already open"):
        rt.begin_step(["a"])
    with pytest.raises(ValueError, match="outside"):
        rt.forward_layer(0, q, kv, torch.tensor([[[0, 7, -1, -1]]], dtype=torch.int32))  # 7 tokens: 0..6
    with pytest.raises(ValueError, match="q must be"):
        rt.forward_layer(0, q[:, :, :, :512], kv, topk)
    rt.forward_layer(0, q, kv, topk)
    with pytest.raises(ValueError, match="already ran"):
        rt.forward_layer(0, q, kv, topk)
    with pytest.raises(ValueError, match=r"layers \[1\] did not run"):
        rt.end_step()
    rt.forward_layer(1, q, kv, topk)
    rt.end_step()


def test_constructor_errors() -> None:
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        small_runtime(kv_cache_dtype="fp8_e4m3")
    with pytest.raises(ValueError, match="exactly one"):
        small_runtime(host_pool_gib=1.0)
    with pytest.raises(hisparse_rs.PoolError) as small_dbs:
        small_runtime(device_buffer_size=2)
    assert small_dbs.value.code == "topk_exceeds_device_buffer"
    cfg = hisparse_rs.resolve(DSV32, kv_cache_dtype="fp8_ds_mla")
    with pytest.raises(ValueError, match="not enabled"):
        hisparse_rs.DecodeRuntime.from_config(cfg, softmax_scale=0.1)


def test_import_hisparse_rs_does_not_load_the_runtime() -> None:
    import subprocess
    import sys

    code = "import sys, hisparse_rs; print('torch' in sys.modules, 'hisparse_rs.runtime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_step_that_does_not_fit_the_host_pool_changes_nothing() -> None:
    rt = small_runtime(num_host_blocks=3)
    rt.add_request("a", prefill(rt, 4))  # one full block: the next token needs another
    rt.add_request("b", prefill(rt, 8))  # two full blocks
    with pytest.raises(hisparse_rs.HostPoolExhausted) as err:
        rt.begin_step(["a", "b"])
    assert (err.value.needed, err.value.free) == (2, 0)
    assert (rt.num_tokens("a"), rt.num_tokens("b")) == (4, 8)
    rt.finish_request("b")
    assert rt.begin_step(["a"]).tolist() == [[4]]


def test_inputs_are_checked_before_anything_changes() -> None:
    rt = small_runtime()
    rt.add_request("a", prefill(rt, 20))  # positions 0-2 are outside the tail pages
    rt.begin_step(["a"])
    q, kv = step_inputs(1)
    topk = torch.tensor([[[0, 1, 2, -1]]], dtype=torch.int32)
    with pytest.raises(ValueError, match="q must be bfloat16"):
        rt.forward_layer(0, q.float(), kv, topk)
    with pytest.raises(ValueError, match="num_new_tokens"):
        rt.forward_layer(0, torch.cat([q, q], dim=1), torch.cat([kv, kv], dim=1), topk.expand(1, 2, 4))
    with pytest.raises(ValueError, match="topk_positions"):
        rt.forward_layer(0, q, kv, torch.zeros(1, 1, 5, dtype=torch.int32))  # wider than index_topk
    assert rt.metrics.to_dict()["hisparse_cache_misses"] == 0
    res = rt.forward_layer(0, q, kv, topk)  # the retry works: layer 0 was not used up
    assert res.misses == 3


def test_from_config_rejects_rows_it_cannot_hold_and_takes_a_smaller_pool() -> None:
    hisparse = connector(128)
    cfg = hisparse_rs.resolve(DSV32, kv_cache_dtype="fp8_ds_mla", kv_transfer_config=hisparse)
    rt = hisparse_rs.DecodeRuntime.from_config(cfg, softmax_scale=0.1, num_host_blocks=70, max_num_seqs=1)
    assert rt.pool.num_blocks == 70
    with pytest.raises(ValueError, match="exceeds"):
        hisparse_rs.DecodeRuntime.from_config(cfg, softmax_scale=0.1, num_host_blocks=10**9)
    flash = hisparse_rs.resolve(
        MODELS / "glm-5.3-flash-unquantized",
        hf_overrides={"index_topk": 2048},
        max_model_len=8192,
        kv_transfer_config=hisparse,
    )
    assert flash.hisparse is not None and flash.hisparse.row_bytes not in (656, 1152)
    with pytest.raises(ValueError, match="no runtime row format"):
        hisparse_rs.DecodeRuntime.from_config(flash, softmax_scale=0.1)


def test_from_config_shares_hot_buffer_state_across_indexshare_layers() -> None:
    cfg = hisparse_rs.resolve(
        MODELS / "glm-5.2",
        kv_cache_dtype="fp8_ds_mla",
        max_model_len=8192,
        kv_transfer_config=connector(64),
    )
    assert cfg.hisparse is not None
    groups = cfg.hisparse.index_groups
    # GLM-5.2: layers 0, 1, 2 and every 4th from 6 run an indexer (21 of 78).
    assert len(groups) == 78 and len(set(groups)) == 21
    assert groups[:8] == [0, 1, 2, 2, 2, 2, 3, 3]
    rt = hisparse_rs.DecodeRuntime.from_config(cfg, softmax_scale=0.0625, num_host_blocks=300, max_num_seqs=1)
    assert rt.num_index_groups == 21
    dsv32 = hisparse_rs.resolve(
        DSV32,
        kv_cache_dtype="fp8_ds_mla",
        speculative_config={"method": "mtp", "num_speculative_tokens": 1},
        kv_transfer_config=connector(128),
    )
    assert dsv32.hisparse is not None
    assert dsv32.hisparse.index_groups == list(range(62))  # 61 layers + the MTP draft layer
