"""Issue 22 (item 9 and the Python API paragraph): the machine option
``gpus_per_node`` on both fronts, ``check_argv`` for vLLM as
``check_sglang_argv`` is for SGLang, a type error that names its argument and a
vLLM keyword typo with a did-you-mean."""

from __future__ import annotations

import json

import pytest

import hisparse_rs
from conftest import MODELS

DSV32 = MODELS / "deepseek-v3.2"
KV = {
    "kv_connector": "HiSparseConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 64},
}


def codes(report: hisparse_rs.Report) -> list[str]:
    return [e.code for e in report.errors]


def test_gpus_per_node_refuses_a_launch_over_the_node_on_both_fronts() -> None:
    # -tp 8 -dp 2 on one 8-GPU node is 16 GPUs: vLLM's workers fail (gpu_worker.py:487).
    over = hisparse_rs.check(
        DSV32, kv_transfer_config=KV, tensor_parallel_size=8, data_parallel_size=2, gpus_per_node=8
    )
    assert "gpus_per_node_exceeded" in codes(over)
    assert over.fixed_flags == "--nnodes 2"
    # --gpu h200: the HGX H200's 8 GPUs; the table says which server.
    assert "gpus_per_node_exceeded" in codes(
        hisparse_rs.check(
            DSV32, kv_transfer_config=KV, tensor_parallel_size=8, data_parallel_size=2, gpu="h200"
        )
    )
    assert hisparse_rs.gpu_spec("h200")["gpus_per_node"] == 8
    assert "gpus_per_node" not in hisparse_rs.gpu_spec("h200-nvl")
    sglang = hisparse_rs.check(DSV32, engine="sglang", tp_size=16, enable_hisparse=True, gpus_per_node=8)
    assert "gpus_per_node_exceeded" in codes(sglang)
    argv = hisparse_rs.check_sglang_argv(["--model-path", str(DSV32), "--tp", "16"], gpus_per_node=8)
    assert "gpus_per_node_exceeded" in codes(argv)
    with pytest.raises(TypeError, match="gpus_per_node"):
        hisparse_rs.check(DSV32, gpus_per_node="8")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gpus_per_node"):
        hisparse_rs.check(DSV32, gpus_per_node=0)


def test_check_argv_reads_a_vllm_command_line_as_the_cli_does() -> None:
    argv = [
        "vllm",
        "serve",
        str(DSV32),
        "-tp",
        "8",
        "-dp",
        "2",
        "--port",
        "8000",
        "--kv-transfer-config",
        json.dumps(KV),
    ]
    report = hisparse_rs.check_argv(argv, gpus_per_node=8)
    assert "gpus_per_node_exceeded" in codes(report) and report.ignored_flags == ["--port", "8000"]
    # The machine flags may be in argv; keywords win over them.
    assert "gpus_per_node_exceeded" in codes(hisparse_rs.check_argv([*argv, "--gpus-per-node", "8"]))
    assert hisparse_rs.check_argv([*argv, "--gpus-per-node", "8"], gpus_per_node=16).valid
    with pytest.raises(ValueError, match="tensor-parallel-size"):
        hisparse_rs.check_argv([str(DSV32), "--tensor-parallel-sizee", "8"])
    with pytest.raises(TypeError, match="list of str"):
        hisparse_rs.check_argv("vllm serve x")


def test_a_type_error_names_the_argument() -> None:
    with pytest.raises(TypeError, match="tensor_parallel_size"):
        hisparse_rs.check(DSV32, tensor_parallel_size="8")  # type: ignore[arg-type]


def test_a_vllm_keyword_typo_gets_a_did_you_mean() -> None:
    with pytest.raises(
        TypeError, match=r"tensor_paralel_size \(did you mean tensor_parallel_size\?\)"
    ) as raised:
        hisparse_rs.check(DSV32, tensor_paralel_size=8)
    assert "engine='sglang'" not in str(raised.value)
    with pytest.raises(TypeError, match="engine='sglang'"):
        hisparse_rs.check(DSV32, tp_size=8)
    with pytest.raises(TypeError, match="did you mean max_model_len"):
        hisparse_rs.serve_args(DSV32, max_model_lenn=8)


def test_both_engines_do_the_same_things_from_import_hisparse_rs() -> None:
    """serve_args -> check_args -> the fix loop with apply_fix -> plan_args, one
    loop for either engine (``engine=``), each ending valid and planned."""
    launches = {
        "vllm": dict(kv_transfer_config={"kv_connector": "HiSparseConnector"}, block_size=16),
        "sglang": dict(tp_size=8, enable_hisparse=True, hisparse_config='{"device_buffer_size": 4000}'),
    }
    for engine, launch in launches.items():
        args = hisparse_rs.serve_args(DSV32, engine=engine, **launch)
        report = hisparse_rs.check_args(args, engine=engine, gpu="h200", host_memory_gib=2048)
        assert report.engine == engine and not report.valid
        rounds = 0
        while report.errors and report.errors[0].fix:
            args = hisparse_rs.apply_fix(args, report.errors[0].fix, engine=engine)
            report = hisparse_rs.check_args(args, engine=engine, gpu="h200", host_memory_gib=2048)
            rounds += 1
            assert rounds <= 4, (engine, [e.code for e in report.errors])
        assert report.valid, (engine, [e.code for e in report.errors])
        plan = hisparse_rs.plan_args(args, engine=engine, gpu="h200", host_memory_gib=2048)
        assert (plan.engine, plan.engine_version) == (engine, report.engine_version)
        assert (plan.vllm_version is None) == (engine == "sglang") == (plan.sglang is not None)
