"""Triton body of the residency resolver (launcher, contract and memory in resolver.py).

One program per batch row; the first row of each state (its *leader*) resolves
the union of all the state's rows, the other rows' programs exit at once. A
leader works in passes over global memory, separated by CTA barriers:

0. clear its union hash table (its own workspace row);
1. insert the union's valid host rows (compare-and-swap, linear probing) and
   the first union position of each (atomic min); stop early once more than
   DBS distinct rows are seen (``union_exceeds_device_buffer``: the state is
   left unchanged);
2. walk the LRU order: each slot whose row is in the table is a hit (the
   table entry learns its slot);
3. walk the LRU order again: non-hit slots in LRU order take the misses in
   union order; the new LRU order (untouched | loaded | hits) is written;
4. walk the union: each first occurrence of a miss gets its rank, its plan
   entry (in its batch row, in column order) and its slot's new row;
5. walk the union: every entry's slot.

Everything a program reads after another lane wrote it goes through L2
(``cache_modifier=".cg"``): the table is written by atomics, which L1 does not see.
The union table is deterministic as a set (which entry a row lands in may vary
with the atomics' order, but no output depends on it).
"""

import triton
import triton.language as tl

# Flags in status[2] (bit values; resolver.py documents them).
FLAG_UNION_EXCEEDS = tl.constexpr(1)
FLAG_UNKNOWN_STATE = tl.constexpr(2)
FLAG_TOO_MANY_ROWS = tl.constexpr(4)
EMPTY = tl.constexpr(-1)  # a free table key (host rows are >= 0)
INT32_MAX = tl.constexpr(2147483647)


@triton.jit
def _hash(key, TABLE_BITS: tl.constexpr):
    # Fibonacci hashing, as the Rust resolver's fib_hash: int32 product (wraps),
    # top TABLE_BITS bits of its uint32 pattern.
    prod = key * -1640531527  # 0x9E3779B9 as int32
    return (prod.to(tl.uint32, bitcast=True) >> (32 - TABLE_BITS)).to(tl.int32)


@triton.jit
def _insert(keys, dummy, key, active, lanes, TABLE_BITS: tl.constexpr):
    # Put each active key in the table (once per distinct key); returns the
    # entry of each lane and whether this lane created it. Inactive lanes
    # compare-and-swap a private dummy word with a value it never holds.
    mask = (1 << TABLE_BITS) - 1
    h = _hash(key, TABLE_BITS)
    created = tl.zeros_like(key) != 0
    pending = active
    while tl.max(pending.to(tl.int32), 0) > 0:
        addr = tl.where(pending, keys + h, dummy + lanes)
        cmp = tl.where(pending, EMPTY, EMPTY - 1)
        old = tl.atomic_cas(addr, cmp, tl.where(pending, key, EMPTY - 1), sem="relaxed", scope="cta")
        made = pending & (old == EMPTY)
        created = created | made
        pending = pending & ~(made | (old == key))
        h = tl.where(pending, (h + 1) & mask, h)
    return h, created


@triton.jit
def _find(keys, key, active, TABLE_BITS: tl.constexpr):
    # The entry holding each active key, -1 where it is not in the table.
    mask = (1 << TABLE_BITS) - 1
    h = _hash(key, TABLE_BITS)
    found = tl.zeros_like(key) - 1
    pending = active
    while tl.max(pending.to(tl.int32), 0) > 0:
        k = tl.load(keys + h, mask=pending, other=EMPTY, cache_modifier=".cg")
        found = tl.where(pending & (k == key), h, found)
        pending = pending & (k != key) & (k != EMPTY)
        h = (h + 1) & mask
    return found


