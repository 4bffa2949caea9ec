"""Issue 17: every diagnostic says when vLLM 0.33.0 would have refused it (``Diagnostic.stage``),
and the launch layouts vLLM refuses only when its engine starts are reported, each with a
fix that passes. The stages themselves are held to vLLM's own code by
tests/vllm/test_differential.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hisparse_rs
from hisparse_rs import vllm_plugin

ROOT = Path(__file__).resolve().parents[1]
DSV32 = str(ROOT / "tests" / "data" / "models" / "deepseek-v3.2")
HS = {
    "kv_connector": "HiSparseConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 128},
}
STAGES = ("argparse", "config", "engine_start", "model_load", "workers", "first_step", "never")


def test_every_code_has_one_stage_and_a_source() -> None:
    rows = hisparse_rs.vllm_stages()
    # The deployment codes are a pair's (docs/deploy.md), in neither engine's one-launch table.
    vllm_codes = (
        set(hisparse_rs.error_codes()) - set(hisparse_rs.sglang_codes()) - set(hisparse_rs.deployment_codes())
    )
    assert sorted(code for code, _, _ in rows) == sorted(vllm_codes)
    for code, stage, source in rows:
        assert stage in STAGES, code
        assert source, code
    assert vllm_plugin.STAGES == STAGES


def one_error(report: hisparse_rs.Report, code: str) -> hisparse_rs.Diagnostic:
    found = [d for d in report.errors if d.code == code]
    assert len(found) == 1, [(d.code, d.path) for d in report.errors]
    return found[0]


@pytest.mark.parametrize(
    ("kwargs", "code", "stage"),
    [
        # argparse: pydantic refuses the top-level connector without kv_role.
        ({"kv_transfer_config": {"kv_connector": "HiSparseConnector"}}, "missing_kv_role", "argparse"),
        # config: VllmConfig.__post_init__ (vllm/config/vllm.py:1887).
        ({"kv_transfer_config": HS, "pipeline_parallel_size": 2}, "pipeline_parallel_unsupported", "config"),
        # engine_start: nnodes_within_dp (parallel.py:827), an unset -dpl inferred as 1.
        (
            {"tensor_parallel_size": 8, "data_parallel_size": 3, "nnodes": 2},
            "data_parallel_layout_invalid",
            "engine_start",
        ),
        # model_load: no sparse-MLA backend takes fp8_e5m2 (attention backend selection).
        (
            {"kv_transfer_config": HS, "kv_cache_dtype": "fp8_e5m2"},
            "kv_cache_dtype_unsupported",
            "model_load",
        ),
        # workers: float(host_pool_gib) on a string, as the KV cache is laid out
        # (kv_transfer.py:45 via layout.py:86): kv_connector_extra_config is a free dict.
        (
            {"kv_transfer_config": {**HS, "kv_connector_extra_config": {"host_pool_gib": "64GiB"}}},
            "invalid_type",
            "workers",
        ),
        # workers: the host pool, after the model has loaded (layout.py:251).
        (
            {"kv_transfer_config": {**HS, "kv_connector_extra_config": {"host_pool_gib": 0.5}}},
            "host_pool_too_small",
            "workers",
        ),
    ],
)
def test_diagnostics_carry_the_stage_vllm_refuses_them_at(
    kwargs: dict[str, Any], code: str, stage: str
) -> None:
    d = one_error(hisparse_rs.check(DSV32, **kwargs), code)
    assert d.stage == stage
    assert d.stage_sentence.startswith("vLLM 0.33.0 refuses this ")


def test_warnings_vllm_accepts_are_stage_never() -> None:
    producer = {**HS, "kv_role": "kv_producer"}
    report = hisparse_rs.check(DSV32, kv_transfer_config=producer)
    (w,) = [w for w in report.warnings if w.code == "kv_producer_role"]
    assert w.stage == "never"
    assert w.stage_sentence == "vLLM 0.33.0 accepts this"


@pytest.mark.parametrize(
    ("kwargs", "code", "path", "fixed"),
    [
        (
            {"tensor_parallel_size": 8, "data_parallel_size": 3, "nnodes": 2},
            "data_parallel_layout_invalid",
            "data_parallel_size_local",
            3,
        ),
        (
            {"tensor_parallel_size": 1, "data_parallel_size": 2, "data_parallel_size_local": 2, "nnodes": 2},
            "data_parallel_layout_invalid",
            "data_parallel_size_local",
            1,
        ),
        (
            {"tensor_parallel_size": 16, "nnodes": 2, "distributed_executor_backend": "ray"},
            "multi_node_backend_unsupported",
            "distributed_executor_backend",
            "mp",
        ),
        (
            {"headless": True, "data_parallel_size": 2, "data_parallel_size_local": 0},
            "headless_without_local_replicas",
            "data_parallel_size_local",
            2,
        ),
        ({"tensor_parallel_size": 16, "nnodes": 2, "node_rank": 2}, "node_rank_out_of_range", "node_rank", 1),
        (
            {"tensor_parallel_size": 8, "data_parallel_size": 2, "nnodes": 2, "data_parallel_backend": "ray"},
            "multi_node_backend_unsupported",
            "data_parallel_backend",
            "mp",
        ),
        (
            {"data_parallel_size": 4, "data_parallel_rank": 1, "data_parallel_size_local": 2},
            "external_lb_local_size_invalid",
            "data_parallel_size_local",
            1,
        ),
    ],
)
def test_launch_layouts_are_fixed_reusing_the_users_values(
    kwargs: dict[str, Any], code: str, path: str, fixed: Any
) -> None:
    args = hisparse_rs.serve_args(DSV32, kv_transfer_config=HS, **kwargs)
    report = hisparse_rs.check_args(args)
    d = one_error(report, code)
    assert d.path == path and d.fix
    alone = hisparse_rs.apply_fix(args, d.fix)
    assert alone[path] == fixed
    assert hisparse_rs.check_args(alone).valid
    together = hisparse_rs.apply_fix(args, [op for e in report.errors for op in e.fix])
    assert hisparse_rs.check_args(together).valid


def test_modelopt_without_quant_algo_is_refused_while_the_config_is_built() -> None:
    report = hisparse_rs.check(DSV32, hf_overrides={"quantization_config": {"quant_method": "modelopt_fp4"}})
    d = one_error(report, "quant_algo_missing")
    assert d.stage == "config" and "NVFP4" in (d.hint or "")
    ok = hisparse_rs.check(
        DSV32, hf_overrides={"quantization_config": {"quant_method": "modelopt_fp4", "quant_algo": "NVFP4"}}
    )
    assert not [e for e in ok.errors if e.code == "quant_algo_missing"]


def test_plugin_message_says_when_vllm_would_have_refused() -> None:
    report = hisparse_rs.check(DSV32, kv_transfer_config=HS, block_size=32)
    text = vllm_plugin.render(report)
    assert "    stage:   model_load: vLLM 0.33.0 refuses this while its workers load the model" in text
    assert "Without this check: vLLM 0.33.0 refuses this while its workers load the model" in text


def test_cli_json_and_text_carry_the_stage() -> None:
    cmd = [
        sys.executable,
        "-m",
        "hisparse_rs._cli",
        DSV32,
        "--kv-transfer-config",
        json.dumps(HS),
        "--block-size",
        "32",
    ]
    out = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=False).stdout)
    assert out["schema_version"] == 2
    assert [(e["code"], e["stage"]) for e in out["errors"]] == [("block_size_unsupported", "model_load")]
    text = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    assert (
        "Without this check: vLLM 0.33.0 would refuse this configuration while its workers load the model"
        in text
    )


def test_plugin_logs_a_warnings_stage_only_where_vllm_refuses_it(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    logger = logging.getLogger("hisparse_rs.test_stages")
    producer = hisparse_rs.check(DSV32, kv_transfer_config={**HS, "kv_role": "kv_producer"})
    shell = hisparse_rs.check(
        DSV32, kv_transfer_config={**HS, "kv_connector_extra_config": {"host_pool_gib": "$HOST_POOL_GIB"}}
    )
    with caplog.at_level(logging.WARNING, logger=logger.name):
        for w in (*producer.warnings, *shell.warnings):
            vllm_plugin._log_warning(logger, w)
    lines = [r.getMessage() for r in caplog.records]
    assert any("kv_producer_role" in m and "vLLM 0.33.0" not in m for m in lines), lines
    assert any("unexpanded_shell_variable" in m and "after the model has loaded" in m for m in lines), lines
