"""The GPU check's report: ``summary.md`` (read it first) and ``summary.json`` beside it.

``scripts/gpu_check.sh`` calls this after each part, so the report is current
when a later part runs out of time::

    python benches/gpu_summary.py --out DIR --part decode --status ok --rc 0 --seconds 93 --budget 140

It reads what the parts left in ``DIR`` (``kernel_tests.xml``,
``gpu_kernels.json``, ``gpu_runtime.json``), records the part's status in
``summary.json`` (``--env``: the versions, first) and rewrites ``summary.md``: the headline numbers (decode
against FlashMLA, the gather against a pinned copy, the resolver, the 61-layer
step), every part's status and time against its budget, then each benchmark's
own tables (the ``markdown`` each benchmark stores in its JSON). Standard
library only, so it takes no time on the device and still renders when the
package under test fails to import (``--env`` imports torch and the rest, to
report their versions).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

TARGET_DECODE = 0.70
TARGET_GATHER = 0.80


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def junit_counts(path: Path) -> dict[str, Any] | None:
    """Tests, failures, errors, skips and the failing test ids of a JUnit XML file."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failed: list[str] = []
    for suite in root.iter("testsuite"):
        for k in counts:
            counts[k] += int(suite.get(k, 0))
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname', '')}::{case.get('name', '')}")
    return {**counts, "failed": failed}


def _us(ms: float) -> str:
    return f"{ms * 1e3:.1f} us"


def headline(kernels: Any, runtime: Any) -> list[list[str]]:
    """Rows of (what, ours, baseline, ratio, target) from the benchmark results."""
    rows: list[list[str]] = []
    for d in (kernels or {}).get("decode", []):
        what = f"decode {d['rows']}, {d['h_q']} heads, batch {d['batch']}, s_q {d['s_q']}"
        pred = d.get("predicted") or {}
        graph = d.get("graph_ms")
        timed = (
            f"graph {_us(graph)}, eager {_us(d['ms'])}"
            if isinstance(graph, float)
            else f"eager {_us(d['ms'])}"
        )
        ours = f"{timed}; floor {pred.get('floor_s', 0) * 1e6:.1f} us ({pred.get('bound', '?')})"
        if "flashmla_ms" in d:
            heads = d.get("flashmla_heads", d["h_q"])
            theirs = d.get("flashmla_graph_ms")
            base = f"FlashMLA graph {_us(theirs)}, " if isinstance(theirs, float) else "FlashMLA "
            base += f"eager {_us(d['flashmla_ms'])}" + (f" (at {heads} heads)" if heads != d["h_q"] else "")
            ratio = f"{d['ratio_vs_flashmla']:.2f} eager"
            if "graph_ratio_vs_flashmla" in d:
                ratio = f"{d['graph_ratio_vs_flashmla']:.2f} graph, {ratio}"
        else:
            base, ratio = f"FlashMLA: {d.get('flashmla', 'n/a')}", "n/a"
        target = f">= {TARGET_DECODE}" if d["h_q"] == 128 and d["rows"] == "fp8_ds_mla" else "none"
        rows.append([what, ours, base, ratio, target])
    for g in (kernels or {}).get("gather", []):
        rows.append(
            [
                f"gather {g['rows']} rows of {g['row_bytes']} B from "
                + ("pinned host memory" if g.get("pinned") is True else "host memory (not pinned)"),
                f"{g['gbps']:.1f} GB/s (byte exact: {g['byte_exact']})",
                f"pinned copy {g['copy_gbps']:.1f} GB/s",
                f"{g['ratio_vs_copy']:.2f}",
                f">= {TARGET_GATHER}",
            ]
        )
    layers = (runtime or {}).get("shape", {}).get("layers", "?")
    r = (runtime or {}).get("resolver")
    if r:
        rows.append(
            [
                f"resolver, one decode step (Triton, {layers} launches)",
                f"{r['triton_ms_per_step']:.3f} ms (equal to Rust: {r['equal']})",
                f"Rust {r['rust_ms_per_step']:.3f} ms",
                f"{r['ratio_vs_rust']:.1f}x",
                "< 1 ms a step",
            ]
        )
    s = (runtime or {}).get("decode_step")
    if s:
        rows.append(
            [
                f"{layers}-layer decode step",
                f"CUDA graphs {s['graph_ms_per_step']:.2f} ms" if s["graph"] == "CUDA graphs"
                else f"replay {s['graph_ms_per_step']:.2f} ms",
                f"eager {s['eager_ms_per_step']:.2f} ms",
                f"{s['eager_ms_per_step'] / max(s['graph_ms_per_step'], 1e-9):.2f}x",
                "none",
            ]
        )  # fmt: skip
    return rows


