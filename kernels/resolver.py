"""Hot-buffer residency on the device: the Triton twin of ``ResidencyResolver.resolve``.

``resolve_residency`` maps a batch's top-k host rows to hot-buffer slots and
writes the miss plan, with the Rust resolver's semantics bit for bit (module
docs of ``rust/hisparse-core/src/pool/resolver.rs``; HISPARSE.md §6): union of
a state's rows in batch-row then column order, invalid rows (< -1 or >=
num_host_rows) and padding give slot -1 and count nowhere, a repeated row is
loaded once, misses take the oldest non-hit slots in union order, the plan
entry goes to the batch row where the row first appears, and the new LRU order
is untouched | loaded | hits. The same slots, plan order, counts, offsets,
hits, misses, slot rows and LRU order as the Rust resolver after every call
(``tests/test_kernels_resolver.py`` holds it under ``TRITON_INTERPRET=1``).

**Device state** (per resolver state): ``slot_rows`` int32 ``[dbs]`` (host row
per slot, -1 empty) and ``lru`` int16 ``[dbs]`` (slots, oldest first): 6 bytes
per slot, the same as SGLang's and vLLM 0.33's hot-buffer state. No row ->
slot index is kept: each call hashes the union (at most ``max_rows_per_state
x top-k`` rows) into a per-row workspace and scans the ``dbs`` slots against
it, as vLLM 0.33's ``hisparse_resolve_residency`` does in shared memory. Here
the table lives in global memory (L2), so the kernel's shared memory does not
grow with device_buffer_size or top-k (Triton's scan scratch: 9 KB above
512 slots; ``aot.py``'s table).

**Sync contract.** One launch per call for the whole batch (plus a cumsum for
``miss_offsets``); no host synchronization, nothing that a CUDA graph cannot
capture: the scratch is a :class:`ResolverWorkspace` and the outputs are views
of :class:`PlanBuffers` (the workspace's own, or the caller's), at fixed
addresses. Outputs stay on the device:

- ``slots`` int32 ``[rows, width]``;
- the miss plan, row-strided: ``miss_host_rows`` int64 ``[rows, width]`` and
  ``miss_slots`` int32 ``[rows, width]``, row r's plan in ``[:miss_counts[r]]``
  (entries past the count are stale); ``miss_counts`` int32 ``[rows]`` and
  ``miss_offsets`` int32 ``[rows + 1]`` (the exclusive prefix sum: where row
  r's plan starts in the Rust resolver's flat plan, which is the rows' plans
  concatenated);
- ``status`` int64 ``[4]``, accumulated across calls until the caller zeroes
  it (a decode step checks it once, not per layer): ``[hits, misses, flags,
  1 + the highest state whose union overflowed (0: none)]``.

**Errors found on the device** set a bit in ``status[2]`` instead of raising:

- ``FLAG_UNION_EXCEEDS`` (``union_exceeds_device_buffer``): a state's rows
  select more than dbs distinct rows. The Rust call then fails whole and
  changes nothing. Here that state is left unchanged (slot rows and LRU), its
  rows resolve to slot -1 with empty plans and no hits or misses counted; the
  other states of the batch are resolved as if those rows were padded. That
  is the Rust resolver's result for the batch with the overflowing rows'
  ``state_index`` set to -1 (the tests hold exactly that);
- ``FLAG_UNKNOWN_STATE``: a ``state_index`` outside ``[-1, num_states)``, or
  (given ``live``, as :class:`TritonResidencyResolver` and ``DecodeRuntime``
  pass it) a state freed or never created; that row is treated as padding
  (the Rust call raises ``unknown_state`` and changes nothing). At width 0 too:
  the Rust resolver checks the states of a batch without columns;
- ``FLAG_TOO_MANY_ROWS``: more rows share a state than the workspace's
  ``max_rows_per_state``; that state is left unchanged, its rows resolve to -1.

Host-side checks (shapes, dtypes, devices, top-k width, and inputs that
overlap the outputs, ``slot_rows`` / ``lru`` or the workspace: the kernel
would read what it writes) raise at once, before anything is launched, with
the Rust resolver's codes where it has one.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from dataclasses import dataclass

import numpy as np
import torch
import triton

from hisparse_rs._core import MAX_RESOLVE_ENTRIES
from hisparse_rs.exceptions import PoolError

from . import _resolver_triton as _k
from ._common import check_launch_device, check_tensors, describe, require
from ._launch import GpuArch, Launch
from ._resolver_triton import _resolve_residency_kernel

__all__ = [
    "FLAG_TOO_MANY_ROWS",
    "FLAG_UNION_EXCEEDS",
    "FLAG_UNKNOWN_STATE",
    "MAX_DEVICE_BUFFER_SIZE",
    "MAX_RESOLVE_ENTRIES",
    "PlanBuffers",
    "ResidencyPlan",
    "ResolverTiling",
    "ResolverWorkspace",
    "TritonResidencyResolver",
    "resolve_launch",
    "resolve_residency",
    "resolver_aot_launches",
    "resolver_tiling",
    "status_error",
]

FLAG_UNION_EXCEEDS: int = _k.FLAG_UNION_EXCEEDS.value
"""status[2] bit: a state's union exceeded device_buffer_size (that state unchanged)."""
FLAG_UNKNOWN_STATE: int = _k.FLAG_UNKNOWN_STATE.value
"""status[2] bit: a state_index outside [-1, num_states) (that row treated as padding)."""
FLAG_TOO_MANY_ROWS: int = _k.FLAG_TOO_MANY_ROWS.value
"""status[2] bit: more rows shared a state than max_rows_per_state (that state unchanged)."""
MAX_DEVICE_BUFFER_SIZE = 32768
"""vLLM 0.33: device_buffer_size <= iinfo(int16).max + 1 (slots are int16)."""
STATE_BYTES_PER_SLOT = 6
"""int32 slot row + int16 LRU entry (SGLang and vLLM 0.33 keep the same)."""
_OP = "resolve_residency"


