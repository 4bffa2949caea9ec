"""The README's Python examples run as written, and its capacity-planning
output is what the command prints (from the repository root)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import ROOT

README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("section", ["## Python", "## Capacity planning"])
def test_readme_python_examples_run(section: str) -> None:
    match = re.search(re.escape(section) + r"\n.*?```python\n(.*?)```", README, re.S)
    assert match, f"README lost its {section} example"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(match.group(1), "README.md", "exec"), {})
    finally:
        os.chdir(cwd)


def test_readme_plan_output_is_current() -> None:
    from test_cli import EXE

    match = re.search(
        r"## Capacity planning\n.*?```bash\n.*?\n(bash .*?) --plot .*?\n```\n\n```text\n(.*?)```",
        README,
        re.S,
    )
    assert match, "README lost its --plan example"
    command, shown = match.groups()
    proc = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HISPARSE_CHECK": EXE},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.replace(str(ROOT) + "/", ".../") == shown
