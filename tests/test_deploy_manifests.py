"""Issue 25: what ``check_deployment`` reads of a manifest is what Kubernetes and the container would.

Every manifest here, the examples in examples/deploy and the ones generated
below (LeaderWorkerSets of vLLM and SGLang nodes, a Job on the vLLM image's
entrypoint, a ``bash -c`` Pod, a ``kind: List``), is

- valid for the API server: each document against Kubernetes' own schemas
  (``kubernetes-validate``, strict: an unknown field is an error), a
  LeaderWorkerSet against its CRD's ``openAPIV3Schema`` (tests/data/k8s,
  fetched once from kubernetes-sigs/lws; README there);
- read by PyYAML (``yaml.safe_load_all``): the containers we find are the
  containers it finds;
- exec'd as we say: the argv ``check_deployment`` reports for each launch
  equals what the container runs, Kubernetes' ``$(VAR)`` expansion of
  ``command`` + ``args`` (done here after k8s.io/kubernetes
  third_party/forked/golang/expansion) and, for a ``sh -c`` / ``bash -c``
  string, what a real ``/bin/sh`` (``bash``) execs: stand-in ``vllm``,
  ``sglang``, ``python3`` executables on its PATH print the argv they get.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

import hisparse_rs

ROOT = Path(__file__).resolve().parents[1]
# The Kubernetes examples; examples/deploy/*-file.yaml are deployment files of
# our own (kind: HisparseDeployment, docs/deploy.md), not API objects.
EXAMPLES = sorted(
    p
    for p in (ROOT / "examples" / "deploy").glob("*.yaml")
    if "kind: HisparseDeployment" not in p.read_text()
)
MODELS = {"/models": str(ROOT / "tests" / "data" / "models")}
LWS_SCHEMA = json.loads((ROOT / "tests" / "data" / "k8s" / "leaderworkerset-v1.schema.json").read_text())
# Built once: jsonschema.validate would check the 131 KB schema on every call.
LWS_VALIDATOR = jsonschema.Draft7Validator(LWS_SCHEMA["openAPIV3Schema"])
K8S_VERSION = "1.33.0"
SHELLS = {"sh", "bash", "dash", "ash"}

H200 = {"nvidia.com/gpu.product": "NVIDIA-H200"}
NIXL_P = '{"kv_connector": "NixlConnector", "kv_role": "kv_producer"}'


def _pod_spec(container: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelector": H200, "containers": [container]}


def _lws(name: str, size: int, leader: dict[str, Any] | None, worker: dict[str, Any]) -> dict[str, Any]:
    tpl: dict[str, Any] = {"size": size, "workerTemplate": {"spec": _pod_spec(worker)}}
    if leader is not None:
        tpl["leaderTemplate"] = {"spec": _pod_spec(leader)}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "leaderWorkerTemplate": tpl},
    }


def _generated() -> dict[str, str]:
    """Manifests written as users write them, each a YAML text."""
    gpus = {"limits": {"nvidia.com/gpu": 8, "memory": "1800Gi"}}
    vllm_dp = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.33.0",
        "command": ["sh", "-c"],
        "args": [
            "exec vllm serve /models/deepseek-v3.2 --data-parallel-size 16 --data-parallel-size-local 8 \\\n"
            "  --data-parallel-address $LWS_LEADER_ADDRESS --data-parallel-rpc-port 13345 \\\n"
            "  --data-parallel-start-rank $((LWS_WORKER_INDEX * 8)) \\\n"
            f"  --kv-transfer-config '{NIXL_P}'"
        ],
        "resources": gpus,
    }
    sglang_node = {
        "name": "sglang",
        "image": "lmsysorg/sglang:v0.5.23",
        "env": [{"name": "MODEL", "value": "/models/deepseek-v3.2"}, {"name": "TP", "value": "16"}],
        "command": ["sh", "-ec"],
        "args": [
            'MALLOC_ARENA_MAX=4 exec python3 -m sglang.launch_server --model-path "$MODEL" \\\n'
            "  --tp ${TP} --nnodes $LWS_GROUP_SIZE --node-rank $LWS_WORKER_INDEX \\\n"
            "  --dist-init-addr $LWS_LEADER_ADDRESS:5000 --disaggregation-mode 'decode'"
        ],
        "resources": gpus,
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "dsv32-prefill"},
        "spec": {
            "parallelism": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": H200,
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.33.0",
                            "env": [{"name": "TP", "value": "8"}],
                            "args": [
                                "/models/deepseek-v3.2",
                                "--tensor-parallel-size=$(TP)",
                                "--kv-transfer-config",
                                NIXL_P,
                            ],
                            "resources": gpus,
                        }
                    ],
                }
            },
        },
    }
    bash_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dsv32-decode"},
        "spec": _pod_spec(
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.33.0",
                "env": [
                    {"name": "POOL", "value": "128"},
                    {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
                "command": ["bash", "-c"],
                "args": [
                    "exec vllm serve /models/deepseek-v3.2 -tp 8 --kv-transfer-config "
                    '"{\\"kv_connector\\": \\"MultiConnector\\", \\"kv_role\\": \\"kv_consumer\\", '
                    '\\"kv_connector_extra_config\\": {\\"connectors\\": ['
                    '{\\"kv_connector\\": \\"NixlConnector\\", \\"kv_role\\": \\"kv_consumer\\"}, '
                    '{\\"kv_connector\\": \\"HiSparseConnector\\", \\"kv_role\\": \\"kv_both\\", '
                    '\\"kv_connector_extra_config\\": {\\"host_pool_gib\\": $POOL}}]}}"'
                ],
                "resources": gpus,
            }
        ),
    }
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "dsv32-prefill"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "p"}},
                    "template": {
                        "metadata": {"labels": {"app": "p"}},
                        "spec": _pod_spec(
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:v0.33.0",
                                "command": ["vllm", "serve", "/models/deepseek-v3.2"],
                                "args": ["-tp", "8", "--kv-transfer-config", NIXL_P],
                                "resources": gpus,
                            }
                        ),
                    },
                },
            }
        ],
    }
    return {
        "lws-vllm-dp.yaml": yaml.safe_dump(_lws("dp", 2, None, vllm_dp)),
        "lws-sglang-2-nodes.yaml": yaml.safe_dump(_lws("big", 2, sglang_node, sglang_node)),
        "job-entrypoint.yaml": yaml.safe_dump(job),
        "pod-bash.yaml": yaml.safe_dump(bash_pod),
        "list.yaml": yaml.safe_dump(listed),
    }


def _manifests(tmp: Path) -> list[Path]:
    paths = list(EXAMPLES)
    for name, text in _generated().items():
        (tmp / name).write_text(text)
        paths.append(tmp / name)
    return paths


def _validate(doc: dict[str, Any]) -> None:
    if doc["kind"] == "LeaderWorkerSet":
        assert doc["apiVersion"] == f"{LWS_SCHEMA['group']}/{LWS_SCHEMA['version']}"
        LWS_VALIDATOR.validate(doc)
    elif doc["kind"] == "List":
        for item in doc["items"]:
            _validate(item)
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _pods(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """(launch name, container, the env LeaderWorkerSet injects) of every pod, as PyYAML reads it."""
    kind, name = doc["kind"], doc.get("metadata", {}).get("name", "")
    if kind == "List":
        return [p for item in doc["items"] for p in _pods(item)]
    if kind == "Pod":
        specs = [("", doc["spec"], {})]
    elif kind == "LeaderWorkerSet":
        tpl = doc["spec"]["leaderWorkerTemplate"]
        size = tpl["size"]
        lead = tpl.get("leaderTemplate", tpl["workerTemplate"])
        specs = []
        for i in range(size):
            env = {
                "LWS_LEADER_ADDRESS": "valueFrom:lws-leader-address",
                "LWS_GROUP_SIZE": str(size),
                "LWS_WORKER_INDEX": str(i),
            }
            template = lead if i == 0 else tpl["workerTemplate"]
            specs.append(("/leader" if i == 0 else f"/worker-{i}", template["spec"], env))
    else:
        specs = [("", doc["spec"]["template"]["spec"], {})]
    return [
        (f"{kind}/{name}{part}/{c['name']}", c, injected)
        for part, spec, injected in specs
        for c in spec["containers"]
    ]


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _k8s_expand(word: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: $$ is $, a defined $(VAR) its value, an undefined one stays."""
    return _VAR.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), word)


