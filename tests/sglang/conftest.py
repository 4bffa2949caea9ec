"""The SGLang tests' session: SGLang 0.5.23 imported once, on a CPU machine.

These tests run only in the SGLang venv (``.venv-sglang``, made by
scripts/test.sh's venv_sglang step: tests/sglang/requirements.txt, then
``sglang==0.5.23 --no-deps``, then this project with the test extra); the
main test run leaves this directory out. Before any test module runs,
``sglang_oracle.import_sglang`` replaces ``torch.cuda.get_device_capability``
by one answering the SM a verdict asks for (the only stub SGLang's argument
code needs without a GPU; README.md here) and imports every SGLang module
the oracle calls: 6 s on an idle core, 12-23 s on busy ones, once per session.
"""

from __future__ import annotations

import os
import sys
import time

import sglang_oracle

# SGLang reads a few SGLANG_* variables while it resolves (sglang/srt/environ.py);
# a developer's shell must not change the verdicts.
for _name in [name for name in os.environ if name.startswith("SGLANG_")]:
    del os.environ[_name]

_START = time.monotonic()
sglang_oracle.import_sglang()
IMPORT_S = time.monotonic() - _START


def pytest_configure(config: object) -> None:
    # SGLang's dependencies (transformers, torchvision) import deprecated names of each other.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning")  # type: ignore[attr-defined]
    config.addinivalue_line("filterwarnings", "ignore::UserWarning")  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: object) -> None:
    """SGLang's import time, and the differential test's figures: examples, agreements, deviations by code."""
    write = terminalreporter.write_line  # type: ignore[attr-defined]
    write(f"SGLang 0.5.23 imported once in {IMPORT_S:.1f} s")
    capacity = getattr(sys.modules.get("test_capacity_differential"), "CAPACITY_FIGURES", None)
    if capacity:
        write(
            f"hisparse_rs's SGLang plan vs SGLang 0.5.23's pool sizing: {capacity['launches']} launches "
            f"({capacity['configurations drawn']} configurations x KV rooms), {capacity['agree']} agree"
        )
        for key, n in sorted(capacity.items()):
            if key.startswith(("deviation ", "not sized")):
                write(f"  {key}: {n}")
    deploy = getattr(sys.modules.get("test_deploy_differential"), "FIGURES", None)
    if deploy:
        refusals = ", ".join(
            f"{k.removeprefix('SGLang refuses: ')} {n}"
            for k, n in sorted(deploy.items())
            if k.startswith("SGLang refuses: ")
        )
        write(
            f"hisparse_rs.check_deployment vs SGLang 0.5.23's P/D bootstrap: {deploy['pairs']} pairs, "
            f"{deploy['agree']} agree (SGLang refuses by reason: {refusals})"
        )
    differential = sys.modules.get("test_differential")
    oracle = getattr(differential, "ORACLE_FIGURES", None)
    if oracle:
        stages = ", ".join(
            f"{key.removeprefix('stage ')}: {n}"
            for key, n in sorted(oracle.items())
            if key.startswith("stage ")
        )
        write(f"SGLang 0.5.23's verdicts on {oracle['examples']} drawn launches, by first refusal ({stages})")
    figures = getattr(differential, "FIGURES", None)
    if not figures:
        return
    write(
        f"hisparse_rs vs SGLang 0.5.23: {figures['examples']} launches, "
        f"{figures['agreements']} verdicts agree"
    )
    for key in (
        "valid in both, HiSparse on (resolved settings compared)",
        "valid in both, HiSparse off",
        "refused by both, at the same stage",
    ):
        write(f"  {key}: {figures[key]}")
    for key, n in sorted(figures.items(), key=lambda kv: _stage_order(kv[0])):
        if key.startswith("sglang refuses at "):
            write(f"    {key}: {n}")
    write(f"  differences named by a deviation: {figures['differences named by a deviation']}")
    for key, n in sorted(figures.items()):
        if key.startswith("deviation "):
            write(f"    {key.removeprefix('deviation ')}: {n}")
    for key, n in sorted(figures.items()):
        if key.startswith("ours refuses at "):
            write(f"  not compared: {key}: {n}")
    refused = (
        figures["examples"]
        - figures["valid in both, HiSparse on (resolved settings compared)"]
        - figures["valid in both, HiSparse off"]
    )
    write(
        "fixed launches (a refused launch, Report.fixed_flags in place of its flags, re-checked by both): "
        f"{figures['fixed launches']}, of which valid in both: {figures['fixed launches valid in both']}"
    )
    for key, n in sorted(figures.items()):
        if key.startswith("fixed launches SGLang refuses later"):
            write(f"  {key}: {n}")
    for key in ("refused at argparse: no fixed launch", "refused, an error without a fix: no fixed launch"):
        write(f"  {key}: {figures[key]}")
    write(f"  (of {refused} launches not valid in both)")


def _stage_order(key: str) -> int:
    stage = key.removeprefix("sglang refuses at ")
    return sglang_oracle.STAGES.index(stage) if stage in sglang_oracle.STAGES else -1
