"""The vLLM tests' session: vLLM 0.33.0 imported once, on a CUDA platform without a GPU.

These tests run only in the vLLM venv (``.venv-vllm``, made by
scripts/test.sh: ``pip install '.[test,vllm]'``); the main test run leaves
this directory out. Before any test module imports vLLM, this file builds the
no-device driver stub with gcc and installs vLLM's real ``CudaPlatform`` with
its device queries answered (``vllm_pipeline.install_nodevice_cuda``; see
README.md here).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import vllm_pipeline

STUB_DIR = Path(tempfile.mkdtemp(prefix="hisparse-nodevice-cuda-"))
# Set before vLLM reads them (vllm.envs reads on access; flashinfer and Triton once).
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# A serving machine has FlashInfer's kernels (flashinfer-cubin or a CUDA
# toolkit); without them vLLM drops the FlashInfer sparse-MLA backends that
# fp8_e4m3 needs on SM90.
os.environ["VLLM_HAS_FLASHINFER_CUBIN"] = "1"
# Triton's driver looks for libcuda.so.1 here (triton/backends/nvidia/driver.py).
os.environ["TRITON_LIBCUDA_PATH"] = str(STUB_DIR)
os.environ.pop("HISPARSE_RS_PREFLIGHT", None)
STUB = vllm_pipeline.build_stub(STUB_DIR)
vllm_pipeline.install_nodevice_cuda(STUB)


def pytest_configure(config: object) -> None:
    # vLLM's dependencies (flashinfer, cutlass) import deprecated names of each other.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning")  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: object) -> None:
    """The differential test's figures: examples, agreements, named deviations by code."""
    import sys

    write = terminalreporter.write_line  # type: ignore[attr-defined]
    capacity = getattr(sys.modules.get("test_capacity_differential"), "FIGURES", None)
    if capacity:
        write(
            f"hisparse_rs.plan vs vLLM 0.33.0's capacity code: {capacity['launches']} launches "
            f"({capacity['configurations drawn']} configurations drawn, "
            f"{capacity['refused by the check (skipped)']} refused by the check), {capacity['agree']} agree"
        )
        for key, n in sorted(capacity.items()):
            if key.startswith("deviation "):
                write(f"  named deviation {key.removeprefix('deviation ')}: {n}")
    deploy = getattr(sys.modules.get("test_deploy_differential"), "FIGURES", None)
    if deploy:
        refusals = ", ".join(
            f"{k.removeprefix('vLLM refuses: ')} {n}"
            for k, n in sorted(deploy.items())
            if k.startswith("vLLM refuses: ")
        )
        write(
            f"hisparse_rs.check_deployment vs vLLM 0.33.0's NIXL hash and handshake: "
            f"{deploy['pairs']} P/D pairs, "
            f"{deploy['agree']} agree (vLLM refuses by reason: {refusals})"
        )
    differential = sys.modules.get("test_differential")
    figures = getattr(differential, "FIGURES", None)
    if not figures:
        return
    write(
        f"hisparse_rs vs vLLM 0.33.0: {figures['examples']} configurations, "
        f"{figures['agreements']} verdicts agree"
    )
    for key in (
        "starts with HiSparse (sizes compared)",
        "starts without HiSparse",
        "refused by both, at the same stage",
    ):
        write(f"  {key}: {figures[key]}")
    write(f"  configurations made by applying a report's fixes: {figures['fixed configurations']}")
    for key, n in sorted(figures.items()):
        if key.startswith("refused at "):
            write(f"    {key}: {n}")
    if figures["stage differs, deviation named"]:
        write(f"  stage differs, deviation named: {figures['stage differs, deviation named']}")
    for key, n in sorted(figures.items()):
        if key.startswith("deviation "):
            write(f"  named deviation {key.removeprefix('deviation ')}: {n}")
