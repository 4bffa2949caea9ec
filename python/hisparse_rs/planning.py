"""The capacity planner from Python: :func:`plan` (the ``hisparse-check --plan``
figures) and :func:`plot_plan` (the ``--plot`` chart).

All figures are computed in the Rust core (``hisparse_core::plan``); a
:class:`Plan` is an immutable Rust object whose ``to_json()`` is the
``hisparse-check --plan --json`` schema. Formulas: HISPARSE.md §5 (vLLM's
HiSparse concurrency calculator) with vLLM 0.33.0's HiSparse layout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from hisparse_rs import _core, sglang
from hisparse_rs._core import Plan
from hisparse_rs._options import _check_options
from hisparse_rs.config import serve_args
from hisparse_rs.exceptions import ConfigError

__all__ = ["Limit", "plan", "plan_args", "plot_plan"]

Limit = Literal["gpu", "host", "max_num_seqs", "baseline"]
"""What caps concurrent requests: GPU KV blocks, host pool blocks,
``max_num_seqs``, or the baseline (HiSparse never plans fewer requests than
serving without it: vLLM keeps pages GPU-resident until memory pressure)."""

#: How to get matplotlib for :func:`plot_plan` and ``hisparse-check --plot``.
PLOT_INSTALL = "pip install 'hisparse_rs[plot]' (from a checkout of this repository: pip install '.[plot]')"

_MARKERS: dict[Limit, str] = {"gpu": "o", "host": "s", "max_num_seqs": "^", "baseline": "D"}


def plan(
    model: str | os.PathLike[str] | None = None,
    *,
    engine: str = "vllm",
    context_length: int | None = None,
    target_requests: int | None = None,
    host_memory_gib: float | None = None,
    gpu_memory_gib: float | None = None,
    weights_gib: float | None = None,
    gpu: str | None = None,
    engine_log: str | os.PathLike[str] | None = None,
    gpus_per_node: int | None = None,
    **serve: Any,
) -> Plan:
    """Plan capacity for a serve configuration: concurrent requests of
    ``context_length`` tokens per DP replica with and without HiSparse, the
    binding limit (``"gpu"``, ``"host"``, ``"max_num_seqs"``, ``"baseline"``),
    the host memory pinned per node, and a sweep from 8K tokens to max_model_len.

    Args:
        engine: ``"vllm"`` (default) or ``"sglang"``: for SGLang 0.5.23,
            ``model`` is ``--model-path`` and ``**serve`` are SGLang
            ``ServerArgs`` attributes, as :func:`check` takes them with
            ``engine="sglang"`` (device slots from GPU memory and
            ``mem_fraction_static``, ``D + 64`` slots per request, host RAM
            pinned per rank: every rank holds its own copy).
            ``context_length`` is the planned length, not SGLang's
            ``--context-length`` (see below).
        model, **serve: the serve configuration, exactly as :func:`check` takes it
            (``kv_transfer_config=...``, ``tensor_parallel_size=...``,
            ``kv_cache_memory_bytes=...``, ``gpu_memory_utilization=...``).
        context_length: the planned length: tokens per request the plan is
            for (``plan.context_length``; the CLI's ``--context-length`` for
            vLLM, ``--plan-context-length`` for SGLang), default the longest the
            launch serves (vLLM's ``max_model_len``; SGLang's ``--context-length``,
            else the model's). It never sets the launch's own length: for
            SGLang, give ``--context-length`` as the ``ServerArgs`` attribute
            through :func:`plan_args` (``plan_args(serve_args(model,
            engine="sglang", context_length=65536, ...), engine="sglang")``).
        target_requests: requests the suggested ``min_host_pool_gib`` holds
            (default: what the GPU holds at ``context_length``).
        host_memory_gib: the serving node's RAM in GiB (default: this machine's
            ``MemAvailable``); pinned pools must fit in 95 % of it. When given,
            the suggested ``min_host_pool_gib`` is at most what the node's
            pools can pin, and ``min_host_pool_requests`` (fewer than
            ``target_requests`` then) says what it holds.
        gpu_memory_gib: memory of one GPU in GiB, for the KV room
            (``gpu_memory_gib x gpu_memory_utilization - weights``), unless
            ``kv_cache_memory_bytes`` is given.
        weights_gib: model weights per GPU in GiB (default: estimated from
            config.json, and ``plan.gpu.weights_estimated`` says so).
        gpu: the GPU by name (``"h100"``, ``"h200"``, ``"b200"``, ``"a100"``,
            ``"a100-40gb"``, ``"l40s"``, ``"mi300x"``): its memory fills
            ``gpu_memory_gib`` when not given, and the check runs vLLM's
            resolver shared-memory check for it.
        gpus_per_node: GPUs one node holds (default: ``gpu``'s usual server;
            see :func:`hisparse_rs.check`): the layout rules, and so the plan,
            refuse a launch that runs more on one node.
        engine_log: the engine's start-up log (a path, or ``"-"`` for standard
            input), as ``hisparse-check --plan --engine-log``: vLLM 0.33.0's
            "Model loading took X GiB" and "Available KV cache memory: X GiB"
            (the smallest rank's), or SGLang 0.5.23's "Load weight end" (its
            KV budget follows from ``mem_fraction_static``), replace the
            estimates; ``plan.engine_log`` sets each logged pool and capacity
            figure beside the plan's. A log of another model or parallel layout
            is an ``engine_log_mismatch`` error in ``plan.errors``.

    Returns:
        A :class:`Plan`; ``plan.valid`` is False when the pools do not fit in
        the given host RAM (``plan.errors`` has a ``host_memory_exceeded`` with a
        fix; without ``host_memory_gib`` this machine's RAM is used and only
        warned about) or when a replica serves no request at ``context_length``
        (``plan_serves_no_requests``). Without HiSparse in the configuration,
        the plan is of the HiSparseConnector it would take, and
        ``plan.assumed`` says which.

    Raises:
        ConfigError: the configuration is invalid (what ``vllm serve`` refuses).
        ValueError: an option is out of range, the GPU or ``engine`` is unknown,
            or HiSparse is not configured and cannot be (the model is not DSA;
            for SGLang: the launch has no ``enable_hisparse``); ``engine_log``
            cannot be read or has none of the engine's start-up lines.
        ModelLoadError: the model's config.json cannot be read.
        TypeError: an argument has the wrong type.
    """
    options = {
        "context_length": context_length,
        "target_requests": target_requests,
        "host_memory_gib": host_memory_gib,
        "gpu_memory_gib": gpu_memory_gib,
        "weights_gib": weights_gib,
        "gpu": gpu,
        "gpus_per_node": gpus_per_node,
    }
    log = None if engine_log is None else os.fspath(engine_log)
    if sglang.engine_name(engine) == "sglang":
        report, result = sglang.plan(model, options, serve, engine_log=log)
        if not report.valid:
            raise ConfigError(report)
        if result is None:  # pragma: no cover - the core plans every valid launch or raises
            raise ValueError("nothing to plan")
        return result
    args = serve_args(model, **serve)
    given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    return plan_args(args, engine_log=log, **given)


def plan_args(
    args: Mapping[str, Any], *, engine: str = "vllm", engine_log: str | None = None, **options: Any
) -> Plan:
    """:func:`plan` on serve args in the ``ServeArgs`` JSON form (see :func:`serve_args`);
    with ``engine="sglang"``, on SGLang ``ServerArgs`` attributes
    (``serve_args(model, engine="sglang", ...)``, which may hold SGLang's own
    ``context_length``: the launch's ``--context-length``). ``options`` are
    :func:`plan`'s (``context_length`` among them: the planned tokens per request)."""
    _check_options(options)
    if engine_log is not None and not isinstance(engine_log, str):
        raise TypeError(f"engine_log must be a path (str or os.PathLike), got {type(engine_log).__name__}")
    if sglang.engine_name(engine) == "sglang":
        report, result = sglang.plan_args(args, options, engine_log=engine_log)
    else:
        report, result = _core.plan_json(args, json.dumps(options), engine_log)
    if not report.valid:
        raise ConfigError(report)
    if result is None:  # pragma: no cover - the core plans every valid configuration or raises
        raise ValueError("nothing to plan")
    return result


def plot_plan(plan: Plan, path: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """Draw concurrent requests per DP replica against context length, without
    and with HiSparse, each HiSparse point marked by its binding limit; write a
    PNG to ``path`` and return it.

    Needs matplotlib (:data:`PLOT_INSTALL`), imported here with
    the Agg backend, so nothing else in hisparse_rs depends on it. Raises
    ValueError when the plan has no GPU figures (give ``gpu_memory_gib`` or
    ``kv_cache_memory_bytes``).
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise ImportError(f"plot_plan needs matplotlib: {PLOT_INSTALL}") from e

    points = plan.sweep
    if any(p.hisparse_requests is None or p.baseline_requests is None for p in points):
        # No KV room: either no GPU size, or a GPU size but weights the planner cannot estimate.
        need = (
            "weights_gib (--weights-gib): the weights of this model cannot be estimated"
            if plan.gpu.gpu_memory_gib is not None
            else "gpu_memory_gib (--gpu-memory-gib)"
        )
        raise ValueError(
            f"the plan has no GPU figures to draw: give {need}, "
            "or kv_cache_memory_bytes (--kv-cache-memory-bytes)"
        )
    x = [p.context_length for p in points]
    baseline = [p.baseline_requests or 0 for p in points]
    hisparse = [p.hisparse_requests or 0 for p in points]

    fig = Figure(figsize=(7.5, 4.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(x, baseline, color="tab:gray", linestyle="--", label="without HiSparse")
    ax.plot(x, hisparse, color="tab:blue", label="with HiSparse")
    for limit, marker in _MARKERS.items():
        xs = [p.context_length for p in points if p.hisparse_limit == limit]
        ys = [p.hisparse_requests or 0 for p in points if p.hisparse_limit == limit]
        if xs:
            ax.scatter(xs, ys, marker=marker, color="tab:blue", zorder=3, label=f"limit: {limit}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{c // 1024}K" if c % 1024 == 0 else str(c) for c in x], rotation=45)
    ax.set_xlabel("context length (tokens per request)")
    ax.set_ylabel("concurrent requests per DP replica")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    model = plan.model.architecture if plan.model and plan.model.architecture else "model"
    gpu, host = plan.gpu, plan.host
    ax.set_title(
        title
        or f"{model}, TP {gpu.tensor_parallel_size}, {plan.sizes.kv_cache_dtype}, "
        f"host_pool_gib {host.host_pool_gib:g}",
        fontsize=10,
    )
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, format="png")
    return out