def render(out: Path, summary: dict[str, Any]) -> str:
    env = summary.get("env") or {}
    kernels = _load(out / "gpu_kernels.json")
    runtime = _load(out / "gpu_runtime.json")
    tests = junit_counts(out / "kernel_tests.xml")
    mode = summary.get("mode", "?")
    lines = [f"# GPU check ({mode}): {env.get('gpu', 'no GPU')}", ""]
    if mode == "rehearse":
        lines += [
            "A CPU rehearsal under TRITON_INTERPRET=1: every code path of the device run at small shapes; "
            "the times mean nothing, and what needs CUDA says 'not run on CPU'.",
            "",
        ]
    lines += ["| environment | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in env.items()]
    lines += ["", "| result | ours | baseline (same run) | ratio | target |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in headline(kernels, runtime)]
    if tests is not None:
        lines.append(
            f"| kernel tests on the {'CPU (interpreter)' if mode == 'rehearse' else 'GPU'} | "
            f"{tests['tests'] - tests['failures'] - tests['errors'] - tests['skipped']} passed | "
            f"{tests['failures']} failed, {tests['errors']} errors, {tests['skipped']} skipped | | all pass |"
        )
    lines += ["", "| part | status | seconds | budget | note |", "|---|---|---|---|---|"]
    for p in summary.get("parts", []):
        cells = [p["part"], f"{p['status']} (rc {p['rc']})", p["seconds"], p["budget"], p.get("note", "")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if tests and tests["failed"]:
        lines += ["", "Failed tests:", ""] + [f"- `{t}`" for t in tests["failed"][:40]]
    for name, data in (("gpu_kernels", kernels), ("gpu_runtime", runtime)):
        if not data:
            continue
        body = data.get("markdown")
        lines += ["", "## " + body.lstrip("# ") if body else f"({name}.json: see the file)"]
    return "\n".join(lines) + "\n"


def _version(module: str) -> str:
    try:
        return str(importlib.import_module(module).__version__)
    except Exception as err:  # an import failure is a finding of the check
        return f"does not import: {type(err).__name__}: {err}"


def environment() -> dict[str, str]:
    """Python, glibc, torch, triton, numpy, CUDA, driver and GPU as this process sees them."""
    import platform
    import shutil
    import subprocess

    env = {
        "python": f"{platform.python_version()} ({sys.executable})",
        "glibc": " ".join(platform.libc_ver()),
        "torch": _version("torch"),
        "triton": _version("triton"),
        "numpy": _version("numpy"),
        "hisparse_rs": _version("hisparse_rs"),
    }
    try:
        import torch

        env["torch CUDA"] = str(torch.version.cuda)
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            env["gpu"] = torch.cuda.get_device_name(0)
            cap = torch.cuda.get_device_capability(0)
            env["capability, SMs, L2"] = (
                f"sm_{cap[0]}{cap[1]}, {props.multi_processor_count} SMs, "
                f"{getattr(props, 'L2_cache_size', 0) >> 20} MiB L2, {props.total_memory >> 30} GiB"
            )
    except Exception as err:
        env["gpu"] = f"torch fails: {type(err).__name__}: {err}"
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run(
            [smi, "--query-gpu=driver_version,name,clocks.sm,clocks.mem", "--format=csv,noheader"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        env["driver (nvidia-smi)"] = (q.stdout.strip() or q.stderr.strip())[:200]
    else:
        env["driver (nvidia-smi)"] = "no nvidia-smi on PATH"
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mode", help="full, quick or rehearse (recorded once)")
    ap.add_argument("--part")
    ap.add_argument("--status", default="ok")
    ap.add_argument("--rc", type=int, default=0)
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--budget", type=int, default=0)
    ap.add_argument("--note", default="")
    ap.add_argument("--env", action="store_true", help="record (and print) the versions, driver and GPU")
    args = ap.parse_args(argv)
    path = args.out / "summary.json"
    summary: dict[str, Any] = _load(path) or {"parts": []}
    if args.env:
        summary["env"] = environment()
        for k, v in summary["env"].items():
            print(f"gpu_check: {k}: {v}")
    if args.mode:
        summary["mode"] = args.mode
    if args.part:
        summary["parts"] = [p for p in summary["parts"] if p["part"] != args.part]
        summary["parts"].append(
            {
                "part": args.part,
                "status": args.status,
                "rc": args.rc,
                "seconds": args.seconds,
                "budget": args.budget,
                "note": args.note,
            }
        )
    summary["headline"] = headline(_load(args.out / "gpu_kernels.json"), _load(args.out / "gpu_runtime.json"))
    summary["kernel_tests"] = junit_counts(args.out / "kernel_tests.xml")
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1) + "\n")
    (args.out / "summary.md").write_text(render(args.out, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
