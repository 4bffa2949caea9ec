"""The benchmark arithmetic: FLOP and byte formulas (HISPARSE.md §7) and the GPU
benchmark's pure helpers, checked without a GPU."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch

from conftest import ROOT
from hisparse_rs import kernels as K
from hisparse_rs.kernels.perf import (
    decode_bytes,
    decode_flops,
    decode_mma_flops,
    decode_prediction,
    flashmla_heads,
    gather_bytes,
)


def load_gpu_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_kernels", ROOT / "benches" / "gpu_kernels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_kernels"] = module  # its dataclasses resolve their annotations through it
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
    pred = {"floor_s": 70.7e-6, "bound": "tensor cores", "flashmla_s": 89.0e-6}
    fake = {
        "device": "Fake H200",
        "versions": "torch x, triton y",
        "decode": [
            {"rows": "fp8_ds_mla", "batch": 64, "s_q": 1, "h_q": 128, "topk": 2048, "ms": 0.2,
             "graph_ms": 0.15, "tflops": 182.5, "gbps": 519.0, "flashmla": "flash_mla 1.0",
             "flashmla_ms": 0.1, "flashmla_graph_ms": 0.09, "ratio_vs_flashmla": 0.5,
             "graph_ratio_vs_flashmla": 0.6, "predicted": pred, "of_floor": 0.47},
            {"rows": "bf16", "batch": 64, "s_q": 1, "h_q": 128, "topk": 2048, "ms": 0.3, "tflops": 121.7,
             "gbps": 500.0, "graph_ms": "not run on CPU"},
        ],
        "gather": [{"rows": 1024, "row_bytes": 656, "ms": 0.05, "gbps": 13.4, "copy_gbps": 20.0,
                    "ratio_vs_copy": 0.67, "index_select_to_gbps": 5.0, "ratio_vs_index_select_to": 0.25,
                    "byte_exact": True}],
    }  # fmt: skip
    md = bench.render_markdown(fake)
    assert md.startswith("# GPU kernel benchmark: Fake H200")
    assert (
        "| fp8_ds_mla | 64 | 1 | 128 | 2048 | 200.0 us | 150.0 us | 70.7 us (tensor cores) | 0.47 | 182.5 "
        "| 519 | 100.0 us | 90.0 us | 0.60; 0.50 | 89.0 us |" in md
    )
    assert "| bf16 | 64 | 1 | 128 | 2048 | 300.0 us | not run on CPU | n/a | n/a | 121.7 | 500 | n/a |" in md
    assert "| 1024 | 656 | 50.0 us | 13.4 | 20.0 | 0.67 | 5.0 | 0.25 | True |" in md


def test_predictions_of_the_h200_peaks() -> None:
    # 128 heads, batch 64: 36.5 GFLOP useful, 1.53x issued (K Q^T twice), tensor-core bound.
    p = decode_prediction(64, 1, 128, 2048, K.FP8_ROW_BYTES, block_h=16)
    assert p.flops == 64 * decode_flops(1, 1, 128, 2048)
    assert p.mma_flops == 2 * 64 * 128 * 2048 * (2 * 576 + 512)
    assert p.bound == "tensor cores" and abs(p.floor_s - p.mma_flops / 790e12) < 1e-12
    assert 88e-6 < p.flashmla_s < 90e-6  # 36.5 GFLOP at FlashMLA's 410 TFLOP/s
    # 8 heads: a half-empty 16-head tile for us; FlashMLA pads to 64 heads; memory-bound.
    p8 = decode_prediction(64, 1, 8, 2048, K.FP8_ROW_BYTES, block_h=16)
    assert p8.mma_flops == decode_mma_flops(64, 1, 16, 2048, 16) and p8.bound == "memory"
    assert p8.floor_s == p8.bytes / 4.8e12
    assert p8.flashmla_s == decode_flops(64, 1, 64, 2048) / 410e12
    assert [flashmla_heads(h) for h in (8, 16, 64, 65, 128)] == [64, 64, 64, 128, 128]
    table = load_gpu_bench().predicted_markdown()
    assert (
        "| fp8_ds_mla | 128 | 64 | 1 | 103.8 | 36.51 | 55.83 | 21.6 us | 70.7 us | 70.7 us (tensor cores) "
        in table
    )


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
    assert "| fp8_ds_mla | 128 | 64 | 1 | 90 | 16 | 64 | 8, 2 | 8 | 1 | n/a | n/a |" in md
    assert "| | 64 | 1 (default) | 200.0 us |" in md and "| | 64 | 2 | 250.0 us |" in md
