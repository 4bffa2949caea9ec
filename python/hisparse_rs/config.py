"""Config resolution from Python: :func:`check` and :func:`resolve`.

Arguments use vLLM's ``EngineArgs`` names (``kv_transfer_config``,
``attention_config``, ``tensor_parallel_size``, ...). JSON-valued arguments take
a mapping or the JSON text you would pass to ``vllm serve``. The rules are
vLLM 0.33.0's (``vllm/config/vllm.py``, ``vllm/v1/hisparse/``), applied in the
Rust core; results are immutable Rust objects (:class:`Report`,
:class:`Diagnostic`, :class:`HiSparseSettings`, :class:`Provenance`) whose
``Report.to_json()`` is the ``hisparse-check --json`` schema.
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from hisparse_rs import _core, sglang
from hisparse_rs._core import Diagnostic, HiSparseSettings, ModelSummary, Report, SglangHiSparseSettings
from hisparse_rs._options import _check_options
from hisparse_rs.exceptions import ConfigError

__all__ = [
    "ResolvedConfig",
    "apply_fix",
    "check",
    "check_args",
    "resolve",
    "serve_args",
]

JsonArg = Mapping[str, Any] | str | None
_ENV = object()

# Facts about the machines (not vllm serve flags), shared by check() and plan();
# check_args() also takes host_memory_source (what host_memory_gib is, for messages).
_MACHINE_OPTIONS = ("gpu", "gpu_memory_gib", "host_memory_gib", "weights_gib", "gpus_per_node")
_CHECK_ARGS_OPTIONS = (*_MACHINE_OPTIONS, "host_memory_source")


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """A valid configuration: ``hisparse`` is None when HiSparse is not configured
    (a :class:`SglangHiSparseSettings` for ``engine="sglang"``)."""

    hisparse: HiSparseSettings | SglangHiSparseSettings | None
    model: ModelSummary | None
    warnings: tuple[Diagnostic, ...]


def _serve_args(
    model: str | os.PathLike[str] | None,
    fields: Mapping[str, Any],
    *,
    hf_config: Mapping[str, Any] | None = None,
    vllm_use_v2_model_runner: Any = _ENV,
) -> dict[str, Any]:
    args: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if model is not None:
        # A bytes path decodes as the OS would name it; one that is not UTF-8
        # is then reported (invalid_value at "model"), never a traceback.
        args["model"] = os.fsdecode(model)
    if hf_config is not None:
        args["hf_config"] = hf_config
    env = (
        os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
        if vllm_use_v2_model_runner is _ENV
        else vllm_use_v2_model_runner
    )
    if isinstance(env, bool):
        env = int(env)  # the variable holds an integer: "1" / "0"
    if env is not None:
        args["VLLM_USE_V2_MODEL_RUNNER"] = str(env)
    # Read as vLLM reads it (vllm/envs.py:1115): max_model_len over the model's warns instead.
    long_len = os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    if long_len is not None:
        args["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = long_len
    return args


def check(
    model: str | os.PathLike[str] | None = None,
    *,
    engine: str = "vllm",
    revision: str | None = None,
    hf_config_path: str | os.PathLike[str] | None = None,
    hf_config: Mapping[str, Any] | None = None,
    hf_overrides: JsonArg = None,
    kv_transfer_config: JsonArg = None,
    attention_config: JsonArg = None,
    speculative_config: JsonArg = None,
    compilation_config: JsonArg = None,
    tensor_parallel_size: int | None = None,
    pipeline_parallel_size: int | None = None,
    data_parallel_size: int | None = None,
    data_parallel_size_local: int | None = None,
    decode_context_parallel_size: int | None = None,
    prefill_context_parallel_size: int | None = None,
    nnodes: int | None = None,
    node_rank: int | None = None,
    headless: bool | None = None,
    data_parallel_rank: int | None = None,
    kv_cache_dtype: str | None = None,
    block_size: int | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    gpu_memory_utilization: float | None = None,
    kv_cache_memory_bytes: int | None = None,
    distributed_executor_backend: str | None = None,
    data_parallel_backend: str | None = None,
    enable_expert_parallel: bool | None = None,
    scheduler_reserve_full_isl: bool | None = None,
    disable_hybrid_kv_cache_manager: bool | None = None,
    platform: str | None = None,
    vllm_use_v2_model_runner: Any = _ENV,
    gpu: str | None = None,
    gpu_memory_gib: float | None = None,
    host_memory_gib: float | None = None,
    weights_gib: float | None = None,
    gpus_per_node: int | None = None,
    **server_args: Any,
) -> Report:
    """Check a vLLM serve configuration (or, with ``engine="sglang"``, an SGLang
    0.5.23 launch) for HiSparse and return the report; never raises on a bad config.

    Args:
        engine: ``"vllm"`` (vLLM 0.33.0, the default) or ``"sglang"`` (SGLang
            0.5.23). For SGLang, ``model`` is ``--model-path`` and every other
            argument is an SGLang ``ServerArgs`` attribute in ``server_args``
            (``tp_size=8, enable_hisparse=True, hisparse_config='{"top_k": 2048}',
            disaggregation_mode="decode"``), with values as SGLang's argparse
            produces them; ``revision``, ``kv_cache_dtype`` and ``nnodes`` are
            SGLang attributes too, and the machine options below work for both
            (``gpu`` picks SGLang's ``auto`` kv cache dtype: fp8_e4m3 on
            SM >= 10, bfloat16 below). The other arguments are vLLM's and a
            TypeError for SGLang. See :mod:`hisparse_rs.sglang`.
        server_args: SGLang ``ServerArgs`` attributes (``engine="sglang"`` only;
            a TypeError for vLLM, and for a name SGLang 0.5.23 does not have).
        model: a local ``config.json``, a directory containing one, or a Hugging
            Face model id read from the local cache (``HF_HUB_CACHE``,
            ``HF_HOME/hub``, ``~/.cache/huggingface/hub``; never downloaded).
        revision: the branch, tag or commit of a model id (default ``main``).
        hf_config_path: ``--hf-config-path``: where the config is read from instead of
            ``model`` (a file, a directory or a cached model id, at ``revision``), as
            vLLM 0.33's ``ModelConfig`` reads it (``get_config(hf_config_path or model)``,
            vllm/config/model.py:680).
        hf_config: the model's config as a mapping, instead of ``model``.
        hf_overrides: deep-merged over the model config (``--hf-overrides``).
        kv_transfer_config, attention_config, speculative_config, compilation_config:
            the JSON flags of ``vllm serve``, as mappings or JSON text.
        tensor_parallel_size ... disable_hybrid_kv_cache_manager: as the
            ``vllm serve`` flags of the same names (None: vLLM's default);
            ``nnodes`` is ``--nnodes``, the nodes of the deployment;
            ``data_parallel_size_local`` (``--data-parallel-size-local``) the
            DP replicas this node runs, 0 ..= ``data_parallel_size`` (vLLM 0.33
            ``ParallelConfig``, vllm/config/parallel.py:150, :545; unset: all of
            them, or an even share over ``nnodes``): ``host_memory_gib`` is
            checked against this node's pools. ``node_rank`` is ``--node-rank``
            (0 ..= nnodes - 1), ``headless`` ``vllm serve --headless``, and
            ``data_parallel_rank`` ``--data-parallel-rank`` (this process is one
            external-LB DP rank: it runs one replica, and only its pools are
            counted on the node); ``data_parallel_backend`` is
            ``--data-parallel-backend`` (``"mp"``, ``"ray"``).
            ``max_model_len`` is in tokens, -1 for auto;
            ``gpu_memory_utilization`` a fraction in (0, 1] (default 0.92);
            ``kv_cache_memory_bytes`` bytes per GPU. The last four are read
            by :func:`plan`.
        platform: ``"cuda"`` (default), ``"rocm"`` or ``"cpu"``.
        vllm_use_v2_model_runner: the ``VLLM_USE_V2_MODEL_RUNNER`` environment
            variable; read from ``os.environ`` unless given (None: unset).
        gpu, gpu_memory_gib, host_memory_gib, weights_gib: the machines (not
            ``vllm serve`` flags), as for :func:`plan`. ``gpu`` (``"h200"``,
            ``"b200"``, ..., or the name the driver reports, ``"NVIDIA H200"``;
            see :func:`hisparse_rs.gpu_spec`) adds vLLM 0.33's residency-resolver shared-memory
            check (``residency_shared_memory_exceeded``); ``host_memory_gib`` (the
            node's RAM) the pinned-pool check (``host_memory_exceeded``; without it a valid
            report carries the warning ``host_memory_not_given``: the RAM was not checked); a known
            GPU memory makes host_pool_gib fixes offer the pool that lets the
            GPUs bind instead of the start-up minimum.
        gpus_per_node: GPUs one node holds (``--gpus-per-node``, 1 ..= 1024;
            default: ``gpu``'s usual server, 8 on HGX / DGX A100, H100, H800,
            H20, H200, B200, B300 and the MI300X platform, 4 on a GB200 / GB300
            NVL72 compute tray, unknown for PCIe and NVL cards): a launch that
            runs more on one node (tensor x pipeline x its local DP replicas)
            is ``gpus_per_node_exceeded`` (vLLM 0.33 config/parallel.py:1068,
            v1/worker/gpu_worker.py:487; SGLang 0.5.23
            model_executor/model_runner.py:455), with a fix over more nodes.

    Raises:
        ModelLoadError: the model's config.json cannot be found or read.
        TypeError: an argument has the wrong type.
        ValueError: an unknown ``gpu`` or ``engine``, or a machine option out of range.
    """
    params = locals()  # the arguments alone: the first statement
    machine = {
        "gpu": gpu,
        "gpu_memory_gib": gpu_memory_gib,
        "host_memory_gib": host_memory_gib,
        "weights_gib": weights_gib,
        "gpus_per_node": gpus_per_node,
    }
    if sglang.engine_name(engine) == "sglang":
        given = {k: v for k, v in params.items() if k in _VLLM_ONLY and v is not None and v is not _ENV}
        if given:
            raise TypeError(
                f"check(engine='sglang') takes SGLang ServerArgs names; {', '.join(sorted(given))} "
                "are vLLM's (e.g. tensor_parallel_size is tp_size)"
            )
        shared = {"revision": revision, "kv_cache_dtype": kv_cache_dtype, "nnodes": nnodes}
        return sglang.check(model, machine, {**shared, **server_args})
    if server_args:
        raise TypeError(_unexpected("check", server_args))
    # One pass over the arguments, in their order (serve_args gives the same dict).
    fields = {k: v for k in _SERVE_FIELDS if (v := params[k]) is not None}
    if hf_config_path is not None:
        fields["hf_config_path"] = os.fsdecode(hf_config_path)
    args = _serve_args(model, fields, hf_config=hf_config, vllm_use_v2_model_runner=vllm_use_v2_model_runner)
    given_machine: dict[str, Any] = {k: v for k, v in machine.items() if v is not None}
    return check_args(args, **given_machine)


_CHECK_KEYWORDS = frozenset(inspect.signature(check).parameters) - {
    "model",
    "engine",
    "server_args",
    *_MACHINE_OPTIONS,
}
# vLLM's arguments that SGLang does not share (its revision, kv_cache_dtype and nnodes are SGLang's too).
_VLLM_ONLY = _CHECK_KEYWORDS - {"revision", "kv_cache_dtype", "nnodes"}
# The ServeArgs fields check() passes as given, in its signature's order.
_SERVE_FIELDS = tuple(
    name
    for name in inspect.signature(check).parameters
    if name in _CHECK_KEYWORDS and name not in ("hf_config", "vllm_use_v2_model_runner")
)


def _unexpected(function: str, names: Iterable[str]) -> str:
    """The TypeError text for keyword arguments ``function`` does not take: the
    closest vLLM name for a typo (``tensor_paralel_size``: did you mean
    tensor_parallel_size?), else the hint that SGLang names need ``engine="sglang"``."""
    known = sorted(_CHECK_KEYWORDS | set(_MACHINE_OPTIONS))
    parts = []
    for name in sorted(names):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
    hint = (
        "" if all("did you mean" in p for p in parts) else " (SGLang ServerArgs names need engine='sglang')"
    )
    return f"{function}() got unexpected keyword arguments: {', '.join(parts)}{hint}"


def serve_args(
    model: str | os.PathLike[str] | None = None, *, engine: str = "vllm", **kwargs: Any
) -> dict[str, Any]:
    """The ``ServeArgs`` JSON form of :func:`check`'s arguments (same names and meaning).

    This is the form :func:`check_args` and :func:`apply_fix` take and the test
    vectors use: a dict keyed by vLLM ``EngineArgs`` names, the model as
    ``"model"`` (a path) or ``"hf_config"`` (a mapping), and the environment
    variable as ``"VLLM_USE_V2_MODEL_RUNNER"``. Raises TypeError on an unknown name.

    With ``engine="sglang"``: the SGLang 0.5.23 ``ServerArgs`` attributes, as
    :func:`check` takes them with ``engine="sglang"`` (``model`` is
    ``"model_path"``; None values are left out, SGLang's default applies), for
    ``check_args(args, engine="sglang")`` and ``apply_fix(args, fix, engine="sglang")``.
    """
    if sglang.engine_name(engine) == "sglang":
        return sglang.sglang_server_args(model, **kwargs)
    unknown = sorted(set(kwargs) - _CHECK_KEYWORDS)
    if unknown:
        raise TypeError(_unexpected("serve_args", unknown))
    fields = {k: v for k, v in kwargs.items() if k not in ("hf_config", "vllm_use_v2_model_runner")}
    return _serve_args(
        model,
        fields,
        hf_config=kwargs.get("hf_config"),
        vllm_use_v2_model_runner=kwargs.get("vllm_use_v2_model_runner", _ENV),
    )


def check_args(args: Mapping[str, Any], *, engine: str = "vllm", **machine: Any) -> Report:
    """:func:`check` on serve args in the ``ServeArgs`` JSON form (see :func:`serve_args`);
    ``machine`` takes :func:`check`'s ``gpu``, ``gpu_memory_gib``, ``host_memory_gib``,
    ``weights_gib``, ``gpus_per_node``, and ``host_memory_source``: what ``host_memory_gib``
    is, quoted by the messages (at most 512 bytes; default "given with --host-memory-gib";
    the vLLM plugin passes the node's available RAM and says so).

    With ``engine="sglang"``, ``args`` are SGLang 0.5.23 ``ServerArgs``
    attributes (``serve_args(model, engine="sglang", ...)``) and the report is
    :func:`check`'s with ``engine="sglang"``.

    The mapping is converted in Rust with bounds (docs/limits.md): nesting
    deeper than 128 levels or a circular reference is an ``input_too_deep``
    error in the report, more than 16 MiB ``input_too_large``, text that is
    not UTF-8 or an int no field can hold ``invalid_value``; NaN and
    infinities are read as Python's ``float()`` reads "nan" and "inf".

    Raises:
        TypeError / ValueError: a machine option of the wrong type or out of range.
    """
    unknown = sorted(set(machine) - set(_CHECK_ARGS_OPTIONS))
    if unknown:
        raise TypeError(f"check_args() got unexpected keyword arguments: {', '.join(unknown)}")
    _check_options(machine)
    if sglang.engine_name(engine) == "sglang":
        return _core.sglang_check_json(args, json.dumps(machine) if machine else None)
    if not machine:
        return _core.check_json(args)
    return _core.check_json(args, json.dumps(machine))


def check_argv(
    argv: Sequence[str],
    *,
    gpu: str | None = None,
    gpu_memory_gib: float | None = None,
    host_memory_gib: float | None = None,
    weights_gib: float | None = None,
    gpus_per_node: int | None = None,
) -> Report:
    """Check a ``vllm serve`` launch given as its command line, exactly as
    ``hisparse-check ARGV`` reads it (as :func:`hisparse_rs.check_sglang_argv`
    is for SGLang); never raises on a bad configuration.

    Args:
        argv: the words after ``vllm serve`` (``["MODEL", "-tp", "8", ...]``; a
            leading ``vllm serve`` is taken off), read in every form vLLM 0.33's
            argparse takes (``--config FILE.yaml``, dotted JSON flags, ``-tp``,
            ``--no-`` forms, ``1k`` / ``1K`` lengths); flags the check does not
            read are in ``Report.ignored_flags``. The machine flags
            (``--gpu``, ``--host-memory-gib``, ...) may be in ``argv`` too.
        gpu, gpu_memory_gib, host_memory_gib, weights_gib, gpus_per_node: as
            for :func:`check`; given here, each wins over the same flag in ``argv``.
            ``VLLM_USE_V2_MODEL_RUNNER`` and ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``
            are read from ``os.environ``, as ``vllm serve`` reads them.

    Raises:
        TypeError: ``argv`` is not a sequence of str, or an option has the wrong type.
        ValueError: what the CLI calls a usage error (a flag vLLM does not have,
            a value its argparse refuses, ``--plan``: use :func:`plan`), an
            unknown ``gpu`` or an option out of range.
        ModelLoadError: the model's config.json cannot be found or read.
    """
    if isinstance(argv, str | bytes):
        raise TypeError("argv must be a list of str (the words of the command line)")
    words = list(argv)
    if not all(isinstance(a, str) for a in words):
        raise TypeError("argv must be a list of str (the words of the command line)")
    machine = {
        "gpu": gpu,
        "gpu_memory_gib": gpu_memory_gib,
        "host_memory_gib": host_memory_gib,
        "weights_gib": weights_gib,
        "gpus_per_node": gpus_per_node,
    }
    given = {k: v for k, v in machine.items() if v is not None}
    _check_options(given)
    return _core.check_vllm_argv(words, json.dumps(given) if given else None)


def resolve(model: str | os.PathLike[str] | None = None, **kwargs: Any) -> ResolvedConfig:
    """Resolve a serve configuration like :func:`check` (same arguments, ``gpu=``
    and ``engine=`` included), but raise if it is invalid.

    Returns a :class:`ResolvedConfig`; its ``hisparse`` is None when HiSparse is
    not configured. Raises :class:`ConfigError` (a ValueError) carrying every
    error, plus the errors :func:`check` raises.
    """
    report = check(model, **kwargs)
    if not report.valid:
        raise ConfigError(report)
    return ResolvedConfig(hisparse=report.hisparse, model=report.model, warnings=report.warnings)


Fix = tuple[Mapping[str, Any], ...] | list[Any]


@overload
def apply_fix(args: Mapping[str, Any], fix: Fix, *, engine: str = "vllm") -> dict[str, Any]: ...
@overload
def apply_fix(args: Sequence[str], fix: Fix, *, engine: str = "vllm") -> list[str]: ...
def apply_fix(
    args: Mapping[str, Any] | Sequence[str], fix: Fix, *, engine: str = "vllm"
) -> dict[str, Any] | list[str]:
    """Apply a diagnostic's ``fix`` to serve args in ``ServeArgs`` JSON form (see
    :func:`serve_args`); returns the new args. All or nothing: removing an
    absent path changes nothing, and paths and the result nest at most 128
    levels. Raises ValueError if the fix does not apply (``args`` is unchanged).

    With ``engine="sglang"``, ``args`` is an SGLang launch in either form a
    report comes from, and the fixed launch comes back in the same form:
    ``ServerArgs`` attributes (``serve_args(model, engine="sglang", ...)``; a
    ``hisparse_config`` given as JSON text stays text) give the fixed
    attributes, for :func:`check_args`; the words of a command line (as
    :func:`check_sglang_argv` takes them) give the fixed words: every word of
    an attribute the fix sets (any spelling, abbreviation or ``--flag=value``)
    is replaced by its new flag, as ``Report.fixed_flags`` prints it, and the
    rest stay in place. A TypeError for argv words with ``engine="vllm"``
    (use :func:`serve_args`)."""
    if sglang.engine_name(engine) == "sglang":
        if isinstance(args, Mapping | str):  # the attributes, or their JSON text
            attrs: dict[str, Any] = json.loads(_core.sglang_apply_fix_json(args, list(fix)))
            return attrs
        return _core.sglang_fixed_argv(sglang.argv_words(args), list(fix))
    if not isinstance(args, Mapping | str):  # the serve args, or their JSON text
        raise TypeError(
            "apply_fix(engine='vllm') takes serve args as a mapping (serve_args(...)), "
            f"got {type(args).__name__}; argv words are taken with engine='sglang'"
        )
    edited: dict[str, Any] = json.loads(_core.apply_fix_json(args, list(fix)))
    return edited
