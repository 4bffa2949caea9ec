"""vLLM 0.33.0's own verdict on a serve configuration, on a machine without a GPU.

``install_nodevice_cuda()`` makes vLLM's real ``CudaPlatform`` importable and
current: it loads the no-device driver stub (``nodevice_libcuda.c``, built by
``build_stub``), tells Triton its NVIDIA driver is active, and answers the
platform's device queries as one node of 8 H200s would (compute capability
9.0, 141 GiB, 227 KiB of shared memory per block), with 2 TiB of RAM, 1920 GiB
of it available (what ``psutil.virtual_memory()`` answers, for vLLM and the
plugin alike). It must run before any vLLM module that reads
``vllm.platforms.current_platform`` is imported.

``vllm_verdict(args)`` takes a ``ServeArgs`` JSON form (hisparse_rs' test
vectors' form), turns it into a ``vllm serve`` command line, and runs what
``vllm serve`` runs until the model would load, in vLLM's order, recording
the stage it stopped at in hisparse_rs' stage names (``Diagnostic.stage``):

- ``argparse``: its argument parser;
- ``config``: ``AsyncEngineArgs.from_cli_args`` and ``create_engine_config()``
  (``headless=`` as ``vllm serve --headless`` passes it);
- ``engine_start``: what the engine and its executor check as they start:
  ``run_headless``'s local DP size (serve.py:203), ``nnodes_within_dp``
  (parallel.py:827) and ``MultiprocExecutor._get_parallel_sizes``
  (multiproc_executor.py:305);
- ``model_load``: an MTP draft without MTP layers (*modelled*: vLLM fails
  building the ``deepseek_mtp`` draft model); with HiSparse, attention backend
  selection for the sparse-MLA layers (``get_attn_backend``) and the indexer
  (``DeepseekV32IndexerBackend``, the one ``deepseek_v2.Indexer`` names), then
  ``update_block_size_for_backend`` and ``select_common_block_size``, which
  fix the block size, and the KV cache dtype the layer stores
  (``_canonicalize_sparse_mla_kv_cache_dtype``);
- ``workers``: connector creation's config step
  (``KVConnectorFactory.get_connector_class`` and, for every MultiConnector,
  nested ones too, ``MultiConnector._get_connector_classes_and_configs``), and
  ``HiSparseConnector.__init__``'s refusal without a host pool (*modelled*:
  there is none exactly when HiSparse is off); then, with HiSparse,
  ``get_hisparse_host_pool_bytes`` (``hisparse_host_pool_gib``), the
  DeepSeek-V4 refusal (``_partition_hisparse_specs``: *modelled*, the spec's
  ``model_version`` comes from the model code),
  ``ResolvedHiSparseConfig.from_vllm_config`` (device_buffer_size bounds) and
  ``_check_residency_shared_memory`` (the resolver's shared memory), and
  ``create_hisparse_layout`` on a host group of ``MLAAttentionSpec``\\ s built
  as ``MLAAttention.get_kv_cache_spec`` builds them, one per sparse-MLA layer
  (*modelled*: the layer count, ``num_hidden_layers`` plus MTP draft layers,
  is what the model code would register).

What is not run: weight loading, the 95 % host-RAM check (machine dependent,
per pool as each rank allocates it; hisparse_rs checks the node's pools
together, tests/vllm/test_plugin_machine.py), anything that needs a device.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import json
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STUB_SOURCE = HERE / "nodevice_libcuda.c"

# One node of 8 x H200: what the patched device queries answer.
DEVICE_CAPABILITY = (9, 0)
DEVICE_NAME = "NVIDIA H200"
DEVICE_MEMORY = 141 * 2**30
DEVICE_COUNT = 8
SHARED_MEMORY_PER_BLOCK = 232448  # 227 KiB opt-in, sm_90
# The node's RAM: a DGX H200's 2 TiB, 1920 GiB of it available.
HOST_MEMORY = 2048 * 2**30
HOST_MEMORY_AVAILABLE = 1920 * 2**30


def node_memory(total: int, available: int) -> Callable[[], Any]:
    """A ``psutil.virtual_memory`` that answers ``total`` and ``available`` bytes (the rest as measured)."""
    import psutil

    measure = psutil.virtual_memory

    def virtual_memory() -> Any:
        real = measure()
        used = total - available
        return real._replace(total=total, available=available, used=used, percent=100.0 * used / total)

    return virtual_memory


def build_stub(out_dir: Path) -> Path:
    """Compile the no-device libcuda.so.1 with gcc into ``out_dir``; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / "libcuda.so.1"
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Werror",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            str(lib),
            str(STUB_SOURCE),
        ],
        check=True,
    )
    return lib


