"""Helpers for the kernel tests: the device, FlashMLA's closeness check, decode inputs.

Imported after conftest.py, so ``TRITON_INTERPRET`` is already decided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from hisparse_rs import kernels

DEVICE = torch.device("cpu" if kernels.INTERPRET else "cuda")
"""Where kernels and references run: CPU under the interpreter, else the GPU."""

OUT_TOL = {"abs_tol": 1e-3, "rel_tol": 2.01 / 128, "cos_diff_tol": 5e-6}
"""FlashMLA tests/test_flash_mla_sparse_decoding.py tolerances for out."""
LSE_TOL = {"abs_tol": 1e-6, "rel_tol": 8.01 / 65536, "cos_diff_tol": 1e-7}
"""... and for lse (cos_diff_tol: its check_is_allclose default)."""


def assert_close_flashmla(
    name: str, ans: torch.Tensor, ref: torch.Tensor, abs_tol: float, rel_tol: float, cos_diff_tol: float
) -> None:
    """FlashMLA's ``check_is_allclose`` rule, restated.

    +inf, -inf and NaN must sit at the same positions; every other element must
    be within ``abs_tol`` or within ``rel_tol`` (relative to |ref| + 1e-6); and
    the cosine difference of the whole tensors must be at most ``cos_diff_tol``.
    """
    assert ans.shape == ref.shape, f"{name}: shape {ans.shape} != {ref.shape}"
    a = ans.detach().double().cpu().clone()
    r = ref.detach().double().cpu().clone()
    for kind, sel in (("+inf", torch.isposinf), ("-inf", torch.isneginf), ("nan", torch.isnan)):
        ma, mr = sel(a), sel(r)
        assert torch.equal(ma, mr), f"{name}: {kind} at {int(ma.sum())} places in ans, {int(mr.sum())} in ref"
        a[ma] = 0.0
        r[mr] = 0.0
    abs_err = (a - r).abs()
    rel_err = abs_err / (r.abs() + 1e-6)
    bad = (abs_err >= abs_tol) & (rel_err >= rel_tol)
    assert not bad.any(), (
        f"{name}: {int(bad.sum())} of {bad.numel()} elements off; worst abs {float(abs_err.max()):.3g}, "
        f"worst rel {float(rel_err[abs_err >= abs_tol].max()) if (abs_err >= abs_tol).any() else 0:.3g}"
    )
    denom = float((a * a + r * r).sum())
    cos_diff = 0.0 if denom == 0 else 1 - 2 * float((a * r).sum()) / denom
    assert abs(cos_diff) <= cos_diff_tol, f"{name}: cosine diff {cos_diff:.3g} > {cos_diff_tol}"


@dataclass
class DecodeCase:
    q: torch.Tensor
    kv: torch.Tensor  # bf16 [num_rows, 576] or uint8 [num_rows, 656]
    indices: torch.Tensor
    scale: float
    sink: torch.Tensor | None


def make_decode_case(
    *,
    batch: int,
    s_q: int,
    h_q: int,
    topk: int,
    num_rows: int,
    fp8: bool,
    sink: bool,
    invalid: str = "scattered",
    seed: int = 0,
) -> DecodeCase:
    """FlashMLA's test inputs (HISPARSE.md §7): q ~ randn clamped to [-1, 1],
    kv ~ randn / 10 (fp8: quantized), scale 576^-0.55, distinct row ids per
    query, rows no valid index points at filled with NaN.

    ``invalid``: "none", "scattered" (about a quarter -1, anywhere), "all", or
    "tail" (the last third -1 plus out-of-range ids mixed in).
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, s_q, h_q, 576, generator=g).clamp(-1, 1).to(torch.bfloat16)
    kv = (torch.randn(num_rows, 576, generator=g) / 10).to(torch.bfloat16)
    assert topk <= num_rows
    idx = torch.stack([torch.randperm(num_rows, generator=g)[:topk] for _ in range(batch * s_q)])
    idx = idx.view(batch, s_q, topk).to(torch.int32)
    if invalid == "scattered":
        idx[torch.rand(idx.shape, generator=g) < 0.25] = -1
    elif invalid == "all":
        idx[:] = -1
    elif invalid == "tail":
        cut = topk - topk // 3
        idx[..., cut:] = -1
        idx[..., cut::2] = num_rows + 7  # out of range counts as invalid too
    used = torch.zeros(num_rows, dtype=torch.bool)
    used[idx[(idx >= 0) & (idx < num_rows)].long()] = True
    rows = kernels.fp8_ds_mla_quantize_reference(kv) if fp8 else kv
    rows[~used] = 0xFF if fp8 else float("nan")  # every byte 0xFF: NaN codes, scales and RoPE
    sink_t = torch.randn(h_q, generator=g) if sink else None
    return DecodeCase(
        q=q.to(DEVICE),
        kv=rows.to(DEVICE),
        indices=idx.to(DEVICE),
        scale=576**-0.55,
        sink=None if sink_t is None else sink_t.to(DEVICE),
    )


def dense_decode_float64(case: DecodeCase) -> tuple[torch.Tensor, torch.Tensor]:
    """An independent statement of the contract: per query and head, softmax over
    the listed valid rows in float64, one row at a time (no masking tricks)."""
    rows = case.kv.cpu()
    if rows.dtype == torch.uint8:
        rows = kernels.fp8_ds_mla_dequantize_reference(rows)
    rows64 = rows.double()
    q = case.q.cpu().double()
    batch, s_q, h_q, _ = q.shape
    out = torch.zeros(batch, s_q, h_q, 512, dtype=torch.float64)
    lse = torch.full((batch, h_q, s_q), math.inf, dtype=torch.float64)
    for b in range(batch):
        for s in range(s_q):
            ids = [int(i) for i in case.indices[b, s].cpu() if 0 <= int(i) < rows.shape[0]]
            if not ids:
                continue
            k = rows64[ids]  # [n, 576]
            for h in range(h_q):
                logits = (k @ q[b, s, h]) * case.scale
                m = float(logits.max())
                w = torch.exp(logits - m)
                total = float(w.sum())
                lse_bsh = m + math.log(total)
                o = (w / total) @ k[:, :512]
                if case.sink is not None:
                    o = o / (1 + math.exp(float(case.sink[h]) - lse_bsh))
                out[b, s, h] = o
                lse[b, h, s] = lse_bsh
    return out, lse
