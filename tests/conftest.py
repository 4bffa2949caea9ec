"""Shared pytest setup: hypothesis profiles and paths to the shared test data.

Profiles: ``ci`` (deterministic: derandomized, no deadline, fixed example
count; selected when CI=true or HYPOTHESIS_PROFILE=ci) and ``dev`` (random).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

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
