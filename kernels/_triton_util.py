"""@triton.jit helpers shared by the kernels, with workarounds for Triton 3.9's interpreter.

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
