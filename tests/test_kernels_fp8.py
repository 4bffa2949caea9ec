"""fp8_ds_mla quantize / dequantize: the layout and scale rule, round-trip
properties of the reference, and the Triton kernels bit for bit against it."""

from __future__ import annotations

import itertools
import math
import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hisparse_rs import kernels as K
from hisparse_rs.kernels.fp8_ds_mla import packed_views, tile_scales_reference
from kernel_cases import DEVICE


def e4m3_value(code: int) -> float:
    """float8_e4m3fn code -> value, from the format's definition (4 exponent bits,
    bias 7, 3 mantissa bits, no infinities, 0x7F / 0xFF NaN)."""
    sign = -1.0 if code & 0x80 else 1.0
    exp, man = (code >> 3) & 0xF, code & 0x7
    if exp == 0xF and man == 0x7:
        return math.nan
    if exp == 0:
        return sign * man * 2.0**-9
    return sign * (1 + man / 8) * 2.0 ** (exp - 7)


def random_rows(n: int, seed: int) -> torch.Tensor:
    """bf16 [n, 576] whose tiles span many magnitudes (1e-8 .. 1e6), with zeros."""
    g = torch.Generator().manual_seed(seed)
    mag = torch.logspace(-8, 6, 14)[torch.randint(0, 14, (n, 9), generator=g)]
    x = torch.randn(n, 9, 64, generator=g) * mag.unsqueeze(-1)
    x = x.view(n, 576)
    x[0] = 0.0
    return x.to(torch.bfloat16)


def rounding_rows() -> torch.Tensor:
    """Rows whose tile scale is 1 (amax 448) holding every e4m3 value, every midpoint
    between neighbours (ties must go to even) and points just off each midpoint."""
    pos = sorted({e4m3_value(c) for c in range(0x7F)})  # 0 .. 448
    vals = list(pos)
    for a, b in itertools.pairwise(pos):
        mid = (a + b) / 2
        vals += [mid, math.nextafter(mid, 0.0), math.nextafter(mid, math.inf)]
    vals = [v for v in vals if v <= 448.0]
    vals += [-v for v in vals]
    t = torch.tensor(vals, dtype=torch.float32).to(torch.bfloat16)  # bf16 holds midpoints exactly
    tiles = [t[i : i + 127] for i in range(0, len(t), 127)]
    rows = []
    for i in range(0, len(tiles), 4):
        row = torch.zeros(576, dtype=torch.bfloat16)
        for j, tile in enumerate(tiles[i : i + 4]):
            row[j * 128] = 448.0  # fixes amax: scale = 1
            row[j * 128 + 1 : j * 128 + 1 + len(tile)] = tile
        row[512:] = torch.linspace(-3, 3, 64)
        rows.append(row)
    return torch.stack(rows)


bf16_finite = st.floats(min_value=-3.0e38, max_value=3.0e38, allow_nan=False).map(
    lambda v: float(torch.tensor(v).to(torch.bfloat16))
)


@st.composite
def rows_strategy(draw: st.DrawFn, max_rows: int = 1) -> torch.Tensor:
    """bf16 [n, 576]: per 64 values a magnitude from 1e-30 to 1e30 (so tiles mix
    scales, underflow to e4m3 subnormals and zero), plus a few drawn bf16 values
    at drawn places (extremes, exact powers of two, ties)."""
    n = draw(st.integers(1, max_rows))
    seed = draw(st.integers(0, 2**32 - 1))
    mags = draw(
        st.lists(
            st.sampled_from([0.0, 1e-30, 1e-8, 1e-4, 0.01, 1.0, 448.0, 1e5, 1e30]),
            min_size=9 * n,
            max_size=9 * n,
        )
    )
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 9, 64, generator=g, dtype=torch.float64) * torch.tensor(
        mags, dtype=torch.float64
    ).view(n, 9, 1)
    x = x.view(n, 576)
    for _ in range(draw(st.integers(0, 4))):
        x[draw(st.integers(0, n - 1)), draw(st.integers(0, 575))] = draw(bf16_finite)
    return x.to(torch.bfloat16)


