"""hisparse_rs.check_deployment agrees with SGLang 0.5.23 on generated P/D pairs (issue 25).

A pool of prefill and decode launches (DeepSeek-V3.2, GLM-5 and Qwen3-8B;
--tp, --enable-dp-attention --dp, --page-size, --kv-cache-dtype, the
transfer backend, HiSparse on the decode) is read by SGLang's own argument code, each side once
(``sglang_oracle.sglang_verdict``: ``prepare_server_args``, ``resolve_once``,
``check_server_args``, on an SM90 GPU); a side SGLang refuses is left out.
Each (prefill, decode) pair of one model is then judged by SGLang's own
bootstrap code, the decode's ``CommonKVManager.try_ensure_parallel_info``
(disaggregation/common/conn.py:1293-1430), run on a stand-in manager that
carries the decode's resolved values, with the prefill server's info (what
its bootstrap server publishes, conn.py:3115-3230: attention TP from SGLang's
``compute_dp_attention_world_info``, page size, kv_cache_dtype, KV sharding)
answered for ``requests.get``: its page-size check (:1320-1325), its KV
cache dtype check (:1327-1335) and ``_resolve_rank_mapping`` (:1432-1530)
for every decode rank, whose target prefill ranks must exist. Each reason is
judged on its own (the prefill's info with only that factor its own). The
transfer backends are compared as SGLang resolved them (each side's backend
picks its KV manager class, disaggregation/utils.py:681-720). Our verdict
is ``hisparse_rs.check_deployment`` on a manifest of the two pods.

Not generated: --enable-kv-cache-sharding (SGLang 0.5.23 accepts it only
with prefill context parallelism, "DSA KV sharding requires CUDA interleave
prefill CP > 1", which the rules do not model; tests.rs holds its
equal-attention-TP rule), context parallelism, pipeline parallelism.
"""

from __future__ import annotations

import json
import random
import types
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sglang_oracle

import hisparse_rs

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"
NAMES = ["deepseek-v3.2", "deepseek-v3.2", "glm-5", "qwen3-8b"]
SEED = 2523
SIDES = 40  # of each role
PAIRS = 300

FIGURES: Counter[str] = Counter()

REASONS = {
    "page": "pd_page_size_mismatch",
    "dtype": "pd_kv_cache_dtype_mismatch",
    "tp": "pd_attention_tp_mismatch",
    "backend": "pd_transfer_backend_mismatch",
}


def _draw(rng: random.Random, decode: bool) -> tuple[str, list[str]]:
    name = rng.choice(NAMES)
    tp = rng.choice([1, 2, 4, 4, 6, 8, 8, 8])
    argv = ["--tp", str(tp)]
    if tp > 1 and rng.random() < 0.3:
        argv += ["--enable-dp-attention", "--dp", str(rng.choice([d for d in (2, 3, 4, 8) if tp % d == 0]))]
    for flag, values in (
        ("--page-size", [None, None, 1, 16, 64]),
        ("--kv-cache-dtype", [None, None, None, "auto", "bfloat16", "fp8_e4m3"]),
        ("--disaggregation-transfer-backend", [None, None, None, "mooncake", "nixl"]),
    ):
        value = rng.choice(values)
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--disaggregation-mode", "decode" if decode else "prefill"]
    if decode and name != "qwen3-8b" and rng.random() < 0.5:
        argv += ["--enable-hisparse", "--hisparse-config", '{"device_buffer_size": 4096}']
    return name, argv


class Side:
    def __init__(self, name: str, argv: list[str]) -> None:
        self.name, self.argv = name, argv
        verdict = sglang_oracle.sglang_verdict(
            ["--model-path", sglang_oracle.model_dir(name), "--device", "cuda", *argv]
        )
        self.ok = bool(verdict["valid"])
        self.error = verdict["message"]
        r = verdict["resolved"]
        self.resolved = r
        if self.ok:
            from sglang.srt.layers.dp_attention import compute_dp_attention_world_info

            _, self.attn_tp, _, _ = compute_dp_attention_world_info(
                0, r["tp_size"], r["attn_dp_size"] or 1, 1
            )
            self.tp = int(r["tp_size"])
            self.mla = name != "qwen3-8b"


def _prefill_info(p: Side, d: Side, reason: str) -> dict[str, Any]:
    """What the prefill's bootstrap server publishes (conn.py:3115-3230), with
    every factor but ``reason``'s the decode's own (each reason judged alone)."""
    own = reason == "page", reason == "dtype", reason == "tp"
    return {
        "attn_tp_size": p.attn_tp if own[2] else d.attn_tp,
        "attn_cp_size": 1,
        "dp_size": 1,
        "pp_size": 1,
        "page_size": (p if own[0] else d).resolved["page_size"],
        "kv_cache_dtype": (p if own[1] else d).resolved["kv_cache_dtype"],
        "follow_bootstrap_room": True,
        "enable_kv_cache_sharding": "--enable-kv-cache-sharding" in p.argv and own[2],
    }


