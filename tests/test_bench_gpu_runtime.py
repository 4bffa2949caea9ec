"""benches/gpu_runtime.py at toy sizes (--smoke), so the GPU script cannot rot
while no GPU runs it: every part runs (the resolver against Rust, the eager
step, the captured-layer replay, the per-part timers) and the report renders."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import torch

from conftest import ROOT
from hisparse_rs import kernels as K


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_runtime", ROOT / "benches" / "gpu_runtime.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_smoke_run_exercises_every_part(tmp_path: Path) -> None:
    bench = load()
    assert bench.main(["--smoke", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "gpu_runtime.json").read_text())
    r, d = results["resolver"], results["decode_step"]
    assert r["equal"] is True  # the Triton resolver's slots equal the Rust resolver's, every layer and step
    assert r["state_bytes_per_slot"] == 6 and r["launch"]["DBS"] == 32
    assert 0 < r["hit_rate"] < 1 and 0 < d["hit_rate"] < 1
    assert set(d["eager_gpu_ms_by_part"]) == {"resolve", "gather", "kv write", "decode"}
    md = (tmp_path / "gpu_runtime.md").read_text()
    assert "| Triton (device, 2 launches) |" in md and "| eager (forward_layer x 2) |" in md


def test_full_run_needs_cuda(tmp_path: Path) -> None:
    bench = load()
    if torch.cuda.is_available() and not K.INTERPRET:  # scripts/gpu_check.sh runs it for real
        return
    assert bench.main(["--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()
