"""The README's Python example runs as written (from the repository root)."""

from __future__ import annotations

import os
import re
from typing import Any

from conftest import ROOT


def run_example(heading: str) -> dict[str, Any]:
    """Execute the first ```python block under ``heading``; return its globals."""
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"{re.escape(heading)}\n\n(?:(?!```|\n## ).)*?```python\n(.*?)```", text, re.S)
    assert match, f"README lost its example under {heading!r}"
    cwd = os.getcwd()
    os.chdir(ROOT)
    scope: dict[str, Any] = {}
    try:
        exec(compile(match.group(1), "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    return scope


def test_readme_python_example_runs() -> None:
    run_example("## Python")


def test_readme_pool_example_runs() -> None:
    scope = run_example("## Host KV pool and residency resolver")
    assert "req-0" not in scope["pool"]
    assert scope["again"].hits == 2048
    assert scope["out"].misses == 2048
