"""benches/gpu_runtime.py at toy sizes (--smoke), so the GPU script cannot rot
while no GPU runs it: every part runs (the resolver against Rust, the eager
step, the captured-layer replay, the per-part timers) and the report renders.
Run as the script runs (a subprocess, with this process's TRITON_INTERPRET)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from conftest import ROOT
from hisparse_rs import kernels as K

BENCH = ROOT / "benches" / "gpu_runtime.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, env=dict(os.environ), timeout=600
    )


def test_smoke_run_exercises_every_part(tmp_path: Path) -> None:
    proc = run("--smoke", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "gpu_runtime.json").read_text())
    r, d = results["resolver"], results["decode_step"]
    assert r["equal"] is True  # the Triton resolver's slots equal the Rust resolver's, every layer and step
    assert r["state_bytes_per_slot"] == 6 and r["tiling"]["DBS"] == 32
    assert 0 < r["hit_rate"] < 1 and 0 < d["hit_rate"] < 1
    assert set(d["eager_gpu_ms_by_part"]) == {"resolve", "gather", "kv write", "decode"}
    md = (tmp_path / "gpu_runtime.md").read_text()
    assert "| Triton (device, 2 launches) |" in md and "| eager (forward_layer x 2) |" in md
    assert md in proc.stdout


def test_full_run_needs_cuda(tmp_path: Path) -> None:
    if torch.cuda.is_available() and not K.INTERPRET:  # scripts/gpu_check.sh runs it for real
        return
    proc = run("--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr
    assert not (tmp_path / "out").exists()
