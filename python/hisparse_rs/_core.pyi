"""Type stubs for the Rust extension ``hisparse_rs._core`` (checked by mypy.stubtest)."""

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hisparse_rs.config import ResolvedConfig

__all__ = [
    "MAX_RESOLVE_ENTRIES",
    "SGLANG_VERSION",
    "VLLM_VERSION",
    "Diagnostic",
    "GpuPlan",
    "HiSparseMetrics",
    "HiSparseSettings",
    "HostKVPool",
    "HostPlan",
    "ModelLoadError",
    "ModelSummary",
    "Plan",
    "PlanPoint",
    "PlanSizes",
    "PoolLayout",
    "PoolStats",
    "Provenance",
    "Report",
    "ResidencyResolver",
    "ResolveResult",
    "SglangHiSparseSettings",
    "SglangSizing",
    "__version__",
    "_config_file_argv",
    "_register_exceptions",
    "_sglang_argv_json",
    "_sglang_server_arg_names",
    "_vllm_flag_table",
    "apply_fix_json",
    "check_deployment_json",
    "check_json",
    "check_sglang_argv",
    "check_vllm_argv",
    "deployment_codes",
    "error_codes",
    "gpu_spec",
    "plan_json",
    "pool_error_codes",
    "run_cli",
    "run_cli_plan",
    "sglang_apply_fix_json",
    "sglang_check_json",
    "sglang_codes",
    "sglang_deviations",
    "sglang_fixed_argv",
    "sglang_plan_json",
    "vllm_deviations",
    "vllm_stages",
]

__version__: Final[str]
VLLM_VERSION: Final[str]
SGLANG_VERSION: Final[str]
"""The SGLang release whose rules ``engine="sglang"`` applies ("0.5.23")."""
MAX_RESOLVE_ENTRIES: Final[int]
"""Most top-k entries (rows x width) one resolve call takes (2**26); PoolError ``batch_too_large`` beyond."""

class ModelLoadError(OSError):
    """The model's config.json could not be found or read.

    ``code``: ``model_not_found``, ``model_not_cached``, ``not_a_regular_file`` (a FIFO, device or
    directory), ``file_too_large`` (over 16 MiB), ``read_failed``,
    ``model_json_invalid`` or ``model_not_object``.
    """

    code: str

@final
class Provenance:
    """Where a resolved value came from.

    ``source``: "explicit" (the user set it at ``path``), "inferred" (from the
    HiSparseConnector at ``connector``), "default" (vLLM's default, see ``rule``)
    or "derived" (computed by ``rule`` from the inputs in ``from_``).
    """

    @property
    def source(self) -> Literal["explicit", "inferred", "default", "derived"]: ...
    @property
    def path(self) -> str | None: ...
    @property
    def connector(self) -> str | None: ...
    @property
    def rule(self) -> str | None: ...
    @property
    def from_(self) -> tuple[str, ...]: ...

