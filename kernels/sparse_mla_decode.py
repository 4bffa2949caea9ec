"""Sparse MLA decode over the hot buffer: PyTorch reference and Triton kernel.

Contract (HISPARSE.md §7; FlashMLA ``flash_mla_with_kvcache`` with ``indices``,
its ``tests/ref.py``):

- ``q``: bfloat16 ``[batch, s_q, h_q, 576]`` (512 absorbed NoPE + 64 RoPE);
- ``kv``: rows of the hot buffer, either bfloat16 ``[num_rows, 576]`` or uint8
  fp8_ds_mla ``[num_rows, 656]``; FlashMLA's paged shape
  ``[num_blocks, block_size, 1, d]`` is accepted too (row id =
  block * block_size + offset). V is the first 512 values of a row;
- ``indices``: int32 ``[batch, s_q, topk]`` row ids; -1 (and any id outside
  ``[0, num_rows)``) is invalid, anywhere in the list; invalid rows are never
  read. With one flat hot buffer for several requests, pass
  ``request_base + slot`` for valid slots and keep -1 as -1;
- ``softmax_scale``: explicit (DeepSeek-V3.2: 192^-0.5 x mscale^2 = 0.1352338;
  GLM-5: 256^-0.5 = 0.0625);
- ``attn_sink``: optional float32 ``[h_q]``; out is multiplied by
  ``1 / (1 + exp(sink - lse))`` (lse itself excludes the sink);
- returns ``out`` bfloat16 ``[batch, s_q, h_q, 512]`` and ``lse`` float32
  ``[batch, h_q, s_q]``, natural log of the sum of exp(score) over valid rows.
  A query with no valid index gets out 0 and lse +inf.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from ._common import (
    D_NOPE,
    D_QK,
    D_ROPE,
    D_V,
    FP8_ROPE_OFFSET,
    FP8_ROW_BYTES,
    FP8_SCALE_OFFSET,
    FP8_TILE,
    INTERPRET,
    cdiv,
    check_launch_device,
    check_tensors,
    require,
)
from ._launch import GpuArch, Launch, device_arch
from ._sparse_mla_decode_triton import _decode_merge_kernel, _decode_split_kernel
from .fp8_ds_mla import fp8_ds_mla_dequantize_reference

__all__ = ["sparse_mla_decode", "sparse_mla_decode_reference"]

_OP = "sparse_mla_decode"


def _rows_view(op: str, kv: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """``kv`` as ``[num_blocks, block_size, d]`` (a view) and whether it is fp8_ds_mla."""
    fp8 = kv.dtype == torch.uint8
    width = FP8_ROW_BYTES if fp8 else D_QK
    require(
        (kv.dtype == torch.bfloat16 or fp8) and kv.dim() in (2, 4) and kv.shape[-1] == width,
        op,
        "kv must be bfloat16 [num_rows, 576] or uint8 fp8_ds_mla [num_rows, 656] "
        "(or FlashMLA's paged [num_blocks, block_size, 1, d])",
        kv,
        "pass the hot-buffer rows; quantize bf16 rows with fp8_ds_mla_quantize",
    )
    if kv.dim() == 4:
        require(kv.shape[2] == 1, op, "paged kv must have one KV head", kv, "MLA has h_kv = 1")
        blocks = kv[:, :, 0, :]
    else:
        blocks = kv.unsqueeze(1)
    require(
        blocks.stride(-1) == 1,
        op,
        "kv rows must be contiguous",
        f"strides {list(kv.stride())}",
        "kv.contiguous()",
    )
    # The fp8_ds_mla scales and RoPE values are read as float32 / bf16 words.
    require(
        not fp8 or all(st % 4 == 0 for st in blocks.stride()[:2]),
        op,
        "fp8_ds_mla rows must start on 4-byte boundaries (row stride a multiple of 4 bytes)",
        f"strides {list(kv.stride())}",
        "kv.contiguous()",
    )
    return blocks, fp8


def _check(
    op: str, q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, attn_sink: torch.Tensor | None
) -> tuple[torch.Tensor, bool]:
    require(
        q.dtype == torch.bfloat16 and q.dim() == 4 and q.shape[-1] == D_QK,
        op,
        "q must be bfloat16 [batch, s_q, h_q, 576] (512 absorbed NoPE + 64 RoPE values)",
        q,
        "q.to(torch.bfloat16), with the NoPE query absorbed into the 512-value latent space",
    )
    batch, s_q, h_q, _ = q.shape
    require(
        indices.dtype == torch.int32 and indices.dim() == 3 and tuple(indices.shape[:2]) == (batch, s_q),
        op,
        f"indices must be int32 [{batch}, {s_q}, topk] (-1 = invalid)",
        indices,
        "indices.to(torch.int32)",
    )
    if attn_sink is not None:
        require(
            attn_sink.dtype == torch.float32 and tuple(attn_sink.shape) == (h_q,),
            op,
            f"attn_sink must be float32 [{h_q}]",
            attn_sink,
            "one sink logit per query head, as float32",
        )
    blocks, fp8 = _rows_view(op, kv)
    for name, t in (("kv", kv), ("indices", indices), ("attn_sink", attn_sink)):
        if t is not None:
            require(
                t.device == q.device,
                op,
                f"{name} must be on {q.device} like q",
                str(t.device),
                f"move {name}",
            )
    return blocks, fp8


_REFERENCE_CHUNK_ROWS = 8192
"""Gathered rows per step of the reference (8192 x 576 float32 = 18.9 MB): bounds
its memory and keeps temporaries small enough for the allocator to reuse."""


def sparse_mla_decode_reference(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    softmax_scale: float,
    attn_sink: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse MLA decode in float32 PyTorch (module docstring gives the contract).

    Per query token: gather its top-k rows (fp8_ds_mla rows dequantized with
    :func:`fp8_ds_mla_dequantize_reference`), zero invalid ones before any
    arithmetic, then softmax(q k^T x scale) v with -inf for invalid entries.
    Query tokens go through in chunks of about 8192 gathered rows.

    Returns:
        ``(out bfloat16 [batch, s_q, h_q, 512], lse float32 [batch, h_q, s_q])``.

    Raises:
        ValueError: wrong dtype, shape or device.
    """
    check_tensors(f"{_OP}_reference", q=q, kv=kv, indices=indices, attn_sink=attn_sink)
    blocks, fp8 = _check(f"{_OP}_reference", q, kv, indices, attn_sink)
    rows = blocks.reshape(-1, blocks.shape[-1])
    batch, s_q, h_q, _ = q.shape
    topk = indices.shape[-1]
    tokens = batch * s_q
    q_t = q.reshape(tokens, h_q, D_QK)
    idx_t = indices.reshape(tokens, topk)
    out = torch.empty((tokens, h_q, D_V), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((tokens, h_q), dtype=torch.float32, device=q.device)
    step = max(1, _REFERENCE_CHUNK_ROWS // max(topk, 1))
    for t0 in range(0, tokens, step):
        chunk = slice(t0, t0 + step)
        out[chunk], lse[chunk] = _attend_reference(
            q_t[chunk], rows, idx_t[chunk], fp8, softmax_scale, attn_sink
        )
    return out.view(batch, s_q, h_q, D_V), lse.view(batch, s_q, h_q).transpose(1, 2).contiguous()


def _attend_reference(
    q: torch.Tensor,
    rows: torch.Tensor,
    idx: torch.Tensor,
    fp8: bool,
    softmax_scale: float,
    attn_sink: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    # q [t, h, 576], idx [t, topk] -> out bf16 [t, h, 512], lse [t, h]
    tokens, topk = idx.shape
    valid = (idx >= 0) & (idx < rows.shape[0])
    if rows.shape[0] == 0:  # nothing is valid; index_select needs a row to point at
        rows = rows.new_zeros((1, rows.shape[1]))
    gathered = rows.index_select(0, torch.where(valid, idx, 0).flatten().long())
    if fp8:
        gathered = fp8_ds_mla_dequantize_reference(gathered)
    k = gathered.float().view(tokens, topk, D_QK)
    k.masked_fill_(~valid.unsqueeze(-1), 0.0)  # NaN in unused rows never reaches the math
    scores = torch.bmm(q.float(), k.transpose(1, 2)).mul_(softmax_scale)  # [t, h, topk]
    scores.masked_fill_(~valid.unsqueeze(1), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # -inf when nothing is valid
    lse.masked_fill_(lse == float("-inf"), float("inf"))  # FlashMLA: lse +inf, out 0
    out = torch.bmm(scores.sub_(lse.unsqueeze(-1)).exp_(), k[..., :D_V])
    if attn_sink is not None:
        out.mul_(torch.sigmoid(lse - attn_sink).unsqueeze(-1))  # 1 / (1 + exp(sink - lse))
    return out.to(torch.bfloat16), lse


@dataclass(frozen=True)
class DecodeTiling:
    """Tile shapes and warps of the split kernel (``_sparse_mla_decode_triton``'s docstring
    says why): ``block_h`` heads per program, ``block_n`` top-k rows per step."""

    block_h: int
    block_n: int
    num_warps: int
    num_stages: int


BLOCK_N = 64
"""Top-k rows per inner step (FlashMLA's sparse decode uses 64-row blocks too)."""
MERGE_BLOCK_H = 16
"""Heads per program of the merge kernel ([16, 512] float32 per program, 4 warps)."""


TRITON_VERSION = tuple(int(p) for p in triton.__version__.split(".")[:2])
"""(major, minor) of the Triton that compiles the kernels: the tiling depends on it once."""


def decode_tiling(h_q: int, arch: GpuArch, fp8: bool = True) -> DecodeTiling:
    """The split kernel's tiling for ``h_q`` heads on ``arch`` (``fp8``: fp8_ds_mla rows).

    16 heads per program on Hopper (sm_90), whose MMAs accumulate in registers:
    the most that compiles without spilling (``aot.py`` checks every production
    shape). 32 on Blackwell (sm_100), whose MMAs accumulate in tensor memory.
    8 heads per rank (GLM-5 at TP8) run in a tile of 16 either way (an MMA's N
    is at least 16 in Triton). Two pipeline stages, except bf16 rows on sm_100
    under Triton before 3.9, whose two-stage ring takes 326-346 KB of shared
    memory there (3.9: 158-178 KB), over the 227 KB a block may have: one stage
    (105 KB with 3.6).
    """
    block_h = 32 if arch.capability >= 100 and h_q > 16 else 16
    stages = 1 if not fp8 and arch.capability >= 100 and TRITON_VERSION < (3, 9) else 2
    return DecodeTiling(block_h=block_h, block_n=BLOCK_N, num_warps=8, num_stages=stages)


def default_num_splits(tokens: int, head_tiles: int, topk: int, device: torch.device) -> int:
    """Top-k splits so that about two programs per streaming multiprocessor run.

    ``tokens = batch x s_q``; at most one split per 64-row step. Under the
    interpreter a 4-"SM" device is assumed (it only changes speed).
    """
    return _num_splits(tokens, head_tiles, topk, device_arch(device))


def _num_splits(tokens: int, head_tiles: int, topk: int, arch: GpuArch) -> int:
    want = cdiv(2 * arch.num_sms, max(1, tokens * head_tiles))
    return max(1, min(want, cdiv(max(topk, 1), BLOCK_N)))


def sparse_mla_decode(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    softmax_scale: float,
    attn_sink: torch.Tensor | None = None,
    *,
    num_splits: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse MLA decode (Triton: split-k online softmax, then an lse merge).

    Same contract as :func:`sparse_mla_decode_reference` (module docstring);
    FlashMLA's tolerances hold between the two (out abs 1e-3 / rel 2.01/128,
    lse abs 1e-6 / rel 8.01/65536). fp8_ds_mla rows are dequantized in the
    kernel. Tensors on CUDA (or CPU under ``TRITON_INTERPRET=1``). Tiling:
    :func:`decode_tiling`.

    Args:
        num_splits: top-k splits per query (default: :func:`default_num_splits`);
            more splits than ``ceil(topk / 64)`` leave some empty, which is allowed.

    Returns:
        ``(out bfloat16 [batch, s_q, h_q, 512], lse float32 [batch, h_q, s_q])``.

    Raises:
        ValueError: wrong dtype, shape or device, or ``num_splits < 1``.
    """
    check_tensors(_OP, q=q, kv=kv, indices=indices, attn_sink=attn_sink)
    blocks, fp8 = _check(_OP, q, kv, indices, attn_sink)
    check_launch_device(_OP, q, kv, indices, *(() if attn_sink is None else (attn_sink,)))
    require(
        num_splits is None or num_splits >= 1,
        _OP,
        "num_splits must be >= 1",
        str(num_splits),
        "leave it None for the default",
    )
    batch, s_q, h_q, _ = q.shape
    out = torch.empty((batch, s_q, h_q, D_V), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, h_q, s_q), dtype=torch.float32, device=q.device)
    if batch * s_q == 0 or h_q == 0:
        return out, lse
    for launch in decode_launches(
        q, blocks, fp8, indices, softmax_scale, attn_sink, out, lse, device_arch(q.device), num_splits
    ):
        launch.run()
    return out, lse


def decode_launches(
    q: torch.Tensor,
    blocks: torch.Tensor,
    fp8: bool,
    indices: torch.Tensor,
    softmax_scale: float,
    attn_sink: torch.Tensor | None,
    out: torch.Tensor,
    lse: torch.Tensor,
    arch: GpuArch,
    num_splits: int | None = None,
) -> list[Launch]:
    """The split and merge launches :func:`sparse_mla_decode` makes (arguments checked,
    at least one query token and head; ``blocks`` is ``kv`` as ``[num_blocks,
    block_size, d]``). Allocates the float32 partials ``[tokens, splits, h_q, 512]``
    and ``[tokens, splits, h_q]``. Called with meta tensors by :func:`decode_aot_launches`."""
    batch, s_q, h_q, _ = q.shape
    topk = indices.shape[-1]
    tokens = batch * s_q
    q3 = q.reshape(tokens, h_q, D_QK)
    if q3.stride(-1) != 1:
        q3 = q3.contiguous()
    idx = indices.reshape(tokens, topk)
    if topk > 0 and idx.stride(-1) != 1:
        idx = idx.contiguous()
    tiling = decode_tiling(h_q, arch, fp8)
    head_tiles = cdiv(h_q, tiling.block_h)
    splits = _num_splits(tokens, head_tiles, topk, arch) if num_splits is None else num_splits
    split_len = cdiv(cdiv(max(topk, 1), splits), tiling.block_n) * tiling.block_n

    if fp8:
        nope = blocks
        rope = blocks.view(torch.bfloat16)[..., FP8_ROPE_OFFSET // 2 :]
        scales = blocks.view(torch.float32)[..., FP8_SCALE_OFFSET // 4 :]
    else:
        nope, rope, scales = blocks, blocks[..., D_NOPE:], blocks
    num_blocks, block_size, _ = blocks.shape

    o_part = torch.empty((tokens, splits, h_q, D_V), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((tokens, splits, h_q), dtype=torch.float32, device=q.device)
    # The head tile varies fastest: the programs that read the same (token, split)
    # rows run side by side, so all but the first find them in L2.
    split = Launch(
        _decode_split_kernel,
        (head_tiles * splits * tokens,),
        (
            q3,
            nope,
            rope,
            scales,
            idx,
            o_part,
            lse_part,
            num_blocks * block_size,
            topk,
            h_q,
            head_tiles,
            splits,
            split_len,
            softmax_scale * math.log2(math.e),
            block_size,
            q3.stride(0),
            q3.stride(1),
            nope.stride(0),
            nope.stride(1),
            rope.stride(0),
            rope.stride(1),
            scales.stride(0),
            scales.stride(1),
            idx.stride(0) if topk > 0 else 0,
            o_part.stride(0),
            o_part.stride(1),
            o_part.stride(2),
            lse_part.stride(0),
            lse_part.stride(1),
        ),
        {
            "FP8": fp8,
            "BLOCK_H": tiling.block_h,
            "BLOCK_N": tiling.block_n,
            "D_NOPE": D_NOPE,
            "D_ROPE": D_ROPE,
            "TILE": FP8_TILE,
            "INTERPRETER": INTERPRET,
        },
        num_warps=tiling.num_warps,
        num_stages=tiling.num_stages,
    )
    out3 = out.view(tokens, h_q, D_V)
    merge = Launch(
        _decode_merge_kernel,
        (tokens, cdiv(h_q, MERGE_BLOCK_H)),
        (
            o_part,
            lse_part,
            lse_part if attn_sink is None else attn_sink,
            out3,
            lse,
            splits,
            h_q,
            s_q,
            o_part.stride(0),
            o_part.stride(1),
            o_part.stride(2),
            lse_part.stride(0),
            lse_part.stride(1),
            out3.stride(0),
            out3.stride(1),
            lse.stride(0),
            lse.stride(1),
        ),
        {"HAS_SINK": attn_sink is not None, "BLOCK_H": MERGE_BLOCK_H, "D_V": D_V, "INTERPRETER": INTERPRET},
        num_warps=4,
        num_stages=3,
    )
    return [split, merge]


def decode_aot_launches(
    arch: GpuArch,
    *,
    batch: int,
    s_q: int,
    h_q: int,
    topk: int,
    kv_cache_dtype: str,
    num_rows: int,
    attn_sink: bool = False,
) -> list[Launch]:
    """What :func:`sparse_mla_decode` launches on ``arch`` for this shape (flat hot-buffer
    rows, ``kv_cache_dtype`` "fp8_ds_mla" or "bfloat16"), built on meta tensors
    (no memory) for the ahead-of-time compile check."""
    meta = torch.device("meta")
    fp8 = kv_cache_dtype == "fp8_ds_mla"
    q = torch.empty((batch, s_q, h_q, D_QK), dtype=torch.bfloat16, device=meta)
    kv = torch.empty(
        (num_rows, FP8_ROW_BYTES if fp8 else D_QK), dtype=torch.uint8 if fp8 else torch.bfloat16, device=meta
    )
    indices = torch.empty((batch, s_q, topk), dtype=torch.int32, device=meta)
    sink = torch.empty((h_q,), dtype=torch.float32, device=meta) if attn_sink else None
    blocks, _ = _rows_view(_OP, kv)
    out = torch.empty((batch, s_q, h_q, D_V), dtype=torch.bfloat16, device=meta)
    lse = torch.empty((batch, h_q, s_q), dtype=torch.float32, device=meta)
    return decode_launches(q, blocks, fp8, indices, 0.1352338, sink, out, lse, arch)
