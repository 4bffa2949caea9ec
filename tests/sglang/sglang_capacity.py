"""SGLang 0.5.23's own KV pool sizing for one `sglang serve` launch and a KV budget, on CPU.

`sglang_capacity(argv, available_bytes)` resolves the launch as SGLang does
(`prepare_server_args`, `resolve_once`, `check_server_args`, the server args
published to the runtime context, model_executor/model_runner.py:656-689's
inputs), builds SGLang's real `KVCacheConfigurator`
(mem_cache/kv_cache_configurator.py:319-387) for the target worker, and runs
SGLang's own sizing on the budget, which is what
`KVCacheConfigurator._profile_available_bytes` returns (the KV room,
kv_cache_configurator.py:2990-3048):

- `config_from_budget(available_bytes)` (kv_cache_configurator.py:3192-3227):
  `create_memory_pool_configurator` (model_executor/pool_configurator.py:1715-1725)
  -> `DefaultPoolConfigurator.calculate_pool_sizes` (pool_configurator.py:637-647,
  the cell from `_compute_cell_size` :340-536 and, with EAGLE/NEXTN, the
  draft's layers :262-311), then `_apply_token_constraints` (`--max-total-tokens`,
  :3112-3117): `max_total_num_tokens`, the device KV slots;
- `resolve_max_num_reqs(max_total_num_tokens)` (kv_cache_configurator.py:3119-3172):
  `max_running_requests` per attention-DP worker;
- with HiSparse, the host pool the coordinator builds from those slots
  (`MLATokenToKVPoolHost(device_capacity_tokens=max_total_num_tokens, ...)`,
  managers/hisparse_coordinator.py:618-632; sized in pool_host/base.py:221-229)
  in SGLang's allocator-only mode (`sglang_oracle._host_pool`): its tokens and bytes.

What SGLang does not expose without a loaded model, written here (each from
the wheel): the `ModelLayerInfo` of an unsplit target (`start_layer` 0,
`end_layer = num_effective_layers = num_hidden_layers`:
model_executor/model_runner_components/layer_setup.py:140-180 with PP 1 and
no draft worker; the MTP layers are the draft worker's), `model=None` (the
kv dtype's `auto` reads a loaded model's `quant_config.kv_cache_quant_algo`,
mem_cache/kv_cache_dtype.py:49-59; the checkpoints here have none), and the
CPU device. Launches with PP > 1 are not sized here (`_apply_token_constraints`
all-reduces over the PP group, :3119-3127).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import sglang_oracle


@dataclass(frozen=True)
class SglangCapacity:
    """SGLang's figures for one launch at one KV budget (bytes per GPU)."""

    max_total_num_tokens: int
    max_running_requests: int
    cell_size: int
    page_size: int
    host_tokens: int | None = None
    host_pool_bytes: int | None = None


class NotSized(Exception):
    """The launch does not reach pool sizing in SGLang (its verdict says why)."""


def _server_args(argv: list[str]) -> Any:
    """SGLang's resolved and checked ServerArgs, published to the runtime context."""
    from sglang.srt.runtime_context import get_context
    from sglang.srt.server_args import prepare_server_args

    server_args = prepare_server_args(list(argv))
    sglang_oracle._quiet_logging()
    server_args.resolve_once()
    server_args.check_server_args()
    get_context().set_server_args(server_args)
    return server_args


