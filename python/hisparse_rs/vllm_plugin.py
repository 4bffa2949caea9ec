"""hisparse_rs inside ``vllm serve``: every HiSparse error, with its fix, before the model loads.

``pip install 'hisparse_rs[vllm]'`` registers :func:`register` as a
``vllm.general_plugins`` entry point. vLLM imports this module, never
``import hisparse_rs``; nothing here runs unless vLLM loads it.

Hook point. vLLM 0.33.0 calls ``load_general_plugins()`` (vllm/plugins/__init__.py:80)
from ``EngineArgs.__post_init__`` (vllm/engine/arg_utils.py:931) and from
``AsyncEngineArgs.add_cli_args`` (arg_utils.py:3256), in every process: the API
server, the engine core, each worker. :func:`register` wraps
``EngineArgs.create_engine_config`` (arg_utils.py:2245), the one call that
turns arguments into a ``VllmConfig``. It runs in the process that starts
vLLM (``vllm serve``, ``LLM(...)``, headless nodes), before
``create_model_config`` and before any device, weight or KV-cache work; engine
and worker processes receive the finished ``VllmConfig`` and never call it, so
the check runs once per start-up. Extra API server processes
(``--api-server-count``) call it again with the same arguments: a check
that lets the start-up go on leaves a fingerprint in the environment they
inherit (``HISPARSE_RS_PREFLIGHT_CHECKED``), and they skip; a refused
configuration leaves none, so a retry is refused again.

The wrapper sees ``self``, the ``EngineArgs`` as parsed: JSON flags already
turned into ``KVTransferConfig`` / ``AttentionConfig`` / ``CompilationConfig``
objects (argparse rejects malformed ones before any plugin code runs), the
rest as given. It rebuilds hisparse_rs' ``ServeArgs`` from the fields (the
names are vLLM's) and checks them for the platform vLLM detected. The model's
``config.json`` is read, as vLLM reads it (vllm/config/model.py:680), from
``--hf-config-path`` when given, else from the model directory, or, for a hub
id, the local Hugging Face cache at ``--revision`` (hisparse_rs reads it as
vLLM does offline, never downloading); when none is local, the check waits
for vLLM's own ``ModelConfig`` (built next, by ``create_model_config``) and
reads its HF config instead.

The machine. Some of vLLM's HiSparse checks depend on the machine and run
only after the weights have loaded: the residency resolver's shared memory
(``_check_residency_shared_memory``, vllm/v1/hisparse/runtime.py:168, on the
GPU each worker runs on) and the pinned host pools (``check_hisparse_host_memory``,
runtime.py:195: each pool against 95 % of ``psutil.virtual_memory().available``
when its rank allocates it, runtime.py:256, :384 and the shared region's
creator check at :403). The plugin tells the check the node it runs on:

- the GPU: ``current_platform.get_device_name()``, ``get_device_capability()``
  and ``get_device_total_memory()`` for device 0, the queries vLLM's own
  ``EngineArgs.get_batch_defaults`` makes in this process during
  ``create_engine_config`` (arg_utils.py:2958-2967; through NVML on
  ``NvmlCudaPlatform``, which never initialises CUDA; in one NVML session
  here). The name picks the entry of hisparse_rs' GPU table
  (``hisparse_rs.gpu_spec``: "NVIDIA H200" is h200), whose compute capability
  must be the device's; the shared memory per block is the table's (a
  function of the compute capability; the device's own figure,
  ``cudaDevAttrMaxSharedMemoryPerBlockOptin``, needs the CUDA runtime, which
  the API server must not initialise), the memory the device's. A device not
  in the table, or one vLLM cannot query (a Ray head without GPUs, as
  ``get_batch_defaults`` allows for), skips the checks that need it, with one
  log line. Like vLLM's config code, device 0 of this process stands for the
  deployment's GPUs: with ``--nnodes`` each node (the head and every
  ``--headless`` one) runs this check on its own GPUs.
- the RAM: ``psutil.virtual_memory().available``, the figure vLLM compares
  against, read now, before the weights load (vLLM reads it later, when less
  is free: the plugin is not the stricter one for a single pool). The check
  counts every pool on this node (those of the DP replicas it runs:
  ``--data-parallel-size-local``, else an even share over ``--nnodes``),
  where vLLM checks each pool alone as it is allocated: pools that fit one
  at a time but not together are refused here, the error naming the
  deviation ``host_pools_fit_alone``. When this process cannot know
  which pools this node holds (the Ray executor or DP backend, an external
  launcher, external-LB DP ranks), the RAM check is skipped, with one log
  line.

What breaks it on another vLLM version: ``create_engine_config`` renamed or no
longer the single entry to ``VllmConfig``; general plugins loaded after it, or
only in worker processes; the ``EngineArgs`` fields read here renamed; the
HiSparse rules themselves (the check states vLLM 0.33.0's). So on any version
but the ones in :data:`TESTED_VLLM_VERSIONS` the plugin logs one line and
steps aside.

Behaviour. HiSparse not configured: silent, unless the check finds errors in
a configuration that evidently means HiSparse (a ``hisparse_config``, or
"hisparse" in the connector tree, as in a misspelled key); those are reported
as for HiSparse on. Errors: one ``ValueError`` whose
text is the whole report, every error with its code, path and fix, then the
fixes as ``vllm serve`` flags. Warnings: vLLM's logger. ``HISPARSE_RS_PREFLIGHT``:
unset or ``1`` as described, ``warn`` logs the errors instead of raising,
``0`` turns the plugin off. A failure of the check itself (an unreadable model
config, a bug here) is logged and vLLM goes on: the plugin never stops a
start-up that vLLM itself would let through, except on errors it reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "ENV",
    "HOST_MEMORY_SOURCE",
    "TESTED_VLLM_VERSIONS",
    "Machine",
    "machine",
    "preflight",
    "register",
    "serve_args_of",
]

#: vLLM releases this plugin was tested against (tests/vllm/).
TESTED_VLLM_VERSIONS = ("0.33.0",)
#: ``0`` off, ``warn`` log errors instead of raising, unset or ``1`` raise.
ENV = "HISPARSE_RS_PREFLIGHT"
_CHECKED_ENV = "HISPARSE_RS_PREFLIGHT_CHECKED"
_MARK = "__hisparse_rs_preflight__"
_GIB = 2**30
#: What the RAM figure is, for the report's messages.
HOST_MEMORY_SOURCE = (
    "this node's available RAM, as vLLM reads it (psutil.virtual_memory().available), before the weights load"
)

# EngineArgs scalar fields that are ServeArgs fields of the same name.
_SCALARS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "data_parallel_size_local",
    "decode_context_parallel_size",
    "prefill_context_parallel_size",
    "nnodes",
    # The node and DP fields the node rules read (node_rank_out_of_range, the
    # external-LB rank's one pool, multi_node_backend_unsupported).
    "node_rank",
    "data_parallel_rank",
    "data_parallel_backend",
    "revision",
    "hf_config_path",
    "kv_cache_dtype",
    "block_size",
    "max_model_len",
    "max_num_seqs",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "distributed_executor_backend",
    "enable_expert_parallel",
    "scheduler_reserve_full_isl",
    "disable_hybrid_kv_cache_manager",
)
# KVTransferConfig fields no HiSparse rule reads and whose defaults vLLM fills
# in per process (engine_id: a fresh uuid4; kv_buffer_device: the platform's).
_KV_SKIPPED = frozenset({"engine_id", "kv_buffer_device"})


def _logger() -> logging.Logger:
    # Under "vllm." so vLLM's logging configuration (format, level) applies.
    from vllm.logger import init_logger

    logger: logging.Logger = init_logger("vllm.plugins.hisparse_rs")
    return logger


_unknown_modes: set[str] = set()


def _mode() -> str:
    value = os.environ.get(ENV, "1").strip().lower()
    if value in ("0", "off", "false", "no"):
        return "off"
    if value == "warn":
        return "warn"
    if value not in ("1", "on", "true", "yes", "error", "") and value not in _unknown_modes:
        _unknown_modes.add(value)  # said once per process
        _logger().warning("%s=%r is not 0, 1 or warn; checking as with 1", ENV, value)
    return "error"


def register() -> None:
    """The ``vllm.general_plugins`` entry point: wrap ``EngineArgs.create_engine_config``.

    Idempotent (vLLM may load plugins more than once). Steps aside, with one
    log line, on a vLLM version not in :data:`TESTED_VLLM_VERSIONS`.
    """
    if _mode() == "off":
        return
    import vllm

    version = getattr(vllm, "__version__", "unknown")
    if version not in TESTED_VLLM_VERSIONS:
        _logger().warning(
            "hisparse_rs preflight is off: it was tested with vLLM %s, this is %s",
            ", ".join(TESTED_VLLM_VERSIONS),
            version,
        )
        return
    from vllm.engine.arg_utils import EngineArgs

    original = EngineArgs.create_engine_config
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def create_engine_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        preflight(self)
        return original(self, *args, **kwargs)

    setattr(create_engine_config, _MARK, True)
    EngineArgs.create_engine_config = create_engine_config


def preflight(engine_args: Any) -> None:
    """Check ``engine_args`` (a vLLM ``EngineArgs``) for HiSparse; what the wrapper runs.

    Raises:
        ValueError: the configuration has HiSparse errors (unless ``HISPARSE_RS_PREFLIGHT=warn``);
            the message is the whole report.
    """
    mode = _mode()
    if mode == "off" or not _may_configure_hisparse(engine_args):
        return
    logger = _logger()
    try:
        args = serve_args_of(engine_args)
    except Exception as e:  # a bug here must not stop vLLM
        logger.warning("hisparse_rs preflight skipped: cannot read the arguments (%s)", e)
        return
    if not {"model", "hf_config_path"} & set(args) or not _check(engine_args, args, mode):
        _check_after_model_config(engine_args, args, mode)


def _check(engine_args: Any, args: dict[str, Any], mode: str) -> bool:
    """Check ``args`` on this node; False when their model is a hub id that is not in the local cache."""
    import hisparse_rs

    logger = _logger()
    fingerprint = hashlib.sha256(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()[:16]
    if os.environ.get(_CHECKED_ENV) == fingerprint:
        return True  # checked by the process that started this one (on this node)
    try:
        node = machine(engine_args, args.get("platform", "cuda"))
    except Exception as e:  # a bug here must not stop vLLM, nor the checks that need no machine
        node = Machine({}, "", (f"the machine's checks (reading it failed: {type(e).__name__}: {e})",))
    try:
        report = hisparse_rs.check_args(args, **node.options)
    except hisparse_rs.ModelLoadError as e:
        if e.code == "model_not_cached":
            return False  # vLLM downloads it: check with its model config
        logger.warning("hisparse_rs preflight skipped: %s", e)
        return True
    except Exception as e:  # a bug here must not stop vLLM
        logger.warning("hisparse_rs preflight skipped: %s: %s", type(e).__name__, e)
        return True
    meant = not report.hisparse_enabled and _hisparse_meant(args)
    if not report.hisparse_enabled and not (report.errors and meant):
        if meant:  # e.g. a HiSparseConnector vLLM will not see: say so
            for w in report.warnings:
                _log_warning(logger, w)
        os.environ[_CHECKED_ENV] = fingerprint
        return True
    if node.skipped:
        logger.info("hisparse_rs preflight: not checked on this node: %s", "; ".join(node.skipped))
    for w in report.warnings:
        _log_warning(logger, w)
    if report.valid:
        logger.info(
            "hisparse_rs preflight: HiSparse configuration valid (device_buffer_size %s, host_pool_gib %s)%s",
            report.hisparse.device_buffer_size if report.hisparse else "?",
            report.hisparse.host_pool_gib
            if isinstance(report.hisparse, hisparse_rs.HiSparseSettings)
            else "?",
            f" for {node.checked}" if node.checked else "",
        )
        os.environ[_CHECKED_ENV] = fingerprint
        return True
    text = render(report, node)
    if mode == "warn":
        logger.warning("%s", text)
        os.environ[_CHECKED_ENV] = fingerprint
        return True
    # Refused: no fingerprint, so the same arguments are checked (and refused) again.
    raise ValueError(text)


def _check_after_model_config(engine_args: Any, args: dict[str, Any], mode: str) -> None:
    """The model config is not local: check with vLLM's own once ``create_model_config`` has read it."""
    create_model_config: Callable[[], Any] = engine_args.create_model_config

    def checked() -> Any:
        model_config = create_model_config()
        vars(engine_args).pop("create_model_config", None)  # this start-up only
        try:
            hf_config = model_config.hf_config.to_dict()
        except Exception as e:
            _logger().warning("hisparse_rs preflight skipped: cannot read the HF config (%s)", e)
            return model_config
        # vLLM has applied --hf-overrides to its HF config already.
        _check(engine_args, {**args, "hf_config": hf_config, "hf_overrides": None}, mode)
        return model_config

    engine_args.create_model_config = checked


