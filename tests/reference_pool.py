"""A pure-Python / NumPy statement of the host KV pool and the residency resolver.

The tests hold ``hisparse_rs.HostKVPool`` and ``hisparse_rs.ResidencyResolver``
to this reference, and ``benches/bench_resolver.py`` measures the Rust resolver
against it. It imports nothing from ``hisparse_rs`` and is written from the
rules, to be read:

Pool (HISPARSE.md §5, vLLM 0.33 HiSparse host pool):
- ``num_blocks`` host blocks of ``block_size`` tokens; a request of ``n``
  tokens holds ceil(n / block_size) blocks;
- allocation is all or nothing; a call that does not fit raises
  :class:`RefExhausted` and changes nothing;
- free blocks are handed out lowest id first;
- the host row of token position ``p`` is
  ``block_table[p // block_size] * block_size + p % block_size``.

Resolver (HISPARSE.md §6; SGLang's ``_expected_lru`` for the order of hits):
- a state is ``slot_rows`` (host row per slot, -1 empty) and ``lru`` (slots,
  oldest first);
- per step and state, the batch rows that name the state are resolved as one:
  their valid entries (0 <= row < num_host_rows), first occurrences in batch
  row then column order, form the union;
- union rows already in a slot are hits; the other union rows (misses), in
  union order, take the oldest slots that hold no hit; each is a plan entry
  (host row, slot) attributed to the batch row where the row first appears;
- new LRU = untaken non-hit slots (old order) + taken slots (miss order) + hit
  slots (old order);
- an entry's slot is where its row now lives; invalid entries, padding (-1)
  and padded batch rows (state -1) give -1; hits = valid entries - misses.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]


class RefExhausted(Exception):
    def __init__(self, needed: int, free: int) -> None:
        super().__init__(f"needed {needed}, free {free}")
        self.needed = needed
        self.free = free


class RefError(Exception):
    """Any other refusal; ``code`` as hisparse_rs names it."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class RefPool:
    num_blocks: int
    block_size: int
    free_heap: list[int] = field(default_factory=list)
    tables: dict[str, list[int]] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.free_heap = list(range(self.num_blocks))

    def blocks_for(self, n: int) -> int:
        return -(-n // self.block_size)

    def _take(self, n: int) -> list[int]:
        if n > len(self.free_heap):
            raise RefExhausted(n, len(self.free_heap))
        return [heapq.heappop(self.free_heap) for _ in range(n)]

    def can_admit(self, n: int) -> bool:
        return self.blocks_for(n) <= len(self.free_heap)

    def admit(self, rid: str, n: int) -> list[int]:
        if rid in self.tables:
            raise RefError("duplicate_request")
        self.tables[rid] = self._take(self.blocks_for(n))
        self.tokens[rid] = n
        return list(self.tables[rid])

    def append(self, rid: str, n: int) -> list[int]:
        if rid not in self.tables:
            raise RefError("unknown_request")
        total = self.tokens[rid] + n
        new = self._take(self.blocks_for(total) - len(self.tables[rid]))
        self.tables[rid] += new
        self.tokens[rid] = total
        return new

    def free(self, rid: str) -> int:
        if rid not in self.tables:
            raise RefError("unknown_request")
        blocks = self.tables.pop(rid)
        del self.tokens[rid]
        for b in blocks:
            heapq.heappush(self.free_heap, b)
        return len(blocks)

    def host_rows(self, rid: str, positions: list[int]) -> list[int]:
        if rid not in self.tables:
            raise RefError("unknown_request")
        out = []
        for p in positions:
            if p == -1:
                out.append(-1)
            elif 0 <= p < self.tokens[rid]:
                out.append(self.tables[rid][p // self.block_size] * self.block_size + p % self.block_size)
            else:
                raise RefError("position_out_of_range")
        return out

    @property
    def blocks_used(self) -> int:
        return self.num_blocks - len(self.free_heap)


@dataclass
class RefState:
    slot_rows: I64
    lru: I64


@dataclass
class RefResult:
    slots: NDArray[np.int32]
    miss_host_rows: I64
    miss_slots: NDArray[np.int32]
    miss_counts: NDArray[np.int32]
    hits: int
    misses: int


class RefResolver:
    def __init__(self, device_buffer_size: int, topk: int, num_host_rows: int) -> None:
        if device_buffer_size > 32768:
            raise RefError("device_buffer_too_large")
        if topk < 1:
            raise RefError("invalid_size")
        if device_buffer_size < topk:
            raise RefError("topk_exceeds_device_buffer")
        self.dbs = device_buffer_size
        self.topk = topk
        self.num_host_rows = num_host_rows
        self.states: dict[int, RefState] = {}

    def new_state(self) -> int:
        i = 0
        while i in self.states:  # the lowest index not in use
            i += 1
        self.reset(i)
        return i

    def reset(self, i: int) -> None:
        self.states[i] = RefState(np.full(self.dbs, -1, np.int64), np.arange(self.dbs, dtype=np.int64))

    def reset_state(self, i: int) -> None:
        if i not in self.states:
            raise RefError("unknown_state")
        self.reset(i)

    def free_state(self, i: int) -> None:
        if i not in self.states:
            raise RefError("unknown_state")
        del self.states[i]

    def _union(self, rows: NDArray[np.int64]) -> tuple[I64, I64]:
        """Distinct valid rows of ``rows`` [k, width] in first-occurrence order,
        and the row index (within ``rows``) of each first occurrence."""
        flat = rows.reshape(-1)
        where = np.flatnonzero((flat >= 0) & (flat < self.num_host_rows))
        values, first = np.unique(flat[where], return_index=True)
        order = np.argsort(first, kind="stable")
        return values[order], where[first[order]] // max(rows.shape[1], 1)

    def resolve(self, topk_rows: NDArray[np.integer], state_index: NDArray[np.integer]) -> RefResult:
        rows = np.asarray(topk_rows, dtype=np.int64)
        states = np.asarray(state_index, dtype=np.int64)
        n_rows, width = rows.shape
        if width > self.topk:
            raise RefError("topk_too_wide")
        # Validate everything before changing anything.
        groups: dict[int, list[int]] = {}
        for r, s in enumerate(states.tolist()):
            if s == -1:
                continue
            if s not in self.states:
                raise RefError("unknown_state")
            groups.setdefault(s, []).append(r)
        unions = {s: self._union(rows[members]) for s, members in groups.items()}
        if any(len(u) > self.dbs for u, _ in unions.values()):
            raise RefError("union_exceeds_device_buffer")

        slots = np.full((n_rows, width), -1, np.int32)
        per_row: list[list[tuple[int, int]]] = [[] for _ in range(n_rows)]
        valid_total = 0
        for s, members in groups.items():
            union, first_row = unions[s]
            st = self.states[s]
            resident = np.isin(st.slot_rows[st.lru], union)
            hit_slots, free_slots = st.lru[resident], st.lru[~resident]
            missing = ~np.isin(union, st.slot_rows[hit_slots])
            taken = free_slots[: int(missing.sum())]
            st.slot_rows[taken] = union[missing]
            st.lru = np.concatenate([free_slots[len(taken) :], taken, hit_slots])
            for row, slot, m in zip(union[missing], taken, first_row[missing], strict=True):
                per_row[members[m]].append((int(row), int(slot)))
            # Every entry's slot: where its row lives now.
            block = rows[members]
            valid = (block >= 0) & (block < self.num_host_rows)
            valid_total += int(valid.sum())
            sorter = np.argsort(st.slot_rows, kind="stable")
            pos = np.searchsorted(st.slot_rows, block[valid], sorter=sorter)
            out = np.full(block.shape, -1, np.int32)
            out[valid] = sorter[pos]
            slots[members] = out
        plan = [entry for entries in per_row for entry in entries]
        misses = len(plan)
        return RefResult(
            slots=slots,
            miss_host_rows=np.array([r for r, _ in plan], np.int64),
            miss_slots=np.array([s for _, s in plan], np.int32),
            miss_counts=np.array([len(e) for e in per_row], np.int32),
            hits=valid_total - misses,
            misses=misses,
        )
