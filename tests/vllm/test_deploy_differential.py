"""hisparse_rs.check_deployment agrees with vLLM 0.33.0 on generated P/D pairs (issue 25).

A pool of prefill and decode launches (DeepSeek-V3.2 and GLM-5, named by two
strings for the same weights; TP; --block-size; --kv-cache-dtype; --dtype;
the hybrid KV cache manager flag; --max-model-len; MTP; NixlConnector, a
MultiConnector with HiSparse on the decode, a MultiConnector with a connector
without SupportsHMA on the prefill, a host buffer on the decode) is built
through vLLM 0.33.0's own code, each side once:

- ``create_engine_config()`` (``vllm_pipeline``: its parser, its
  ``AsyncEngineArgs``), then what the model's layers do as they are built
  (``vllm_pipeline._model_load``: the sparse-MLA backend ``get_attn_backend``
  selects, ``update_block_size_for_backend``, and the cache dtype the layer
  writes back into ``cache_config``, mla_attention.py:522-529);
- the NIXL compatibility hash from vLLM's own ``compute_nixl_compatibility_hash``
  (nixl/metadata.py:146-216) on that ``VllmConfig``, with the backend name the
  worker passes (``attn_backends[0].get_name()``, nixl/base_worker.py:966-967:
  the first attention layer a DSA model registers is the indexer's cache,
  model_executor/models/deepseek_v2.py:1179 before :1215);
- the block size the worker exchanges: vLLM's ``select_common_block_size`` of
  the cache block size over the layers' backends (nixl/base_worker.py:1066-1081).

Each (prefill, decode) pair is then judged by vLLM's handshake code where it
runs on CPU: the hashes compared (base_worker.py:1191-1207), the decode's
``TransferTopology.tp_ratio`` and ``block_size_ratio`` (kv_connector/utils.py:
522-547, vLLM's class, its assertions) and the host-buffer rule
(base_worker.py:2780-2786); the kv_role pairing (``is_kv_producer`` /
``is_kv_consumer``, config/kv_transfer.py:130-136) and the two
``max_model_len`` s vLLM resolved (the decode refuses a longer prompt,
v1/engine/input_processor.py:588-592). Our verdict is
``hisparse_rs.check_deployment`` on a manifest of the two pods: the codes of
each group must be reported exactly when vLLM refuses for that reason.

On these models the handshake's TP and block-size rules never refuse a
pair vLLM builds (the test asserts it): the TP sizes vLLM accepts for them
divide one another, and every DSA worker transfers 64-token kernel blocks.

MTP (``deepseek_mtp`` and ``mtp``, 1 or 2 tokens) is generated: its factors
are hashed (nixl/metadata.py:103-143). Not generated: other speculators,
DCP, push mode, other GPUs than the H200 the harness answers for.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import vllm_pipeline as vp

import hisparse_rs

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"
# Two names for the same weights: vLLM hashes the string (a mount path on one
# side, another on the other side do not connect).
_LINKS = Path(tempfile.mkdtemp(prefix="hisparse-rs-deploy-diff-"))
(_LINKS / "dsv32").symlink_to(MODELS / "deepseek-v3.2")
# name in the manifest -> the path vLLM reads here
MODEL_NAMES = {
    "/models/deepseek-v3.2": str(MODELS / "deepseek-v3.2"),
    "/weights/dsv32": str(_LINKS / "dsv32"),
    "/models/glm-5": str(MODELS / "glm-5"),
}
MODEL_DIRS = {"/models": str(MODELS), "/weights/dsv32": str(_LINKS / "dsv32")}

SEED = 2503
SIDES = 36  # of each role: 36 x 36 = 1296 candidate pairs, PAIRS of them judged
PAIRS = 320

FIGURES: Counter[str] = Counter()

HASH_CODES = {
    "pd_speculative_mismatch",
    "pd_model_mismatch",
    "pd_dtype_mismatch",
    "pd_kv_cache_dtype_mismatch",
    "pd_hybrid_kv_cache_manager_mismatch",
}
HANDSHAKE_CODES = {"pd_tensor_parallel_unsupported", "pd_block_size_mismatch"}


@dataclass
class Side:
    model: str  # the manifest's name
    argv: list[str]  # after `vllm serve MODEL`
    tp: int
    ok: bool = False
    error: str = ""
    compat_hash: str = ""
    kernel_block_size: int = 0
    host_buffer: bool = False
    max_model_len: int = 0
    producer: bool = False
    consumer: bool = False


def _nixl(role: str, host_buffer: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"kv_connector": "NixlConnector", "kv_role": role}
    if host_buffer:
        c["kv_buffer_device"] = "cpu"
    return c


def _draw(rng: random.Random, decode: bool) -> tuple[str, dict[str, Any]]:
    model = rng.choice(["/models/deepseek-v3.2"] * 4 + ["/weights/dsv32", "/models/glm-5"])
    args: dict[str, Any] = {
        "tensor_parallel_size": rng.choice([1, 2, 4, 4, 8, 8, 8]),
        "block_size": rng.choice([None, None, 64, 128, 256]),
        "kv_cache_dtype": rng.choice(
            [None] * 4 + ["fp8_ds_mla"] * 4 + ["auto", "bfloat16", "fp8", "fp8_e4m3"]
        ),
        "max_model_len": rng.choice([None, None, 32768, 65536, 131072]),
    }
    if rng.random() < 0.1:
        args["dtype"] = "float16"
    if rng.random() < 0.3:  # MTP: a hash factor (its method and draft model; not its depth)
        method = rng.choice(["mtp", "deepseek_mtp"])
        args["speculative_config"] = {"method": method, "num_speculative_tokens": rng.choice([1, 2])}
    hma = rng.choice([None, None, None, True, False])
    if hma is not None:
        args["disable_hybrid_kv_cache_manager"] = hma
    if decode:
        role = rng.choice(["kv_consumer"] * 6 + ["kv_both", "kv_producer"])
        host = rng.random() < 0.1
        if rng.random() < 0.6:
            args["kv_transfer_config"] = {
                "kv_connector": "MultiConnector",
                "kv_role": role,
                "kv_connector_extra_config": {
                    "connectors": [
                        _nixl(role, host),
                        {
                            "kv_connector": "HiSparseConnector",
                            "kv_role": "kv_both",
                            "kv_connector_extra_config": {"host_pool_gib": 128},
                        },
                    ]
                },
            }
        else:
            args["kv_transfer_config"] = _nixl(role, host)
    else:
        role = rng.choice(["kv_producer"] * 6 + ["kv_both", "kv_consumer"])
        if rng.random() < 0.15:  # a child without SupportsHMA turns HMA off when the flag is unset
            args["kv_transfer_config"] = {
                "kv_connector": "MultiConnector",
                "kv_role": role,
                "kv_connector_extra_config": {
                    "connectors": [_nixl(role), {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}]
                },
            }
        else:
            args["kv_transfer_config"] = _nixl(role)
    return model, args


def _flags(args: dict[str, Any]) -> list[str]:
    """The `vllm serve` flags of ``args`` (vllm_pipeline's spelling), without the model."""
    argv = vp.serve_argv({"model": "M", **args})
    assert argv[:3] == ["--model", "M", "--skip-tokenizer-init"]
    if args.get("dtype"):
        argv += ["--dtype", args["dtype"]]
    return argv[3:]


def _vllm_side(model: str, args: dict[str, Any]) -> Side:
    """One side through vLLM 0.33.0's own code (see the module docstring)."""
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.metadata import compute_nixl_compatibility_hash
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerBackend
    from vllm.v1.worker.utils import select_common_block_size

    flags = _flags(args)
    side = Side(model=model, argv=flags, tp=args["tensor_parallel_size"])
    full = {"model": MODEL_NAMES[model], **args}
    try:
        with vp._environment(full):
            ns = vp.serve_parser().parse_args(
                ["--model", MODEL_NAMES[model], "--skip-tokenizer-init", *flags]
            )
            vc = AsyncEngineArgs.from_cli_args(ns).create_engine_config()
            sparse_backend, cache_dtype, block_size, _ = vp._model_load(vc)
            # What the MLA layer writes back (mla_attention.py:522-529), before the worker hashes.
            vc.cache_config.cache_dtype = cache_dtype
            backends = [sparse_backend, DeepseekV32IndexerBackend]
            side.kernel_block_size = select_common_block_size(block_size, backends)
            # attn_backends[0]: the indexer's cache is the first attention layer a DSA model builds.
            side.compat_hash = compute_nixl_compatibility_hash(vc, DeepseekV32IndexerBackend.get_name())
            kv = vc.kv_transfer_config
            side.producer, side.consumer = kv.is_kv_producer, kv.is_kv_consumer
            child = args["kv_transfer_config"]
            if child["kv_connector"] == "MultiConnector":
                child = child["kv_connector_extra_config"]["connectors"][0]
            side.host_buffer = child.get("kv_buffer_device") == "cpu"
            side.max_model_len = vc.model_config.max_model_len
            side.ok = True
    except Exception as e:  # vLLM refuses this side on its own
        side.error = vp._first_line(e)
    return side


def _vllm_pair(p: Side, d: Side) -> dict[str, bool]:
    """vLLM's verdict on a pair, by reason. The prefill is the side that sends
    (``is_kv_producer``); with no producer, or no consumer, no handshake ever
    takes place and only the role is judged. The decode's worker is the local
    side of the pull handshake."""
    if not ((p.producer or d.producer) and (p.consumer or d.consumer)):
        return {"role": True}
    if not (p.producer and d.consumer):
        p, d = d, p
    from vllm.distributed.kv_transfer.kv_connector.utils import TransferTopology

    topo = TransferTopology(
        tp_rank=0,
        tp_size=d.tp,
        block_size=d.kernel_block_size,
        engine_id="decode",
        is_mla=True,
        is_mamba=False,
        total_num_kv_heads=1,
        attn_backends=[],
    )
    handshake = False
    try:
        topo.tp_ratio(p.tp)
        ratio = topo.block_size_ratio(p.kernel_block_size)
        handshake = ratio != 1 and d.host_buffer  # base_worker.py:2780-2786
    except AssertionError:
        handshake = True
    return {
        "role": False,
        "hash": p.compat_hash != d.compat_hash,
        "handshake": handshake,
        "context": p.max_model_len > d.max_model_len,
    }


def _manifest(p: Side, d: Side) -> str:
    def pod(name: str, s: Side) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.33.0",
                        "command": ["vllm", "serve", s.model],
                        "args": s.argv,
                        "resources": {"limits": {"nvidia.com/gpu": s.tp, "memory": "1800Gi"}},
                    }
                ],
            },
        }

    return "\n---\n".join(json.dumps(pod(n, s)) for n, s in (("prefill", p), ("decode", d)))


