"""The README's Python examples run as written, and its capacity-planning
output is what the command prints (from the repository root)."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

import pytest

import hisparse_rs
from conftest import ROOT

README = (ROOT / "README.md").read_text()


def run_example(heading: str, index: int = 0) -> dict[str, Any]:
    """Execute the ``index``-th ```python block of the section ``heading``; return its globals."""
    section = re.search(rf"{re.escape(heading)}\n(.*?)(?:\n## |\Z)", README, re.S)
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S) if section else []
    assert len(blocks) > index, f"README lost its example under {heading!r}"
    cwd = os.getcwd()
    os.chdir(ROOT)
    scope: dict[str, Any] = {}
    try:
        exec(compile(blocks[index], "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    return scope


def run_command(command: str) -> str:
    """Run a README shell command from the repository root; its stdout as the README shows paths."""
    from test_cli import EXE

    proc = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HISPARSE_CHECK": EXE},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace(str(ROOT) + "/", ".../")


@pytest.mark.parametrize("section", ["## Python", "## Capacity planning"])
def test_readme_python_examples_run(section: str) -> None:
    run_example(section)


def test_readme_pool_example_runs() -> None:
    scope = run_example("## Host KV pool and residency resolver")
    assert "req-0" not in scope["pool"]
    assert scope["again"].hits == 2048
    assert scope["out"].misses == 2048


def test_readme_plan_output_is_current() -> None:
    match = re.search(
        r"## Capacity planning\n.*?```bash\n.*?\n(bash .*?) --plot .*?\n```\n\n```text\n(.*?)```",
        README,
        re.S,
    )
    assert match, "README lost its --plan example"
    command, shown = match.groups()
    assert run_command(command) == shown


def test_readme_kernels_example_runs_on_cpu() -> None:
    run_example("## Kernels")


def test_readme_runtime_example_runs_on_cpu() -> None:
    scope = run_example("## Decode runtime")
    res, rt = scope["res"], scope["rt"]
    assert (res.hits, res.misses, res.tail) == (2009, 0, 39)  # the figures the README shows
    assert rt.metrics.to_dict()["hisparse_host_to_device_bytes"] == 61 * 2009 * 656
    assert rt.request_ids == []


def test_readme_runtime_triton_example_runs() -> None:
    # On a CPU under TRITON_INTERPRET=1 (conftest sets it), as the README says.
    scope = run_example("## Decode runtime", index=1)
    res = scope["results"][0]
    assert (res.misses, res.hits, res.tail) == (0, 15, 1)  # the second step's figures the README shows
    assert scope["rt"].metrics.to_dict()["hisparse_cache_misses"] == 2 * 15


def test_readme_first_command_output_is_current() -> None:
    match = re.search(r"## The two commands\n.*?```bash\n(bash .*?)\n```.*?```text\n(.*?)```", README, re.S)
    assert match, "README lost the main command's output"
    command, shown = match.groups()
    actual = run_command(command)
    # The README shortens the output ("...") and annotates some lines ("   (why)").
    for line in shown.splitlines():
        line = line.split("   (")[0].rstrip()
        if line and line.strip() != "...":
            assert line in actual, f"README shows {line!r}, the command no longer prints it"


def test_readme_lists_every_deviation_from_vllm() -> None:
    section = README.split("### Where we differ from vLLM 0.33.0, and say so\n", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (.*) \|$", section, re.M)
    assert rows == hisparse_rs.vllm_deviations()


def test_the_checks_tables_list_every_code() -> None:
    section = README.split("### Checks", 1)[1].split("### Where we differ", 1)[0]
    named = set(re.findall(r"`([a-z0-9_]+)`", section))
    missing = [code for code in hisparse_rs.error_codes() if code not in named]
    assert not missing, f"codes the README's Checks section does not list: {missing}"


def test_the_gpu_table_is_hisparse_core_s() -> None:
    """Each row of the `--gpu` table: its names, the driver's names, arch, memory and shared memory."""
    rows = re.findall(
        r"^\| `([a-z0-9-]+)`(?: \(`[a-z0-9-]+`\))? \| (.*?) \| .*? \| \w+, (\w+) \| (\d+) GiB \| ([\d,]+) B",
        README,
        re.M,
    )
    assert len(rows) >= 7
    for name, reported, arch, memory, shared in rows:
        spec = hisparse_rs.gpu_spec(name)
        assert (spec["arch"], spec["memory_gib"], spec["max_shared_memory_per_block"]) == (
            arch,
            float(memory),
            int(shared.replace(",", "")),
        ), name
        for device in re.findall(r"`([^`]+)`", reported):
            assert hisparse_rs.gpu_spec(device)["name"] == name, device
