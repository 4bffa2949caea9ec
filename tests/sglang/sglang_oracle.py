"""SGLang 0.5.23's own verdict on one `sglang serve` launch, on a CPU machine.

`sglang_verdict(argv)` runs SGLang's real code, stage by stage, and stops at
the first refusal, as a launch on GPUs would (the stage names are the
`stage` field hisparse_rs's diagnostics carry):

- argparse          `prepare_server_args(argv)` (srt/server_args.py:668-720);
                    argparse's `sys.exit(2)` is caught, its stderr kept.
- resolve           `ServerArgs.resolve_once()` on a fresh record
                    (server_args.py:244-297 -> arg_groups/pipeline.py); a record
                    whose resolution failed cannot be retried (server_args.py:253-260).
- check             `ServerArgs.check_server_args()` (server_args.py:508-511 ->
                    arg_groups/validation_hook.py:172, hisparse_hook.py:87-165),
                    then the publish that follows it before any process starts
                    (`set_server_args`, entrypoints/engine.py:1165-1175: the
                    derived parallel widths, srt/runtime_context.py:142-155).
- after_weights_load `parse_hisparse_config()` (mem_cache/sparsity/factory.py:62-117),
                    first called while the KV pool is sized, after the weights
                    load (model_executor/pool_configurator.py:584-586). It takes
                    no argument: it reads the published `hisparse_config`. Then
                    the indexer cell size that multiplies by its
                    host_to_device_ratio (:633-635), replicated on SGLang's helpers.
- pool_build        `HiSparseTokenToKVPoolAllocator(...)` itself, on CPU
                    (mem_cache/allocator/hisparse.py:22-80), with the parsed
                    `host_to_device_ratio`: a float ratio fails in its tensor
                    constructors, a zero ratio builds a zero-capacity pool.
- coordinator_init  `HiSparseCoordinator.__init__`'s checks in its own order
                    (managers/hisparse_coordinator.py:534-700): the host pool
                    (`MLATokenToKVPoolHost` sizing and `HostKVCache._allocate_host_buffer`'s
                    RAM check, pool_host/base.py:237-257; only when
                    `host_ram_bytes` and `device_kv_slots` are given), the
                    speculative swap manager (`HiSparseSpecSwapManager`, :142-249,
                    SGLang's class on `meta` tensors), then
                    `configure_spec_scratch` on the allocator of pool_build
                    (allocator/hisparse.py:82-93: device_buffer_size + page_size
                    must be a page multiple).
- first_decode      without speculation, the swap-in wrapper's assert
                    `hot_buffer_size >= num_top_k` (kernels/ops/kvcache/hisparse.py:301-303),
                    with hot_buffer_size = device_buffer_size
                    (hisparse_coordinator.py:1522) and num_top_k = the model's
                    `index_topk` (model_runner.py:1036-1043); with speculation,
                    the spec kernel instead (no such assert; its JIT build
                    static_asserts 1 < device_buffer_size <= 32768,
                    jit/csrc/kvcacheio/hisparse_spec.cuh:73-74). CUDA JIT
                    modules, so both are replicated here, messages verbatim (the
                    static_assert's text, inside whatever the JIT build raises).

- request           the P/D decode side's first transferred request: HiSparse
                    with a draft KV pool needs the Mooncake transfer backend
                    (srt/disaggregation/decode.py:1787-1811), replicated.

Modelled for DSA models (DeepSeek-V3.2, GLM-5): DeepSeek-V4 and MiniMax-M3
HiSparse use other allocators; for them the verdict ends after
after_weights_load (`"modelled_to"` says so). Not modelled at `request`:
beam search and the other per-request refusals.

What is stubbed, and why (nothing else is):
- `torch.cuda.get_device_capability` answers `sm` (there is no GPU; SGLang
  reads it at arg_groups/model_hook.py:341 for every DSA launch to pick the
  `auto` kv dtype, overrides.py:532-540). Installed once by `install_sm_stub`.
- For the host-RAM check only, while it runs: `available_host_memory_bytes`
  answers `host_ram_bytes` and `ranks_per_host` answers launch world size /
  nnodes (pool_host/base.py:68-107: on this machine torch.distributed is not
  initialised, so SGLang's own function would answer 1).
- The host pool is built in SGLang's allocator-only mode (an `MLAHostAllocation`,
  pool_host/mla.py:80-90, 122-243), so its sizing runs but nothing is pinned;
  `_allocate_host_buffer` is then called on it with `init_kv_buffer` answering None.
- The speculative swap manager gets a stand-in coordinator carrying the five
  attributes it reads (mem_pool_device.layer_num = 1, req_to_token_pool with
  `max_running_requests + 1` rows (memory_pool.py:402), device "meta",
  is_dsv4_hisparse False, top_k = index_topk, device_buffer_size): its checks
  come first (:174-188) and read no layer count; meta tensors allocate nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

STAGES = (
    "argparse",
    "resolve",
    "check",
    "after_weights_load",
    "pool_build",
    "coordinator_init",
    "first_decode",
    "request",
)

MODELS_DIR = Path(__file__).resolve().parent.parent / "data" / "models"

# The SM the stub answers; sglang_verdict sets it per call.
_SM: tuple[int, int] = (9, 0)
_MODEL_TMP = Path(tempfile.mkdtemp(prefix="hisparse-sglang-models-"))
atexit.register(shutil.rmtree, _MODEL_TMP, True)

# When SGLang's max_running_requests is unset, it is sized from GPU memory
# (model_executor/pool_configurator.py:1565-1574 approximates
# ModelRunner._resolve_max_num_reqs: max(min(estimate, 4096), 2048), capped at
# full_token // 2). Without a GPU the oracle takes that floor.
AUTO_MAX_RUNNING_REQUESTS = 2048


def install_sm_stub() -> None:
    """Replace torch.cuda.get_device_capability by one answering the chosen SM."""
    import torch

    def get_device_capability(device: object = None) -> tuple[int, int]:
        return _SM

    torch.cuda.get_device_capability = get_device_capability


def import_sglang() -> None:
    """Import every SGLang module the oracle calls (12-23 s on 2 busy cores)."""
    install_sm_stub()
    import sglang.kernels.ops.kvcache.hisparse
    import sglang.srt.arg_groups.pipeline
    import sglang.srt.managers.hisparse_coordinator
    import sglang.srt.mem_cache.allocator.hisparse
    import sglang.srt.mem_cache.pool_host.mla
    import sglang.srt.mem_cache.sparsity.factory
    import sglang.srt.model_executor.pool_configurator
    import sglang.srt.server_args  # noqa: F401


def model_dir(name: str) -> str:
    """A model directory holding only the real config.json of tests/data/models/NAME."""
    target = _MODEL_TMP / name
    if not target.exists():
        target.mkdir(parents=True)
        shutil.copy(MODELS_DIR / name / "config.json", target / "config.json")
    return str(target)


def _refusal(
    verdict: dict[str, Any], stage: str, exc: BaseException, message: str | None = None
) -> dict[str, Any]:
    verdict.update(
        valid=False,
        stage=stage,
        exception=type(exc).__name__,
        message=message if message is not None else str(exc),
    )
    return verdict


def _argparse_message(stderr: str) -> str:
    """argparse's one-line error (`sglang serve: error: ...`), without the usage block."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if ": error: " in line]
    return errors[-1] if errors else (lines[-1] if lines else "")


