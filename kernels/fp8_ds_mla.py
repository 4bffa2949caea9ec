"""fp8_ds_mla row quantize / dequantize: PyTorch references and Triton kernels.

Row layout (656 bytes, HISPARSE.md §5; FlashMLA README "FP8 with scale"):
bytes 0..512 are 512 float8_e4m3fn NoPE values in 4 tiles of 128, bytes
512..528 are 4 float32 scales (one per tile), bytes 528..656 are the 64
bfloat16 RoPE values, copied unchanged.

Scale rule (FlashMLA ``tests/quant.py``, ``V32_FP8Sparse``): per tile,
``scale = 2 ** ceil(log2(max(amax / 448, 1e-4)))``; code = e4m3(x / scale),
round to nearest even. Power-of-two scales make ``x / scale`` and
``code * scale`` exact, so the Triton kernels and the references agree bit for
bit, and a dequantized value fits bf16 exactly. vLLM 0.33's
``concat_and_cache_ds_mla_kernel`` writes ``max(amax / 448, FLT_MIN)`` without
rounding to a power of two; dequantize reads such rows too (value =
code x scale in float32, then rounded to bf16).
"""

from __future__ import annotations

import torch

from ._common import (
    D_NOPE,
    D_QK,
    D_ROPE,
    E4M3_MAX,
    FP8_NUM_TILES,
    FP8_ROPE_OFFSET,
    FP8_ROW_BYTES,
    FP8_SCALE_OFFSET,
    FP8_TILE,
    INTERPRET,
    SCALE_FLOOR,
    check_launch_device,
    check_tensors,
    require,
)
from ._fp8_ds_mla_triton import _dequantize_kernel, _quantize_kernel
from ._launch import GpuArch, Launch

__all__ = [
    "fp8_ds_mla_dequantize",
    "fp8_ds_mla_dequantize_reference",
    "fp8_ds_mla_quantize",
    "fp8_ds_mla_quantize_reference",
    "packed_views",
]


def _tiles(x: torch.Tensor) -> torch.Tensor:
    # [..., 512] -> [..., 4, 128]
    return x.reshape(*x.shape[:-1], FP8_NUM_TILES, FP8_TILE)


def _pow2_ceil(x: torch.Tensor) -> torch.Tensor:
    # Same bit rule as the kernel: round the float32 mantissa up into the exponent.
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x7FFFFF) & -8388608).view(torch.float32)


def tile_scales_reference(nope: torch.Tensor) -> torch.Tensor:
    """Power-of-two scale per 128-value tile: float32 ``[..., 4]`` from ``[..., 512]`` values.

    ``2 ** ceil(log2(max(amax / 448, 1e-4)))`` (FlashMLA ``tests/quant.py``),
    computed on the float32 bits so no ``log2`` rounding can move it.
    """
    amax = _tiles(nope.float()).abs().amax(-1)
    return _pow2_ceil(torch.clamp_min(amax / E4M3_MAX, SCALE_FLOOR))


