"""Shared pytest setup: hypothesis profiles and paths to the shared test data.

Profiles: ``ci`` (deterministic: derandomized, no deadline, fixed example
count; selected when CI=true or HYPOTHESIS_PROFILE=ci) and ``dev`` (random).

Kernels: without CUDA the Triton kernels run under Triton's interpreter on CPU
tensors; ``TRITON_INTERPRET`` must be set before ``hisparse_rs.kernels`` (and
so ``@triton.jit``) is first imported, which is why it is set here. With CUDA
the same tests run the compiled kernels on the GPU (``scripts/gpu_check.sh``).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from hypothesis import HealthCheck, settings

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
MODELS = DATA / "models"
VECTORS = ROOT / "tests" / "vectors"

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=300,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
