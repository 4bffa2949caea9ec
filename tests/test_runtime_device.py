"""DecodeRuntime's device-resident (Triton) path: no host sync per layer, the
capture / replay path, errors the device finds, and failed calls that change nothing.

Runs on CPU tensors under ``TRITON_INTERPRET=1`` (CUDA: scripts/gpu_check.sh
runs the same with ``torch.cuda.set_sync_debug_mode("error")``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import hisparse_rs
from hisparse_rs.kernels import D_QK
from kernel_cases import DEVICE

SYNCS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__")
# aten ops whose result size or value needs the data on the host (a sync on CUDA).
SYNC_OPS = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2")


class _NoSyncOps(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.__name__.split(".")[0] in SYNC_OPS:
            raise AssertionError(f"host-sync op {func.__name__} inside forward_layer")
        return func(*args, **(kwargs or {}))


class _Refuse:
    """Stands in for the Rust resolver and the host pool: any use is a host round trip."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{self._what}.{name} used inside forward_layer")


@contextmanager
def no_host_sync(rt: hisparse_rs.DecodeRuntime) -> Iterator[None]:
    """Fail if package code syncs with the host: the named Tensor methods,
    torch.from_numpy / torch.tensor (host -> device), .to('cpu'), the Rust
    resolver or the host pool; and any data-dependent aten op from any caller."""

    def guard(name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("hisparse_rs"):
                raise AssertionError(f"{name} called by {caller} inside forward_layer")
            return orig(*args, **kwargs)

        return wrapped

    def to_guard(orig: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            # A device -> host copy; or, where everything is on the CPU, a literal "cpu"
            # target (what host round-trip code writes).
            target = [a for a in (*args, kwargs.get("device")) if isinstance(a, (str, torch.device))]
            to_host = any(torch.device(t).type == "cpu" for t in target) and self.device.type != "cpu"
            if caller.startswith("hisparse_rs") and (to_host or "cpu" in target):
                raise AssertionError(f"Tensor.to(cpu) called by {caller} inside forward_layer")
            return orig(self, *args, **kwargs)

        return wrapped

    saved: list[tuple[Any, str, Any]] = [(torch.Tensor, n, getattr(torch.Tensor, n)) for n in SYNCS]
    saved += [(torch, "from_numpy", torch.from_numpy), (torch, "tensor", torch.tensor)]
    saved += [(torch.Tensor, "to", torch.Tensor.to), (rt, "resolver", rt.resolver), (rt, "pool", rt.pool)]
    try:
        for owner, name, orig in saved[:-3]:
            setattr(owner, name, guard(name, orig))
        torch.Tensor.to = to_guard(torch.Tensor.to)  # type: ignore[method-assign]
        rt.resolver = _Refuse("the Rust resolver")  # type: ignore[assignment]
        rt.pool = _Refuse("the host pool")  # type: ignore[assignment]
        with _NoSyncOps():
            yield
    finally:
        for owner, name, orig in saved:
            setattr(owner, name, orig)


def runtime(resolver: str, **kw: Any) -> hisparse_rs.DecodeRuntime:
    args: dict[str, Any] = {
        "num_layers": 3,
        "index_topk": 8,
        "device_buffer_size": 24,
        "softmax_scale": D_QK**-0.5,
        "block_size": 4,
        "num_host_blocks": 64,
        "max_num_seqs": 3,
        "index_groups": [0, 0, 1],
        "eager_host_mirror": False,
        "device": DEVICE,
        "use_triton": False,
        "resolver": resolver,
    }
    args.update(kw)
    return hisparse_rs.DecodeRuntime(**args)


def prefill(rt: hisparse_rs.DecodeRuntime, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rt.num_layers, n, D_QK, generator=g) / 10).bfloat16().to(DEVICE)


def layer_inputs(
    batch: int, s_q: int, lens: list[int], seed: int, topk: int = 8
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, s_q, 4, D_QK, generator=g).clamp(-1, 1).bfloat16()
    kv = (torch.randn(batch, s_q, D_QK, generator=g) / 10).bfloat16()
    pos = torch.stack([torch.randint(-1, n, (s_q, topk), generator=g) for n in lens]).to(torch.int32)
    return q.to(DEVICE), kv.to(DEVICE), pos.to(DEVICE)


def test_forward_layer_on_the_triton_path_never_syncs_and_equals_the_rust_path() -> None:
    rts = {r: runtime(r) for r in ("rust", "triton")}
    for rt in rts.values():
        rt.add_request("a", prefill(rt, 30, 1))
        rt.add_request("b", prefill(rt, 9, 2))
    for step in range(3):
        outs: dict[str, list[hisparse_rs.LayerResult]] = {}
        for name, rt in rts.items():
            starts = rt.begin_step(["b", "a"], num_new_tokens=2)
            lens = [int(s[-1]) + 1 for s in starts]
            results = []
            with no_host_sync(rt) if name == "triton" else nullcontext():
                for layer in range(rt.num_layers):
                    results.append(rt.forward_layer(layer, *layer_inputs(2, 2, lens, seed=10 * step + layer)))
            rt.end_step()
            outs[name] = results
        for a, b in zip(outs["rust"], outs["triton"], strict=True):
            assert torch.equal(a.out, b.out) and torch.equal(a.lse, b.lse)
            assert (a.hits, a.misses, a.tail) == (b.hits, b.misses, b.tail)
    assert rts["rust"].metrics.to_dict() == rts["triton"].metrics.to_dict()
    assert rts["triton"].metrics.to_dict()["hisparse_cache_misses"] > 0


def test_the_guard_catches_a_sync() -> None:
    rt = runtime("triton")
    with no_host_sync(rt), pytest.raises(AssertionError, match="inside forward_layer"):
        rt._upload_step([], [], 1)  # host work: uses the pool
    with no_host_sync(rt), pytest.raises(AssertionError, match="_local_scalar_dense"):
        bool(torch.ones(1).sum() > 0)  # a sync from any caller


def test_captured_layers_replay_what_forward_layer_does() -> None:
    # Capture once for 3 requests x 2 tokens; replay in steps of 2 and 3
    # requests (the missing one padded); equal to eager forward_layer throughout.
    eager, graphs = runtime("triton"), runtime("triton")
    static = layer_inputs(3, 2, [1, 1, 1], seed=0)
    captured = [graphs.capture_layer(layer, *static) for layer in range(3)]
    for rt in (eager, graphs):
        for rid, n in (("a", 30), ("b", 9), ("c", 14)):
            rt.add_request(rid, prefill(rt, n, len(rid)))
    for step, ids in enumerate((["a", "b", "c"], ["c", "a"], ["b", "c", "a"])):
        results = {}
        for name, rt in (("eager", eager), ("graphs", graphs)):
            starts = rt.begin_step(ids, num_new_tokens=2)
            lens = [int(s[-1]) + 1 for s in starts]
            res = []
            for layer in range(3):
                inputs = layer_inputs(len(ids), 2, lens, seed=10 * step + layer)
                if name == "eager":
                    res.append(rt.forward_layer(layer, *inputs))
                else:
                    for buf, x in zip(static, inputs, strict=True):
                        buf.fill_(0) if buf.dtype != torch.int32 else buf.fill_(-1)
                        buf[: len(ids)].copy_(x)
                    res.append(captured[layer].replay())
            rt.end_step()
            results[name] = res
        for a, b in zip(results["eager"], results["graphs"], strict=True):
            assert torch.equal(a.out, b.out) and torch.equal(a.lse, b.lse)
            assert (a.hits, a.misses, a.tail) == (b.hits, b.misses, b.tail)
    for rid in ("a", "b", "c"):
        assert graphs.num_tokens(rid) == eager.num_tokens(rid)
    # Replays check the step they run in.
    with pytest.raises(ValueError, match="no open step"):
        captured[0].replay()
    static[2].fill_(-1)
    graphs.begin_step(["a"], num_new_tokens=2)
    with pytest.raises(ValueError, match="first layer 0 must run first"):
        captured[1].replay()
    captured[0].replay()
    with pytest.raises(ValueError, match="already ran"):
        captured[0].replay()
    with pytest.raises(ValueError, match="between steps"):
        graphs.capture_layer(0, *static)
    follower = layer_inputs(1, 2, [graphs.num_tokens("a")], seed=5)
    with pytest.raises(ValueError, match="same width, got 4"):
        graphs.forward_layer(1, *follower[:2], follower[2][..., :4])
    graphs.forward_layer(1, *follower)  # an eager layer between replays
    captured[2].replay()
    graphs.end_step()
    graphs.begin_step(["a"], num_new_tokens=1)
    with pytest.raises(ValueError, match="captured for up to 3 requests x 2 tokens"):
        captured[0].replay()
    with pytest.raises(ValueError, match="Triton resolver path"):
        runtime("rust").capture_layer(0, *static)


def test_device_found_errors_are_raised_by_end_step_once() -> None:
    rt = runtime("triton", device_buffer_size=8, index_groups=None)
    rt.add_request("a", prefill(rt, 40, 1))
    rt.add_request("b", prefill(rt, 40, 2))
    # Request a's two query rows select 16 distinct cold rows: more than 8 slots.
    rt.begin_step(["a", "b"], num_new_tokens=2)
    q, kv, _ = layer_inputs(2, 2, [42, 42], seed=3)
    pos = torch.tensor([[list(range(8)), list(range(8, 16))], [[0, 1, 2, 3, -1, -1, -1, -1]] * 2])
    before = {s: rt._device_resolver().export_state(s) for s in rt._requests["a"].states}
    for layer in range(3):
        res = rt.forward_layer(layer, q, kv, pos.to(torch.int32).to(DEVICE))
    with pytest.raises(hisparse_rs.PoolError) as e:
        rt.end_step()
    assert e.value.code == "union_exceeds_device_buffer" and "'a'" in str(e.value)
    for s, (rows, lru) in before.items():  # a's states were left as they were
        after = rt._device_resolver().export_state(s)
        assert torch.equal(after[0], rows) and torch.equal(after[1], lru)
    assert res.misses == 4 and res.hits == 4  # b resolved (its MTP rows repeat)
    assert rt._step_ids is None  # the step is closed; the runtime goes on
    starts = rt.begin_step(["a", "b"])
    bad = torch.tensor([[[0, 1, 99, -1, -5, 2, 3, 4]], [[0] * 8]], dtype=torch.int32, device=DEVICE)
    for layer in range(3):
        rt.forward_layer(layer, *layer_inputs(2, 1, [int(s) + 1 for s in starts[:, 0]], seed=4)[:2], bad)
    with pytest.raises(ValueError, match="request 'a': 6 top-k position"):
        rt.end_step()
    rt.begin_step(["a"])  # and the next step runs


# ---- failed calls change nothing --------------------------------------------


def snapshot(rt: hisparse_rs.DecodeRuntime) -> tuple[Any, ...]:
    states = []
    for rid in rt.request_ids:
        for s in rt._requests[rid].states:
            exported = (
                rt.resolver.export_state(s)
                if rt.resolver_path == "rust"
                else tuple(t.cpu().numpy() for t in rt._device_resolver().export_state(s))
            )
            states.append(tuple(a.tolist() for a in exported))
    return (
        rt.request_ids,
        [rt.num_tokens(r) for r in rt.request_ids],
        rt.pool.stats(),
        rt.pool.free_blocks,
        list(rt._free_regions),
        rt._step_ids,
        sorted(rt._written),
        sorted(rt._step_plans),
        rt.metrics.to_dict(),
        states,
        [int(t.to(torch.int64).sum()) for t in rt.device_layers],
        int(rt.host_buffer.to(torch.int64).sum()),
    )


@pytest.mark.parametrize("resolver", ["rust", "triton"])
def test_every_failed_call_changes_nothing(resolver: str) -> None:
    rt = runtime(resolver, max_model_len=60)
    rt.add_request("a", prefill(rt, 30, 1))
    kv = prefill(rt, 5, 3)

    def fails(call: Callable[[], object], kind: type[Exception], match: str) -> None:
        before = snapshot(rt)
        with pytest.raises(kind, match=match):
            call()
        assert snapshot(rt) == before, f"{match}: state changed"

    # add_request
    fails(lambda: rt.add_request("a", kv), hisparse_rs.PoolError, "already admitted")
    fails(lambda: rt.add_request("b", kv[:2]), ValueError, "prefill KV has 2 layers")
    fails(lambda: rt.add_request("b", kv.float()), ValueError, "bfloat16")
    fails(lambda: rt.add_request("b", kv.to("meta")), ValueError, "meta device")
    fails(
        lambda: rt.add_request("b", kv.clone().float().requires_grad_().bfloat16()),
        ValueError,
        "requires grad",
    )
    fails(lambda: rt.add_request("b", prefill(rt, 61, 4)), ValueError, "max_model_len 60")
    fails(lambda: rt.add_request(7, kv), ValueError, "request_id must be a str")  # type: ignore[arg-type]
    big = runtime(resolver, num_host_blocks=9)
    big.add_request("x", prefill(big, 30, 5))
    before = snapshot(big)
    with pytest.raises(hisparse_rs.HostPoolExhausted):
        big.add_request("y", prefill(big, 10, 6))
    assert snapshot(big) == before
    # finish_request / set_resolver / end_step between steps
    fails(lambda: rt.finish_request("zz"), hisparse_rs.PoolError, "not admitted")
    fails(lambda: rt.set_resolver("cuda"), ValueError, "resolver must be one of")
    fails(rt.end_step, ValueError, "no open step")
    # begin_step
    fails(lambda: rt.begin_step(["a", "a"]), ValueError, "twice")
    fails(lambda: rt.begin_step(["zz"]), hisparse_rs.PoolError, "not admitted")
    fails(lambda: rt.begin_step(["a"], num_new_tokens=0), ValueError, "num_new_tokens must be in")
    fails(lambda: rt.begin_step(["a"], num_new_tokens=-(2**70)), ValueError, "num_new_tokens must be in")
    fails(lambda: rt.begin_step(["a"], num_new_tokens=31), ValueError, "max_model_len 60")
    starts = rt.begin_step(["a"])
    lens = [int(starts[0, 0]) + 1]
    q, new_kv, pos = layer_inputs(1, 1, lens, seed=7)
    # forward_layer: every input is checked before anything changes (a failed
    # call with another top-k must not leave its rows for the retry)
    other = pos.flip(-1)
    fails(lambda: rt.forward_layer(0, q.to("meta"), new_kv, other), ValueError, "meta device")
    # Sparse tensors passed the checks and failed after the resolver had run.
    fails(lambda: rt.forward_layer(0, q.to_sparse(), new_kv, other), ValueError, "not a dense")
    fails(lambda: rt.forward_layer(0, q, new_kv.to_sparse(), other), ValueError, "not a dense")
    fails(lambda: rt.forward_layer(0, q, new_kv, other.to_sparse()), ValueError, "not a dense")
    fails(lambda: rt.forward_layer(-1, q, new_kv, pos), ValueError, "layer must be in")
    fails(lambda: rt.forward_layer(2**64, q, new_kv, pos), ValueError, "layer must be in")
    fails(lambda: rt.forward_layer(0, q.to("meta"), new_kv, pos), ValueError, "meta device")
    fails(lambda: rt.forward_layer(0, q.float().requires_grad_(), new_kv, pos), ValueError, "requires grad")
    fails(lambda: rt.forward_layer(0, q[:, :, :, :512], new_kv, pos), ValueError, "q must be")
    fails(lambda: rt.forward_layer(0, q, new_kv[:, :, :8], pos), ValueError, "new_kv must be")
    fails(lambda: rt.forward_layer(0, q, new_kv, pos.float()), ValueError, "topk_positions must be")
    fails(lambda: rt.forward_layer(0, q, new_kv, pos.to("meta")), ValueError, "meta device")
    fails(lambda: rt.forward_layer(0, q, new_kv, torch.zeros(1, 1, 9, dtype=torch.int32)), ValueError, "<= 8")
    if resolver == "rust":
        bad = pos.clone()
        bad[0, 0, 0] = lens[0]
        fails(lambda: rt.forward_layer(0, q, new_kv, bad), ValueError, "outside")
    fails(rt.end_step, ValueError, r"layers \[0, 1, 2\] did not run")
    fails(lambda: rt.add_request("b", kv), ValueError, "between steps")
    fails(lambda: rt.finish_request("a"), ValueError, "between steps")
    fails(lambda: rt.set_resolver("rust"), ValueError, "between steps")
    fails(lambda: rt.begin_step(["a"]), ValueError, "already open")
    # The retry with other inputs attends over its own rows, not the failed call's.
    first = rt.forward_layer(0, q, new_kv, pos)
    fails(lambda: rt.forward_layer(0, q, new_kv, pos), ValueError, "already ran")
    for layer in (1, 2):
        rt.forward_layer(layer, q, new_kv, pos)
    rt.end_step()
    clean = runtime(resolver, max_model_len=60)
    clean.add_request("a", prefill(clean, 30, 1))
    clean.begin_step(["a"])
    assert torch.equal(clean.forward_layer(0, q, new_kv, pos).out, first.out)


@pytest.mark.parametrize("resolver", ["rust", "triton"])
def test_add_request_rolls_back_a_late_failure(resolver: str) -> None:
    rt = runtime(resolver)
    rt.add_request("a", prefill(rt, 12, 1))
    before = snapshot(rt)

    def broken(*args: object) -> torch.Tensor:
        raise RuntimeError("device write failed")

    rt._tail_rows = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="device write failed"):
        rt.add_request("b", prefill(rt, 20, 2))
    assert snapshot(rt) == before and "b" not in rt.pool
    del rt._tail_rows
    rt.add_request("b", prefill(rt, 20, 2))  # the region, blocks and states were returned
    assert rt.request_ids == ["a", "b"]