_installed: Any = None


def install_nodevice_cuda(stub: Path) -> Any:
    """Make vLLM's real CudaPlatform the current platform, with its device queries answered.

    Loading the stub with RTLD_GLOBAL first means every later ``dlopen`` that
    needs ``libcuda.so.1`` (vLLM's CUDA extensions) binds to it by soname.
    Returns the platform object. Idempotent.
    """
    global _installed
    if _installed is not None:
        return _installed
    ctypes.CDLL(str(stub), mode=ctypes.RTLD_GLOBAL)
    # vllm.triton_utils disables Triton unless exactly one driver is active;
    # module-level @triton.autotune configs then break (vLLM 0.33
    # triton_utils/importing.py). Nothing here launches a kernel.
    from triton.backends import backends

    backends["nvidia"].driver.is_active = staticmethod(lambda: True)

    import vllm.platforms
    from vllm.platforms.cuda import CudaPlatform
    from vllm.platforms.interface import DeviceCapability

    def capability(cls: Any, device_id: int = 0) -> DeviceCapability:
        return DeviceCapability(*DEVICE_CAPABILITY)

    CudaPlatform.get_device_capability = classmethod(capability)  # type: ignore[method-assign,assignment]
    CudaPlatform.get_device_name = classmethod(lambda cls, device_id=0: DEVICE_NAME)  # type: ignore[method-assign,assignment]
    CudaPlatform.get_device_total_memory = classmethod(lambda cls, device_id=0: DEVICE_MEMORY)  # type: ignore[method-assign,assignment]
    CudaPlatform.device_count = classmethod(lambda cls: DEVICE_COUNT)  # type: ignore[method-assign,assignment]
    CudaPlatform.is_fully_connected = classmethod(lambda cls, ids: True)  # type: ignore[method-assign,assignment]
    platform = CudaPlatform()
    vllm.platforms._current_platform = platform

    import vllm.v1.hisparse.runtime as runtime

    runtime.get_max_shared_memory_bytes = lambda device_index=0: SHARED_MEMORY_PER_BLOCK  # type: ignore[assignment]
    import psutil

    psutil.virtual_memory = node_memory(HOST_MEMORY, HOST_MEMORY_AVAILABLE)
    _installed = platform
    return platform


@dataclass(frozen=True)
class Verdict:
    """What vLLM did with a configuration."""

    starts: bool
    hisparse: bool = False
    device_buffer_size: int | None = None
    host_block_stride: int | None = None
    host_blocks: int | None = None
    stage: str = "done"
    error: str = ""


# ServeArgs scalar fields and their vllm serve flags (booleans: --x / --no-x).
_SCALAR_FLAGS = {
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "data_parallel_size_local": "--data-parallel-size-local",
    "decode_context_parallel_size": "--decode-context-parallel-size",
    "prefill_context_parallel_size": "--prefill-context-parallel-size",
    "nnodes": "--nnodes",
    "kv_cache_dtype": "--kv-cache-dtype",
    "block_size": "--block-size",
    "max_model_len": "--max-model-len",
    "max_num_seqs": "--max-num-seqs",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "distributed_executor_backend": "--distributed-executor-backend",
    "node_rank": "--node-rank",
    "data_parallel_rank": "--data-parallel-rank",
    "data_parallel_backend": "--data-parallel-backend",
}
_BOOL_FLAGS = {
    "scheduler_reserve_full_isl": "scheduler-reserve-full-isl",
    "disable_hybrid_kv_cache_manager": "disable-hybrid-kv-cache-manager",
    "enable_expert_parallel": "enable-expert-parallel",
}
_JSON_FLAGS = {
    "kv_transfer_config": "--kv-transfer-config",
    "attention_config": "--attention-config",
    "speculative_config": "--speculative-config",
    "compilation_config": "--compilation-config",
    "hf_overrides": "--hf-overrides",
}


def serve_argv(args: Mapping[str, Any]) -> list[str]:
    """The ``vllm serve`` flags for a ServeArgs JSON form (the model as ``--model``)."""
    argv = ["--model", str(args["model"]), "--skip-tokenizer-init"]
    for key, flag in _SCALAR_FLAGS.items():
        if args.get(key) is not None:
            value = "auto" if key == "max_model_len" and args[key] == -1 else str(args[key])
            argv += [flag, value]
    for key, name in _BOOL_FLAGS.items():
        if args.get(key) is not None:
            argv.append(f"--{name}" if args[key] else f"--no-{name}")
    if args.get("headless"):  # store_true: no --no- form
        argv.append("--headless")
    for key, flag in _JSON_FLAGS.items():
        if args.get(key) is not None:
            value = args[key]
            argv += [flag, value if isinstance(value, str) else json.dumps(value)]
    return argv


