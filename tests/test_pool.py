"""Hand cases for the host KV pool, the pool layout and buffer, and the metrics."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

import hisparse_rs
from conftest import MODELS
from hisparse_rs import HiSparseMetrics, HostKVPool, HostPoolExhausted, PoolError, PoolLayout

HISPARSE = {
    "kv_connector": "HiSparseConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 8},
}


def test_admit_append_free_lowest_block_first() -> None:
    p = HostKVPool(8, 4, 656, 2)
    assert p.admit("a", 5).tolist() == [0, 1]
    assert p.admit("b", 4).tolist() == [2]
    assert p.append("a", 3).tolist() == []  # 8 tokens still fit 2 blocks
    assert p.append("a", 1).tolist() == [3]  # allocated only at the boundary
    assert p.free("a") == 3
    assert p.admit("c", 9).tolist() == [0, 1, 3]
    assert p.block_table("c").dtype == np.int32
    assert p.host_rows("c", [0, 4, 8, -1]).tolist() == [0, 4, 12, -1]
    s = p.stats()
    assert (s.blocks_used, s.blocks_total, s.num_requests, s.usage) == (4, 8, 2, 0.5)
    assert p.request_ids() == ["b", "c"] and "c" in p and "a" not in p


def test_exhaustion_changes_nothing() -> None:
    p = HostKVPool(3, 16, 656, 1)
    p.admit("a", 20)
    with pytest.raises(HostPoolExhausted) as e:
        p.admit("b", 33)
    assert (e.value.needed, e.value.free, e.value.code) == (3, 1, "host_pool_exhausted")
    assert isinstance(e.value, PoolError)
    assert "b" not in p and p.free_blocks == 1
    with pytest.raises(HostPoolExhausted):
        p.append("a", 30)
    assert p.num_tokens("a") == 20 and p.block_table("a").tolist() == [0, 1]
    assert not p.can_admit(17) and p.can_admit(16)
    back = pickle.loads(pickle.dumps(e.value))
    assert (back.needed, back.free, back.code) == (3, 1, "host_pool_exhausted")


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda p: p.admit("a", 1), "duplicate_request"),
        (lambda p: p.free("zz"), "unknown_request"),
        (lambda p: p.append("zz", 1), "unknown_request"),
        (lambda p: p.host_rows("a", [4]), "position_out_of_range"),
        (lambda p: p.host_rows("a", [-2]), "position_out_of_range"),
        (lambda p: p.layout().local_layer(2), "layer_out_of_range"),
    ],
)
def test_errors_have_codes(call: object, code: str) -> None:
    p = HostKVPool(4, 4, 656, 2)
    p.admit("a", 4)
    with pytest.raises(PoolError) as e:
        call(p)  # type: ignore[operator]
    assert e.value.code == code
    assert code in hisparse_rs.pool_error_codes()


def test_row_ids_beyond_2_31_are_64_bit() -> None:
    p = HostKVPool(256, 1 << 24, 656, 1)
    p.admit("x", 255 << 24)
    p.admit("y", 1 << 24)
    rows = p.host_rows("y", np.array([0, 5], np.int64))
    assert rows.dtype == np.int64
    assert rows.tolist() == [255 << 24, (255 << 24) + 5]


def test_sizes_from_host_pool_gib_and_config() -> None:
    p = HostKVPool.from_host_pool_gib(1.0, 64, 656, 61)
    assert p.host_block_bytes == 64 * 656 * 61 == 2_561_024
    assert p.num_blocks == 2**30 // 2_561_024
    with pytest.raises(PoolError) as e:
        HostKVPool.from_host_pool_gib(0.001, 64, 656, 61)
    assert e.value.code == "invalid_size"
    resolved = hisparse_rs.resolve(
        MODELS / "deepseek-v3.2", kv_transfer_config=HISPARSE, kv_cache_dtype="fp8_ds_mla"
    )
    h = resolved.hisparse
    assert h is not None
    pool = HostKVPool.from_config(resolved)
    assert (pool.num_blocks, pool.block_size, pool.row_bytes, pool.num_layers) == (
        h.host_blocks,
        h.block_size,
        656,
        h.sparse_mla_layers,
    )
    r = hisparse_rs.ResidencyResolver.from_config(resolved, metrics=pool.metrics)
    assert (r.device_buffer_size, r.topk, r.num_host_rows) == (4096, 2048, pool.num_host_rows)
    assert HostKVPool.from_config(h).num_blocks == pool.num_blocks
    off = hisparse_rs.resolve(MODELS / "deepseek-v3.2")
    with pytest.raises(PoolError) as e:
        HostKVPool.from_config(off)
    assert e.value.code == "settings_incomplete"


def test_layout_regions_disjoint_and_stage_local() -> None:
    layout = PoolLayout(1000, 656, 30, first_layer=31)
    assert (layout.first_layer, layout.end_layer, layout.layer_stride) == (31, 61, 656_000)
    regions = [layout.layer_region(g) for g in range(31, 61)]
    assert regions[0] == (0, 656_000)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(regions))
    assert regions[-1][1] == layout.total_bytes
    assert layout.local_layer(31) == 0 and layout.row_offset(32, 2) == 656_000 + 2 * 656
    for bad in (0, 30, 61, -1):
        with pytest.raises(PoolError) as e:
            layout.local_layer(bad)
        assert e.value.code == "layer_out_of_range"
    padded = PoolLayout(10, 656, 2, layer_stride=8192)
    assert padded.layer_region(1) == (8192, 8192 + 6560)
    with pytest.raises(PoolError):
        PoolLayout(10, 656, 2, layer_stride=6559)


def test_pool_buffer_layer_views_are_views() -> None:
    pool = HostKVPool(4, 4, 16, 3)
    layout = pool.layout(first_layer=2)
    buf = hisparse_rs.allocate_pool_buffer(layout, backend="numpy")
    assert buf.shape == (layout.total_bytes,) and buf.dtype == np.uint8
    views = hisparse_rs.layer_views(buf, layout)
    assert [v.shape for v in views] == [(16, 16)] * 3
    buf[:] = 0
    views[1][5, :] = 7  # global layer 3, host row 5
    start = layout.row_offset(3, 5)
    assert (buf[start : start + 16] == 7).all() and buf.sum() == 7 * 16
    with pytest.raises(PoolError):
        hisparse_rs.layer_view(buf, layout, 5)
    with pytest.raises(ValueError, match="bytes"):
        hisparse_rs.layer_view(buf[:-1], layout, 2)
    with pytest.raises(ValueError, match="uint8"):
        hisparse_rs.layer_view(buf.view(np.int8), layout, 2)
    with pytest.raises(ValueError, match="backend"):
        hisparse_rs.allocate_pool_buffer(layout, backend="cuda")


def test_metrics_shared_by_pool_and_resolver() -> None:
    metrics = HiSparseMetrics()
    pool = HostKVPool(10, 4, 656, 1, metrics=metrics)
    pool.admit("r", 10)
    r = hisparse_rs.ResidencyResolver(8, 4, pool.num_host_rows, 656, metrics=pool.metrics)
    s = r.new_state()
    r.resolve([pool.host_rows("r", [0, 1, 2, 9])], [s])
    r.resolve([[0, 1, 2, 3]], [s])
    d = metrics.to_dict()
    assert d["hisparse_cache_hits"] == 3 and d["hisparse_cache_misses"] == 5
    assert d["hisparse_host_to_device_bytes"] == 5 * 656
    assert d["hisparse_host_cache_usage_perc"] == pytest.approx(0.3)
    text = metrics.prometheus_text({"model_name": "glm-5", "engine": "0"})
    assert "# TYPE vllm:hisparse_cache_hits_total counter" in text
    assert 'vllm:hisparse_cache_misses_total{engine="0",model_name="glm-5"} 5.0' in text
    assert "# TYPE vllm:hisparse_host_cache_usage_perc gauge" in text
    assert text.endswith("\n")
    with pytest.raises(ValueError, match="label"):
        metrics.prometheus_text({"bad-name": "x"})
