"""A whole deployment checked at once: ``hisparse-check deploy`` from Python.

:func:`check_deployment` reads Kubernetes manifests (multi-document YAML,
``kind: List``; Pod, Deployment, StatefulSet, Job, LeaderWorkerSet), checks
each ``vllm serve`` / ``sglang serve`` launch in them as :func:`hisparse_rs.check`
and :func:`hisparse_rs.check_sglang_argv` do, on its pod's GPU and memory limit,
then the rules between launches (P/D pairs, multi-node instances, pod GPUs):
docs/deploy.md lists them with the engine file:line each follows.
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
    def codes(self) -> list[str]:
        """The codes of ``errors``, in order."""
        return [e["code"] for e in self.data["errors"]]

    def to_json(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"DeploymentReport(valid={self.valid}, launches={len(self.launches)}, errors={self.codes})"


def check_deployment(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    model_dirs: Mapping[str, str | os.PathLike[str]] | None = None,
) -> DeploymentReport:
    """Check the deployment in the manifests at ``paths``.

    ``model_dirs`` maps a container's model path to a local copy
    (``{"/models": "tests/data/models"}``: ``--model-dir /models=tests/data/models``).
    Never raises on a bad deployment: the report says what is wrong. Raises
    ValueError where ``hisparse-check deploy`` exits 2: a manifest that cannot
    be read, passes a bound (bytes, documents, aliases, string length,
    nesting, launches), or holds no engine launch; TypeError for a path that
    is not text.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [os.fspath(p) for p in paths]
    dirs = [(str(c), os.fspath(local)) for c, local in (model_dirs or {}).items()]
    return DeploymentReport(_core.check_deployment_json(files, dirs))