def packed_views(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The three parts of uint8 fp8_ds_mla rows ``[..., 656]`` as views (no copy).

    Returns ``(codes float8_e4m3fn [..., 512], scales float32 [..., 4],
    rope bfloat16 [..., 64])``. Writing to a view writes the rows. Needs the
    last dimension contiguous and the row stride a multiple of 4 bytes.
    """
    codes = rows[..., :FP8_SCALE_OFFSET].view(torch.float8_e4m3fn)
    scales = rows[..., FP8_SCALE_OFFSET:FP8_ROPE_OFFSET].view(torch.float32)
    rope = rows[..., FP8_ROPE_OFFSET:].view(torch.bfloat16)
    return codes, scales, rope


def _check_bf16_rows(op: str, kv: torch.Tensor) -> None:
    require(
        kv.dtype == torch.bfloat16 and kv.dim() >= 1 and kv.shape[-1] == D_QK,
        op,
        "kv must be bfloat16 [..., 576] (512 NoPE + 64 RoPE values)",
        kv,
        "pass the MLA latent rows as bfloat16",
    )


def _check_packed_rows(op: str, rows: torch.Tensor, name: str = "rows") -> None:
    require(
        rows.dtype == torch.uint8 and rows.dim() >= 1 and rows.shape[-1] == FP8_ROW_BYTES,
        op,
        f"{name} must be uint8 fp8_ds_mla rows [..., 656]",
        rows,
        "view packed rows as torch.uint8 with 656 bytes per row",
    )
    require(
        rows.stride(-1) == 1 and all(s % 4 == 0 for s in rows.stride()[:-1]),
        op,
        f"{name} needs contiguous rows whose stride is a multiple of 4 bytes (the scales are float32)",
        f"strides {list(rows.stride())}",
        f"use {name}.contiguous()",
    )


def _out_rows(op: str, kv: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    shape = (*kv.shape[:-1], FP8_ROW_BYTES)
    if out is None:
        return torch.empty(shape, dtype=torch.uint8, device=kv.device)
    _check_packed_rows(op, out, "out")
    require(
        tuple(out.shape) == shape, op, f"out must have shape {list(shape)}", out, "allocate it to match kv"
    )
    require(out.device == kv.device, op, f"out must be on {kv.device}", str(out.device), "move it")
    return out


def _bf16_out(op: str, rows: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    shape = (*rows.shape[:-1], D_QK)
    if out is None:
        return torch.empty(shape, dtype=torch.bfloat16, device=rows.device)
    require(
        out.dtype == torch.bfloat16 and tuple(out.shape) == shape and out.stride(-1) == 1,
        op,
        f"out must be bfloat16 {list(shape)} with contiguous rows",
        out,
        "allocate it to match rows",
    )
    require(out.device == rows.device, op, f"out must be on {rows.device}", str(out.device), "move it")
    return out


def fp8_ds_mla_quantize_reference(kv: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Quantize bf16 latent rows to fp8_ds_mla rows (PyTorch reference).

    Args:
        kv: bfloat16 ``[..., 576]`` (512 NoPE then 64 RoPE values), finite.
        out: optional uint8 ``[..., 656]`` destination (may be a strided view,
            e.g. hot-buffer rows); allocated when None.

    Returns:
        uint8 ``[..., 656]`` (``out`` when given). Layout and scale rule: module
        docstring (FlashMLA ``tests/quant.py``).

    Raises:
        ValueError: wrong dtype, shape, device or stride.
    """
    op = "fp8_ds_mla_quantize_reference"
    check_tensors(op, kv=kv, out=out)
    _check_bf16_rows(op, kv)
    rows = _out_rows(op, kv, out)
    nope = kv[..., :D_NOPE].float()
    scales = tile_scales_reference(nope)
    tiles = _tiles(nope) / scales.unsqueeze(-1)
    codes, scale_view, rope = packed_views(rows)
    codes.copy_(tiles.flatten(-2).to(torch.float8_e4m3fn))
    scale_view.copy_(scales)
    rope.copy_(kv[..., D_NOPE:])
    return rows


def fp8_ds_mla_dequantize_reference(rows: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Dequantize fp8_ds_mla rows to bf16 latent rows (PyTorch reference).

    ``value[i] = e4m3[i] * scale[i // 128]`` in float32, rounded to bf16 (exact
    for power-of-two scales); RoPE copied (HISPARSE.md §7).

    Args:
        rows: uint8 ``[..., 656]``.
        out: optional bfloat16 ``[..., 576]`` destination.

    Returns:
        bfloat16 ``[..., 576]``.

    Raises:
        ValueError: wrong dtype, shape or stride.
    """
    op = "fp8_ds_mla_dequantize_reference"
    check_tensors(op, rows=rows, out=out)
    _check_packed_rows(op, rows)
    out = _bf16_out(op, rows, out)
    codes, scales, rope = packed_views(rows)
    nope = _tiles(codes.float()).mul_(scales.unsqueeze(-1))
    out[..., :D_NOPE] = nope.reshape(*nope.shape[:-2], D_NOPE)  # cast to bf16 rounds to nearest even
    out[..., D_NOPE:] = rope
    return out


def _flat2d(op: str, name: str, t: torch.Tensor, width: int) -> torch.Tensor:
    # [..., width] -> [n, width] as a view: the kernel writes through it.
    if t.dim() == 2:
        return t
    try:
        return t.view(-1, width)
    except RuntimeError:
        require(
            False,
            op,
            f"{name}'s leading dimensions must collapse to rows without a copy",
            f"shape {list(t.shape)}, strides {list(t.stride())}",
            f"pass 2-D rows, or {name}.contiguous()",
        )
        raise  # unreachable: require raised


def fp8_ds_mla_quantize(kv: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Quantize bf16 latent rows to fp8_ds_mla rows (Triton kernel, one program per row).

    Same contract and bit-exact result as :func:`fp8_ds_mla_quantize_reference`.
    Tensors must be on CUDA (or on the CPU under ``TRITON_INTERPRET=1``); the
    leading dimensions of ``kv`` and ``out`` must collapse to rows without a copy.

    Raises:
        ValueError: wrong dtype, shape, device or stride.
    """
    op = "fp8_ds_mla_quantize"
    check_tensors(op, kv=kv, out=out)
    _check_bf16_rows(op, kv)
    rows = _out_rows(op, kv, out)
    check_launch_device(op, kv, rows)
    src = _flat2d(op, "kv", kv, D_QK)
    dst = _flat2d(op, "out", rows, FP8_ROW_BYTES)
    require(
        src.stride(-1) == 1,
        op,
        "kv rows must be contiguous",
        f"strides {list(kv.stride())}",
        "kv.contiguous()",
    )
    if src.shape[0] > 0:
        quantize_launch(src, dst).run()
    return rows


def fp8_ds_mla_dequantize(rows: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Dequantize fp8_ds_mla rows to bf16 latent rows (Triton kernel, one program per row).

    Same contract and bit-exact result as :func:`fp8_ds_mla_dequantize_reference`.

    Raises:
        ValueError: wrong dtype, shape, device or stride.
    """
    op = "fp8_ds_mla_dequantize"
    check_tensors(op, rows=rows, out=out)
    _check_packed_rows(op, rows)
    out = _bf16_out(op, rows, out)
    check_launch_device(op, rows, out)
    src = _flat2d(op, "rows", rows, FP8_ROW_BYTES)
    dst = _flat2d(op, "out", out, D_QK)
    if src.shape[0] > 0:
        dequantize_launch(src, dst).run()
    return out


def _scale_and_rope_words(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # 2-D uint8 rows [n, 656] as the kernels read their scales and RoPE values:
    # float32 and bfloat16 views starting at each part of row 0.
    return rows.view(torch.float32)[:, FP8_SCALE_OFFSET // 4 :], rows.view(torch.bfloat16)[
        :, FP8_ROPE_OFFSET // 2 :
    ]


def quantize_launch(src: torch.Tensor, dst: torch.Tensor) -> Launch:
    """The launch :func:`fp8_ds_mla_quantize` makes: bf16 rows ``src [n, 576]`` (contiguous
    rows) into uint8 rows ``dst [n, 656]``, one program of 4 warps per row. Also
    built on meta tensors by the ahead-of-time compile check (``aot.py``)."""
    return Launch(
        _quantize_kernel,
        (src.shape[0],),
        (
            src,
            dst,
            *_scale_and_rope_words(dst),
            src.stride(0),
            dst.stride(0),
            dst.stride(0) // 4,
            dst.stride(0) // 2,
        ),
        {
            "E4M3_MAX": E4M3_MAX,
            "SCALE_FLOOR": SCALE_FLOOR,
            "TILE": FP8_TILE,
            "NUM_TILES": FP8_NUM_TILES,
            "D_NOPE": D_NOPE,
            "D_ROPE": D_ROPE,
        },
        num_warps=4,
        num_stages=3,
    )


def dequantize_launch(src: torch.Tensor, dst: torch.Tensor) -> Launch:
    """The launch :func:`fp8_ds_mla_dequantize` makes: uint8 rows ``src [n, 656]`` into
    bf16 rows ``dst [n, 576]``, one program of 4 warps per row."""
    return Launch(
        _dequantize_kernel,
        (src.shape[0],),
        (
            src,
            *_scale_and_rope_words(src),
            dst,
            src.stride(0),
            src.stride(0) // 4,
            src.stride(0) // 2,
            dst.stride(0),
        ),
        {
            "TILE": FP8_TILE,
            "NUM_TILES": FP8_NUM_TILES,
            "D_NOPE": D_NOPE,
            "D_ROPE": D_ROPE,
            "INTERPRETER": INTERPRET,
        },
        num_warps=4,
        num_stages=3,
    )


def fp8_aot_launches(arch: GpuArch, *, rows: int) -> list[Launch]:
    """Quantize then dequantize of ``rows`` contiguous rows, as the launchers make
    them, on meta tensors (no memory) for the ahead-of-time compile check (the
    same launches on every ``arch``)."""
    meta = torch.device("meta")
    bf16 = torch.empty((rows, D_QK), dtype=torch.bfloat16, device=meta)
    packed = torch.empty((rows, FP8_ROW_BYTES), dtype=torch.uint8, device=meta)
    return [quantize_launch(bf16, packed), dequantize_launch(packed, bf16)]
