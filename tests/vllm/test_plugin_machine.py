"""The machine the plugin tells the check: the GPU vLLM detected and the node's RAM.

vLLM 0.33.0 checks the residency resolver's shared memory and the pinned host
pools only after the weights have loaded (vllm/v1/hisparse/runtime.py:168 and
:195). Inside ``create_engine_config`` the plugin reports both up front, for
the device vLLM's platform answers for (the no-device stub answers as 8 x
H200 with 1920 GiB of RAM available: conftest.py) or, here, for other devices
and nodes by patching those answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import vllm.plugins
import vllm_pipeline
from vllm.config import KVTransferConfig
from vllm.engine.arg_utils import EngineArgs
from vllm.platforms import current_platform
from vllm.platforms.interface import DeviceCapability

import hisparse_rs
from hisparse_rs import vllm_plugin

ROOT = Path(__file__).resolve().parents[2]
DSV32 = ROOT / "tests" / "data" / "models" / "deepseek-v3.2"
GIB = 2**30
LOGGER = "vllm.plugins.hisparse_rs"


@pytest.fixture(autouse=True)
def _plugin_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(vllm_plugin.ENV, raising=False)
    monkeypatch.delenv("HISPARSE_RS_PREFLIGHT_CHECKED", raising=False)
    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)
    vllm.plugins.load_general_plugins()


def hisparse(host_pool_gib: float = 128) -> dict[str, Any]:
    return {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": host_pool_gib},
    }


def engine_args(host_pool_gib: float = 128, **kwargs: Any) -> EngineArgs:
    return EngineArgs(
        model=str(DSV32),
        skip_tokenizer_init=True,
        kv_transfer_config=KVTransferConfig(**hisparse(host_pool_gib)),
        kv_cache_dtype="fp8_ds_mla",
        **{"tensor_parallel_size": 8, **kwargs},
    )


def mtp(tokens: int) -> dict[str, Any]:
    return {"method": "mtp", "num_speculative_tokens": tokens}


def device(
    monkeypatch: pytest.MonkeyPatch, name: str, capability: tuple[int, int], memory_gib: float
) -> None:
    """vLLM's platform answers for another GPU (the queries the plugin and vLLM's config code make)."""
    cls = type(current_platform)
    monkeypatch.setattr(cls, "get_device_name", classmethod(lambda c, device_id=0: name))
    monkeypatch.setattr(
        cls, "get_device_capability", classmethod(lambda c, device_id=0: DeviceCapability(*capability))
    )
    monkeypatch.setattr(
        cls, "get_device_total_memory", classmethod(lambda c, device_id=0: int(memory_gib * GIB))
    )


def ram(monkeypatch: pytest.MonkeyPatch, total_gib: float, available_gib: float) -> None:
    """The node's RAM as psutil reads it (for the plugin and for vLLM)."""
    monkeypatch.setattr(
        psutil, "virtual_memory", vllm_pipeline.node_memory(int(total_gib * GIB), int(available_gib * GIB))
    )


def no_model_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: EngineArgs) -> Any:
        raise AssertionError("create_model_config ran before the report")

    monkeypatch.setattr(EngineArgs, "create_model_config", refuse)


def plugin_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


# ---- the GPU: the residency resolver's shared memory ------------------------


