"""Triton body of the hot-buffer gather (launcher in gather.py)."""

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
    src_offs = tl.max_contiguous(tl.multiple_of(tl.where(src_ok, src, 0) * src_stride + cols, VEC), VEC)
    words = tl.load(src_ptr + src_offs, mask=in_row & src_ok, other=0)
    dst_offs = tl.max_contiguous(tl.multiple_of(dst * dst_stride + cols, VEC), VEC)
    tl.store(dst_ptr + dst_offs, words, mask=in_row & dst_ok)
