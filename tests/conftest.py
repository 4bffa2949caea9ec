"""Shared pytest setup: hypothesis profiles and paths to the shared test data.

Profiles: ``ci`` (deterministic: derandomized, no deadline, fixed example
count; selected when CI=true or HYPOTHESIS_PROFILE=ci), ``dev`` (random) and
``device`` (``ci`` with 12 examples: scripts/gpu_check.sh).

Kernels: without CUDA the Triton kernels run under Triton's interpreter on CPU
tensors; ``TRITON_INTERPRET`` must be set before ``hisparse_rs.kernels`` (and
so ``@triton.jit``) is first imported, which is why it is set here. With CUDA
the same tests run the compiled kernels on the GPU (``scripts/gpu_check.sh``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
MODELS = DATA / "models"
VECTORS = ROOT / "tests" / "vectors"
# The timeout of a subprocess a test runs: a hang detector, not a speed target
# (no test asserts a duration). A run takes a second or less; this is far
# above what a loaded 2-core machine makes of that.
HANG_S = 600

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=300,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=100)
# scripts/gpu_check.sh: the kernel tests in a few minutes of a lent GPU (each new shape
# compiles) and in its CPU rehearsal; CI runs ``ci`` under the interpreter.
settings.register_profile(
    "device",
    derandomize=True,
    deadline=None,
    max_examples=12,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def hf_hub(tmp_path: Path) -> Callable[..., str]:
    """A Hugging Face cache under ``tmp_path / "hub"`` (pass it as ``HF_HUB_CACHE``, or
    ``tmp_path`` as ``HF_HOME``): ``hf_hub(repo, revision="main", commit="a" * 40)`` puts the
    DeepSeek-V3.2 config.json at that commit, names it by ``refs/<revision>`` as
    huggingface_hub does (no newline), and returns the commit."""

    def make(repo: str, revision: str = "main", commit: str = "a" * 40) -> str:
        folder = tmp_path / "hub" / f"models--{repo.replace('/', '--')}"
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / revision).write_text(commit)
        snapshot = folder / "snapshots" / commit
        snapshot.mkdir(parents=True, exist_ok=True)
        (snapshot / "config.json").write_bytes((MODELS / "deepseek-v3.2" / "config.json").read_bytes())
        return commit

    return make
