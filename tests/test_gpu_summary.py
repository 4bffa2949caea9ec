"""benches/gpu_summary.py, the GPU check's report, from fake part results (no GPU):
the headline rows, part statuses, JUnit counts, a missing part, and the SASS
opcode parser the instruction mix uses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from hisparse_rs.kernels import aot

SUMMARY = ROOT / "benches" / "gpu_summary.py"

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0"
failures="1" skipped="0" tests="3"><testcase classname="tests.test_kernels_fp8" name="test_a"/>
<testcase classname="tests.test_kernels_fp8" name="test_b"><failure message="boom"/></testcase>
<testcase classname="tests.test_kernels_gather" name="test_c"/></testsuite></testsuites>"""


def summarize(out: Path, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(SUMMARY), "--out", str(out), *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_report_from_parts(tmp_path: Path) -> None:
    summarize(tmp_path, "--mode", "quick")
    (tmp_path / "kernel_tests.xml").write_text(JUNIT)
    summarize(tmp_path, "--part", "kernel tests", "--status", "failed", "--rc", "1", "--seconds", "40")
    decode = {
        "rows": "fp8_ds_mla", "batch": 64, "s_q": 1, "h_q": 16, "ms": 0.05, "graph_ms": 0.03,
        "predicted": {"floor_s": 18.4e-6, "bound": "memory"}, "flashmla_ms": 0.06,
        "flashmla_graph_ms": 0.045, "flashmla_heads": 64, "ratio_vs_flashmla": 1.2,
        "graph_ratio_vs_flashmla": 1.5,
    }  # fmt: skip
    no_fm = {"rows": "fp8_ds_mla", "batch": 64, "s_q": 1, "h_q": 128, "ms": 0.2, "graph_ms": "x",
             "flashmla": "flash_mla does not import: OSError: libcuda"}  # fmt: skip
    kernels = {"decode": [decode, no_fm], "gather": [], "markdown": "# GPU kernel benchmark: X\n\n| t |\n"}
    (tmp_path / "gpu_kernels.json").write_text(json.dumps(kernels))
    summarize(tmp_path, "--part", "decode", "--status", "timeout", "--rc", "124", "--budget", "70")
    md = (tmp_path / "summary.md").read_text()
    assert md.startswith("# GPU check (quick): no GPU")
    assert (
        "| decode fp8_ds_mla, 16 heads, batch 64, s_q 1 | graph 30.0 us, eager 50.0 us; "
        "floor 18.4 us (memory) | FlashMLA graph 45.0 us, eager 60.0 us (at 64 heads) "
        "| 1.50 graph, 1.20 eager | none |" in md
    )
    assert "| FlashMLA: flash_mla does not import: OSError: libcuda | n/a | >= 0.7 |" in md
    assert "| kernel tests on the GPU | 2 passed | 1 failed, 0 errors, 0 skipped | | all pass |" in md
    assert "| kernel tests | failed (rc 1) | 40 |" in md and "| decode | timeout (rc 124) | 0 | 70 |" in md
    assert "- `tests.test_kernels_fp8::test_b`" in md
    assert "## GPU kernel benchmark: X" in md
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [p["part"] for p in summary["parts"]] == ["kernel tests", "decode"]
    assert summary["kernel_tests"]["failures"] == 1 and summary["mode"] == "quick"
    # A part run again replaces its row.
    summarize(tmp_path, "--part", "decode", "--status", "ok")
    assert [p["status"] for p in json.loads((tmp_path / "summary.json").read_text())["parts"]] == [
        "failed",
        "ok",
    ]


def test_sass_opcodes_are_parsed_with_predicates() -> None:
    text = """
        /*0050*/                   HGMMA.64x16x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*0060*/              @!P0 LDG.E.128 R4, desc[UR6][R2.64] ;
        /*0070*/               @P1 HMMA.16816.F32.BF16 R8, R12, R16, R8 ;
        /*0080*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
    """
    assert [m.group(1) for m in aot._SASS_OPCODE.finditer(text)] == ["HGMMA", "LDG", "HMMA", "BAR"]
