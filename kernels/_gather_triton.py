"""Triton bodies of the hot-buffer gather and the planned copies (launchers in gather.py)."""

import triton
import triton.language as tl


@triton.jit
def _gather_rows_kernel(
    src_ptr,  # host pool rows, viewed as WORD-sized integers
    dst_ptr,  # hot-buffer rows, same word type
    src_rows_ptr,  # int64 [n]
    dst_slots_ptr,  # int32 or int64 [n]
    num_src_rows,
    num_dst_rows,
    src_stride,  # words between host rows
    dst_stride,  # words between hot rows
    ROW_WORDS: tl.constexpr,
    BLOCK: tl.constexpr,
    VEC: tl.constexpr,  # words per 16 bytes when rows are 16-byte aligned, else 1
):
    # One program per planned row. Offsets are int64: a host pool of millions
    # of rows overflows int32 row x width (HISPARSE.md §7, a public bug).
    i = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    in_row = cols < ROW_WORDS
    # Row ids broadcast to the block: the masks are per lane.
    src = tl.load(src_rows_ptr + i).to(tl.int64) + tl.zeros([BLOCK], tl.int64)
    dst = tl.load(dst_slots_ptr + i).to(tl.int64) + tl.zeros([BLOCK], tl.int64)
    src_ok = (src >= 0) & (src < num_src_rows)
    dst_ok = (dst >= 0) & (dst < num_dst_rows)
    # An out-of-range source reads nothing (other=0): its slot is zero-filled.
    # A skipped destination (copy_rows: -1) reads nothing either.
    src_offs = tl.max_contiguous(tl.multiple_of(tl.where(src_ok, src, 0) * src_stride + cols, VEC), VEC)
    words = tl.load(src_ptr + src_offs, mask=in_row & src_ok & dst_ok, other=0)
    dst_offs = tl.max_contiguous(tl.multiple_of(tl.where(dst_ok, dst, 0) * dst_stride + cols, VEC), VEC)
    tl.store(dst_ptr + dst_offs, words, mask=in_row & dst_ok)


@triton.jit
def _gather_plan_kernel(
    src_ptr,  # host pool rows as words
    dst_ptr,  # hot-buffer rows as words
    plan_rows_ptr,  # int64 [rows, plan_stride]: batch row r's host rows in [0, counts[r])
    plan_slots_ptr,  # int32 [rows, plan_stride]: their slots in r's state
    counts_ptr,  # int32 [rows]
    slot_base_ptr,  # int64 [rows]: hot row of slot 0 of r's state
    num_src_rows,
    num_dst_rows,
    plan_stride,
    src_stride,
    dst_stride,
    ROW_WORDS: tl.constexpr,
    BLOCK: tl.constexpr,
    VEC: tl.constexpr,
    TILE: tl.constexpr,  # plan entries per iteration
    PROGRAMS: tl.constexpr,  # programs per batch row (grid axis 1)
):
    # Programs of batch row r take its plan entries in tiles, strided by PROGRAMS:
    # the grid does not depend on the plan's length, which only the device knows.
    r = tl.program_id(0)
    q = tl.program_id(1)
    count = tl.load(counts_ptr + r)
    base = tl.load(slot_base_ptr + r).to(tl.int64)
    entries = tl.arange(0, TILE)
    cols = tl.arange(0, BLOCK)
    plan = r.to(tl.int64) * plan_stride
    for j0 in range(q * TILE, count, PROGRAMS * TILE):
        j = j0 + entries
        live = j < count
        src = tl.load(plan_rows_ptr + plan + j, mask=live, other=-1).to(tl.int64)
        dst = base + tl.load(plan_slots_ptr + plan + j, mask=live, other=-1).to(tl.int64)
        src_ok = (src >= 0) & (src < num_src_rows)
        dst_ok = live & (dst >= 0) & (dst < num_dst_rows)
        mask = (cols < ROW_WORDS)[None, :]
        src_offs = tl.where(src_ok, src, 0)[:, None] * src_stride + cols[None, :]
        src_offs = tl.max_contiguous(tl.multiple_of(src_offs, [1, VEC]), [1, VEC])
        words = tl.load(src_ptr + src_offs, mask=mask & (src_ok & dst_ok)[:, None], other=0)
        dst_offs = tl.where(dst_ok, dst, 0)[:, None] * dst_stride + cols[None, :]
        dst_offs = tl.max_contiguous(tl.multiple_of(dst_offs, [1, VEC]), [1, VEC])
        tl.store(dst_ptr + dst_offs, words, mask=mask & dst_ok[:, None])
