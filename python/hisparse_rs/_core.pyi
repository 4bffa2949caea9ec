"""Type stubs for the Rust extension ``hisparse_rs._core`` (checked by mypy.stubtest)."""

__all__ = [
    "VLLM_VERSION",
    "ModelLoadError",
    "__version__",
    "apply_fix_json",
    "check_json",
    "error_codes",
    "run_cli",
]

__version__: str
VLLM_VERSION: str

class ModelLoadError(OSError):
    """The model's config.json could not be found or read."""

def check_json(args_json: str) -> str:
    """Resolve serve args (JSON, ServeArgs form) and return the report as JSON.

    Raises ModelLoadError if the model config cannot be read, TypeError on
    ill-typed arguments.
    """

def apply_fix_json(args_json: str, fix_json: str) -> str:
    """Apply a JSON list of fix operations to serve args; return the new args as JSON."""

def run_cli(argv: list[str]) -> int:
    """Run hisparse-check with argv (no program name); return its exit status."""

def error_codes() -> list[str]:
    """Every stable diagnostic code."""
