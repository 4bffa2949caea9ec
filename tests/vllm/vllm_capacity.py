"""vLLM 0.33.0's own KV-cache capacity figures for a DSA serve configuration, on CPU.

``vllm_capacity(args, available_memory)`` builds the ``VllmConfig`` as
``vllm serve`` does (``vllm_pipeline``: its parser, ``create_engine_config()``,
the block size the backends fix), registers the per-layer KV-cache specs the
model runner collects for a DeepSeek-V3.2 / GLM-5 (``glm_moe_dsa``) model, and
runs vLLM's own planning functions on them:

- ``get_kv_cache_groups`` (v1/core/kv_cache_planning.py:1120-1140, which calls
  ``get_hisparse_kv_cache_groups``, v1/hisparse/layout.py:41-75, with HiSparse);
- ``get_kv_cache_config_from_groups(vllm_config, groups, available_memory)``
  (kv_cache_planning.py:640-700; with HiSparse ``get_hisparse_kv_cache_config``,
  layout.py:325-381): ``num_blocks`` and ``hisparse_host_num_blocks``;
- ``get_kv_cache_capacity`` / ``get_max_concurrency_for_kv_cache_config``
  (v1/core/kv_cache_utils.py:1061-1128): the admission concurrency;
- ``get_hisparse_steady_state_concurrency`` (layout.py:384-420).

What vLLM does not expose, written here: the layer specs themselves (the model
is never built). Each is built with the arguments the layer passes:

- one ``MLAAttentionSpec`` per sparse-MLA layer, as ``MLAAttention.get_kv_cache_spec``
  builds it (model_executor/layers/attention/mla_attention.py:1371-1399):
  ``head_size = kv_lora_rank + qk_rope_head_dim`` (the MLA layer's head size),
  the stored cache dtype, ``state_content_bytes`` for the ds_mla layouts,
  ``topk_buffer_width = index_topk`` (the width of the model's
  ``topk_indices_buffer``, models/deepseek_v32/nvidia/model.py:192-197, read at
  mla_attention.py:567), ``is_index_group_leader = indexer is not None``;
- one ``MLAAttentionSpec`` (``cache_role=INDEXER``, uint8,
  ``head_dim = index_head_dim + index_head_dim // 128 * 4``) per layer that
  has an indexer, as ``DeepseekV32IndexerCache.get_kv_cache_spec`` builds it
  (model_executor/models/deepseek_v2.py:659-667; the head dim from
  models/deepseek_v32/attention.py:94-99);
- which layers have an indexer: IndexShare's rule in ``DeepseekV32Attention``
  (models/deepseek_v32/attention.py:166-190): layer ``i`` skips its top-k
  (no indexer) when ``max(i - index_skip_topk_offset + 1, 0) %
  index_topk_freq != 0`` (or ``index_topk_pattern[i] == "S"``), and MTP draft
  layers (``i >= num_hidden_layers``) always build one;
- the MTP draft layers: ``num_nextn_predict_layers`` more layers, numbered
  after the target's, with ``--speculative-config`` method ``mtp``
  (models/deepseek_v32/nvidia/mtp.py).

GLM-5.3 (``glm5_next``, linear-attention layers mixed in) is left out: its
linear-attention state sets the block size (hisparse_rs reports
``hybrid_block_size_unknown``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import vllm_pipeline


@dataclass(frozen=True)
class Capacity:
    """vLLM's figures for one configuration at one available memory (bytes per GPU)."""

    block_size: int
    num_blocks: int
    max_concurrency: float
    kv_cache_size_tokens: int
    host_num_blocks: int | None = None
    host_block_stride: int | None = None
    steady_state_concurrency: float | None = None
    resident_groups: int = 0
    max_model_len: int = 0


