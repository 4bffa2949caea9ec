"""The benchmark arithmetic: FLOP and byte formulas (HISPARSE.md §7) and the GPU
benchmark's pure helpers, checked without a GPU."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import torch

from conftest import ROOT
from hisparse_rs import kernels as K
from hisparse_rs.kernels.perf import decode_bytes, decode_flops, gather_bytes


def load_gpu_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_kernels", ROOT / "benches" / "gpu_kernels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_per_query_token_figures_of_the_spec() -> None:
    # HISPARSE.md §7: per query token at 128 heads, 570 MFLOP and 1.62 MB.
    assert decode_flops(1, 1, 128, 2048) == 2 * 128 * 2048 * (576 + 512) == 570_425_344
    assert decode_bytes(1, 1, 128, 2048, K.FP8_ROW_BYTES) == 2048 * 656 + 128 * 1088 * 2 == 1_622_016
    assert round(decode_flops(1, 1, 128, 2048) / 1e6) == 570
    assert round(decode_bytes(1, 1, 128, 2048, 656) / 1e6, 2) == 1.62
    # Linear in batch and s_q; bf16 rows cost 1152 bytes each.
    assert decode_flops(64, 2, 128, 2048) == 128 * decode_flops(1, 1, 128, 2048)
    assert decode_bytes(1, 1, 128, 2048, K.BF16_ROW_BYTES) - decode_bytes(1, 1, 128, 2048, 656) == 2048 * 496
    # FlashMLA's anchor (H800, batch 128, s_q 2): 410 TFLOP/s is ~355 us per call.
    assert 350e-6 < decode_flops(128, 2, 128, 2048) / 410e12 < 360e-6
    assert gather_bytes(2048, 656) == 1_343_488


def test_rates_and_markdown() -> None:
    bench = load_gpu_bench()
    assert bench.per_second(1e9, 1000.0) == 1e9 and bench.per_second(5, 0.0) == 0.0
    fake = {
        "device": "Fake H200",
        "versions": "torch x, triton y",
        "decode": [
            {"rows": "fp8_ds_mla", "batch": 64, "s_q": 1, "h_q": 128, "topk": 2048, "ms": 0.2,
             "tflops": 182.5, "gbps": 519.0, "flashmla": "flash_mla 1.0", "flashmla_ms": 0.1,
             "ratio_vs_flashmla": 0.5},
            {"rows": "bf16", "batch": 64, "s_q": 1, "h_q": 128, "topk": 2048, "ms": 0.3, "tflops": 121.7,
             "gbps": 500.0},
        ],
        "gather": [{"rows": 1024, "row_bytes": 656, "ms": 0.05, "gbps": 13.4, "copy_gbps": 20.0,
                    "ratio_vs_copy": 0.67, "byte_exact": True}],
    }  # fmt: skip
    md = bench.render_markdown(fake)
    assert md.startswith("# GPU kernel benchmark: Fake H200")
    assert "| fp8_ds_mla | 64 | 1 | 128 | 2048 | 200.0 us | 182.5 | 519 | 100.0 us | 0.50 |" in md
    assert "| bf16 | 64 | 1 | 128 | 2048 | 300.0 us | 121.7 | 500 | n/a | n/a |" in md
    assert "| 1024 | 656 | 50.0 us | 13.4 | 20.0 | 0.67 | True |" in md


def test_gpu_bench_without_a_gpu_measures_nothing(tmp_path: Path) -> None:
    bench = load_gpu_bench()
    reason = bench.no_cuda_reason()
    if reason is None:  # a GPU machine: scripts/gpu_check.sh runs the benchmark itself
        assert torch.cuda.is_available() and not K.INTERPRET
        return
    assert bench.main(["--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_decode_launch_and_splits_tables() -> None:
    bench = load_gpu_bench()
    launch = {"capability": 90, "block_h": 16, "block_n": 64, "num_warps": 8, "num_stages": 2,
              "head_tiles": 8, "splits": 1}  # fmt: skip
    fake = {
        "device": "Fake H200",
        "versions": "torch x, triton y",
        "decode": [{"rows": "fp8_ds_mla", "batch": 64, "s_q": 1, "h_q": 128, "topk": 2048, "ms": 0.2,
                    "tflops": 182.5, "gbps": 519.0, "launch": launch}],
        "decode_splits": [{"batch": 64, "splits": 1, "default": True, "ms": 0.2},
                          {"batch": 64, "splits": 2, "default": False, "ms": 0.25}],
        "gather": [],
    }  # fmt: skip
    md = bench.render_markdown(fake)
    assert "| fp8_ds_mla | 128 | 1 | 90 | 16 | 64 | 8, 2 | 8 | 1 |" in md
    assert "| | 64 | 1 (default) | 200.0 us |" in md and "| | 64 | 2 | 250.0 us |" in md
