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
from ._gather_triton import _gather_plan_kernel, _gather_rows_kernel
from ._launch import GpuArch, Launch

__all__ = [
    "copy_rows",
    "copy_rows_reference",
    "gather_plan",
    "gather_plan_reference",
    "gather_rows",
    "gather_rows_reference",
]

_WORD_DTYPES = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


def _check_row_buffers(op: str, src: tuple[str, torch.Tensor], dst: tuple[str, torch.Tensor]) -> None:
    # Both sides uint8 [rows, row_bytes] with contiguous rows, the same row_bytes.
    for name, t in (src, dst):
        require(
            t.dtype == torch.uint8 and t.dim() == 2 and t.stride(1) == 1,
            op,
            f"{name} must be uint8 [rows, row_bytes] with contiguous rows",
            t,
            f"view the rows as bytes: {name}.view(torch.uint8).view(rows, -1)",
        )
    require(
        src[1].shape[1] == dst[1].shape[1],
        op,
        f"{src[0]} and {dst[0]} must have the same row_bytes ({src[1].shape[1]})",
        dst[1],
        "copy between buffers of the same kv_cache_dtype",
    )


def _check(
    op: str, host_pool: torch.Tensor, hot: torch.Tensor, src_rows: torch.Tensor, dst_slots: torch.Tensor
) -> None:
    _check_row_buffers(op, ("host_pool", host_pool), ("hot", hot))
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


def _words(src: torch.Tensor, dst: torch.Tensor) -> tuple[torch.dtype, int, int, int]:
    # (word dtype, word bytes, words per row, words per 16-byte vector or 1)
    w = _word_bytes(src, dst)
    aligned16 = all(t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0 for t in (src, dst))
    return _WORD_DTYPES[w], w, src.shape[1] // w, 16 // w if aligned16 else 1


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
    src: torch.Tensor, dst: torch.Tensor, src_rows: torch.Tensor, dst_rows: torch.Tensor
) -> Launch:
    """The kernel launch :func:`gather_rows` and :func:`copy_rows` make for these
    (already checked) tensors: ``dst[dst_rows[i]] = src[src_rows[i]]``.

    One program per planned row, one warp each; the word width (8 bytes for
    656- and 1152-byte rows) and 16-byte vectors follow the row width, strides
    and base addresses. Also called with meta tensors by the ahead-of-time
    compile check (``aot.py``), so it compiles what runs.
    """
    word, w, row_words, vec = _words(src, dst)
    return Launch(
        _gather_rows_kernel,
        (src_rows.shape[0],),
        (
            src.view(word),
            dst.view(word),
            src_rows,
            dst_rows,
            src.shape[0],
            dst.shape[0],
            src.stride(0) // w,
            dst.stride(0) // w,
        ),
        {"ROW_WORDS": row_words, "BLOCK": triton.next_power_of_2(row_words), "VEC": vec},
        num_warps=1,
        num_stages=3,
    )


def copy_rows_reference(
    src: torch.Tensor, dst: torch.Tensor, src_rows: torch.Tensor, dst_rows: torch.Tensor
) -> None:
    """``dst[dst_rows[i]] = src[src_rows[i]]`` where ``dst_rows[i]`` is in range (PyTorch reference).

    Entries whose ``dst_rows`` is out of range (e.g. -1) are skipped; an
    out-of-range source zero-fills. ``src`` / ``dst`` uint8 ``[rows, row_bytes]``
    (the same row_bytes) on any devices; ``src_rows`` / ``dst_rows`` int32 or int64
    ``[n]``, destinations unique. Synchronizes (boolean indexing).

    Raises:
        ValueError: wrong dtype or shape.
    """
    op = "copy_rows_reference"
    _check_copy(op, src, dst, src_rows, dst_rows)
    d = dst_rows.to(dst.device).long()
    s = src_rows.to(src.device).long()
    keep = (d >= 0) & (d < dst.shape[0])
    s, d = s[keep.to(s.device)], d[keep]
    ok = (s >= 0) & (s < src.shape[0])
    if src.shape[0] == 0:
        src = src.new_zeros((1, src.shape[1]))
    rows = src.index_select(0, torch.where(ok, s, 0))
    rows[~ok] = 0
    dst[d] = rows.to(dst.device)


