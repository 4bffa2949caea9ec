"""Break-it regression: a non-finite gpu_memory_utilization is a report error.

check(gpu_memory_utilization=float("nan")) raised TypeError('invalid serve
arguments: invalid type: string "nan", expected f64'): the binding passes a
NaN as the string "nan" (JSON has no NaN) and ServeArgs did not read it back,
though check() never raises on a bad config and 1.5 is an invalid_value error.
The CLI's --gpu-memory-utilization nan printed the given value as null.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

import hisparse_rs

MODEL = Path(__file__).parent / "data" / "models" / "deepseek-v3.2"
KV = {
    "kv_connector": "HiSparseConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 64},
}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_gpu_memory_utilization_is_reported_not_raised(value: float) -> None:
    report = hisparse_rs.check(MODEL, kv_transfer_config=KV, gpu_memory_utilization=value)
    errors = [(d.code, d.path, d.given) for d in report.errors]
    assert errors == [("invalid_value", "gpu_memory_utilization", repr(value))]


def test_a_finite_gpu_memory_utilization_still_reads() -> None:
    assert hisparse_rs.check(MODEL, kv_transfer_config=KV, gpu_memory_utilization=0.5).valid


def test_the_cli_shows_nan_as_given() -> None:
    script = "import sys; from hisparse_rs._cli import main; sys.argv[0] = 'hisparse-check'; main()"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(MODEL),
            "--kv-transfer-config",
            str(KV).replace("'", '"'),
            "--gpu-memory-utilization",
            "nan",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    assert 'given:   "nan"' in out.stdout, out.stdout
