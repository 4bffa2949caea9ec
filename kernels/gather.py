"""Hot-buffer gather: copy the miss plan's host-pool rows into hot-buffer slots.

``gather_rows(host_pool, hot, src_rows, dst_slots)`` copies, for every i,
the bytes of ``host_pool[src_rows[i]]`` into ``hot[dst_slots[i]]``, in place
(HISPARSE.md §1 and §7):

- byte exact, for any row width (656 for fp8_ds_mla, 1152 for bf16 rows);
- a source row out of range (< 0 or >= num_host_rows) zero-fills its slot;
- row offsets in 64-bit arithmetic (int32 row x width overflows past 2^31 bytes);
- ``dst_slots`` index rows of ``hot``: with one flat hot buffer for many
  requests (or layers), pass ``request_base + slot``; slots must be unique
  within one call and in range.

On CUDA the kernel reads the host pool directly from pinned memory, one
program per row with 16-byte loads where rows are 16-byte aligned, so there is
no staging copy. How: Triton's CUDA launcher turns every pointer argument into
a device address with ``cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_POINTER)``
(``triton/backends/nvidia/driver.c``; accepted for pinned memory since Triton
PR #1197), and page-locked memory from ``cudaHostAlloc`` (what
``torch.Tensor.pin_memory`` uses) is mapped into the device address space
under unified virtual addressing. vLLM reaches the same memory through its C++
op ``get_cuda_view_from_cpu_tensor`` (``cudaHostGetDevicePointer``); we need
no C++ for it. A pageable (unpinned) CPU pool is refused with a fix, not
silently staged. Not yet measured on a GPU in this repository: run
``scripts/gpu_check.sh``.
"""

from __future__ import annotations

import torch
import triton

from ._common import check_launch_device, check_tensors, require
from ._gather_triton import _gather_rows_kernel
from ._launch import GpuArch, Launch

__all__ = ["gather_rows", "gather_rows_reference"]

_WORD_DTYPES = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


def _check(
    op: str, host_pool: torch.Tensor, hot: torch.Tensor, src_rows: torch.Tensor, dst_slots: torch.Tensor
) -> None:
    for name, t in (("host_pool", host_pool), ("hot", hot)):
        require(
            t.dtype == torch.uint8 and t.dim() == 2 and t.stride(1) == 1,
            op,
            f"{name} must be uint8 [rows, row_bytes] with contiguous rows",
            t,
            f"view the rows as bytes: {name}.view(torch.uint8).view(rows, -1)",
        )
    require(
        host_pool.shape[1] == hot.shape[1],
        op,
        f"host_pool and hot must have the same row_bytes ({host_pool.shape[1]})",
        hot,
        "gather between pools of the same kv_cache_dtype",
    )
    require(
        src_rows.dtype == torch.int64 and src_rows.dim() == 1,
        op,
        "src_rows must be int64 [n] (host rows of the miss plan)",
        src_rows,
        "src_rows.to(torch.int64)",
    )
    require(
        dst_slots.dtype in (torch.int32, torch.int64) and tuple(dst_slots.shape) == tuple(src_rows.shape),
        op,
        f"dst_slots must be int32 or int64 [{src_rows.shape[0]}] (one hot row per source row)",
        dst_slots,
        "pass one destination slot per planned host row",
    )


def _check_dst_in_range(op: str, dst_slots: torch.Tensor, num_slots: int) -> None:
    if dst_slots.numel() == 0:
        return
    lo, hi = int(dst_slots.min()), int(dst_slots.max())
    require(
        lo >= 0 and hi < num_slots,
        op,
        f"every dst_slot must be in [0, {num_slots})",
        f"slots from {lo} to {hi}",
        "pass hot-buffer rows of this hot tensor (request_base + slot)",
    )


def gather_rows_reference(
    host_pool: torch.Tensor, hot: torch.Tensor, src_rows: torch.Tensor, dst_slots: torch.Tensor
) -> None:
    """Copy planned host rows into hot slots, in place (PyTorch reference).

    Args:
        host_pool: uint8 ``[num_host_rows, row_bytes]``.
        hot: uint8 ``[num_slots, row_bytes]``, written in place.
        src_rows: int64 ``[n]``; out of range (< 0 or >= num_host_rows) zero-fills.
        dst_slots: int32 or int64 ``[n]``, unique, in ``[0, num_slots)``.

    Raises:
        ValueError: wrong dtype or shape, or a dst slot out of range.
    """
    op = "gather_rows_reference"
    check_tensors(op, host_pool=host_pool, hot=hot, src_rows=src_rows, dst_slots=dst_slots)
    _check(op, host_pool, hot, src_rows, dst_slots)
    _check_dst_in_range(op, dst_slots, hot.shape[0])
    src = src_rows.to(host_pool.device)
    valid = (src >= 0) & (src < host_pool.shape[0])
    if host_pool.shape[0] == 0:  # every source is out of range: all slots zero-fill
        host_pool = host_pool.new_zeros((1, host_pool.shape[1]))
    rows = host_pool.index_select(0, torch.where(valid, src, 0))
    rows[~valid] = 0
    hot[dst_slots.to(hot.device).long()] = rows.to(hot.device)


