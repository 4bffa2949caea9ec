"""Row layouts, argument checks and launch-mode detection shared by the kernels.

Layouts (HISPARSE.md §5 and §7; FlashMLA ``tests/quant.py``, layout
``V32_FP8Sparse``): a bf16 MLA latent row is 576 values (512 NoPE + 64 RoPE,
1152 bytes); an fp8_ds_mla row is 656 bytes: 512 x float8_e4m3fn NoPE values
(4 tiles of 128) | 4 x float32 scales (one per tile) | 64 x bfloat16 RoPE values.
"""

from __future__ import annotations

import os

import torch
import triton

D_QK = 576
"""Values per latent row: the key dimension (FlashMLA ``d_qk``)."""
D_NOPE = 512
"""NoPE part (``kv_lora_rank``); also the value dimension ``d_v``: V is the first 512 values."""
D_V = D_NOPE
D_ROPE = 64
"""RoPE part (``qk_rope_head_dim``), never quantized."""
FP8_TILE = 128
"""NoPE values per fp8 scale."""
FP8_NUM_TILES = D_NOPE // FP8_TILE
FP8_SCALE_OFFSET = D_NOPE
"""Byte offset of the 4 float32 scales in an fp8_ds_mla row."""
FP8_ROPE_OFFSET = FP8_SCALE_OFFSET + 4 * FP8_NUM_TILES
"""Byte offset (528) of the 64 bfloat16 RoPE values in an fp8_ds_mla row."""
FP8_ROW_BYTES = FP8_ROPE_OFFSET + 2 * D_ROPE
"""656 bytes per fp8_ds_mla row (HISPARSE.md §5)."""
BF16_ROW_BYTES = 2 * D_QK
"""1152 bytes per bf16 row."""
E4M3_MAX = 448.0
"""Largest finite float8_e4m3fn value."""
SCALE_FLOOR = 1e-4
"""Smallest tile scale before rounding up to a power of two (FlashMLA ``tests/quant.py``:
``clamp_min(amax / 448, 1e-4)``, "align with HFAI FP8's FP8_AMAX_MARGIN")."""


def _interpreting() -> bool:
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:  # triton >= 3.4
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


INTERPRET = _interpreting()
"""Whether the Triton kernels were defined under ``TRITON_INTERPRET=1`` (read once, at
import, exactly when ``@triton.jit`` reads it): then they run on CPU tensors."""


def check_tensors(op: str, **tensors: torch.Tensor | None) -> None:
    """Refuse tensors no kernel (or reference) can take, before anything reads them.

    Every launcher and reference calls this first, so a meta tensor (no data:
    torch would raise NotImplementedError deep inside), a sparse or nested
    tensor (no strides to index: RuntimeError, after ``DecodeRuntime`` had
    resolved) or one that requires grad (the ops are inference-only and write
    in place: torch would raise RuntimeError) is a ValueError naming the
    argument and the fix. ``None`` (an optional argument not given) is skipped.
    """
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.layout != torch.strided or t.is_nested:
            kind = "nested" if t.is_nested else str(t.layout).removeprefix("torch.")
            raise ValueError(
                f"{op}: {name} is {kind}, not a dense (strided) tensor; the kernels index rows by "
                f"their strides. Fix: pass {name}.to_dense()."
            )
        if t.device.type == "meta":
            raise ValueError(
                f"{op}: {name} is on the meta device, which holds no data. Fix: materialize it "
                f"on the device that runs the op (e.g. torch.empty_like({name}, device='cuda'))."
            )
        if t.requires_grad:
            raise ValueError(
                f"{op}: {name} requires grad; the HiSparse kernels are inference-only (no autograd). "
                f"Fix: pass {name}.detach()."
            )


def check_launch_device(op: str, *tensors: torch.Tensor, host_ok: torch.Tensor | None = None) -> None:
    """Refuse a Triton launch that cannot work, with the fix.

    Compiled kernels (no interpreter) need CUDA tensors; ``host_ok`` may be a
    pinned CPU tensor, which the GPU reads directly (see ``gather_rows``).
    Under the interpreter every tensor must be on the CPU.
    """
    if INTERPRET:
        for t in (*tensors, *(() if host_ok is None else (host_ok,))):
            if t.device.type != "cpu":
                raise ValueError(
                    f"{op}: TRITON_INTERPRET=1 runs the kernels on CPU tensors; got a tensor on {t.device}. "
                    "Fix: unset TRITON_INTERPRET before importing hisparse_rs.kernels to use the GPU."
                )
        return
    for t in tensors:
        if t.device.type != "cuda":
            raise ValueError(
                f"{op}: the Triton kernel needs CUDA tensors; got a tensor on {t.device}. "
                f"Fix: move it with .cuda(), call {op}_reference on the CPU, or set TRITON_INTERPRET=1 "
                "before importing hisparse_rs.kernels (slow; for tests)."
            )
    if host_ok is not None and host_ok.device.type == "cpu" and not host_ok.is_pinned():
        raise ValueError(
            f"{op}: a CPU host pool must be pinned (page-locked) for the GPU to read it; got pageable "
            "memory. Fix: allocate it with torch.empty(..., pin_memory=True) or call .pin_memory()."
        )


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints."""
    return -(-a // b)


def describe(t: torch.Tensor) -> str:
    """``dtype [d0, d1, ...]`` for error messages."""
    return f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}"


def require(cond: bool, op: str, what: str, got: torch.Tensor | str, fix: str) -> None:
    """Raise ``ValueError("<op>: <what>; got <got>. Fix: <fix>")`` unless ``cond``."""
    if not cond:
        shown = describe(got) if isinstance(got, torch.Tensor) else got
        raise ValueError(f"{op}: {what}; got {shown}. Fix: {fix}")
