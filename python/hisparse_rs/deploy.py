"""A whole deployment checked at once: ``hisparse-check deploy`` from Python.

:func:`check_deployment` reads Kubernetes manifests (multi-document YAML,
``kind: List``; Pod, Deployment, StatefulSet, Job, LeaderWorkerSet), the
deployment file of our own (``kind: HisparseDeployment``) and launches given
as command lines, checks each ``vllm serve`` / ``sglang serve`` launch as
:func:`hisparse_rs.check` and :func:`hisparse_rs.check_sglang_argv` do, on
its pod's or node's GPU and memory, then the rules between launches (P/D
pairs, multi-node instances, pod and node GPUs, a node's pinned RAM across
its launches, declared roles), and plans the deployment: docs/deploy.md
lists the rules with the engine file:line each follows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from hisparse_rs import _core

__all__ = ["DeploymentReport", "check_deployment"]


class DeploymentReport:
    """The deployment's report (the JSON of ``hisparse-check deploy --json``).

    ``valid``: every launch valid and no rule between launches broken;
    ``launches``: each launch (``name``, ``engine``, ``role``, ``machine``,
    ``argv``, ``model_read``, and its own ``report``); ``errors``: the rules
    between launches (``code``, ``stage``, ``launch``, ``path``, ``other``,
    ``message``, ``engine_message``, ``source``, ``hint``, ``fix_flags``);
    ``not_read``: what the reader saw and did not read; ``launch_errors``:
    launches that could not be checked. ``data`` is the whole JSON object.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self.data: dict[str, Any] = json.loads(text)

    @property
    def valid(self) -> bool:
        return bool(self.data["valid"])

    @property
    def launches(self) -> list[dict[str, Any]]:
        return list(self.data["launches"])

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.data["errors"])

    @property
    def not_read(self) -> list[dict[str, Any]]:
        return list(self.data["not_read"])

    @property
    def launch_errors(self) -> list[dict[str, Any]]:
        return list(self.data["launch_errors"])

    @property
    def plan(self) -> dict[str, Any]:
        """The deployment's plan: ``instances`` (per decode instance: ``launch``,
        ``context_length`` in tokens, ``data_parallel_size``,
        ``requests_without_hisparse`` / ``requests_with_hisparse`` per DP
        replica, ``limit``, ``pinned_bytes``), ``nodes`` (per node: ``node``,
        ``launches`` as [name, pinned bytes], ``pinned_bytes``, ``ram_bytes``,
        ``usable_bytes`` = 95 % of it, ``gpus_used``, ``gpus``) and
        ``not_planned`` ([launch, why])."""
        return dict(self.data["plan"])

    @property
    def codes(self) -> list[str]:
        """The codes of ``errors``, in order."""
        return [e["code"] for e in self.data["errors"]]

    def to_json(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"DeploymentReport(valid={self.valid}, launches={len(self.launches)}, errors={self.codes})"


def _launch(i: int, launch: str | Mapping[str, str]) -> tuple[str, str | None, str | None]:
    if isinstance(launch, str):
        return (launch, None, None)
    if not isinstance(launch, Mapping):
        raise TypeError(
            f"launches[{i}]: a command line (str) or a mapping of command, role, node, "
            f"not {type(launch).__name__}"
        )
    unknown = sorted(set(launch) - {"command", "role", "node"})
    if unknown:
        raise TypeError(f"launches[{i}]: unknown key(s) {unknown} (allowed: command, role, node)")
    values = [launch.get(k) for k in ("command", "role", "node")]
    if not isinstance(values[0], str) or not all(v is None or isinstance(v, str) for v in values[1:]):
        raise TypeError(f"launches[{i}]: command is a str, role and node a str or None")
    return (values[0], values[1], values[2])


def check_deployment(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = (),
    model_dirs: Mapping[str, str | os.PathLike[str]] | None = None,
    *,
    launches: Sequence[str | Mapping[str, str]] = (),
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    host_memory_gib: float | None = None,
) -> DeploymentReport:
    """Check the deployment in the manifests or deployment files at ``paths``
    and in ``launches``.

    ``model_dirs`` maps a container's model path to a local copy
    (``{"/models": "tests/data/models"}``: ``--model-dir /models=tests/data/models``).
    ``launches`` are the CLI's ``--launch``: each a command line
    (``"vllm serve MODEL ..."``) or a mapping ``{"command": ..., "role":
    "decode", "node": "node-1"}``, checked exactly as a deployment file's
    launches; their nodes have ``gpu`` (a ``--gpu`` name), ``gpus_per_node``
    GPUs and ``host_memory_gib`` GiB of RAM. Never raises on a bad
    deployment: the report says what is wrong. Raises ValueError where
    ``hisparse-check deploy`` exits 2: a manifest that cannot be read, passes
    a bound (bytes, documents, aliases, string length, nesting, launches),
    holds no engine launch, a bad field of a deployment file or launch
    (each with its code and path), or an empty path in ``model_dirs``; TypeError for a path or launch of the
    wrong type. A launch that cannot be checked (its model config missing,
    a flag the engine refuses: the command exits 2) is not raised: it is in
    ``launch_errors`` and ``valid`` is false.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [os.fspath(p) for p in paths]
    dirs = [(str(c), os.fspath(local)) for c, local in (model_dirs or {}).items()]
    if isinstance(launches, (str, Mapping)):
        launches = [launches]
    given = [_launch(i, launch) for i, launch in enumerate(launches)]
    return DeploymentReport(
        _core.check_deployment_json(files, dirs, given, gpu, gpus_per_node, host_memory_gib)
    )
