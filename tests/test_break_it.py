"""Break-it suite, part 1: hostile inputs and failed calls (issue 10).

Each test holds one defect kind at its mechanism (docs/limits.md):
- every public call raises only its documented errors, naming the argument
  (no OverflowError, RecursionError, PanicException);
- every public mutating call of HostKVPool, ResidencyResolver and
  HiSparseMetrics leaves the state exactly as it was after each kind of
  failure (PoolLayout is immutable: its failures are construction failures);
- inputs of unbounded size or depth are refused with their own error;
- ``check()`` never raises where it is documented not to.
Threads, interpreter exit and the CLI's hostile files are part 2
(``test_break_it_threads.py``) and ``test_cli.py`` / the Rust
``cli_never_panics.rs``. Failed DecodeRuntime calls (injected kernel failures
after the resolve, on both resolver paths) are ``test_runtime_undo.py``; the
Triton resolver's refusals (dead states, width 0, aliasing) are in
``test_kernels_resolver.py``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import hisparse_rs
from conftest import HANG_S, MODELS
from hisparse_rs import (
    HiSparseMetrics,
    HostKVPool,
    HostPoolExhausted,
    PoolError,
    PoolLayout,
    ResidencyResolver,
)

DSV32 = str(MODELS / "deepseek-v3.2")
HS: dict[str, Any] = {
    "kv_connector": "HiSparseConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 64},
}
HUGE = [-1, 2**64, -(2**70), 10**400]


# --- state snapshots -----------------------------------------------------------------


def pool_state(p: HostKVPool) -> Any:
    ids = p.request_ids()
    return (
        p.free_blocks,
        p.stats(),
        ids,
        [(p.block_table(i).tolist(), p.num_tokens(i)) for i in ids],
        p.metrics.to_dict(),
    )


def resolver_state(r: ResidencyResolver, states: list[int]) -> Any:
    return (
        r.num_states,
        [(r.slot_rows(s).tolist(), r.lru_order(s).tolist()) for s in states],
        r.metrics.to_dict(),
    )


def fails_unchanged(
    snapshot: Callable[[], Any], call: Callable[[], Any], error: type[BaseException]
) -> BaseException:
    before = snapshot()
    with pytest.raises(error) as info:
        call()
    assert snapshot() == before, f"{call} changed state on failure"
    return info.value


# --- failed calls change nothing -------------------------------------------------------


def busy_pool() -> HostKVPool:
    p = HostKVPool(6, 4, 656, 2)
    p.admit("a", 9)
    p.admit("b", 4)
    return p


@pytest.mark.parametrize(
    ("call", "error", "code"),
    [
        (lambda p: p.admit("a", 1), PoolError, "duplicate_request"),
        (lambda p: p.admit("c", 100), HostPoolExhausted, "host_pool_exhausted"),
        (lambda p: p.admit("c", -1), PoolError, "invalid_size"),
        (lambda p: p.admit("c", 2**64), PoolError, "invalid_size"),
        (lambda p: p.admit("c", 1.5), TypeError, None),
        (lambda p: p.admit(7, 1), TypeError, None),
        (lambda p: p.append("zz", 1), PoolError, "unknown_request"),
        (lambda p: p.append("a", 100), HostPoolExhausted, "host_pool_exhausted"),
        (lambda p: p.append("a", 2**64 - 1), PoolError, "invalid_size"),
        (lambda p: p.append("a", -3), PoolError, "invalid_size"),
        (lambda p: p.free("zz"), PoolError, "unknown_request"),
        (lambda p: p.free(None), TypeError, None),
        (lambda p: p.host_rows("a", [0, 9]), PoolError, "position_out_of_range"),
        (lambda p: p.host_rows("zz", [0]), PoolError, "unknown_request"),
        (lambda p: p.host_rows("a", np.array([0.5])), TypeError, None),
        (lambda p: p.layout(-1), PoolError, "invalid_size"),
        (lambda p: p.blocks_for(-1), PoolError, "invalid_size"),
        (lambda p: p.can_admit(2**64), PoolError, "invalid_size"),
    ],
)
def test_every_failed_pool_call_changes_nothing(
    call: Callable[[HostKVPool], Any], error: type, code: str | None
) -> None:
    p = busy_pool()
    e = fails_unchanged(lambda: pool_state(p), lambda: call(p), error)
    if code is not None:
        assert isinstance(e, PoolError) and e.code == code


def busy_resolver() -> tuple[ResidencyResolver, list[int]]:
    r = ResidencyResolver(4, 2, 100, 656)
    states = [r.new_state(), r.new_state()]
    r.resolve(np.array([[1, 2], [3, 4]], np.int32), np.array(states, np.int32))
    return r, states


@pytest.mark.parametrize(
    ("call", "error", "code"),
    [
        (lambda r: r.resolve(np.zeros((1, 3), np.int32), np.zeros(1, np.int32)), PoolError, "topk_too_wide"),
        (lambda r: r.resolve(np.zeros((2, 2), np.int32), np.zeros(1, np.int32)), PoolError, "shape_mismatch"),
        (lambda r: r.resolve(np.zeros((1, 2), np.int32), np.array([7])), PoolError, "unknown_state"),
        (lambda r: r.resolve(np.zeros((1, 2), np.int32), np.array([2**62])), PoolError, "unknown_state"),
        (
            lambda r: r.resolve(np.array([[5, 6], [7, 8], [9, 10]]), np.array([0, 0, 0])),
            PoolError,
            "union_exceeds_device_buffer",
        ),
        (lambda r: r.resolve(np.zeros((1, 2), np.float32), np.zeros(1, np.int32)), TypeError, None),
        (lambda r: r.reset_state(9), PoolError, "unknown_state"),
        (lambda r: r.reset_state(-(2**70)), PoolError, "unknown_state"),
        (lambda r: r.free_state(2**64), PoolError, "unknown_state"),
        (lambda r: r.free_state("0"), TypeError, None),
        (lambda r: r.slot_rows(-1), PoolError, "unknown_state"),
    ],
)
def test_every_failed_resolver_call_changes_nothing(
    call: Callable[[ResidencyResolver], Any], error: type, code: str | None
) -> None:
    r, states = busy_resolver()
    e = fails_unchanged(lambda: resolver_state(r, states), lambda: call(r), error)
    if code is not None:
        assert isinstance(e, PoolError) and e.code == code


def test_array_arguments_are_bounded_before_they_are_copied() -> None:
    # A broadcast (zero-stride) view costs nothing, but its contiguous copy
    # was made before any bound applied: 16 GiB for resolve, 64 GiB for
    # host_rows (MemoryError, or the OOM killer). Here 2^27 entries: above
    # every bound, and about a GiB should the bound regress.
    r, states = busy_resolver()
    p = busy_pool()
    big = 1 << 27
    for call, what in (
        (
            lambda: r.resolve(np.broadcast_to(np.int32(1), (big, 2)), np.broadcast_to(np.int32(0), (big,))),
            "topk_rows",
        ),
        (lambda: r.resolve(np.zeros((1, 2), np.int32), np.broadcast_to(np.int64(0), (big,))), "state_index"),
        (lambda: p.host_rows("a", np.broadcast_to(np.int64(0), (big,))), "positions"),
        (lambda: p.host_rows("a", torch.zeros(1, dtype=torch.int64).expand(big)), "positions"),
        (lambda: r.import_state(states[0], np.broadcast_to(np.int64(-1), (big,)), np.arange(4)), "slot_rows"),
    ):
        before = (pool_state(p), resolver_state(r, states))
        with pytest.raises(PoolError, match=what) as info:
            call()
        assert info.value.code in ("batch_too_large", "shape_mismatch"), info.value
        assert (pool_state(p), resolver_state(r, states)) == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hits": -1},
        {"misses": 2**64},
        {"hits": 1, "misses": -1},  # a valid count beside a bad one: nothing is added
        {"host_to_device_bytes": 10**400},
    ],
)
def test_failed_metrics_record_adds_nothing(kwargs: dict[str, int]) -> None:
    m = HiSparseMetrics()
    m.record(hits=3, misses=2, host_to_device_bytes=10)
    e = fails_unchanged(m.to_dict, lambda: m.record(**kwargs), ValueError)
    bad = next(k for k, v in kwargs.items() if not 0 <= v < 2**64)
    assert bad in str(e)


def test_metrics_counters_saturate_instead_of_wrapping() -> None:
    m = HiSparseMetrics()
    m.record(hits=2**64 - 2, misses=2**64 - 1, host_to_device_bytes=1)
    m.record(hits=5, misses=1, host_to_device_bytes=2**64 - 1)
    assert (m.hits, m.misses, m.host_to_device_bytes) == (2**64 - 1, 2**64 - 1, 2**64 - 1)
    assert "vllm:hisparse_cache_hits_total 1.8446744073709552e+19" in m.prometheus_text()


# --- integers name their argument ----------------------------------------------------


@pytest.mark.parametrize("value", HUGE)
@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda v: HostKVPool(v, 4, 656, 1), "num_blocks"),
        (lambda v: HostKVPool(8, v, 656, 1), "block_size"),
        (lambda v: HostKVPool(8, 4, v, 1), "row_bytes"),
        (lambda v: HostKVPool(8, 4, 656, v), "num_layers"),
        (lambda v: HostKVPool.from_host_pool_gib(1.0, v, 656, 1), "block_size"),
        (lambda v: PoolLayout(v, 656, 1), "rows_per_layer"),
        (lambda v: PoolLayout(8, v, 1), "row_bytes"),
        (lambda v: PoolLayout(8, 656, v), "num_layers"),
        (lambda v: PoolLayout(8, 656, 1, first_layer=v), "first_layer"),
        (lambda v: PoolLayout(8, 656, 1, layer_stride=v), "layer_stride"),
        (lambda v: PoolLayout(8, 656, 1).row_offset(0, v), "row"),
        (lambda v: ResidencyResolver(v, 2, 100, 656), "device_buffer_size"),
        (lambda v: ResidencyResolver(4, v, 100, 656), "topk"),
        (lambda v: ResidencyResolver(4, 2, v, 656), "num_host_rows"),
        (lambda v: ResidencyResolver(4, 2, 100, v), "row_bytes"),
        (lambda v: busy_pool().admit("new", v), "num_tokens"),
        (lambda v: busy_pool().append("a", v), "num_new_tokens"),
    ],
)
def test_out_of_range_ints_raise_pool_error_naming_the_argument(
    build: Callable[[int], Any], name: str, value: int
) -> None:
    with pytest.raises(PoolError) as info:
        build(value)
    assert info.value.code == "invalid_size"
    assert name in str(info.value)


@pytest.mark.parametrize("layer", [-1, 2**63, 2**64, -(2**100)])
def test_out_of_range_layer_ids_are_layer_out_of_range(layer: int) -> None:
    layout = PoolLayout(8, 656, 2, first_layer=4)
    for call in (layout.local_layer, layout.layer_region, lambda g: layout.row_offset(g, 0)):
        with pytest.raises(PoolError) as info:
            call(layer)
        assert info.value.code == "layer_out_of_range"


def test_a_huge_host_pool_gib_is_invalid_size() -> None:
    with pytest.raises(PoolError, match="host_pool_gib") as info:
        HostKVPool.from_host_pool_gib(10**400, 64, 656, 61)
    assert info.value.code == "invalid_size"


def test_a_pool_of_2_31_blocks_costs_what_it_uses() -> None:
    # The free list is lazy: building it is O(1), not 8 GB of ids.
    p = HostKVPool(2**31 - 1, 1, 1, 1)
    assert p.free_blocks == 2**31 - 1
    assert p.admit("a", 3).tolist() == [0, 1, 2]
    p.free("a")
    assert p.admit("b", 4).tolist() == [0, 1, 2, 3]


# --- check() never raises on a bad config ------------------------------------------------


def deep(levels: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    cur = root
    for _ in range(levels):
        cur["a"] = {}
        cur = cur["a"]
    return root


def codes(report: hisparse_rs.Report) -> list[tuple[str, str]]:
    return [(e.code, e.path) for e in report.errors]


def test_deep_and_circular_values_are_reported_not_raised() -> None:
    r = hisparse_rs.check(DSV32, kv_transfer_config=deep(10_000))
    assert [c for c, _ in codes(r)] == ["input_too_deep"]
    assert r.errors[0].path.startswith("kv_transfer_config.a.a.a")
    loop: dict[str, Any] = {"kv_connector": "HiSparseConnector"}
    loop["kv_connector_extra_config"] = {"again": loop}
    r = hisparse_rs.check(DSV32, kv_transfer_config=loop)
    assert codes(r) == [("input_too_deep", "kv_transfer_config.kv_connector_extra_config.again")]
    assert "circular" in r.errors[0].message
    shared = {"x": 1}  # the same object twice is not a cycle
    r = hisparse_rs.check(DSV32, hf_overrides={"a": shared, "b": [shared, shared]})
    assert "input_too_deep" not in [c for c, _ in codes(r)]
    # 127 levels under the root are fine (the bound is 128 in all).
    r = hisparse_rs.check(DSV32, hf_overrides=deep(126))
    assert "input_too_deep" not in [c for c, _ in codes(r)]


def test_values_json_cannot_carry_are_reported() -> None:
    r = hisparse_rs.check(
        DSV32, kv_transfer_config={**HS, "kv_connector_extra_config": {"host_pool_gib": 10**400}}
    )
    assert codes(r) == [("invalid_value", "kv_transfer_config.kv_connector_extra_config.host_pool_gib")]
    r = hisparse_rs.check(DSV32, kv_transfer_config=HS, tensor_parallel_size=10**30)
    assert codes(r) == [("invalid_value", "tensor_parallel_size")]
    r = hisparse_rs.check(DSV32, kv_transfer_config=HS, max_model_len=10**400)
    assert codes(r) == [("invalid_value", "max_model_len")]
    nan = hisparse_rs.check(
        DSV32, kv_transfer_config={**HS, "kv_connector_extra_config": {"host_pool_gib": math.nan}}
    )
    assert [c for c, _ in codes(nan)] == ["invalid_value"]


def test_a_model_path_that_is_not_utf8_is_reported() -> None:
    for model in (b"/tmp/\xff\xfe-model", Path(os.fsdecode(b"/tmp/\xff-model"))):
        r = hisparse_rs.check(model, kv_transfer_config=HS)
        assert codes(r) == [("invalid_value", "model")]
        assert "UTF-8" in r.errors[0].message


def test_too_large_input_is_reported() -> None:
    big = {"kv_connector": "HiSparseConnector", "pad": ["x" * 1024] * (17 * 1024)}  # 17 MiB
    r = hisparse_rs.check(DSV32, kv_transfer_config=big)
    assert [c for c, _ in codes(r)] == ["input_too_large"]


class _EndlessMapping(Mapping[str, Any]):
    """A mapping whose items never end (len() says 1): counts what was read."""

    HARD_STOP = 3_000_000

    def __init__(self) -> None:
        self.pulled = 0

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.items())

    def __getitem__(self, key: str) -> Any:
        return None

    def items(self) -> Any:
        while self.pulled < self.HARD_STOP:  # a regression raises instead of eating memory
            self.pulled += 1
            yield f"k{self.pulled}", None
        raise AssertionError("the walk read past its 16 MiB budget")


class _EndlessIterList(list[int]):
    def __iter__(self) -> Iterator[int]:
        while True:
            yield 1


def test_containers_are_read_lazily_and_no_further_than_the_budget() -> None:
    # A Mapping was read through list(mapping.items()) (an endless one ate all
    # memory) and the walk went on after the budget ran out.
    endless = _EndlessMapping()
    r = hisparse_rs.check(DSV32, hf_overrides=endless)
    assert [c for c, _ in codes(r)] == ["input_too_large"]
    assert endless.pulled <= (16 << 20) // 16 + 1
    # A list is read as json.dumps reads it: its items, not its __iter__.
    r = hisparse_rs.check(DSV32, kv_transfer_config=HS, hf_overrides={"a": _EndlessIterList([1, 2])})
    assert r.valid, codes(r)
    huge = [None] * (2 << 20)  # 32 MiB of budget: the walk stops at 16
    r = hisparse_rs.check(DSV32, hf_overrides={"a": huge, "b": [huge]})
    assert [c for c, _ in codes(r)] == ["input_too_large"]


def test_wrong_types_are_still_type_errors() -> None:
    with pytest.raises(TypeError, match="bytes"):
        hisparse_rs.check(DSV32, kv_transfer_config={"kv_connector": b"HiSparseConnector"})
    with pytest.raises(TypeError):
        hisparse_rs.check(DSV32, kv_transfer_config={("tuple", "key"): 1})


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([10**400, -(10**400), 2**64, 2**63])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["\udcff", "$POOL", "inf", "nan"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.integers(-3, 3), inner, max_size=4)
    ),
    max_leaves=24,
)


@given(
    field=st.sampled_from(["kv_transfer_config", "attention_config", "hf_overrides", "speculative_config"]),
    value=json_values,
    scalar=st.sampled_from(["tensor_parallel_size", "block_size", "max_model_len", "kv_cache_memory_bytes"]),
    number=st.integers(min_value=-(2**200), max_value=2**200) | st.sampled_from([10**400]),
)
def test_check_raises_only_documented_errors(field: str, value: Any, scalar: str, number: int) -> None:
    report = hisparse_rs.check(DSV32, **{field: value, scalar: number})
    assert report.valid == (not report.errors)
    json.loads(report.to_json())


# --- plan() and apply_fix() --------------------------------------------------------------


def test_plan_reports_input_problems_as_config_errors() -> None:
    with pytest.raises(hisparse_rs.ConfigError) as info:
        hisparse_rs.plan(DSV32, kv_transfer_config=deep(1000), host_memory_gib=64)
    assert [e.code for e in info.value.errors] == ["input_too_deep"]


@pytest.mark.parametrize(
    "options",
    [
        {"context_length": 2**64},
        {"target_requests": -1},
        {"host_memory_gib": 10**400},
        {"gpu_memory_gib": -(10**400)},
    ],
)
def test_plan_options_out_of_range_are_value_errors(options: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        hisparse_rs.plan(DSV32, kv_transfer_config=HS, **options)


def test_apply_fix_is_bounded_and_all_or_nothing() -> None:
    args = hisparse_rs.serve_args(DSV32, kv_transfer_config={"kv_role": "kv_both"})
    deep_path = ".".join(["k"] * 20_000)
    with pytest.raises(ValueError, match="20001 segments"):
        hisparse_rs.apply_fix(args, [{"op": "set", "path": f"hf_overrides.{deep_path}", "value": 1}])
    # remove of an absent path inserts nothing
    for path in ("kv_transfer_config.kv_connector_extra_config.host_pool_gib", "hf_overrides.a.b", "x"):
        got = hisparse_rs.apply_fix(args, [{"op": "remove", "path": path}])
        assert got == args, path
    # a failing op after a good one: neither applies
    with pytest.raises(ValueError, match="index"):
        hisparse_rs.apply_fix(
            args,
            [
                {"op": "set", "path": "block_size", "value": 64},
                {"op": "set", "path": "kv_transfer_config.kv_role[3]", "value": 1},
            ],
        )
    with pytest.raises(ValueError):
        hisparse_rs.apply_fix({**args, "hf_overrides": deep(200)}, [])


# --- config.json reading ------------------------------------------------------------------


def test_a_config_rewritten_with_the_same_size_and_mtime_is_read_again(tmp_path: Path) -> None:
    cfg = json.loads((MODELS / "deepseek-v3.2" / "config.json").read_text())
    path = tmp_path / "config.json"
    cfg["num_hidden_layers"] = 61
    path.write_text(json.dumps(cfg))
    first = hisparse_rs.check(tmp_path, kv_transfer_config=HS)
    assert first.valid and first.hisparse is not None and first.hisparse.sparse_mla_layers == 61
    stat = path.stat()
    cfg["num_hidden_layers"] = 59  # same length
    path.write_text(json.dumps(cfg))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    again = hisparse_rs.check(tmp_path, kv_transfer_config=HS)
    assert again.hisparse is not None and again.hisparse.sparse_mla_layers == 59


def test_model_files_that_are_not_regular_or_too_large_have_their_own_codes(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo" / "config.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    big = tmp_path / "big" / "config.json"
    big.parent.mkdir()
    with big.open("wb") as f:
        f.truncate(17 << 20)  # sparse: refused by its size, unread
    for model, code in (
        (fifo.parent, "not_a_regular_file"),
        ("/dev/zero", "not_a_regular_file"),
        (big, "file_too_large"),
    ):
        with pytest.raises(hisparse_rs.ModelLoadError) as info:
            hisparse_rs.check(model, kv_transfer_config=HS)
        assert info.value.code == code, (model, str(info.value))
    with pytest.raises(hisparse_rs.ModelLoadError) as info:
        hisparse_rs.check(tmp_path / "missing", kv_transfer_config=HS)
    assert info.value.code == "model_not_found"


def test_a_cached_config_json_that_is_not_a_regular_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hf_hub: Callable[..., str]
) -> None:
    # A snapshot's config.json that is a FIFO, a device link, a directory or a
    # symlink loop was "not there", with the advice to download it.
    commit = hf_hub("org/m")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    target = tmp_path / "hub" / "models--org--m" / "snapshots" / commit / "config.json"
    for make, code in (
        (lambda: os.mkfifo(target), "not_a_regular_file"),
        (lambda: target.symlink_to("/dev/zero"), "not_a_regular_file"),
        (lambda: target.mkdir(), "not_a_regular_file"),
        (lambda: target.symlink_to(target), "read_failed"),
    ):
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
        else:
            target.unlink(missing_ok=True)
        make()
        with pytest.raises(hisparse_rs.ModelLoadError) as info:
            hisparse_rs.check("org/m", kv_transfer_config=HS)
        assert info.value.code == code, str(info.value)
        assert str(target) in str(info.value) and "download" not in str(info.value)


def test_a_megabyte_unknown_flag_gets_no_suggestion_search() -> None:
    # The Rust CLI from Python (run_cli): argv is not capped at 128 KiB here.
    code = hisparse_rs._core.run_cli([DSV32, "--" + "x" * (1 << 20)])
    assert code == 2


def test_huge_tensor_parallel_size_is_answered_from_the_heads() -> None:
    r = hisparse_rs.check(
        DSV32,
        kv_transfer_config=HS,
        tensor_parallel_size=2305843009213693950,
        hf_overrides={"num_attention_heads": 384},
    )
    (e,) = [e for e in r.errors if e.code == "tensor_parallel_heads_mismatch"]
    assert e.fix[0]["value"] == 384


# --- kernels: meta and requires_grad tensors ------------------------------------------------


def _launchers() -> list[tuple[str, Callable[[torch.Tensor], Any]]]:
    from hisparse_rs import kernels as k

    t = torch.zeros(2, 4)
    i = torch.zeros(2, dtype=torch.int32)
    ws = k.ResolverWorkspace(4, 2, 2, device="cpu")
    maps = {"block_size": 1, "region_rows": 1, "device_buffer_size": 1}
    return [
        ("gather_rows", lambda x: k.gather_rows(x, t, i, i)),
        ("gather_rows_reference", lambda x: k.gather_rows_reference(t, x, i, i)),
        ("fp8_ds_mla_quantize", lambda x: k.fp8_ds_mla_quantize(x)),
        ("fp8_ds_mla_quantize_reference", lambda x: k.fp8_ds_mla_quantize_reference(x)),
        ("fp8_ds_mla_dequantize", lambda x: k.fp8_ds_mla_dequantize(x)),
        ("fp8_ds_mla_dequantize_reference", lambda x: k.fp8_ds_mla_dequantize_reference(x)),
        ("sparse_mla_decode", lambda x: k.sparse_mla_decode(x, t, i, 1.0)),
        ("sparse_mla_decode_reference", lambda x: k.sparse_mla_decode_reference(t, x, i, 1.0)),
        ("copy_rows", lambda x: k.copy_rows(t, x, i, i)),
        ("copy_rows_reference", lambda x: k.copy_rows_reference(x, t, i, i)),
        ("gather_plan", lambda x: k.gather_plan(t, t, x, t, i, i)),
        ("gather_plan_reference", lambda x: k.gather_plan_reference(t, t, t, t, x, i)),
        (
            "map_topk_positions",
            lambda x: k.map_topk_positions(t, t, i, i, x, **maps, host_rows=t, indices=t, counters=i),
        ),
        ("finish_decode_indices", lambda x: k.finish_decode_indices(t, x, i)),
        ("resolve_residency", lambda x: k.resolve_residency(t, i, x, t, num_host_rows=1, workspace=ws)),
        (
            "resolve_residency",  # the live-state mask (issue 17 item 4)
            lambda x: k.resolve_residency(t, i, t, t, num_host_rows=1, workspace=ws, live=x),
        ),
    ]


def _hostile_tensor(kind: str) -> torch.Tensor:
    if kind == "meta":
        return torch.empty(2, 576, dtype=torch.bfloat16, device="meta")
    if kind == "requires_grad":
        return torch.zeros(2, 576, requires_grad=True)
    if kind == "sparse_coo":
        return torch.zeros(2, 576, dtype=torch.bfloat16).to_sparse()
    with warnings.catch_warnings():  # torch: CSR and nested tensors are beta / prototype
        warnings.simplefilter("ignore", UserWarning)
        if kind == "sparse_csr":
            return torch.zeros(2, 576).to_sparse_csr()
        assert kind == "nested"
        return torch.nested.nested_tensor([torch.zeros(576), torch.zeros(576)])


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("meta", "meta device"),
        ("requires_grad", "requires grad"),
        # Sparse and nested tensors reached the kernels (and DecodeRuntime's
        # resolver) and failed there with RuntimeError / NotImplementedError.
        ("sparse_coo", "not a dense"),
        ("sparse_csr", "not a dense"),
        ("nested", "not a dense"),
    ],
)
def test_kernel_launchers_refuse_meta_grad_and_non_dense_tensors(kind: str, match: str) -> None:
    for name, launch in _launchers():
        with pytest.raises(ValueError, match=match) as info:
            launch(_hostile_tensor(kind))
        assert name in str(info.value) or "_reference" in name


def test_console_script_on_a_full_stdout_exits_non_zero() -> None:
    exe = Path(sys.executable).parent / "hisparse-check"
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [str(exe), DSV32, "--kv-transfer-config", json.dumps(HS)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=HANG_S,
        )
    assert proc.returncode == 2
    assert "cannot write the result to stdout" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_console_script_on_a_closed_stdout_exits_non_zero() -> None:
    # `hisparse-check ... >&-`: Rust's stdout takes writes to a closed
    # descriptor as written, so the result was lost with exit 0.
    exe = Path(sys.executable).parent / "hisparse-check"
    for extra in ([], ["--help"]):
        proc = subprocess.run(
            [str(exe), DSV32, "--kv-transfer-config", json.dumps(HS), *extra],
            stderr=subprocess.PIPE,
            text=True,
            timeout=HANG_S,
            preexec_fn=lambda: os.close(1),
        )
        assert proc.returncode == 2, (extra, proc.stderr)
        assert "cannot write the result to stdout" in proc.stderr


def test_console_script_on_a_read_only_stdout_exits_non_zero() -> None:
    # `hisparse-check ... 1</dev/null`: writes fail with EBADF, which Rust's
    # stdout takes as written (exit 0 with the result lost, issue 17).
    exe = Path(sys.executable).parent / "hisparse-check"
    with open(os.devnull) as read_only:
        proc = subprocess.run(
            [str(exe), DSV32, "--kv-transfer-config", json.dumps(HS)],
            stdout=read_only,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2, proc.stderr
    assert "cannot write the result to stdout" in proc.stderr


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        (["--served-model-name", "a", "b"], 0),
        (["--api-key", "a", "b", "-tp", "8", "--headless"], 0),
        (["--served-model-name"], 2),
        (["--headless=yes"], 2),
        (["--dtype", "half", "--dtype", "int3"], 2),
        (["--m"], 2),  # ambiguous: --max-model-len, --model, ...
        (["--", "--port"], 2),  # after --, words are positional
        (["-O"], 2),
        (["--optimization-level"], 2),
        (["-qfp8", "-O=3"], 0),
    ],
)
def test_hostile_flag_forms_exit_as_vllm_would(extra: list[str], code: int) -> None:
    assert hisparse_rs._core.run_cli([DSV32, "--kv-transfer-config", json.dumps(HS), *extra]) == code


@pytest.mark.parametrize(
    "text",
    ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E+309", '[NaN, {"a": Infinity}]'],
)
def test_json_text_with_pythons_numbers_is_read(text: str) -> None:
    # Where no check reads the value, it passes as vLLM passes it; as host_pool_gib,
    # float() of it is checked (vLLM: int(inf * 2**30) is an OverflowError).
    kv = json.dumps({**HS, "kv_connector_extra_config": {"host_pool_gib": 64, "x": "@"}}).replace('"@"', text)
    assert hisparse_rs.check(DSV32, kv_transfer_config=kv).valid
    pool = json.dumps(HS).replace("64", text) if text[0] != "[" else None
    if pool is not None:
        r = hisparse_rs.check(DSV32, kv_transfer_config=pool)
        assert not r.valid and "invalid_json" not in [c for c, _ in codes(r)]


@pytest.mark.parametrize("text", ["nan", "inf", "-NaN", "+Infinity", "NaNx", "Infinity1", "1e400e"])
def test_json_text_python_refuses_is_invalid_json(text: str) -> None:
    kv = json.dumps({**HS, "kv_connector_extra_config": {"host_pool_gib": 64, "x": "@"}}).replace('"@"', text)
    assert [c for c, _ in codes(hisparse_rs.check(DSV32, kv_transfer_config=kv))] == ["invalid_json"]


@given(st.integers(min_value=-(10**30), max_value=10**30), st.sampled_from(["", " ", "\t", "\n"]))
def test_the_v2_runner_variable_reads_as_int_reads_it(n: int, pad: str) -> None:
    text = f"{pad}{n:_}{pad}" if n % 2 else f"{pad}{n}{pad}"
    r = hisparse_rs.check(DSV32, kv_transfer_config=HS, vllm_use_v2_model_runner=text)
    assert ("model_runner_v2_disabled" in [c for c, _ in codes(r)]) == (int(text) == 0)
    assert "invalid_value" not in [c for c, _ in codes(r)]


def test_an_argument_that_is_not_utf8_is_named_not_not_found(tmp_path: Path) -> None:
    # A Latin-1 directory name: it exists, but was read with a replacement
    # character and reported as "model config not found".
    model = Path(os.fsdecode(bytes(tmp_path) + b"/mod\xe8le"))
    model.mkdir()
    (model / "config.json").write_bytes((MODELS / "deepseek-v3.2" / "config.json").read_bytes())
    exe = Path(sys.executable).parent / "hisparse-check"
    proc = subprocess.run(
        [exe, model, "--kv-transfer-config", json.dumps(HS)], capture_output=True, timeout=HANG_S
    )
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2 and "argument 1" in err and "not UTF-8" in err, err
    assert "not found" not in err and "Traceback" not in err, err
    assert hisparse_rs._core.run_cli([os.fsdecode(b"/x/\xff"), "--json"]) == 2


# --- Launch layouts over nodes (issue 17 item 6) ----------------------------------------

_STAGES = {"argparse", "config", "engine_start", "model_load", "workers", "first_step", "never"}
_SIZES = st.sampled_from([1, 2, 3, 4, 8, 16]) | st.integers(-(2**63), 2**63 - 1)


@given(
    tp=st.sampled_from([1, 2, 4, 8, 16]),
    dp=_SIZES,
    dpl=st.none() | _SIZES | st.just(0),
    nnodes=st.none() | _SIZES,
    node_rank=st.none() | _SIZES,
    dpr=st.none() | _SIZES,
    headless=st.none() | st.just(True),
    backend=st.sampled_from([None, "mp", "uni", "ray", "external_launcher"]),
)
def test_hostile_launch_layouts_are_reported_with_a_stage(
    tp: int,
    dp: int,
    dpl: int | None,
    nnodes: int | None,
    node_rank: int | None,
    dpr: int | None,
    headless: bool | None,
    backend: str | None,
) -> None:
    args = hisparse_rs.serve_args(
        DSV32,
        tensor_parallel_size=tp,
        data_parallel_size=dp,
        data_parallel_size_local=dpl,
        nnodes=nnodes,
        node_rank=node_rank,
        data_parallel_rank=dpr,
        headless=headless,
        distributed_executor_backend=backend,
    )
    report = hisparse_rs.check_args(args)
    assert report.valid == (not report.errors)
    assert {d.stage for d in (*report.errors, *report.warnings)} <= _STAGES
    assert all(
        json.loads(report.to_json())["errors"][i]["stage"] == d.stage for i, d in enumerate(report.errors)
    )
    if report.errors and all(d.fix for d in report.errors):
        fixed = hisparse_rs.apply_fix(args, [op for d in report.errors for op in d.fix])
        again = hisparse_rs.check_args(fixed)
        assert again.valid, (
            [(d.code, d.path) for d in report.errors],
            [(d.code, d.path, d.message) for d in again.errors],
        )
