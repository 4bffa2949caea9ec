"""The decode step's index maps (map_topk_positions, finish_decode_indices)
against a plain statement of DecodeRuntime's layout."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hisparse_rs import kernels as K
from kernel_cases import DEVICE

BS, DBS, REGION_ROWS = 4, 16, 16 + 2 * 4


def expected(
    pos: torch.Tensor, tables: torch.Tensor, region: list[int], tokens: list[int], tail: list[int]
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The statement: (host rows, tail rows, [tail entries, invalid, 1 + last bad row])."""
    host = torch.full(pos.shape, -1, dtype=torch.int64)
    idx = torch.full(pos.shape, -1, dtype=torch.int32)
    n_tail = n_bad = last_bad = 0
    for r in range(pos.shape[0]):
        for c in range(pos.shape[1]):
            p = int(pos[r, c])
            if region[r] < 0:
                continue
            if p < -1 or p >= tokens[r]:
                n_bad += 1
                last_bad = r + 1
            elif p >= tail[r]:
                idx[r, c] = region[r] * REGION_ROWS + DBS + (p // BS % 2) * BS + p % BS
                n_tail += 1
            elif p >= 0:
                host[r, c] = int(tables[region[r], p // BS]) * BS + p % BS
    return host, idx, [n_tail, n_bad, last_bad]


@settings(max_examples=40)
@given(rows=st.integers(1, 5), width=st.integers(1, 30), data=st.data())
def test_map_topk_positions_matches_the_statement(rows: int, width: int, data: st.DataObject) -> None:
    tables = torch.randint(0, 50, (3, 10), dtype=torch.int32)
    region = [data.draw(st.integers(-1, 2)) for _ in range(rows)]
    tokens = [data.draw(st.integers(1, 40)) for _ in range(rows)]
    tail = [max((n - 1) // BS - 1, 0) * BS for n in tokens]
    pos = torch.tensor(
        [[data.draw(st.integers(-3, 42)) for _ in range(width)] for _ in range(rows)],
        dtype=data.draw(st.sampled_from([torch.int32, torch.int64])),
    )
    host = torch.empty(rows, width, dtype=torch.int64, device=DEVICE)
    idx = torch.empty(rows, width, dtype=torch.int32, device=DEVICE)
    counters = torch.zeros(3, dtype=torch.int64, device=DEVICE)
    K.map_topk_positions(
        pos.to(DEVICE),
        tables.to(DEVICE),
        torch.tensor(region, device=DEVICE),
        torch.tensor(tokens, device=DEVICE),
        torch.tensor(tail, device=DEVICE),
        block_size=BS,
        region_rows=REGION_ROWS,
        device_buffer_size=DBS,
        host_rows=host,
        indices=idx,
        counters=counters,
    )
    want_host, want_idx, want_counts = expected(pos, tables, region, tokens, tail)
    assert torch.equal(host.cpu(), want_host) and torch.equal(idx.cpu(), want_idx)
    assert counters.tolist() == want_counts


def test_finish_decode_indices_puts_slots_at_their_state_base() -> None:
    slots = torch.tensor([[3, -1, 0], [-1, 2, -1]], dtype=torch.int32, device=DEVICE)
    idx = torch.tensor([[-1, 40, -1], [-1, -1, 41]], dtype=torch.int32, device=DEVICE)
    K.finish_decode_indices(slots, idx, torch.tensor([0, 24], device=DEVICE))
    assert idx.tolist() == [[3, 40, 0], [-1, 26, 41]]
