"""sglang_oracle.sglang_verdict pinned to SGLang 0.5.23's real behaviour on hand-picked launches.

Each case is a fact of /work/shared/spec/SGLANG.md (or FACTS_sglang.md where the
wheel says otherwise), with the stage, exception type and message SGLang's own
code gives. These hold the oracle the differential test trusts: a change in
what the oracle calls (a stub too many, a stage run out of order) fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
from sglang_oracle import STAGES, model_dir, sglang_verdict

DSV32 = ["--model-path", model_dir("deepseek-v3.2"), "--device", "cuda"]
GLM5 = ["--model-path", model_dir("glm-5"), "--device", "cuda"]
LLAMA = ["--model-path", model_dir("llama-3.1-8b"), "--device", "cuda"]
HISPARSE = ["--enable-hisparse", "--disable-radix-cache"]
EAGLE = ["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "1", "--speculative-num-steps", "2"]


def config(text: str) -> list[str]:
    return ["--hisparse-config", text]


# (id, argv, stage, exception, message fragment)
REFUSED: list[tuple[str, list[str], str, str, str]] = [
    ("store_true_with_value", [*DSV32, "--enable-hisparse=1"], "argparse", "SystemExit",
     "sglang serve: error: argument --enable-hisparse: ignored explicit argument '1'"),
    ("unknown_flag", [*DSV32, "--enable-hisparsee"], "argparse", "SystemExit",
     "sglang serve: error: unrecognized arguments: --enable-hisparsee"),
    ("page_size_not_int", [*DSV32, "--page-size", "sixty"], "argparse", "SystemExit",
     "argument --page-size: invalid int value: 'sixty'"),
    ("kv_dtype_choice", [*DSV32, "--kv-cache-dtype", "fp8"], "argparse", "SystemExit",
     "argument --kv-cache-dtype: invalid choice: 'fp8'"),
    ("dsa_dcp", [*DSV32, *HISPARSE, "--tp-size", "8", "--dcp-size", "2"], "resolve", "ValueError",
     "DSA DCP does not support HiSparse or HiCache."),
    ("hicache_with_radix_off", [*DSV32, *HISPARSE, "--enable-hierarchical-cache"], "resolve", "ValueError",
     "The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive"),
    ("radix_cache_on", [*DSV32, "--enable-hisparse"], "check", "AssertionError",
     "Hierarchical sparse attention currently requires --disable-radix-cache."),
    ("not_dsa", [*LLAMA, *HISPARSE], "check", "AssertionError",
     "--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention) models"),
    ("mixed_chunk", [*DSV32, *HISPARSE, "--enable-mixed-chunk"], "check", "ValueError",
     "--enable-hisparse does not support --enable-mixed-chunk yet."),
    ("bf16_with_flashmla_kv", [*DSV32, *HISPARSE, "--kv-cache-dtype", "bfloat16", "--dsa-decode-backend",
     "flashmla_kv"], "check", "ValueError", "but got --dsa-decode-backend=flashmla_kv"),
    ("not_json", [*DSV32, *HISPARSE, *config("{top_k:2048}")], "after_weights_load", "ValueError",
     "Failed to parse hisparse_config: Expecting property name enclosed in double quotes"),
    ("json_list", [*DSV32, *HISPARSE, *config("[2048]")], "after_weights_load", "TypeError",
     "pop expected at most 1 argument, got 2"),
    ("below_json_top_k", [*DSV32, *HISPARSE, *config('{"device_buffer_size": 1024}')], "after_weights_load",
     "ValueError", "device_buffer_size (1024) must be no smaller than top_k (2048)"),
    ("swap_in_block_bool", [*DSV32, *HISPARSE, *config('{"swap_in_block_size": true}')], "after_weights_load",
     "ValueError", "swap_in_block_size must be an integer, got True"),
    ("swap_in_block_over", [*DSV32, *HISPARSE, *config('{"swap_in_block_size": 2048}')], "after_weights_load",
     "ValueError", "swap_in_block_size (2048) must be in the range [1, 1024]"),
    ("null_ratio", [*DSV32, *HISPARSE, *config('{"host_to_device_ratio": null}')], "after_weights_load",
     "TypeError", "unsupported operand type(s) for *: 'int' and 'NoneType'"),
    ("float_buffer", [*DSV32, *HISPARSE, *config('{"device_buffer_size": 4096.0}')], "coordinator_init",
     "TypeError", "zeros(): argument 'size'"),
    ("negative_buffer", [*DSV32, *HISPARSE, *config('{"top_k": -64, "device_buffer_size": -64}')],
     "coordinator_init", "RuntimeError", "upper bound and lower bound inconsistent with step sign"),
    ("float_ratio", [*DSV32, *HISPARSE, *config('{"host_to_device_ratio": 1.5}')], "pool_build", "TypeError",
     "must be tuple of ints, not float"),
    ("dbs_4000", [*DSV32, *HISPARSE, *config('{"device_buffer_size": 4000}')], "coordinator_init",
     "ValueError", "HiSparse spec scratch and device buffer sizes must be non-negative multiples of "
     "page_size=64."),
    # With --speculative-eagle-topk 1 SGLang sets draft tokens to steps + 1
    # (speculative_hook.py:1255-1266): 6 draft tokens are 5 steps.
    ("six_draft_tokens", [*DSV32, *HISPARSE, "--speculative-algorithm", "EAGLE",
     "--speculative-eagle-topk", "1", "--speculative-num-steps", "5", "--speculative-num-draft-tokens", "6"],
     "coordinator_init", "ValueError", "HiSparse spec swap requires 2-4 draft tokens and top_k >= 1024."),
    ("spec_slots_over_buffer", [*DSV32, *HISPARSE, *EAGLE, "--speculative-num-draft-tokens", "3",
     "--max-running-requests", "4096"], "coordinator_init", "ValueError",
     "HiSparse spec request capacity must not exceed device_buffer_size."),
    # A P/D decode server's request pool is per attention-DP worker + the
    # in-transfer slots + 1 (disaggregation/decode.py:200): 64 // 8 + 4088 + 1 > 4096.
    ("pd_decode_extra_slots_over_buffer", [*DSV32, "--enable-hisparse", "--disaggregation-mode", "decode",
     "--tp-size", "8", "--dp-size", "8", "--enable-dp-attention", "--max-running-requests", "64", *EAGLE,
     "--speculative-num-draft-tokens", "3", "--disaggregation-decode-extra-slots", "4088"],
     "coordinator_init", "ValueError", "HiSparse spec request capacity must not exceed device_buffer_size."),
    ("pd_decode_draft_over_nixl", [*DSV32, "--enable-hisparse", "--disaggregation-mode", "decode",
     "--disaggregation-transfer-backend", "nixl", *EAGLE, "--speculative-num-draft-tokens", "3"], "request",
     "NotImplementedError", "HiSparse device-only PD transfer currently requires the Mooncake backend"),
    ("buffer_below_index_topk", [*DSV32, *HISPARSE, *config('{"top_k": 1024, "device_buffer_size": 1024}')],
     "first_decode", "AssertionError", "hot_buffer_size (1024) must be >= num_top_k (2048)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "stage", "exception", "fragment"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused_where_sglang_refuses(argv: list[str], stage: str, exception: str, fragment: str) -> None:
    verdict = sglang_verdict(argv)
    assert (verdict["valid"], verdict["stage"], verdict["exception"]) == (False, stage, exception), verdict
    assert fragment in verdict["message"], verdict["message"]
    assert stage in STAGES


def test_pd_decode_launch_is_valid_with_sglangs_resolved_values() -> None:
    """P/D decode turns the radix cache off by itself (pd_disaggregation_hook.py); bf16 on SM90."""
    verdict = sglang_verdict(
        [*DSV32, "--enable-hisparse", "--disaggregation-mode", "decode", "--tp-size", "8",
         "--page-size", "16", *config('{"top_k": 2048, "device_buffer_size": 4096}')]
    )  # fmt: skip
    assert verdict["valid"], verdict
    assert verdict["modelled_to"] == "request"
    want: dict[str, Any] = {
        "enable_hisparse": True,
        "disable_radix_cache": True,
        "disaggregation_mode": "decode",
        "page_size": 64,  # 64 x index_kpool, --page-size 16 overridden (deepseek_v2 overrides)
        "kv_cache_dtype": "bfloat16",
        "attention_backend": "dsa",
        "dsa_prefill_backend": "flashmla_sparse",
        "dsa_decode_backend": "flashmla_sparse",
        "top_k": 2048,
        "index_topk": 2048,
        "device_buffer_size": 4096,
        "host_to_device_ratio": 2,
        "swap_in_block_size": 960,
        "tp_size": 8,
    }
    assert {k: verdict["resolved"][k] for k in want} == want


def test_blackwell_auto_dtype_is_fp8_with_flashmla_kv() -> None:
    """SM 10: `auto` kv dtype is fp8_e4m3 (overrides.py:532-540), the HiSparse default backend flashmla_kv."""
    verdict = sglang_verdict([*GLM5, *HISPARSE], sm=(10, 0))
    assert verdict["valid"], verdict
    resolved = verdict["resolved"]
    assert (resolved["kv_cache_dtype"], resolved["dsa_decode_backend"]) == ("fp8_e4m3", "flashmla_kv")


def test_speculation_takes_the_spec_kernel() -> None:
    """With EAGLE the swap-in is the spec kernel (hisparse_coordinator.py:1491-1498):
    a buffer below index_topk passes (no assert there), one above 32768 fails its
    JIT build's static_assert (hisparse_spec.cuh:74)."""
    spec = [*EAGLE, "--speculative-num-draft-tokens", "3", "--max-running-requests", "16"]
    below = sglang_verdict([*DSV32, *HISPARSE, *spec, *config('{"top_k": 1024, "device_buffer_size": 1024}')])
    assert below["valid"], below
    over = sglang_verdict([*DSV32, *HISPARSE, *spec, *config('{"device_buffer_size": 32832}')])
    assert (over["stage"], over["message"]) == (
        "first_decode",
        "speculative CLOCK cursor requires hot_buffer_size <= 32768.",
    ), over


