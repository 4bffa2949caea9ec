"""hisparse_rs: the HiSparse host-memory KV tier for sparse-attention (DSA) models.

``import hisparse_rs`` needs neither torch nor triton. Config resolution:
:func:`check` (report, never raises on a bad config) and :func:`resolve`
(raises :class:`ConfigError` with every error). The same rules run in the
``hisparse-check`` command. Capacity planning: :func:`plan` (the
``hisparse-check --plan`` figures) and :func:`plot_plan` (needs matplotlib).
"""

from hisparse_rs._core import (
    VLLM_VERSION,
    Diagnostic,
    GpuPlan,
    HiSparseSettings,
    HostPlan,
    ModelSummary,
    Plan,
    PlanPoint,
    PlanSizes,
    Provenance,
    Report,
    __version__,
    error_codes,
)
from hisparse_rs.config import ResolvedConfig, apply_fix, check, check_args, resolve, serve_args
from hisparse_rs.exceptions import ConfigError, ModelLoadError
from hisparse_rs.planning import plan, plan_args, plot_plan

__all__ = [
    "VLLM_VERSION",
    "ConfigError",
    "Diagnostic",
    "GpuPlan",
    "HiSparseSettings",
    "HostPlan",
    "ModelLoadError",
    "ModelSummary",
    "Plan",
    "PlanPoint",
    "PlanSizes",
    "Provenance",
    "Report",
    "ResolvedConfig",
    "__version__",
    "apply_fix",
    "check",
    "check_args",
    "error_codes",
    "plan",
    "plan_args",
    "plot_plan",
    "resolve",
    "serve_args",
]
