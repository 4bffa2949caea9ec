"""Hot-buffer gather: byte-exact copies, zero-fill for out-of-range sources,
64-bit row offsets, and the Triton kernel against the reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hisparse_rs import kernels as K
from kernel_cases import DEVICE

GATHERS = [K.gather_rows, K.gather_rows_reference]


def pool(rows: int, row_bytes: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (rows, row_bytes), generator=g, dtype=torch.uint8).to(DEVICE)


@pytest.mark.parametrize("gather", GATHERS)
@pytest.mark.parametrize("row_bytes", [656, 1152, 12, 5])
@pytest.mark.parametrize("slot_dtype", [torch.int32, torch.int64])
def test_copies_planned_rows_byte_exact(gather: object, row_bytes: int, slot_dtype: torch.dtype) -> None:
    host = pool(50, row_bytes, seed=row_bytes)
    hot = pool(20, row_bytes, seed=1)
    before = hot.clone()
    src = torch.tensor([7, -1, 49, 50, 0, -9, 2**40], dtype=torch.int64)
    dst = torch.tensor([3, 0, 19, 4, 11, 12, 13], dtype=slot_dtype)
    gather(host, hot, src.to(DEVICE), dst.to(DEVICE))  # type: ignore[operator]
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        want = host[s] if 0 <= s < 50 else torch.zeros(row_bytes, dtype=torch.uint8, device=DEVICE)
        assert torch.equal(hot[d], want), f"slot {d} (host row {s})"
    untouched = [i for i in range(20) if i not in dst.tolist()]
    assert torch.equal(hot[untouched], before[untouched])


@settings(max_examples=100)
@given(
    row_bytes=st.sampled_from([656, 1152, 16, 7]),
    host_rows=st.integers(1, 40),
    slots=st.integers(1, 24),
    data=st.data(),
)
def test_kernel_matches_reference(row_bytes: int, host_rows: int, slots: int, data: st.DataObject) -> None:
    n = data.draw(st.integers(0, slots))
    dst = data.draw(st.permutations(range(slots)))[:n]
    src = data.draw(st.lists(st.integers(-3, host_rows + 3), min_size=n, max_size=n))
    host = pool(host_rows, row_bytes, seed=host_rows)
    hot_k = pool(slots, row_bytes, seed=slots)
    hot_r = hot_k.clone()
    src_t = torch.tensor(src, dtype=torch.int64, device=DEVICE)
    dst_t = torch.tensor(dst, dtype=torch.int32, device=DEVICE)
    K.gather_rows(host, hot_k, src_t, dst_t)
    K.gather_rows_reference(host, hot_r, src_t, dst_t)
    assert torch.equal(hot_k, hot_r)


def test_strided_flat_hot_buffer_of_several_requests() -> None:
    # One hot tensor [requests, dbs, row_bytes]; rows addressed as request * dbs + slot.
    host = pool(30, 656, seed=3)
    hot = torch.zeros(3, 8, 656, dtype=torch.uint8, device=DEVICE)
    flat = hot.view(-1, 656)
    src = torch.tensor([1, 2, 3], dtype=torch.int64, device=DEVICE)
    dst = torch.tensor([0 * 8 + 5, 1 * 8 + 0, 2 * 8 + 7], dtype=torch.int32, device=DEVICE)
    K.gather_rows(host, flat, src, dst)
    assert (
        torch.equal(hot[0, 5], host[1])
        and torch.equal(hot[1, 0], host[2])
        and torch.equal(hot[2, 7], host[3])
    )
    assert int(hot.sum(dtype=torch.int64)) == int(host[1:4].sum(dtype=torch.int64))


def test_row_offsets_past_2_pow_31_bytes() -> None:
    # 2 GiB: on the CPU virtual memory of which only the touched pages are
    # committed; on a GPU a device-resident pool. An odd row width keeps the
    # kernel on byte words, so a 32-bit offset would wrap.
    row_bytes = 5
    rows = (1 << 31) // row_bytes + 8
    host = torch.empty((rows, row_bytes), dtype=torch.uint8, device=DEVICE)
    far = rows - 1
    assert far * row_bytes > 2**31
    wrapped = (far * row_bytes - 2**32) // row_bytes  # where int32 math would land (negative)
    assert wrapped < 0
    host[far] = torch.tensor([1, 2, 3, 4, 5], dtype=torch.uint8)
    host[wrapped + rows] = 7  # a 32-bit wrap could also land here
    host[rows - 2] = 9
    for gather in GATHERS:
        hot = torch.full((3, row_bytes), 0xAA, dtype=torch.uint8, device=DEVICE)
        src = torch.tensor([far, rows - 2, rows], dtype=torch.int64, device=DEVICE)
        gather(host, hot, src, torch.tensor([2, 0, 1], dtype=torch.int32, device=DEVICE))
        assert hot[2].tolist() == [1, 2, 3, 4, 5]
        assert hot[0].tolist() == [9] * 5
        assert hot[1].tolist() == [0] * 5, "one past the end zero-fills"


@pytest.mark.parametrize("gather", GATHERS)
def test_empty_plan_is_a_no_op(gather: object) -> None:
    hot = pool(4, 656, seed=5)
    before = hot.clone()
    empty = torch.zeros(0, dtype=torch.int64, device=DEVICE)
    gather(pool(4, 656, seed=6), hot, empty, empty.to(torch.int32))  # type: ignore[operator]
    assert torch.equal(hot, before)


@pytest.mark.parametrize("gather", GATHERS)
def test_bad_plans_are_refused_with_a_fix(gather: object) -> None:
    host, hot = pool(4, 656, seed=7), pool(4, 656, seed=8)
    one = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    cases = [
        (
            (host, hot, one, torch.tensor([4], dtype=torch.int32, device=DEVICE)),
            r"dst_slot must be in \[0, 4\)",
        ),
        ((host, hot, one.to(torch.int32), one), "src_rows must be int64"),
        ((host, pool(4, 1152, seed=9), one, one), "same row_bytes"),
        ((host.view(torch.int8), hot, one, one), "uint8"),
        ((host, hot, torch.zeros(2, dtype=torch.int64, device=DEVICE), one), "one hot row per source row"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match) as err:
            gather(*args)  # type: ignore[operator]
        assert "Fix:" in str(err.value)


@pytest.mark.parametrize("gather", [K.gather_rows, K.gather_rows_reference])
def test_strided_plans_are_read_by_element_not_by_memory(gather: object) -> None:
    host = pool(10, 656, seed=3).to(DEVICE)
    hot = torch.zeros(8, 656, dtype=torch.uint8, device=DEVICE)
    gather(host, hot, torch.arange(10)[::3], torch.arange(8, dtype=torch.int32)[::2])  # type: ignore[operator]
    for slot, row in zip((0, 2, 4, 6), (0, 3, 6, 9), strict=True):
        assert torch.equal(hot[slot], host[row])
    assert int(hot[1::2].sum()) == 0


@pytest.mark.parametrize("gather", [K.gather_rows, K.gather_rows_reference])
def test_an_empty_pool_zero_fills(gather: object) -> None:
    hot = torch.full((4, 656), 7, dtype=torch.uint8, device=DEVICE)
    empty = torch.zeros(0, 656, dtype=torch.uint8, device=DEVICE)
    gather(empty, hot, torch.tensor([3]), torch.tensor([2]))  # type: ignore[operator]
    assert int(hot[2].sum()) == 0 and int(hot[1].sum()) == 7 * 656


# ---- copy_rows (KV write and mirror) and gather_plan (a row-strided miss plan) ----


@settings(max_examples=60)
@given(
    row_bytes=st.sampled_from([656, 1152, 16, 7]),
    src_rows=st.integers(1, 30),
    dst_rows=st.integers(1, 20),
    data=st.data(),
)
def test_copy_rows_matches_reference(
    row_bytes: int, src_rows: int, dst_rows: int, data: st.DataObject
) -> None:
    n = data.draw(st.integers(0, dst_rows))
    dst = [d if data.draw(st.booleans()) else -1 for d in data.draw(st.permutations(range(dst_rows)))[:n]]
    src = data.draw(st.lists(st.integers(-2, src_rows + 2), min_size=n, max_size=n))
    source = pool(src_rows, row_bytes, seed=src_rows)
    got = pool(dst_rows, row_bytes, seed=dst_rows)
    want = got.clone()
    args = (
        torch.tensor(src, dtype=torch.int64, device=DEVICE),
        torch.tensor(dst, dtype=torch.int32, device=DEVICE),
    )
    K.copy_rows(source, got, *args)
    K.copy_rows_reference(source, want, *args)
    assert torch.equal(got, want)
    for s, d in zip(src, dst, strict=True):  # -1 destinations are skipped
        if d >= 0:
            expect = (
                source[s] if 0 <= s < src_rows else torch.zeros(row_bytes, dtype=torch.uint8, device=DEVICE)
            )
            assert torch.equal(got[d], expect)


@settings(max_examples=60)
@given(
    row_bytes=st.sampled_from([656, 1152, 8]),
    rows=st.integers(1, 4),
    width=st.integers(1, 40),
    data=st.data(),
)
def test_gather_plan_matches_reference(row_bytes: int, rows: int, width: int, data: st.DataObject) -> None:
    # Each batch row r copies its first counts[r] plan entries into slot_base[r] + slot.
    slots_per_row = width + 2
    host = pool(64, row_bytes, seed=width)
    hot_k = pool(rows * slots_per_row, row_bytes, seed=rows)
    hot_r = hot_k.clone()
    counts = [data.draw(st.integers(0, width)) for _ in range(rows)]
    plan_rows = torch.tensor(
        [data.draw(st.lists(st.integers(-1, 66), min_size=width, max_size=width)) for _ in range(rows)],
        dtype=torch.int64,
    )
    plan_slots = torch.stack([torch.randperm(slots_per_row)[:width] for _ in range(rows)]).to(torch.int32)
    base = torch.arange(rows, dtype=torch.int64) * slots_per_row
    args = [t.to(DEVICE) for t in (plan_rows, plan_slots, torch.tensor(counts, dtype=torch.int32), base)]
    K.gather_plan(host, hot_k, *args, programs_per_row=data.draw(st.integers(1, 3)))
    K.gather_plan_reference(host, hot_r, *args)
    assert torch.equal(hot_k, hot_r)
    written = {int(base[r]) + int(plan_slots[r, j]) for r in range(rows) for j in range(counts[r])}
    untouched = [i for i in range(rows * slots_per_row) if i not in written]
    assert torch.equal(hot_k[untouched], pool(rows * slots_per_row, row_bytes, seed=rows)[untouched])


def test_plan_and_copy_arguments_are_checked() -> None:
    host, hot = pool(4, 656, seed=1), pool(4, 656, seed=2)
    one = torch.zeros(1, 1, dtype=torch.int64, device=DEVICE)
    counts = torch.ones(1, dtype=torch.int32, device=DEVICE)
    base = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    for plan in (K.gather_plan, K.gather_plan_reference):
        with pytest.raises(ValueError, match="counts must be int32"):
            plan(host, hot, one, one.to(torch.int32), counts.long(), base)
        with pytest.raises(ValueError, match="slot_base must be int64"):
            plan(host, hot, one, one.to(torch.int32), counts, base.int())
    for copy in (K.copy_rows, K.copy_rows_reference):
        with pytest.raises(ValueError, match="same row_bytes"):
            copy(host, pool(4, 1152, seed=3), one[0], one[0])
        with pytest.raises(ValueError, match="dst_rows must be int32 or int64"):
            copy(host, hot, one[0], one[0, :0])