def _ours(p: Side, d: Side, tmp: Path, reasons: set[str]) -> dict[str, bool]:
    path = tmp / "pair.yaml"
    path.write_text(_manifest(p, d))
    report = hisparse_rs.check_deployment(path, model_dirs=MODEL_DIRS)
    codes = set(report.codes)
    for code in codes:
        FIGURES[f"ours: {code}"] += 1
    ours = {
        "hash": bool(codes & HASH_CODES),
        "handshake": bool(codes & HANDSHAKE_CODES),
        "role": "pd_kv_role_unpaired" in codes,
        "context": "pd_context_length_exceeds_decode" in codes,
    }
    # Without a producer and a consumer, ours turns one side and checks the
    # pair it makes (every mismatch at once); vLLM never gets that far.
    return {k: v for k, v in ours.items() if k in reasons}


@pytest.fixture(scope="module")
def pool() -> tuple[list[Side], list[Side]]:
    rng = random.Random(SEED)
    prefills = [_vllm_side(*_draw(rng, decode=False)) for _ in range(SIDES)]
    decodes = [_vllm_side(*_draw(rng, decode=True)) for _ in range(SIDES)]
    FIGURES["sides vLLM refuses on their own (left out)"] = sum(not s.ok for s in prefills + decodes)
    return [s for s in prefills if s.ok], [s for s in decodes if s.ok]


