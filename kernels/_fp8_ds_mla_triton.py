"""Triton bodies of the fp8_ds_mla quantize / dequantize kernels (launchers in fp8_ds_mla.py).

The float32 -> e4m3 conversion is done with integer bit operations instead of
``.to(tl.float8e4nv)``: Triton 3.9's interpreter mis-rounds when rounding carries
into the exponent (7.987 becomes 4.0, not 8.0), and the explicit form is the same
round-to-nearest-even on every backend, so kernel and torch agree bit for bit.
"""

import triton
import triton.language as tl

from ._triton_util import e4m3_to_f32, to_bf16


@triton.jit
def _pow2_ceil(x):
    # Smallest power of two >= x for positive finite float32 x: round the
    # mantissa up into the exponent, then clear it.
    bits = x.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFFFF) & -8388608  # -8388608 == 0xFF800000 as int32
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _pow2_reciprocal(p):
    # 1 / p for p = 2^k (exact): negate the biased exponent (254 - e).
    bits = p.to(tl.int32, bitcast=True)
    return (0x7F000000 - bits).to(tl.float32, bitcast=True)


@triton.jit
def _f32_to_e4m3_bits(v):
    # Round-to-nearest-even float32 -> float8_e4m3fn code for |v| <= 448.
    bits = v.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    a_bits = bits & 0x7FFFFFFF
    # Normal e4m3 (|v| >= 2^-6): drop 20 mantissa bits with RNE; a carry moves
    # into the exponent on its own; rebias 127 -> 7 (120 << 3 == 960).
    normal = ((a_bits + 0x7FFFF + ((a_bits >> 20) & 1)) >> 20) - 960
    # Subnormal e4m3 (steps of 2^-9): adding 2^14 (ulp 2^-9) makes the float
    # adder round; the mantissa then holds the code (0..8, 8 == 2^-6).
    a = a_bits.to(tl.float32, bitcast=True)
    sub = (a + 16384.0).to(tl.int32, bitcast=True) - 0x46800000
    code = tl.where(a_bits < 0x3C800000, sub, normal)  # 0x3C800000 == 2^-6
    return (code | sign).to(tl.uint8)


@triton.jit
def _quantize_kernel(
    src_ptr,  # bf16 [n, 576] (row stride src_stride values)
    codes_ptr,  # uint8 view of the output rows
    scales_ptr,  # float32 view of the same rows, already offset to the scales
    rope_ptr,  # bfloat16 view of the same rows, already offset to the RoPE part
    src_stride,
    out_stride_u8,
    out_stride_f32,
    out_stride_bf16,
    E4M3_MAX: tl.constexpr,
    SCALE_FLOOR: tl.constexpr,
    TILE: tl.constexpr,
    NUM_TILES: tl.constexpr,
    D_NOPE: tl.constexpr,
    D_ROPE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    t = tl.arange(0, NUM_TILES)
    c = tl.arange(0, TILE)
    cols = t[:, None] * TILE + c[None, :]  # [4, 128]
    x = tl.load(src_ptr + row * src_stride + cols).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)  # [4]
    scale = _pow2_ceil(tl.maximum(amax / E4M3_MAX, SCALE_FLOOR))
    inv = _pow2_reciprocal(scale)
    codes = _f32_to_e4m3_bits(x * inv[:, None])
    tl.store(codes_ptr + row * out_stride_u8 + cols, codes)
    tl.store(scales_ptr + row * out_stride_f32 + t, scale)
    r = tl.arange(0, D_ROPE)
    rope = tl.load(src_ptr + row * src_stride + D_NOPE + r)
    tl.store(rope_ptr + row * out_stride_bf16 + r, rope)


@triton.jit
def _dequantize_kernel(
    codes_ptr,  # uint8 view of the packed rows
    scales_ptr,  # float32 view, already offset to the scales
    rope_ptr,  # bfloat16 view, already offset to the RoPE part
    dst_ptr,  # bf16 [n, 576]
    in_stride_u8,
    in_stride_f32,
    in_stride_bf16,
    dst_stride,
    TILE: tl.constexpr,
    NUM_TILES: tl.constexpr,
    D_NOPE: tl.constexpr,
    D_ROPE: tl.constexpr,
    INTERPRETER: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    t = tl.arange(0, NUM_TILES)
    c = tl.arange(0, TILE)
    cols = t[:, None] * TILE + c[None, :]
    codes = tl.load(codes_ptr + row * in_stride_u8 + cols)
    scale = tl.load(scales_ptr + row * in_stride_f32 + t)
    x = e4m3_to_f32(codes) * scale[:, None]
    # Exact for power-of-two scales; rounded (RNE) for other writers' scales.
    tl.store(dst_ptr + row * dst_stride + cols, to_bf16(x, INTERPRETER))
    r = tl.arange(0, D_ROPE)
    rope = tl.load(rope_ptr + row * in_stride_bf16 + r)
    tl.store(dst_ptr + row * dst_stride + D_NOPE + r, rope)
