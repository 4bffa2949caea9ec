"""benches/gpu_kernels.py's FlashMLA comparison without a GPU: a stand-in ``flash_mla``
with FlashMLA's interface (sgl-flash-mla 1.0.0 ``flash_mla_interface.py``) and its
checks on the arguments, computing the PyTorch reference over the pages it is given.
So the conversion of our rows to FlashMLA's ``[num_blocks, 64, 1, 656]`` pages, the
same indices, the zero-head padding to 64 (vLLM 0.33) and the slicing back are
checked here; a failing call is recorded, not raised."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest
import torch

from conftest import ROOT
from hisparse_rs import kernels as K
from kernel_cases import DEVICE

spec = importlib.util.spec_from_file_location("gpu_kernels", ROOT / "benches" / "gpu_kernels.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
sys.modules["gpu_kernels"] = bench
spec.loader.exec_module(bench)


class FakeFlashMLA:
    """FlashMLA's sparse fp8 decode entry points, as the reference over the given pages."""

    __version__ = "stand-in"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.heads: list[int] = []

    def get_mla_metadata(self, *args: Any, **kwargs: Any) -> tuple[object, None]:
        assert not args and not kwargs  # sgl-flash-mla 1.0.0: no arguments
        return object(), None

    def flash_mla_with_kvcache(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        block_table: torch.Tensor | None,
        cache_seqlens: torch.Tensor | None,
        head_dim_v: int,
        tile_scheduler_metadata: object,
        num_splits: None = None,
        softmax_scale: float | None = None,
        causal: bool = False,
        is_fp8_kvcache: bool | None = None,
        indices: torch.Tensor | None = None,
        use_legacy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.fail:
            raise RuntimeError("no kernel image is available for execution on the device")
        assert (
            k_cache.dtype == torch.uint8 and k_cache.dim() == 4 and tuple(k_cache.shape[1:]) == (64, 1, 656)
        )
        assert q.shape[2] in (64, 128), "FlashMLA's sm_90 kernel takes 64 or 128 heads"
        assert head_dim_v == 512 and is_fp8_kvcache and not causal and num_splits is None
        assert indices is not None and softmax_scale is not None
        self.heads.append(q.shape[2])
        return K.sparse_mla_decode_reference(q, k_cache.reshape(-1, 656), indices, softmax_scale)


SIZES = bench.Sizes(64, 128, (), (), (), (), 1)


@pytest.mark.parametrize(("h_q", "heads"), [(8, 64), (16, 64), (128, 128)])
def test_flashmla_sees_our_rows_as_its_pages_with_padded_heads(h_q: int, heads: int) -> None:
    inputs = bench.decode_inputs(2, 1, h_q, True, 2, SIZES, DEVICE)
    q, rows, idx = inputs[0]
    mine = K.sparse_mla_decode_reference(q, rows, idx, bench.SCALE)
    entry: dict[str, Any] = {"h_q": h_q, "ms": 1.0, "graph_ms": "not run on CPU"}
    fake = FakeFlashMLA()
    bench.compare_flashmla(fake, "flash_mla stand-in", entry, inputs, mine, 1)
    assert "failed" not in str(entry.get("flashmla")), entry
    assert set(fake.heads) == {heads} and entry["flashmla_heads"] == heads
    assert entry["ratio_vs_flashmla"] > 0 and entry["flashmla_graph_ms"] == "not run on CPU"
    diff = entry["max_abs_diff_vs_flashmla"]
    assert diff["out"] <= 2.0**-8 and diff["lse"] <= 1e-5, diff  # the zero heads change nothing


def test_a_failing_flashmla_call_is_a_result() -> None:
    inputs = bench.decode_inputs(2, 1, 128, True, 1, SIZES, DEVICE)
    q, rows, idx = inputs[0]
    entry: dict[str, Any] = {"h_q": 128, "ms": 1.0, "graph_ms": 1.0}
    mine = K.sparse_mla_decode_reference(q, rows, idx, bench.SCALE)
    bench.compare_flashmla(FakeFlashMLA(fail=True), "flash_mla 1.0.0", entry, inputs, mine, 1)
    assert entry["flashmla"] == (
        "flash_mla 1.0.0 imported, but the call failed: RuntimeError: "
        "no kernel image is available for execution on the device"
    )
    assert "flashmla_ms" not in entry
