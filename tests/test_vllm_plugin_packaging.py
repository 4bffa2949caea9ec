"""The vLLM plugin ships as an entry point only: ``import hisparse_rs`` never loads it,
and its module imports without vLLM (vLLM is the plugin tests' dependency, tests/vllm/)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points


def test_the_wheel_registers_the_vllm_general_plugin() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="vllm.general_plugins")}
    assert plugins.get("hisparse_rs") == "hisparse_rs.vllm_plugin:register"


def test_import_hisparse_rs_does_not_load_the_plugin_or_vllm() -> None:
    code = (
        "import sys, hisparse_rs; hisparse_rs.check(); "
        "assert 'hisparse_rs.vllm_plugin' not in sys.modules and 'vllm' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_plugin_module_imports_without_vllm() -> None:
    code = (
        "import sys, hisparse_rs.vllm_plugin as p; "
        "assert 'vllm' not in sys.modules; print(p.TESTED_VLLM_VERSIONS)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert "0.33.0" in out.stdout
