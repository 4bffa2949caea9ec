"""Config resolution from Python: :func:`check` and :func:`resolve`.

Arguments use vLLM's ``EngineArgs`` names (``kv_transfer_config``,
``attention_config``, ``tensor_parallel_size``, ...). JSON-valued arguments take
a mapping or the JSON text you would pass to ``vllm serve``. The rules are
vLLM 0.33.0's (``vllm/config/vllm.py``, ``vllm/v1/hisparse/``), applied in the
Rust core; results are immutable and follow the ``hisparse-check --json`` schema.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from hisparse_rs import _core
from hisparse_rs.exceptions import ConfigError

__all__ = [
    "Diagnostic",
    "HiSparseSettings",
    "ModelSummary",
    "Provenance",
    "Report",
    "ResolvedConfig",
    "apply_fix",
    "check",
    "check_args",
    "resolve",
]

JsonArg = Mapping[str, Any] | str | None
_ENV = object()


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a resolved value came from.

    ``source`` is ``"explicit"`` (the user set it at ``path``), ``"inferred"``
    (from the HiSparseConnector at ``connector``), ``"default"`` (vLLM's default,
    see ``rule``) or ``"derived"`` (computed by ``rule`` from the inputs in ``from_``).
    """

    source: Literal["explicit", "inferred", "default", "derived"]
    path: str | None = None
    connector: str | None = None
    rule: str | None = None
    from_: tuple[str, ...] = ()

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Provenance:
        return cls(
            source=d["source"],
            path=d.get("path"),
            connector=d.get("connector"),
            rule=d.get("rule"),
            from_=tuple(d.get("from", ())),
        )


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One error or warning.

    ``code`` is stable (match on it, not on ``message``); ``path`` is the field
    path, e.g. ``kv_transfer_config.kv_connector_extra_config.connectors[1].kv_role``;
    ``fix`` is a tuple of edit operations (``{"op": "set"|"remove"|"move", ...}``)
    that :func:`apply_fix` applies and that make this diagnostic go away.
    """

    code: str
    severity: Literal["error", "warning"]
    path: str
    message: str
    given: Any = None
    allowed: str | None = None
    hint: str | None = None
    fix: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Diagnostic:
        return cls(
            code=d["code"],
            severity=d["severity"],
            path=d["path"],
            message=d["message"],
            given=d.get("given"),
            allowed=d.get("allowed"),
            hint=d.get("hint"),
            fix=tuple(MappingProxyType(op) for op in d.get("fix", ())),
        )


_SETTINGS = (
    "host_pool_gib",
    "device_buffer_size",
    "eager_host_mirror",
    "index_topk",
    "max_decode_query_len",
    "kv_cache_dtype",
    "row_bytes",
    "block_size",
    "max_model_len",
    "sparse_mla_layers",
    "host_block_bytes",
    "host_blocks",
    "min_host_blocks",
)


@dataclass(frozen=True, slots=True)
class HiSparseSettings:
    """HiSparse as vLLM 0.33.0 would run it. ``provenance[name]`` says where each field came from.

    Units: ``host_pool_gib`` GiB (2**30 B) per data-parallel replica;
    ``device_buffer_size`` hot-buffer rows per request (incl. the newest-token
    slot); ``row_bytes`` bytes per token per layer (656 fp8_ds_mla, 1152 bf16;
    None if unknown); ``block_size`` and ``max_model_len`` tokens;
    ``host_block_bytes`` = block_size x row_bytes x sparse_mla_layers;
    ``host_blocks`` = floor(host_pool_gib x 2**30 / host_block_bytes);
    ``min_host_blocks`` = ceil(max_model_len / block_size) + 2.
    """

    enabled_by: Provenance
    connector: str
    host_pool_gib: float
    device_buffer_size: int
    eager_host_mirror: bool
    index_topk: int
    max_decode_query_len: int
    kv_cache_dtype: str
    row_bytes: int | None
    block_size: int
    max_model_len: int
    sparse_mla_layers: int
    host_block_bytes: int | None
    host_blocks: int | None
    min_host_blocks: int
    _raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def provenance(self) -> Mapping[str, Provenance]:
        """Field name -> :class:`Provenance`, for every resolved field."""
        return MappingProxyType(
            {name: Provenance._from_json(self._raw[name]) for name in _SETTINGS if self._raw.get(name)}
        )

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> HiSparseSettings:
        values: dict[str, Any] = {
            name: (None if d.get(name) is None else d[name]["value"]) for name in _SETTINGS
        }
        return cls(
            enabled_by=Provenance._from_json(d["enabled"]),
            connector=d["connector"],
            _raw=d,
            **values,
        )


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """The model checked against: ``source`` is the config path (or ``hf_config``)."""

    source: str
    architecture: str | None
    model_type: str | None


@dataclass(frozen=True, slots=True)
class Report:
    """Everything :func:`check` found: the ``hisparse-check --json`` report as objects.

    ``hisparse`` is set only when the configuration is valid and HiSparse is on.
    """

    valid: bool
    hisparse_enabled: bool
    model: ModelSummary | None
    hisparse: HiSparseSettings | None
    errors: tuple[Diagnostic, ...]
    warnings: tuple[Diagnostic, ...]
    schema_version: int
    vllm_version: str

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Report:
        model = d.get("model")
        hs = d.get("hisparse")
        return cls(
            valid=d["valid"],
            hisparse_enabled=d["hisparse_enabled"],
            model=ModelSummary(**model) if model else None,
            hisparse=HiSparseSettings._from_json(hs) if hs else None,
            errors=tuple(Diagnostic._from_json(x) for x in d["errors"]),
            warnings=tuple(Diagnostic._from_json(x) for x in d["warnings"]),
            schema_version=d["schema_version"],
            vllm_version=d["vllm_version"],
        )


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """A valid configuration: ``hisparse`` is None when HiSparse is not configured."""

    hisparse: HiSparseSettings | None
    model: ModelSummary | None
    warnings: tuple[Diagnostic, ...]


def _serve_args(
    model: str | os.PathLike[str] | None,
    *,
    hf_config: Mapping[str, Any] | None,
    vllm_use_v2_model_runner: Any,
    **fields: Any,
) -> dict[str, Any]:
    args: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if model is not None:
        args["model"] = os.fspath(model)
    if hf_config is not None:
        args["hf_config"] = hf_config
    env = (
        os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
        if vllm_use_v2_model_runner is _ENV
        else vllm_use_v2_model_runner
    )
    if env is not None:
        args["VLLM_USE_V2_MODEL_RUNNER"] = str(env)
    return args


def check(
    model: str | os.PathLike[str] | None = None,
    *,
    hf_config: Mapping[str, Any] | None = None,
    hf_overrides: JsonArg = None,
    kv_transfer_config: JsonArg = None,
    attention_config: JsonArg = None,
    speculative_config: JsonArg = None,
    compilation_config: JsonArg = None,
    tensor_parallel_size: int | None = None,
    pipeline_parallel_size: int | None = None,
    data_parallel_size: int | None = None,
    decode_context_parallel_size: int | None = None,
    kv_cache_dtype: str | None = None,
    block_size: int | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    scheduler_reserve_full_isl: bool | None = None,
    disable_hybrid_kv_cache_manager: bool | None = None,
    platform: str | None = None,
    vllm_use_v2_model_runner: Any = _ENV,
) -> Report:
    """Check a vLLM serve configuration for HiSparse and return the report; never raises on a bad config.

    Args:
        model: a local ``config.json`` or a directory containing one.
        hf_config: the model's config as a mapping, instead of ``model``.
        hf_overrides: deep-merged over the model config (``--hf-overrides``).
        kv_transfer_config, attention_config, speculative_config, compilation_config:
            the JSON flags of ``vllm serve``, as mappings or JSON text.
        tensor_parallel_size ... disable_hybrid_kv_cache_manager: as the
            ``vllm serve`` flags of the same names (None: vLLM's default).
            ``max_model_len`` is in tokens, -1 for auto.
        platform: ``"cuda"`` (default), ``"rocm"`` or ``"cpu"``.
        vllm_use_v2_model_runner: the ``VLLM_USE_V2_MODEL_RUNNER`` environment
            variable; read from ``os.environ`` unless given (None: unset).

    Raises:
        ModelLoadError: the model's config.json cannot be found or read.
        TypeError: an argument has the wrong type.
    """
    args = _serve_args(
        model,
        hf_config=hf_config,
        vllm_use_v2_model_runner=vllm_use_v2_model_runner,
        hf_overrides=hf_overrides,
        kv_transfer_config=kv_transfer_config,
        attention_config=attention_config,
        speculative_config=speculative_config,
        compilation_config=compilation_config,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size,
        decode_context_parallel_size=decode_context_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        block_size=block_size,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        scheduler_reserve_full_isl=scheduler_reserve_full_isl,
        disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager,
        platform=platform,
    )
    return check_args(args)


def check_args(args: Mapping[str, Any]) -> Report:
    """:func:`check` on serve args already in the JSON ``ServeArgs`` form (as in ``tests/vectors``)."""
    return _report_from_text(_core.check_json(json.dumps(args)))


@functools.lru_cache(maxsize=256)
def _report_from_text(text: str) -> Report:
    # The report text determines the Report completely (the Rust side re-reads
    # the model file when it changes), so identical text can share one object.
    return Report._from_json(json.loads(text))


def resolve(model: str | os.PathLike[str] | None = None, **kwargs: Any) -> ResolvedConfig:
    """Resolve a serve configuration like :func:`check`, but raise if it is invalid.

    Returns a :class:`ResolvedConfig`; its ``hisparse`` is None when HiSparse is
    not configured. Raises :class:`ConfigError` (a ValueError) carrying every
    error, plus the errors :func:`check` raises.
    """
    report = check(model, **kwargs)
    if not report.valid:
        raise ConfigError(report)
    return ResolvedConfig(hisparse=report.hisparse, model=report.model, warnings=report.warnings)


def apply_fix(args: Mapping[str, Any], fix: tuple[Mapping[str, Any], ...] | list[Any]) -> dict[str, Any]:
    """Apply a diagnostic's ``fix`` to serve args in ``ServeArgs`` JSON form; returns new args."""
    edited: dict[str, Any] = json.loads(
        _core.apply_fix_json(json.dumps(args), json.dumps([dict(op) for op in fix]))
    )
    return edited