@dataclass(frozen=True)
class ResolverTiling:
    """Compile-time shape of the resolver kernel (``_resolve_residency_kernel``).

    ``dbs`` (DBS) slots per state; a union table of ``2 ** table_bits`` entries
    (TABLE_BITS; >= 2 x (min(max_members x top-k, dbs) + block_u), so it is at
    most half full); ``max_members`` (MAX_MEMBERS) rows per state; loops over
    ``block_u`` (BLOCK_U) union entries, ``block_s`` (BLOCK_S) slots and
    ``block_r`` (BLOCK_R) batch rows at a time; ``num_warps`` warps.
    """

    dbs: int
    table_bits: int
    max_members: int
    block_u: int
    block_s: int
    block_r: int
    num_warps: int

    @property
    def table(self) -> int:
        return 1 << self.table_bits

    @property
    def maxnreg(self) -> int:
        """Registers per thread ptxas may use: the whole register file for one
        program (64 K / threads, at most 255). Only leader programs do work, one
        per request (64 at batch 64, fewer than the SMs), so occupancy buys
        nothing; left to itself, ptxas gives 16 warps 64 registers and spills at
        dbs 32768 on sm_90."""
        return min(255, 65536 // (32 * self.num_warps))

    def constexprs(self) -> dict[str, int]:
        """The kernel's constexpr arguments, by name."""
        return {
            "DBS": self.dbs,
            "TABLE_BITS": self.table_bits,
            "MAX_MEMBERS": self.max_members,
            "BLOCK_U": self.block_u,
            "BLOCK_S": self.block_s,
            "BLOCK_R": self.block_r,
        }

    def workspace_bytes_per_row(self) -> int:
        """Device scratch per batch row: the table (keys, first position, hit
        slot, miss rank: 16 B per entry), hit flag + miss slot + new LRU per
        slot (7 B), idle-lane words and the member list."""
        return 16 * self.table + 7 * self.dbs + 4 * self.block_u + 4 * self.max_members


def resolver_tiling(
    device_buffer_size: int, topk: int, max_rows: int, max_rows_per_state: int
) -> ResolverTiling:
    """The tiling for ``device_buffer_size`` slots, top-k rows up to ``topk``
    wide, batches up to ``max_rows`` rows, at most ``max_rows_per_state`` rows
    per state (1 + MTP draft tokens in a decode step)."""
    block_u = min(1024, triton.next_power_of_2(max(topk, 1)))
    block_s = min(1024, triton.next_power_of_2(device_buffer_size))
    cap = min(max_rows_per_state * topk, device_buffer_size)
    table = triton.next_power_of_2(2 * (cap + block_u))
    # 16 warps x 2 lanes of 1024-entry loops, up to 128 registers a thread
    # (maxnreg): no spills at dbs 4096, 10240 and 32768 on sm_90 and sm_100
    # (4 warps x 1024 spill at 32768; aot.production_cases() holds it in CI).
    return ResolverTiling(
        dbs=device_buffer_size,
        table_bits=table.bit_length() - 1,
        max_members=max_rows_per_state,
        block_u=block_u,
        block_s=block_s,
        block_r=min(256, triton.next_power_of_2(max(max_rows, 1))),
        num_warps=max(1, min(16, max(block_u, block_s) // 64)),
    )


class PlanBuffers:
    """Output buffers of :func:`resolve_residency` for batches up to ``max_rows``
    rows of width up to ``topk``: a call's :class:`ResidencyPlan` is a set of
    views of them, at fixed addresses (what a CUDA graph needs), overwritten by
    the next call that writes here. ``16 x topk + 8`` bytes per row.
    """

    def __init__(self, max_rows: int, topk: int, device: str | torch.device) -> None:
        dev = torch.device(device)
        self.max_rows, self.topk, self.device = max_rows, topk, dev
        n = max_rows * topk
        self.slots = torch.empty(n, dtype=torch.int32, device=dev)
        self.miss_host_rows = torch.empty(n, dtype=torch.int64, device=dev)
        self.miss_slots = torch.empty(n, dtype=torch.int32, device=dev)
        self.miss_counts = torch.empty(max_rows, dtype=torch.int32, device=dev)
        self.miss_offsets = torch.zeros(max_rows + 1, dtype=torch.int32, device=dev)
        self.status = torch.zeros(4, dtype=torch.int64, device=dev)

    @property
    def nbytes(self) -> int:
        return self.max_rows * (16 * self.topk + 8) + 4 + 32

    def views(self, rows: int, width: int, status: torch.Tensor) -> ResidencyPlan:
        n = rows * width
        return ResidencyPlan(
            slots=self.slots[:n].view(rows, width),
            miss_host_rows=self.miss_host_rows[:n].view(rows, width),
            miss_slots=self.miss_slots[:n].view(rows, width),
            miss_counts=self.miss_counts[:rows],
            miss_offsets=self.miss_offsets[: rows + 1],
            status=status,
        )


class ResolverWorkspace:
    """Scratch of :func:`resolve_residency` (and default :class:`PlanBuffers`)
    for batches up to ``max_rows`` rows of width up to ``topk``, at most
    ``max_rows_per_state`` rows per state (default ``max_rows``), allocated once.

    Bytes: :attr:`nbytes` = ``max_rows x tiling.workspace_bytes_per_row()`` +
    the outputs.
    """

    def __init__(
        self,
        device_buffer_size: int,
        topk: int,
        max_rows: int,
        *,
        max_rows_per_state: int | None = None,
        device: str | torch.device = "cuda",
    ) -> None:
        for name, v in (("device_buffer_size", device_buffer_size), ("topk", topk), ("max_rows", max_rows)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        per_state = max_rows if max_rows_per_state is None else max_rows_per_state
        if isinstance(per_state, bool) or not isinstance(per_state, int) or not 1 <= per_state <= max_rows:
            raise ValueError(
                f"max_rows_per_state must be an int in [1, max_rows={max_rows}], got {per_state!r}"
            )
        self.tiling = resolver_tiling(device_buffer_size, topk, max_rows, per_state)
        self.topk = topk
        self.max_rows = max_rows
        dev = torch.device(device)
        cfg = self.tiling

        def ints(*shape: int, dtype: torch.dtype = torch.int32) -> torch.Tensor:
            return torch.empty(shape, dtype=dtype, device=dev)

        self.outputs = PlanBuffers(max_rows, topk, dev)
        self._keys = ints(max_rows, cfg.table)
        self._first = ints(max_rows, cfg.table)
        self._hit = ints(max_rows, cfg.table)
        self._rank = ints(max_rows, cfg.table)
        self._dummy = ints(max_rows, cfg.block_u)
        self._flags = ints(max_rows, cfg.dbs, dtype=torch.int8)
        self._miss_slot = ints(max_rows, cfg.dbs)
        self._new_lru = ints(max_rows, cfg.dbs, dtype=torch.int16)
        self._members = ints(max_rows, cfg.max_members)
        self.device = dev

    def scratch(self) -> dict[str, torch.Tensor]:
        """The kernel's scratch tensors by name (nothing outside may alias them)."""
        return {
            name.removeprefix("_"): getattr(self, name)
            for name in ("_keys", "_first", "_hit", "_rank", "_dummy", "_flags", "_miss_slot", "_new_lru")
        } | {"members": self._members}

    @property
    def status(self) -> torch.Tensor:
        return self.outputs.status

    @property
    def nbytes(self) -> int:
        return self.max_rows * self.tiling.workspace_bytes_per_row() + self.outputs.nbytes


@dataclass(frozen=True)
class ResidencyPlan:
    """One call's result, on the device (module docstring: layouts and ``status``)."""

    slots: torch.Tensor
    miss_host_rows: torch.Tensor
    miss_slots: torch.Tensor
    miss_counts: torch.Tensor
    miss_offsets: torch.Tensor
    status: torch.Tensor

    def flat_plan(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The Rust resolver's flat plan ``(miss_host_rows int64 [n], miss_slots int32 [n])``,
        the rows' plans concatenated. Synchronizes (its length is data): for tests and tools."""
        keep = (
            torch.arange(self.miss_slots.shape[1], device=self.miss_slots.device) < self.miss_counts[:, None]
        )
        return self.miss_host_rows[keep], self.miss_slots[keep]


def status_error(status: torch.Tensor | list[int], device_buffer_size: int) -> Exception | None:
    """The error a status (``ResidencyPlan.status``, read on the host) reports, or None.

    PoolError with the Rust resolver's codes ``union_exceeds_device_buffer`` /
    ``unknown_state``; ValueError for a workspace too small (``FLAG_TOO_MANY_ROWS``).
    """
    hits, misses, flags, overflow = (
        int(v) for v in (status.tolist() if isinstance(status, torch.Tensor) else status)
    )
    del hits, misses
    if flags & FLAG_UNION_EXCEEDS:
        return PoolError(
            "union_exceeds_device_buffer",
            f"state {overflow - 1}: the union of its rows' top-k holds more than device_buffer_size "
            f"{device_buffer_size} distinct host rows; raise device_buffer_size to "
            "(max_decode_query_len + 1) x top-k. That state was left unchanged and its rows resolved to -1.",
        )
    if flags & FLAG_UNKNOWN_STATE:
        return PoolError(
            "unknown_state",
            "a state_index was outside [-1, num_states); its row was treated as padding. "
            "Use state indices from new_state(), or -1 for a padded row.",
        )
    if flags & FLAG_TOO_MANY_ROWS:
        return ValueError(
            "more batch rows share a state than the workspace's max_rows_per_state; that state was "
            "left unchanged. Build the ResolverWorkspace with a larger max_rows_per_state.",
        )
    return None


def _check_int_tensor(name: str, t: torch.Tensor, dtypes: tuple[torch.dtype, ...], dim: int) -> None:
    allowed = "/".join(str(d).removeprefix("torch.") for d in dtypes)
    require(
        t.dtype in dtypes and t.dim() == dim,
        _OP,
        f"{name} must be {allowed} with {dim} dimension(s)",
        t,
        f"pass {name} as documented (e.g. {name}.to(torch.{str(dtypes[-1]).removeprefix('torch.')}))",
    )


def _check_no_overlap(**tensors: torch.Tensor | None) -> None:
    """ValueError when two of ``tensors`` share memory (byte ranges of their
    storage intersect; a strided view counts by its extent): the kernel writes
    some of them while it reads the others. Checked on the host from pointers
    and strides, no launch."""
    spans: list[tuple[int, int, str]] = []
    for name, t in tensors.items():
        if t is None or t.numel() == 0:
            continue
        extent = 1 + sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride(), strict=True))
        start = t.data_ptr()
        spans.append((start, start + extent * t.element_size(), name))
    spans.sort()
    for (_, end, a), (start, _, b) in itertools.pairwise(spans):  # any overlap shows in a sorted pair
        if start < end:
            raise ValueError(
                f"{_OP}: {a} and {b} share memory; the kernel writes one while it reads the other "
                f"(a corrupt plan). Pass inputs that do not alias the outputs, slot_rows / lru, "
                f"status or the workspace (e.g. {b}.clone())"
            )


def resolve_residency(
    topk_rows: torch.Tensor,
    state_index: torch.Tensor,
    slot_rows: torch.Tensor,
    lru: torch.Tensor,
    *,
    num_host_rows: int,
    workspace: ResolverWorkspace,
    status: torch.Tensor | None = None,
    out: PlanBuffers | None = None,
    live: torch.Tensor | None = None,
) -> ResidencyPlan:
    """Resolve a batch on the device (one kernel launch; no host synchronization).

    Args:
        topk_rows: int32/int64 ``[rows, width]`` host rows, -1 padding (rows may
            be strided; columns contiguous).
        state_index: int32/int64 ``[rows]``, the state of each row, -1 = padded row.
            Rows that share a state are resolved as one union (MTP).
        slot_rows: int32 ``[num_states, dbs]``, updated in place.
        lru: int16 ``[num_states, dbs]``, updated in place.
        num_host_rows: host rows valid in ``[0, num_host_rows)`` (<= 2**31).
        workspace: scratch (``rows <= max_rows``, ``width <= topk``).
        status: int64 ``[4]`` to accumulate into (default: ``out``'s, zeroed).
        out: where the plan goes (default: the workspace's :class:`PlanBuffers`),
            e.g. one per index group whose later layers replay the plan.
        live: int8 ``[num_states]``, nonzero for a live state
            (:attr:`TritonResidencyResolver.live`); a row of a dead state is
            flagged ``FLAG_UNKNOWN_STATE`` as one out of range. Default: every
            state in range is live.

    Returns:
        :class:`ResidencyPlan` (views of ``out``).

    Raises:
        PoolError ``topk_too_wide`` (width > the workspace's topk),
        ``shape_mismatch`` or ``batch_too_large`` (rows x width >
        ``MAX_RESOLVE_ENTRIES`` = 2**26, the Rust resolver's bound);
        ValueError for dtypes, devices, a meta tensor or one that requires
        grad, a batch larger than the workspace, or tensors that share memory
        where the kernel writes (``topk_rows`` a view of ``out``'s plan, say).
        Device-found errors: ``status`` flags.
    """
    check_tensors(
        _OP,
        topk_rows=topk_rows,
        state_index=state_index,
        slot_rows=slot_rows,
        lru=lru,
        status=status,
        live=live,
    )
    _check_int_tensor("topk_rows", topk_rows, (torch.int32, torch.int64), 2)
    _check_int_tensor("state_index", state_index, (torch.int32, torch.int64), 1)
    _check_int_tensor("slot_rows", slot_rows, (torch.int32,), 2)
    _check_int_tensor("lru", lru, (torch.int16,), 2)
    ws = workspace
    cfg = ws.tiling
    rows, width = topk_rows.shape
    if width > ws.topk:
        raise PoolError(
            "topk_too_wide",
            f"top-k rows are {width} wide, wider than the workspace's top-k {ws.topk}; "
            f"build the ResolverWorkspace with topk >= {width}",
        )
    if state_index.shape[0] != rows:
        raise PoolError(
            "shape_mismatch",
            f"topk_rows must be [rows, width] and state_index [rows]; "
            f"got {list(topk_rows.shape)} and {list(state_index.shape)}",
        )
    # The Rust resolver's bound on one call (pool/resolver.rs), checked on the
    # shapes alone; it also keeps every flat index of the kernel below 2**31.
    if rows * width > MAX_RESOLVE_ENTRIES:
        raise PoolError(
            "batch_too_large",
            f"the batch has {rows * width} top-k entries (rows x width), more than the "
            f"{MAX_RESOLVE_ENTRIES} one resolve call takes; split it into several calls",
        )
    if rows > ws.max_rows:
        raise ValueError(f"{_OP}: {rows} rows exceed the workspace's max_rows {ws.max_rows}")
    if tuple(slot_rows.shape) != tuple(lru.shape) or slot_rows.shape[1] != cfg.dbs:
        raise ValueError(
            f"{_OP}: slot_rows and lru must both be [num_states, device_buffer_size={cfg.dbs}], "
            f"got {describe(slot_rows)} and {describe(lru)}"
        )
    if not (slot_rows.is_contiguous() and lru.is_contiguous() and state_index.is_contiguous()):
        raise ValueError(f"{_OP}: slot_rows, lru and state_index must be contiguous")
    if live is not None and (
        live.dtype != torch.int8 or tuple(live.shape) != (slot_rows.shape[0],) or not live.is_contiguous()
    ):
        raise ValueError(
            f"{_OP}: live must be int8 [num_states={slot_rows.shape[0]}] (contiguous), got {describe(live)}"
        )
    if not 1 <= num_host_rows <= 2**31:
        raise ValueError(f"{_OP}: num_host_rows must be in 1 ..= 2^31, got {num_host_rows}")
    if rows and width and topk_rows.stride(1) != 1:
        topk_rows = topk_rows.contiguous()
    check_launch_device(
        _OP, topk_rows, state_index, slot_rows, lru, ws._keys, *([] if live is None else [live])
    )
    buffers = ws.outputs if out is None else out
    if buffers.max_rows < rows or buffers.topk < width or buffers.device != ws.device:
        raise ValueError(
            f"{_OP}: out holds {buffers.max_rows} rows of width {buffers.topk} on {buffers.device}; "
            f"this call needs {rows} x {width} on {ws.device}"
        )
    if status is None:
        status = buffers.status
        status.zero_()
    elif (
        status.dtype != torch.int64
        or tuple(status.shape) != (4,)
        or not status.is_contiguous()
        or status.device != ws.device
    ):
        raise ValueError(
            f"{_OP}: status must be int64 [4] on {ws.device}, got {describe(status)} on {status.device}"
        )
    plan = buffers.views(rows, width, status)
    _check_no_overlap(
        topk_rows=topk_rows,
        state_index=state_index,
        live=live,
        slot_rows=slot_rows,
        lru=lru,
        status=status,
        slots=buffers.slots,
        miss_host_rows=buffers.miss_host_rows,
        miss_slots=buffers.miss_slots,
        miss_counts=buffers.miss_counts,
        miss_offsets=buffers.miss_offsets,
        **{f"workspace.{name}": t for name, t in ws.scratch().items()},
    )
    if rows == 0:
        return plan
    if width == 0:
        # Nothing to resolve, but the states are checked as the Rust resolver checks them,
        # and the rows a state shares against the workspace, as the kernel checks them.
        plan.miss_counts.zero_()
        _flag_unknown_states(state_index, live, slot_rows.shape[0], status)
        _flag_too_many_rows(state_index, slot_rows.shape[0], ws.tiling.max_members, status)
    else:
        resolve_launch(topk_rows, state_index, slot_rows, lru, plan, ws, num_host_rows, live).run()
    torch.cumsum(plan.miss_counts, 0, dtype=torch.int32, out=plan.miss_offsets[1:])
    return plan


def _flag_unknown_states(
    state_index: torch.Tensor, live: torch.Tensor | None, num_states: int, status: torch.Tensor
) -> None:
    """The kernel's state check for a batch without columns: ``FLAG_UNKNOWN_STATE``
    in ``status[2]`` when a row's state is neither -1 nor live (device ops, no sync)."""
    s = state_index.to(torch.int64)
    dead = (s < -1) | (s >= num_states)
    if live is not None:
        dead |= (s >= 0) & (live[s.clamp(0, num_states - 1)] == 0)
    status[2:3].bitwise_or_(dead.any().to(torch.int64) * FLAG_UNKNOWN_STATE)


def _flag_too_many_rows(
    state_index: torch.Tensor, num_states: int, max_members: int, status: torch.Tensor
) -> None:
    """The kernel's row count for a batch without columns: ``FLAG_TOO_MANY_ROWS`` in
    ``status[2]`` when more rows share a state than the workspace's ``max_rows_per_state``
    (device ops, no sync; padding and unknown states are not counted)."""
    s = state_index.to(torch.int64)
    ok = (s >= 0) & (s < num_states)
    counts = torch.bincount(torch.where(ok, s, num_states), minlength=num_states + 1)[:num_states]
    status[2:3].bitwise_or_((counts > max_members).any().to(torch.int64) * FLAG_TOO_MANY_ROWS)


def resolve_launch(
    topk_rows: torch.Tensor,
    state_index: torch.Tensor,
    slot_rows: torch.Tensor,
    lru: torch.Tensor,
    plan: ResidencyPlan,
    workspace: ResolverWorkspace,
    num_host_rows: int,
    live: torch.Tensor | None = None,
) -> Launch:
    """The kernel launch :func:`resolve_residency` makes for these (already checked)
    tensors, with at least one row and one column: one program per batch row,
    the workspace's :class:`ResolverTiling`. Also built on meta tensors by
    :func:`resolver_aot_launches` for the ahead-of-time compile check (``aot.py``)."""
    ws = workspace
    cfg = ws.tiling
    return Launch(
        _resolve_residency_kernel,
        (topk_rows.shape[0],),
        (
            topk_rows,
            state_index,
            state_index if live is None else live,  # not read without CHECK_LIVE
            slot_rows,
            lru,
            plan.slots,
            plan.miss_host_rows,
            plan.miss_slots,
            plan.miss_counts,
            plan.status,
            ws._keys,
            ws._first,
            ws._hit,
            ws._rank,
            ws._dummy,
            ws._flags,
            ws._miss_slot,
            ws._new_lru,
            ws._members,
            topk_rows.shape[0],
            topk_rows.shape[1],
            topk_rows.stride(0),
            slot_rows.shape[0],
            num_host_rows,
        ),
        {**cfg.constexprs(), "CHECK_LIVE": live is not None},
        num_warps=cfg.num_warps,
        num_stages=3,
        maxnreg=cfg.maxnreg,
    )


def resolver_aot_launches(
    arch: GpuArch,
    *,
    device_buffer_size: int,
    topk: int,
    batch: int,
    rows_per_state: int,
    num_states: int,
    num_host_rows: int,
) -> list[Launch]:
    """What :func:`resolve_residency` launches for the decode step of ``batch``
    requests of ``rows_per_state`` query rows each (``DecodeRuntime``'s
    workspace: ``batch x rows_per_state`` rows, ``max_rows_per_state`` =
    s_q), int64 top-k host rows and state indices, built on meta tensors (no
    memory) for the ahead-of-time compile check (the same launch on every ``arch``)."""
    meta = torch.device("meta")
    rows = batch * rows_per_state
    ws = ResolverWorkspace(device_buffer_size, topk, rows, max_rows_per_state=rows_per_state, device=meta)
    states = torch.empty((num_states, device_buffer_size), dtype=torch.int32, device=meta)
    lru = torch.empty((num_states, device_buffer_size), dtype=torch.int16, device=meta)
    topk_rows = torch.empty((rows, topk), dtype=torch.int64, device=meta)
    state_index = torch.empty((rows,), dtype=torch.int64, device=meta)
    live = torch.empty((num_states,), dtype=torch.int8, device=meta)
    plan = ws.outputs.views(rows, topk, ws.status)
    return [resolve_launch(topk_rows, state_index, states, lru, plan, ws, num_host_rows, live)]


def _size_arg(name: str, value: object, bits: int) -> int:
    """An unsigned ``bits``-bit size as the Rust binding takes it: any integer
    (TypeError otherwise), PoolError ``invalid_size`` naming it when out of range."""
    v = operator.index(value)  # type: ignore[arg-type]
    if not 0 <= v < 2**bits:
        raise PoolError("invalid_size", f"invalid {name}: {v} (allowed: an integer in 0 ..= 2**{bits} - 1)")
    return v


_STATE_DTYPES = (torch.int16, torch.int32, torch.int64)


def _state_vector(name: str, x: object) -> torch.Tensor:
    """``x`` (a tensor or array-like) as int64 [n] on the host, with the Rust
    ``import_state``'s rules: int16 / int32 / int64 (TypeError otherwise), 1-D
    (PoolError ``shape_mismatch``); a tensor must hold dense data."""
    if isinstance(x, torch.Tensor):
        check_tensors("import_state", **{name: x})
        t = x
    else:
        a = np.asarray(x)
        if a.dtype not in (np.int16, np.int32, np.int64):
            raise TypeError(
                f"{name} must be an int16, int32 or int64 array, got dtype {a.dtype}; convert with "
                "numpy.asarray(x, dtype=numpy.int64) (torch: tensor.cpu())"
            )
        t = torch.from_numpy(np.ascontiguousarray(a))
    if t.dtype not in _STATE_DTYPES:
        raise TypeError(
            f"{name} must be an int16, int32 or int64 tensor, got {t.dtype}; "
            f"convert with {name}.to(torch.int64)"
        )
    if t.dim() != 1:
        raise PoolError("shape_mismatch", f"shape mismatch: {name} must be 1-D, got shape {list(t.shape)}")
    return t.to("cpu", torch.int64)


class TritonResidencyResolver:
    """Hot-buffer residency for up to ``max_states`` states on the device: the
    twin of :class:`hisparse_rs.ResidencyResolver` (same arguments, same state
    ids, same results; see the module docstring for what differs: errors found
    on the device are flags in ``status``).

    Device memory: :attr:`state_bytes` (6 B per slot) per state, allocated for
    ``max_states`` up front, plus the :class:`ResolverWorkspace` for batches of
    up to ``max_rows`` rows, ``max_rows_per_state`` sharing a state.
    Which ids are live is kept on the host (the ids :meth:`new_state` hands
    out) and on the device (:attr:`live`, int8 ``[max_states]``, which the
    kernel reads: a freed or never-created id flags ``FLAG_UNKNOWN_STATE``).

    Arguments, state ids and imported states are taken as the Rust resolver
    takes them (any integer: numpy and torch ints too; the same ranges, rules
    and error codes).

    Raises:
        PoolError: the Rust resolver's construction codes
            (``device_buffer_too_large``, ``invalid_size``, ``topk_exceeds_device_buffer``).
        TypeError: a size that is not an integer.
        ValueError: ``max_states`` not an int in [1, 2**31], ``max_rows`` not an int >= 1.
    """

    def __init__(
        self,
        device_buffer_size: int,
        topk: int,
        num_host_rows: int,
        *,
        max_states: int,
        max_rows: int,
        max_rows_per_state: int | None = None,
        device: str | torch.device = "cuda",
    ) -> None:
        # The Rust resolver's arguments, rules, order and codes (pool/resolver.rs
        # ResidencyResolver::new; the binding's u32 / u64 argument ranges).
        device_buffer_size = _size_arg("device_buffer_size", device_buffer_size, 32)
        topk = _size_arg("topk", topk, 32)
        num_host_rows = _size_arg("num_host_rows", num_host_rows, 64)
        if device_buffer_size > MAX_DEVICE_BUFFER_SIZE:
            raise PoolError(
                "device_buffer_too_large",
                f"device_buffer_size {device_buffer_size} exceeds {MAX_DEVICE_BUFFER_SIZE} "
                "(hot-buffer slots are int16); lower device_buffer_size",
            )
        if topk < 1:
            raise PoolError("invalid_size", f"invalid topk: {topk} (allowed: >= 1)")
        if device_buffer_size < topk:
            raise PoolError(
                "topk_exceeds_device_buffer",
                f"top-k {topk} exceeds device_buffer_size {device_buffer_size}: the hot buffer must hold "
                f"a whole top-k row; raise device_buffer_size to at least {topk}",
            )
        if not 1 <= num_host_rows <= 2**31:
            raise PoolError("invalid_size", f"invalid num_host_rows: {num_host_rows} (allowed: 1 ..= 2^31)")
        if isinstance(max_states, bool) or not isinstance(max_states, int) or not 1 <= max_states <= 2**31:
            # State ids are int32 in state_index, as the Rust resolver's u32 / i32 ids.
            raise ValueError(f"max_states must be an int in [1, 2**31], got {max_states!r}")
        self.device_buffer_size = device_buffer_size
        self.topk = topk
        self.num_host_rows = num_host_rows
        self.max_states = max_states
        self.device = torch.device(device)
        self.workspace = ResolverWorkspace(
            device_buffer_size, topk, max_rows, max_rows_per_state=max_rows_per_state, device=self.device
        )
        self.slot_rows_all = torch.full(
            (max_states, device_buffer_size), -1, dtype=torch.int32, device=self.device
        )
        self._lru_init = torch.arange(device_buffer_size, dtype=torch.int16, device=self.device)
        self.lru_all = self._lru_init.repeat(max_states, 1)
        # Which ids are live, on the device for the kernel (a freed id resolves
        # to FLAG_UNKNOWN_STATE, as Rust's unknown_state) and on the host.
        self.live = torch.zeros(max_states, dtype=torch.int8, device=self.device)
        self._free = list(range(max_states))
        self._live: set[int] = set()

    @property
    def state_bytes(self) -> int:
        """Device bytes one state keeps: 6 x device_buffer_size (SGLang's 6 B per slot)."""
        return STATE_BYTES_PER_SLOT * self.device_buffer_size

    @property
    def num_states(self) -> int:
        return len(self._live)

    def new_state(self) -> int:
        """A new empty state; freed ids are reused lowest first (as the Rust resolver's).

        Raises ValueError when all ``max_states`` are live.
        """
        if not self._free:
            raise ValueError(f"all {self.max_states} states are in use (max_states); free a state first")
        s = heapq.heappop(self._free)
        self._clear(s)
        self.live[s] = 1
        self._live.add(s)
        return s

    def _state(self, state: int) -> int:
        # Any integer, as the Rust resolver takes it (numpy / torch ints: operator.index;
        # a float or str is a TypeError there and here).
        s = operator.index(state)
        if s not in self._live:
            raise PoolError(
                "unknown_state",
                f"unknown resolver state {s}: it was never created or is already freed; "
                "use an index from new_state(), or -1 for a padded row",
            )
        return s

    def _clear(self, s: int) -> None:
        self.slot_rows_all[s].fill_(-1)
        self.lru_all[s].copy_(self._lru_init)

    def reset_state(self, state: int) -> None:
        """Empty a state (device fills, no sync). Raises PoolError ``unknown_state``."""
        self._clear(self._state(state))

    def free_state(self, state: int) -> None:
        """Release a state. Raises PoolError ``unknown_state``."""
        s = self._state(state)
        self.live[s] = 0
        self._live.remove(s)
        heapq.heappush(self._free, s)

    def export_state(self, state: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(slot_rows int32 [dbs], lru_order int16 [dbs])`` copies, on the device
        (``ResidencyResolver.import_state`` takes them after ``.cpu()``).
        Raises PoolError ``unknown_state``."""
        s = self._state(state)
        return self.slot_rows_all[s].clone(), self.lru_all[s].clone()

    def import_state(self, state: int, slot_rows: torch.Tensor, lru_order: torch.Tensor) -> None:
        """Replace a state's contents, e.g. with ``ResidencyResolver.export_state``'s.

        ``slot_rows`` / ``lru_order``: int16/int32/int64 [dbs] tensors or
        array-likes. Validated on the host first (synchronizes; a between-steps
        call), with the Rust resolver's rules and codes: PoolError
        ``unknown_state``, ``shape_mismatch`` (not 1-D, or not dbs entries),
        ``invalid_resolver_state`` (a row outside -1 or [0, num_host_rows), a
        row in two slots, an LRU that is not a permutation of 0..dbs);
        TypeError for another dtype; ValueError for a tensor without dense
        data (meta, sparse). Nothing changes on an error.
        """
        s = self._state(state)
        rows = _state_vector("slot_rows", slot_rows)
        lru = _state_vector("lru_order", lru_order)
        dbs = self.device_buffer_size
        if rows.numel() != dbs or lru.numel() != dbs:
            raise PoolError(
                "shape_mismatch",
                f"shape mismatch: slot_rows has {rows.numel()} entries and lru_order {lru.numel()}; "
                f"both must have device_buffer_size = {dbs}",
            )

        def bad(what: str) -> PoolError:
            return PoolError("invalid_resolver_state", f"resolver state {s}: {what}")

        out = (rows != -1) & ((rows < 0) | (rows >= self.num_host_rows))
        if bool(out.any()):
            i = int(out.nonzero()[0])
            raise bad(
                f"slot_rows[{i}] = {int(rows[i])} is neither -1 (empty) nor a host row in "
                f"[0, {self.num_host_rows})"
            )
        held = rows[rows >= 0].sort().values
        if bool((held[1:] == held[:-1]).any()):
            raise bad("a host row is in two slots (a row is cached at most once)")
        if not torch.equal(lru.sort().values, torch.arange(dbs)):
            raise bad(f"lru_order is not a permutation of 0..{dbs}")
        self.slot_rows_all[s].copy_(rows.to(torch.int32))
        self.lru_all[s].copy_(lru.to(torch.int16))

    def slot_rows(self, state: int) -> torch.Tensor:
        """Host row cached in each slot, int32 [dbs] (a device copy). Raises PoolError ``unknown_state``."""
        return self.export_state(state)[0]

    def lru_order(self, state: int) -> torch.Tensor:
        """Slots oldest first, int16 [dbs] (a device copy). Raises PoolError ``unknown_state``."""
        return self.export_state(state)[1]

    def resolve(
        self, topk_rows: torch.Tensor, state_index: torch.Tensor, *, status: torch.Tensor | None = None
    ) -> ResidencyPlan:
        """:func:`resolve_residency` over this resolver's states and workspace."""
        return resolve_residency(
            topk_rows,
            state_index,
            self.slot_rows_all,
            self.lru_all,
            num_host_rows=self.num_host_rows,
            workspace=self.workspace,
            status=status,
            live=self.live,
        )
