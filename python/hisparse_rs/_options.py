"""The planner and machine options both engines' fronts take (``context_length``,
``target_requests``, ``host_memory_gib``, ``gpu_memory_gib``, ``weights_gib``,
``gpu``, ``gpus_per_node``, ``host_memory_source``), checked before they are sent to the core as
JSON. Its own module so that :mod:`hisparse_rs.config`, :mod:`hisparse_rs.sglang`
and :mod:`hisparse_rs.planning` import it and none of them imports another back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

_INT_OPTIONS = ("context_length", "target_requests")
_GIB_OPTIONS = ("host_memory_gib", "gpu_memory_gib", "weights_gib")


def _check_options(options: Mapping[str, Any]) -> None:
    # JSON cannot carry NaN or a u64 out of range: say so here, as the CLI does.
    for name, value in options.items():
        if name in _INT_OPTIONS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
            if not 0 <= value < 2**64:
                raise ValueError(f"{name} must be in 0 ..= 2**64 - 1 tokens/requests, got {value}")
        elif name in _GIB_OPTIONS:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number of GiB, got {value!r}")
            try:
                gib = float(value)  # an int beyond a float's range overflows here
            except OverflowError:
                gib = math.inf
            if not math.isfinite(gib) or gib < 0:
                raise ValueError(f"{name} must be a finite, non-negative number of GiB, got {value!r}")
        elif name == "gpus_per_node":
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"gpus_per_node must be an int (GPUs one node holds), got {value!r}")
            if not 1 <= value <= 1024:
                raise ValueError(f"gpus_per_node must be 1 ..= 1024, got {value}")
        elif name == "gpu" and not isinstance(value, str):
            raise TypeError(f"gpu must be a GPU name such as 'h200', got {value!r}")
        elif name == "host_memory_source" and not isinstance(value, str):
            raise TypeError(f"host_memory_source must be a str, got {value!r}")