_parser: argparse.ArgumentParser | None = None


def serve_parser() -> argparse.ArgumentParser:
    """vLLM 0.33.0's ``vllm serve`` argument parser (built once)."""
    global _parser
    if _parser is None:
        from vllm.entrypoints.common.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        _parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    return _parser


@contextlib.contextmanager
def _environment(args: Mapping[str, Any]) -> Iterator[None]:
    """VLLM_USE_V2_MODEL_RUNNER as given (vllm.envs reads it on each access), the platform, and
    hisparse_rs' own plugin off."""
    from vllm.platforms import PlatformEnum, current_platform

    saved_env = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    saved_preflight = os.environ.get("HISPARSE_RS_PREFLIGHT")
    saved_enum = current_platform._enum
    os.environ["HISPARSE_RS_PREFLIGHT"] = "0"  # vLLM's verdict, not hisparse_rs' plugin
    value = args.get("VLLM_USE_V2_MODEL_RUNNER")
    if value is None:
        os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
    else:
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = str(value)
    # Another platform: what is_cuda() / is_rocm() / is_cpu() answer (the only
    # platform facts HiSparse's rules read); the rest stays CUDA's.
    platform = args.get("platform", "cuda")
    current_platform._enum = {"cuda": PlatformEnum.CUDA, "rocm": PlatformEnum.ROCM, "cpu": PlatformEnum.CPU}[
        platform
    ]
    try:
        yield
    finally:
        current_platform._enum = saved_enum
        if saved_preflight is None:
            os.environ.pop("HISPARSE_RS_PREFLIGHT", None)
        else:
            os.environ["HISPARSE_RS_PREFLIGHT"] = saved_preflight
        if saved_env is None:
            os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
        else:
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = saved_env


def vllm_verdict(args: Mapping[str, Any]) -> Verdict:
    """Run ``args`` through vLLM 0.33.0 as far as it goes without a GPU (see the module docstring)."""
    with _environment(args):
        return _verdict(args)