def engine_config(args: Mapping[str, Any]) -> Any:
    """The ``VllmConfig`` ``vllm serve`` builds for a ServeArgs JSON form, block size fixed."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    with vllm_pipeline._environment(args):
        ns = vllm_pipeline.serve_parser().parse_args(vllm_pipeline.serve_argv(args))
        # As vllm serve builds it (entrypoints/cli/serve.py:312-313): the usage
        # context sets the max_num_batched_tokens / max_num_seqs defaults.
        engine_args = AsyncEngineArgs.from_cli_args(ns)
        vllm_config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        loaded = vllm_pipeline._model_load(vllm_config)
    return vllm_config, loaded


def has_indexer(text: Any, layer_id: int) -> bool:
    """Whether layer ``layer_id`` builds an indexer (models/deepseek_v32/attention.py:166-190)."""
    freq = getattr(text, "index_topk_freq", 1) or 1
    pattern = getattr(text, "index_topk_pattern", None)
    offset = getattr(text, "index_skip_topk_offset", 2)
    if pattern is None:
        skip = max(layer_id - offset + 1, 0) % freq != 0
    elif 0 <= layer_id < len(pattern):
        skip = pattern[layer_id] == "S"
    else:
        skip = False
    return not skip or layer_id >= text.num_hidden_layers


def layer_specs(vllm_config: Any, loaded: tuple[Any, str, int, int]) -> dict[str, Any]:
    """The KV-cache spec of each attention layer, as the model runner collects them."""
    import torch
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.kv_cache_interface import MLAAttentionSpec, SparseCacheRole, get_kv_quant_mode

    _, cache_dtype, block_size, head_size = loaded
    model_config = vllm_config.model_config
    text = model_config.hf_text_config
    layers = text.num_hidden_layers
    spec_config = vllm_config.speculative_config
    if spec_config is not None and spec_config.method == "mtp":
        layers += getattr(text, "num_nextn_predict_layers", 0) or 0
    index_head_dim = text.index_head_dim
    specs: dict[str, Any] = {}
    for i in range(layers):
        indexer = has_indexer(text, i)
        specs[f"model.layers.{i}.self_attn.attn"] = MLAAttentionSpec(
            block_size=block_size,
            num_kv_heads=1,
            max_tp_shards=1,
            head_size=head_size,
            dtype=kv_cache_dtype_str_to_dtype(cache_dtype, model_config),
            cache_dtype_str=cache_dtype,
            kv_quant_mode=get_kv_quant_mode(cache_dtype),
            state_content_bytes={"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(cache_dtype),
            topk_buffer_width=text.index_topk,
            is_index_group_leader=indexer,
            non_causal_multi_token_decode=False,
        )
        if indexer:
            specs[f"model.layers.{i}.self_attn.indexer.k_cache"] = MLAAttentionSpec(
                block_size=block_size,
                num_kv_heads=1,
                max_tp_shards=1,
                head_size=index_head_dim + index_head_dim // 128 * 4,
                dtype=torch.uint8,
                cache_role=SparseCacheRole.INDEXER,
            )
    return specs


def resolve_layout(vllm_config: Any, sparse_backend: Any, specs: dict[str, Any]) -> None:
    """The KV cache layout the engine core resolves before planning (v1/engine/core.py:286),
    from the layouts the model's backends support (worker_base.py:107-110)."""
    from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerBackend
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout

    names = [
        layout.name for layout in get_supported_kv_cache_layouts([sparse_backend, DeepseekV32IndexerBackend])
    ]
    resolve_kv_cache_layout(vllm_config, [names], list(specs.values()))


def capacity(vllm_config: Any, specs: dict[str, Any], available_memory: int) -> Capacity:
    """vLLM's own planning functions on ``specs`` with ``available_memory`` bytes per GPU."""
    from vllm.v1.core.kv_cache_planning import get_kv_cache_config_from_groups, get_kv_cache_groups
    from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity
    from vllm.v1.hisparse.layout import get_hisparse_steady_state_concurrency
    from vllm.v1.kv_cache_interface import HiSparseResidentSpec

    groups = get_kv_cache_groups(vllm_config, dict(specs))
    config = get_kv_cache_config_from_groups(vllm_config, groups, available_memory)
    tokens, concurrency = get_kv_cache_capacity(vllm_config, config)
    hisparse = config.hisparse_host_num_blocks is not None
    return Capacity(
        block_size=vllm_config.cache_config.block_size,
        num_blocks=config.num_blocks,
        max_concurrency=concurrency,
        kv_cache_size_tokens=tokens,
        host_num_blocks=config.hisparse_host_num_blocks,
        host_block_stride=config.hisparse_host_block_stride,
        steady_state_concurrency=(
            get_hisparse_steady_state_concurrency(vllm_config, config) if hisparse else None
        ),
        resident_groups=sum(
            isinstance(g.kv_cache_spec, HiSparseResidentSpec) for g in config.kv_cache_groups
        ),
        max_model_len=vllm_config.model_config.max_model_len,
    )


def vllm_capacity(args: Mapping[str, Any], available_memory: int) -> Capacity:
    """vLLM 0.33.0's capacity for ``args`` (a ServeArgs JSON form) at ``available_memory`` bytes."""
    vllm_config, loaded = engine_config(args)
    with vllm_pipeline._environment(args):
        specs = layer_specs(vllm_config, loaded)
        resolve_layout(vllm_config, loaded[0], specs)
        return capacity(vllm_config, specs, available_memory)
