"""Triton bodies of the decode step's index maps (launchers in decode_indices.py)."""

import triton
import triton.language as tl

TAIL_PAGES = tl.constexpr(2)


@triton.jit
def _map_positions_kernel(
    pos_ptr,  # int32/int64 [rows, width] top-k logical positions, -1 padding
    block_table_ptr,  # int32 [regions, max_blocks] host block of each page, per device region
    row_region_ptr,  # int64 [rows] device region of the row's request, -1 padded row
    row_tokens_ptr,  # int64 [rows] the request's tokens (positions valid below)
    row_tail_ptr,  # int64 [rows] first position held by the tail pages
    host_rows_ptr,  # int64 [rows, width] out: host row, -1 (padding, tail, invalid)
    indices_ptr,  # int32 [rows, width] out: tail device row, else -1
    counters_ptr,  # int64 [3] accumulated: tail entries, invalid positions, 1 + last row with one
    width,
    pos_stride,
    bt_stride,
    block_size,
    region_rows,
    dbs,
    BLOCK: tl.constexpr,
):
    r = tl.program_id(0)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inr = c < width
    region = tl.load(row_region_ptr + r).to(tl.int64)
    n = tl.load(row_tokens_ptr + r)
    tail_start = tl.load(row_tail_ptr + r)
    p = tl.load(pos_ptr + r.to(tl.int64) * pos_stride + c, mask=inr, other=-1).to(tl.int64)
    # (The region broadcast first: the interpreter mis-types a scalar & block mask.)
    live = inr & ((region + tl.zeros([BLOCK], tl.int64)) >= 0)
    bad = live & ((p < -1) | (p >= n))
    valid = live & (p >= 0) & (p < n)
    tail = valid & (p >= tail_start)
    cold = valid & (p < tail_start)
    page = tl.where(valid, p, 0) // block_size
    offset = tl.where(valid, p, 0) % block_size
    block = tl.load(block_table_ptr + region * bt_stride + page, mask=cold, other=0).to(tl.int64)
    tail_row = region * region_rows + dbs + (page % TAIL_PAGES) * block_size + offset
    out = r.to(tl.int64) * width + c
    tl.store(host_rows_ptr + out, tl.where(cold, block * block_size + offset, -1), mask=inr)
    tl.store(indices_ptr + out, tl.where(tail, tail_row, -1).to(tl.int32), mask=inr)
    num_tail = tl.sum(tail.to(tl.int64), 0)
    num_bad = tl.sum(bad.to(tl.int64), 0)
    if num_tail > 0:
        tl.atomic_add(counters_ptr + 0, num_tail, sem="relaxed")
    if num_bad > 0:
        tl.atomic_add(counters_ptr + 1, num_bad, sem="relaxed")
        tl.atomic_max(counters_ptr + 2, r.to(tl.int64) + 1, sem="relaxed")


@triton.jit
def _finish_indices_kernel(
    slots_ptr,  # int32 [rows, width] hot-buffer slot per entry, -1 none
    indices_ptr,  # int32 [rows, width] in: tail rows / -1; out: the decode's row ids
    row_base_ptr,  # int64 [rows] device row of slot 0 of the row's state
    width,
    BLOCK: tl.constexpr,
):
    r = tl.program_id(0)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inr = c < width
    at = r.to(tl.int64) * width + c
    slot = tl.load(slots_ptr + at, mask=inr, other=-1)
    base = tl.load(row_base_ptr + r)
    idx = tl.load(indices_ptr + at, mask=inr, other=-1)
    tl.store(indices_ptr + at, tl.where(slot >= 0, (base + slot).to(tl.int32), idx), mask=inr)
