"""The Triton resolver equals the Rust resolver, field for field, at every step.

Runs the kernel under ``TRITON_INTERPRET=1`` on CPU tensors (compiled on a
GPU by scripts/gpu_check.sh). Every step compares slots, the plan (order,
counts, offsets), hits, misses, and every live state's slot rows and LRU
order. Traces: hypothesis draws the shape (top-k width 1..2048, buffers of
top-k..5x top-k, overlap between steps 0..1, padding, invalid rows, MTP rows
sharing a state, padded batch rows, states joining and leaving, export /
import round trips) and a seed for the rows themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import hisparse_rs
from hisparse_rs import PoolError, ResidencyResolver
from hisparse_rs.kernels import (
    ResolverWorkspace,
    TritonResidencyResolver,
    resolve_residency,
    resolver,
    status_error,
)
from hisparse_rs.kernels.resolver import FLAG_TOO_MANY_ROWS, FLAG_UNION_EXCEEDS, FLAG_UNKNOWN_STATE
from kernel_cases import DEVICE

ROWS = 1 << 20


def dev_tensor(x: object, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor on the kernels' device (CPU under the interpreter, else the GPU)."""
    return torch.as_tensor(x, dtype=dtype).to(DEVICE)


def overflowing(topk: NDArray[np.int64], states: NDArray[np.int64], dbs: int, limit: int) -> list[int]:
    """States whose rows' union of valid host rows exceeds dbs."""
    out = []
    for s in np.unique(states[states >= 0]):
        v = topk[states == s].ravel()
        if np.unique(v[(v >= 0) & (v < limit)]).size > dbs:
            out.append(int(s))
    return out


class Lockstep:
    """A Rust resolver and a Triton resolver driven with the same calls."""

    def __init__(
        self, dbs: int, topk: int, num_host_rows: int, *, max_states: int, max_rows: int, per_state: int
    ) -> None:
        self.rust = ResidencyResolver(dbs, topk, num_host_rows, 656)
        self.dev = TritonResidencyResolver(
            dbs,
            topk,
            num_host_rows,
            max_states=max_states,
            max_rows=max_rows,
            max_rows_per_state=per_state,
            device=DEVICE,
        )
        self.dbs, self.limit = dbs, num_host_rows
        self.live: list[int] = []

    def new_state(self) -> int:
        s = self.rust.new_state()
        assert self.dev.new_state() == s
        self.live.append(s)
        return s

    def free_state(self, s: int) -> None:
        self.rust.free_state(s)
        self.dev.free_state(s)
        self.live.remove(s)

    def check_states(self) -> None:
        for s in self.live:
            rows, lru = self.rust.export_state(s)
            np.testing.assert_array_equal(
                self.dev.slot_rows(s).cpu().numpy(), rows, err_msg=f"state {s} slot rows"
            )
            np.testing.assert_array_equal(self.dev.lru_order(s).cpu().numpy(), lru, err_msg=f"state {s} LRU")

    def step(
        self, topk: NDArray[np.int64], states: NDArray[np.int64], *, dtypes: tuple[str, str]
    ) -> hisparse_rs.kernels.ResidencyPlan:
        t_rows = dev_tensor(topk.astype(dtypes[0]))
        t_states = dev_tensor(states.astype(dtypes[1]))
        flags, overflow_state = 0, 0
        dead = sorted({int(s) for s in states if s != -1 and s not in self.live})
        if dead:
            # Rust refuses a batch with a freed or never-created state whole; the
            # device flags it and resolves the rest: the Rust result with those rows padded.
            with pytest.raises(PoolError) as refused:
                self.rust.resolve(topk.astype(dtypes[0]), states.astype(dtypes[1]))
            assert refused.value.code == "unknown_state"
            states = np.where(np.isin(states, dead), -1, states)
            flags = FLAG_UNKNOWN_STATE
        try:
            want = self.rust.resolve(topk.astype(dtypes[0]), states.astype(dtypes[1]))
        except PoolError as e:
            # Rust fails whole; the device leaves the overflowing states as they
            # were and resolves the others: the Rust result with those rows padded.
            assert e.code == "union_exceeds_device_buffer"
            over = overflowing(topk, states, self.dbs, self.limit)
            assert over
            padded = np.where(np.isin(states, over), -1, states)
            want = self.rust.resolve(topk.astype(dtypes[0]), padded.astype(dtypes[1]))
            flags, overflow_state = flags | FLAG_UNION_EXCEEDS, max(over) + 1
        got = self.dev.resolve(t_rows, t_states)
        assert_same(got, want)
        assert got.status.tolist() == [want.hits, want.misses, flags, overflow_state]
        self.check_states()
        return got


