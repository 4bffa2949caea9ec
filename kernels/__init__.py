"""Sparse-MLA decode, fp8_ds_mla quantize / dequantize, hot-buffer gather and residency.

Each operation has a Triton kernel and a PyTorch reference with the same
contract (HISPARSE.md §7; FlashMLA's interface): ``sparse_mla_decode`` /
``sparse_mla_decode_reference``, ``fp8_ds_mla_quantize`` /
``fp8_ds_mla_quantize_reference``, ``fp8_ds_mla_dequantize`` /
``fp8_ds_mla_dequantize_reference``, ``gather_rows`` / ``gather_rows_reference``.
``resolve_residency`` (and :class:`TritonResidencyResolver`) is the device twin
of the Rust ``ResidencyResolver.resolve``, which is its reference.
The kernels run on CUDA tensors, or on CPU tensors when ``TRITON_INTERPRET=1``
is set before this package is imported (slow: for tests).

Needs the ``kernels`` extra (torch, triton, numpy): ``pip install 'hisparse_rs[kernels]'``.
``import hisparse_rs`` alone never imports torch.

Packaging: the sources live in the repository's top-level ``kernels/``
directory; ``python/hisparse_rs/kernels/`` holds one relative symlink per
``.py`` file (maturin follows file symlinks into the wheel, not directory
symlinks). A new module needs its symlink; ``tests/test_kernels_packaging.py``
fails otherwise.
"""

from __future__ import annotations

from hisparse_rs.exceptions import missing_extra

try:
    import torch  # noqa: F401
    import triton  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("hisparse_rs.kernels", "kernels", err) from err

from ._common import BF16_ROW_BYTES, D_NOPE, D_QK, D_ROPE, D_V, FP8_ROW_BYTES, INTERPRET
from .decode_indices import finish_decode_indices, map_topk_positions
from .fp8_ds_mla import (
    fp8_ds_mla_dequantize,
    fp8_ds_mla_dequantize_reference,
    fp8_ds_mla_quantize,
    fp8_ds_mla_quantize_reference,
)
from .gather import (
    copy_rows,
    copy_rows_reference,
    gather_plan,
    gather_plan_reference,
    gather_rows,
    gather_rows_reference,
)
from .resolver import (
    PlanBuffers,
    ResidencyPlan,
    ResolverWorkspace,
    TritonResidencyResolver,
    resolve_residency,
    status_error,
)
from .sparse_mla_decode import sparse_mla_decode, sparse_mla_decode_reference

__all__ = [
    "BF16_ROW_BYTES",
    "D_NOPE",
    "D_QK",
    "D_ROPE",
    "D_V",
    "FP8_ROW_BYTES",
    "INTERPRET",
    "PlanBuffers",
    "ResidencyPlan",
    "ResolverWorkspace",
    "TritonResidencyResolver",
    "copy_rows",
    "copy_rows_reference",
    "finish_decode_indices",
    "fp8_ds_mla_dequantize",
    "fp8_ds_mla_dequantize_reference",
    "fp8_ds_mla_quantize",
    "fp8_ds_mla_quantize_reference",
    "gather_plan",
    "gather_plan_reference",
    "gather_rows",
    "gather_rows_reference",
    "map_topk_positions",
    "resolve_residency",
    "sparse_mla_decode",
    "sparse_mla_decode_reference",
    "status_error",
]
