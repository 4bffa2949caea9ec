"""The decode step's index maps on the device: top-k positions -> host rows and
tail rows, and resolved slots -> the sparse-MLA decode's row ids.

Layout (``DecodeRuntime``, HISPARSE.md §6): each request owns a *device
region* of ``region_rows = device_buffer_size + 2 x block_size`` rows per layer:
``device_buffer_size`` hot slots, then two retained **tail pages** holding the
newest tokens (page k of the request in tail page k % 2). A top-k position p of
a request with n tokens is

- padding when p == -1; **invalid** when p < -1 or p >= n (counted, then
  treated as padding: on the device path nothing raises per layer);
- a **tail** entry when p >= the request's tail start: device row
  ``region x region_rows + dbs + (p // bs % 2) x bs + p % bs``;
- else a **host row** ``block_table[p // bs] x bs + p % bs`` for the resolver.

Both are one Triton launch over ``[rows, width]`` (rows = batch x s_q), no host
synchronization, CUDA-graph capturable. Tensors on CUDA, or CPU under
``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import torch
import triton

from ._common import check_launch_device, check_tensors, require
from ._decode_indices_triton import _finish_indices_kernel, _map_positions_kernel
from ._launch import GpuArch, Launch

__all__ = [
    "decode_indices_aot_launches",
    "finish_decode_indices",
    "finish_indices_launch",
    "map_positions_launch",
    "map_topk_positions",
]

_BLOCK = 1024


def map_topk_positions(
    positions: torch.Tensor,
    block_tables: torch.Tensor,
    row_region: torch.Tensor,
    row_tokens: torch.Tensor,
    row_tail_start: torch.Tensor,
    *,
    block_size: int,
    region_rows: int,
    device_buffer_size: int,
    host_rows: torch.Tensor,
    indices: torch.Tensor,
    counters: torch.Tensor,
) -> None:
    """Split top-k positions into resolver host rows and tail device rows (module docstring).

    Args:
        positions: int32/int64 ``[rows, width]`` (columns contiguous), -1 padding.
        block_tables: int32 ``[regions, max_blocks]``, the host block of each page
            of the request in that region.
        row_region: int64 ``[rows]``, the region of each row's request (-1: a padded row).
        row_tokens / row_tail_start: int64 ``[rows]``, the request's tokens and its
            first position in the tail pages.
        host_rows: int64 ``[rows, width]`` out (-1 where not a host row).
        indices: int32 ``[rows, width]`` out (tail rows, else -1).
        counters: int64 ``[3]``, accumulated: tail entries, invalid positions,
            1 + the last row with an invalid position (0: none).

    Raises:
        ValueError: wrong dtype, shape or device.
    """
    op = "map_topk_positions"
    check_tensors(
        op,
        positions=positions,
        block_tables=block_tables,
        row_region=row_region,
        row_tokens=row_tokens,
        row_tail_start=row_tail_start,
        host_rows=host_rows,
        indices=indices,
        counters=counters,
    )
    require(
        positions.dim() == 2, op, "positions must be [rows, width]", positions, "positions.view(rows, width)"
    )
    rows, width = positions.shape
    require(
        positions.dtype in (torch.int32, torch.int64) and positions.stride(1) == 1,
        op,
        "positions must be int32/int64 [rows, width] with contiguous columns",
        positions,
        "positions.contiguous()",
    )
    for name, t, dtype, shape in (
        ("host_rows", host_rows, torch.int64, (rows, width)),
        ("indices", indices, torch.int32, (rows, width)),
        ("row_region", row_region, torch.int64, (rows,)),
        ("row_tokens", row_tokens, torch.int64, (rows,)),
        ("row_tail_start", row_tail_start, torch.int64, (rows,)),
        ("counters", counters, torch.int64, (3,)),
    ):
        require(
            t.dtype == dtype and tuple(t.shape) == shape and t.is_contiguous(),
            op,
            f"{name} must be contiguous {str(dtype).removeprefix('torch.')} {list(shape)}",
            t,
            f"allocate {name} as documented",
        )
    require(
        block_tables.dtype == torch.int32 and block_tables.dim() == 2 and block_tables.stride(1) == 1,
        op,
        "block_tables must be int32 [regions, max_blocks]",
        block_tables,
        "block_tables.to(torch.int32).contiguous()",
    )
    check_launch_device(
        op, positions, block_tables, row_region, row_tokens, row_tail_start, host_rows, indices
    )
    if rows == 0 or width == 0:
        return
    map_positions_launch(
        positions,
        block_tables,
        row_region,
        row_tokens,
        row_tail_start,
        block_size=block_size,
        region_rows=region_rows,
        device_buffer_size=device_buffer_size,
        host_rows=host_rows,
        indices=indices,
        counters=counters,
    ).run()


def map_positions_launch(
    positions: torch.Tensor,
    block_tables: torch.Tensor,
    row_region: torch.Tensor,
    row_tokens: torch.Tensor,
    row_tail_start: torch.Tensor,
    *,
    block_size: int,
    region_rows: int,
    device_buffer_size: int,
    host_rows: torch.Tensor,
    indices: torch.Tensor,
    counters: torch.Tensor,
) -> Launch:
    """The kernel launch :func:`map_topk_positions` makes for these (already checked)
    tensors: grid ``(rows, ceil(width / BLOCK))``, BLOCK = min(1024, width
    rounded up to a power of two), 4 warps. Also built on meta tensors by
    :func:`decode_indices_aot_launches`."""
    rows, width = positions.shape
    block = _block(width)
    return Launch(
        _map_positions_kernel,
        (rows, triton.cdiv(width, block)),
        (
            positions,
            block_tables,
            row_region,
            row_tokens,
            row_tail_start,
            host_rows,
            indices,
            counters,
            width,
            positions.stride(0),
            block_tables.stride(0),
            block_size,
            region_rows,
            device_buffer_size,
        ),
        {"BLOCK": block},
        num_warps=4,
        num_stages=3,
    )


def _block(width: int) -> int:
    return min(_BLOCK, int(triton.next_power_of_2(width)))


def finish_decode_indices(slots: torch.Tensor, indices: torch.Tensor, row_base: torch.Tensor) -> None:
    """``indices = row_base[r] + slots`` where a slot was resolved (``slots >= 0``), in place.

    Args:
        slots: int32 ``[rows, width]`` (``ResidencyPlan.slots``).
        indices: int32 ``[rows, width]``: tail rows / -1 in, the decode's row ids out.
        row_base: int64 ``[rows]``, device row of slot 0 of each row's state.

    Raises:
        ValueError: wrong dtype, shape or device.
    """
    op = "finish_decode_indices"
    check_tensors(op, slots=slots, indices=indices, row_base=row_base)
    require(slots.dim() == 2, op, "slots must be [rows, width]", slots, "pass ResidencyPlan.slots")
    rows, width = slots.shape
    for name, t, dtype, shape in (
        ("slots", slots, torch.int32, (rows, width)),
        ("indices", indices, torch.int32, (rows, width)),
        ("row_base", row_base, torch.int64, (rows,)),
    ):
        require(
            t.dtype == dtype and tuple(t.shape) == shape and t.is_contiguous(),
            op,
            f"{name} must be contiguous {str(dtype).removeprefix('torch.')} {list(shape)}",
            t,
            f"allocate {name} as documented",
        )
    check_launch_device(op, slots, indices, row_base)
    if rows == 0 or width == 0:
        return
    finish_indices_launch(slots, indices, row_base).run()


def finish_indices_launch(slots: torch.Tensor, indices: torch.Tensor, row_base: torch.Tensor) -> Launch:
    """The kernel launch :func:`finish_decode_indices` makes for these (already checked)
    tensors: the same grid and warps as :func:`map_positions_launch`."""
    rows, width = slots.shape
    block = _block(width)
    return Launch(
        _finish_indices_kernel,
        (rows, triton.cdiv(width, block)),
        (slots, indices, row_base, width),
        {"BLOCK": block},
        num_warps=4,
        num_stages=3,
    )


def decode_indices_aot_launches(
    arch: GpuArch,
    *,
    batch: int,
    s_q: int,
    topk: int,
    block_size: int,
    device_buffer_size: int,
    max_blocks: int,
) -> list[Launch]:
    """Both maps as ``DecodeRuntime`` launches them for ``batch`` requests of ``s_q``
    query tokens (int32 top-k positions; per-row metadata as int64 rows of one
    ``[7 + groups, rows]`` table; counters in an int64 ``[groups, 8]`` table),
    built on meta tensors (no memory) for the ahead-of-time compile check (the
    same launches on every ``arch``)."""
    meta = torch.device("meta")
    rows = batch * s_q

    def ints(*shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=meta)

    step_meta = ints(8, rows)  # rows 0, 1, 2 and 3: region, tokens, tail start, slot base
    counts = ints(1, 8)  # [4:7]: tail entries, invalid positions, last invalid row
    indices = ints(rows, topk, dtype=torch.int32)
    return [
        map_positions_launch(
            ints(rows, topk, dtype=torch.int32),
            ints(batch, max_blocks, dtype=torch.int32),
            step_meta[0],
            step_meta[1],
            step_meta[2],
            block_size=block_size,
            region_rows=device_buffer_size + 2 * block_size,
            device_buffer_size=device_buffer_size,
            host_rows=ints(rows, topk),
            indices=indices,
            counters=counts[0, 4:7],
        ),
        finish_indices_launch(ints(rows, topk, dtype=torch.int32), indices, step_meta[3]),
    ]
