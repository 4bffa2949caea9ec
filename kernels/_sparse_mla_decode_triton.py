"""Triton bodies of the sparse MLA decode (launcher, tiling and reference in sparse_mla_decode.py).

Stage 1 (``_decode_split_kernel``): one program per (head tile, top-k split,
query token), on a 1-D grid in that order (head tile fastest), runs an online
softmax over its slice of the top-k rows and writes a partial output
(normalised) and its lse. Stage 2
(``_decode_merge_kernel``) merges the splits by lse, applies the attention
sink and writes bf16 out and float32 lse.

Tiling of stage 1 (``decode_tiling`` in sparse_mla_decode.py picks the sizes;
``aot.py`` checks that no production shape spills):

- **Heads on the MMA's N side.** Each 64-row step computes ``S^T = K Q^T``
  (``[BLOCK_N rows, BLOCK_H heads]``) and ``O^T += V^T P^T``
  (``[512, BLOCK_H]``): the 512-wide latent dimension is the MMA's M side and
  the few heads of a tile its N side (Hopper's MMA needs M >= 64 per
  warpgroup; Triton's ``tl.dot`` needs N >= 16, so 8 heads per rank run
  half-empty in a 16-head tile). The float32 accumulator takes ``512 x
  BLOCK_H / (32 x num_warps)`` registers per thread: 32 at 16 heads and 8
  warps, which leaves room under Hopper's 255 (at most 239 used with
  fp8_ds_mla rows, 188 with bf16). FlashMLA's 64-head tile, a [64, 512] accumulator over two
  warpgroups, needs 128 per thread for the accumulator alone and spills in
  Triton, which cannot give the math warps more registers than the rest (as
  FlashMLA's ``setmaxnreg`` does). On Blackwell the accumulator lives in
  tensor memory and 32-head tiles fit (at most 202 / 176 registers).
- **V in four 128-value tiles** (the fp8_ds_mla scale tiles): each is loaded
  (and dequantized) once, used for its share of ``S^T`` and kept in shared
  memory for ``O^T``; four ``[128, BLOCK_H]`` accumulators. MLA shares K and
  V: the NoPE part of a row is the key's first 512 values and the whole
  value. The query tile (``[576, BLOCK_H]`` bf16) stays in shared memory.
  Dequantizing a whole 512-value row block at once is what spilled.
- **What it costs**: a K row is read once per (query token, head tile)
  program: 8 programs at 128 heads on Hopper (4 on Blackwell). They run side
  by side (the head tile varies fastest in the grid), so the first read comes
  from HBM and the others normally from L2; each program repeats the fp8
  dequantization of the rows. With 8 warps on a 64-row step both warpgroups
  compute the same ``S^T`` (Triton gives a chained dot's warps to M), which
  doubles the ``K Q^T`` MMAs: 1.53x the useful tensor work in all. Triton
  3.9 prefetches the indices and scales one step ahead but loads the
  fp8_ds_mla codes and RoPE values at the step that uses them (bf16 rows go
  through a two-stage shared-memory ring); the GPU benchmark measures what
  that costs.

``INTERPRETER``: see ``_triton_util`` (exact stand-ins for casts Triton 3.9's
interpreter gets wrong, and the integer e4m3 decoding instead of the hardware one).
"""

import triton
import triton.language as tl

from ._triton_util import dot, e4m3_decode, to_bf16


@triton.jit
def _nope_tile(
    nope_row,
    scale_row,
    valid,
    t: tl.constexpr,
    FP8: tl.constexpr,
    TILE: tl.constexpr,
    INTERPRETER: tl.constexpr,
):
    # NoPE values t*128 .. t*128+127 of BLOCK_N rows as bf16 [BLOCK_N, TILE]; invalid rows are 0
    # (never loaded: NaN or garbage in unused rows cannot reach the math, 0 * NaN = NaN).
    cols = t * TILE + tl.arange(0, TILE)
    if FP8:
        codes = tl.load(nope_row[:, None] + cols[None, :], mask=valid[:, None], other=0)
        scale = tl.load(scale_row + t, mask=valid, other=0.0)
        values = e4m3_decode(codes, INTERPRETER)
        # Rounded to bf16 like the reference dequant (exact for power-of-two scales).
        return to_bf16(values * scale[:, None], INTERPRETER)
    else:
        return tl.load(nope_row[:, None] + cols[None, :], mask=valid[:, None], other=0.0)


