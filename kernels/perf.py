"""Work and traffic of one sparse MLA decode step, for benchmarks (pure arithmetic).

Per query token and head, attention over ``topk`` rows costs ``2 x topk x 576``
FLOPs for q k^T and ``2 x topk x 512`` for p v (MLA shares K and V). Memory
counts each query token's top-k rows once (no reuse across heads or MTP
tokens: an upper bound on what must come from HBM), plus q in and out in
bf16. At 128 heads and top-k 2048 with fp8_ds_mla rows this gives the
figures of HISPARSE.md §7: 570 MFLOP and 1.62 MB per query token.
"""

from __future__ import annotations

from ._common import D_QK, D_V


def decode_flops(batch: int, s_q: int, h_q: int, topk: int) -> int:
    """FLOPs of one decode call: ``2 x batch x s_q x h_q x topk x (576 + 512)``."""
    return 2 * batch * s_q * h_q * topk * (D_QK + D_V)


def decode_bytes(batch: int, s_q: int, h_q: int, topk: int, row_bytes: int) -> int:
    """Bytes moved by one decode call: top-k rows per query token, q (bf16) in, out (bf16).

    ``batch x s_q x (topk x row_bytes + h_q x (576 + 512) x 2)``; row_bytes is
    656 (fp8_ds_mla) or 1152 (bf16).
    """
    return batch * s_q * (topk * row_bytes + h_q * (D_QK + D_V) * 2)


def gather_bytes(rows: int, row_bytes: int) -> int:
    """Bytes read from the host pool by a gather of ``rows`` rows (each is also written once)."""
    return rows * row_bytes
