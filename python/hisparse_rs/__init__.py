"""hisparse_rs: the HiSparse host-memory KV tier for sparse-attention (DSA) models.

``import hisparse_rs`` needs neither torch nor triton. Config resolution:
:func:`check` (report, never raises on a bad config) and :func:`resolve`
(raises :class:`ConfigError` with every error). The same rules run in the
``hisparse-check`` command. Capacity planning: :func:`plan` (the
``hisparse-check --plan`` figures) and :func:`plot_plan` (needs matplotlib).

Host KV tier: :class:`HostKVPool` (per-request host block tables),
:class:`PoolLayout` with :func:`allocate_pool_buffer` / :func:`layer_views`
(the pool tensor), :class:`ResidencyResolver` (hot-buffer slots and the miss
plan each decode step) and :class:`HiSparseMetrics` (vLLM's hisparse_* metrics).

Decode step: :class:`DecodeRuntime` (resolve -> gather -> sparse MLA decode per
layer) and the kernels in :mod:`hisparse_rs.kernels` need the ``kernels`` extra
(torch, triton); they are imported on first use, never by ``import hisparse_rs``.
"""

from typing import TYPE_CHECKING, Any

from hisparse_rs._core import (
    SGLANG_VERSION,
    VLLM_VERSION,
    Diagnostic,
    GpuPlan,
    HiSparseMetrics,
    HiSparseSettings,
    HostKVPool,
    HostPlan,
    ModelSummary,
    Plan,
    PlanPoint,
    PlanSizes,
    PoolLayout,
    PoolStats,
    Provenance,
    Report,
    ResidencyResolver,
    ResolveResult,
    SglangHiSparseSettings,
    SglangSizing,
    __version__,
    deployment_codes,
    error_codes,
    gpu_spec,
    pool_error_codes,
    sglang_codes,
    sglang_deviations,
    vllm_deviations,
    vllm_stages,
)
from hisparse_rs.config import ResolvedConfig, apply_fix, check, check_args, check_argv, resolve, serve_args
from hisparse_rs.deploy import DeploymentReport, check_deployment
from hisparse_rs.exceptions import ConfigError, HostPoolExhausted, ModelLoadError, PoolError
from hisparse_rs.planning import plan, plan_args, plot_plan
from hisparse_rs.pool import allocate_pool_buffer, layer_view, layer_views
from hisparse_rs.sglang import ENGINES, check_sglang_argv

if TYPE_CHECKING:
    from hisparse_rs.runtime import DecodeRuntime, LayerResult


def __getattr__(name: str) -> Any:
    # torch is an optional extra: load the runtime only when it is asked for.
    if name in ("DecodeRuntime", "LayerResult"):
        from hisparse_rs import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'hisparse_rs' has no attribute {name!r}")


__all__ = [
    "ENGINES",
    "SGLANG_VERSION",
    "VLLM_VERSION",
    "ConfigError",
    "DecodeRuntime",
    "DeploymentReport",
    "Diagnostic",
    "GpuPlan",
    "HiSparseMetrics",
    "HiSparseSettings",
    "HostKVPool",
    "HostPlan",
    "HostPoolExhausted",
    "LayerResult",
    "ModelLoadError",
    "ModelSummary",
    "Plan",
    "PlanPoint",
    "PlanSizes",
    "PoolError",
    "PoolLayout",
    "PoolStats",
    "Provenance",
    "Report",
    "ResidencyResolver",
    "ResolveResult",
    "ResolvedConfig",
    "SglangHiSparseSettings",
    "SglangSizing",
    "__version__",
    "allocate_pool_buffer",
    "apply_fix",
    "check",
    "check_args",
    "check_argv",
    "check_deployment",
    "check_sglang_argv",
    "deployment_codes",
    "error_codes",
    "gpu_spec",
    "layer_view",
    "layer_views",
    "plan",
    "plan_args",
    "plot_plan",
    "pool_error_codes",
    "resolve",
    "serve_args",
    "sglang_codes",
    "sglang_deviations",
    "vllm_deviations",
    "vllm_stages",
]