def copy_rows(src: torch.Tensor, dst: torch.Tensor, src_rows: torch.Tensor, dst_rows: torch.Tensor) -> None:
    """``dst[dst_rows[i]] = src[src_rows[i]]`` where ``dst_rows[i]`` is in range (Triton; no host sync).

    The same contract as :func:`copy_rows_reference`. One of ``src`` / ``dst``
    may be a pinned CPU tensor, read or written by the GPU directly (a KV mirror
    to the host pool, or a gather from it); the rest on CUDA (CPU under
    ``TRITON_INTERPRET=1``). The decode step's KV write and mirror use it with
    ``-1`` for rows that go elsewhere.

    Raises:
        ValueError: wrong dtype, shape or device, or a pageable CPU side.
    """
    op = "copy_rows"
    _check_copy(op, src, dst, src_rows, dst_rows)
    host = dst if dst.device.type == "cpu" else src
    device_side = src if host is dst else dst
    src_rows = src_rows.to(device_side.device, non_blocking=True).contiguous()
    dst_rows = dst_rows.to(device_side.device, non_blocking=True).contiguous()
    check_launch_device(op, device_side, src_rows, dst_rows, host_ok=host)
    if src_rows.shape[0]:
        gather_launch(src, dst, src_rows, dst_rows).run()


def _check_copy(
    op: str, src: torch.Tensor, dst: torch.Tensor, src_rows: torch.Tensor, dst_rows: torch.Tensor
) -> None:
    check_tensors(op, src=src, dst=dst, src_rows=src_rows, dst_rows=dst_rows)
    _check_row_buffers(op, ("src", src), ("dst", dst))
    for name, t in (("src_rows", src_rows), ("dst_rows", dst_rows)):
        require(
            t.dtype in (torch.int32, torch.int64) and t.dim() == 1 and t.shape == src_rows.shape,
            op,
            f"{name} must be int32 or int64 [{src_rows.shape[0]}]",
            t,
            "pass one source and one destination row per copy",
        )


def _check_plan(
    op: str,
    host_pool: torch.Tensor,
    hot: torch.Tensor,
    plan_rows: torch.Tensor,
    plan_slots: torch.Tensor,
    counts: torch.Tensor,
    slot_base: torch.Tensor,
) -> None:
    check_tensors(
        op,
        host_pool=host_pool,
        hot=hot,
        plan_rows=plan_rows,
        plan_slots=plan_slots,
        counts=counts,
        slot_base=slot_base,
    )
    _check(op, host_pool, hot, plan_rows.reshape(-1), plan_slots.reshape(-1))
    rows = plan_rows.shape[0] if plan_rows.dim() == 2 else -1
    require(
        plan_rows.dim() == 2 and plan_slots.shape == plan_rows.shape and plan_rows.stride(1) == 1,
        op,
        "plan_rows (int64) and plan_slots (int32) must be [rows, width] with contiguous rows",
        plan_rows,
        "pass a ResidencyPlan's miss_host_rows and miss_slots",
    )
    for name, t, dtypes in (("counts", counts, (torch.int32,)), ("slot_base", slot_base, (torch.int64,))):
        require(
            t.dtype in dtypes and tuple(t.shape) == (rows,),
            op,
            f"{name} must be {str(dtypes[0]).removeprefix('torch.')} [{rows}]",
            t,
            "one entry per batch row of the plan",
        )


def gather_plan_reference(
    host_pool: torch.Tensor,
    hot: torch.Tensor,
    plan_rows: torch.Tensor,
    plan_slots: torch.Tensor,
    counts: torch.Tensor,
    slot_base: torch.Tensor,
) -> None:
    """Copy a row-strided miss plan into hot rows, in place (PyTorch reference; synchronizes).

    For each batch row r and ``j < counts[r]``: ``hot[slot_base[r] +
    plan_slots[r, j]] = host_pool[plan_rows[r, j]]`` (the layout
    ``resolve_residency`` writes; entries past ``counts[r]`` are ignored). Out of
    range sources zero-fill; destinations out of range are skipped.

    Args:
        plan_rows: int64 ``[rows, width]``; plan_slots: int32 ``[rows, width]``;
        counts: int32 ``[rows]``; slot_base: int64 ``[rows]``.

    Raises:
        ValueError: wrong dtype or shape.
    """
    op = "gather_plan_reference"
    _check_plan(op, host_pool, hot, plan_rows, plan_slots, counts, slot_base)
    keep = torch.arange(plan_rows.shape[1], device=counts.device) < counts[:, None].long()
    dst = (plan_slots.long() + slot_base[:, None])[keep]
    copy_rows_reference(host_pool, hot, plan_rows[keep], dst)


