"""Issue 25: ``hisparse_rs.check_deployment`` is ``hisparse-check deploy``: the four
examples in examples/deploy, their codes between launches, and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hisparse_rs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "deploy"
MODELS = {"/models": str(ROOT / "tests" / "data" / "models")}


@pytest.mark.parametrize(
    ("example", "codes"),
    [
        ("vllm-1p1d.yaml", []),
        ("sglang-1p1d.yaml", []),
        (
            "vllm-1p1d-mismatched.yaml",
            [
                "pd_kv_role_unpaired",
                "pd_kv_cache_dtype_mismatch",
                "pd_hybrid_kv_cache_manager_mismatch",
            ],
        ),
        (
            "sglang-1p1d-mismatched.yaml",
            [
                "pd_kv_role_unpaired",
                "pd_transfer_backend_mismatch",
                "pd_kv_cache_dtype_mismatch",
            ],
        ),
    ],
)
def test_examples(example: str, codes: list[str]) -> None:
    report = hisparse_rs.check_deployment(EXAMPLES / example, model_dirs=MODELS)
    assert report.codes == codes
    assert report.valid == (not codes)
    # The mismatched prefill was copied from the decode: it reads as a decode.
    assert [launch["role"] for launch in report.launches] == ["decode" if codes else "prefill", "decode"]
    assert all(launch["report"]["valid"] for launch in report.launches)
    for error in report.errors:
        assert error["code"] in hisparse_rs.deployment_codes()
        assert error["stage"] in ("handshake", "first_request")
        assert error["launch"].endswith("dsv32-prefill/" + ("vllm" if "vllm" in example else "sglang"))
        assert error["fix_flags"] and error["source"] and error["engine_message"]
    # The same JSON as the command's.
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "hisparse_rs._cli",
            "deploy",
            str(EXAMPLES / example),
            "--model-dir",
            f"/models={MODELS['/models']}",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == (1 if codes else 0), cli.stderr
    assert json.loads(cli.stdout) == report.data


def test_bad_input_raises_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        hisparse_rs.check_deployment(tmp_path / "missing.yaml")
    svc = tmp_path / "svc.yaml"
    svc.write_text("kind: Service\nmetadata: {name: s}\n")
    with pytest.raises(ValueError, match="no vllm serve / sglang serve launch"):
        hisparse_rs.check_deployment([svc])
    many = tmp_path / "many.yaml"
    many.write_text("---\nkind: Service\n" * 2000)
    with pytest.raises(ValueError, match="bound on documents"):
        hisparse_rs.check_deployment(many)


def test_deployment_codes_are_the_tail_of_error_codes() -> None:
    codes = hisparse_rs.deployment_codes()
    assert hisparse_rs.error_codes()[-len(codes) :] == codes
