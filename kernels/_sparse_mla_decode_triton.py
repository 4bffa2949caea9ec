"""Triton bodies of the sparse MLA decode (launcher and reference in sparse_mla_decode.py).

Stage 1 (``_decode_split_kernel``): one program per (query token, head tile,
top-k split) runs an online softmax over its slice of the top-k rows and
writes a partial output (normalised) and its lse. Stage 2
(``_decode_merge_kernel``) merges the splits by lse, applies the attention
sink and writes bf16 out and float32 lse. MLA shares K and V: the NoPE part
of each loaded row is the key's first 512 values and the whole value, so a
row is read once.
``INTERPRETER``: see ``_triton_util`` (exact stand-ins for two casts Triton
3.9's interpreter gets wrong).
"""

import triton
import triton.language as tl

from ._triton_util import dot, e4m3_to_f32, to_bf16


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
    NUM_TILES: tl.constexpr,
    INTERPRETER: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1)
    sp = tl.program_id(2)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < h_q
    dn = tl.arange(0, D_NOPE)
    dr = tl.arange(0, D_ROPE)

    q_row = q_ptr + tok * stride_q_tok + heads[:, None] * stride_q_h
    q_nope = tl.load(q_row + dn[None, :], mask=h_ok[:, None], other=0.0)
    q_rope = tl.load(q_row + D_NOPE + dr[None, :], mask=h_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D_NOPE], tl.float32)

    start = sp * split_len
    end = tl.minimum(start + split_len, topk)
    for n0 in range(start, end, BLOCK_N):
        offs = n0 + tl.arange(0, BLOCK_N)
        idx = tl.load(idx_ptr + tok * stride_idx_tok + offs, mask=offs < end, other=-1)
        # -1 (or any id outside the rows) is invalid; such a row is never loaded,
        # so NaN or garbage in unused rows cannot reach the math (0 * NaN = NaN).
        valid = (idx >= 0) & (idx < num_rows)
        row = tl.where(valid, idx, 0).to(tl.int64)
        blk = row // block_size
        off = row % block_size
        ld = valid[:, None]
        nope_row = nope_ptr + blk * stride_nope_blk + off * stride_nope_row
        if FP8:
            codes = tl.load(nope_row[:, None] + dn[None, :], mask=ld, other=0)
            scale_row = scale_ptr + blk * stride_scale_blk + off * stride_scale_row
            scales = tl.load(scale_row[:, None] + tl.arange(0, NUM_TILES)[None, :], mask=ld, other=0.0)
            tiles = tl.reshape(e4m3_to_f32(codes), (BLOCK_N, NUM_TILES, TILE)) * scales[:, :, None]
            # Rounded to bf16 like the reference dequant (exact for power-of-two scales).
            k_nope = to_bf16(tl.reshape(tiles, (BLOCK_N, D_NOPE)), INTERPRETER)
        else:
            k_nope = tl.load(nope_row[:, None] + dn[None, :], mask=ld, other=0.0)
        rope_row = rope_ptr + blk * stride_rope_blk + off * stride_rope_row
        k_rope = tl.load(rope_row[:, None] + dr[None, :], mask=ld, other=0.0)

        s = dot(q_nope, tl.trans(k_nope), INTERPRETER) + dot(q_rope, tl.trans(k_rope), INTERPRETER)
        s = tl.where(valid[None, :], s * qk_scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        # All-invalid so far: subtract 0 instead of -inf (-inf - -inf = NaN).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + dot(to_bf16(p, INTERPRETER), k_nope, INTERPRETER)
        m_i = m_new

    has = l_i > 0.0
    o = acc / tl.where(has, l_i, 1.0)[:, None]
    lse = tl.where(has, (m_i + tl.log2(tl.where(has, l_i, 1.0))) * 0.6931471805599453, float("-inf"))
    o_base = o_ptr + tok * stride_o_tok + sp * stride_o_split
    tl.store(o_base + heads[:, None] * stride_o_h + dn[None, :], o, mask=h_ok[:, None])
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
