"""Sparse MLA decode: the reference against an independent float64 statement of
the contract, and the Triton kernel against the reference with FlashMLA's
tolerances and corner cases (HISPARSE.md §7)."""

from __future__ import annotations

import importlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hisparse_rs import kernels as K
from hisparse_rs.kernels._launch import GpuArch
from kernel_cases import (
    DEVICE,
    LSE_TOL,
    OUT_TOL,
    DecodeCase,
    assert_close_flashmla,
    dense_decode_float64,
    make_decode_case,
)


def run_both(case: DecodeCase, num_splits: int | None = None) -> None:
    out, lse = K.sparse_mla_decode(
        case.q, case.kv, case.indices, case.scale, case.sink, num_splits=num_splits
    )
    ref_out, ref_lse = K.sparse_mla_decode_reference(case.q, case.kv, case.indices, case.scale, case.sink)
    batch, s_q, h_q, _ = case.q.shape
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (batch, s_q, h_q, 512)
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (batch, h_q, s_q)
    assert_close_flashmla("out", out, ref_out, **OUT_TOL)
    assert_close_flashmla("lse", lse, ref_lse, **LSE_TOL)


# (h_q, s_q, topk, fp8, sink, invalid): heads of GLM-5 at TP8 (8), 16, 64 (GLM-5)
# and 128 (DeepSeek-V3.2); top-k below, at and off multiples of the 32-row block.
CASES = [
    (8, 1, 64, False, False, "scattered"),
    (8, 2, 100, True, True, "scattered"),
    (16, 1, 31, True, False, "none"),
    (16, 2, 96, False, True, "tail"),
    (64, 1, 64, True, True, "scattered"),
    (64, 2, 33, False, False, "none"),
    (128, 1, 50, True, True, "tail"),
    (128, 2, 64, False, True, "scattered"),
    (16, 2, 64, False, True, "all"),
    (128, 1, 32, True, False, "all"),
]


@pytest.mark.parametrize(("h_q", "s_q", "topk", "fp8", "sink", "invalid"), CASES)
def test_kernel_matches_reference(h_q: int, s_q: int, topk: int, fp8: bool, sink: bool, invalid: str) -> None:
    case = make_decode_case(
        batch=2,
        s_q=s_q,
        h_q=h_q,
        topk=topk,
        num_rows=2 * topk + 9,
        fp8=fp8,
        sink=sink,
        invalid=invalid,
        seed=topk,
    )
    run_both(case)


@pytest.mark.parametrize(
    ("h_q", "fp8"),
    [(128, True), (8, False)],
    ids=["deepseek-v3.2-fp8", "glm-5-tp8-bf16"],
)
def test_model_shaped_topk_2048(h_q: int, fp8: bool) -> None:
    # Production top-k (index_topk 2048) over a 4096-row hot buffer (the default
    # device_buffer_size), s_q 2 as with one MTP token.
    case = make_decode_case(batch=1, s_q=2, h_q=h_q, topk=2048, num_rows=4096, fp8=fp8, sink=fp8, seed=5)
    run_both(case)


@settings(max_examples=20)
@given(
    batch=st.integers(1, 2),
    s_q=st.integers(1, 2),
    h_q=st.sampled_from([1, 8, 16, 24, 64, 128]),
    topk=st.integers(1, 130),
    fp8=st.booleans(),
    sink=st.booleans(),
    invalid=st.sampled_from(["none", "scattered", "tail", "all"]),
    num_splits=st.none() | st.integers(1, 6),
    seed=st.integers(0, 1000),
)
def test_kernel_matches_reference_property(
    batch: int,
    s_q: int,
    h_q: int,
    topk: int,
    fp8: bool,
    sink: bool,
    invalid: str,
    num_splits: int | None,
    seed: int,
) -> None:
    case = make_decode_case(
        batch=batch,
        s_q=s_q,
        h_q=h_q,
        topk=topk,
        num_rows=topk + 20,
        fp8=fp8,
        sink=sink,
        invalid=invalid,
        seed=seed,
    )
    run_both(case, num_splits=num_splits)