def test_hisparse_outside_pd_decode_starts() -> None:
    """SGLang #22970: no P/D decode mode, no warning, it starts (our check warns)."""
    verdict = sglang_verdict([*DSV32, *HISPARSE])
    assert verdict["valid"] and verdict["resolved"]["disaggregation_mode"] == "null", verdict


def test_zero_ratio_and_huge_buffer_start() -> None:
    """Zero capacity and an int16-wrapping LRU list: SGLang refuses neither (our check does)."""
    for text in ('{"host_to_device_ratio": 0}', '{"device_buffer_size": 40000}'):
        verdict = sglang_verdict([*DSV32, *HISPARSE, *config(text)])
        assert verdict["valid"], (text, verdict)


def test_speculation_resolves_its_own_request_cap_and_draft_tokens() -> None:
    """With EAGLE and no --max-running-requests SGLang resolves 48; with topk 1 the
    draft tokens are steps + 1 whatever was asked (6 asked, 2 steps: 3), and start."""
    verdict = sglang_verdict([*DSV32, *HISPARSE, *EAGLE, "--speculative-num-draft-tokens", "6"])
    assert verdict["valid"], verdict
    resolved = verdict["resolved"]
    assert (resolved["max_running_requests"], resolved["speculative_num_draft_tokens"]) == (48, 3)
    auto = sglang_verdict([*DSV32, *HISPARSE, "--speculative-algorithm", "EAGLE"])["resolved"]
    assert (
        auto["speculative_num_steps"],
        auto["speculative_eagle_topk"],
        auto["speculative_num_draft_tokens"],
    ) == (
        3,
        1,
        4,
    )


def test_host_pool_over_the_ram_budget() -> None:
    """(200 GiB - 10 GiB) / 8 ranks < 400,000 slots x 2 x 61 layers x 1152 B: SGLang's own message."""
    verdict = sglang_verdict(
        [*DSV32, *HISPARSE, "--tp-size", "8"], host_ram_bytes=200 << 30, device_kv_slots=400_000
    )
    assert (verdict["valid"], verdict["stage"]) == (False, "coordinator_init"), verdict
    assert verdict["message"].startswith(
        "Not enough host memory available. Requesting 56.22 GB but only have 25.50 GB"
    )
    fits = sglang_verdict(
        [*DSV32, *HISPARSE, "--tp-size", "8"], host_ram_bytes=2000 << 30, device_kv_slots=400_000
    )
    assert fits["valid"] and fits["resolved"]["host_pool_bytes"] == (800_000 // 64 + 1) * 64 * 61 * 1152


def test_a_failed_launch_leaves_the_next_one_alone() -> None:
    """One fresh ServerArgs per argv: a refusal does not leak into the following verdict."""
    assert not sglang_verdict([*DSV32, "--enable-hisparse"])["valid"]
    assert sglang_verdict([*DSV32, *HISPARSE])["valid"]
