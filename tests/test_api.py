"""The Python surface of config resolution: typed immutable results, one
exception carrying every error, messages a user can act on."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hisparse_rs
from conftest import MODELS

DSV32 = MODELS / "deepseek-v3.2"
HS = {
    "kv_connector": "HiSparseConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 64},
}
PD: dict[str, Any] = {
    "kv_connector": "MultiConnector",
    "kv_role": "kv_consumer",
    "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}, HS]
    },
}


def test_resolve_returns_typed_immutable_settings() -> None:
    cfg = hisparse_rs.resolve(DSV32, kv_transfer_config=PD, kv_cache_dtype="fp8_ds_mla")
    hs = cfg.hisparse
    assert hs is not None
    assert (hs.device_buffer_size, hs.row_bytes, hs.host_block_bytes) == (4096, 656, 2561024)
    assert hs.enabled_by.source == "inferred"
    assert hs.enabled_by.connector == "kv_transfer_config.kv_connector_extra_config.connectors[1]"
    assert hs.provenance["host_pool_gib"].path == (
        "kv_transfer_config.kv_connector_extra_config.connectors[1].kv_connector_extra_config.host_pool_gib"
    )
    with pytest.raises(AttributeError):
        hs.device_buffer_size = 1  # type: ignore[misc]
    hs.provenance["device_buffer_size"] = hs.enabled_by  # a copy: the settings stay as they were
    assert hs.provenance["device_buffer_size"].source == "derived"


def test_json_text_and_mapping_are_the_same() -> None:
    import json

    a = hisparse_rs.resolve(DSV32, kv_transfer_config=PD)
    b = hisparse_rs.resolve(str(DSV32), kv_transfer_config=json.dumps(PD))
    assert a == b


def test_config_error_carries_every_error() -> None:
    with pytest.raises(hisparse_rs.ConfigError) as info:
        hisparse_rs.resolve(
            DSV32,
            kv_transfer_config={"kv_connector": "HiSparseConnector"},
            block_size=16,
            pipeline_parallel_size=2,
            platform="cpu",
        )
    err = info.value
    assert isinstance(err, ValueError)
    assert {e.code for e in err.errors} == {
        "missing_kv_role",
        "host_pool_gib_missing",
        "block_size_unsupported",
        "pipeline_parallel_unsupported",
        "platform_unsupported",
    }
    for e in err.errors:
        assert e.path and e.message and e.hint, e
    assert "missing_kv_role" in str(err)


def test_check_never_raises_on_bad_config() -> None:
    report = hisparse_rs.check(DSV32, kv_transfer_config=[HS])
    assert not report.valid and report.hisparse is None
    (err,) = report.errors
    assert err.code == "connectors_list_at_top_level"
    assert "MultiConnector" in (err.hint or "")


def test_the_fixes_as_serve_flags() -> None:
    # Trial finding 2: one implementation of the flags after every fix, for the CLI,
    # --json, Python and the vLLM plugin.
    bad = {**HS, "kv_connector_extra_config": {}}
    report = hisparse_rs.check(DSV32, kv_transfer_config=bad, block_size=16, tensor_parallel_size=8)
    flags = report.fixed_flags
    assert flags is not None and flags.startswith("--block-size 64 --kv-transfer-config '")
    assert json.loads(report.to_json())["fixed_flags"] == report.fixed_flags
    fixed = dict(block_size=64, kv_transfer_config=json.loads(report.fixed_flags.split("'")[1]))
    assert hisparse_rs.check(DSV32, tensor_parallel_size=8, **fixed).valid
    assert hisparse_rs.check(DSV32, kv_transfer_config=PD, tensor_parallel_size=8).fixed_flags is None
    assert report.fixed_env is None
    # The environment apart from the flags (a flags line with `unset VAR` in it failed when pasted).
    off = hisparse_rs.check(
        DSV32, kv_transfer_config=PD, tensor_parallel_size=8, vllm_use_v2_model_runner="0"
    )
    assert (off.fixed_flags, off.fixed_env) == (None, "unset VLLM_USE_V2_MODEL_RUNNER")
    assert json.loads(off.to_json())["fixed_env"] == off.fixed_env


def test_messages_name_what_the_user_needs() -> None:
    errs = hisparse_rs.check(MODELS / "llama-3.1-8b", kv_transfer_config=HS).errors
    assert "LlamaForCausalLM" in errs[0].message
    errs = hisparse_rs.check(
        DSV32,
        hf_overrides={"index_topk": 1024},
        kv_transfer_config=PD,
        attention_config={"hisparse_config": {"device_buffer_size": 1000}},
    ).errors
    assert "1000" in errs[0].message and "1024" in errs[0].message
    errs = hisparse_rs.check(DSV32, kv_transfer_config={"kv_connector": "NixlConnector"}).errors
    assert errs[0].allowed == 'one of "kv_producer", "kv_consumer", "kv_both"'
    errs = hisparse_rs.check(DSV32, kv_transfer_config=PD, block_size=16).errors
    assert "block_size" in errs[0].message and "64" in errs[0].message


def test_environment_default_and_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    assert not hisparse_rs.check(DSV32, kv_transfer_config=PD).valid
    assert hisparse_rs.check(DSV32, kv_transfer_config=PD, vllm_use_v2_model_runner=None).valid


def test_model_load_error_is_an_oserror() -> None:
    with pytest.raises(hisparse_rs.ModelLoadError) as info:
        hisparse_rs.check("no/such/dir", kv_transfer_config=PD)
    assert isinstance(info.value, OSError)
    assert "no/such/dir" in str(info.value)


def test_wrong_argument_type_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        hisparse_rs.check(DSV32, tensor_parallel_size="eight")  # type: ignore[arg-type]


def test_hf_config_dict_instead_of_a_path() -> None:
    import json

    cfg = json.loads((DSV32 / "config.json").read_text())
    a = hisparse_rs.check(hf_config=cfg, kv_transfer_config=PD).hisparse
    b = hisparse_rs.check(DSV32, kv_transfer_config=PD).hisparse
    assert a == b


def test_not_configured_is_valid_without_settings() -> None:
    cfg = hisparse_rs.resolve(DSV32, kv_transfer_config=PD["kv_connector_extra_config"]["connectors"][0])
    assert cfg.hisparse is None


def test_error_codes_are_stable_strings() -> None:
    codes = hisparse_rs.error_codes()
    assert len(codes) == len(set(codes))
    for code in ("missing_kv_role", "unknown_key", "device_buffer_too_small", "hisparse_connector_too_deep"):
        assert code in codes


def test_import_needs_no_torch() -> None:
    code = (
        "import sys, hisparse_rs; hisparse_rs.check(); "
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_resolve_releases_the_gil_and_is_thread_safe() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(
                lambda gib: (
                    hisparse_rs.resolve(
                        DSV32,
                        kv_transfer_config={**HS, "kv_connector_extra_config": {"host_pool_gib": gib}},
                    ).hisparse
                ),
                range(16, 48),
            )
        )
    assert [r.host_pool_gib for r in results if r] == [float(g) for g in range(16, 48)]


@pytest.mark.parametrize(("tp", "fixed"), [(3, 2), (6, 4), (96, 64)])
def test_tensor_parallel_size_must_divide_the_heads(tp: int, fixed: int) -> None:
    # DeepSeek-V3.2 has 128 attention heads; vLLM 0.33 refuses a TP that does not divide them.
    args = hisparse_rs.serve_args(DSV32, kv_transfer_config=PD, tensor_parallel_size=tp)
    report = hisparse_rs.check_args(args)
    [err] = [e for e in report.errors if e.code == "tensor_parallel_heads_mismatch"]
    assert err.path == "tensor_parallel_size"
    fixed_args = hisparse_rs.apply_fix(args, err.fix)
    assert fixed_args["tensor_parallel_size"] == fixed
    assert "tensor_parallel_heads_mismatch" not in {e.code for e in hisparse_rs.check_args(fixed_args).errors}


def test_machines_from_python() -> None:
    spec = {"method": "mtp", "num_speculative_tokens": 14}
    kv = {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": 512},
    }
    assert hisparse_rs.check(DSV32, kv_transfer_config=kv, speculative_config=spec).valid
    # TP 16: DeepSeek-V3.2's weights leave KV room on an 80 GiB H100 (issue 22:
    # with the GPU known, weights that leave none are an error of their own).
    report = hisparse_rs.check(
        DSV32,
        kv_transfer_config=kv,
        speculative_config=spec,
        tensor_parallel_size=16,
        gpu="h100",
        gpus_per_node=16,
    )
    assert [e.code for e in report.errors] == ["residency_shared_memory_exceeded"]
    assert report.gpu is not None and report.gpu["name"] == "h100"
    with pytest.raises(hisparse_rs.ConfigError):
        hisparse_rs.resolve(DSV32, kv_transfer_config=kv, speculative_config=spec, gpu="h100")
    ok = hisparse_rs.resolve(DSV32, kv_transfer_config=kv, tensor_parallel_size=8, gpu="b200")
    assert ok.hisparse is not None and ok.hisparse.residency_shared_memory_bytes == 26148
    assert ok.hisparse.provenance["residency_shared_memory_bytes"].source == "derived"
    # The node's RAM, given: 8 DP replicas of 512 GiB do not fit in 1 TiB.
    over = hisparse_rs.check(DSV32, kv_transfer_config=kv, data_parallel_size=8, host_memory_gib=1024)
    assert [e.code for e in over.errors] == ["host_memory_exceeded"]
    with pytest.raises(ValueError, match="not a GPU"):
        hisparse_rs.check(DSV32, gpu="tpu-v5")
    with pytest.raises(TypeError):
        hisparse_rs.check(DSV32, gpu=200)  # type: ignore[arg-type]


def test_data_parallel_size_local_counts_this_nodes_pools() -> None:
    """The new-user trial's multi-node DP launch, -dp 16 --data-parallel-size-local 8 on each node:
    the node pins 8 pools, not 16 (vLLM 0.33 arg_utils.py:2486)."""

    def kv(gib: float) -> dict[str, Any]:
        return {
            "kv_connector": "HiSparseConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"host_pool_gib": gib},
        }

    launch: dict[str, Any] = {
        "data_parallel_size": 16,
        "data_parallel_size_local": 8,
        "enable_expert_parallel": True,
        "kv_cache_dtype": "fp8_ds_mla",
    }
    args = hisparse_rs.serve_args(DSV32, kv_transfer_config=kv(200), **launch)
    assert args["data_parallel_size_local"] == 8
    assert hisparse_rs.check_args(args, gpu="h200", host_memory_gib=2048).valid
    over = hisparse_rs.check(DSV32, kv_transfer_config=kv(300), gpu="h200", host_memory_gib=2048, **launch)
    assert [e.code for e in over.errors] == ["host_memory_exceeded"]  # 8 x 300 GiB > 95 % of 2048
    assert "across 8 pools" in over.errors[0].message
    plan = hisparse_rs.plan(DSV32, kv_transfer_config=kv(200), host_memory_gib=2048, **launch)
    assert plan.valid and plan.host.pools_per_node == 8
    # More replicas on this node than the deployment has: vLLM's ParallelConfig refuses it.
    bad_args = hisparse_rs.serve_args(DSV32, data_parallel_size=4, data_parallel_size_local=8)
    bad = hisparse_rs.check_args(bad_args)
    assert [(e.code, str(e.path)) for e in bad.errors] == [("invalid_value", "data_parallel_size_local")]
    fixed = hisparse_rs.apply_fix(bad_args, bad.errors[0].fix)
    assert fixed["data_parallel_size_local"] == 4 and hisparse_rs.check_args(fixed).valid


def test_gpus_by_the_names_their_drivers_report_and_the_ram_in_words() -> None:
    """What the vLLM plugin passes: the device's name and memory, the RAM and what it is."""
    h200 = hisparse_rs.gpu_spec("NVIDIA H200")
    assert (h200["name"], h200["arch"], h200["max_shared_memory_per_block"]) == ("h200", "sm_90", 232448)
    assert hisparse_rs.gpu_spec("h100")["name"] == hisparse_rs.gpu_spec("NVIDIA H100 80GB HBM3")["name"]
    with pytest.raises(ValueError, match="not a GPU hisparse-check knows"):
        hisparse_rs.gpu_spec("NVIDIA GH200 480GB")
    kv = {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": 128},
    }
    args = hisparse_rs.serve_args(DSV32, kv_transfer_config=kv, tensor_parallel_size=8)
    report = hisparse_rs.check_args(
        args, gpu="NVIDIA H200", host_memory_gib=100, host_memory_source="the node's available RAM"
    )
    [err] = report.errors
    assert (
        err.code == "host_memory_exceeded"
        and "95 % of 100.0 GiB host RAM, the node's available RAM" in err.message
    )
    with pytest.raises(TypeError, match="host_memory_source must be a str"):
        hisparse_rs.check_args(args, host_memory_gib=100, host_memory_source=1)
    with pytest.raises(ValueError, match="give both"):
        hisparse_rs.check_args(args, host_memory_source="x")
    with pytest.raises(ValueError, match="at most 512"):
        hisparse_rs.check_args(args, host_memory_gib=100, host_memory_source="x" * 513)