def _configurator(server_args: Any) -> Any:
    """SGLang's KVCacheConfigurator for the target worker, built as the model
    runner builds it (model_executor/model_runner.py:656-689), from the
    resolved args alone (module docstring)."""
    from sglang.srt.arg_groups.overrides import model_config_of
    from sglang.srt.configs.model_config import AttentionArch
    from sglang.srt.mem_cache import kv_cache_dtype
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.runtime_context import get_model, get_parallel, get_schedule, get_spec
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    model_config = model_config_of(server_args)
    spec_algorithm = SpeculativeAlgorithm.from_string(get_spec().speculative_algorithm)
    # model_runner.py:1551-1577 (configure_kv_cache_dtype), model=None
    resolved_dtype, dtype = kv_cache_dtype.configure_kv_cache_dtype(
        server_args_kv_cache_dtype=get_model().kv_cache_dtype,
        model=None,
        model_dtype=model_config.dtype,
        is_draft_worker=False,
        is_dflash=spec_algorithm.is_dflash_family(),
        speculative_draft_attention_backend=None,
        speculative_draft_kv_cache_dtype=get_spec().speculative_draft_kv_cache_dtype,
    )
    layers = model_config.num_hidden_layers
    return KVCacheConfigurator(
        device="cpu",
        gpu_id=0,
        attn_dp_size=get_parallel().attn_dp_size,
        pp_size=1,
        pp_group=None,
        model=None,
        model_config=model_config,
        server_args=server_args,
        kv_cache_dtype=dtype,
        kv_cache_dtype_str=resolved_dtype if resolved_dtype is not None else get_model().kv_cache_dtype,
        model_dtype=model_config.dtype,
        page_size=get_schedule().page_size,
        sliding_window_size=None,
        spec_algorithm=spec_algorithm,
        is_draft_worker=False,
        post_capture_kv_active=False,
        spec_aux_config=resolve_spec_aux_hidden_state_config(
            server_args=server_args,
            model_config=model_config,
            spec_algorithm=spec_algorithm,
            is_draft_worker=False,
        ),
        is_hybrid_swa=model_config.is_hybrid_swa,
        is_hybrid_swa_compress=model_config.is_hybrid_swa_compress,
        use_mla_backend=model_config.attention_arch == AttentionArch.MLA,
        layer_info=ModelLayerInfo(start_layer=0, end_layer=layers, num_effective_layers=layers),
        forward_stream=None,
        req_to_token_pool=None,
        token_to_kv_pool_allocator=None,
        memory_pool_config=None,
    )


def sglang_capacity(argv: list[str], available_bytes: list[int]) -> list[SglangCapacity]:
    """SGLang 0.5.23's pool sizes for `sglang serve ARGV`, one for each KV room
    of `available_bytes` (bytes per GPU); the launch is resolved once.

    Raises NotSized when SGLang refuses the launch before sizing (argparse,
    resolve, check) or the launch is out of what is sized here (PP > 1)."""
    environ = dict(os.environ)
    try:
        return _capacity(argv, available_bytes)
    finally:
        os.environ.clear()
        os.environ.update(environ)


def _capacity(argv: list[str], rooms: list[int]) -> list[SglangCapacity]:
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.runtime_context import get_memory, get_parallel, get_schedule

    try:
        server_args = _server_args(argv)
    except (Exception, SystemExit) as exc:
        raise NotSized(f"{type(exc).__name__}: {exc}") from exc
    if get_parallel().pp_size > 1:
        raise NotSized("PP > 1: the token capacity is all-reduced over the PP group")
    kvc = _configurator(server_args)
    cell = create_memory_pool_configurator(kvc)._cell_size
    ratio = None
    if get_memory().enable_hisparse:
        from sglang.srt.mem_cache.sparsity.factory import parse_hisparse_config

        ratio = parse_hisparse_config().host_to_device_ratio
    out = []
    for room in rooms:
        config = kvc.config_from_budget(room)
        tokens = config.max_total_num_tokens
        host_tokens = host_bytes = None
        if ratio is not None:
            pool = sglang_oracle._host_pool(server_args, ratio, tokens)
            host_tokens = int(pool.size)
            host_bytes = int(pool.size * pool.size_per_token)
        out.append(
            SglangCapacity(
                max_total_num_tokens=int(tokens),
                max_running_requests=int(kvc.resolve_max_num_reqs(tokens)),
                cell_size=int(cell),
                page_size=int(get_schedule().page_size),
                host_tokens=host_tokens,
                host_pool_bytes=host_bytes,
            )
        )
    return out