def sglang_verdict(
    argv: list[str],
    *,
    sm: tuple[int, int] = (9, 0),
    host_ram_bytes: int | None = None,
    device_kv_slots: int | None = None,
) -> dict[str, Any]:
    """SGLang 0.5.23's verdict on `sglang serve ARGV` (see the module docstring).

    argv: the arguments after `sglang serve` (pass `--device cuda`, and a
    model directory from `model_dir`). sm: what the GPU answers
    (9, 0) H100/H200, (10, 0) B200. host_ram_bytes: the node's available RAM
    (SGLang's `available_host_memory_bytes`); with `device_kv_slots` (the
    HiSparse device pool's token slots, which SGLang sizes from GPU memory)
    the host-pool RAM check of coordinator_init runs, else it is skipped.

    Returns {"valid", "stage" (first refusal, one of STAGES, or None),
    "message", "exception", "resolved" (SGLang's resolved values, those known
    at the stage reached), "modelled_to" (the last stage run)}.
    """
    # A launch is a fresh process: SGLang's resolution sets environment
    # variables (handle_environment_variables, the DSA dense threshold, ...)
    # that must not reach the next verdict.
    environ = dict(os.environ)
    try:
        return _verdict(argv, sm=sm, host_ram_bytes=host_ram_bytes, device_kv_slots=device_kv_slots)
    finally:
        os.environ.clear()
        os.environ.update(environ)