@triton.jit
def _clear_rows(state_ptr, slots_ptr, counts_ptr, s, first_row, rows, width, BLOCK_U: tl.constexpr):
    # Rows first_row.. with state s (all of them when s is not a state) resolve
    # to nothing: slots -1, no plan.
    lanes = tl.arange(0, BLOCK_U)
    for r in range(first_row, rows):
        if tl.load(state_ptr + r).to(tl.int64) == s:
            out = slots_ptr + r * width  # rows x width < 2^31
            for c0 in range(0, width, BLOCK_U):
                c = c0 + lanes
                tl.store(out + c, tl.full([BLOCK_U], -1, tl.int32), mask=c < width)
            tl.store(counts_ptr + r, 0)


@triton.jit
def _resolve_residency_kernel(
    topk_ptr,  # int32/int64 [rows, width] host rows (row stride topk_stride)
    state_ptr,  # int32/int64 [rows] state per row, -1 padded
    live_ptr,  # int8 [num_states] nonzero: a live state (read only with CHECK_LIVE)
    slot_rows_ptr,  # int32 [num_states, DBS] host row per slot, -1 empty (updated)
    lru_ptr,  # int16 [num_states, DBS] slots, oldest first (updated)
    slots_ptr,  # int32 [rows, width] out; holds table entries between passes
    plan_rows_ptr,  # int64 [rows, width] out: row r's plan in [0, counts[r])
    plan_slots_ptr,  # int32 [rows, width] out
    counts_ptr,  # int32 [rows] out
    status_ptr,  # int64 [4] accumulated: hits, misses, flags, 1 + highest overflowing state
    keys_ptr,  # int32 [rows, TABLE] workspace: union table keys
    first_ptr,  # int32 [rows, TABLE] first union position of each key
    hit_ptr,  # int32 [rows, TABLE] slot of a resident key, -1 a miss
    rank_ptr,  # int32 [rows, TABLE] miss number of a missing key
    dummy_ptr,  # int32 [rows, BLOCK_U] compare-and-swap target of idle lanes
    flag_ptr,  # int8 [rows, DBS] hit flag per LRU position
    miss_slot_ptr,  # int32 [rows, DBS] slot taken by miss k
    new_lru_ptr,  # int16 [rows, DBS] the new LRU order
    members_ptr,  # int32 [rows, MAX_MEMBERS] the state's rows, in row order
    rows,
    width,
    topk_stride,
    num_states,
    num_host_rows: tl.int64,  # <= 2^31: one compiled type for every pool size
    DBS: tl.constexpr,
    TABLE_BITS: tl.constexpr,
    MAX_MEMBERS: tl.constexpr,
    BLOCK_U: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_R: tl.constexpr,
    CHECK_LIVE: tl.constexpr,
):
    TABLE: tl.constexpr = 1 << TABLE_BITS
    pid = tl.program_id(0)
    s = tl.load(state_ptr + pid).to(tl.int64)
    dead = (s < 0) | (s >= num_states)
    if CHECK_LIVE:
        # A freed or never-created id is as unknown as one out of range.
        dead = dead | (tl.load(live_ptr + tl.where(dead, 0, s)) == 0)
    if dead:
        if s != -1:
            tl.atomic_or(status_ptr + 2, FLAG_UNKNOWN_STATE, sem="relaxed")
        _clear_rows(state_ptr, slots_ptr, counts_ptr, s, pid, pid + 1, width, BLOCK_U)
        return

    # The state's rows: a leader (no earlier row shares its state) lists them.
    lanes_r = tl.arange(0, BLOCK_R)
    members = members_ptr + pid.to(tl.int64) * MAX_MEMBERS
    earlier = 0
    num_members = 0
    for r0 in range(0, rows, BLOCK_R):
        idx = r0 + lanes_r
        same = (tl.load(state_ptr + idx, mask=idx < rows, other=-1).to(tl.int64) == s) & (idx < rows)
        earlier += tl.sum((same & (idx < pid)).to(tl.int32), 0)
        later = (same & (idx >= pid)).to(tl.int32)
        pos = num_members + tl.cumsum(later, 0) - later
        tl.store(members + pos, idx, mask=(later != 0) & (pos < MAX_MEMBERS))
        num_members += tl.sum(later, 0)
    if earlier > 0:
        return
    if num_members > MAX_MEMBERS:
        tl.atomic_or(status_ptr + 2, FLAG_TOO_MANY_ROWS, sem="relaxed")
        _clear_rows(state_ptr, slots_ptr, counts_ptr, s, pid, rows, width, BLOCK_U)
        return

    ws = pid.to(tl.int64) * TABLE
    keys = keys_ptr + ws
    first = first_ptr + ws
    hit = hit_ptr + ws
    rank = rank_ptr + ws
    ws_slots = pid.to(tl.int64) * DBS
    flags = flag_ptr + ws_slots
    miss_slot = miss_slot_ptr + ws_slots
    new_lru = new_lru_ptr + ws_slots
    st_rows = slot_rows_ptr + s * DBS
    st_lru = lru_ptr + s * DBS
    lanes_s = tl.arange(0, BLOCK_S)
    lanes = tl.arange(0, BLOCK_U)

    # 0. An empty table.
    for t0 in range(0, TABLE, BLOCK_S):
        t = t0 + lanes_s
        tl.store(keys + t, tl.full([BLOCK_S], EMPTY, tl.int32), mask=t < TABLE)
        tl.store(first + t, tl.full([BLOCK_S], INT32_MAX, tl.int32), mask=t < TABLE)
        tl.store(hit + t, tl.full([BLOCK_S], -1, tl.int32), mask=t < TABLE)
    tl.debug_barrier()

    # 1. The union: distinct valid rows, each with its first position
    # (member k, column c) -> k * width + c. Entries park their table entry in slots.
    distinct = 0
    valid_entries = 0
    for k in range(0, num_members):
        r = tl.load(members + k).to(tl.int64)
        src = topk_ptr + r * topk_stride
        out = slots_ptr + r * width
        for c0 in range(0, width, BLOCK_U):
            if distinct <= DBS:
                c = c0 + lanes
                inr = c < width
                v = tl.load(src + c, mask=inr, other=-1).to(tl.int64)
                valid = inr & (v >= 0) & (v < num_host_rows)
                h, made = _insert(
                    keys, dummy_ptr + pid.to(tl.int64) * BLOCK_U, v.to(tl.int32), valid, lanes, TABLE_BITS
                )
                tl.atomic_min(first + h, k * width + c, mask=valid, sem="relaxed", scope="cta")
                tl.store(out + c, tl.where(valid, h, -1), mask=inr)
                distinct += tl.sum(made.to(tl.int32), 0)
                valid_entries += tl.sum(valid.to(tl.int32), 0)
    tl.debug_barrier()
    if distinct > DBS:
        # The Rust resolver fails the call and changes nothing; here this state
        # is left unchanged, its rows resolve to nothing, the flag says why.
        tl.atomic_or(status_ptr + 2, FLAG_UNION_EXCEEDS, sem="relaxed")
        tl.atomic_max(status_ptr + 3, s + 1, sem="relaxed")
        _clear_rows(state_ptr, slots_ptr, counts_ptr, s, pid, rows, width, BLOCK_U)
        return

    # 2. Hits: slots whose row is in the union.
    num_hits = 0
    for i0 in range(0, DBS, BLOCK_S):
        i = i0 + lanes_s
        ok = i < DBS
        slot = tl.load(st_lru + i, mask=ok, other=0).to(tl.int32)
        row = tl.load(st_rows + slot, mask=ok, other=-1)
        e = _find(keys, row, ok & (row >= 0), TABLE_BITS)
        resident = e >= 0
        tl.store(hit + e, slot, mask=resident)
        tl.store(flags + i, resident.to(tl.int8), mask=ok)
        num_hits += tl.sum(resident.to(tl.int32), 0)
    tl.debug_barrier()

    # 3. Misses take the oldest non-hit slots; new LRU order: untouched | loaded | hits.
    num_misses = distinct - num_hits
    num_nonhit = DBS - num_hits
    nonhit_before = 0
    hits_before = 0
    for i0 in range(0, DBS, BLOCK_S):
        i = i0 + lanes_s
        ok = i < DBS
        f = tl.load(flags + i, mask=ok, other=0, cache_modifier=".cg").to(tl.int32)
        slot = tl.load(st_lru + i, mask=ok, other=0)
        nh = tl.where(ok, 1 - f, 0)
        kk = nonhit_before + tl.cumsum(nh, 0) - nh
        jj = hits_before + tl.cumsum(f, 0) - f
        pos = tl.where(
            f != 0, num_nonhit + jj, tl.where(kk < num_misses, num_nonhit - num_misses + kk, kk - num_misses)
        )
        tl.store(new_lru + pos, slot, mask=ok)
        tl.store(miss_slot + kk, slot.to(tl.int32), mask=(nh != 0) & (kk < num_misses))
        nonhit_before += tl.sum(nh, 0)
        hits_before += tl.sum(f, 0)
    tl.debug_barrier()

    # 4. First occurrences of misses, in union order: rank, plan entry, new slot row.
    misses_before = 0
    for k in range(0, num_members):
        r = tl.load(members + k).to(tl.int64)
        src = topk_ptr + r * topk_stride
        out = slots_ptr + r * width
        in_row = 0
        for c0 in range(0, width, BLOCK_U):
            c = c0 + lanes
            inr = c < width
            e = tl.load(out + c, mask=inr, other=-1, cache_modifier=".cg")
            valid = e >= 0
            fst = tl.load(first + e, mask=valid, other=-1, cache_modifier=".cg")
            hv = tl.load(hit + e, mask=valid, other=0, cache_modifier=".cg")
            fm = valid & (fst == k * width + c) & (hv < 0)
            fi = fm.to(tl.int32)
            before = tl.cumsum(fi, 0) - fi
            rk = misses_before + before
            slot = tl.load(miss_slot + rk, mask=fm, other=0, cache_modifier=".cg")
            v = tl.load(src + c, mask=fm, other=0).to(tl.int64)
            tl.store(rank + e, rk, mask=fm)
            plan_at = r * width + in_row + before
            tl.store(plan_rows_ptr + plan_at, v, mask=fm)
            tl.store(plan_slots_ptr + plan_at, slot, mask=fm)
            tl.store(st_rows + slot, v.to(tl.int32), mask=fm)
            n = tl.sum(fi, 0)
            misses_before += n
            in_row += n
        tl.store(counts_ptr + r, in_row)
    for i0 in range(0, DBS, BLOCK_S):
        i = i0 + lanes_s
        ok = i < DBS
        tl.store(st_lru + i, tl.load(new_lru + i, mask=ok, other=0, cache_modifier=".cg"), mask=ok)
    tl.debug_barrier()

    # 5. Every entry's slot.
    for k in range(0, num_members):
        r = tl.load(members + k).to(tl.int64)
        out = slots_ptr + r * width
        for c0 in range(0, width, BLOCK_U):
            c = c0 + lanes
            inr = c < width
            e = tl.load(out + c, mask=inr, other=-1, cache_modifier=".cg")
            valid = e >= 0
            hv = tl.load(hit + e, mask=valid, other=-1, cache_modifier=".cg")
            missed = valid & (hv < 0)
            rk = tl.load(rank + e, mask=missed, other=0, cache_modifier=".cg")
            ms = tl.load(miss_slot + rk, mask=missed, other=-1, cache_modifier=".cg")
            tl.store(out + c, tl.where(valid, tl.where(hv >= 0, hv, ms), -1), mask=inr)
    tl.atomic_add(status_ptr + 0, tl.cast(valid_entries - num_misses, tl.int64), sem="relaxed")
    tl.atomic_add(status_ptr + 1, tl.cast(num_misses, tl.int64), sem="relaxed")
