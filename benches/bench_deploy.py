"""Deployment-check benchmark: ``hisparse-check deploy`` on a 20-launch manifest.

Run after ``cargo build --release -p hisparse-check``::

    python benches/bench_deploy.py [--runs 50] [--launches 20]

Prints the Markdown rows kept in benches/README.md. The manifest is
``--launches`` DeepSeek-V3.2 launches on 8x H200 pods, half vLLM prefill and
half vLLM decode (HiSparse) Deployments in one multi-document file: every launch
is checked and planned, and every prefill is paired with every decode (the
P/D rules run on n/2 x n/2 pairs). The baseline, measured in the same run, is
the same binary checking one of those decode launches (``hisparse-check
--plan`` on its command line, on the same GPU and RAM), so the ratio says what
a deployment costs in single-launch checks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "models"
PREFILL_KTC = {"kv_connector": "NixlConnector", "kv_role": "kv_producer"}
DECODE_KTC = {
    "kv_connector": "MultiConnector",
    "kv_role": "kv_consumer",
    "kv_connector_extra_config": {
        "connectors": [
            {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
            {
                "kv_connector": "HiSparseConnector",
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"host_pool_gib": 128},
            },
        ]
    },
}
COMMON = ["/models/deepseek-v3.2", "--tensor-parallel-size", "8", "--kv-cache-dtype", "fp8_ds_mla"]
HMA = "--no-disable-hybrid-kv-cache-manager"
PREFILL_ARGS = [*COMMON, HMA, "--kv-transfer-config", json.dumps(PREFILL_KTC)]
DECODE_ARGS = [*COMMON, "--kv-transfer-config", json.dumps(DECODE_KTC)]


def deployment(name: str, args: list[str]) -> str:
    """One Deployment of one vLLM pod on an 8x H200 node (JSON is YAML)."""
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
                    "containers": [
                        {
                            "name": "vllm",
                            "command": ["vllm", "serve"],
                            "args": args,
                            "resources": {"limits": {"nvidia.com/gpu": 8, "memory": "1800Gi"}},
                        }
                    ],
                }
            },
        },
    }
    return json.dumps(doc)


def manifest(path: Path, launches: int) -> Path:
    half = launches // 2
    docs = [deployment(f"prefill-{i}", PREFILL_ARGS) for i in range(launches - half)]
    docs += [deployment(f"decode-{i}", DECODE_ARGS) for i in range(half)]
    path.write_text("\n---\n".join(docs) + "\n")
    return path


def median_wall_ms(cmd: list[str], runs: int, ok: tuple[int, ...] = (0,)) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        times.append((time.perf_counter() - t0) * 1e3)
        if proc.returncode not in ok:
            raise SystemExit(f"{cmd[:3]} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="process spawns per command")
    parser.add_argument("--launches", type=int, default=20, help="launches in the manifest")
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "hisparse-check"))
    opts = parser.parse_args()
    binary = opts.binary
    if not Path(binary).exists():
        raise SystemExit("build it first: cargo build --release -p hisparse-check")
    with tempfile.TemporaryDirectory() as tmp:
        path = manifest(Path(tmp) / "deploy.yaml", opts.launches)
        deploy = [binary, "deploy", str(path), "--model-dir", f"/models={MODELS}"]
        one = [
            binary,
            str(MODELS / "deepseek-v3.2"),
            *DECODE_ARGS[1:],
            "--plan",
            "--gpu",
            "h200",
            "--host-memory-gib",
            "1800",
        ]
        one_ms = median_wall_ms(one, opts.runs)
        deploy_ms = median_wall_ms(deploy, opts.runs)
        plan_ms = median_wall_ms([*deploy, "--plan"], opts.runs)
        size = path.stat().st_size
    print(f"{os.cpu_count()} CPUs; manifest of {opts.launches} launches, {size / 1024:.0f} KiB\n")
    rows = [
        (
            f"`hisparse-check deploy` (Rust binary), {opts.launches}-launch manifest, median wall",
            f"{deploy_ms:.1f} ms",
            f"one launch's `--plan` {one_ms:.2f} ms",
            deploy_ms / one_ms,
        ),
        (
            "`hisparse-check deploy --plan` (Rust binary), same manifest",
            f"{plan_ms:.1f} ms",
            f"one launch's `--plan` {one_ms:.2f} ms",
            plan_ms / one_ms,
        ),
    ]
    print("| what | figure | baseline (same run) | ratio | target |")
    print("|---|---|---|---|---|")
    for what, figure, baseline, ratio in rows:
        print(f"| {what} | {figure} | {baseline} | {ratio:.1f}x | < {opts.launches * 2}x |")


if __name__ == "__main__":
    main()