def _verdict(args: Mapping[str, Any]) -> Verdict:
    """``stage`` is where vLLM stopped, in hisparse_rs' stage names (``Diagnostic.stage``):
    ``argparse`` (its parser), ``config`` (``from_cli_args``, ``create_engine_config``),
    ``engine_start`` (what the engine and its executor check as they start, run here as
    vLLM runs it: ``nnodes_within_dp``, ``MultiprocExecutor._get_parallel_sizes``,
    ``run_headless``'s local-size check), ``model_load`` (the attention backends the
    layers select and the block size fixed for them), ``workers`` (the KV cache set-up
    after the model has loaded: connectors, the HiSparse layout and runtime checks)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    stage = "argparse"
    try:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = serve_parser().parse_args(serve_argv(args))
        except SystemExit:
            return Verdict(False, stage=stage, error=err.getvalue().strip().splitlines()[-1])
        stage = "config"
        engine_args = AsyncEngineArgs.from_cli_args(ns)
        headless = bool(getattr(ns, "headless", False))
        vllm_config = engine_args.create_engine_config(headless=headless)
        stage = "engine_start"
        _engine_start(vllm_config, headless)
        hisparse = vllm_config.attention_config.hisparse_config is not None
        stage = "model_load"
        _draft_model_load(vllm_config)
        backends = _model_load(vllm_config) if hisparse else None
        stage = "workers"
        _connector_classes(vllm_config)
        if backends is None:
            return Verdict(True)
        return _hisparse_stages(vllm_config, backends)
    except Exception as e:  # every exception is vLLM failing to start
        return Verdict(False, stage=stage, error=_first_line(e))


def _engine_start(vllm_config: Any, headless: bool) -> None:
    """What vLLM checks as its engine and executor start, before a worker loads the model."""
    import types

    from vllm.v1.executor.multiproc_executor import MultiprocExecutor

    pc = vllm_config.parallel_config
    if headless and pc.data_parallel_size_local <= 0:
        # entrypoints/cli/serve.py:203 (run_headless, right after the config is built)
        raise ValueError("data_parallel_size_local must be > 0 in headless mode")
    if pc.distributed_executor_backend == "mp" or pc.data_parallel_size > 1:
        _ = pc.nnodes_within_dp  # parallel.py:827, read by the DP launch and the executor
    if pc.distributed_executor_backend == "mp":
        MultiprocExecutor._get_parallel_sizes(types.SimpleNamespace(parallel_config=pc))
    _workers_take_their_gpus(pc)


def _workers_take_their_gpus(pc: Any) -> None:
    """Each worker's ``init_device`` (*modelled*: the harness starts no worker): the GPU of
    local rank r of this node's DP replica d is ``r + d x world_size`` on one node
    (``ParallelConfig.get_local_gpu_index``, config/parallel.py:842-856), asserted below
    the devices (v1/worker/gpu_worker.py:487-490). Ray and external launchers place
    their workers themselves."""
    from vllm.platforms import current_platform

    if pc.distributed_executor_backend in ("ray", "external_launcher") or pc.data_parallel_backend == "ray":
        return
    replicas = 1 if pc.data_parallel_rank_local is not None else max(1, pc.data_parallel_size_local)
    spread = pc.nnodes_within_dp != 1
    top = pc.local_world_size - 1 if spread else (replicas - 1) * pc.world_size + pc.local_world_size - 1
    count = current_platform.device_count()
    if top >= count:
        raise AssertionError(f"DP adjusted local rank {top} is out of bounds for {count} devices.")


def _connector_classes(vllm_config: Any) -> None:
    """What creating the connectors resolves first (the engine does it after the model
    loads): each connector's class, and each MultiConnector's children's configs,
    as ``MultiConnector.__init__`` builds them, nested ones included."""
    kv = vllm_config.kv_transfer_config
    if kv is None or kv.kv_connector is None:
        return
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    cls = KVConnectorFactory.get_connector_class(kv)
    if kv.kv_connector == "HiSparseConnector" and vllm_config.attention_config.hisparse_config is None:
        # HiSparseConnector.__init__: without HiSparse, the KV cache config has no host pool.
        raise ValueError("HiSparseConnector requires a HiSparse host pool")
    if kv.kv_connector == "MultiConnector":
        for _, child_config in cls._get_connector_classes_and_configs(vllm_config):
            _connector_classes(child_config)


def _draft_model_load(vllm_config: Any) -> None:
    """An MTP draft without MTP layers (*modelled*): vLLM builds a ``deepseek_mtp`` draft
    config from any DeepSeek-V3/V3.2 or GLM-5 checkpoint (config/speculative.py:749-760),
    its depth defaulting to 1 when config.json has no ``num_nextn_predict_layers``, and
    fails as it builds the draft model (0 layers) or loads its weights (the MTP layer's
    weights missing, model_executor/models/deepseek_mtp.py:531). The harness loads no
    weights: a checkpoint whose config.json does not declare MTP layers is taken to
    have none."""
    spec = vllm_config.speculative_config
    draft = getattr(spec, "draft_model_config", None) if spec is not None else None
    if draft is None or getattr(draft.hf_config, "model_type", None) != "deepseek_mtp":
        return
    path = Path(str(vllm_config.model_config.model))
    raw = json.loads((path / "config.json" if path.is_dir() else path).read_text())
    declared = raw.get("num_nextn_predict_layers", raw.get("text_config", {}).get("num_nextn_predict_layers"))
    if not declared or not getattr(draft.hf_config, "num_nextn_predict_layers", None):
        raise ValueError("the deepseek_mtp draft model has no MTP layers (num_nextn_predict_layers)")


def _model_load(vllm_config: Any) -> tuple[Any, str, int, int]:
    """The attention backends the sparse-MLA layers and the indexer select as the model
    is built, the block size vLLM fixes for them right after it loads
    (``update_block_size_for_backend``, multiproc_executor.py:802), and the KV cache
    dtype the layer stores: (sparse backend, cache dtype, block size, head size)."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.attention.mla_attention import _canonicalize_sparse_mla_kv_cache_dtype
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerBackend
    from vllm.v1.attention.selector import get_attn_backend
    from vllm.v1.worker.utils import select_common_block_size

    model_config = vllm_config.model_config
    text = model_config.hf_text_config
    cache_dtype = vllm_config.cache_config.cache_dtype
    if getattr(model_config.hf_config, "model_type", None) == "deepseek_v4" or not hasattr(
        text, "kv_lora_rank"
    ):
        # DeepSeek-V4 (its layers differ) and models without MLA: refused when the
        # KV cache is laid out (_hisparse_stages).
        return None, cache_dtype, vllm_config.cache_config.block_size or 64, 0
    head_size = text.kv_lora_rank + text.qk_rope_head_dim
    tp = vllm_config.parallel_config.tensor_parallel_size
    platform_cls = type(current_platform)
    with set_current_vllm_config(vllm_config):
        sparse_backend = get_attn_backend(
            head_size,
            model_config.dtype,
            cache_dtype,
            use_mla=True,
            use_sparse=True,
            num_heads=max(1, text.num_attention_heads // tp),
        )
        backends = [sparse_backend, DeepseekV32IndexerBackend]
        # What the model's layers would report (they are never built here).
        assert "_find_non_ssm_backends" not in platform_cls.__dict__  # Platform's
        platform_cls._find_non_ssm_backends = classmethod(lambda cls, vc: backends)
        try:
            current_platform.update_block_size_for_backend(vllm_config)
        finally:
            del platform_cls._find_non_ssm_backends
        block_size = vllm_config.cache_config.block_size
        select_common_block_size(block_size, backends)
    # The layer stores what its backend serves ("fp8" on FlashMLA sparse is fp8_ds_mla).
    cache_dtype = _canonicalize_sparse_mla_kv_cache_dtype(sparse_backend, cache_dtype)
    return sparse_backend, cache_dtype, block_size, head_size


def _hisparse_stages(vllm_config: Any, loaded: tuple[Any, str, int, int]) -> Verdict:
    import torch
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.hisparse.layout import create_hisparse_layout, get_hisparse_host_pool_bytes
    from vllm.v1.hisparse.runtime import ResolvedHiSparseConfig, _check_residency_shared_memory
    from vllm.v1.kv_cache_interface import KVCacheGroupSpec, MLAAttentionSpec, get_kv_quant_mode

    sparse_backend, cache_dtype, block_size, head_size = loaded
    host_budget = get_hisparse_host_pool_bytes(vllm_config)
    model_config = vllm_config.model_config
    hf_config = model_config.hf_config
    text = model_config.hf_text_config
    if getattr(hf_config, "model_type", None) == "deepseek_v4":
        raise ValueError("HiSparse does not support DeepSeek V4.")  # _partition_hisparse_specs
    if sparse_backend is None:  # no MLA layers: layout.py:121 (modelled)
        raise ValueError("HiSparse requires sparse-MLA and indexer cache specs.")

    top_k = getattr(hf_config, "index_topk", None)
    kpool = getattr(text, "index_kpool", None)
    if kpool:  # glm5next get_sparse_topk_buffer_width
        top_k = -(-(text.index_topk + kpool - 1) // 128) * 128
    resolved = ResolvedHiSparseConfig.from_vllm_config(vllm_config, top_k, block_size)
    assert resolved is not None
    _check_residency_shared_memory(torch.device("cuda", 0), resolved)

    # Sparse-MLA layers register one spec each (layer_types picks them out in
    # mixed models), MTP draft layers too.
    kinds = getattr(text, "layer_types", None)
    layers = (
        sum(kind == "deepseek_sparse_attention" for kind in kinds)
        if isinstance(kinds, list) and "deepseek_sparse_attention" in kinds
        else text.num_hidden_layers
    )
    spec_config = vllm_config.speculative_config
    if spec_config is not None and spec_config.method == "mtp":
        layers += getattr(text, "num_nextn_predict_layers", 0) or 0
    specs = {
        f"model.layers.{i}.self_attn.attn": MLAAttentionSpec(
            block_size=block_size,
            num_kv_heads=1,
            max_tp_shards=1,
            head_size=head_size,
            dtype=kv_cache_dtype_str_to_dtype(cache_dtype, model_config),
            cache_dtype_str=cache_dtype,
            kv_quant_mode=get_kv_quant_mode(cache_dtype),
            state_content_bytes={"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(cache_dtype),
            is_index_group_leader=True,
        )
        for i in range(layers)
    }
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    group_spec = UniformTypeKVCacheSpecs.from_specs(specs)
    group = KVCacheGroupSpec(list(specs), group_spec, host_resident=True)
    layout = create_hisparse_layout(vllm_config, [group], host_budget)
    return Verdict(
        True,
        hisparse=True,
        device_buffer_size=resolved.device_buffer_size,
        host_block_stride=layout.host_block_stride,
        host_blocks=layout.host_num_blocks,
    )


def _first_line(e: Exception) -> str:
    """The message of vLLM's exception (pydantic wraps config errors in a ValidationError)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("Value error, ", "Assertion failed, ")):
            return line.split(", ", 1)[1].split(" [type=")[0]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"
