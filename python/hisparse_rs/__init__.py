"""hisparse_rs: the HiSparse host-memory KV tier for sparse-attention (DSA) models.

``import hisparse_rs`` needs neither torch nor triton. Config resolution:
:func:`check` (report, never raises on a bad config) and :func:`resolve`
(raises :class:`ConfigError` with every error). The same rules run in the
``hisparse-check`` command.
"""

from hisparse_rs._core import (
    VLLM_VERSION,
    Diagnostic,
    HiSparseSettings,
    ModelSummary,
    Provenance,
    Report,
    __version__,
    error_codes,
)
from hisparse_rs.config import ResolvedConfig, apply_fix, check, check_args, resolve, serve_args
from hisparse_rs.exceptions import ConfigError, ModelLoadError

__all__ = [
    "VLLM_VERSION",
    "ConfigError",
    "Diagnostic",
    "HiSparseSettings",
    "ModelLoadError",
    "ModelSummary",
    "Provenance",
    "Report",
    "ResolvedConfig",
    "__version__",
    "apply_fix",
    "check",
    "check_args",
    "error_codes",
    "resolve",
    "serve_args",
]