@final
class Diagnostic:
    """One error or warning: match on ``code`` (stable), never on ``message``.

    ``fix`` is a tuple of edit operations (``{"op": "set"|"remove"|"move", ...}``)
    that ``hisparse_rs.apply_fix`` applies; applied, they remove this diagnostic.
    """

    @property
    def code(self) -> str: ...
    @property
    def severity(self) -> Literal["error", "warning"]: ...
    @property
    def path(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def stage(
        self,
    ) -> Literal["argparse", "config", "engine_start", "model_load", "workers", "first_step", "never"]:
        """When vLLM 0.33.0 would have refused this, in start-up order: ``argparse``
        (its argument parser), ``config`` (``create_engine_config``), ``engine_start``
        (the engine and executor starting), ``model_load`` (the workers loading the
        model), ``workers`` (after the model has loaded, setting up the KV cache),
        ``first_step``, or ``never`` (vLLM accepts it, then breaks on it or ignores
        it). From :func:`vllm_stages`'s table, or the rule's own where it depends on
        where it fires."""
    @property
    def stage_sentence(self) -> str:
        """The stage in words, as ``hisparse-check`` prints it ("vLLM 0.33.0 refuses
        this after the model has loaded, when its workers set up the KV cache")."""
    @property
    def given(self) -> Any: ...
    @property
    def allowed(self) -> str | None: ...
    @property
    def hint(self) -> str | None: ...
    @property
    def revealed(self) -> bool:
        """True for an error the configuration as given does not have, that only
        the report's other fixes reveal; its fix applies after theirs."""
    @property
    def fix(self) -> tuple[dict[str, Any], ...]: ...

@final
class HiSparseSettings:
    """HiSparse as vLLM 0.33.0 would run it (units: GiB, rows, bytes, tokens)."""

    @property
    def enabled_by(self) -> Provenance: ...
    @property
    def connector(self) -> str: ...
    @property
    def host_pool_gib(self) -> float: ...
    @property
    def device_buffer_size(self) -> int: ...
    @property
    def eager_host_mirror(self) -> bool: ...
    @property
    def index_topk(self) -> int: ...
    @property
    def topk_buffer_width(self) -> int: ...
    @property
    def max_decode_query_len(self) -> int: ...
    @property
    def kv_cache_dtype(self) -> str: ...
    @property
    def row_bytes(self) -> int | None: ...
    @property
    def block_size(self) -> int: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def sparse_mla_layers(self) -> int: ...
    @property
    def host_block_bytes(self) -> int | None: ...
    @property
    def host_block_stride(self) -> int | None: ...
    @property
    def host_blocks(self) -> int | None: ...
    @property
    def min_host_blocks(self) -> int: ...
    @property
    def residency_shared_memory_bytes(self) -> int | None:
        """Shared memory per CUDA block vLLM 0.33's residency resolver needs (bytes)."""
    @property
    def triton_resolver_shared_memory_bytes(self) -> int | None:
        """The same per program for hisparse_rs's Triton resolver (bytes; its compiled cubins' figure)."""
    @property
    def index_groups(self) -> list[int]:
        """Index group of each host-pool layer; layers sharing an indexer (IndexShare) share one."""
    @property
    def provenance(self) -> dict[str, Provenance]: ...

@final
class SglangHiSparseSettings:
    """HiSparse as SGLang 0.5.23 would run it, with SGLang's names (tokens, slots, bytes)."""

    @property
    def top_k(self) -> int | float:
        """``hisparse_config.top_k`` as Python holds it (an int, or a float such as 2048.5 or NaN,
        which SGLang accepts when a buffer is given): read only by the default buffer and the
        buffer >= top_k check."""
    @property
    def index_topk(self) -> int:
        """The model's ``index_topk``, which replaces ``top_k`` at run time."""
    @property
    def device_buffer_size(self) -> int:
        """Device slots per request and layer (default 2 x top_k)."""
    @property
    def host_to_device_ratio(self) -> int:
        """Host pool tokens per device KV slot (default 2)."""
    @property
    def swap_in_block_size(self) -> int:
        """Tokens per swap-in block (default 960, 1..=1024)."""
    @property
    def page_size(self) -> int:
        """Tokens per page: 64 x index_kpool for DSA, overriding ``--page-size``."""
    @property
    def kv_cache_dtype(self) -> str:
        """The KV cache dtype after ``auto`` (fp8_e4m3 on SM >= 10, bfloat16 below)."""
    @property
    def compute_capability(self) -> str:
        """The compute capability the dtype was resolved for, e.g. "9.0"."""
    @property
    def dsa_prefill_backend(self) -> str | None:
        """The DSA prefill backend; None for a model without DSA (DeepSeek-V4, MiniMax-M3)."""
    @property
    def dsa_decode_backend(self) -> str | None:
        """The DSA decode backend; None for a model without DSA."""
    @property
    def disable_radix_cache(self) -> bool:
        """The radix cache is off (HiSparse requires it)."""
    @property
    def disaggregation_mode(self) -> str:
        """ "null", "prefill" or "decode"."""
    @property
    def speculative_num_draft_tokens(self) -> int | None:
        """Draft tokens per verify step; None without speculation."""
    @property
    def kv_row_bytes(self) -> int | None:
        """Bytes of one token's MLA latent in one layer (1152 bfloat16, 656 fp8_e4m3)."""
    @property
    def provenance(self) -> dict[str, Provenance]:
        """Field name -> Provenance for every resolved field (a new dict each call)."""

@final
class ModelSummary:
    """The model checked against."""

    @property
    def source(self) -> str: ...
    @property
    def architecture(self) -> str | None: ...
    @property
    def model_type(self) -> str | None: ...

@final
class Report:
    """Everything a check found; ``to_json()`` is the ``hisparse-check --json`` schema."""

    @property
    def valid(self) -> bool: ...
    @property
    def hisparse_enabled(self) -> bool: ...
    @property
    def model(self) -> ModelSummary | None: ...
    @property
    def hisparse(self) -> HiSparseSettings | SglangHiSparseSettings | None:
        """The resolved settings in the engine's terms (SglangHiSparseSettings for SGLang)."""
    @property
    def engine(self) -> str:
        """The engine whose rules were applied: "vllm" or "sglang"."""
    @property
    def engine_version(self) -> str:
        """That engine's release, e.g. "0.33.0" or "0.5.23"."""
    @property
    def errors(self) -> tuple[Diagnostic, ...]: ...
    @property
    def warnings(self) -> tuple[Diagnostic, ...]: ...
    @property
    def gpu(self) -> dict[str, Any] | None:
        """The GPU named with ``gpu=`` (its figures and their sources), or None."""
    @property
    def host_memory(self) -> dict[str, Any] | None:
        """The node's RAM the pinned host pools were checked against, on a valid report.

        Present when HiSparse is on and the RAM is known (``host_memory_gib=``, or the
        machine's in the vLLM plugin): ``host_memory_gib``, ``source``, ``pools_per_node``,
        ``pool_bytes``, ``pinned_bytes`` (the node's pools together), ``usable_bytes``
        (what the engine lets them pin: ``rule``) and ``left_bytes`` (the headroom). None
        otherwise (SGLang: also without the GPU's memory, which sizes its pool).
        """
    @property
    def ignored_flags(self) -> list[str]:
        """Flags given that the check does not read, as given (``--port 30000``); a new list each call."""
    @property
    def fixed_flags(self) -> str | None:
        """The ``vllm serve`` flags to change with every fix applied, as shell text.

        E.g. ``--block-size 64 --kv-transfer-config '{...}'``; ``(remove --flag)`` for what
        the fixes remove. Given in place of those flags (with :attr:`fixed_env` applied),
        they pass; JSON flags are given whole (vLLM's dotted flags replace a JSON flag
        instead of editing it). None when no fix changes a flag (the model and platform
        are not flags).
        """
    @property
    def fixed_env(self) -> str | None:
        """The environment variables the fixes change, as shell text run before ``vllm serve``.

        E.g. ``unset VLLM_USE_V2_MODEL_RUNNER``; ``VAR=value`` for one they set. None when no
        fix changes one.
        """
    @property
    def schema_version(self) -> int: ...
    @property
    def vllm_version(self) -> str | None: ...
    def to_json(self) -> str:
        """The report as indented JSON text."""

@final
class PlanSizes:
    """Per-token and per-block sizes of a plan, in bytes (HISPARSE.md §5; vLLM 0.33 layout).

    ``mla_row_bytes``: MLA latent KV per token per layer (656 fp8_ds_mla, 1152 bf16);
    ``indexer_row_bytes``: indexer key per token per layer (132 for index_head_dim 128);
    ``mla_bytes_per_token`` / ``indexer_bytes_per_token``: times the layer counts;
    ``hot_buffer_bytes``: device_buffer_size x mla_bytes_per_token per request;
    ``hot_groups``: groups of hot layers in the GPU pool; ``baseline_block_bytes`` /
    ``hisparse_block_bytes``: one GPU block (block_size tokens) without / with HiSparse.
    """

    @property
    def kv_cache_dtype(self) -> str: ...
    @property
    def mla_row_bytes(self) -> int: ...
    @property
    def indexer_row_bytes(self) -> int: ...
    @property
    def sparse_mla_layers(self) -> int: ...
    @property
    def indexer_layers(self) -> int: ...
    @property
    def draft_layers(self) -> int: ...
    @property
    def mla_bytes_per_token(self) -> int: ...
    @property
    def indexer_bytes_per_token(self) -> int: ...
    @property
    def block_size(self) -> int: ...
    @property
    def device_buffer_size(self) -> int: ...
    @property
    def hot_buffer_bytes(self) -> int: ...
    @property
    def hot_groups(self) -> int: ...
    @property
    def baseline_block_bytes(self) -> int: ...
    @property
    def hisparse_block_bytes(self) -> int: ...

@final
class HostPlan:
    """The host pools of one node (bytes unless named GiB).

    ``mode``: "shared" (one pool per DP replica, its TP ranks share it) or
    "private" (one per rank); ``pools_per_node`` pools of ``pool_bytes`` pin
    ``pinned_bytes_per_node``, checked against ``usable_host_memory_bytes``
    (95 % of ``host_memory_bytes``, None when unknown).
    """

    @property
    def mode(self) -> Literal["shared", "private"]: ...
    @property
    def mode_rule(self) -> str: ...
    @property
    def host_pool_gib(self) -> float: ...
    @property
    def host_block_bytes(self) -> int: ...
    @property
    def host_block_stride(self) -> int: ...
    @property
    def host_blocks(self) -> int: ...
    @property
    def min_host_blocks(self) -> int: ...
    @property
    def min_host_pool_gib(self) -> float: ...
    @property
    def pool_bytes(self) -> int: ...
    @property
    def pools_per_node(self) -> int: ...
    @property
    def pinned_bytes_per_node(self) -> int: ...
    @property
    def host_memory_bytes(self) -> int | None: ...
    @property
    def host_memory_source(self) -> str: ...
    @property
    def usable_host_memory_bytes(self) -> int | None: ...
    @property
    def host_memory_given(self) -> bool: ...
    @property
    def draft_model(self) -> str | None: ...

@final
class GpuPlan:
    """GPU memory of each GPU of a replica, in bytes.

    ``kv_bytes_per_gpu`` is None when neither kv_cache_memory_bytes nor
    gpu_memory_gib was given; ``weights_estimated`` says whether the weights
    figure came from config.json rather than weights_gib.
    """

    @property
    def tensor_parallel_size(self) -> int: ...
    @property
    def data_parallel_size(self) -> int: ...
    @property
    def kv_bytes_per_gpu(self) -> int | None: ...
    @property
    def kv_source(self) -> str: ...
    @property
    def gpu_memory_gib(self) -> float | None: ...
    @property
    def gpu_memory_utilization(self) -> float: ...
    @property
    def weights_bytes_per_gpu(self) -> int | None: ...
    @property
    def weights_source(self) -> str | None: ...
    @property
    def weights_estimated(self) -> bool: ...
    @property
    def max_num_seqs(self) -> int: ...
    @property
    def max_num_seqs_source(self) -> str: ...
    @property
    def baseline_blocks(self) -> int | None: ...
    @property
    def hisparse_blocks(self) -> int | None: ...
    @property
    def gpu_name(self) -> str | None: ...

_Limit = Literal["gpu", "host", "max_num_seqs", "baseline"]

@final
class PlanPoint:
    """Capacity at ``context_length`` tokens per request, per DP replica.

    Request counts are None when the GPU KV room is unknown; limits name what
    binds ("gpu", "host", "max_num_seqs" or "baseline"). ``min_host_pool_gib``
    is the smallest pool holding ``target_requests``, capped by what the node's
    RAM pins when ``host_memory_gib`` is given (None when not even the start-up
    minimum fits); ``min_host_pool_requests`` is what that pool holds, fewer
    than ``target_requests`` when capped (the host binds).
    """

    @property
    def context_length(self) -> int: ...
    @property
    def host_kv_bytes_per_request(self) -> int: ...
    @property
    def indexer_bytes_per_request(self) -> int: ...
    @property
    def baseline_gpu_bytes_per_request(self) -> int: ...
    @property
    def hisparse_gpu_blocks_per_request(self) -> int: ...
    @property
    def hisparse_gpu_bytes_per_request(self) -> int: ...
    @property
    def host_blocks_per_request(self) -> int: ...
    @property
    def baseline_requests(self) -> int | None: ...
    @property
    def baseline_limit(self) -> _Limit | None: ...
    @property
    def gpu_limit(self) -> int | None: ...
    @property
    def host_limit(self) -> int: ...
    @property
    def hisparse_requests(self) -> int | None: ...
    @property
    def hisparse_limit(self) -> _Limit | None: ...
    @property
    def target_requests(self) -> int | None: ...
    @property
    def min_host_pool_gib(self) -> float | None: ...
    @property
    def min_host_pool_requests(self) -> int | None: ...
    @property
    def host_to_device_ratio(self) -> int | None:
        """SGLang plans only (None for vLLM): the smallest ``host_to_device_ratio`` whose host
        pool holds ``min_host_pool_requests`` requests of this context."""

@final
class SglangSizing:
    """How SGLang 0.5.23 sizes one GPU's pools for a HiSparse launch (``Plan.sglang``, the
    JSON's ``sglang``; per GPU / rank, counts or bytes)."""

    @property
    def host_to_device_ratio(self) -> int:
        """The launch's ``hisparse_config.host_to_device_ratio`` (R)."""
    @property
    def device_cell_bytes(self) -> int:
        """Bytes of one device KV slot: ``L x kv_row + L x index_row x R``."""
    @property
    def device_slots(self) -> int:
        """Device KV slots N_dev."""
    @property
    def host_tokens(self) -> int:
        """Host pool tokens N_host = ``(int(N_dev x R) // page + 1) x page``."""
    @property
    def request_device_slots(self) -> int:
        """Device slots one decoding request holds: ``D + 64 + scratch``."""
    @property
    def speculative_scratch_slots(self) -> int: ...
    @property
    def mem_fraction_static_rule(self) -> str: ...
    @property
    def max_running_requests(self) -> int:
        """Per attention-DP worker, as SGLang resolves it."""
    @property
    def max_running_requests_rule(self) -> str: ...
    @property
    def ranks_per_host(self) -> int: ...
    @property
    def host_budget_per_rank_bytes(self) -> int | None:
        """``(available RAM - 10 GiB) / ranks_per_host``; None without the node's RAM."""
    @property
    def baseline_device_slots(self) -> int:
        """Device slots without HiSparse."""
    @property
    def prompt_on_device(self) -> bool:
        """Whether a whole prompt sits in device slots while it is prefilled (False in P/D decode)."""

@final
class Plan:
    """The capacity plan of a valid HiSparse configuration (``hisparse-check --plan``).

    ``valid`` is False when the pinned host pools do not fit in 95 % of the
    node's RAM (``errors``: "host_memory_exceeded", with a fix).
    ``to_json()`` is the ``--plan --json`` schema.
    """

    @property
    def valid(self) -> bool: ...
    @property
    def schema_version(self) -> int: ...
    @property
    def engine(self) -> Literal["vllm", "sglang"]:
        """The engine planned for."""
    @property
    def engine_version(self) -> str:
        """That engine's release (``VLLM_VERSION`` or ``SGLANG_VERSION``)."""
    @property
    def vllm_version(self) -> str | None:
        """The vLLM release of a vLLM plan; None for SGLang (as ``Report.vllm_version``)."""
    @property
    def sglang(self) -> SglangSizing | None:
        """SGLang plans only (None for vLLM): how SGLang sizes the pools."""
    @property
    def model(self) -> ModelSummary | None: ...
    @property
    def context_length(self) -> int:
        """The planned length: tokens per request the plan is for, ``plan(context_length=)``
        (the CLI's ``--context-length`` for vLLM, ``--plan-context-length`` for SGLang), else
        ``max_model_len``. Never the launch's own length setting."""
    @property
    def max_model_len(self) -> int:
        """The longest context the launch serves: vLLM's ``max_model_len``, SGLang's
        ``--context-length`` (or the model's)."""
    @property
    def sizes(self) -> PlanSizes: ...
    @property
    def host(self) -> HostPlan: ...
    @property
    def gpu(self) -> GpuPlan: ...
    @property
    def at_context(self) -> PlanPoint: ...
    @property
    def sweep(self) -> tuple[PlanPoint, ...]: ...
    @property
    def errors(self) -> tuple[Diagnostic, ...]: ...
    @property
    def warnings(self) -> tuple[Diagnostic, ...]: ...
    @property
    def assumed(self) -> dict[str, Any] | None:
        """For a configuration without HiSparse: the HiSparse settings this plan assumed."""
    @property
    def engine_log(self) -> dict[str, Any] | None:
        """For a plan made from an engine's start-up log: what was measured and compared."""
    @property
    def figures(self) -> dict[str, str | None]:
        """What each group of figures is: keys sizes, host_pool, weights (None when the
        plan did not use them), kv_room, gpu_blocks, host_limit, requests; values
        "exact" (the engine's arithmetic on known inputs), "measured" (from an
        engine log, ``kv_cache_memory_bytes`` or ``weights_gib``), "estimated" (our
        model of what the engine profiles) or "unknown" (no GPU memory given)."""
    @property
    def concurrency(self) -> dict[str, Any] | None:
        """Why the GPU concurrency at ``context_length`` is what it is: unit ("blocks" for
        vLLM, "slots" for SGLang), gpu_units (None when unknown), per_token_units (one
        request's units that grow with its context: vLLM's indexer blocks), fixed_units
        (those it holds whatever its length: hot-buffer and tail blocks of every hot group;
        SGLang's D + 64 + scratch slots), fixed_rule, fixed_share (0 to 1 at this
        context), why (vllm#51041: the pool "shrinks" at a shorter max_model_len)."""
    def to_json(self) -> str:
        """The plan as indented JSON text."""

def check_json(args: Mapping[str, Any] | str, options_json: str | None = None) -> Report:
    """Resolve serve args (a mapping in the ServeArgs form, or its JSON text) and return the report;
    with options (JSON: gpu, gpu_memory_gib, host_memory_gib, host_memory_source, weights_gib)
    the checks that need the machines run too.

    Input problems (too deep, circular, too large, not UTF-8, a number no
    field holds) are errors in the report. Raises ModelLoadError if the model
    config cannot be read, TypeError on ill-typed arguments, ValueError for an
    unknown GPU or an option out of range.
    """

def apply_fix_json(args: Mapping[str, Any] | str, fix: Sequence[Mapping[str, Any]] | str) -> str:
    """Apply fix operations to serve args (all or nothing); return the new args as JSON text.

    Raises ValueError if the fix does not apply.
    """

def run_cli(argv: list[str]) -> int:
    """Run hisparse-check with argv (no program name); return its exit status."""

def run_cli_plan(argv: list[str]) -> tuple[int, Plan | None]:
    """Like run_cli, also returning the plan that --plan made."""

def _register_exceptions(pool_error: type[BaseException], host_pool_exhausted: type[BaseException]) -> None:
    """Hand hisparse_rs.exceptions' PoolError and HostPoolExhausted to the extension
    (private: called once, when hisparse_rs.exceptions is imported, so no call imports them)."""

def _config_file_argv(path: str) -> list[str]:
    """The argv vLLM 0.33 makes of a --config serve file, as hisparse-check reads it (private: for tests).

    A mapping value is its JSON text. Raises ValueError with hisparse-check's message (naming the file).
    """

def _vllm_flag_table() -> str:
    """hisparse-check's table of vllm serve flags as JSON (private: for tests/vllm/test_flag_table.py).

    {"vllm": "0.33.0", "flags": [{"name", "option_strings", "negative_option_strings",
    "nargs", "takes_value", "choices", "int_choices", "type", "action"}, ...]}: the rows of
    tests/vllm/vllm_flags.json (the dump of vLLM's parser), with the name inside each row.
    """

def sglang_check_json(args: Mapping[str, Any] | str, options_json: str | None = None) -> Report:
    """Check an SGLang 0.5.23 launch given as ServerArgs attributes (a mapping or its JSON text);
    with options (JSON: gpu, gpu_memory_gib, host_memory_gib, weights_gib) the machine checks run.

    Raises ValueError for an option out of range or an unknown GPU, TypeError on ill-typed input.
    """

def sglang_plan_json(
    args: Mapping[str, Any] | str, options_json: str, engine_log: str | None = None
) -> tuple[Report, Plan | None]:
    """Plan an SGLang 0.5.23 launch (as sglang_check_json takes it); the plan is None unless valid.

    With ``engine_log`` (a path, ``-`` for standard input), planned from SGLang's start-up log.
    """

def check_vllm_argv(argv: Sequence[str], options_json: str | None = None) -> Report:
    """Check a ``vllm serve`` argv exactly as the plain ``hisparse-check ARGV`` reads it (this
    process's environment: VLLM_USE_V2_MODEL_RUNNER, VLLM_ALLOW_LONG_MAX_MODEL_LEN, the HF cache).
    Raises ValueError for a usage error or an option out of range, ModelLoadError."""

def check_sglang_argv(argv: Sequence[str], options_json: str | None = None) -> Report:
    """Check an ``sglang serve`` argv exactly as ``hisparse-check --engine sglang`` reads it."""

def _sglang_argv_json(argv: Sequence[str]) -> str:
    """SGLang 0.5.23's argparse reading of argv as JSON (values, problems), for the differential test."""

def sglang_apply_fix_json(args: Mapping[str, Any] | str, fix: Sequence[Mapping[str, Any]] | str) -> str:
    """Apply one diagnostic's fix to SGLang ``ServerArgs`` attributes (as sglang_check_json takes
    them); the fixed attributes as JSON text, ``hisparse_config`` in the form given. All or nothing;
    ValueError if the fix does not apply, TypeError for an attribute of the wrong type."""

def sglang_fixed_argv(argv: Sequence[str], fix: Sequence[Mapping[str, Any]] | str) -> list[str]:
    """Apply one diagnostic's fix to an ``sglang serve`` argv (as check_sglang_argv takes it): the
    words of the fixed launch. ValueError if the words cannot be read or the fix does not apply."""

def _sglang_server_arg_names() -> list[str]:
    """Every ServerArgs attribute ``sglang serve`` 0.5.23 has a flag for (sorted)."""

def plan_json(
    args: Mapping[str, Any] | str, options_json: str, engine_log: str | None = None
) -> tuple[Report, Plan | None]:
    """Plan capacity for serve args (as check_json takes them) with planner options (JSON).

    With ``engine_log`` (a path, ``-`` for standard input), planned from vLLM's
    start-up log. Returns the check report and the plan (None unless valid
    with HiSparse on). Raises ModelLoadError, ValueError (an option out of
    range, a log that cannot be read or has no vLLM start-up line), TypeError.
    """

def gpu_spec(name: str) -> dict[str, Any]:
    """The GPU ``gpu=`` / ``--gpu NAME`` means: a table name (``"h200"``) or the name the
    driver reports (``"NVIDIA H200"``, what vLLM's ``current_platform.get_device_name()``
    returns). Keys: name, description, platform, arch (``"sm_90"``), memory_gib,
    memory_source, sm_count (the SMs the product enables), max_shared_memory_per_block
    (bytes, opt-in), shared_memory_source; gpus_per_node and server (its usual server: 8 on
    HGX / DGX boards, 4 on a GB200 / GB300 NVL72 tray; absent for PCIe and NVL cards), what
    ``gpus_per_node=`` / ``--gpus-per-node`` defaults to.

    Raises ValueError for a GPU not in the table (the message lists the known ones).
    """

def error_codes() -> list[str]:
    """Every stable diagnostic code."""

def sglang_codes() -> list[str]:
    """The codes only SGLang 0.5.23's rules report (a subset of :func:`error_codes`)."""

def vllm_deviations() -> list[tuple[str, str]]:
    """Where the verdict knowingly differs from vLLM 0.33.0's: ``(code, what vLLM does instead)``.

    The README's "Where we differ from vLLM 0.33.0" list, in one place; the
    differential test against vLLM accepts a disagreement only when the report
    carries one of these codes.
    """

def sglang_deviations() -> list[tuple[str, str]]:
    """Where the verdict knowingly differs from SGLang 0.5.23's: ``(code, what SGLang does instead)``.

    docs/sglang.md's deviation table, in one place
    (``rust/hisparse-core/src/engines/sglang_0_5_23/deviations.rs``); the
    differential test against SGLang accepts a disagreement only when the
    report carries one of these codes.
    """

def vllm_stages() -> list[tuple[str, str, str]]:
    """When vLLM 0.33.0 refuses each code: ``(code, stage, where vLLM raises it)``.

    One row per code (``rust/hisparse-core/src/engines/vllm_0_33/stages.rs``); a
    ``Diagnostic.stage`` is its code's stage unless its rule sets another.
    """

def pool_error_codes() -> list[str]:
    """Every stable PoolError code of the pool, layout and resolver."""

@final
class HiSparseMetrics:
    """vLLM's HiSparse metrics (HISPARSE.md §9), shared by a pool and its resolvers.

    Counters: hits (valid top-k entries found resident), misses (rows copied),
    host_to_device_bytes (misses x row_bytes); gauge host_cache_usage_perc
    (pool blocks used / total, 1.0 = 100 %). Lock-free, thread-safe.
    """

    def __new__(cls) -> HiSparseMetrics: ...
    def to_dict(self) -> dict[str, int | float]:
        """``hisparse_cache_hits``, ``hisparse_cache_misses``,
        ``hisparse_host_to_device_bytes``, ``hisparse_host_cache_usage_perc``,
        ``host_blocks_used``, ``host_blocks_total``."""
    def record(self, *, hits: int = 0, misses: int = 0, host_to_device_bytes: int = 0) -> None:
        """Add to the counters (rows a caller copied itself, e.g. an index group's other layers).

        Counters stop at 2**64 - 1. Raises ValueError (naming the argument, adding
        nothing) for a negative count or one beyond 2**64 - 1.
        """
    def prometheus_text(self, labels: Mapping[str, str] | None = None) -> str:
        """Prometheus text format as vLLM's /metrics shows it (``vllm:hisparse_cache_hits_total`` ...).

        Raises ValueError for an invalid label name.
        """
    @property
    def hits(self) -> int: ...
    @property
    def misses(self) -> int: ...
    @property
    def host_to_device_bytes(self) -> int: ...
    @property
    def host_cache_usage_perc(self) -> float: ...

@final
class PoolLayout:
    """Layer-major byte layout of a pool tensor for a pipeline stage.

    Global layer ``g`` (``first_layer <= g < end_layer``) owns bytes
    ``[(g - first_layer) x layer_stride, + layer_bytes)``; regions are disjoint
    and inside ``total_bytes``. Other layer ids raise PoolError
    ``layer_out_of_range`` (HISPARSE.md §10). Raises PoolError ``invalid_size``
    for zero sizes, ``layer_stride < rows_per_layer x row_bytes`` or overflow.
    """

    def __new__(
        cls,
        rows_per_layer: int,
        row_bytes: int,
        num_layers: int,
        first_layer: int = 0,
        layer_stride: int | None = None,
    ) -> PoolLayout: ...
    @property
    def first_layer(self) -> int: ...
    @property
    def end_layer(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def rows_per_layer(self) -> int: ...
    @property
    def row_bytes(self) -> int: ...
    @property
    def layer_stride(self) -> int: ...
    @property
    def layer_bytes(self) -> int: ...
    @property
    def total_bytes(self) -> int: ...
    def local_layer(self, layer: int) -> int:
        """Global layer id -> index within the stage."""
    def layer_region(self, layer: int) -> tuple[int, int]:
        """``(start, end)`` byte offsets of a global layer's rows."""
    def row_offset(self, layer: int, row: int) -> int:
        """Byte offset of host row ``row`` of a global layer (PoolError ``invalid_size`` past the end)."""

@final
class PoolStats:
    """Host pool occupancy; ``usage`` = blocks_used / blocks_total (1.0 = 100 %)."""

    @property
    def blocks_used(self) -> int: ...
    @property
    def blocks_total(self) -> int: ...
    @property
    def num_requests(self) -> int: ...
    @property
    def usage(self) -> float: ...

@final
class HostKVPool:
    """Per-request host block tables over a fixed number of host blocks (metadata only).

    One host block holds ``block_size`` tokens of every layer: host_block_bytes
    = block_size x row_bytes x num_layers (HISPARSE.md §5). Allocation is all
    or nothing (HostPoolExhausted, nothing changes); free blocks are handed out
    lowest id first; host row of position p = block_table[p // block_size] x
    block_size + p % block_size (64-bit). Thread-safe: calls are serialized.
    """

    def __new__(
        cls,
        num_blocks: int,
        block_size: int,
        row_bytes: int,
        num_layers: int,
        *,
        metrics: HiSparseMetrics | None = None,
    ) -> HostKVPool: ...
    @staticmethod
    def from_host_pool_gib(
        host_pool_gib: float,
        block_size: int,
        row_bytes: int,
        num_layers: int,
        *,
        metrics: HiSparseMetrics | None = None,
    ) -> HostKVPool:
        """floor(host_pool_gib x 2**30 / host_block_bytes) blocks, as vLLM 0.33 sizes the pool."""
    @staticmethod
    def from_config(
        resolved: ResolvedConfig | Report | HiSparseSettings, *, metrics: HiSparseMetrics | None = None
    ) -> HostKVPool:
        """The pool of a resolved configuration (host_blocks, block_size, row_bytes, sparse_mla_layers).

        Raises PoolError ``settings_incomplete`` when HiSparse is off or row_bytes is unknown.
        """
    @property
    def block_size(self) -> int: ...
    @property
    def row_bytes(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def num_blocks(self) -> int: ...
    @property
    def num_host_rows(self) -> int: ...
    @property
    def host_block_bytes(self) -> int: ...
    @property
    def free_blocks(self) -> int: ...
    @property
    def metrics(self) -> HiSparseMetrics: ...
    def layout(self, first_layer: int = 0) -> PoolLayout:
        """The pool tensor's layout for a stage whose first global layer is ``first_layer``."""
    def blocks_for(self, num_tokens: int) -> int:
        """ceil(num_tokens / block_size)."""
    def can_admit(self, num_tokens: int) -> bool: ...
    def admit(self, request_id: str, num_tokens: int) -> NDArray[np.int32]:
        """Admit a request; its block table. Raises HostPoolExhausted, PoolError ``duplicate_request``."""
    def append(self, request_id: str, num_new_tokens: int) -> NDArray[np.int32]:
        """Grow a request; the newly allocated blocks (often empty).

        Raises HostPoolExhausted, PoolError ``unknown_request``.
        """
    def free(self, request_id: str) -> int:
        """Free a request's blocks; how many. Raises PoolError ``unknown_request``."""
    def block_table(self, request_id: str) -> NDArray[np.int32]: ...
    def num_tokens(self, request_id: str) -> int: ...
    def host_rows(self, request_id: str, positions: ArrayLike) -> NDArray[np.int64]:
        """Host rows (int64) of token positions; -1 stays -1.

        Raises PoolError ``position_out_of_range`` for other positions outside [0, num_tokens),
        ``batch_too_large`` for more than 2**26 positions.
        """
    def stats(self) -> PoolStats: ...
    def request_ids(self) -> list[str]:
        """Admitted request ids, sorted."""
    def __contains__(self, request_id: str, /) -> bool: ...

@final
class ResolveResult:
    """One resolve call's result (numpy arrays).

    ``slots`` int32 [rows, width] (-1 invalid/padding); miss plan ordered by
    batch row then column: ``miss_host_rows`` int64 [n], ``miss_slots`` int32
    [n], ``miss_counts`` int32 [rows], ``miss_offsets`` int32 [rows + 1];
    ``hits`` + ``misses`` = valid entries, ``misses`` = n.
    """

    @property
    def slots(self) -> NDArray[np.int32]: ...
    @property
    def miss_host_rows(self) -> NDArray[np.int64]: ...
    @property
    def miss_slots(self) -> NDArray[np.int32]: ...
    @property
    def miss_counts(self) -> NDArray[np.int32]: ...
    @property
    def miss_offsets(self) -> NDArray[np.int32]: ...
    @property
    def hits(self) -> int: ...
    @property
    def misses(self) -> int: ...

@final
class ResidencyResolver:
    """Hot-buffer residency for (request, index group) states (HISPARSE.md §6).

    Thread-safe: calls are serialized; ``resolve`` releases the GIL and runs
    independent states in parallel.
    """

    def __new__(
        cls,
        device_buffer_size: int,
        topk: int,
        num_host_rows: int,
        row_bytes: int,
        *,
        metrics: HiSparseMetrics | None = None,
    ) -> ResidencyResolver: ...
    @staticmethod
    def from_config(
        resolved: ResolvedConfig | Report | HiSparseSettings, *, metrics: HiSparseMetrics | None = None
    ) -> ResidencyResolver:
        """From a resolved configuration.

        device_buffer_size, topk = topk_buffer_width, num_host_rows = host_blocks x block_size, row_bytes.
        """
    @property
    def device_buffer_size(self) -> int: ...
    @property
    def topk(self) -> int: ...
    @property
    def num_host_rows(self) -> int: ...
    @property
    def row_bytes(self) -> int: ...
    @property
    def num_states(self) -> int: ...
    @property
    def state_bytes(self) -> int:
        """Bytes one state keeps: device_buffer_size x 6 (int32 row + int16 LRU entry per
        slot) + 2 x the row -> slot index length (the power of two >= 4 x
        device_buffer_size): 14 bytes per slot when device_buffer_size is a power of two."""
    @property
    def metrics(self) -> HiSparseMetrics: ...
    def new_state(self) -> int:
        """A new empty state; freed ids are reused lowest first."""
    def reset_state(self, state: int) -> None: ...
    def free_state(self, state: int) -> None: ...
    def slot_rows(self, state: int) -> NDArray[np.int32]:
        """Host row in each slot, -1 empty."""
    def lru_order(self, state: int) -> NDArray[np.int16]:
        """Slots, oldest first."""
    def export_state(self, state: int) -> tuple[NDArray[np.int32], NDArray[np.int16]]:
        """``(slot_rows int32 [dbs], lru_order int16 [dbs])``, read as one consistent pair.

        Raises PoolError ``unknown_state``.
        """
    def import_state(self, state: int, slot_rows: ArrayLike, lru_order: ArrayLike) -> None:
        """Replace a state's contents (e.g. exported from the Triton resolver); the index is rebuilt.

        ``slot_rows`` int16/int32/int64 [device_buffer_size] (-1 empty, each host row
        at most once, rows in [0, num_host_rows)); ``lru_order`` a permutation of
        ``0..device_buffer_size``, oldest first. Each is read once. Raises PoolError
        ``unknown_state``, ``shape_mismatch`` or ``invalid_resolver_state`` (nothing
        changes); TypeError for a non-integer dtype.
        """
    def resolve(self, topk_rows: ArrayLike, state_index: ArrayLike) -> ResolveResult:
        """Resolve ``topk_rows`` int32/int64 [rows, width] for ``state_index`` [rows] (-1 = padded row).

        Raises PoolError ``topk_too_wide``, ``shape_mismatch``, ``unknown_state``,
        ``union_exceeds_device_buffer``, ``batch_too_large`` (an array of more than
        :data:`MAX_RESOLVE_ENTRIES` = 2**26 entries; nothing changes); TypeError for a
        non-integer dtype.
        """

def check_deployment_json(
    paths: Sequence[str],
    model_dirs: Sequence[tuple[str, str]] = ...,
    launches: Sequence[tuple[str, str | None, str | None]] = ...,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    host_memory_gib: float | None = None,
) -> str:
    """``hisparse-check deploy PATHS --model-dir C=L ... --launch CMD --role R --node N ...
    --gpu G --gpus-per-node N --host-memory-gib GIB --json``: the deployment report's JSON.

    ``launches``: (command, role, node) of each ``--launch``. Raises ValueError
    where the CLI exits 2 (a manifest that cannot be read, passes a bound,
    holds no engine launch, or a bad field of a deployment file or launch)."""

def deployment_codes() -> list[str]:
    """The codes of the rules between launches (docs/deploy.md)."""