@triton.jit
def _decode_split_kernel(
    q_ptr,  # bf16 [tokens, h_q, 576]
    nope_ptr,  # bf16 rows, or uint8 fp8_ds_mla rows (codes at byte 0)
    rope_ptr,  # bf16 view offset to the RoPE part of row 0
    scale_ptr,  # float32 view offset to the scales of row 0 (FP8 only)
    idx_ptr,  # int32 [tokens, topk]
    o_ptr,  # float32 [tokens, splits, h_q, 512]
    lse_ptr,  # float32 [tokens, splits, h_q], natural log
    num_rows,
    topk,
    h_q,
    num_head_tiles,
    num_splits,
    split_len,
    qk_scale_log2,  # softmax_scale * log2(e)
    block_size,  # rows per KV block (1 for a flat row tensor)
    stride_q_tok,
    stride_q_h,
    stride_nope_blk,
    stride_nope_row,
    stride_rope_blk,
    stride_rope_row,
    stride_scale_blk,
    stride_scale_row,
    stride_idx_tok,
    stride_o_tok,
    stride_o_split,
    stride_o_h,
    stride_lse_tok,
    stride_lse_split,
    FP8: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D_NOPE: tl.constexpr,
    D_ROPE: tl.constexpr,
    TILE: tl.constexpr,
    INTERPRETER: tl.constexpr,
):
    tl.static_assert(D_NOPE == 4 * TILE)
    # One grid axis (2^31 programs; the other two stop at 65535): head tile fastest.
    pid = tl.program_id(0)
    hb = pid % num_head_tiles
    sp = (pid // num_head_tiles) % num_splits
    tok = (pid // num_head_tiles // num_splits).to(tl.int64)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < h_q
    dt = tl.arange(0, TILE)
    dr = tl.arange(0, D_ROPE)

    # Q^T tiles [TILE, BLOCK_H] (the MMA's B operand, kept in shared memory); padded heads are 0.
    q_col = q_ptr + tok * stride_q_tok + heads[None, :] * stride_q_h
    q0 = tl.load(q_col + (0 * TILE + dt)[:, None], mask=h_ok[None, :], other=0.0)
    q1 = tl.load(q_col + (1 * TILE + dt)[:, None], mask=h_ok[None, :], other=0.0)
    q2 = tl.load(q_col + (2 * TILE + dt)[:, None], mask=h_ok[None, :], other=0.0)
    q3 = tl.load(q_col + (3 * TILE + dt)[:, None], mask=h_ok[None, :], other=0.0)
    q_rope = tl.load(q_col + (D_NOPE + dr)[:, None], mask=h_ok[None, :], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    o0 = tl.zeros([TILE, BLOCK_H], tl.float32)  # O^T, 128 values at a time
    o1 = tl.zeros([TILE, BLOCK_H], tl.float32)
    o2 = tl.zeros([TILE, BLOCK_H], tl.float32)
    o3 = tl.zeros([TILE, BLOCK_H], tl.float32)

    start = sp * split_len
    end = tl.minimum(start + split_len, topk)
    for n0 in range(start, end, BLOCK_N):
        offs = n0 + tl.arange(0, BLOCK_N)
        idx = tl.load(idx_ptr + tok * stride_idx_tok + offs, mask=offs < end, other=-1)
        # -1 (or any id outside the rows) is invalid; such a row is never loaded.
        valid = (idx >= 0) & (idx < num_rows)
        row = tl.where(valid, idx, 0).to(tl.int64)
        blk = row // block_size
        off = row % block_size
        nope_row = nope_ptr + blk * stride_nope_blk + off * stride_nope_row
        scale_row = scale_ptr + blk * stride_scale_blk + off * stride_scale_row
        rope_row = rope_ptr + blk * stride_rope_blk + off * stride_rope_row

        k_rope = tl.load(rope_row[:, None] + dr[None, :], mask=valid[:, None], other=0.0)
        s = dot(k_rope, q_rope, INTERPRETER)  # S^T [BLOCK_N, BLOCK_H]
        k0 = _nope_tile(nope_row, scale_row, valid, 0, FP8, TILE, INTERPRETER)
        s += dot(k0, q0, INTERPRETER)
        k1 = _nope_tile(nope_row, scale_row, valid, 1, FP8, TILE, INTERPRETER)
        s += dot(k1, q1, INTERPRETER)
        k2 = _nope_tile(nope_row, scale_row, valid, 2, FP8, TILE, INTERPRETER)
        s += dot(k2, q2, INTERPRETER)
        k3 = _nope_tile(nope_row, scale_row, valid, 3, FP8, TILE, INTERPRETER)
        s += dot(k3, q3, INTERPRETER)

        s = tl.where(valid[:, None], s * qk_scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        # All-invalid so far: subtract 0 instead of -inf (-inf - -inf = NaN).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[None, :])
        l_i = l_i * alpha + tl.sum(p, axis=0)
        p = to_bf16(p, INTERPRETER)
        o0 = o0 * alpha[None, :] + dot(tl.trans(k0), p, INTERPRETER)
        o1 = o1 * alpha[None, :] + dot(tl.trans(k1), p, INTERPRETER)
        o2 = o2 * alpha[None, :] + dot(tl.trans(k2), p, INTERPRETER)
        o3 = o3 * alpha[None, :] + dot(tl.trans(k3), p, INTERPRETER)
        m_i = m_new

    has = l_i > 0.0
    inv_l = 1.0 / tl.where(has, l_i, 1.0)
    lse = tl.where(has, (m_i + tl.log2(tl.where(has, l_i, 1.0))) * 0.6931471805599453, float("-inf"))
    o_col = o_ptr + tok * stride_o_tok + sp * stride_o_split + heads[None, :] * stride_o_h
    tl.store(o_col + (0 * TILE + dt)[:, None], o0 * inv_l[None, :], mask=h_ok[None, :])
    tl.store(o_col + (1 * TILE + dt)[:, None], o1 * inv_l[None, :], mask=h_ok[None, :])
    tl.store(o_col + (2 * TILE + dt)[:, None], o2 * inv_l[None, :], mask=h_ok[None, :])
    tl.store(o_col + (3 * TILE + dt)[:, None], o3 * inv_l[None, :], mask=h_ok[None, :])
    tl.store(lse_ptr + tok * stride_lse_tok + sp * stride_lse_split + heads, lse, mask=h_ok)


@triton.jit
def _decode_merge_kernel(
    o_part_ptr,  # float32 [tokens, splits, h_q, 512]
    lse_part_ptr,  # float32 [tokens, splits, h_q]
    sink_ptr,  # float32 [h_q] (unused without HAS_SINK)
    out_ptr,  # bf16 [tokens, h_q, 512]
    lse_out_ptr,  # float32 [batch, h_q, s_q]
    num_splits,
    h_q,
    s_q,
    stride_o_tok,
    stride_o_split,
    stride_o_h,
    stride_lse_tok,
    stride_lse_split,
    stride_out_tok,
    stride_out_h,
    stride_lo_b,
    stride_lo_h,
    HAS_SINK: tl.constexpr,
    BLOCK_H: tl.constexpr,
    D_V: tl.constexpr,
    INTERPRETER: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < h_q
    dv = tl.arange(0, D_V)

    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    for sp in range(0, num_splits):
        lse = tl.load(
            lse_part_ptr + tok * stride_lse_tok + sp * stride_lse_split + heads,
            mask=h_ok,
            other=float("-inf"),
        )
        m = tl.maximum(m, lse)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    acc = tl.zeros([BLOCK_H, D_V], tl.float32)
    denom = tl.zeros([BLOCK_H], tl.float32)
    for sp in range(0, num_splits):
        lse = tl.load(
            lse_part_ptr + tok * stride_lse_tok + sp * stride_lse_split + heads,
            mask=h_ok,
            other=float("-inf"),
        )
        w = tl.exp(lse - m_safe)  # 0 for an empty split
        o = tl.load(
            o_part_ptr + tok * stride_o_tok + sp * stride_o_split + heads[:, None] * stride_o_h + dv[None, :],
            mask=h_ok[:, None] & (w > 0.0)[:, None],
            other=0.0,
        )
        acc += w[:, None] * o
        denom += w

    has = denom > 0.0
    # No valid index: out 0, lse +inf (FlashMLA's "lonely query" rule).
    lse_final = tl.where(has, m_safe + tl.log(tl.where(has, denom, 1.0)), float("inf"))
    out = acc / tl.where(has, denom, 1.0)[:, None]
    if HAS_SINK:
        sink = tl.load(sink_ptr + heads, mask=h_ok, other=0.0)
        out = out * (1.0 / (1.0 + tl.exp(sink - lse_final)))[:, None]
    tl.store(
        out_ptr + tok * stride_out_tok + heads[:, None] * stride_out_h + dv[None, :],
        to_bf16(out, INTERPRETER),
        mask=h_ok[:, None],
    )
    b = tok // s_q
    s = tok % s_q
    tl.store(lse_out_ptr + b * stride_lo_b + heads * stride_lo_h + s, lse_final, mask=h_ok)