def test_pairs_agree_with_vllms_hash_and_handshake(
    pool: tuple[list[Side], list[Side]], tmp_path: Path
) -> None:
    prefills, decodes = pool
    rng = random.Random(SEED + 1)
    pairs = [(p, d) for p in prefills for d in decodes]
    rng.shuffle(pairs)
    # Role pairs whose rules both sides read as one role each (kv_both with kv_both
    # has no prefill side to choose; vLLM's roles are the connector's).
    pairs = [(p, d) for p, d in pairs if not (p.producer and p.consumer and d.producer and d.consumer)]
    assert len(pairs) >= PAIRS, len(pairs)
    disagreements = []
    for p, d in pairs[:PAIRS]:
        theirs = _vllm_pair(p, d)
        ours = _ours(p, d, tmp_path, set(theirs))
        FIGURES["pairs"] += 1
        for reason, refused in theirs.items():
            FIGURES[f"vLLM refuses: {reason}"] += refused
        if theirs == ours:
            FIGURES["agree"] += 1
        else:
            disagreements.append((p.model, p.argv, d.model, d.argv, theirs, ours))
    assert not disagreements, "\n".join(map(str, disagreements[:8]))
    # The generator reaches every reason, each way. The handshake's TP and
    # block-size ratios never refuse a DSA pair vLLM builds: the TP sizes it
    # accepts for these models (128 / 64 heads) divide one another, and both
    # workers transfer at the indexer's kernel block size, 64 (tests.rs holds
    # the rule on TP 4 against 6).
    for reason in ("hash", "role", "context"):
        assert 0 < FIGURES[f"vLLM refuses: {reason}"] < PAIRS, (reason, FIGURES)
    assert FIGURES["vLLM refuses: handshake"] == 0, FIGURES
    # Each hash factor is reached (MTP on one side only among them).
    for code in sorted(HASH_CODES):
        assert FIGURES[f"ours: {code}"] > 0, (code, FIGURES)
