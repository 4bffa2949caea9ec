"""tests/vectors/serve_config_yaml.json holds what vLLM 0.33.0 makes of each ``--config`` file.

hisparse-check reads serve files as vLLM does (``yaml.safe_load``: PyYAML,
YAML 1.1), and ``rust/hisparse-check`` checks its argv against these
vectors; here the vectors are checked against the real thing: vLLM's own
``FlexibleArgumentParser.load_config_file`` with the PyYAML vLLM installs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import vllm_pipeline

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "serve_config_yaml.json"
CASES = json.loads(VECTORS.read_text())["cases"]


def spelled(value: Any) -> Any:
    """A JSON value with NaN and infinities spelled as hisparse_rs spells them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: spelled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [spelled(v) for v in value]
    return value


def vllm_argv(text: str, tmp_path: Path) -> list[Any]:
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    out: list[Any] = []
    for item in vllm_pipeline.serve_parser().load_config_file(str(path)):  # type: ignore[attr-defined]
        try:
            out.append(spelled(json.loads(item)) if item.startswith("{") else item)
        except ValueError:
            out.append(item)  # a Python repr, not JSON
    return out


@pytest.mark.parametrize("case", CASES, ids=[repr(c["yaml"])[:60] for c in CASES])
def test_the_vectors_are_what_vllm_makes_of_each_file(case: dict[str, Any], tmp_path: Path) -> None:
    if "argv" in case:
        assert vllm_argv(case["yaml"], tmp_path) == case["argv"]
    elif "vllm_argv" in case:
        assert vllm_argv(case["yaml"], tmp_path) == case["vllm_argv"]
    else:
        with pytest.raises(Exception):  # noqa: B017 (vLLM raises many kinds here)
            vllm_argv(case["yaml"], tmp_path)
