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
    # An empty path mapped every model path (or none) where --model-dir "=" is refused.
    for dirs in ({"": ""}, {"/models": ""}, {"": "tests/data/models"}):
        with pytest.raises(ValueError, match="both non-empty"):
            hisparse_rs.check_deployment(EXAMPLES / "vllm-1p1d.yaml", model_dirs=dirs)


def test_deployment_codes_are_the_tail_of_error_codes() -> None:
    codes = hisparse_rs.deployment_codes()
    assert hisparse_rs.error_codes()[-len(codes) :] == codes


DECODE = (
    "vllm serve /models/deepseek-v3.2 -tp 8 --kv-cache-dtype fp8_ds_mla --kv-transfer-config "
    """'{"kv_connector": "MultiConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": """
    """{"connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}, """
    """{"kv_connector": "HiSparseConnector", "kv_role": "kv_both", """
    """"kv_connector_extra_config": {"host_pool_gib": 600}}]}}'"""
)
PREFILL = (
    "vllm serve /models/deepseek-v3.2 -tp 8 --kv-cache-dtype fp8_ds_mla --no-disable-hybrid-kv-cache-manager "
    """--kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_producer"}'"""
)


def test_the_deployment_file_and_its_plan() -> None:
    report = hisparse_rs.check_deployment(EXAMPLES / "vllm-1p1d-file.yaml", model_dirs=MODELS)
    assert report.valid, report.codes
    assert [(launch["name"], launch["node"], launch["declared_role"]) for launch in report.launches] == [
        ("prefill", "node-p", "prefill"),
        ("decode", "node-d", "decode"),
    ]
    (instance,) = report.plan["instances"]
    assert instance["launch"] == "decode"
    assert instance["requests_with_hisparse"] > instance["requests_without_hisparse"] > 0
    assert [node["node"] for node in report.plan["nodes"]] == ["node-p", "node-d"]
    assert report.plan["nodes"][1]["usable_bytes"] == 1800 * 2**30 * 95 // 100


def test_launches_share_a_node_and_its_ram() -> None:
    """Two decodes on one node: each 600 GiB pool fits the node alone, both do not."""
    launches = [
        {"command": PREFILL, "role": "prefill", "node": "p"},
        {"command": DECODE, "node": "d"},
        {"command": DECODE, "node": "d"},
    ]
    machine = {"gpu": "h200", "gpus_per_node": 16, "host_memory_gib": 1000.0}
    report = hisparse_rs.check_deployment(model_dirs=MODELS, launches=launches, **machine)
    assert report.codes == ["node_host_memory_exceeded"] * 2
    assert [e["launch"] for e in report.errors] == ["launch-2", "launch-3"]
    assert all(launch["report"]["valid"] for launch in report.launches)
    # The CLI's --launch gives the same report.
    cli = subprocess.run(
        [
            *(
                sys.executable,
                "-m",
                "hisparse_rs._cli",
                "deploy",
                "--model-dir",
                f"/models={MODELS['/models']}",
            ),
            *("--gpu", "h200", "--gpus-per-node", "16", "--host-memory-gib", "1000"),
            *("--launch", PREFILL, "--role", "prefill", "--node", "p"),
            *("--launch", DECODE, "--node", "d", "--launch", DECODE, "--node=d", "--json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == 1, cli.stderr
    assert json.loads(cli.stdout) == report.data
    # Every fix applied: the fixed commands fit together.
    fixed = []
    for i, launch in enumerate(launches):
        (error,) = [e for e in report.errors if e["launch"] == f"launch-{i + 1}"] or [None]
        command = launch["command"]
        if error is not None:
            (flag,) = error["fix_flags"]
            assert flag["set"] == "--kv-transfer-config"
            command = command.split(" --kv-transfer-config ")[0] + f" --kv-transfer-config '{flag['value']}'"
        fixed.append({**launch, "command": command})
    again = hisparse_rs.check_deployment(model_dirs=MODELS, launches=fixed, **machine)
    assert again.valid, again.codes
    node = again.plan["nodes"][1]
    assert node["pinned_bytes"] <= node["usable_bytes"]


def test_bad_fields_of_a_deployment_file_and_launches(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: HisparseDeployment\nnodes: {n: {gpu: h200, ram_gib: 0}}\n"
        "launches:\n- {name: a, command: vllm serve m, node: n, gpus: 8}\n- {name: b, command: [vllm, 1]}\n"
    )
    with pytest.raises(ValueError) as info:
        hisparse_rs.check_deployment(bad)
    lines = str(info.value).splitlines()
    assert [line.split(": ", 2)[1] for line in lines] == [
        "error[invalid_value] at nodes.n.ram_gib",
        "error[unknown_key] at launches[0].gpus",
        "error[invalid_type] at launches[1].command[1]",
    ]
    with pytest.raises(ValueError, match=r"error\[invalid_value\] at launch\[0\]\.role"):
        hisparse_rs.check_deployment(launches=[{"command": "vllm serve m", "role": "decoder"}])
    with pytest.raises(ValueError, match="nothing to check"):
        hisparse_rs.check_deployment()
    with pytest.raises(TypeError, match="unknown key"):
        hisparse_rs.check_deployment(launches=[{"command": "vllm serve m", "nodes": "x"}])
    with pytest.raises(TypeError, match="a command line"):
        hisparse_rs.check_deployment(launches=[7])  # type: ignore[list-item]


def test_each_bound_is_its_own_error(tmp_path: Path) -> None:
    """Documents, aliases, string length and nesting: each bound names itself."""
    cases = {
        "bound on documents": "---\nkind: Service\n" * 1025,
        "bound on aliases": "a: &x 1\nb: [" + ", ".join(["*x"] * 1025) + "]\n",
        "per string": "kind: Pod\nmetadata: {name: " + "x" * (1 << 20 | 1) + "}\n",
        "deeper": "[" * 200 + "1" + "]" * 200 + "\n",
        "bound on launches": "kind: HisparseDeployment\nlaunches:\n"
        + "- {name: x, command: vllm serve m}\n" * 257,
    }
    for i, (message, text) in enumerate(cases.items()):
        path = tmp_path / f"b{i}.yaml"
        path.write_text(text)
        with pytest.raises(ValueError, match=message):
            hisparse_rs.check_deployment(path)


def test_what_is_not_read_is_listed(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "kind: Pod\nmetadata: {name: p}\nspec:\n  initContainers: [{name: init, image: busybox}]\n"
        "  containers: [{name: c, command: [vllm, serve, /models/deepseek-v3.2, -tp, '8']}]\n"
        "---\nkind: ConfigMap\nmetadata: {name: cm}\n"
    )
    helm = tmp_path / "helm.yaml"
    helm.write_text("kind: Pod\nmetadata: {name: {{ .Values.name }}}\n")
    report = hisparse_rs.check_deployment([manifest, helm], model_dirs=MODELS)
    why = [n["why"] for n in report.not_read]
    assert len(why) == 3, why
    assert "init container" in why[0]
    assert "kind ConfigMap is not read" in why[1]
    assert "Helm template" in why[2]
