"""Stateful property test: HostKVPool + ResidencyResolver against reference_pool.py.

Hypothesis drives admit / append / free on the pool and new_state / resolve /
reset / free on the resolver, with top-k rows drawn from the admitted
requests' host rows (plus padding, invalid and out-of-range entries, MTP rows
sharing a state, padded batch rows). After every step Rust and the reference
agree exactly, and the invariants hold: no slot holds two rows, no row sits in
two slots of one state, hits + misses = valid entries, the plan covers exactly
the misses, pool blocks are conserved, failed calls change nothing.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from hisparse_rs import HostKVPool, HostPoolExhausted, PoolError, ResidencyResolver
from reference_pool import RefError, RefExhausted, RefPool, RefResolver

BLOCK = 4
NUM_BLOCKS = 24
ROWS = NUM_BLOCKS * BLOCK
DBS = 12
TOPK = 6


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pool = HostKVPool(NUM_BLOCKS, BLOCK, 656, 2)
        self.ref_pool = RefPool(NUM_BLOCKS, BLOCK)
        self.resolver = ResidencyResolver(DBS, TOPK, ROWS, 656, metrics=self.pool.metrics)
        self.ref = RefResolver(DBS, TOPK, ROWS)
        self.next_id = 0
        self.hits = 0
        self.misses = 0

    @initialize()
    def two_states(self) -> None:
        for _ in range(2):
            assert self.resolver.new_state() == self.ref.new_state()

    # --- pool ---

    @rule(tokens=st.integers(0, 40))
    def admit(self, tokens: int) -> None:
        rid = f"req-{self.next_id}"
        self.next_id += 1
        try:
            want = self.ref_pool.admit(rid, tokens)
        except RefExhausted as e:
            before = self.pool.stats()
            try:
                self.pool.admit(rid, tokens)
            except HostPoolExhausted as got:
                assert (got.needed, got.free) == (e.needed, e.free)
            else:
                raise AssertionError("Rust admitted what the reference refused")
            assert self.pool.stats() == before and rid not in self.pool
            return
        assert self.pool.admit(rid, tokens).tolist() == want

    @precondition(lambda self: self.ref_pool.tables)
    @rule(data=st.data(), tokens=st.integers(0, 12))
    def append(self, data: st.DataObject, tokens: int) -> None:
        rid = data.draw(st.sampled_from(sorted(self.ref_pool.tables)))
        try:
            want = self.ref_pool.append(rid, tokens)
        except RefExhausted as e:
            table = self.pool.block_table(rid).tolist()
            try:
                self.pool.append(rid, tokens)
            except HostPoolExhausted as got:
                assert (got.needed, got.free) == (e.needed, e.free)
            else:
                raise AssertionError("Rust appended what the reference refused")
            assert self.pool.block_table(rid).tolist() == table
            return
        assert self.pool.append(rid, tokens).tolist() == want

    @precondition(lambda self: self.ref_pool.tables)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.ref_pool.tables)))
        assert self.pool.free(rid) == self.ref_pool.free(rid)

    @rule()
    def free_unknown(self) -> None:
        try:
            self.pool.free("never-admitted")
        except PoolError as e:
            assert e.code == "unknown_request"
        else:
            raise AssertionError("freed an unknown request")

    # --- resolver ---

    @rule()
    def new_state(self) -> None:
        assert self.resolver.new_state() == self.ref.new_state()

    @precondition(lambda self: self.ref.states)
    @rule(data=st.data(), reset=st.booleans())
    def reset_or_free_state(self, data: st.DataObject, reset: bool) -> None:
        s = data.draw(st.sampled_from(sorted(self.ref.states)))
        if reset:
            self.resolver.reset_state(s)
            self.ref.reset_state(s)
        else:
            self.resolver.free_state(s)
            self.ref.free_state(s)

    @precondition(lambda self: self.ref.states)
    @rule(data=st.data())
    def resolve(self, data: st.DataObject) -> None:
        # Rows from the admitted requests (what the indexer would pick), plus noise.
        live = [r for rid in sorted(self.ref_pool.tables) for r in self._rows(rid)]
        entry = st.one_of(
            st.sampled_from(live) if live else st.just(-1),
            st.just(-1),
            st.integers(-3, ROWS + 3),
        )
        width = data.draw(st.integers(0, TOPK))
        n = data.draw(st.integers(0, 5))
        states = [data.draw(st.sampled_from([-1, *sorted(self.ref.states)])) for _ in range(n)]
        # Rows within one top-k are unique in practice; duplicates are allowed here too.
        topk = np.array(
            [data.draw(st.lists(entry, min_size=width, max_size=width)) for _ in range(n)], np.int64
        ).reshape(n, width)
        state_index = np.array(states, np.int64)
        before = self._snapshot()
        try:
            want = self.ref.resolve(topk, state_index)
        except RefError as e:
            try:
                self.resolver.resolve(topk, state_index)
            except PoolError as got:
                assert got.code == e.code
            else:
                raise AssertionError(f"Rust resolved what the reference refused ({e.code})")
            assert self._snapshot() == before
            return
        got = self.resolver.resolve(topk.astype(np.int32), state_index.astype(np.int32))
        np.testing.assert_array_equal(got.slots, want.slots)
        np.testing.assert_array_equal(got.miss_host_rows, want.miss_host_rows)
        np.testing.assert_array_equal(got.miss_slots, want.miss_slots)
        np.testing.assert_array_equal(got.miss_counts, want.miss_counts)
        assert (got.hits, got.misses) == (want.hits, want.misses)
        # hits + misses = valid entries of live batch rows.
        live_rows = state_index >= 0
        valid = (topk >= 0) & (topk < ROWS) & live_rows[:, None]
        assert got.hits + got.misses == int(valid.sum())
        assert (got.slots[~valid] == -1).all() and (got.slots[valid] >= 0).all()
        # The plan covers exactly the misses: distinct rows not resident before, per state.
        for s in set(states) - {-1}:
            rows_of_s = np.unique(topk[state_index == s][valid[state_index == s]])
            was = set(before[0][s][0])
            expect = sorted(set(rows_of_s.tolist()) - was)
            offsets = got.miss_offsets
            mine = [
                int(h)
                for r in np.flatnonzero(state_index == s)
                for h in got.miss_host_rows[offsets[r] : offsets[r + 1]]
            ]
            assert sorted(mine) == expect
        self.hits += got.hits
        self.misses += got.misses

    def _rows(self, rid: str) -> list[int]:
        return self.ref_pool.host_rows(rid, list(range(self.ref_pool.tokens[rid])))

    def _snapshot(self) -> tuple[dict[int, tuple[list[int], list[int]]], dict[str, int | float]]:
        states = {
            s: (self.resolver.slot_rows(s).tolist(), self.resolver.lru_order(s).tolist())
            for s in self.ref.states
        }
        return states, self.pool.metrics.to_dict()

    # --- invariants, after every step ---

    @invariant()
    def pool_matches_and_conserves_blocks(self) -> None:
        stats = self.pool.stats()
        assert stats.blocks_used == self.ref_pool.blocks_used
        assert stats.num_requests == len(self.ref_pool.tables)
        assert self.pool.request_ids() == sorted(self.ref_pool.tables)
        held = [b for rid in self.ref_pool.tables for b in self.pool.block_table(rid).tolist()]
        assert len(held) == len(set(held)) == stats.blocks_used
        assert stats.blocks_used + self.pool.free_blocks == NUM_BLOCKS
        for rid, table in self.ref_pool.tables.items():
            assert self.pool.block_table(rid).tolist() == table
            rows = self.pool.host_rows(rid, np.arange(self.ref_pool.tokens[rid]))
            assert rows.tolist() == self._rows(rid)

    @invariant()
    def states_match_and_are_well_formed(self) -> None:
        assert self.resolver.num_states == len(self.ref.states)
        for s, ref_state in self.ref.states.items():
            rows = self.resolver.slot_rows(s)
            lru = self.resolver.lru_order(s)
            np.testing.assert_array_equal(rows, ref_state.slot_rows)
            np.testing.assert_array_equal(lru, ref_state.lru)
            held = rows[rows >= 0]
            assert len(np.unique(held)) == len(held)  # no row in two slots
            assert sorted(lru.tolist()) == list(range(DBS))  # each slot once in the LRU

    @invariant()
    def metrics_add_up(self) -> None:
        m = self.pool.metrics.to_dict()
        assert (m["hisparse_cache_hits"], m["hisparse_cache_misses"]) == (self.hits, self.misses)
        assert m["hisparse_host_to_device_bytes"] == self.misses * 656
        assert m["hisparse_host_cache_usage_perc"] == self.ref_pool.blocks_used / NUM_BLOCKS


TestPoolAndResolver = PoolMachine.TestCase
