"""The pool tensor: allocate it and view its layers.

The Rust core (:class:`HostKVPool`, :class:`PoolLayout`) owns the metadata;
the bytes live in one flat ``uint8`` buffer laid out layer-major as the
:class:`PoolLayout` says: layer ``g``'s rows are the contiguous bytes
``layout.layer_region(g)``, viewed here as a ``[rows_per_layer, row_bytes]``
uint8 array indexed by host row id (``HostKVPool.host_rows``, the resolver's
miss plan). torch and numpy are imported only when these functions run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hisparse_rs.exceptions import missing_extra

if TYPE_CHECKING:
    from hisparse_rs._core import PoolLayout

__all__ = ["allocate_pool_buffer", "layer_view", "layer_views"]


def allocate_pool_buffer(layout: PoolLayout, *, backend: str = "auto") -> Any:
    """A new, uninitialised flat uint8 buffer of ``layout.total_bytes`` bytes.

    ``backend``: ``"torch"`` gives ``torch.empty(total_bytes, dtype=torch.uint8,
    pin_memory=torch.cuda.is_available())`` (pinned host memory the GPU reads
    directly, HISPARSE.md §1); ``"numpy"`` gives ``numpy.empty(total_bytes,
    numpy.uint8)`` (plain CPU memory); ``"auto"`` uses torch when it is
    installed, else numpy. The contents are not zeroed: every row is written
    (prefill mirror or decode write-back) before a gather reads it.

    Raises ValueError for an unknown backend, ModuleNotFoundError naming the
    ``kernels`` extra when ``"torch"`` is asked for and not installed.
    """
    if backend not in ("auto", "torch", "numpy"):
        raise ValueError(f"backend must be 'auto', 'torch' or 'numpy', got {backend!r}")
    if backend != "numpy":
        try:
            # Imported by name: torch is an optional extra (`kernels`), untyped here.
            torch = importlib.import_module("torch")
        except ImportError as err:
            if backend == "torch":
                raise missing_extra('allocate_pool_buffer(backend="torch")', "kernels", err) from err
        else:
            return torch.empty(layout.total_bytes, dtype=torch.uint8, pin_memory=torch.cuda.is_available())
    import numpy

    return numpy.empty(layout.total_bytes, dtype=numpy.uint8)


def _check_buffer(buffer: Any, layout: PoolLayout) -> None:
    shape = tuple(buffer.shape)
    if len(shape) != 1 or str(buffer.dtype) not in ("uint8", "torch.uint8"):
        raise ValueError(
            f"the pool buffer must be a flat uint8 array, got shape {shape} dtype {buffer.dtype}; "
            "allocate it with hisparse_rs.allocate_pool_buffer(layout)"
        )
    if shape[0] < layout.total_bytes:
        raise ValueError(
            f"the pool buffer has {shape[0]} bytes, the layout needs {layout.total_bytes} "
            f"({layout.num_layers} layers x {layout.layer_stride} bytes)"
        )


def layer_view(buffer: Any, layout: PoolLayout, layer: int) -> Any:
    """The rows of global layer ``layer`` in ``buffer``: a ``[rows_per_layer,
    row_bytes]`` uint8 view (no copy) of the same kind as ``buffer`` (numpy
    array or torch tensor).

    Raises PoolError ``layer_out_of_range`` for a layer the stage does not own
    (HISPARSE.md §10), ValueError for a buffer that is not flat uint8 or is too small.
    """
    _check_buffer(buffer, layout)
    start, end = layout.layer_region(layer)
    return buffer[start:end].reshape(layout.rows_per_layer, layout.row_bytes)


def layer_views(buffer: Any, layout: PoolLayout) -> list[Any]:
    """:func:`layer_view` for every layer of the stage, in global layer order
    (index ``i`` is global layer ``layout.first_layer + i``)."""
    return [layer_view(buffer, layout, g) for g in range(layout.first_layer, layout.end_layer)]