def _may_configure_hisparse(engine_args: Any) -> bool:
    """Cheap pre-test: HiSparse needs a kv_transfer_config or a hisparse_config."""
    attention = getattr(engine_args, "attention_config", None)
    return (
        getattr(engine_args, "kv_transfer_config", None) is not None
        or getattr(attention, "hisparse_config", None) is not None
    )


def _hisparse_meant(args: Mapping[str, Any]) -> bool:
    """Whether ``args`` evidently mean HiSparse though the report finds it off: a
    ``hisparse_config``, or "hisparse" anywhere in the connector tree (a HiSparseConnector
    under a misspelled key or name the check does not read as one). Their errors are then
    HiSparse's to report."""
    attention = args.get("attention_config")
    if isinstance(attention, Mapping) and attention.get("hisparse_config") is not None:
        return True
    return "hisparse" in json.dumps(args.get("kv_transfer_config")).lower()


def serve_args_of(engine_args: Any) -> dict[str, Any]:
    """hisparse_rs' ``ServeArgs`` JSON form of a vLLM 0.33 ``EngineArgs``.

    ``"model"`` is the local ``config.json`` of the model directory, else a hub
    id (``org/name``, read from the local Hugging Face cache at ``revision``),
    else missing; ``"hf_config_path"`` is passed as given (hisparse_rs reads
    the config from it first, as vLLM does).
    """
    args: dict[str, Any] = {}
    config = _local_model_config(engine_args)
    model = getattr(engine_args, "model", None)
    if config is not None:
        args["model"] = str(config)
    elif isinstance(model, str) and model.count("/") == 1 and not model.startswith((".", "/", "~")):
        args["model"] = model
    for name in _SCALARS:
        value = getattr(engine_args, name, None)
        if isinstance(value, bool | int | float | str):
            args[name] = value
    if _external_lb(engine_args):
        # An external-LB DP rank runs alone (vLLM 0.33 requires
        # --data-parallel-size-local 1 or unset there and skips the node-group
        # rule, arg_utils.py:2476, parallel.py:825): hisparse_rs' rules for
        # data_parallel_size_local are those of the internal load balancer.
        args.pop("data_parallel_size_local", None)
    kv = getattr(engine_args, "kv_transfer_config", None)
    if kv is not None:
        args["kv_transfer_config"] = _kv_transfer_json(kv)
    hisparse = getattr(getattr(engine_args, "attention_config", None), "hisparse_config", None)
    if hisparse is not None:
        args["attention_config"] = {"hisparse_config": _fields_json(hisparse)}
    mode = getattr(getattr(engine_args, "compilation_config", None), "cudagraph_mode", None)
    if mode is not None:
        args["compilation_config"] = {"cudagraph_mode": getattr(mode, "name", str(mode))}
    for name in ("speculative_config", "hf_overrides"):
        value = getattr(engine_args, name, None)
        if isinstance(value, Mapping) and value:  # a callable hf_overrides cannot be read
            args[name] = _json(value)
    long_len = os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    if long_len is not None:
        args["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = long_len
    env = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    if env is not None:
        args["VLLM_USE_V2_MODEL_RUNNER"] = env
    args["platform"] = _platform()
    return args


def _platform() -> str:
    """The platform vLLM detected, as hisparse_rs names it (HiSparse needs CUDA)."""
    from vllm.platforms import current_platform

    if current_platform.is_cuda():
        return "cuda"
    if current_platform.is_rocm():
        return "rocm"
    return "cpu"  # CPU, and every other platform: none of them runs HiSparse


@dataclasses.dataclass(frozen=True)
class Machine:
    """What the check is told about the node it runs on.

    ``options``: :func:`hisparse_rs.check_args`' machine options (``gpu``,
    ``gpu_memory_gib``, ``gpus_per_node``, ``host_memory_gib``, ``host_memory_source``);
    ``checked``: those facts in words (``""`` when none); ``skipped``: each
    check left out, and why.
    """

    options: dict[str, Any]
    checked: str
    skipped: tuple[str, ...]

    def flags(self) -> str:
        """The same facts as ``hisparse-check`` flags."""
        o = self.options
        parts = [f"--gpu {o['gpu']} --gpu-memory-gib {_gib(o['gpu_memory_gib'])}"] if "gpu" in o else []
        if "gpus_per_node" in o:
            parts.append(f"--gpus-per-node {o['gpus_per_node']}")
        if "host_memory_gib" in o:
            parts.append(f"--host-memory-gib {_gib(o['host_memory_gib'])}")
        return " ".join(parts)


def _gib(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def machine(engine_args: Any, platform: str) -> Machine:
    """The GPU and the RAM of the node this process runs on, as vLLM sees them (module docstring)."""
    options: dict[str, Any] = {}
    checked: list[str] = []
    skipped: list[str] = []
    if platform == "cuda":  # elsewhere HiSparse does not run: the report says so
        gpu, why = _gpu()
        if gpu is None:
            skipped.append(
                f"the residency resolver's shared memory and a host pool sized for the GPUs ({why})"
            )
        else:
            spec, device, memory = gpu
            options.update(gpu=spec["name"], gpu_memory_gib=memory / _GIB)
            shared_kib, gib = spec["max_shared_memory_per_block"] // 1024, _gib(memory / _GIB)
            if not memory > 0:  # not reported: the table's figure
                del options["gpu_memory_gib"]
                gib = f"{_gib(spec['memory_gib'])} (the table's)"
            checked.append(
                f"{device} ({spec['name']}: {shared_kib} KiB of shared memory per block, {gib} GiB)"
            )
        count, why = _device_count()
        if count is None:
            skipped.append(f"the GPUs this node's launch takes against the node's ({why})")
        else:
            options.update(gpus_per_node=count)
            checked.append(f"{count} GPU{'' if count == 1 else 's'} visible")
    unknown = _pools_not_known(engine_args)
    if unknown is None:
        available = _available_host_memory()
        if available is None or available <= 0:
            unknown = "psutil cannot read the available RAM"
        else:
            options.update(host_memory_gib=available / _GIB, host_memory_source=HOST_MEMORY_SOURCE)
            checked.append(f"{_gib(available / _GIB)} GiB of RAM available")
    if unknown is not None:
        skipped.append(f"the pinned host pools against this node's RAM ({unknown})")
    return Machine(options, ", ".join(checked), tuple(skipped))


def _device_count() -> tuple[int | None, str]:
    """The GPUs this process sees, as vLLM 0.33 counts them for its one-node
    world-size check (``current_platform.device_count()``, CUDA_VISIBLE_DEVICES
    applied; vllm/platforms/cuda.py:634, read at config/parallel.py:1068), or
    None and why."""
    from vllm.platforms import current_platform

    try:
        count = int(current_platform.device_count())
    except Exception as e:  # no CUDA in this process (a Ray head)
        return None, f"vLLM cannot count this process's GPUs: {type(e).__name__}: {e}"
    if not 1 <= count <= 1024:
        return None, f"vLLM counts {count} GPUs"
    return count, ""


def _gpu() -> tuple[tuple[dict[str, Any], str, int] | None, str]:
    """(table entry, device name, total bytes) of device 0, or None and why."""
    from vllm.platforms import current_platform

    import hisparse_rs

    try:
        with _nvml_session():
            name = str(current_platform.get_device_name(0))
            capability = current_platform.get_device_capability(0)
            memory = int(current_platform.get_device_total_memory(0))
    except Exception as e:  # no GPU in this process (a Ray head): as vLLM's get_batch_defaults
        return None, f"vLLM cannot query this process's GPU: {type(e).__name__}: {e}"
    try:
        spec = hisparse_rs.gpu_spec(name)
    except ValueError:
        return None, f"the GPU vLLM detected, {name!r}, is not in hisparse_rs' GPU table"
    if capability is None:
        return None, f"vLLM reports no compute capability for the GPU it detected, {name!r}"
    arch = f"sm_{capability.major}{capability.minor}"
    if arch != spec["arch"]:
        return None, (
            f"the GPU vLLM detected, {name!r}, has compute capability {arch}, "
            f"not {spec['arch']} as hisparse_rs' {spec['name']}"
        )
    return (spec, name, memory), ""


@contextlib.contextmanager
def _nvml_session() -> Iterator[None]:
    """One NVML session around several queries of vLLM's NVML platform (each
    method opens its own; NVML counts nested nvmlInit calls)."""
    cuda = sys.modules.get("vllm.platforms.cuda")
    pynvml = getattr(cuda, "pynvml", None) if getattr(cuda, "nvml_available", False) else None
    if pynvml is None:
        yield
        return
    pynvml.nvmlInit()
    try:
        yield
    finally:
        pynvml.nvmlShutdown()


def _available_host_memory() -> int | None:
    """``psutil.virtual_memory().available`` (what vLLM 0.33's check_hisparse_host_memory reads), bytes."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:
        return None


def _external_lb(engine_args: Any) -> bool:
    """Whether this process is one external-LB DP rank (vLLM 0.33 arg_utils.py:2447)."""
    return getattr(engine_args, "data_parallel_rank", None) is not None or bool(
        getattr(engine_args, "data_parallel_external_lb", False)
    )


def _pools_not_known(engine_args: Any) -> str | None:
    """Why this process cannot know which host pools this node pins (None: it can).

    hisparse_rs counts the pools of this node's DP replicas as vLLM places
    them: ``--data-parallel-size-local`` when given, else an even share over
    ``--nnodes`` (arg_utils.py:2398-2535); other placements are not this
    process's to see.
    """
    backend = getattr(engine_args, "distributed_executor_backend", None)
    if backend not in (None, "mp", "uni"):
        return f"the {backend if isinstance(backend, str) else 'custom'} executor places the ranks"
    if getattr(engine_args, "data_parallel_backend", "mp") == "ray":
        return "Ray places the DP ranks"
    if _external_lb(engine_args):
        return "each external-LB process runs one DP rank, and this node may run several"
    return None


def _local_model_config(engine_args: Any) -> Path | None:
    model = getattr(engine_args, "model", None)
    if not model:
        return None
    path = Path(str(model)).expanduser()
    if path.is_file():
        return path
    if (path / "config.json").is_file():
        return path / "config.json"
    return None


def _json(value: Any) -> Any:
    """JSON-able form (enums by name, anything else by str)."""
    return json.loads(json.dumps(value, default=lambda v: getattr(v, "name", str(v))))


def _fields_json(obj: Any) -> dict[str, Any]:
    """The fields of a vLLM config dataclass that are set (not None)."""
    if isinstance(obj, Mapping):
        return _json(dict(obj))  # type: ignore[no-any-return]
    out = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return _json({k: v for k, v in out.items() if v is not None})  # type: ignore[no-any-return]


def _kv_transfer_json(kv: Any) -> Any:
    if isinstance(kv, Mapping):
        return _json(dict(kv))
    out: dict[str, Any] = {}
    for f in dataclasses.fields(kv):
        value = getattr(kv, f.name)
        if f.name in _KV_SKIPPED or value is None:
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if value != default or f.name in ("kv_connector", "kv_role"):
            out[f.name] = value
    return _json(out)


#: vLLM 0.33.0's start-up stages, in order (``Diagnostic.stage``).
STAGES = ("argparse", "config", "engine_start", "model_load", "workers", "first_step", "never")


def _earliest_stage(errors: Any) -> Any:
    """The error at the earliest start-up stage: where vLLM itself would have stopped."""
    return min(errors, key=lambda d: STAGES.index(d.stage), default=None)


def _log_warning(logger: logging.Logger, w: Any) -> None:
    """One warning, with its stage where vLLM refuses it (not for what vLLM takes as it is)."""
    if w.stage == "never":
        logger.warning("hisparse_rs: %s at %s: %s", w.code, w.path, w.message)
    else:
        logger.warning("hisparse_rs: %s at %s: %s (%s)", w.code, w.path, w.message, w.stage_sentence)


def render(report: Any, node: Machine | None = None) -> str:
    """The report as the ``ValueError`` text: every error with code, path, message and fix, then the
    fixes as flags (``report.fixed_flags``, computed by hisparse_rs' core as ``hisparse-check``
    prints them), then the machine it was checked for (``node``)."""
    import hisparse_rs

    n = len(report.errors)
    lines = [
        f"hisparse_rs {hisparse_rs.__version__}: {n} HiSparse error{'s' if n != 1 else ''} in this vLLM "
        f"configuration, found before vLLM builds its config (rules of vLLM {hisparse_rs.VLLM_VERSION}):",
        "",
    ]
    for d in report.errors:
        lines.append(f"  error[{d.code}] {d.path}")
        lines.append(f"    {d.message}")
        lines.append(f"    stage:   {d.stage}: {d.stage_sentence}")
        if d.given is not None:
            lines.append(f"    given:   {json.dumps(d.given)}")
        if d.allowed:
            lines.append(f"    allowed: {d.allowed}")
        if d.hint:
            lines.append(f"    fix:     {d.hint}")
    earliest = _earliest_stage(report.errors)
    if earliest is not None:
        lines += ["", f"Without this check: {earliest.stage_sentence} (stage {earliest.stage})."]
    flags = report.fixed_flags
    if flags:
        lines += ["", "With every fix applied, change these vllm serve flags:", f"  {flags}"]
    env = report.fixed_env
    if env:
        lines += ["", "With every fix applied, change the environment (before vllm serve):", f"  {env}"]
    if node is not None and (node.checked or node.skipped):
        lines.append("")
        if node.checked:
            lines.append(f"Checked for this node: {node.checked} (hisparse-check {node.flags()}).")
        lines += [f"Not checked: {why}." for why in node.skipped]
    lines += [
        "",
        f"{ENV}=warn logs these errors and lets vLLM go on; {ENV}=0 turns this check off.",
    ]
    return "\n".join(lines)
