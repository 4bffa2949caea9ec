"""Type stubs for the Rust extension ``hisparse_rs._core`` (checked by mypy.stubtest)."""

from typing import Any, Final, Literal, final

__all__ = [
    "VLLM_VERSION",
    "Diagnostic",
    "HiSparseSettings",
    "ModelLoadError",
    "ModelSummary",
    "Provenance",
    "Report",
    "__version__",
    "apply_fix_json",
    "check_json",
    "error_codes",
    "run_cli",
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

def check_json(args_json: str) -> Report:
    """Resolve serve args (JSON, ServeArgs form) and return the report.

    Raises ModelLoadError if the model config cannot be read, TypeError on
    ill-typed arguments.
    """

def apply_fix_json(args_json: str, fix_json: str) -> str:
    """Apply a JSON list of fix operations to serve args; return the new args as JSON."""

def run_cli(argv: list[str]) -> int:
    """Run hisparse-check with argv (no program name); return its exit status."""

def error_codes() -> list[str]:
    """Every stable diagnostic code."""
