"""Type stubs for the Rust extension ``hisparse_rs._core`` (checked by mypy.stubtest)."""

from typing import Any, Final, Literal, final

__all__ = [
    "VLLM_VERSION",
    "Diagnostic",
    "GpuPlan",
    "HiSparseSettings",
    "HostPlan",
    "ModelLoadError",
    "ModelSummary",
    "Plan",
    "PlanPoint",
    "PlanSizes",
    "Provenance",
    "Report",
    "__version__",
    "apply_fix_json",
    "check_json",
    "error_codes",
    "plan_json",
    "run_cli",
    "run_cli_plan",
]

__version__: Final[str]
VLLM_VERSION: Final[str]

class ModelLoadError(OSError):
    """The model's config.json could not be found or read."""

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
    def given(self) -> Any: ...
    @property
    def allowed(self) -> str | None: ...
    @property
    def hint(self) -> str | None: ...
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
    def provenance(self) -> dict[str, Provenance]: ...

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
    def hisparse(self) -> HiSparseSettings | None: ...
    @property
    def errors(self) -> tuple[Diagnostic, ...]: ...
    @property
    def warnings(self) -> tuple[Diagnostic, ...]: ...
    @property
    def schema_version(self) -> int: ...
    @property
    def vllm_version(self) -> str: ...
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

_Limit = Literal["gpu", "host", "max_num_seqs", "baseline"]

@final
class PlanPoint:
    """Capacity at ``context_length`` tokens per request, per DP replica.

    Request counts are None when the GPU KV room is unknown; limits name what
    binds ("gpu", "host", "max_num_seqs" or "baseline").
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
    def vllm_version(self) -> str: ...
    @property
    def model(self) -> ModelSummary | None: ...
    @property
    def context_length(self) -> int: ...
    @property
    def max_model_len(self) -> int: ...
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
    def to_json(self) -> str:
        """The plan as indented JSON text."""

def check_json(args_json: str) -> Report:
    """Resolve serve args (JSON, ServeArgs form) and return the report.

    Raises ModelLoadError if the model config cannot be read, TypeError on
    ill-typed arguments.
    """

def apply_fix_json(args_json: str, fix_json: str) -> str:
    """Apply a JSON list of fix operations to serve args; return the new args as JSON."""

def run_cli(argv: list[str]) -> int:
    """Run hisparse-check with argv (no program name); return its exit status."""

def run_cli_plan(argv: list[str]) -> tuple[int, Plan | None]:
    """Like run_cli, also returning the plan that --plan made."""

def plan_json(args_json: str, options_json: str) -> tuple[Report, Plan | None]:
    """Plan capacity for serve args (JSON, ServeArgs form) with planner options (JSON).

    Returns the check report and the plan (None unless valid with HiSparse on).
    Raises ModelLoadError, ValueError (an option out of range), TypeError.
    """

def error_codes() -> list[str]:
    """Every stable diagnostic code."""