def gather_plan(
    host_pool: torch.Tensor,
    hot: torch.Tensor,
    plan_rows: torch.Tensor,
    plan_slots: torch.Tensor,
    counts: torch.Tensor,
    slot_base: torch.Tensor,
    *,
    programs_per_row: int = 4,
) -> None:
    """Copy a row-strided miss plan into hot rows, in place (Triton; no host sync).

    Same contract as :func:`gather_plan_reference`; the launch does not depend on
    the plan's length (``programs_per_row`` programs per batch row walk its
    ``counts[r]`` entries), so it can be captured in a CUDA graph. ``host_pool``
    pinned CPU or CUDA; the rest on ``hot``'s device (CPU under ``TRITON_INTERPRET=1``).

    Raises:
        ValueError: wrong dtype, shape or device, or a pageable CPU pool on CUDA.
    """
    op = "gather_plan"
    _check_plan(op, host_pool, hot, plan_rows, plan_slots, counts, slot_base)
    check_launch_device(op, hot, plan_rows, plan_slots, counts, slot_base, host_ok=host_pool)
    rows, width = plan_rows.shape
    if rows == 0 or width == 0:
        return
    gather_plan_launch(host_pool, hot, plan_rows, plan_slots, counts, slot_base, programs_per_row).run()


def gather_plan_launch(
    host_pool: torch.Tensor,
    hot: torch.Tensor,
    plan_rows: torch.Tensor,
    plan_slots: torch.Tensor,
    counts: torch.Tensor,
    slot_base: torch.Tensor,
    programs_per_row: int = 4,
) -> Launch:
    """The kernel launch :func:`gather_plan` makes for these (already checked) tensors.

    Grid ``(rows, programs_per_row)``, 4 warps each, every program copying up to
    ``TILE`` plan entries (8 for 656- and 1152-byte rows) per iteration. Also
    called with meta tensors by the ahead-of-time compile check (``aot.py``).
    """
    word, w, row_words, vec = _words(host_pool, hot)
    block = triton.next_power_of_2(row_words)
    return Launch(
        _gather_plan_kernel,
        (plan_rows.shape[0], programs_per_row),
        (
            host_pool.view(word),
            hot.view(word),
            plan_rows,
            plan_slots,
            counts,
            slot_base,
            host_pool.shape[0],
            hot.shape[0],
            plan_rows.stride(0),
            host_pool.stride(0) // w,
            hot.stride(0) // w,
        ),
        {
            "ROW_WORDS": row_words,
            "BLOCK": block,
            "VEC": vec,
            "TILE": max(1, min(8, 1024 // block)),
            "PROGRAMS": programs_per_row,
        },
        num_warps=4,
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


def gather_plan_aot_launches(
    arch: GpuArch, *, row_bytes: int, rows: int, width: int, num_host_rows: int, num_slots: int
) -> list[Launch]:
    """What :func:`gather_plan` launches for a ``[rows, width]`` miss plan (the
    resolver's: int64 host rows, int32 slots, int32 counts, int64 slot bases) of
    ``row_bytes`` rows from a pool of ``num_host_rows`` into ``num_slots`` hot
    rows, on meta tensors (no memory) for the ahead-of-time compile check."""
    meta = torch.device("meta")
    return [
        gather_plan_launch(
            torch.empty((num_host_rows, row_bytes), dtype=torch.uint8, device=meta),
            torch.empty((num_slots, row_bytes), dtype=torch.uint8, device=meta),
            torch.empty((rows, width), dtype=torch.int64, device=meta),
            torch.empty((rows, width), dtype=torch.int32, device=meta),
            torch.empty((rows,), dtype=torch.int32, device=meta),
            torch.empty((rows,), dtype=torch.int64, device=meta),
        )
    ]


def copy_rows_aot_launches(arch: GpuArch, *, row_bytes: int, rows: int, num_dst_rows: int) -> list[Launch]:
    """What :func:`copy_rows` launches for ``DecodeRuntime``'s KV write: ``rows`` new
    rows of ``row_bytes`` (int64 source and destination rows) into a buffer of
    ``num_dst_rows`` (the hot buffer's tail pages; the host mirror differs only
    in that count), on meta tensors for the ahead-of-time compile check."""
    meta = torch.device("meta")
    return [
        gather_launch(
            torch.empty((rows, row_bytes), dtype=torch.uint8, device=meta),
            torch.empty((num_dst_rows, row_bytes), dtype=torch.uint8, device=meta),
            torch.empty((rows,), dtype=torch.int64, device=meta),
            torch.empty((rows,), dtype=torch.int64, device=meta),
        )
    ]
