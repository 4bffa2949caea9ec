"""The README's Python example runs as written (from the repository root)."""

from __future__ import annotations

import os
import re

from conftest import ROOT


def test_readme_python_example_runs() -> None:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"## Python\n\n```python\n(.*?)```", text, re.S)
    assert match, "README lost its Python example"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(match.group(1), "README.md", "exec"), {})
    finally:
        os.chdir(cwd)


def test_readme_kernels_example_runs_on_cpu() -> None:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"## Kernels\n.*?```python\n(.*?)```", text, re.S)
    assert match, "README lost its Kernels example"
    exec(compile(match.group(1), "README.md#kernels", "exec"), {})