def test_a_resolver_that_does_not_fit_the_gpu_vllm_detected_is_reported_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MTP with 10 draft tokens: 11 x 2048 union rows and a 24576-slot hot buffer need
    238,628 B of shared memory per block; an H200 allows 232,448 (vLLM fails on it in
    HiSparseRuntime.__init__, after the weights load)."""
    config = dict(speculative_config=mtp(10))
    verdict = vllm_pipeline.vllm_verdict(
        {**vllm_plugin.serve_args_of(engine_args(**config)), "model": str(DSV32)}
    )
    assert not verdict.starts and verdict.stage == "workers", verdict
    assert "residency resolution needs 238628 B" in verdict.error and "allows 232448 B" in verdict.error
    with monkeypatch.context() as m, pytest.raises(ValueError) as raised:
        no_model_work(m)
        engine_args(**config).create_engine_config()
    text = str(raised.value)
    assert (
        "error[residency_shared_memory_exceeded] attention_config.hisparse_config.device_buffer_size" in text
    )
    assert "needs 238628 B of shared memory per block" in text and "allows 232448 B" in text
    assert "Checked for this node: NVIDIA H200 (h200: 227 KiB of shared memory per block, 141 GiB)" in text
    assert "hisparse-check --gpu h200 --gpu-memory-gib 141 --gpus-per-node 8 --host-memory-gib 1920" in text
    # The fix, applied, passes the check for this GPU, and vLLM's own resolver check.
    args = vllm_plugin.serve_args_of(engine_args(**config))
    node = vllm_plugin.machine(engine_args(**config), "cuda").options
    report = hisparse_rs.check_args(args, **node)
    fixed = hisparse_rs.apply_fix(args, [op for d in report.errors for op in d.fix])
    assert hisparse_rs.check_args(fixed, **node).valid
    assert vllm_pipeline.vllm_verdict({**fixed, "model": str(DSV32)}).starts


def test_the_limit_is_the_detected_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 draft tokens fit an H200's 227 KiB per block, not an A100's 163 KiB."""
    config = dict(speculative_config=mtp(8))
    engine_args(**config).create_engine_config()  # the H200 of the stub
    device(monkeypatch, "NVIDIA A100-SXM4-80GB", (8, 0), 80)
    assert vllm_plugin.machine(engine_args(), "cuda").options["gpu"] == "a100"
    monkeypatch.delenv("HISPARSE_RS_PREFLIGHT_CHECKED")  # a new start-up, on another node
    with pytest.raises(ValueError, match=r"error\[residency_shared_memory_exceeded\]") as raised:
        engine_args(**config).create_engine_config()
    assert "allows 166912 B" in str(raised.value)
    assert "NVIDIA A100-SXM4-80GB (a100: 163 KiB of shared memory per block, 80 GiB)" in str(raised.value)


@pytest.mark.parametrize(
    ("name", "capability", "why"),
    [
        ("NVIDIA GH200 480GB", (9, 0), "'NVIDIA GH200 480GB', is not in hisparse_rs' GPU table"),
        ("NVIDIA H200", (8, 0), "has compute capability sm_80, not sm_90 as hisparse_rs' h200"),
    ],
)
def test_a_device_the_table_does_not_know_skips_the_gpu_checks_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    name: str,
    capability: tuple[int, int],
    why: str,
) -> None:
    device(monkeypatch, name, capability, 96)
    node = vllm_plugin.machine(engine_args(), "cuda")
    assert "gpu" not in node.options and node.options["host_memory_gib"] == 1920
    with caplog.at_level(logging.INFO, logger=LOGGER):
        config = engine_args(speculative_config=mtp(10)).create_engine_config()  # vLLM's config code starts
    assert config.speculative_config.num_speculative_tokens == 10
    skipped = [line for line in plugin_lines(caplog) if "not checked" in line]
    assert len(skipped) == 1 and why in skipped[0] and "shared memory" in skipped[0], plugin_lines(caplog)