@pytest.mark.parametrize("num_splits", [1, 2, 5, 9])
def test_any_split_count_gives_the_same_answer(num_splits: int) -> None:
    # 9 splits of 100 rows leave empty splits (32-row blocks): they must merge as nothing.
    case = make_decode_case(batch=1, s_q=2, h_q=16, topk=100, num_rows=300, fp8=True, sink=True, seed=7)
    run_both(case, num_splits=num_splits)


def test_all_invalid_gives_zero_out_and_infinite_lse() -> None:
    case = make_decode_case(batch=2, s_q=2, h_q=8, topk=40, num_rows=50, fp8=False, sink=True, invalid="all")
    for fn in (K.sparse_mla_decode, K.sparse_mla_decode_reference):
        out, lse = fn(case.q, case.kv, case.indices, case.scale, case.sink)
        assert torch.all(out == 0) and torch.all(lse == float("inf"))


def test_one_valid_row_among_invalid_and_nan_rows() -> None:
    # Every row but one is NaN and every index but one is -1: out is that row's V.
    case = make_decode_case(
        batch=1, s_q=1, h_q=16, topk=64, num_rows=70, fp8=False, sink=False, invalid="all"
    )
    case.indices[0, 0, 37] = 5
    case.kv[:] = float("nan")
    case.kv[5] = torch.linspace(-1, 1, 576, dtype=torch.bfloat16, device=DEVICE)
    out, lse = K.sparse_mla_decode(case.q, case.kv, case.indices, case.scale)
    assert torch.equal(out[0, 0], case.kv[5, :512].expand(16, 512))
    score = (case.q[0, 0].float() @ case.kv[5].float()) * case.scale  # lse of one term = its score
    assert_close_flashmla("lse", lse[0, :, 0], score, **LSE_TOL)


def test_topk_zero() -> None:
    case = make_decode_case(batch=2, s_q=1, h_q=8, topk=0, num_rows=4, fp8=True, sink=False)
    out, lse = K.sparse_mla_decode(case.q, case.kv, case.indices, case.scale)
    assert torch.all(out == 0) and torch.all(lse == float("inf"))


@pytest.mark.parametrize("fp8", [False, True])
def test_flashmla_paged_kv_shape(fp8: bool) -> None:
    # [num_blocks, block_size, 1, d]: row id = block * block_size + offset, as FlashMLA indexes it.
    case = make_decode_case(batch=2, s_q=1, h_q=16, topk=48, num_rows=128, fp8=fp8, sink=False, seed=3)
    paged = case.kv.view(8, 16, 1, case.kv.shape[-1])
    out, lse = K.sparse_mla_decode(case.q, paged, case.indices, case.scale)
    ref_out, ref_lse = K.sparse_mla_decode_reference(case.q, case.kv, case.indices, case.scale)
    assert_close_flashmla("out", out, ref_out, **OUT_TOL)
    assert_close_flashmla("lse", lse, ref_lse, **LSE_TOL)
    same_out, same_lse = K.sparse_mla_decode_reference(case.q, paged, case.indices, case.scale)
    assert torch.equal(same_out, ref_out) and torch.equal(same_lse, ref_lse)


@pytest.mark.parametrize(
    ("h_q", "s_q", "topk", "fp8", "sink", "invalid"),
    [
        (4, 1, 20, False, False, "none"),
        (4, 2, 33, True, True, "scattered"),
        (3, 2, 17, False, True, "tail"),
        (2, 1, 8, True, True, "all"),
    ],
)
def test_reference_matches_dense_float64(
    h_q: int, s_q: int, topk: int, fp8: bool, sink: bool, invalid: str
) -> None:
    case = make_decode_case(
        batch=2, s_q=s_q, h_q=h_q, topk=topk, num_rows=3 * topk, fp8=fp8, sink=sink, invalid=invalid, seed=11
    )
    out, lse = K.sparse_mla_decode_reference(case.q, case.kv, case.indices, case.scale, case.sink)
    dense_out, dense_lse = dense_decode_float64(case)
    assert_close_flashmla("out", out, dense_out, **OUT_TOL)
    assert_close_flashmla("lse", lse, dense_lse, **LSE_TOL)


