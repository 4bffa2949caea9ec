"""Work and traffic of one sparse MLA decode step, for benchmarks (pure arithmetic).

Per query token and head, attention over ``topk`` rows costs ``2 x topk x 576``
FLOPs for q k^T and ``2 x topk x 512`` for p v (MLA shares K and V). Memory
counts each query token's top-k rows once (no reuse across heads or MTP
tokens: an upper bound on what must come from HBM), plus q in and out in
bf16. At 128 heads and top-k 2048 with fp8_ds_mla rows this gives the
figures of HISPARSE.md §7: 570 MFLOP and 1.62 MB per query token.
"""

from __future__ import annotations

from dataclasses import dataclass

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


# What the H200 can do, as the device pages of this workplace give it (leads, not
# readings of ours): HBM3e 4.8 TB/s by the datasheet and about 4.3 TB/s measured
# there as a device-to-device copy (bytes read + written); dense bf16 matrix
# products about 790 TFLOP/s measured there on random data (769-798). FlashMLA's
# own figure for its sparse fp8 decode: 410 TFLOP/s on an H800 (its README), in
# the compute-bound 128-head configuration; the H800 has the H100's tensor cores.
H200_HBM_BYTES_PER_S = 4.8e12
H200_COPY_BYTES_PER_S = 4.3e12
H200_BF16_FLOPS_PER_S = 790e12
FLASHMLA_H800_FLOPS_PER_S = 410e12
FLASHMLA_HEADS = (64, 128)
"""Head counts FlashMLA's sparse fp8 decode takes on sm_90; vLLM 0.33 pads to the next one
(``flashmla_sparse.py`` ``_compute_fp8_decode_padded_heads``: 64 if h_q <= 64 else 128)."""


def flashmla_heads(h_q: int) -> int:
    """The head count FlashMLA runs for ``h_q`` heads (vLLM pads q with zero heads)."""
    return FLASHMLA_HEADS[0] if h_q <= FLASHMLA_HEADS[0] else FLASHMLA_HEADS[1]


def decode_mma_flops(batch: int, s_q: int, h_q: int, topk: int, block_h: int) -> int:
    """Tensor-core FLOPs our split kernel issues: heads padded to ``block_h`` tiles, and
    ``K Q^T`` computed by both warpgroups of a program (``_sparse_mla_decode_triton``'s
    docstring), so ``2 x 576 + 512`` per row and head against the useful ``576 + 512``."""
    padded = -(-h_q // block_h) * block_h
    return 2 * batch * s_q * padded * topk * (2 * D_QK + D_V)


@dataclass(frozen=True)
class DecodePrediction:
    """What the H200's peaks imply for one decode call (seconds, bytes, FLOPs).

    ``memory_s``: :func:`decode_bytes` at 4.8 TB/s; ``mma_s``: the FLOPs our kernel
    issues (:func:`decode_mma_flops`) at 790 TFLOP/s; ``floor_s``: the larger, below
    which our kernel cannot run; ``flashmla_s``: FlashMLA at its published 410 TFLOP/s
    on the heads it runs (:func:`flashmla_heads`), or the memory time if larger.
    """

    bytes: int
    flops: int
    mma_flops: int
    memory_s: float
    mma_s: float
    flashmla_s: float

    @property
    def floor_s(self) -> float:
        return max(self.memory_s, self.mma_s)

    @property
    def bound(self) -> str:
        """Which sets our floor: "memory" or "tensor cores"."""
        return "memory" if self.memory_s >= self.mma_s else "tensor cores"


def decode_prediction(
    batch: int, s_q: int, h_q: int, topk: int, row_bytes: int, block_h: int
) -> DecodePrediction:
    """The :class:`DecodePrediction` of a decode call; ``block_h`` is the split kernel's
    heads per program (``decode_tiling``: 16 on sm_90)."""
    nbytes = decode_bytes(batch, s_q, h_q, topk, row_bytes)
    theirs = decode_flops(batch, s_q, flashmla_heads(h_q), topk) / FLASHMLA_H800_FLOPS_PER_S
    mma = decode_mma_flops(batch, s_q, h_q, topk, block_h)
    memory_s = nbytes / H200_HBM_BYTES_PER_S
    return DecodePrediction(
        bytes=nbytes,
        flops=decode_flops(batch, s_q, h_q, topk),
        mma_flops=mma,
        memory_s=memory_s,
        mma_s=mma / H200_BF16_FLOPS_PER_S,
        flashmla_s=max(theirs, memory_s),
    )
