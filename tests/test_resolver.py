"""Hand cases for the residency resolver (HISPARSE.md §6), each also checked
against the NumPy reference in reference_pool.py."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numpy.typing import NDArray

import hisparse_rs
from hisparse_rs import PoolError, ResidencyResolver
from reference_pool import RefError, RefResolver

ROWS = 1 << 20


def same_as_reference(
    got: hisparse_rs.ResolveResult, ref: RefResolver, topk: NDArray[np.int64], states: NDArray[np.int64]
) -> None:
    want = ref.resolve(topk, states)
    np.testing.assert_array_equal(got.slots, want.slots)
    np.testing.assert_array_equal(got.miss_host_rows, want.miss_host_rows)
    np.testing.assert_array_equal(got.miss_slots, want.miss_slots)
    np.testing.assert_array_equal(got.miss_counts, want.miss_counts)
    assert (got.hits, got.misses) == (want.hits, want.misses)
    np.testing.assert_array_equal(got.miss_offsets, np.concatenate([[0], np.cumsum(want.miss_counts)]))


def check_state_invariants(r: ResidencyResolver, state: int) -> None:
    rows = r.slot_rows(state)
    held = rows[rows >= 0]
    assert len(np.unique(held)) == len(held), "a row sits in two slots"
    assert sorted(r.lru_order(state).tolist()) == list(range(r.device_buffer_size)), (
        "LRU is not a permutation"
    )


def test_cold_start_takes_slots_in_lru_order() -> None:
    r = ResidencyResolver(8, 4, ROWS, 656)
    s = r.new_state()
    out = r.resolve(np.array([[40, 10, 30, 20]], np.int32), np.array([s], np.int32))
    assert out.slots.tolist() == [[0, 1, 2, 3]]
    assert out.miss_host_rows.tolist() == [40, 10, 30, 20]
    assert out.miss_slots.tolist() == [0, 1, 2, 3]
    assert r.lru_order(s).tolist() == [4, 5, 6, 7, 0, 1, 2, 3]
    assert out.slots.dtype == np.int32 and out.miss_host_rows.dtype == np.int64


def test_repeated_topk_is_all_hits_and_changes_nothing() -> None:
    r = ResidencyResolver(8, 4, ROWS, 656)
    s = r.new_state()
    topk = np.array([[5, 6, 7, 8]], np.int64)
    r.resolve(topk, [s])
    rows, lru = r.slot_rows(s), r.lru_order(s)
    again = r.resolve(topk, [s])
    assert (again.hits, again.misses) == (4, 0)
    assert again.miss_host_rows.size == 0 and again.miss_counts.tolist() == [0]
    np.testing.assert_array_equal(r.slot_rows(s), rows)
    np.testing.assert_array_equal(r.lru_order(s), lru)


def test_eviction_takes_oldest_non_hit_slot() -> None:
    r = ResidencyResolver(4, 2, ROWS, 656)
    s = r.new_state()
    r.resolve([[1, 2]], [s])
    r.resolve([[3, 4]], [s])
    out = r.resolve([[5, 1]], [s])  # 1 hits slot 0; 5 evicts row 2 (slot 1), the oldest non-hit
    assert out.slots.tolist() == [[1, 0]]
    assert r.slot_rows(s).tolist() == [1, 5, 3, 4]
    assert r.lru_order(s).tolist() == [2, 3, 1, 0]


@pytest.mark.parametrize("topk", [1, 31, 32, 33, 63, 64, 65, 128, 2048])
@pytest.mark.parametrize("factor", [2, 5])
def test_topk_sizes_against_reference(topk: int, factor: int) -> None:
    dbs = factor * topk
    rng = np.random.default_rng(topk * 10 + factor)
    r = ResidencyResolver(dbs, topk, ROWS, 656)
    ref = RefResolver(dbs, topk, ROWS)
    states = np.array([r.new_state() for _ in range(3)], np.int64)
    assert states.tolist() == [ref.new_state() for _ in range(3)]
    hist = 4 * dbs  # a history longer than the hot buffer: evictions happen
    prev = np.stack([rng.choice(hist, topk, replace=False) for _ in range(3)])
    for _ in range(6):
        step = prev.copy()
        for row in step:  # 90 % overlap with the previous step
            k = max(1, topk // 10)
            fresh = rng.choice(np.setdiff1d(np.arange(hist), row), k, replace=False)
            row[rng.choice(topk, k, replace=False)] = fresh
        same_as_reference(r.resolve(step, states), ref, step, states)
        prev = step
        for s in states:
            check_state_invariants(r, int(s))
            np.testing.assert_array_equal(r.slot_rows(int(s)), ref.states[int(s)].slot_rows)
            np.testing.assert_array_equal(r.lru_order(int(s)), ref.states[int(s)].lru)


def test_padding_and_padded_rows_change_nothing() -> None:
    r = ResidencyResolver(8, 4, 100, 656)
    ref = RefResolver(8, 4, 100)
    s = r.new_state()
    ref.new_state()
    topk = np.array([[3, -1, 4, -1], [9, 9, 9, 9], [-1, -1, -1, -1]], np.int64)
    states = np.array([s, -1, s], np.int64)
    out = r.resolve(topk, states)
    assert out.slots.tolist() == [[0, -1, 1, -1], [-1] * 4, [-1] * 4]
    assert (out.hits, out.misses) == (0, 2)
    assert 9 not in r.slot_rows(s)
    ref.resolve(topk, states)
    same_as_reference(r.resolve(topk, states), ref, topk, states)


def test_out_of_range_is_invalid_not_a_miss() -> None:
    r = ResidencyResolver(8, 4, 100, 656)
    s = r.new_state()
    out = r.resolve(np.array([[100, -2, 99, 2**40]], np.int64), [s])
    assert out.slots.tolist() == [[-1, -1, 0, -1]]
    assert (out.hits, out.misses) == (0, 1)
    assert r.metrics.to_dict()["hisparse_cache_misses"] == 1


def test_mtp_rows_resolve_as_one_union() -> None:
    r = ResidencyResolver(8, 4, ROWS, 656)
    ref = RefResolver(8, 4, ROWS)
    s = r.new_state()
    ref.new_state()
    # Two query rows of one request share rows 2 and 3: loaded once, no self-eviction.
    topk = np.array([[1, 2, 3, 4], [3, 2, 5, 6]], np.int64)
    states = np.array([s, s], np.int64)
    want = ref.resolve(topk, states)
    out = r.resolve(topk, states)
    assert out.miss_host_rows.tolist() == [1, 2, 3, 4, 5, 6]
    assert out.miss_counts.tolist() == [4, 2]
    assert out.slots[1].tolist() == [2, 1, 4, 5]
    assert (out.hits, out.misses) == (2, 6) == (want.hits, want.misses)
    # A union larger than the hot buffer is refused and changes nothing.
    before = r.slot_rows(s)
    with pytest.raises(PoolError) as e:
        r.resolve(np.array([[10, 11, 12, 13], [14, 15, 16, 17], [18, 1, 2, 3]]), [s, s, s])
    assert e.value.code == "union_exceeds_device_buffer"
    np.testing.assert_array_equal(r.slot_rows(s), before)


def test_duplicates_in_a_row_hit_the_same_slot() -> None:
    r = ResidencyResolver(8, 4, ROWS, 656)
    s = r.new_state()
    out = r.resolve([[7, 7, 8, 7]], [s])
    assert out.slots.tolist() == [[0, 0, 1, 0]]
    assert (out.hits, out.misses) == (2, 2)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ((2047, 2048, ROWS, 656), "topk_exceeds_device_buffer"),
        ((32769, 2048, ROWS, 656), "device_buffer_too_large"),
        ((4096, 0, ROWS, 656), "invalid_size"),
        ((4096, 2048, 2**31 + 1, 656), "invalid_size"),
    ],
)
def test_construction_rules(args: tuple[int, int, int, int], code: str) -> None:
    with pytest.raises(PoolError) as e:
        ResidencyResolver(*args)
    assert e.value.code == code
    assert code in hisparse_rs.pool_error_codes()
    if args[2] <= 2**31:  # the reference does not model the int32 row limit
        with pytest.raises(RefError) as ref_error:
            RefResolver(args[0], args[1], args[2])
        assert ref_error.value.code == code


def test_errors_change_nothing() -> None:
    r = ResidencyResolver(8, 4, ROWS, 656)
    s = r.new_state()
    r.resolve([[1, 2, 3, 4]], [s])
    before = (r.slot_rows(s), r.lru_order(s), r.metrics.to_dict())
    for topk, states, code in [
        (np.zeros((1, 5), np.int32), [s], "topk_too_wide"),
        (np.zeros((2, 4), np.int32), [s], "shape_mismatch"),
        (np.zeros((2, 4), np.int32), [s, 9], "unknown_state"),
        (np.zeros((2, 4), np.int32), [s, -3], "unknown_state"),
    ]:
        with pytest.raises(PoolError) as e:
            r.resolve(topk, states)
        assert e.value.code == code
    assert (r.slot_rows(s).tolist(), r.lru_order(s).tolist(), r.metrics.to_dict()) == (
        before[0].tolist(),
        before[1].tolist(),
        before[2],
    )
    with pytest.raises(TypeError):
        r.resolve(np.zeros((1, 4), np.float64), [s])


def test_states_are_reused_lowest_first_and_reset() -> None:
    r = ResidencyResolver(4, 2, ROWS, 656)
    assert [r.new_state() for _ in range(3)] == [0, 1, 2]
    r.resolve([[5, 6]], [1])
    r.reset_state(1)
    assert r.slot_rows(1).tolist() == [-1] * 4 and r.lru_order(1).tolist() == [0, 1, 2, 3]
    r.free_state(2)
    r.free_state(0)
    with pytest.raises(PoolError, match="unknown resolver state"):
        r.free_state(0)
    assert r.num_states == 1
    assert [r.new_state(), r.new_state(), r.new_state()] == [0, 2, 3]
    assert r.state_bytes == 4 * 6 + 16 * 2  # rows + LRU, and the 16-entry u16 row -> slot index


def test_inputs_int32_int64_lists_and_strided() -> None:
    r = ResidencyResolver(16, 4, ROWS, 656)
    a, b = r.new_state(), r.new_state()
    wide = np.arange(16, dtype=np.int64).reshape(2, 8)[:, ::2]  # non-contiguous view
    out = r.resolve(wide, np.array([a, b], np.int64))
    assert out.slots.tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]]
    again = r.resolve(wide.astype(np.int32).tolist(), [a, b])
    assert (again.hits, again.misses) == (8, 0)


def test_parallel_batch_matches_reference() -> None:
    # 16 states: above the parallel threshold.
    rng = np.random.default_rng(7)
    r = ResidencyResolver(256, 128, ROWS, 656)
    ref = RefResolver(256, 128, ROWS)
    states = np.array([r.new_state() for _ in range(16)], np.int64)
    for _ in range(16):
        ref.new_state()
    order = np.concatenate([states, states[:4]])  # 4 MTP states with two rows each
    for _ in range(5):
        topk = rng.integers(-1, 600, size=(len(order), 128))
        same_as_reference(r.resolve(topk, order), ref, topk, order)


def test_concurrent_callers_are_serialized() -> None:
    r = ResidencyResolver(64, 32, ROWS, 656)
    states = [r.new_state() for _ in range(8)]
    topks = [np.arange(i * 1000, i * 1000 + 32, dtype=np.int32).reshape(1, 32) for i in range(8)]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(50):
                r.resolve(topks[i], [states[i]])
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    m = r.metrics
    assert (m.misses, m.hits) == (8 * 32, 8 * 32 * 49)
    for i, s in enumerate(states):
        assert sorted(r.slot_rows(s)[r.slot_rows(s) >= 0].tolist()) == topks[i][0].tolist()


def test_export_import_round_trip_continues_identically() -> None:
    rng = np.random.default_rng(3)
    a = ResidencyResolver(16, 8, 200, 656)
    b = ResidencyResolver(16, 8, 200, 656)
    sa = a.new_state()
    b.new_state()
    sb = b.new_state()  # a different id: states move between ids too
    for _ in range(20):
        a.resolve(rng.integers(-2, 60, size=(1, 8)), [sa])
    rows, lru = a.export_state(sa)
    assert rows.dtype == np.int32 and lru.dtype == np.int16
    np.testing.assert_array_equal(rows, a.slot_rows(sa))
    np.testing.assert_array_equal(lru, a.lru_order(sa))
    b.import_state(sb, rows, lru.astype(np.int64))
    for _ in range(20):
        topk = rng.integers(-2, 60, size=(2, 8))
        ra, rb = a.resolve(topk, [sa, sa]), b.resolve(topk, [sb, sb])
        np.testing.assert_array_equal(ra.slots, rb.slots)
        np.testing.assert_array_equal(ra.miss_host_rows, rb.miss_host_rows)
        np.testing.assert_array_equal(ra.miss_slots, rb.miss_slots)
        np.testing.assert_array_equal(a.lru_order(sa), b.lru_order(sb))
    # Plain lists and int16 arrays are taken too.
    b.import_state(sb, a.slot_rows(sa).tolist(), a.lru_order(sa))


@pytest.mark.parametrize(
    ("rows", "lru", "code"),
    [
        ([1, 2, 3], [0, 1, 2, 3], "shape_mismatch"),
        ([[1, 2], [3, -1]], [0, 1, 2, 3], "shape_mismatch"),
        ([1, 100, -1, -1], [0, 1, 2, 3], "invalid_resolver_state"),
        ([1, -2, -1, -1], [0, 1, 2, 3], "invalid_resolver_state"),
        ([7, 8, 7, -1], [0, 1, 2, 3], "invalid_resolver_state"),
        ([1, 2, 3, 4], [0, 1, 1, 3], "invalid_resolver_state"),
        ([1, 2, 3, 4], [0, 1, 2, 4], "invalid_resolver_state"),
        ([1, 2, 3, 4], [0, 1, 2, -1], "invalid_resolver_state"),
    ],
)
def test_a_bad_import_raises_and_changes_nothing(rows: list[int], lru: list[int], code: str) -> None:
    r = ResidencyResolver(4, 2, 100, 656)
    s = r.new_state()
    r.resolve([[5, 6]], [s])
    before = r.export_state(s)
    with pytest.raises(PoolError) as e:
        r.import_state(s, np.array(rows), np.array(lru))
    assert e.value.code == code
    assert code in hisparse_rs.pool_error_codes()
    after = r.export_state(s)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    with pytest.raises(PoolError) as unknown:
        r.import_state(9, before[0], before[1])
    assert unknown.value.code == "unknown_state"
    with pytest.raises(TypeError):
        r.import_state(s, np.zeros(4), before[1])


def test_import_reads_each_array_once() -> None:
    # A caller's buffer is read exactly once (converted, then validated and applied).
    calls = []

    class Counted:
        def __init__(self, values: list[int]) -> None:
            self.values = values

        def __array__(self, dtype: object = None, copy: object = None) -> NDArray[np.int64]:
            calls.append(1)
            return np.array(self.values, dtype=np.int64)

    r = ResidencyResolver(4, 2, 100, 656)
    s = r.new_state()
    r.import_state(s, Counted([-1, 3, -1, 4]), Counted([3, 2, 1, 0]))
    assert len(calls) == 2
    assert r.slot_rows(s).tolist() == [-1, 3, -1, 4] and r.lru_order(s).tolist() == [3, 2, 1, 0]
    assert r.resolve([[4, 3]], [s]).slots.tolist() == [[3, 1]]