def test_int_arguments_are_named_not_overflow_errors() -> None:
    for name, value in (
        ("num_layers", -1),
        ("index_topk", 2**64),
        ("device_buffer_size", -5),
        ("block_size", 0),
        ("max_num_seqs", 2**40),
        ("num_host_blocks", -1),
        ("max_model_len", 0),
        ("max_num_new_tokens", 0),
        ("num_layers", 2.5),
    ):
        with pytest.raises(ValueError, match=name):
            runtime("rust", **{name: value, **({"index_groups": None} if name == "num_layers" else {})})
    for bad in (math.nan, -1.0, 10**400):
        with pytest.raises(ValueError, match="host_pool_gib must be a finite number"):
            runtime("rust", num_host_blocks=None, host_pool_gib=bad)
    with pytest.raises(ValueError, match="softmax_scale"):
        runtime("rust", softmax_scale=math.inf)
    with pytest.raises(ValueError, match="resolver must be one of"):
        runtime("cpu")
    with pytest.raises(hisparse_rs.PoolError) as e:
        runtime("triton", device_buffer_size=40000)
    assert e.value.code == "device_buffer_too_large"


def test_layer_results_read_device_counts_on_demand_and_host_ints_after_end_step() -> None:
    rt = runtime("triton")
    rt.add_request("a", prefill(rt, 30, 1))
    starts = rt.begin_step(["a"])
    res = [
        rt.forward_layer(layer, *layer_inputs(1, 1, [int(starts[0, 0]) + 1], seed=1)) for layer in range(3)
    ]
    assert rt._step_counts.host is None  # still on the device
    live = res[0].misses  # reading before end_step synchronizes
    rt.end_step()
    assert rt._step_counts.host is not None
    assert res[0].misses == live and isinstance(res[0].hits, int)
    assert res[0].host_to_device_bytes == live * rt.row_bytes
    # Layers 0 and 1 share a group: layer 1 replays layer 0's plan and is charged its bytes.
    assert rt.metrics.to_dict()["hisparse_host_to_device_bytes"] == (2 * res[0].misses + res[2].misses) * 656
    np.testing.assert_equal(rt.metrics.to_dict()["hisparse_cache_misses"], res[0].misses + res[2].misses)
