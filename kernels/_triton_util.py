"""@triton.jit helpers shared by the kernels, with workarounds for Triton 3.9's interpreter.

``e4m3_to_f32`` decodes float8_e4m3fn codes with integer operations: exact,
the same on every GPU generation (Triton's native ``float8e4nv`` type needs
sm_89 or newer) and under the interpreter. ``e4m3_decode`` takes the hardware
conversion when compiled (the decode kernel, which dequantizes every row it
reads) and ``e4m3_to_f32`` under the interpreter.

Under ``TRITON_INTERPRET=1`` (the CPU path the tests use) two casts are wrong:
``tl.dot`` on bfloat16 operands returns garbage, and float32 -> bfloat16
truncates instead of rounding to nearest even. Kernels pass ``INTERPRETER``
(``_common.INTERPRET``) so the interpreter takes an exact equivalent: widened
float32 operands (bf16 x bf16 products are exact in float32) and an explicit
round-to-nearest-even. Compiled kernels use the native instructions.
"""

import triton
import triton.language as tl


@triton.jit
def round_bf16(x):
    # float32 -> the nearest bfloat16 value (ties to even), still as float32.
    bits = x.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536  # -65536 == 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def to_bf16(x, INTERPRETER: tl.constexpr):
    if INTERPRETER:
        return round_bf16(x).to(tl.bfloat16)  # exact: the truncating cast has nothing to drop
    else:
        return x.to(tl.bfloat16)


@triton.jit
def dot(a, b, INTERPRETER: tl.constexpr):
    # a @ b with float32 accumulation; bf16 operands.
    if INTERPRETER:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def e4m3_to_f32(code):
    # float8_e4m3fn code (uint8) -> float32, exact. Normal codes (exponent field
    # 1..15): shift the 7 magnitude bits into place under float32's exponent and
    # rebias 7 -> 127. Subnormal codes (exponent field 0): mantissa x 2^-9.
    # The NaN code 0x7F / 0xFF decodes as +-480; quantize never writes it. The
    # sign goes in as a bit, so the code 0x80 gives -0.0 (Triton 3.6 negates a
    # float as 0 - x, which gives +0.0).
    c = code.to(tl.int32)
    mag = c & 0x7F
    normal = ((mag << 20) + (120 << 23)).to(tl.float32, bitcast=True)
    value = tl.where(mag < 8, mag.to(tl.float32) * 0.001953125, normal)
    return (value.to(tl.int32, bitcast=True) | ((c & 0x80) << 24)).to(tl.float32, bitcast=True)


@triton.jit
def e4m3_decode(code, INTERPRETER: tl.constexpr):
    # float8_e4m3fn code (uint8) -> float32: the hardware conversion when compiled
    # (sm_89 and newer: two codes per cvt instead of a dozen integer operations per
    # code), the exact integer stand-in under the interpreter. They differ only on
    # the NaN code, which quantize never writes (hardware: NaN, as torch reads it).
    if INTERPRETER:
        return e4m3_to_f32(code)
    else:
        return code.to(tl.float8e4nv, bitcast=True).to(tl.float32)
