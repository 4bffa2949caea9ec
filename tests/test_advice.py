"""Advice safe to paste (issue 14 item 3): what the check says when it could not
check something, and fixes that name only what a user can do."""

from __future__ import annotations

from typing import Any

import pytest

import hisparse_rs
from conftest import MODELS

DSV32 = MODELS / "deepseek-v3.2"


def hs(**extra: Any) -> dict[str, Any]:
    return {"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra}


def test_the_plain_check_says_host_ram_was_not_checked() -> None:
    report = hisparse_rs.check(DSV32, kv_transfer_config=hs(host_pool_gib=4096))
    assert report.valid
    note = [w for w in report.warnings if w.code == "host_memory_not_given"]
    assert note and "4096" in note[0].message and "--host-memory-gib" in (note[0].hint or "")
    # Given the node's RAM, the pools are checked: an error, and no note.
    checked = hisparse_rs.check(DSV32, kv_transfer_config=hs(host_pool_gib=4096), host_memory_gib=2048)
    assert [e.code for e in checked.errors] == ["host_memory_exceeded"]
    assert not [w for w in checked.warnings if w.code == "host_memory_not_given"]


def test_platform_fix_names_no_vllm_serve_flag() -> None:
    report = hisparse_rs.check(DSV32, kv_transfer_config=hs(host_pool_gib=64), platform="rocm")
    (e,) = report.errors
    assert e.code == "platform_unsupported"
    assert "vllm serve: --platform" not in (e.hint or "") and "no --platform flag" in (e.hint or "")


def test_the_ram_fix_offers_the_pool_the_gpus_use() -> None:
    """2048 GiB pool on a 2048 GiB node, --gpu h200, TP 8: not the 1945.59 GiB the RAM allows."""
    report = hisparse_rs.check(
        DSV32,
        kv_transfer_config=hs(host_pool_gib=2048),
        tensor_parallel_size=8,
        gpu="h200",
        host_memory_gib=2048,
    )
    (e,) = report.errors
    assert e.code == "host_memory_exceeded"
    (op,) = e.fix
    assert op["value"] < 1000, op
    assert "1945.59" in (e.hint or "") and "nearly all" in (e.hint or "")
    # Without the GPU the largest pool is offered, and the hint says what it pins.
    alone = hisparse_rs.check(DSV32, kv_transfer_config=hs(host_pool_gib=2048), host_memory_gib=2048)
    (e,) = alone.errors
    assert e.fix[0]["value"] == 1945.59 and "nearly all" in (e.hint or "")


def test_a_node_that_cannot_start_the_length_gets_a_shorter_one() -> None:
    report = hisparse_rs.check(
        DSV32, kv_transfer_config=hs(host_pool_gib=64), data_parallel_size=8, host_memory_gib=32
    )
    (e,) = report.errors
    assert e.code == "host_memory_exceeded"
    assert [op["path"] for op in e.fix] == [
        "kv_transfer_config.kv_connector_extra_config.host_pool_gib",
        "max_model_len",
    ]
    fixed = hisparse_rs.apply_fix(
        hisparse_rs.serve_args(DSV32, kv_transfer_config=hs(host_pool_gib=64), data_parallel_size=8), e.fix
    )
    assert hisparse_rs.check_args(fixed, host_memory_gib=32).valid


@pytest.mark.parametrize(
    "name", ["h20", "h800", "h100-pcie", "h100-nvl", "h200-nvl", "gb200", "b300", "gb300", "rtx-pro-6000"]
)
def test_gpus_dsa_models_are_served_on_are_known(name: str) -> None:
    spec = hisparse_rs.gpu_spec(name)
    assert spec["name"] == name and spec["sm_count"] > 0 and spec["memory_gib"] > 0
    expected = 99 * 1024 if spec["arch"] == "sm_120" else 227 * 1024
    assert spec["max_shared_memory_per_block"] == expected


@pytest.mark.parametrize("key", ["settings", "kv_extra_config"])
def test_a_pool_inside_an_unknown_key_is_kept(key: str) -> None:
    tree = {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {},
        key: {"host_pool_gb": 64},
    }
    args = hisparse_rs.serve_args(DSV32, kv_transfer_config=tree)
    report = hisparse_rs.check_args(args)
    assert [e.code for e in report.errors] == ["unknown_key"], [(e.code, e.hint) for e in report.errors]
    fixed = hisparse_rs.check_args(hisparse_rs.apply_fix(args, report.errors[0].fix))
    assert fixed.valid and fixed.hisparse is not None and fixed.hisparse.host_pool_gib == 64


@pytest.mark.parametrize(("given", "meant"), [(128 * 2**30, 128), (64 * 10**9, 64), (20 * 2**40, 20)])
def test_a_size_suffix_vllm_expanded_is_read_back_as_the_gib_meant(given: int, meant: int) -> None:
    """`"host_pool_gib": 128G` in --kv-transfer-config: vLLM expands it to
    128 x 2^30 (GiB); the warning and, on a node that cannot pin that, the RAM
    fix say 128 (new-user trial: the fix offered 1945.59 GiB, nearly all the RAM)."""
    alone = hisparse_rs.check(DSV32, kv_transfer_config=hs(host_pool_gib=given), tensor_parallel_size=8)
    (w,) = [w for w in alone.warnings if w.code == "host_pool_implausible"]
    assert [op["value"] for op in map(dict, w.fix)] == [meant]
    note = next(w for w in alone.warnings if w.code == "host_memory_not_given")
    assert "17179869184" not in note.message  # not the 2^64-byte saturation
    node = hisparse_rs.check(
        DSV32, kv_transfer_config=hs(host_pool_gib=given), tensor_parallel_size=8, host_memory_gib=4096
    )
    (e,) = node.errors
    assert e.code == "host_memory_exceeded"
    assert [dict(op)["value"] for op in e.fix] == [meant]
    fixed = hisparse_rs.apply_fix(
        hisparse_rs.serve_args(DSV32, kv_transfer_config=hs(host_pool_gib=given), tensor_parallel_size=8),
        e.fix,
    )
    assert hisparse_rs.check_args(fixed, host_memory_gib=4096).valid


def test_the_ram_hint_asks_for_no_gpu_that_was_given() -> None:
    """-tp 8 -dp 2 on a 512 GiB node with --gpu h200: the GPU-binding pool is not
    smaller than what the RAM pins, and the hint no longer says to pass --gpu."""
    kv = hs(host_pool_gib=300)
    with_gpu = hisparse_rs.check(
        DSV32,
        kv_transfer_config=kv,
        tensor_parallel_size=8,
        data_parallel_size=2,
        host_memory_gib=512,
        gpu="h200",
        gpus_per_node=16,  # both replicas on one node (an HGX H200 holds 8)
    )
    without = hisparse_rs.check(
        DSV32, kv_transfer_config=kv, tensor_parallel_size=8, data_parallel_size=2, host_memory_gib=512
    )
    (e,) = with_gpu.errors
    (f,) = without.errors
    assert e.code == f.code == "host_memory_exceeded"
    assert "with --gpu" not in (e.hint or "") and "with --gpu" in (f.hint or "")


def test_a_python_dict_repr_is_answered_with_the_json_meant() -> None:
    """`--kv-transfer-config "{'kv_connector': ...}"` (a Python dict's repr): the
    shell removed nothing, the quotes are Python's (new-user trial)."""
    report = hisparse_rs.check(
        DSV32, kv_transfer_config="{'kv_connector': 'HiSparseConnector', 'kv_role': 'kv_both'}"
    )
    (e,) = report.errors
    assert e.code == "invalid_json"
    assert """'{"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}'""" in (e.hint or "")
    assert "shell" not in (e.hint or "")