def _bootstrap_refuses(p: Side, d: Side, reason: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """SGLang's decode-side bootstrap (try_ensure_parallel_info) on a stand-in
    manager holding the decode's values; True when it raises, or maps a decode
    rank to a prefill rank the prefill does not have."""
    from sglang.srt.disaggregation.common import conn

    info = _prefill_info(p, d, reason)
    response = types.SimpleNamespace(status_code=200, json=lambda: info, text="")
    monkeypatch.setattr(conn.requests, "get", lambda url, timeout=None: response)
    for rank in range(d.attn_tp):
        mgr = types.SimpleNamespace(
            prefill_info_table={},
            kv_args=types.SimpleNamespace(
                page_size=d.resolved["page_size"], engine_rank=rank, state_types=()
            ),
            kv_cache_dtype_str=d.resolved["kv_cache_dtype"],
            attn_tp_size=d.attn_tp,
            attn_cp_size=1,
            attn_cp_rank=0,
            kv_layout=None,
            dsv41_spec_layout=None,
            is_mla_backend=d.mla,
            is_hybrid_mla_backend=False,
            dcp_size=1,
            pp_size=1,
            pp_rank=0,
            enable_all_cp_ranks_for_transfer=False,
        )
        mgr._resolve_rank_mapping = lambda i, m=mgr: conn.CommonKVManager._resolve_rank_mapping(m, i)
        try:
            conn.CommonKVManager.try_ensure_parallel_info(mgr, "prefill:8998")
        except (RuntimeError, AssertionError):
            return True
        got = mgr.prefill_info_table["prefill:8998"]
        if any(t >= info["attn_tp_size"] for t in got.target_tp_ranks):
            return True
    return False


def _manifest(p: Side, d: Side) -> str:
    def pod(role: str, s: Side) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": role},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
                "containers": [
                    {
                        "name": "sglang",
                        "image": "lmsysorg/sglang:v0.5.23",
                        "command": ["sglang", "serve", "--model-path", f"/models/{s.name}", *s.argv],
                        "resources": {"limits": {"nvidia.com/gpu": s.tp, "memory": "1800Gi"}},
                    }
                ],
            },
        }

    return "\n---\n".join(json.dumps(pod(r, s)) for r, s in (("prefill", p), ("decode", d)))


@pytest.fixture(scope="module")
def pool() -> tuple[list[Side], list[Side]]:
    rng = random.Random(SEED)
    prefills = [Side(*_draw(rng, decode=False)) for _ in range(SIDES)]
    decodes = [Side(*_draw(rng, decode=True)) for _ in range(SIDES)]
    FIGURES["sides SGLang refuses on their own (left out)"] = sum(not s.ok for s in prefills + decodes)
    return [s for s in prefills if s.ok], [s for s in decodes if s.ok]


def test_pairs_agree_with_sglangs_bootstrap(
    pool: tuple[list[Side], list[Side]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefills, decodes = pool
    pairs = [(p, d) for p in prefills for d in decodes if p.name == d.name]
    random.Random(SEED + 1).shuffle(pairs)
    assert len(pairs) >= PAIRS, len(pairs)
    disagreements = []
    path = tmp_path / "pair.yaml"
    for p, d in pairs[:PAIRS]:
        theirs = {reason: _bootstrap_refuses(p, d, reason, monkeypatch) for reason in ("page", "dtype", "tp")}
        theirs["backend"] = (
            p.resolved["disaggregation_transfer_backend"] != d.resolved["disaggregation_transfer_backend"]
        )
        path.write_text(_manifest(p, d))
        codes = set(hisparse_rs.check_deployment(path, model_dirs={"/models": str(MODELS)}).codes)
        ours = {reason: code in codes for reason, code in REASONS.items()}
        FIGURES["pairs"] += 1
        for reason, refused in theirs.items():
            FIGURES[f"SGLang refuses: {reason}"] += refused
        if theirs == ours:
            FIGURES["agree"] += 1
        else:
            disagreements.append((p.name, p.argv, d.argv, theirs, ours))
    assert not disagreements, "\n".join(map(str, disagreements[:8]))
    for reason in theirs:
        assert 0 < FIGURES[f"SGLang refuses: {reason}"] < PAIRS, (reason, FIGURES)
