"""Config-resolution and planning benchmark: ``hisparse-check`` (and ``--plan``) end to end,
``resolve()`` and ``plan()`` from Python.

Run after ``bash scripts/test.sh`` (or ``pip install .``) with the venv active::

    cargo build --release -p hisparse-check
    python benches/bench_config.py [--runs 300] [--calls 5000]

Prints the Markdown table kept in benches/README.md. Each figure comes with a
baseline measured in the same run, so the ratio carries across machines:
- the CLI against spawning ``/bin/true`` (the process-start floor);
- ``resolve()`` against ``json.loads`` of the same model's config.json, in wall time
  and in this thread's CPU time (which a loaded machine inflates less);
- ``plan()`` against ``resolve()`` of the same configuration (the check it starts with);
- the CLI's peak memory on a config.json near the 16 MiB bound against the file's size.
Peak memory is GNU time's maximum resident set size of the process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hisparse_rs

ROOT = Path(__file__).resolve().parent.parent
DSV32 = ROOT / "tests" / "data" / "models" / "deepseek-v3.2"
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}


def pd_config(host_pool_gib: float) -> dict[str, Any]:
    """The bundled decode P/D kv_transfer_config (examples/dsv32-decode-pd.sh)."""
    hisparse = {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": host_pool_gib},
    }
    return {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": {"connectors": [NIXL, hisparse]},
    }


def example_argv(exe: str) -> list[str]:
    return [
        exe, str(DSV32), "--tensor-parallel-size", "8", "--kv-cache-dtype", "fp8_ds_mla",
        "--kv-transfer-config", json.dumps(pd_config(128)),
    ]  # fmt: skip


def median_wall_ms(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def peak_rss_mib(cmd: list[str]) -> float:
    """Maximum resident set size of one run, from GNU time (in KiB)."""
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    return int(proc.stderr.strip().splitlines()[-1]) / 1024


def big_config(path: Path) -> float:
    """DeepSeek-V3.2's config.json padded to just under the 16 MiB bound with a
    key the resolver never reads (a full JSON tree of it would take ~35x); MiB."""
    cfg = json.loads((DSV32 / "config.json").read_text())
    cfg["id2label"] = {str(i): f"LABEL_{i}" for i in range(600_000)}
    path.write_text(json.dumps(cfg))
    return path.stat().st_size / 2**20


def long_engine_log(path: Path, lines: int) -> Path:
    """A vLLM start-up log of ``lines`` lines: the public excerpt of
    tests/data/engine_logs (capacity lines of 3 ranks) amid other loggers' lines."""
    excerpt = (ROOT / "tests" / "data" / "engine_logs" / "vllm-issue-15928-excerpt.log").read_text()
    noise = "(APIServer pid=7) INFO 12-03 09:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0\n"
    with path.open("w") as f:
        f.write(excerpt)
        f.write(noise * (lines - excerpt.count("\n")))
    return path


def per_call_us(fn: Callable[[], object], n: int) -> float:
    """Median over 5 batches of the mean time per call, in microseconds."""
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(batches)