def test_sink_only_scales_out() -> None:
    case = make_decode_case(batch=1, s_q=1, h_q=8, topk=16, num_rows=40, fp8=False, sink=True)
    with_sink = K.sparse_mla_decode_reference(case.q, case.kv, case.indices, case.scale, case.sink)
    without = K.sparse_mla_decode_reference(case.q, case.kv, case.indices, case.scale)
    assert torch.equal(with_sink[1], without[1]), "lse excludes the sink"
    factor = torch.sigmoid(without[1][0, :, 0] - case.sink)  # 1 / (1 + exp(sink - lse))
    assert_close_flashmla("out", with_sink[0][0, 0], without[0][0, 0].float() * factor[:, None], **OUT_TOL)


@pytest.mark.parametrize("fn", [K.sparse_mla_decode, K.sparse_mla_decode_reference])
def test_errors_name_the_contract(fn: object) -> None:
    case = make_decode_case(batch=1, s_q=1, h_q=8, topk=8, num_rows=16, fp8=False, sink=False)
    strided_rows = torch.zeros(16, 2 * 656, dtype=torch.uint8, device=DEVICE)[:, ::2]
    bad = [
        ((case.q.float(), case.kv, case.indices, case.scale), "q must be bfloat16"),
        ((case.q, case.kv, case.indices.long(), case.scale), "indices must be int32"),
        ((case.q, case.kv[:, :512], case.indices, case.scale), "kv must be bfloat16"),
        ((case.q, strided_rows, case.indices, case.scale), "kv rows must be contiguous"),
        (
            (case.q, case.kv, case.indices, case.scale, torch.zeros(7, device=DEVICE)),
            r"attn_sink must be float32 \[8\]",
        ),
    ]
    for args, match in bad:
        with pytest.raises(ValueError, match=match) as err:
            fn(*args)  # type: ignore[operator]
        assert "Fix:" in str(err.value)


@pytest.mark.parametrize("fn", [K.sparse_mla_decode, K.sparse_mla_decode_reference])
def test_no_rows_at_all_gives_zero_out_and_infinite_lse(fn: object) -> None:
    q = torch.randn(1, 1, 8, K.D_QK).clamp(-1, 1).to(torch.bfloat16).to(DEVICE)
    kv = torch.zeros(0, K.D_QK, dtype=torch.bfloat16, device=DEVICE)
    idx = torch.tensor([[[0, -1, 3]]], dtype=torch.int32, device=DEVICE)
    out, lse = fn(q, kv, idx, 0.1)  # type: ignore[operator]
    assert int(out.float().abs().sum()) == 0 and bool(torch.isinf(lse).all())


def test_fp8_rows_off_a_4_byte_boundary_are_a_value_error() -> None:
    q = torch.randn(1, 1, 8, K.D_QK).to(torch.bfloat16).to(DEVICE)
    kv = torch.zeros(4, 657, dtype=torch.uint8, device=DEVICE)[:, :656]
    with pytest.raises(ValueError, match="4-byte"):
        K.sparse_mla_decode(q, kv, torch.zeros(1, 1, 2, dtype=torch.int32, device=DEVICE), 0.1)


@pytest.mark.parametrize("capability", [90, 100])
@pytest.mark.parametrize(("h_q", "fp8"), [(128, True), (64, False), (24, True)])
def test_every_gpu_tiling_matches_the_reference(
    monkeypatch: pytest.MonkeyPatch, capability: int, h_q: int, fp8: bool
) -> None:
    # The interpreter takes the sm_90 tiling; the sm_100 one (32-head tiles) runs here too.
    decode_module = importlib.import_module("hisparse_rs.kernels.sparse_mla_decode")

    arch = GpuArch(capability=capability, num_sms=4)
    monkeypatch.setattr(decode_module, "device_arch", lambda device: arch)
    want = 32 if capability >= 100 else 16
    assert decode_module.decode_tiling(h_q, arch).block_h == want
    case = make_decode_case(batch=1, s_q=2, h_q=h_q, topk=150, num_rows=400, fp8=fp8, sink=True, seed=h_q)
    run_both(case)