def test_model_ids_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hf_hub: Callable[..., str]
) -> None:
    commit = hf_hub("deepseek-ai/DeepSeek-V3.2", commit="b" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    report = hisparse_rs.check("deepseek-ai/DeepSeek-V3.2", kv_transfer_config=PD)
    assert report.valid and report.model is not None and commit in report.model.source
    with pytest.raises(hisparse_rs.ModelLoadError, match=r"hf download zai-org/GLM-5 config\.json"):
        hisparse_rs.check("zai-org/GLM-5")


def test_check_sends_what_serve_args_gives_in_its_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """check() builds its serve args in one pass over its parameters (issue 22,
    speed): the same dict, key for key and in order, as serve_args() of the same
    arguments, so the core reads the same input (its first type error included)."""
    from hisparse_rs import _core, config

    every: dict[str, Any] = {name: f"v-{name}" for name in config._SERVE_FIELDS}
    every.update(hf_config={"a": 1}, vllm_use_v2_model_runner=True, hf_config_path=Path("/x/y"))
    sent: list[Any] = []
    monkeypatch.setattr(_core, "check_json", lambda args, *rest: sent.append(args))
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    hisparse_rs.check(DSV32, **every)
    expected = hisparse_rs.serve_args(DSV32, **{**every, "hf_config_path": "/x/y"})
    assert list(sent[0].items()) == list(expected.items())
    assert list(expected)[-4:] == [
        "model",
        "hf_config",
        "VLLM_USE_V2_MODEL_RUNNER",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
    ]