def test_a_gpu_vllm_cannot_query_never_fails_the_start_up(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Ray head without GPUs: vLLM's get_batch_defaults catches the query's failure too."""

    def no_gpu(cls: Any, device_id: int = 0) -> str:
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(type(current_platform), "get_device_name", classmethod(no_gpu))
    node = vllm_plugin.machine(engine_args(), "cuda")
    assert "gpu" not in node.options and "RuntimeError: NVML Shared Library Not Found" in node.skipped[0]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        vllm_plugin.preflight(engine_args())
    assert any("not checked on this node" in line for line in plugin_lines(caplog))


# ---- the RAM: the pinned host pools -----------------------------------------


def test_pools_the_node_cannot_pin_are_reported_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TP 8 shares one 128 GiB pool (mp executor); 100 GiB available allows 95."""
    ram(monkeypatch, 128, 100)
    no_model_work(monkeypatch)
    with pytest.raises(ValueError) as raised:
        engine_args(128).create_engine_config()
    text = str(raised.value)
    assert "error[host_memory_exceeded] kv_transfer_config.kv_connector_extra_config.host_pool_gib" in text
    assert "95 % of 100.0 GiB host RAM, " + vllm_plugin.HOST_MEMORY_SOURCE in text
    assert "fix:     set kv_transfer_config.kv_connector_extra_config.host_pool_gib to 95, the most" in text
    assert "host_pools_fit_alone" not in text  # one pool: vLLM refuses it too
    assert "--kv-transfer-config '" in text and '"host_pool_gib": 95}' in text
    flags = "--gpu h200 --gpu-memory-gib 141 --gpus-per-node 8 --host-memory-gib 100"
    assert f"8 GPUs visible, 100 GiB of RAM available (hisparse-check {flags})" in text


def test_pools_that_fit_alone_but_not_together_carry_the_named_deviation(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """DP 8 x TP 1: eight private 128 GiB pools; each fits in 95 % of 1000 GiB, together they do not.
    One problem, one diagnostic: the error names the deviation, no warning repeats it."""
    ram(monkeypatch, 1024, 1000)
    args = engine_args(128, tensor_parallel_size=1, data_parallel_size=8)
    report = hisparse_rs.check_args(
        vllm_plugin.serve_args_of(args), **vllm_plugin.machine(args, "cuda").options
    )
    assert [e.code for e in report.errors] == ["host_memory_exceeded"]
    assert "(deviation host_pools_fit_alone)" in report.errors[0].message
    assert "host_pools_fit_alone" not in [w.code for w in report.warnings]
    assert "host_pools_fit_alone" in dict(hisparse_rs.vllm_deviations())
    with (
        caplog.at_level(logging.WARNING, logger=LOGGER),
        pytest.raises(ValueError, match="host_memory_exceeded") as raised,
    ):
        args.create_engine_config()
    assert "(deviation host_pools_fit_alone)" in str(raised.value)
    assert not any("host_pools_fit_alone" in line for line in plugin_lines(caplog))


def test_a_valid_launch_says_the_ram_headroom_it_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22: inside vllm serve the RAM is the machine's; a valid report says what the pools pin of it."""
    ram(monkeypatch, 1024, 1000)
    args = engine_args(64)
    report = hisparse_rs.check_args(
        vllm_plugin.serve_args_of(args), **vllm_plugin.machine(args, "cuda").options
    )
    assert report.valid, [e.code for e in report.errors]
    m = report.host_memory
    assert m is not None and m["host_memory_gib"] == 1000
    assert m["source"] == vllm_plugin.HOST_MEMORY_SOURCE
    assert m["left_bytes"] == m["usable_bytes"] - m["pinned_bytes"] > 0


def test_each_node_of_a_multi_node_deployment_counts_its_own_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    """TP 16 over --nnodes 2 (a head and a --headless node): 8 private pools a node."""
    ram(monkeypatch, 1024, 1000)
    args = engine_args(100, tensor_parallel_size=16, nnodes=2)
    node = vllm_plugin.machine(args, "cuda")
    assert node.options["host_memory_gib"] == 1000 and node.options["gpu"] == "h200"
    report = hisparse_rs.check_args(vllm_plugin.serve_args_of(args), **node.options)
    assert [e.code for e in report.errors] == []  # 8 x 100 GiB fit in 950
    report = hisparse_rs.check_args(
        vllm_plugin.serve_args_of(engine_args(120, tensor_parallel_size=16, nnodes=2)), **node.options
    )
    assert [e.code for e in report.errors] == ["host_memory_exceeded"]  # 8 x 120 GiB do not
    assert "8 pools (private mode: one per rank, 8 ranks)" in report.errors[0].message


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"distributed_executor_backend": "ray"}, "the ray executor places the ranks"),
        ({"data_parallel_size": 2, "data_parallel_backend": "ray"}, "Ray places the DP ranks"),
        ({"data_parallel_size": 2, "data_parallel_rank": 1}, "external-LB process"),
    ],
)
def test_the_ram_check_is_skipped_where_this_process_cannot_see_the_nodes_pools(
    kwargs: dict[str, Any], why: str
) -> None:
    node = vllm_plugin.machine(engine_args(**kwargs), "cuda")
    assert "host_memory_gib" not in node.options and node.options["gpu"] == "h200"
    assert len(node.skipped) == 1 and why in node.skipped[0] and "pinned host pools" in node.skipped[0]


def test_the_multi_node_dp_launch_counts_this_nodes_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's multi-node DP launch (new-user trial): -dp 16 --data-parallel-size-local 8 on each
    node, no --nnodes: this node pins its 8 replicas' pools (arg_utils.py:2486), not 16."""
    ram(monkeypatch, 2048, 2048)
    launch = {
        "tensor_parallel_size": 1,
        "data_parallel_size": 16,
        "data_parallel_size_local": 8,
        "data_parallel_address": "10.0.0.1",
        "enable_expert_parallel": True,
    }
    args = engine_args(200, **launch)
    node = vllm_plugin.machine(args, "cuda")
    assert node.skipped == () and node.options["host_memory_gib"] == 2048
    serve = vllm_plugin.serve_args_of(args)
    assert serve["data_parallel_size_local"] == 8
    assert [e.code for e in hisparse_rs.check_args(serve, **node.options).errors] == []
    over = hisparse_rs.check_args(vllm_plugin.serve_args_of(engine_args(300, **launch)), **node.options)
    assert [e.code for e in over.errors] == ["host_memory_exceeded"]  # 8 x 300 GiB > 95 % of 2048
    assert "across 8 pools" in over.errors[0].message
    with pytest.raises(ValueError, match="across 8 pools"):
        engine_args(300, **launch).create_engine_config()
    # An external-LB rank runs alone: vLLM's rules for the local size are not those of the internal LB.
    external = vllm_plugin.serve_args_of(engine_args(200, **launch, data_parallel_rank=3))
    assert "data_parallel_size_local" not in external