def test_layout_matches_the_spec() -> None:
    assert (K.FP8_ROW_BYTES, K.BF16_ROW_BYTES) == (656, 1152)  # HISPARSE.md §5
    x = random_rows(3, seed=1)
    rows = K.fp8_ds_mla_quantize_reference(x)
    assert rows.dtype == torch.uint8 and tuple(rows.shape) == (3, 656)
    for r in range(3):
        raw = bytes(rows[r].tolist())
        scales = struct.unpack("<4f", raw[512:528])
        rope = torch.frombuffer(bytearray(raw[528:656]), dtype=torch.bfloat16)
        assert torch.equal(rope, x[r, 512:]), "RoPE bytes 528..656 are the bf16 values unchanged"
        for i in range(512):
            want = e4m3_value(raw[i]) * scales[i // 128]
            assert want == float(K.fp8_ds_mla_dequantize_reference(rows[r])[i])


@settings(max_examples=200)
@given(rows_strategy())
def test_scale_rule_is_flashmla_pow2_ceil(x: torch.Tensor) -> None:
    ours = tile_scales_reference(x[:, :512])
    # FlashMLA tests/quant.py: 2 ** ceil(log2(clamp_min(amax / 448, 1e-4)))
    amax = x[:, :512].float().view(-1, 4, 128).abs().amax(-1) / 448.0
    flashmla = torch.pow(2, torch.clamp_min(amax, 1e-4).log2().ceil())
    assert torch.equal(ours, flashmla)
    mantissa, _ = torch.frexp(ours)
    assert torch.all(mantissa == 0.5), "scales are powers of two"


@settings(max_examples=200)
@given(rows_strategy())
def test_reference_round_trip(x: torch.Tensor) -> None:
    rows = K.fp8_ds_mla_quantize_reference(x)
    y = K.fp8_ds_mla_dequantize_reference(rows)
    assert torch.equal(y[:, 512:], x[:, 512:]), "RoPE is not quantized"
    codes, scales, _ = packed_views(rows)
    assert not torch.isnan(codes.float()).any(), "in-range inputs never give a NaN code"
    err = (y[:, :512].float() - x[:, :512].float()).abs().view(4, 128)
    step = scales.view(4, 1)
    # e4m3 keeps 3 mantissa bits: within half an ulp (2^-4 relative) for normals,
    # within half the subnormal step (2^-10 x scale) below that.
    bound = torch.maximum(x[:, :512].float().abs().view(4, 128) * 2.0**-4, step * 2.0**-10)
    assert torch.all(err <= bound)
    # Dequantized values survive another round trip unchanged.
    again = K.fp8_ds_mla_dequantize_reference(K.fp8_ds_mla_quantize_reference(y))
    assert torch.equal(again, y)


def test_reference_matches_torch_rounding_at_every_midpoint() -> None:
    x = rounding_rows()
    rows = K.fp8_ds_mla_quantize_reference(x)
    codes, scales, _ = packed_views(rows)
    assert torch.all(scales == 1.0)
    want = x[:, :512].float().to(torch.float8_e4m3fn)  # torch: round to nearest even
    assert torch.equal(codes.view(torch.uint8), want.view(torch.uint8))


@pytest.mark.parametrize("case", ["rounding", "random", "empty"])
def test_kernels_bit_exact(case: str) -> None:
    x = {"rounding": rounding_rows(), "random": random_rows(24, seed=2), "empty": torch.zeros(0, 576)}[case]
    x = x.to(torch.bfloat16).to(DEVICE)
    rows = K.fp8_ds_mla_quantize(x)
    ref = K.fp8_ds_mla_quantize_reference(x)
    assert torch.equal(rows, ref)
    back = K.fp8_ds_mla_dequantize(rows)
    assert torch.equal(back.view(torch.int16), K.fp8_ds_mla_dequantize_reference(ref).view(torch.int16))


@settings(max_examples=60)
@given(rows_strategy(max_rows=4))
def test_kernels_bit_exact_property(x: torch.Tensor) -> None:
    x = x.to(DEVICE)
    assert torch.equal(K.fp8_ds_mla_quantize(x), K.fp8_ds_mla_quantize_reference(x))


def test_kernels_write_into_strided_hot_rows() -> None:
    # A hot buffer [requests, slots, 656]: quantize straight into slots 1 and 3 of request 1.
    hot = torch.zeros(2, 5, 656, dtype=torch.uint8, device=DEVICE)
    x = random_rows(2, seed=3).to(DEVICE)
    out = hot[1, 1::2][:2]
    assert out.stride(0) == 2 * 656
    with pytest.raises(ValueError, match="collapse"):
        # leading dims that do not collapse to rows without a copy are refused
        K.fp8_ds_mla_quantize(x.view(2, 1, 576).expand(2, 3, 576), out=hot[:, :3])
    K.fp8_ds_mla_quantize(x, out=out)
    assert torch.equal(hot[1, 1], K.fp8_ds_mla_quantize_reference(x[0]))
    assert torch.equal(hot[1, 3], K.fp8_ds_mla_quantize_reference(x[1]))
    assert int(hot[0].sum()) == 0 and int(hot[1, 0].sum()) == 0 and int(hot[1, 2].sum()) == 0
    deq = torch.empty(2, 576, dtype=torch.bfloat16, device=DEVICE)
    K.fp8_ds_mla_dequantize(out, out=deq)
    assert torch.equal(deq, K.fp8_ds_mla_dequantize_reference(out))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: K.fp8_ds_mla_quantize_reference(torch.zeros(2, 576)), "bfloat16"),
        (lambda: K.fp8_ds_mla_quantize_reference(torch.zeros(2, 512, dtype=torch.bfloat16)), "576"),
        (lambda: K.fp8_ds_mla_dequantize_reference(torch.zeros(2, 576, dtype=torch.uint8)), "656"),
        (lambda: K.fp8_ds_mla_dequantize(torch.zeros(2, 656, dtype=torch.int8, device=DEVICE)), "uint8"),
        (
            lambda: K.fp8_ds_mla_quantize(
                torch.zeros(2, 576, dtype=torch.bfloat16, device=DEVICE),
                out=torch.zeros(3, 656, dtype=torch.uint8, device=DEVICE),
            ),
            "shape",
        ),
    ],
)
def test_errors_name_the_contract(call: object, match: str) -> None:
    with pytest.raises(ValueError, match=match) as err:
        call()  # type: ignore[operator]
    assert "Fix:" in str(err.value)


def test_dequantize_kernel_decodes_every_code() -> None:
    # All 254 non-NaN e4m3 codes, with power-of-two and arbitrary (vLLM-style) scales.
    codes = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8)
    rows = torch.zeros(2, 656, dtype=torch.uint8)
    rows[:, :512] = torch.cat([codes, codes, codes[:4]])
    _, scales, rope = packed_views(rows)
    scales[0] = torch.tensor([1.0, 2.0**-20, 2.0**10, 0.5])
    scales[1] = torch.tensor([0.3, 1.7e-5, 123.456, 1.0 / 448])  # bf16 rounding happens here
    rope[:] = torch.linspace(-2, 2, 64, dtype=torch.bfloat16)
    rows = rows.to(DEVICE)
    got = K.fp8_ds_mla_dequantize(rows)
    want = K.fp8_ds_mla_dequantize_reference(rows)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert [e4m3_value(c) for c in codes.tolist()[:128]] == want[0, :128].float().tolist()
