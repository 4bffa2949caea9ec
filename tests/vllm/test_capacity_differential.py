"""hisparse_rs.plan's capacity figures equal vLLM 0.33.0's own capacity code, or name a deviation.

Hypothesis draws valid HiSparse launches (every model in tests/data/models
HiSparse takes and vLLM's model code lays out here: DeepSeek-V3.2, GLM-5,
GLM-5-FP8, GLM-5.1, GLM-5.2 with IndexShare; block size, KV cache dtype,
``device_buffer_size``, ``max_model_len``, ``max_num_seqs``, TP / DP, MTP,
``host_pool_gib``; shared pools (TP > 1) and private ones (TP 1)) and, for
each, several available-memory values (bytes of KV room per GPU). Each launch
runs through vLLM 0.33.0's planning functions (``vllm_capacity``: the layer
specs its model runner registers, ``get_kv_cache_groups``,
``get_kv_cache_config_from_groups``, ``get_kv_cache_capacity``,
``get_hisparse_steady_state_concurrency``), with HiSparse and without it (the
baseline), and through ``hisparse_rs.plan(..., kv_cache_memory_bytes=room)``
(the KV room as vLLM's flag gives it). Compared:

- ``num_blocks`` with HiSparse = ``plan.gpu.hisparse_blocks``;
- ``hisparse_host_num_blocks`` = ``plan.host.host_blocks``;
- ``num_blocks`` without HiSparse = ``plan.gpu.baseline_blocks``;
- the baseline concurrency, ``get_kv_cache_capacity``'s, floored and capped
  at ``max_num_seqs`` = ``plan.at_context.baseline_requests``;
- the steady-state concurrency's GPU part (``get_hisparse_steady_state_concurrency``
  with the host pool unbounded), floored = ``plan.at_context.gpu_limit``;
- its host part (the GPU pool unbounded), floored = ``plan.at_context.host_limit``;
- the admission concurrency vLLM logs ("Maximum concurrency", ``get_kv_cache_capacity``)
  floored = ``plan.at_context.hisparse_requests``, or a named deviation
  (``DEVIATIONS``): the plan counts requests at steady state, as HiSparse serves them.

The figures are printed at the end of the session (conftest.py).
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from vllm_capacity import Capacity, engine_config, layer_specs, resolve_layout

import hisparse_rs

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"
#: The models HiSparse takes whose layers vllm_capacity registers (GLM-5.3's
#: linear-attention layers are not modelled: hybrid_block_size_unknown).
HISPARSE_MODELS = ["deepseek-v3.2", "glm-5", "glm-5-fp8", "glm-5.1", "glm-5.2"]
GIB = 2**30
#: The harness's GPU (vllm_pipeline: an H200, 141 GiB) as the planner names it:
#: its memory sets vLLM's max_num_seqs and max_num_batched_tokens defaults.
PLAN_GPU = "h200"

#: Named deviations: figure -> why the plan's differs from vLLM's.
DEVIATIONS = {
    "admission_concurrency": (
        "vLLM logs the admission concurrency (every request holding its whole resident window, "
        "get_max_concurrency_for_kv_cache_config); the plan counts requests at steady state "
        "(get_hisparse_steady_state_concurrency), never fewer than the baseline"
    ),
}

#: What the session saw; conftest.py prints it.
FIGURES: Counter[str] = Counter()

# Engine configs built once per launch (the KV room varies around them).
_CONFIGS: dict[str, Any] = {}


def _max_positions(model: str) -> int:
    config = json.loads((MODELS / model / "config.json").read_text())
    return int(config.get("text_config", config)["max_position_embeddings"])


@st.composite
def launches(draw: st.DrawFn) -> dict[str, Any]:
    """A launch hisparse_rs.check takes (the buffer holds every decode query's top-k,
    the pool one request, max_model_len within the model's positions)."""
    model = draw(st.sampled_from(HISPARSE_MODELS))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    dp = draw(st.sampled_from([1, 1, 2])) if tp <= 4 else 1
    max_model_len = draw(st.sampled_from([4096, 10000, 32768, 65536, 131072, _max_positions(model)]))
    pools = (
        [4, 16, 48, 128]
        if max_model_len <= 32768
        else [16, 48, 128]
        if max_model_len <= 65536
        else [48, 128]
        if max_model_len <= 262144
        else [128, 256]
    )
    args: dict[str, Any] = {
        "model": str(MODELS / model),
        "tensor_parallel_size": tp,
        "kv_transfer_config": {
            "kv_connector": "HiSparseConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"host_pool_gib": draw(st.sampled_from(pools))},
        },
        "max_model_len": max_model_len,
    }
    seqs = draw(st.sampled_from([None, 8, 64, 256, 1024]))
    if seqs is not None:
        args["max_num_seqs"] = seqs
    if dp > 1:
        args["data_parallel_size"] = dp
    dtype = draw(st.sampled_from([None, "fp8_ds_mla", "fp8", "auto"]))
    if dtype is not None:
        args["kv_cache_dtype"] = dtype
    block = draw(st.sampled_from([None, 64]))
    if block is not None:
        args["block_size"] = block
    draft = draw(st.sampled_from([0, 0, 1, 2, 3]))
    if draft:
        args["speculative_config"] = {"method": "mtp", "num_speculative_tokens": draft}
    # device_buffer_size holds max_decode_query_len x index_topk (index_topk 2048 here)
    buffer = draw(st.sampled_from([None, 1, 2, 3]))
    if buffer is not None:
        args["attention_config"] = {"hisparse_config": {"device_buffer_size": (draft + buffer) * 2048}}
    return args


def _config(args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from vllm_pipeline import _environment

    key = repr(sorted(args.items()))
    if key not in _CONFIGS:
        vllm_config, loaded = engine_config(args)
        with _environment(args):
            specs = layer_specs(vllm_config, loaded)
            resolve_layout(vllm_config, loaded[0], specs)
        if len(_CONFIGS) >= 4:
            del _CONFIGS[next(iter(_CONFIGS))]
        _CONFIGS[key] = (vllm_config, specs)
    return _CONFIGS[key]


def vllm_figures(args: dict[str, Any], room: int) -> tuple[Capacity, dict[str, float]]:
    """vLLM's capacity at ``room`` and the steady state's GPU and host parts (vLLM's functions)."""
    from vllm.v1.core.kv_cache_planning import get_kv_cache_config_from_groups, get_kv_cache_groups
    from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity
    from vllm.v1.hisparse.layout import get_hisparse_steady_state_concurrency
    from vllm.v1.kv_cache_interface import HiSparseResidentSpec
    from vllm_pipeline import _environment

    vllm_config, specs = _config(args)
    with _environment(args):
        groups = get_kv_cache_groups(vllm_config, dict(specs))
        config = get_kv_cache_config_from_groups(vllm_config, groups, room)
        tokens, concurrency = get_kv_cache_capacity(vllm_config, config)
        unbounded_host = copy.copy(config)
        unbounded_host.hisparse_host_num_blocks = 2**62
        unbounded_gpu = copy.copy(config)
        unbounded_gpu.num_blocks = 2**62
        parts = {
            "steady": get_hisparse_steady_state_concurrency(vllm_config, config),
            "steady_gpu": get_hisparse_steady_state_concurrency(vllm_config, unbounded_host),
            "host": get_hisparse_steady_state_concurrency(vllm_config, unbounded_gpu),
        }
    cap = Capacity(
        block_size=vllm_config.cache_config.block_size,
        num_blocks=config.num_blocks,
        max_concurrency=concurrency,
        kv_cache_size_tokens=tokens,
        host_num_blocks=config.hisparse_host_num_blocks,
        host_block_stride=config.hisparse_host_block_stride,
        steady_state_concurrency=parts["steady"],
        resident_groups=sum(
            isinstance(g.kv_cache_spec, HiSparseResidentSpec) for g in config.kv_cache_groups
        ),
        max_model_len=vllm_config.model_config.max_model_len,
    )
    return cap, parts


def baseline_args(args: dict[str, Any]) -> dict[str, Any]:
    """The same launch without HiSparse (no connector, no hisparse_config)."""
    return {k: v for k, v in args.items() if k not in ("kv_transfer_config", "attention_config")}


def compare(args: dict[str, Any], room: int) -> list[str]:
    """The figures that differ (deviations named in DEVIATIONS allowed by the caller)."""
    model = args["model"]
    serve = {k: v for k, v in args.items() if k != "model"}
    plan = hisparse_rs.plan(model, kv_cache_memory_bytes=room, gpu=PLAN_GPU, **serve)
    cap, parts = vllm_figures(args, room)
    base_cap = vllm_baseline(args, room)
    at = plan.at_context
    seqs = plan.gpu.max_num_seqs
    assert at.context_length == cap.max_model_len
    base_requests = min(math.floor(base_cap.max_concurrency), seqs)
    steady = max(min(math.floor(parts["steady"]), seqs), base_requests)
    found = {
        "num_blocks": (cap.num_blocks, plan.gpu.hisparse_blocks),
        "hisparse_host_num_blocks": (cap.host_num_blocks, plan.host.host_blocks),
        "host_block_stride": (cap.host_block_stride, plan.host.host_block_stride),
        "baseline_num_blocks": (base_cap.num_blocks, plan.gpu.baseline_blocks),
        "baseline_concurrency": (base_requests, at.baseline_requests),
        "steady_state_gpu": (math.floor(parts["steady_gpu"]), at.gpu_limit),
        "steady_state_host": (math.floor(parts["host"]), at.host_limit),
        "steady_state_requests": (steady, at.hisparse_requests),
        "admission_concurrency": (
            max(min(math.floor(cap.max_concurrency), seqs), base_requests),
            at.hisparse_requests,
        ),
    }
    return [f"{k}: vLLM {v[0]}, plan {v[1]}" for k, v in found.items() if v[0] != v[1]]


def vllm_baseline(args: dict[str, Any], room: int) -> Capacity:
    from vllm.v1.core.kv_cache_planning import get_kv_cache_config_from_groups, get_kv_cache_groups
    from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity
    from vllm_pipeline import _environment

    base = baseline_args(args)
    vllm_config, specs = _config(base)
    with _environment(base):
        groups = get_kv_cache_groups(vllm_config, dict(specs))
        config = get_kv_cache_config_from_groups(vllm_config, groups, room)
        tokens, concurrency = get_kv_cache_capacity(vllm_config, config)
    return Capacity(
        block_size=vllm_config.cache_config.block_size,
        num_blocks=config.num_blocks,
        max_concurrency=concurrency,
        kv_cache_size_tokens=tokens,
        max_model_len=vllm_config.model_config.max_model_len,
    )


rooms = st.lists(st.integers(GIB // 4, 120 * GIB), min_size=5, max_size=5)


@settings(max_examples=110, deadline=None, database=None)
@given(args=launches(), memories=rooms)
def test_plan_capacity_equals_vllm(args: dict[str, Any], memories: list[int]) -> None:
    report = hisparse_rs.check(
        args["model"], gpu="NVIDIA H200", **{k: v for k, v in args.items() if k != "model"}
    )
    FIGURES["configurations drawn"] += 1
    # The KV room is drawn, not derived from the weights (vLLM sizes the
    # cache from the room it is given, as with --kv-cache-memory-bytes):
    # a launch whose weights leave no room on one H200 (DeepSeek-V3.2 below
    # TP 8, GLM-5 in bf16) still has vLLM's KV arithmetic at a drawn room.
    refusals = {e.code for e in report.errors} - {"no_gpu_kv_room"}
    if refusals:
        FIGURES["refused by the check (skipped)"] += 1
        return
    for room in memories:
        FIGURES["launches"] += 1
        diffs = compare(args, room)
        if not diffs:
            FIGURES["agree"] += 1
            continue
        unnamed = [d for d in diffs if d.split(":")[0] not in DEVIATIONS]
        assert not unnamed, f"{args} at {room} bytes: {unnamed}"
        for d in diffs:
            FIGURES[f"deviation {d.split(':')[0]}"] += 1


#: issue 21: at least this many launches compared per CI run.
MIN_LAUNCHES = 500


def test_enough_launches_were_compared() -> None:
    """Runs after the differential above (pytest keeps a module's order): a
    generator or a gate that skips most launches must not pass quietly."""
    assert FIGURES["launches"] >= MIN_LAUNCHES, dict(FIGURES)
