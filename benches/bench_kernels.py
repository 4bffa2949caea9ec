"""CPU speed of the PyTorch reference decode step for a DeepSeek-V3.2-shaped layer.

Run after ``bash scripts/test.sh`` (the venv has the kernels extra)::

    python benches/bench_kernels.py [--batches 4 16 64] [--runs 5]

The Triton kernels under the interpreter are for correctness only; this times
``sparse_mla_decode_reference``, the path a CPU-only runtime uses: 128 heads,
s_q 1, top-k 2048, softmax scale 0.1352338, each request's top-k drawn from its
own 4096-row hot buffer (the default device_buffer_size), fp8_ds_mla and bf16
rows. Baseline, measured in the same run: the same float32 attention math on
rows already gathered and dequantized (``softmax(q k^T) v`` with batched
matmuls), so the ratio is what the gather, fp8 dequantization and -1 masking
add. Prints the Markdown table kept in benches/README.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from hisparse_rs import kernels as K
from hisparse_rs.kernels.perf import decode_flops

H_Q, TOPK, DBS = 128, 2048, 4096
SCALE = 0.1352338  # DeepSeek-V3.2: 192^-0.5 x mscale^2 (HISPARSE.md §7)


def median_ms(fn: Callable[[], object], runs: int) -> float:
    """Median milliseconds per call after two warm-up calls (thread pool, first-touch
    page faults). Calls run back to back: interleaving the baseline's large
    allocations with the reference's makes glibc hand out fresh pages each time."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def layer(batch: int, fp8: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(batch)
    q = torch.randn(batch, 1, H_Q, 576, generator=g).clamp(-1, 1).to(torch.bfloat16)
    rows = (torch.randn(batch * DBS, 576, generator=g) / 10).to(torch.bfloat16)
    if fp8:
        rows = K.fp8_ds_mla_quantize_reference(rows)
    slots = torch.stack([torch.randperm(DBS, generator=g)[:TOPK] + r * DBS for r in range(batch)])
    return q, rows, slots.view(batch, 1, TOPK).to(torch.int32)


def baseline(q: torch.Tensor, rows: torch.Tensor, indices: torch.Tensor) -> Callable[[], object]:
    """softmax(q k^T x scale) v in float32 on pre-gathered, pre-dequantized rows."""
    gathered = rows[indices.view(-1).long()]
    if rows.dtype == torch.uint8:
        gathered = K.fp8_ds_mla_dequantize_reference(gathered)
    batch = q.shape[0]
    k = gathered.float().view(batch, TOPK, 576)
    qf = q.float().view(batch, H_Q, 576)

    def run() -> torch.Tensor:
        p = torch.softmax(torch.bmm(qf, k.transpose(1, 2)) * SCALE, dim=-1)
        return torch.bmm(p, k[..., :512]).to(torch.bfloat16)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print("| rows | batch | reference per step | GFLOP/s | baseline (same run) | ratio |")
    print("|---|---|---|---|---|---|")
    for fp8 in (True, False):
        for batch in args.batches:
            q, rows, indices = layer(batch, fp8)
            reference = partial(K.sparse_mla_decode_reference, q, rows, indices, SCALE)
            ref_ms = median_ms(reference, args.runs)
            base_ms = median_ms(baseline(q, rows, indices), args.runs)
            gflops = decode_flops(batch, 1, H_Q, TOPK) / (ref_ms * 1e-3) / 1e9
            name = "fp8_ds_mla" if fp8 else "bf16"
            ratio = ref_ms / base_ms
            print(f"| {name} | {batch} | {ref_ms:.1f} ms | {gflops:.1f} | {base_ms:.1f} ms | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