def _verdict(
    argv: list[str],
    *,
    sm: tuple[int, int],
    host_ram_bytes: int | None,
    device_kv_slots: int | None,
) -> dict[str, Any]:
    global _SM
    _SM = (int(sm[0]), int(sm[1]))
    verdict: dict[str, Any] = {
        "valid": True,
        "stage": None,
        "message": None,
        "exception": None,
        "resolved": {},
        "modelled_to": "argparse",
    }
    resolved: dict[str, Any] = verdict["resolved"]

    from sglang.srt.server_args import prepare_server_args

    # S0 argparse
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            server_args = prepare_server_args(list(argv))
    except SystemExit as exc:
        return _refusal(verdict, "argparse", exc, _argparse_message(stderr.getvalue()))
    except Exception as exc:
        return _refusal(verdict, "argparse", exc)
    _quiet_logging()

    # S1 resolve
    verdict["modelled_to"] = "resolve"
    try:
        server_args.resolve_once()
    except Exception as exc:
        return _refusal(verdict, "resolve", exc)
    resolved.update(_resolved_settings(server_args))

    # S2 check: check_server_args, then the launcher publishes the arguments
    # (entrypoints/engine.py:1165-1175: set_server_args derives the parallel
    # widths, a ZeroDivisionError for --ep-size 0), before any process starts.
    from sglang.srt.runtime_context import get_context

    verdict["modelled_to"] = "check"
    try:
        server_args.check_server_args()
        get_context().set_server_args(server_args)
    except Exception as exc:
        return _refusal(verdict, "check", exc)
    if not resolved["enable_hisparse"]:
        verdict["modelled_to"] = "request"
        return verdict

    from sglang.srt.arg_groups.overrides import model_config_of
    from sglang.srt.configs.model_config import is_deepseek_dsa

    hf_config = model_config_of(server_args).hf_config
    index_topk = getattr(model_config_of(server_args).hf_text_config, "index_topk", None)
    resolved["index_topk"] = index_topk

    # S3 after_weights_load
    verdict["modelled_to"] = "after_weights_load"
    from sglang.srt.mem_cache.sparsity.factory import parse_hisparse_config

    try:
        cfg = parse_hisparse_config()
    except Exception as exc:
        return _refusal(verdict, "after_weights_load", exc)
    resolved.update(
        top_k=cfg.top_k,
        device_buffer_size=cfg.device_buffer_size,
        host_to_device_ratio=cfg.host_to_device_ratio,
        swap_in_block_size=cfg.swap_in_block_size,
        sparse_extra_config=dict(cfg.sparse_extra_config),
    )
    if not is_deepseek_dsa(hf_config):
        return verdict  # DeepSeek-V4 / MiniMax-M3: other allocators, not modelled
    try:
        _indexer_cell_size(server_args, cfg.host_to_device_ratio)
    except Exception as exc:
        return _refusal(verdict, "after_weights_load", exc)

    page_size = resolved["page_size"]
    # model_runner.py:1039: the model's index_topk replaces the JSON top_k.
    top_k = index_topk if index_topk is not None else cfg.top_k
    device_buffer_size = cfg.device_buffer_size
    ratio = cfg.host_to_device_ratio

    # S4 pool_build
    verdict["modelled_to"] = "pool_build"
    try:
        allocator = _build_allocator(page_size, ratio)
    except Exception as exc:
        return _refusal(verdict, "pool_build", exc)

    # S5 coordinator_init, in HiSparseCoordinator.__init__'s order
    verdict["modelled_to"] = "coordinator_init"
    try:
        if host_ram_bytes is not None and device_kv_slots is not None:
            resolved["host_pool_bytes"] = _check_host_pool(
                server_args, resolved, ratio, page_size, host_ram_bytes, device_kv_slots
            )
        num_draft_tokens = 0
        if resolved["speculative_algorithm"] not in (None, "NONE"):
            num_draft_tokens = resolved["speculative_num_draft_tokens"] or 0
        # 0 is a given value, not an unset one: SGLang tests `is not None`
        # (model_executor/pool_configurator.py:1141-1145), max(1, 0 // attn_dp) is 1.
        max_running = resolved["max_running_requests"]
        if max_running is None:
            max_running = AUTO_MAX_RUNNING_REQUESTS
        # One attention-DP worker's pool (model_executor/pool_configurator.py:1141-1144):
        # ReqToTokenPool has size + 1 rows (memory_pool.py:402); a P/D decode
        # server's DecodeReqToTokenPool size + pre_alloc_size + 1
        # (disaggregation/decode.py:200), pre_alloc_size being the resolved
        # --disaggregation-decode-extra-slots (pd_disaggregation_hook.py:129-143).
        per_worker = max(1, max_running // max(1, resolved["attn_dp_size"] or 1))
        extra = 0
        if resolved["disaggregation_mode"] == "decode":
            extra = server_args.resolved_dict().get("disaggregation_decode_extra_slots") or 0
        slots = per_worker + extra + 1
        # hisparse_coordinator.py:644-696: the padded buffer and the per-request tensors
        padded_buffer_size = _coordinator_buffers(device_buffer_size, page_size, slots)
        scratch = _spec_swap_scratch(  # :698-701
            top_k=top_k,
            device_buffer_size=device_buffer_size,
            num_draft_tokens=num_draft_tokens,
            max_num_req_slots=slots,
        )
        # :702-706
        allocator.configure_spec_scratch(scratch, device_buffer_size=padded_buffer_size)
        _coordinator_tail_buffers(device_buffer_size, top_k, slots)  # :707-726
    except Exception as exc:
        return _refusal(verdict, "coordinator_init", exc)

    # S6 first_decode, replicated (CUDA JIT modules). Without speculation the
    # swap-in is load_cache_to_device_buffer_mla, whose wrapper asserts
    # hot_buffer_size (the coordinator's device_buffer_size, :1522) >= num_top_k
    # (kernels/ops/kvcache/hisparse.py:301-303). With speculation the target's
    # top-k is 3-D and goes to the spec kernel (hisparse_coordinator.py:1491-1498
    # -> :509, kernels/ops/kvcache/hisparse.py:71-168): no such assert, but its
    # JIT build static_asserts 1 < hot_buffer_size <= 32768
    # (jit/csrc/kvcacheio/hisparse_spec.cuh:73-74), the first swap-in compiling it.
    verdict["modelled_to"] = "first_decode"
    if num_draft_tokens:
        if not 1 < device_buffer_size <= 32768:
            exc = RuntimeError(
                "speculative hot buffer must contain at least two slots."
                if device_buffer_size <= 1
                else "speculative CLOCK cursor requires hot_buffer_size <= 32768."
            )
            return _refusal(verdict, "first_decode", exc)
    elif not device_buffer_size >= top_k:
        exc = AssertionError(f"hot_buffer_size ({device_buffer_size}) must be >= num_top_k ({top_k})")
        return _refusal(verdict, "first_decode", exc)

    # S7 request: the P/D decode side's first transferred request
    # (srt/disaggregation/decode.py:1787-1811, replicated: it needs a live
    # transfer). With HiSparse, a draft KV pool (a speculative algorithm with a
    # draft model; NGRAM has none) moves device-only pages, which only Mooncake does.
    verdict["modelled_to"] = "request"
    if (
        resolved["disaggregation_mode"] == "decode"
        and resolved["speculative_algorithm"] not in (None, "NONE", "NGRAM")
        and resolved["disaggregation_transfer_backend"] != "mooncake"
    ):
        exc = NotImplementedError("HiSparse device-only PD transfer currently requires the Mooncake backend")
        return _refusal(verdict, "request", exc)
    return verdict


def _indexer_cell_size(server_args: Any, ratio: Any) -> int:
    """The DSA indexer's bytes per KV slot, where SGLang first uses host_to_device_ratio.

    MemoryPoolConfigurator._compute_dsa_indexer_cell_size
    (model_executor/pool_configurator.py:560-635) with HiSparse on: every layer
    keeps its index buffer (:592-597), times the ratio (:584-586), through int()
    (:633-635): a string or list ratio fails here, a float passes. Replicated on
    SGLang's own helpers and constants (the method needs a KVCacheConfigurator,
    which needs a GPU).
    """
    import torch
    from sglang.srt.arg_groups.overrides import model_config_of
    from sglang.srt.model_executor import pool_configurator as pc

    model_config = model_config_of(server_args)
    hf_config = model_config.hf_config
    index_head_dim = pc.get_dsa_index_head_dim(hf_config)
    per_token = pc.ceil_div(
        index_head_dim + index_head_dim // pc.DSATokenToKVPool.quant_block_size * 4,
        pc.get_dsa_index_kpool(hf_config),
    )
    element_size = torch._utils._element_size(pc.DSATokenToKVPool.index_k_with_scale_buffer_dtype)
    return int(per_token * model_config.num_hidden_layers * element_size * ratio)


def _quiet_logging() -> None:
    """prepare_server_args sets the root logger to INFO (server_args.py:700-705): keep warnings."""
    import logging

    logging.getLogger().setLevel(logging.WARNING)


# The resolved fields the comparison reads, by SGLang's names (resolved_dict()).
RESOLVED_FIELDS = (
    "enable_hisparse",
    "hisparse_config",
    "page_size",
    "kv_cache_dtype",
    "attention_backend",
    "dsa_prefill_backend",
    "dsa_decode_backend",
    "disable_radix_cache",
    "disaggregation_mode",
    "disaggregation_transfer_backend",
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "speculative_eagle_topk",
    "speculative_num_steps",
    "max_running_requests",
    "chunked_prefill_size",
    "tp_size",
    "dp_size",
    "attn_dp_size",
    "nnodes",
    "enable_hierarchical_cache",
    "mem_fraction_static",
)


def _resolved_settings(server_args: Any) -> dict[str, Any]:
    resolved = server_args.resolved_dict()
    return {name: resolved.get(name) for name in RESOLVED_FIELDS}


class _NoKVCache:
    """The allocator's kvcache argument: it only registers its index mapping (allocator/hisparse.py:78)."""

    def register_mapping(self, mapping: object) -> None:
        pass


def _build_allocator(page_size: int, ratio: Any) -> Any:
    """SGLang's HiSparse allocator on CPU, 4 pages of device slots (the size reads no rule)."""
    import torch
    from sglang.srt.mem_cache.allocator.hisparse import HiSparseTokenToKVPoolAllocator

    return HiSparseTokenToKVPoolAllocator(
        size=4 * page_size,
        page_size=page_size,
        dtype=torch.int64,
        device=torch.device("cpu"),
        kvcache=_NoKVCache(),  # type: ignore[arg-type]
        need_sort=False,
        host_to_device_ratio=ratio,
    )


def _coordinator_buffers(device_buffer_size: Any, page_size: int, slots: int) -> Any:
    """HiSparseCoordinator.__init__'s tensors sized by device_buffer_size, as it builds
    them (hisparse_coordinator.py:644-696), on `meta` (one layer: the layer count
    changes no shape rule). A float size fails in torch.zeros, a negative one in
    torch.arange; a size over 32767 passes and wraps the int16 LRU list (:690-696)."""
    import torch

    padded_buffer_size = device_buffer_size + page_size  # :644-646
    torch.zeros((slots, padded_buffer_size), dtype=torch.int64, device="meta")  # :648-652
    torch.full((1, slots, padded_buffer_size), -1, dtype=torch.int32, device="meta")  # :677-682
    torch.arange(device_buffer_size, dtype=torch.int16, device="meta")  # :690-692
    return padded_buffer_size


def _coordinator_tail_buffers(device_buffer_size: Any, top_k: int, slots: int) -> None:
    """The tensors built after configure_spec_scratch (hisparse_coordinator.py:707-726)."""
    import torch

    torch.arange(device_buffer_size, dtype=torch.int32, device="meta")  # :707-709
    torch.full((slots, top_k), -1, dtype=torch.int32, device="meta")  # :717-726


class _Namespace:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _spec_swap_scratch(
    *, top_k: int, device_buffer_size: int, num_draft_tokens: int, max_num_req_slots: int
) -> int:
    """HiSparseSpecSwapManager's checks and scratch capacity (hisparse_coordinator.py:150-196)."""
    import torch
    from sglang.srt.managers.hisparse_coordinator import HiSparseSpecSwapManager

    coordinator = _Namespace(
        mem_pool_device=_Namespace(layer_num=1),
        req_to_token_pool=_Namespace(req_to_token=torch.empty((max_num_req_slots, 0), device="meta")),
        device="meta",
        is_dsv4_hisparse=False,
        top_k=top_k,
        device_buffer_size=device_buffer_size,
    )
    manager = HiSparseSpecSwapManager(coordinator, num_draft_tokens=num_draft_tokens)  # type: ignore[arg-type]
    return int(manager.scratch_capacity)


def _host_pool(server_args: Any, ratio: Any, device_kv_slots: int, page_size: int | None = None) -> Any:
    """SGLang's HiSparse host pool for `device_kv_slots` device slots, in its
    allocator-only mode (nothing pinned): `pool.size` tokens of
    `pool.size_per_token` bytes (pool_host/base.py:221-229), built with the
    arguments the coordinator passes (managers/hisparse_coordinator.py:618-632)."""
    import torch
    from sglang.srt.arg_groups.overrides import model_config_of
    from sglang.srt.mem_cache import kv_cache_configurator
    from sglang.srt.mem_cache.pool_host.mla import MLAHostAllocation, MLATokenToKVPoolHost

    resolved = server_args.resolved_dict()
    if page_size is None:
        page_size = resolved["page_size"]
    model_config = model_config_of(server_args)
    fp8 = resolved["kv_cache_dtype"] == "fp8_e4m3"
    kv_dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    kv_cache_dim = kv_cache_configurator.calculate_mla_kv_cache_dim(
        model_config=model_config, kv_cache_dtype=kv_dtype
    )
    # A KV pool stores fp8 as uint8 (mem_cache/memory_pool.py:2029-2033); the DSA
    # row packs its scales and bf16 rope into those bytes (calculate_mla_kv_cache_dim).
    store_dtype = torch.uint8 if fp8 else torch.bfloat16
    layer_num = model_config.num_hidden_layers
    allocation = MLAHostAllocation(
        dtype=store_dtype,
        kv_lora_rank=model_config.kv_lora_rank,
        qk_rope_head_dim=model_config.qk_rope_head_dim,
        kv_cache_dim=kv_cache_dim,
        size_per_token=kv_cache_dim * store_dtype.itemsize * layer_num,
    )
    # hisparse_coordinator.py:618-632
    pool = MLATokenToKVPoolHost(
        buffer_info=allocation,
        device_capacity_tokens=device_kv_slots,
        start_layer=0,
        end_layer=layer_num,
        target_layer_num=layer_num,
        host_to_device_ratio=ratio,
        host_size=0,
        page_size=page_size,
        layout="layer_first",
        override_kv_cache_dim=kv_cache_dim,
    )
    return pool


def _check_host_pool(
    server_args: Any,
    resolved: dict[str, Any],
    ratio: Any,
    page_size: int,
    host_ram_bytes: int,
    device_kv_slots: int,
) -> int:
    """The host pool HiSparse pins per rank, sized and RAM-checked by SGLang's own code."""
    from sglang.srt.mem_cache.pool_host import base
    from sglang.srt.runtime_context import get_parallel

    pool = _host_pool(server_args, ratio, device_kv_slots, page_size)
    parallel = get_parallel()
    ranks = max(parallel.launch_world_size // parallel.nnodes, 1)
    saved = (base.available_host_memory_bytes, base.ranks_per_host)
    base.available_host_memory_bytes = lambda allow_cgroup_fallback=True: host_ram_bytes
    base.ranks_per_host = lambda: ranks
    pool.init_kv_buffer = lambda: None
    try:
        base.HostKVCache._allocate_host_buffer(pool)
    finally:
        base.available_host_memory_bytes, base.ranks_per_host = saved
    return int(pool.size * pool.size_per_token)


def main(argv: list[str]) -> int:
    """`python sglang_oracle.py ARGS...`: print SGLang's verdict as JSON (for a look by hand)."""
    import_sglang()
    try:
        verdict = sglang_verdict(argv)
    except Exception:
        traceback.print_exc()
        return 1
    print(json.dumps(verdict, indent=1, default=repr))
    return 0 if verdict["valid"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