def _container_env(c: dict[str, Any], injected: dict[str, str]) -> dict[str, str]:
    env = dict(injected)
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = _k8s_expand(e["value"], env)
        else:
            field = e["valueFrom"].get("fieldRef", {}).get("fieldPath", "?")
            env[e["name"]] = f"valueFrom:{field}"
    return env


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PATH directory whose vllm, sglang, python3 and python print their argv, NUL-separated."""
    d = tmp_path_factory.mktemp("bin")
    for name in ("vllm", "sglang", "python3", "python"):
        exe = d / name
        exe.write_text('#!/bin/sh\nprintf \'%s\\0\' "$(basename "$0")" "$@"\n')
        exe.chmod(0o755)
    return d


def _execs(c: dict[str, Any], injected: dict[str, str], bin_dir: Path) -> list[str]:
    """What the container execs: its command + args after $(VAR), through a real shell for `sh -c`."""
    env = _container_env(c, injected)
    command = c.get("command")
    if command is None:
        assert c["image"].startswith("vllm/vllm-openai"), c["image"]
        command = ["vllm", "serve"]  # the image's ENTRYPOINT
    words = [_k8s_expand(w, env) for w in [*command, *c.get("args", [])]]
    if Path(words[0]).name not in SHELLS:
        return words
    # sh [-e|-x...]c STRING: the shell runs STRING with the container's env.
    assert re.fullmatch(r"-[a-z]*c", words[1]), words
    shell = shutil.which(Path(words[0]).name)
    assert shell, words[0]
    run_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", **env}
    out = subprocess.run([shell, words[1], words[2]], env=run_env, capture_output=True, check=True).stdout
    return out.decode().split("\0")[:-1]


def test_examples_and_generated_manifests_are_what_the_api_server_accepts(tmp_path: Path) -> None:
    for path in _manifests(tmp_path):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs, path
        for doc in docs:
            _validate(doc)


def test_the_argv_of_every_launch_is_what_the_container_execs(tmp_path: Path, stand_ins: Path) -> None:
    checked = 0
    for path in _manifests(tmp_path):
        report = hisparse_rs.check_deployment(path, model_dirs=MODELS)
        ours = {launch["name"]: launch["argv"] for launch in report.launches}
        theirs = {
            name: _execs(c, injected, stand_ins)
            for doc in yaml.safe_load_all(path.read_text())
            if doc is not None
            for name, c, injected in _pods(doc)
        }
        # The same containers as PyYAML reads (every one runs an engine here).
        assert sorted(ours) == sorted(theirs), path
        for name, argv in theirs.items():
            assert [Path(argv[0]).name, *argv[1:]] == [Path(ours[name][0]).name, *ours[name][1:]], (
                path,
                name,
            )
            checked += 1
    assert checked >= 12, checked


def test_a_manifest_the_api_server_refuses_is_caught_here() -> None:
    """The validators are live: a misspelled field and a wrong type are refused."""
    bad = yaml.safe_load(_generated()["pod-bash.yaml"])
    bad["spec"]["containers"][0]["argz"] = bad["spec"]["containers"][0].pop("args")
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(bad)
    lws = yaml.safe_load(_generated()["lws-vllm-dp.yaml"])
    lws["spec"]["leaderWorkerTemplate"]["size"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        _validate(lws)


def test_the_lws_schema_names_its_source() -> None:
    readme = (ROOT / "tests" / "data" / "k8s" / "README.md").read_text()
    assert LWS_SCHEMA["source"].split(" @ ")[1] in readme
    assert os.path.getsize(ROOT / "tests" / "data" / "k8s" / "leaderworkerset-v1.schema.json") < 256 * 1024