def test_an_even_share_of_dp_replicas_per_node_is_counted() -> None:
    node = vllm_plugin.machine(
        engine_args(data_parallel_size=4, data_parallel_size_local=2, nnodes=2), "cuda"
    )
    assert node.skipped == () and node.options["host_memory_gib"] == 1920


def test_off_cuda_nothing_is_queried(monkeypatch: pytest.MonkeyPatch) -> None:
    queried: list[str] = []
    monkeypatch.setattr(
        type(current_platform), "get_device_name", classmethod(lambda c, device_id=0: queried.append("name"))
    )
    node = vllm_plugin.machine(engine_args(), "rocm")
    assert queried == [] and "gpu" not in node.options and node.skipped == ()


def test_machine_facts_are_read_once_per_check(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real: Callable[..., Any] = hisparse_rs.check_args
    monkeypatch.setattr(hisparse_rs, "check_args", lambda args, **m: calls.append(m) or real(args, **m))
    engine_args().create_engine_config()
    assert len(calls) == 1
    assert calls[0]["gpu"] == "h200" and calls[0]["gpu_memory_gib"] == 141
    assert (
        calls[0]["host_memory_gib"] == 1920
        and calls[0]["host_memory_source"] == vllm_plugin.HOST_MEMORY_SOURCE
    )


def test_missing_device_figures_fall_back_or_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    """No memory reported (integrated parts): the table's; no compute capability: the GPU checks skip."""
    device(monkeypatch, "NVIDIA H200", (9, 0), 0)
    node = vllm_plugin.machine(engine_args(), "cuda")
    assert node.options["gpu"] == "h200" and "gpu_memory_gib" not in node.options
    assert "141 (the table's) GiB" in node.checked
    monkeypatch.setattr(
        type(current_platform), "get_device_capability", classmethod(lambda c, device_id=0: None)
    )
    node = vllm_plugin.machine(engine_args(), "cuda")
    assert "gpu" not in node.options and "no compute capability" in node.skipped[0]


def test_a_failure_reading_the_machine_keeps_the_other_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(engine_args: Any, platform: str) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(vllm_plugin, "machine", broken)
    with pytest.raises(ValueError, match=r"error\[host_pool_too_small\]") as raised:
        engine_args(0.5).create_engine_config()
    assert "Not checked: the machine's checks (reading it failed: RuntimeError: boom)." in str(raised.value)


# ---- the node's GPUs (issue 22 item 9) ---------------------------------------


def test_a_launch_over_the_gpus_vllm_counts_is_reported_before_the_model_loads() -> None:
    """-tp 8 -dp 2 on the stub's 8 GPUs: 16 GPUs on one node. vLLM's own world-size check
    (config/parallel.py:1068) counts one replica and passes; its workers fail later
    (gpu_worker.py:487). The plugin passes the device count vLLM sees and refuses it first."""
    node = vllm_plugin.machine(engine_args(data_parallel_size=2), "cuda")
    assert node.options["gpus_per_node"] == 8 and "8 GPUs visible" in node.checked
    assert "--gpus-per-node 8" in node.flags()
    with pytest.raises(ValueError, match=r"error\[gpus_per_node_exceeded\]"):
        engine_args(data_parallel_size=2).create_engine_config()


def test_the_node_and_dp_fields_reach_the_check() -> None:
    """node_rank, data_parallel_rank and data_parallel_backend are read (issue 22's list)."""
    serve = vllm_plugin.serve_args_of(
        engine_args(data_parallel_size=2, nnodes=2, node_rank=1, data_parallel_backend="mp")
    )
    assert (serve["node_rank"], serve["data_parallel_backend"]) == (1, "mp")
    assert (
        vllm_plugin.serve_args_of(engine_args(data_parallel_size=2, data_parallel_rank=1))[
            "data_parallel_rank"
        ]
        == 1
    )