def _word_bytes(*tensors: torch.Tensor) -> int:
    # Widest integer word that divides the row width, both strides and both base
    # addresses: fewer, wider loads (two int64 words = one 16-byte vector).
    row_bytes = tensors[0].shape[1]
    for w in (8, 4, 2):
        if row_bytes % w == 0 and all(t.stride(0) % w == 0 and t.data_ptr() % w == 0 for t in tensors):
            return w
    return 1


def gather_rows(
    host_pool: torch.Tensor, hot: torch.Tensor, src_rows: torch.Tensor, dst_slots: torch.Tensor
) -> None:
    """Copy planned host rows into hot slots, in place (Triton kernel, one program per row).

    Same contract as :func:`gather_rows_reference` (module docstring). ``hot``
    must be a CUDA tensor; ``host_pool`` a pinned CPU tensor (read over PCIe,
    zero-copy) or a CUDA tensor; ``src_rows`` / ``dst_slots`` are moved to
    ``hot.device`` when elsewhere. Under ``TRITON_INTERPRET=1`` all are CPU tensors.
    Slots are range-checked here only when ``dst_slots`` is on the CPU (a GPU
    check would synchronize); the kernel never writes outside ``hot`` either way.

    Raises:
        ValueError: wrong dtype, shape or device, a pageable CPU pool on CUDA, or
            (CPU ``dst_slots``) a slot out of range.
    """
    op = "gather_rows"
    check_tensors(op, host_pool=host_pool, hot=hot, src_rows=src_rows, dst_slots=dst_slots)
    _check(op, host_pool, hot, src_rows, dst_slots)
    if dst_slots.device.type == "cpu":
        _check_dst_in_range(op, dst_slots, hot.shape[0])
    # The kernel reads the plan as dense vectors: a strided view would be read wrongly.
    src_rows = src_rows.to(hot.device, non_blocking=True).contiguous()
    dst_slots = dst_slots.to(hot.device, non_blocking=True).contiguous()
    check_launch_device(op, hot, src_rows, dst_slots, host_ok=host_pool)
    if src_rows.shape[0] == 0:
        return
    gather_launch(host_pool, hot, src_rows, dst_slots).run()


def gather_launch(
    host_pool: torch.Tensor, hot: torch.Tensor, src_rows: torch.Tensor, dst_slots: torch.Tensor
) -> Launch:
    """The kernel launch :func:`gather_rows` makes for these (already checked) tensors.

    One program per planned row, one warp each; the word width (8 bytes for
    656- and 1152-byte rows) and 16-byte vectors follow the row width, strides
    and base addresses. Also called with meta tensors by the ahead-of-time
    compile check (``aot.py``), so it compiles what runs.
    """
    w = _word_bytes(host_pool, hot)
    word = _WORD_DTYPES[w]
    row_words = host_pool.shape[1] // w
    aligned16 = all(t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0 for t in (host_pool, hot))
    return Launch(
        _gather_rows_kernel,
        (src_rows.shape[0],),
        (
            host_pool.view(word),
            hot.view(word),
            src_rows,
            dst_slots,
            host_pool.shape[0],
            hot.shape[0],
            host_pool.stride(0) // w,
            hot.stride(0) // w,
        ),
        {
            "ROW_WORDS": row_words,
            "BLOCK": triton.next_power_of_2(row_words),
            "VEC": 16 // w if aligned16 else 1,
        },
        num_warps=1,
        num_stages=3,
    )


def gather_aot_launches(
    arch: GpuArch, *, row_bytes: int, rows: int, num_host_rows: int, num_slots: int, slot_dtype: torch.dtype
) -> list[Launch]:
    """What :func:`gather_rows` launches for a miss plan of ``rows`` rows of ``row_bytes``
    from a pool of ``num_host_rows`` into ``num_slots`` hot rows, built on meta
    tensors (no memory) for the ahead-of-time compile check (the same launch on
    every ``arch``)."""
    meta = torch.device("meta")
    return [
        gather_launch(
            torch.empty((num_host_rows, row_bytes), dtype=torch.uint8, device=meta),
            torch.empty((num_slots, row_bytes), dtype=torch.uint8, device=meta),
            torch.empty((rows,), dtype=torch.int64, device=meta),
            torch.empty((rows,), dtype=slot_dtype, device=meta),
        )
    ]
