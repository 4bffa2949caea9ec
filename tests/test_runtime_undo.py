"""A failed DecodeRuntime call changes nothing (issue 17 item 3), on both resolver paths.

Everything forward_layer and the kernels can check is checked before the first
change; a failure after it (a kernel that raises, out of memory) is injected
here by replacing a kernel the runtime calls after the resolve. The layer is
then undone: the group's resolver states, the step counters and the metrics
are as before the call, the step stays open, and the retry gives the outputs
and the counts of a twin runtime that never failed. The one documented trace:
hot slots the failed layer's gather may have written are emptied (they miss
once more on the retry; the outputs are the same).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import hisparse_rs
import hisparse_rs.runtime as runtime_module
from hisparse_rs.kernels import D_QK

PATHS = ["rust", "triton"]


def make(path: str) -> hisparse_rs.DecodeRuntime:
    return hisparse_rs.DecodeRuntime(
        num_layers=3,
        index_topk=4,
        device_buffer_size=6,
        softmax_scale=0.1,
        block_size=4,
        num_host_blocks=32,
        max_num_seqs=2,
        index_groups=[0, 0, 1],  # layers 0 and 1 share a top-k: 0 resolves, 1 replays
        resolver=path,
    )


def states_of(rt: hisparse_rs.DecodeRuntime) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    out = {}
    for rid, req in rt._requests.items():
        for g, s in enumerate(req.states):
            if rt.resolver_path == "rust":
                rows, lru = rt.resolver.export_state(s)
            else:
                rows, lru = (t.cpu().numpy() for t in rt.device_resolver.export_state(s))
            out[rid, g] = (np.asarray(rows).tolist(), np.asarray(lru).tolist())
    return out


class Twins:
    """Two runtimes fed the same requests and steps; one of them fails on demand."""

    def __init__(self, path: str) -> None:
        self.rts = [make(path), make(path)]
        g = torch.Generator().manual_seed(1)
        for rid, n in (("a", 30), ("b", 22)):
            kv = torch.randn(3, n, D_QK, generator=g).div(10).bfloat16()
            for rt in self.rts:
                rt.add_request(rid, kv)
        self.gen = g

    def inputs(self, step: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        g = self.gen
        out = []
        for _ in range(3):
            q = torch.randn(2, 1, 4, D_QK, generator=g).bfloat16()
            kv = torch.randn(2, 1, D_QK, generator=g).div(10).bfloat16()
            # Cold rows that change from step to step: hits, misses and evictions.
            topk = torch.stack([torch.randperm(20, generator=g)[:4] for _ in range(2)])[:, None]
            out.append((q, kv, topk.to(torch.int32)))
        return out

    def step(self, step: int) -> list[list[Any]]:
        results: list[list[Any]] = [[], []]
        layers = self.inputs(step)
        for i, rt in enumerate(self.rts):
            rt.begin_step(["a", "b"])
            for layer, (q, kv, topk) in enumerate(layers):
                results[i].append(rt.forward_layer(layer, q, kv, topk))
            rt.end_step()
        return results


def assert_same_result(got: Any, want: Any) -> None:
    assert torch.equal(got.out, want.out) and torch.equal(got.lse, want.lse)


# Kernels the runtime calls after the resolve, by path: (name in hisparse_rs.runtime,
# whether the gather may have started when it fails).
AFTER_RESOLVE = {
    "rust": [
        ("copy_rows_reference", False),
        ("gather_rows_reference", True),
        ("sparse_mla_decode_reference", True),
    ],
    "triton": [("copy_rows", False), ("gather_plan", True), ("sparse_mla_decode_reference", True)],
}
CASES = [(path, name, gathered) for path in PATHS for name, gathered in AFTER_RESOLVE[path]]


def failing(real: Callable[..., Any], after: int) -> Callable[..., Any]:
    """``real``, except that its call number ``after`` (from 0) raises after running."""
    calls = [0]

    def kernel(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls[0] += 1
        if calls[0] > after:
            raise RuntimeError("injected: a kernel failed (CUDA out of memory, say)")
        return out

    return kernel


@pytest.mark.parametrize(("path", "kernel", "gathered"), CASES)
def test_a_layer_that_fails_after_resolving_is_undone(
    path: str, kernel: str, gathered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = Twins(path)
    t.step(0)  # warm hot buffers: the next step hits, misses and evicts
    rt, twin = t.rts
    layers = t.inputs(1)
    for r in (rt, twin):
        r.begin_step(["a", "b"])
    want = [twin.forward_layer(layer, *x) for layer, x in enumerate(layers)]
    twin.end_step()

    before_states, before_metrics = states_of(rt), rt.metrics.to_dict()
    monkeypatch.setattr(runtime_module, kernel, failing(getattr(runtime_module, kernel), after=0))
    with pytest.raises(RuntimeError, match="injected"):
        rt.forward_layer(0, *layers[0])
    monkeypatch.undo()

    assert rt.metrics.to_dict() == before_metrics  # nothing counted
    assert rt._step_plans == {} and rt._written == set()
    after = states_of(rt)
    assert after.keys() == before_states.keys()
    for key, (rows, lru) in after.items():
        old_rows, old_lru = before_states[key]
        assert lru == old_lru, key
        if gathered:
            # Restored, but the slots the failed gather may have written are empty.
            assert all(r in (-1, o) for r, o in zip(rows, old_rows, strict=True)), key
        else:
            assert rows == old_rows, key
    if path == "triton":
        assert int(rt._buffers.counts.abs().sum()) == 0  # the step's counters as begin_step left them

    # The retry: the outputs of the runtime that never failed, counted once.
    got = [rt.forward_layer(layer, *x) for layer, x in enumerate(layers)]
    for g, w in zip(got, want, strict=True):
        assert_same_result(g, w)
    rt.end_step()
    m, w = rt.metrics.to_dict(), twin.metrics.to_dict()
    valid = ("hisparse_cache_hits", "hisparse_cache_misses")
    assert sum(m[k] for k in valid) == sum(w[k] for k in valid)
    if gathered:
        assert m["hisparse_cache_misses"] >= w["hisparse_cache_misses"]
    else:
        assert m == w and states_of(rt) == states_of(twin)
    # Both continue identically (outputs; the emptied slots only cost misses).
    for g2, w2 in zip(*t.step(2), strict=True):
        assert_same_result(g2, w2)


@pytest.mark.parametrize("path", PATHS)
def test_a_follower_layer_that_fails_is_retried_without_counting_twice(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Layer 1 replays layer 0's plan: it changes no resolver state, and its bytes
    # are counted only when it succeeds.
    t = Twins(path)
    t.step(0)
    rt, twin = t.rts
    layers = t.inputs(1)
    for r in (rt, twin):
        r.begin_step(["a", "b"])
    want = [twin.forward_layer(layer, *x) for layer, x in enumerate(layers)]
    twin.end_step()
    rt.forward_layer(0, *layers[0])
    before_states, before_metrics = states_of(rt), rt.metrics.to_dict()
    name = "sparse_mla_decode_reference"
    monkeypatch.setattr(runtime_module, name, failing(getattr(runtime_module, name), after=0))
    with pytest.raises(RuntimeError, match="injected"):
        rt.forward_layer(1, *layers[1])
    monkeypatch.undo()
    assert states_of(rt) == before_states and rt.metrics.to_dict() == before_metrics
    got = [rt.forward_layer(layer, *layers[layer]) for layer in (1, 2)]
    for g, w in zip(got, want[1:], strict=True):
        assert_same_result(g, w)
    rt.end_step()
    assert rt.metrics.to_dict() == twin.metrics.to_dict()
    assert states_of(rt) == states_of(twin)


@pytest.mark.parametrize("path", PATHS)
def test_a_query_of_a_billion_heads_is_refused_before_anything_changes(path: str) -> None:
    # It passed the checks, then the decode failed after the resolve: the state
    # and the metrics moved, and the retry counted the step twice.
    t = Twins(path)
    t.step(0)
    rt, twin = t.rts
    layers = t.inputs(1)
    for r in (rt, twin):
        r.begin_step(["a", "b"])
    before_states, before_metrics = states_of(rt), rt.metrics.to_dict()
    q, kv, topk = layers[0]
    huge = q[:, :, :1].expand(2, 1, 10**9, D_QK)
    with pytest.raises(ValueError, match=r"h_q in \[1, 128\]"):
        rt.forward_layer(0, huge, kv, topk)
    assert states_of(rt) == before_states and rt.metrics.to_dict() == before_metrics
    got = [rt.forward_layer(layer, *x) for layer, x in enumerate(layers)]
    want = [twin.forward_layer(layer, *x) for layer, x in enumerate(layers)]
    for g, w in zip(got, want, strict=True):
        assert_same_result(g, w)
    for r in (rt, twin):
        r.end_step()
    assert rt.metrics.to_dict() == twin.metrics.to_dict() and states_of(rt) == states_of(twin)


def test_a_replayed_layer_that_fails_is_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    # CapturedLayer.replay (the Triton path; on a CPU the replay re-runs the captured work).
    t = Twins("triton")
    t.step(0)
    rt, twin = t.rts
    layers = t.inputs(1)
    static = [tuple(x.clone() for x in inputs) for inputs in layers]
    captured = [rt.capture_layer(layer, *static[layer]) for layer in range(3)]
    for r in (rt, twin):
        r.begin_step(["a", "b"])
    want = [twin.forward_layer(layer, *x) for layer, x in enumerate(layers)]
    twin.end_step()
    before_states, before_metrics = states_of(rt), rt.metrics.to_dict()
    monkeypatch.setattr(runtime_module, "copy_rows", failing(runtime_module.copy_rows, after=0))
    with pytest.raises(RuntimeError, match="injected"):
        captured[0].replay()
    monkeypatch.undo()
    assert states_of(rt) == before_states and rt.metrics.to_dict() == before_metrics
    assert int(rt._buffers.counts.abs().sum()) == 0
    got = [c.replay() for c in captured]
    for g, w in zip(got, want, strict=True):
        assert_same_result(g, w)
    rt.end_step()
    assert rt.metrics.to_dict() == twin.metrics.to_dict() and states_of(rt) == states_of(twin)


@pytest.mark.parametrize("path", PATHS)
def test_a_failed_undo_makes_the_runtime_refuse_every_call(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = Twins(path)
    rt = t.rts[0]
    layers = t.inputs(0)
    rt.begin_step(["a", "b"])
    name = "sparse_mla_decode_reference"
    monkeypatch.setattr(runtime_module, name, failing(getattr(runtime_module, name), after=0))

    def undo_fails(self: Any, undo: Any) -> None:
        raise MemoryError("injected: out of memory while undoing")

    monkeypatch.setattr(hisparse_rs.DecodeRuntime, "_rollback", undo_fails)
    with pytest.raises(RuntimeError, match=r"DecodeRuntime is unusable.*Build a new DecodeRuntime") as info:
        rt.forward_layer(0, *layers[0])
    assert "injected: a kernel failed" in str(info.value) and "out of memory while undoing" in str(info.value)
    monkeypatch.undo()
    calls: list[Callable[[], object]] = [
        lambda: rt.forward_layer(0, *layers[0]),
        rt.end_step,
        lambda: rt.begin_step(["a"]),
        lambda: rt.add_request("c", torch.zeros(3, 4, D_QK, dtype=torch.bfloat16)),
        lambda: rt.finish_request("a"),
        lambda: rt.set_resolver("rust"),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="Build a new DecodeRuntime"):
            call()