def per_call_cpu_us(fn: Callable[[], object], n: int) -> float:
    """This thread's CPU time per call, least of 5 batches, in microseconds:
    on a loaded machine it leaves out the waits for a core that wall time counts."""
    batches = []
    for _ in range(5):
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        batches.append((time.thread_time() - t0) / n * 1e6)
    return min(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="process spawns per command")
    parser.add_argument("--calls", type=int, default=5000, help="resolve() calls per batch")
    opts = parser.parse_args()

    binary = ROOT / "target" / "release" / "hisparse-check"
    if not binary.exists():
        raise SystemExit("build it first: cargo build --release -p hisparse-check")
    script = shutil.which("hisparse-check") or str(Path(sys.executable).parent / "hisparse-check")

    true_ms = median_wall_ms(["/bin/true"], opts.runs)
    bin_ms = median_wall_ms(example_argv(str(binary)), opts.runs)
    script_ms = median_wall_ms(example_argv(script), max(opts.runs // 10, 10))
    plan_flags = ["--plan", "--gpu-memory-gib", "140", "--host-memory-gib", "2048"]
    plan_ms = median_wall_ms([*example_argv(str(binary)), *plan_flags], opts.runs)
    log_dir = Path(tempfile.mkdtemp())
    log = long_engine_log(log_dir / "vllm.log", 10_000)
    log_ms = median_wall_ms([*example_argv(str(binary)), *plan_flags, "--engine-log", str(log)], opts.runs)
    shutil.rmtree(log_dir)
    true_mib = peak_rss_mib(["/bin/true"])
    bin_mib = max(peak_rss_mib(example_argv(str(binary))) for _ in range(5))
    big_dir = Path(tempfile.mkdtemp())
    big_mib = big_config(big_dir / "config.json")
    big_rss = peak_rss_mib([str(binary), str(big_dir), "--kv-transfer-config", json.dumps(pd_config(128))])
    shutil.rmtree(big_dir)

    config_text = (DSV32 / "config.json").read_text()
    json_us = per_call_us(lambda: json.loads(config_text), opts.calls)
    same = pd_config(128)
    warm_us = per_call_us(
        lambda: hisparse_rs.resolve(DSV32, kv_transfer_config=same, kv_cache_dtype="fp8_ds_mla"), opts.calls
    )
    pools = iter(range(10**9))  # a new host_pool_gib per call: nothing can be reused
    new_us = per_call_us(
        lambda: hisparse_rs.resolve(
            DSV32, kv_transfer_config=pd_config(64 + next(pools)), kv_cache_dtype="fp8_ds_mla"
        ),
        opts.calls,
    )

    json_cpu = per_call_cpu_us(lambda: json.loads(config_text), opts.calls)
    warm_cpu = per_call_cpu_us(
        lambda: hisparse_rs.resolve(DSV32, kv_transfer_config=same, kv_cache_dtype="fp8_ds_mla"), opts.calls
    )
    new_cpu = per_call_cpu_us(
        lambda: hisparse_rs.resolve(
            DSV32, kv_transfer_config=pd_config(64 + next(pools)), kv_cache_dtype="fp8_ds_mla"
        ),
        opts.calls,
    )

    plan_us = per_call_us(
        lambda: hisparse_rs.plan(
            DSV32,
            kv_transfer_config=same,
            kv_cache_dtype="fp8_ds_mla",
            tensor_parallel_size=8,
            gpu_memory_gib=140,
            host_memory_gib=2048,
        ),
        opts.calls,
    )

    py = sys.version.split()[0]
    print(f"{os.cpu_count()} CPUs, Python {py}, hisparse_rs {hisparse_rs.__version__}\n")
    rows = [
        ("`hisparse-check` (Rust binary), bundled DeepSeek-V3.2 P/D example, median wall",
         f"{bin_ms:.2f} ms", f"`/bin/true` {true_ms:.2f} ms", bin_ms / true_ms, "< 5 ms"),
        ("`hisparse-check` (Rust binary), peak RSS", f"{bin_mib:.1f} MiB",
         f"`/bin/true` {true_mib:.1f} MiB", bin_mib / true_mib, "< 10 MB"),
        (f"`hisparse-check` (Rust binary), peak RSS on a {big_mib:.0f} MiB config.json of unread keys",
         f"{big_rss:.1f} MiB", f"the file {big_mib:.1f} MiB", big_rss / big_mib, "< 3x"),
        ("`hisparse-check` (pip console script: Python start-up + the same Rust)",
         f"{script_ms:.1f} ms", f"`/bin/true` {true_ms:.2f} ms", script_ms / true_ms, "none"),
        ("`resolve()` from Python, a new configuration each call", f"{new_us:.1f} us",
         f"`json.loads(config.json)` {json_us:.1f} us", new_us / json_us, "< 50 us"),
        ("`resolve()` from Python, the same configuration again", f"{warm_us:.1f} us",
         f"`json.loads(config.json)` {json_us:.1f} us", warm_us / json_us, "< 50 us"),
        ("`resolve()` from Python, a new configuration each call (thread CPU time)", f"{new_cpu:.1f} us",
         f"`json.loads(config.json)` {json_cpu:.1f} us", new_cpu / json_cpu, "< 3x"),
        ("`resolve()` from Python, the same configuration again (thread CPU time)", f"{warm_cpu:.1f} us",
         f"`json.loads(config.json)` {json_cpu:.1f} us", warm_cpu / json_cpu, "< 3x"),
        ("`hisparse-check --plan` (Rust binary), same example, 8 x 140 GiB GPUs, median wall",
         f"{plan_ms:.2f} ms", f"`/bin/true` {true_ms:.2f} ms", plan_ms / true_ms, "< 5 ms"),
        ("`hisparse-check --plan --engine-log` (Rust binary), same example, a 10,000-line vLLM log",
         f"{log_ms:.2f} ms", f"`--plan` {plan_ms:.2f} ms", log_ms / plan_ms, "< 3x"),
        ("`plan()` from Python, same example (sweep of 6 contexts)", f"{plan_us:.1f} us",
         f"`resolve()` {warm_us:.1f} us", plan_us / warm_us, "< 100 us"),
    ]  # fmt: skip
    print("| what | figure | baseline (same run) | ratio | target |")
    print("|---|---|---|---|---|")
    for what, figure, baseline, ratio, target in rows:
        print(f"| {what} | {figure} | {baseline} | {ratio:.1f}x | {target} |")


if __name__ == "__main__":
    main()