def assert_same(got: hisparse_rs.kernels.ResidencyPlan, want: hisparse_rs.ResolveResult) -> None:
    np.testing.assert_array_equal(got.slots.cpu().numpy(), want.slots, err_msg="slots")
    np.testing.assert_array_equal(got.miss_counts.cpu().numpy(), want.miss_counts, err_msg="miss_counts")
    np.testing.assert_array_equal(got.miss_offsets.cpu().numpy(), want.miss_offsets, err_msg="miss_offsets")
    rows, slots = got.flat_plan()
    np.testing.assert_array_equal(rows.cpu().numpy(), want.miss_host_rows, err_msg="plan host rows")
    np.testing.assert_array_equal(slots.cpu().numpy(), want.miss_slots, err_msg="plan slots")
    assert got.slots.dtype == torch.int32 and got.miss_host_rows.dtype == torch.int64


@dataclass(frozen=True)
class Trace:
    topk: int
    dbs: int
    width: int
    per_state: int  # rows per state (1 + MTP drafts)
    overlap: float
    p_pad: float
    p_invalid: float
    states: int
    steps: int
    seed: int


def run_trace(t: Trace) -> None:
    rng = np.random.default_rng(t.seed)
    # Host rows from a history a few times the hot buffer: evictions and repeats.
    limit = max(2 * t.dbs, 8) + int(rng.integers(0, 2 * t.dbs + 1))
    max_rows = (t.states + 2) * t.per_state + 3
    ls = Lockstep(t.dbs, t.topk, limit, max_states=t.states + 2, max_rows=max_rows, per_state=t.per_state)
    prev: dict[int, NDArray[np.int64]] = {}
    for _ in range(t.states):
        ls.new_state()
    for step in range(t.steps):
        # States join and leave between steps.
        if step and rng.random() < 0.3 and len(ls.live) > 1:
            gone = int(rng.choice(ls.live))
            ls.free_state(gone)
            prev.pop(gone, None)
        if step and rng.random() < 0.3 and len(ls.live) < t.states + 2:
            ls.new_state()
        # A request moves between the paths: a state goes through an export / import.
        if step and rng.random() < 0.3:
            s = int(rng.choice(ls.live))
            if rng.random() < 0.5:
                rows, lru = ls.dev.export_state(s)
                ls.rust.reset_state(s)
                ls.rust.import_state(s, rows.cpu().numpy(), lru.cpu().numpy())
            else:
                ls.dev.reset_state(s)
                ls.dev.import_state(s, *(dev_tensor(a) for a in ls.rust.export_state(s)))
            ls.check_states()
        batch_rows, batch_states = [], []
        for s in ls.live:
            for j in range(t.per_state):
                base = prev.get(s, rng.integers(0, limit, size=(t.per_state, t.width)))[j]
                row = base.copy()
                fresh = rng.random(t.width) >= t.overlap
                row[fresh] = rng.integers(0, limit, size=int(fresh.sum()))
                prev.setdefault(s, np.empty((t.per_state, t.width), np.int64))[j] = row
                row = row.copy()
                row[rng.random(t.width) < t.p_pad] = -1
                bad = rng.random(t.width) < t.p_invalid
                row[bad] = rng.choice([-2, -7, limit, limit + 5, 2**40], size=int(bad.sum()))
                batch_rows.append(row)
                batch_states.append(s)
        for _ in range(int(rng.integers(0, 3))):  # padded batch rows
            batch_rows.append(rng.integers(-1, limit, size=t.width))
            batch_states.append(-1)
        dead = sorted(set(range(ls.dev.max_states)) - set(ls.live))  # freed or never created
        if dead and rng.random() < 0.25:
            batch_rows.append(rng.integers(-1, limit, size=t.width))
            batch_states.append(int(rng.choice(dead)))
        order = rng.permutation(len(batch_rows))  # a state's rows need not be adjacent
        topk = np.stack(batch_rows)[order]
        states = np.array(batch_states, np.int64)[order]
        wide = bool((topk >= 2**31).any()) or rng.random() < 0.5
        state_dtype = "int64" if rng.random() < 0.5 else "int32"
        dtypes = ("int64" if wide else "int32", state_dtype)
        if rng.random() < 0.1:  # a batch without columns: only the states are checked
            ls.step(topk[:, :0], states, dtypes=dtypes)
        ls.step(topk, states, dtypes=dtypes)


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    topk = draw(st.one_of(st.integers(1, 40), st.sampled_from([63, 64, 65, 200, 513, 1024, 2048])))
    dbs = min(32768, topk + draw(st.integers(0, 4 * topk)))  # top-k .. 5x top-k
    big = topk >= 512
    return Trace(
        topk=topk,
        dbs=dbs,
        width=draw(st.integers(max(1, topk // 2), topk)),
        per_state=draw(st.integers(1, 2 if big else 3)),
        overlap=draw(st.floats(0, 1)),
        p_pad=draw(st.sampled_from([0.0, 0.05, 0.3])),
        p_invalid=draw(st.sampled_from([0.0, 0.05, 0.2])),
        states=draw(st.integers(1, 2 if big else 4)),
        steps=draw(st.integers(2, 3 if big else 6)),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


@settings(max_examples=150)
@given(traces())
@example(Trace(2048, 4096, 2048, 1, 0.9, 0.0, 0.0, 2, 3, 1))  # DeepSeek-V3.2, 90 % overlap
@example(Trace(2048, 6144, 2048, 2, 0.9, 0.01, 0.01, 1, 3, 2))  # one MTP draft: (2 + 1) x top-k
@example(Trace(1, 1, 1, 1, 0.0, 0.0, 0.0, 2, 4, 3))
@example(Trace(8, 8, 8, 3, 0.0, 0.0, 0.1, 3, 4, 4))  # MTP unions that overflow
def test_triton_resolver_equals_rust_on_traces(trace: Trace) -> None:
    run_trace(trace)


# ---- the Rust resolver's hand cases, on the device --------------------------


def pair(dbs: int, topk: int, rows: int = ROWS, states: int = 1, max_rows: int = 4) -> Lockstep:
    ls = Lockstep(dbs, topk, rows, max_states=states + 2, max_rows=max_rows, per_state=max_rows)
    for _ in range(states):
        ls.new_state()
    return ls


def test_cold_start_repeat_and_eviction() -> None:
    ls = pair(8, 4)
    ls.step(np.array([[40, 10, 30, 20]]), np.array([0]), dtypes=("int32", "int32"))
    assert ls.dev.lru_order(0).tolist() == [4, 5, 6, 7, 0, 1, 2, 3]
    again = ls.step(np.array([[40, 10, 30, 20]]), np.array([0]), dtypes=("int64", "int64"))
    assert again.status.tolist()[:2] == [4, 0] and again.miss_counts.tolist() == [0]
    ls = pair(4, 2)
    for rows in ([1, 2], [3, 4], [5, 1]):  # 1 hits slot 0; 5 evicts row 2 (slot 1), the oldest non-hit
        ls.step(np.array([rows]), np.array([0]), dtypes=("int64", "int32"))
    assert ls.dev.slot_rows(0).tolist() == [1, 5, 3, 4] and ls.dev.lru_order(0).tolist() == [2, 3, 1, 0]


def test_padding_invalid_rows_duplicates_and_padded_rows() -> None:
    ls = pair(4, 3, rows=100)
    ls.step(np.array([[7, -1, 100], [8, 9, 10], [-5, 7, 7]]), np.array([0, -1, 0]), dtypes=("int64", "int64"))
    ls.step(np.array([[2**40, -2, 99]]), np.array([0]), dtypes=("int64", "int32"))
    ls = pair(8, 4)
    dup = ls.step(np.array([[7, 7, 8, 7]]), np.array([0]), dtypes=("int32", "int32"))
    assert dup.slots.tolist() == [[0, 0, 1, 0]] and dup.status.tolist()[:2] == [2, 2]


def test_mtp_union_never_self_evicts_and_an_overflow_leaves_only_its_state() -> None:
    ls = pair(4, 2, states=2)
    ls.step(np.array([[1, 2], [3, 1]]), np.array([0, 0]), dtypes=("int64", "int64"))
    assert ls.dev.slot_rows(0).tolist() == [1, 2, 3, -1]
    # State 0's three rows select 6 distinct rows (> 4): it is left as it was,
    # its rows give -1; state 1 (between them in the batch) is resolved.
    before = ls.dev.export_state(0)
    topk = dev_tensor([[4, 5], [9, 9], [6, 7], [8, 9]])
    plan = ls.dev.resolve(topk, dev_tensor([0, 1, 0, 0]))
    assert plan.slots.tolist() == [[-1, -1], [0, 0], [-1, -1], [-1, -1]]
    assert plan.miss_counts.tolist() == [0, 1, 0, 0] and plan.status.tolist() == [1, 1, FLAG_UNION_EXCEEDS, 1]
    assert all(torch.equal(a, b) for a, b in zip(ls.dev.export_state(0), before, strict=True))
    err = status_error(plan.status, 4)
    assert isinstance(err, PoolError) and err.code == "union_exceeds_device_buffer" and "state 0" in str(err)


def test_device_flags_for_unknown_states_and_too_many_rows() -> None:
    dev = TritonResidencyResolver(8, 4, ROWS, max_states=2, max_rows=4, max_rows_per_state=2, device=DEVICE)
    dev.new_state()
    plan = dev.resolve(dev_tensor([[1, 2, 3, 4], [5, 6, 7, 8]]), dev_tensor([0, 2]))
    assert plan.slots[1].tolist() == [-1] * 4 and plan.status.tolist() == [0, 4, FLAG_UNKNOWN_STATE, 0]
    err = status_error(plan.status, 8)
    assert isinstance(err, PoolError) and err.code == "unknown_state"
    before = dev.export_state(0)
    three = dev.resolve(dev_tensor([[9, 9, 9, 9]] * 3), dev_tensor([0, 0, 0]))
    assert three.slots.tolist() == [[-1] * 4] * 3 and three.status.tolist() == [0, 0, FLAG_TOO_MANY_ROWS, 0]
    assert torch.equal(dev.export_state(0)[0], before[0])
    assert isinstance(status_error(three.status, 8), ValueError)
    assert status_error([5, 1, 0, 0], 8) is None


def test_freed_and_never_created_states_are_refused_as_rust_refuses_them() -> None:
    # Issue 17 item 4: ids below max_states that are not live resolved with status 0.
    ls = pair(8, 4, states=2, max_rows=4)
    ls.step(np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([0, 1]), dtypes=("int64", "int64"))
    ls.free_state(1)
    for dead in (1, 2):  # freed; never created (max_states is 4)
        got = ls.step(np.array([[1, 2, 9, 4], [5, 6, 7, 8]]), np.array([0, dead]), dtypes=("int64", "int32"))
        assert got.slots[1].tolist() == [-1] * 4 and got.miss_counts[1] == 0
        err = status_error(got.status, 8)
        assert isinstance(err, PoolError) and err.code == "unknown_state"
    # The same id, live again, resolves.
    assert ls.new_state() == 1
    got = ls.step(np.array([[5, 6, 7, 8]]), np.array([1]), dtypes=("int64", "int64"))
    assert got.status.tolist() == [0, 4, 0, 0]


def test_width_zero_checks_the_states_as_rust_does() -> None:
    ls = pair(8, 4, states=1, max_rows=4)
    empty = np.zeros((2, 0), np.int64)
    ok = ls.step(empty, np.array([0, -1]), dtypes=("int64", "int64"))
    assert ok.status.tolist() == [0, 0, 0, 0] and ok.miss_offsets.tolist() == [0, 0, 0]
    for dead in (1, 3, 7, -2):  # never created, the last id, out of range, below -1
        got = ls.step(empty, np.array([0, dead]), dtypes=("int64", "int64"))
        assert got.status.tolist() == [0, 0, FLAG_UNKNOWN_STATE, 0], dead


def test_width_zero_counts_the_rows_a_state_shares_as_the_kernel_does() -> None:
    # Issue 22: a batch without columns flagged no FLAG_TOO_MANY_ROWS where width 4 does.
    dev = TritonResidencyResolver(8, 4, ROWS, max_states=2, max_rows=4, max_rows_per_state=1, device=DEVICE)
    dev.new_state()
    wide = dev.resolve(dev_tensor([[1, 2, 3, 4]] * 2), dev_tensor([0, 0]))
    assert wide.status.tolist()[2] == FLAG_TOO_MANY_ROWS
    empty = dev.resolve(dev_tensor(np.zeros((2, 0), np.int64)), dev_tensor([0, 0]))
    assert empty.status.tolist() == [0, 0, FLAG_TOO_MANY_ROWS, 0]
    one = dev.resolve(dev_tensor(np.zeros((2, 0), np.int64)), dev_tensor([0, -1]))
    assert one.status.tolist() == [0, 0, 0, 0]


def test_inputs_that_alias_the_outputs_are_refused_before_launch() -> None:
    # Issue 17 item 4: topk_rows viewing the plan buffer it is written into gave a
    # corrupt plan with no error.
    ls = pair(8, 4, states=1, max_rows=2)
    dev, s = ls.dev, 0
    ls.step(np.array([[1, 2, 3, 4]]), np.array([s]), dtypes=("int64", "int64"))
    before = [t.clone() for t in dev.export_state(s)]
    out = dev.workspace.outputs
    out.miss_host_rows[:4] = torch.tensor([1, 6, 7, 8])
    status = torch.zeros(4, dtype=torch.int64, device=DEVICE)
    states = dev_tensor([s])
    aliased = [  # (names in the error, topk_rows, state_index)
        (("miss_host_rows", "topk_rows"), out.miss_host_rows[:4].view(1, 4), states),
        (("slots", "topk_rows"), out.slots[:4].view(1, 4), states),
        (("slot_rows", "topk_rows"), dev.slot_rows_all[s, :4].view(1, 4), states),
        (("workspace.keys", "topk_rows"), dev.workspace._keys[0, :4].view(1, 4), states),
        (("miss_counts", "state_index"), dev_tensor([[1, 2, 3, 4]]), out.miss_counts[:1]),
    ]
    for names, rows, st_index in aliased:
        with pytest.raises(ValueError, match="share memory") as e:
            dev.resolve(rows, st_index, status=status)
        assert all(n in str(e.value) for n in names), str(e.value)
    assert status.tolist() == [0, 0, 0, 0]
    assert all(torch.equal(x, y) for x, y in zip(dev.export_state(s), before, strict=True))
    # A copy is fine, and equals the Rust resolver's result.
    ls.step(out.miss_host_rows[:4].view(1, 4).cpu().numpy(), np.array([s]), dtypes=("int64", "int64"))


def test_status_accumulates_across_calls_until_zeroed() -> None:
    dev = TritonResidencyResolver(8, 4, ROWS, max_states=1, max_rows=1, device=DEVICE)
    dev.new_state()
    status = torch.zeros(4, dtype=torch.int64, device=DEVICE)
    for _ in range(3):  # e.g. the layers of one decode step
        dev.resolve(dev_tensor([[1, 2, 3, -1]]), dev_tensor([0]), status=status)
    assert status.tolist() == [6, 3, 0, 0]
    with pytest.raises(ValueError, match="status must be int64"):
        dev.resolve(
            dev_tensor([[1]]), dev_tensor([0]), status=torch.zeros(4, dtype=torch.int32, device=DEVICE)
        )


@pytest.mark.parametrize("topk", [1, 31, 32, 33, 64, 65, 128, 1024, 2048])
@pytest.mark.parametrize("factor", [2, 5])
def test_topk_sizes_with_90_percent_overlap(topk: int, factor: int) -> None:
    if topk == 2048 and factor == 5:
        factor = 3  # (s_q 2 + 1) x top-k; the 5x buffer is in the traces above
    run_trace(Trace(topk, factor * topk, topk, 1, 0.9, 0.0, 0.0, 2 if topk < 1024 else 1, 4, topk))


def test_a_request_moves_between_the_paths_and_continues_identically() -> None:
    # Rust for 4 steps -> device (a fresh resolver, another state id) for 4 ->
    # Rust again (fresh) for 4: equal to 12 steps on one Rust resolver.
    rng = np.random.default_rng(11)
    trace = [rng.integers(-1, 300, size=(2, 24)) for _ in range(12)]
    whole = ResidencyResolver(64, 24, 300, 656)
    s = whole.new_state()
    want = [whole.resolve(t, [s, s]) for t in trace]
    first = ResidencyResolver(64, 24, 300, 656)
    a = first.new_state()
    got = [first.resolve(t, [a, a]).slots for t in trace[:4]]
    dev = TritonResidencyResolver(64, 24, 300, max_states=3, max_rows=2, max_rows_per_state=2, device=DEVICE)
    dev.new_state()
    b = dev.new_state()
    dev.import_state(b, *(dev_tensor(x) for x in first.export_state(a)))
    got += [dev.resolve(dev_tensor(t), dev_tensor([b, b])).slots.cpu().numpy().copy() for t in trace[4:8]]
    last = ResidencyResolver(64, 24, 300, 656)
    last.new_state()
    c = last.new_state()
    last.import_state(c, *(x.cpu().numpy() for x in dev.export_state(b)))
    got += [last.resolve(t, [c, c]).slots for t in trace[8:]]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w.slots)
    np.testing.assert_array_equal(last.lru_order(c), whole.lru_order(s))


# ---- host-side checks, state bookkeeping, memory ---------------------------


def test_host_side_errors_raise_before_anything_runs() -> None:
    dev = TritonResidencyResolver(8, 4, ROWS, max_states=2, max_rows=2, device=DEVICE)
    s = dev.new_state()
    dev.resolve(dev_tensor([[1, 2]]), dev_tensor([s]))
    before = dev.export_state(s)
    cases: list[tuple[torch.Tensor, torch.Tensor, type[Exception], str]] = [
        (torch.zeros(1, 5, dtype=torch.int32, device=DEVICE), dev_tensor([s]), PoolError, "topk_too_wide"),
        (torch.zeros(2, 4, dtype=torch.int32, device=DEVICE), dev_tensor([s]), PoolError, "shape_mismatch"),
        (torch.zeros(3, 4, dtype=torch.int32, device=DEVICE), dev_tensor([s, s, s]), ValueError, "max_rows"),
        (torch.zeros(1, 4, device=DEVICE), dev_tensor([s]), ValueError, "int32/int64"),
        (torch.zeros(1, 4, dtype=torch.int32, device="meta"), dev_tensor([s]), ValueError, "meta"),
        (torch.zeros(4, dtype=torch.int32, device=DEVICE), dev_tensor([s]), ValueError, "2 dimension"),
    ]
    for topk, states, kind, what in cases:
        with pytest.raises(kind) as e:
            dev.resolve(topk, states)
        assert what in (e.value.code if isinstance(e.value, PoolError) else str(e.value))
    assert all(torch.equal(a, b) for a, b in zip(dev.export_state(s), before, strict=True))
    # No rows, or no columns: nothing to resolve.
    none = dev.resolve(
        torch.zeros(0, 4, dtype=torch.int32, device=DEVICE), torch.zeros(0, dtype=torch.int32, device=DEVICE)
    )
    assert none.slots.shape == (0, 4) and none.miss_offsets.tolist() == [0]
    empty = dev.resolve(torch.zeros(2, 0, dtype=torch.int32, device=DEVICE), dev_tensor([s, -1]))
    assert empty.miss_counts.tolist() == [0, 0] and empty.miss_offsets.tolist() == [0, 0, 0]


def test_batches_past_the_rust_bound_are_refused_as_rust_refuses_them() -> None:
    """``batch_too_large`` above ``MAX_RESOLVE_ENTRIES`` (the Rust resolver's 2**26), from the
    shapes alone: the batches are stride-0 views of one row, so nothing of that size exists."""
    bound = hisparse_rs._core.MAX_RESOLVE_ENTRIES
    assert bound == 2**26 and bound == resolver.MAX_RESOLVE_ENTRIES
    width = 4096
    ws = ResolverWorkspace(width, width, 1, device=DEVICE)
    slot_rows = torch.full((1, width), -1, dtype=torch.int32, device=DEVICE)
    lru = torch.arange(width, dtype=torch.int16, device=DEVICE)[None]
    row = torch.full((1, width), -1, dtype=torch.int64, device=DEVICE)
    pad = torch.full((1,), -1, dtype=torch.int64, device=DEVICE)

    def resolve(rows: int) -> None:
        assert row.expand(rows, width).stride(0) == 0
        resolve_residency(
            row.expand(rows, width), pad.expand(rows), slot_rows, lru, num_host_rows=ROWS, workspace=ws
        )

    # At the bound the batch passes this check and meets the next (the workspace holds one row).
    with pytest.raises(ValueError, match="max_rows"):
        resolve(bound // width)
    with pytest.raises(PoolError, match=f"more than the {bound} one resolve call takes") as e:
        resolve(bound // width + 1)
    assert e.value.code == "batch_too_large" and e.value.code in hisparse_rs.pool_error_codes()
    assert slot_rows.eq(-1).all() and lru.equal(torch.arange(width, dtype=torch.int16, device=DEVICE)[None])


def test_state_bookkeeping_and_construction_rules_match_rust() -> None:
    dev = TritonResidencyResolver(4, 2, ROWS, max_states=4, max_rows=1, device=DEVICE)
    assert [dev.new_state() for _ in range(3)] == [0, 1, 2]
    dev.resolve(dev_tensor([[5, 6]]), dev_tensor([1]))
    dev.reset_state(1)
    assert dev.slot_rows(1).tolist() == [-1] * 4 and dev.lru_order(1).tolist() == [0, 1, 2, 3]
    dev.free_state(2)
    dev.free_state(0)
    with pytest.raises(PoolError, match="unknown resolver state") as e:
        dev.free_state(0)
    assert e.value.code == "unknown_state" and dev.num_states == 1
    assert [dev.new_state(), dev.new_state(), dev.new_state()] == [0, 2, 3]
    with pytest.raises(ValueError, match="max_states"):
        dev.new_state()
    for args, code in [
        ((2047, 2048, ROWS), "topk_exceeds_device_buffer"),
        ((32769, 2048, ROWS), "device_buffer_too_large"),
        ((4096, 0, ROWS), "invalid_size"),
        ((4096, 2048, 2**31 + 1), "invalid_size"),
    ]:
        with pytest.raises(PoolError) as err:
            TritonResidencyResolver(*args, max_states=1, max_rows=1, device=DEVICE)
        assert err.value.code == code
        with pytest.raises(PoolError) as rust:
            ResidencyResolver(*args, 656)
        assert rust.value.code == code


@pytest.mark.parametrize(
    ("rows", "lru", "code"),
    [
        ([1, 2, 3], [0, 1, 2, 3], "shape_mismatch"),
        ([1, 100, -1, -1], [0, 1, 2, 3], "invalid_resolver_state"),
        ([1, -2, -1, -1], [0, 1, 2, 3], "invalid_resolver_state"),
        ([7, 8, 7, -1], [0, 1, 2, 3], "invalid_resolver_state"),
        ([1, 2, 3, 4], [0, 1, 1, 3], "invalid_resolver_state"),
        ([1, 2, 3, 4], [0, 1, 2, 4], "invalid_resolver_state"),
    ],
)
def test_device_import_is_validated_as_rusts(rows: list[int], lru: list[int], code: str) -> None:
    dev = TritonResidencyResolver(4, 2, 100, max_states=1, max_rows=1, device=DEVICE)
    s = dev.new_state()
    dev.resolve(dev_tensor([[5, 6]]), dev_tensor([s]))
    before = dev.export_state(s)
    with pytest.raises(PoolError) as e:
        dev.import_state(s, dev_tensor(rows), dev_tensor(lru))
    assert e.value.code == code
    assert all(torch.equal(a, b) for a, b in zip(dev.export_state(s), before, strict=True))
    rust = ResidencyResolver(4, 2, 100, 656)
    with pytest.raises(PoolError) as r:
        rust.import_state(rust.new_state(), np.array(rows), np.array(lru))
    assert r.value.code == code


def _outcome(call: Any) -> tuple[str, str | None]:
    """What a call did: ``("ok", None)`` or the exception's type and PoolError code."""
    try:
        call()
    except Exception as e:
        return type(e).__name__, getattr(e, "code", None)
    return "ok", None


@pytest.mark.parametrize(
    "args",
    [
        (-8, 4, 100),
        (2**40, 4, 100),
        (8, 0, 100),
        (8, -1, 100),
        (4, 8, 100),
        (8, 4, 0),
        (8, 4, 2**64),
        ("8", 4, 100),
        (8, 2.5, 100),
        (np.int64(8), np.int32(4), np.int64(100)),
    ],
)
def test_construction_takes_the_rust_resolvers_arguments(args: tuple[Any, Any, Any]) -> None:
    # The twin raised TypeError comparing "8" > 32768, took a negative
    # device_buffer_size for topk_exceeds_device_buffer, and a float top-k.
    dev = _outcome(lambda: TritonResidencyResolver(*args, max_states=1, max_rows=1, device=DEVICE))
    assert dev == _outcome(lambda: ResidencyResolver(*args, 656)), args


@pytest.mark.parametrize(
    ("kind", "rows", "lru"),
    [
        ("numpy int64 state id", None, None),
        ("list", [-1, 5, -1, -1], [0, 1, 2, 3]),
        ("float rows", np.array([-1.0, 5.0, -1.0, -1.0]), np.arange(4)),
        ("float lru", np.array([-1, 5, -1, -1]), np.arange(4.0)),
        ("2-D rows", np.array([[-1, 5], [-1, -1]]), np.arange(4)),
        ("uint8 lru", np.array([-1, 5, -1, -1]), np.arange(4, dtype=np.uint8)),
        ("int16 rows", np.array([-1, 5, -1, -1], np.int16), np.arange(4, dtype=np.int16)),
        ("empty list", [], []),
    ],
)
def test_import_state_takes_what_the_rust_resolver_takes(kind: str, rows: Any, lru: Any) -> None:
    # The twin truncated float rows, flattened 2-D ones, and refused a numpy
    # state id as "unknown resolver state 0: it was never created".
    dev = TritonResidencyResolver(4, 2, 100, max_states=1, max_rows=1, device=DEVICE)
    rust = ResidencyResolver(4, 2, 100, 656)
    s = dev.new_state()
    assert rust.new_state() == s
    sid = np.int64(s)
    if rows is None:
        for r in (rust, dev):
            r.reset_state(sid)
            r.export_state(torch.tensor(s))
        rows, lru = [-1, 7, -1, -1], [3, 2, 1, 0]

    def as_dev(x: Any) -> Any:
        return torch.from_numpy(x).to(DEVICE) if isinstance(x, np.ndarray) else x

    want = _outcome(lambda: rust.import_state(sid, rows, lru))
    before = dev.export_state(s)
    got = _outcome(lambda: dev.import_state(sid, as_dev(rows), as_dev(lru)))
    assert got == want, kind
    if want == ("ok", None):
        np.testing.assert_array_equal(dev.slot_rows(s).cpu().numpy(), rust.slot_rows(s))
        np.testing.assert_array_equal(dev.lru_order(s).cpu().numpy(), rust.lru_order(s))
    else:
        assert all(torch.equal(a, b) for a, b in zip(dev.export_state(s), before, strict=True))


def test_import_state_refuses_tensors_without_data() -> None:
    dev = TritonResidencyResolver(4, 2, 100, max_states=1, max_rows=1, device=DEVICE)
    s = dev.new_state()
    for rows in (torch.full((4,), -1, device="meta"), torch.full((4,), -1).to_sparse()):
        with pytest.raises(ValueError, match="slot_rows"):
            dev.import_state(s, rows, torch.arange(4))


def test_device_memory_per_state_and_workspace() -> None:
    dev = TritonResidencyResolver(4096, 2048, ROWS, max_states=2, max_rows=2, device=DEVICE)
    # 6 B per slot (int32 row + int16 LRU), as SGLang / vLLM; Rust's CPU state adds a 2 B x 4 x dbs index.
    assert dev.state_bytes == 6 * 4096
    assert dev.slot_rows_all.element_size() + dev.lru_all.element_size() == 6
    assert ResidencyResolver(4096, 2048, ROWS, 656).state_bytes == 14 * 4096
    ws = ResolverWorkspace(4096, 2048, 64, max_rows_per_state=1, device=DEVICE)
    # Union table of 8192 entries x 16 B + 7 B per slot + lanes: ~164 KB per batch row.
    assert ws.tiling.table == 8192
    assert ws.tiling.workspace_bytes_per_row() == 16 * 8192 + 7 * 4096 + 4 * 1024 + 4
    assert ws.tiling.constexprs()["DBS"] == 4096 and ws.tiling.num_warps == 16
    with pytest.raises(ValueError, match="max_rows_per_state"):
        ResolverWorkspace(8, 4, 2, max_rows_per_state=3, device=DEVICE)
    with pytest.raises(ValueError, match="max_rows"):
        ResolverWorkspace(8, 4, 0, device=DEVICE)


def test_resolve_residency_on_caller_tensors() -> None:
    # The bare launcher over the caller's own state tensors and workspace.
    ws = ResolverWorkspace(8, 4, 2, device=DEVICE)
    slot_rows = torch.full((3, 8), -1, dtype=torch.int32, device=DEVICE)
    lru = torch.arange(8, dtype=torch.int16, device=DEVICE).repeat(3, 1)
    wide = torch.arange(16, device=DEVICE).reshape(2, 8)[:, ::2]  # strided columns are made contiguous
    plan = resolve_residency(wide, dev_tensor([2, 0]), slot_rows, lru, num_host_rows=ROWS, workspace=ws)
    assert plan.slots.tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert slot_rows[2, :4].tolist() == [0, 2, 4, 6] and slot_rows[1].tolist() == [-1] * 8
    assert plan.slots.data_ptr() == ws.outputs.slots.data_ptr()  # outputs live in the workspace
    with pytest.raises(ValueError, match="slot_rows and lru"):
        resolve_residency(wide, dev_tensor([0, 0]), slot_rows[:, :4], lru, num_host_rows=ROWS, workspace=ws)
