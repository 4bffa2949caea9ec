"""hisparse_rs.check agrees with vLLM 0.33.0's own config code, or says where it knowingly differs.

Hypothesis builds serve configurations (connector trees, malformed ones
included; ``hisparse_config``; TP / PP / DCP / PCP / DP, the local DP size,
nodes and executor backend; platform; cudagraph mode; reserve-full-isl; the
hybrid KV cache manager flag; block size; KV cache dtype; MTP; the model configs in
tests/data/models and ``hf_overrides``; VLLM_USE_V2_MODEL_RUNNER). Each runs
through vLLM 0.33.0 (``vllm_pipeline.vllm_verdict``: its ``vllm serve``
parser, ``create_engine_config()`` and the HiSparse stages it runs only after
the model has loaded) and through ``hisparse_rs.check_args`` (told the
harness's GPU, an H200). Every refused configuration's fixes are then applied
at once, in report order, and the result goes through both too: it must pass
here and start in vLLM. The verdicts, whether it starts, for a refused one the
stage vLLM stops at (the earliest ``Diagnostic.stage`` of the report's errors
must be the stage at which vLLM 0.33.0's own code raised: ``config`` for
``create_engine_config``, ``engine_start`` for the executor, ...), whether
HiSparse is on, ``device_buffer_size``, the host block stride and the host
block count, must agree, or the report must carry a code from
``hisparse_rs.vllm_deviations()`` (README: "Where we differ from vLLM
0.33.0"). The ``@example`` cases are the divergences the comparisons found,
each fixed or named.

The figures (examples, agreements, named deviations by code) are printed at
the end of the session (conftest.py).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from vllm_pipeline import DEVICE_NAME, Verdict, vllm_verdict

import hisparse_rs

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"
DSV32 = str(MODELS / "deepseek-v3.2")
SHRUNK = json.loads((MODELS / "vllm-test-hisparse-dsv32-shrunk" / "hf_overrides.json").read_text())
DEVIATIONS = dict(hisparse_rs.vllm_deviations())
# The GPU vllm_pipeline answers the device queries for, named as vLLM names it
# (the name the plugin passes; hisparse_rs' table maps it to h200).
GPU = DEVICE_NAME
# The harness's vLLM loads no weights: the check is told so (1 GiB per GPU), or
# it would refuse DeepSeek-V3.2 at TP 1 on the H200 for the weights alone
# (no_gpu_kv_room, issue 22), which this harness cannot reproduce.
MACHINE: dict[str, Any] = {"gpu": GPU, "weights_gib": 1.0}

# A DeepSeek-V3.2 checkpoint whose config.json lost num_nextn_predict_layers (a
# conversion that drops it): vLLM builds a deepseek_mtp draft config from it and
# fails building the draft model (issue 17: our error's stage is model_load).
# vLLM's draft config is read from the checkpoint, not through --hf-overrides,
# so the case needs its own config.json.
_NO_MTP_DIR = Path(tempfile.mkdtemp(prefix="hisparse-rs-dsv32-no-mtp-"))
_NO_MTP_CONFIG = json.loads((MODELS / "deepseek-v3.2" / "config.json").read_text())
del _NO_MTP_CONFIG["num_nextn_predict_layers"]
(_NO_MTP_DIR / "config.json").write_text(json.dumps(_NO_MTP_CONFIG))
DSV32_NO_MTP = str(_NO_MTP_DIR)

# GLM-5.3-Flash carries index_topk only under text_config; without the exl3
# quantization vLLM does not load, vLLM reads it as far as its HiSparse checks.
GLM53_UNQUANTIZED = str(MODELS / "glm-5.3-flash-unquantized")

#: What the session saw; conftest.py prints it.
FIGURES: Counter[str] = Counter()

Json = Any

# --- Generators ---

host_pool_gib = st.one_of(
    st.sampled_from([128, 64, 16, 8, 4, 1, 0.25, 0, -8, "64", "64GiB", True]),
    st.floats(0.05, 256, allow_nan=False),
)
roles = st.sampled_from(["kv_both", "kv_both", "kv_consumer", "kv_producer", None, "both"])


@st.composite
def hisparse_connector(draw: st.DrawFn, child: bool) -> Json:
    c: dict[str, Json] = {
        "kv_connector": draw(st.sampled_from(["HiSparseConnector"] * 6 + ["HiSparseConector"]))
    }
    role = draw(roles)
    if role is not None:
        c["kv_role"] = role
    if draw(st.integers(0, 9)):
        c["kv_connector_extra_config"] = {"host_pool_gib": draw(host_pool_gib)}
    elif draw(st.booleans()):
        c["kv_connector_extra_config"] = {}
    else:  # host_pool_gib where vLLM does not read it: beside kv_connector, misspelled
        place = draw(st.sampled_from(["beside", "misspelled"]))
        if place == "beside":
            c["host_pool_gib"] = draw(host_pool_gib)
        else:
            c["kv_connector_extra_config"] = {"host_pool_gb": draw(host_pool_gib)}
    if draw(st.integers(0, 7)) == 0:  # a hisparse_config setting on the connector (vLLM ignores it)
        extra = c.setdefault("kv_connector_extra_config", {})
        extra[draw(st.sampled_from(["device_buffer_size", "eager_host_mirror"]))] = draw(
            st.sampled_from([6144, 8192, True])
        )
    if child and draw(st.integers(0, 9)) == 0:
        c["engine_id"] = "decode-0"
    return c


@st.composite
def other_connector(draw: st.DrawFn, child: bool) -> Json:
    # Connectors whose modules import without extra packages (no MoRIIO: msgpack).
    name = draw(
        st.sampled_from(
            ["NixlConnector"] * 4
            + ["OffloadingConnector", "MooncakeStoreConnector", "LMCacheConnectorV1", "ExampleConnector"]
        )
    )
    c: dict[str, Json] = {"kv_connector": name}
    role = draw(roles)
    if role is not None:
        c["kv_role"] = role
    if child and draw(st.integers(0, 9)) == 0:
        c["engine_id"] = "decode-0"
    return c


@st.composite
def child(draw: st.DrawFn, depth: int) -> Json:
    kind = draw(st.integers(0, 13))
    if kind <= 4:
        return draw(hisparse_connector(child=True))
    if kind <= 9:
        return draw(other_connector(child=True))
    if kind == 10 and depth < 2:
        return draw(multi(depth + 1))
    if kind == 11:
        return "NixlConnector"  # a bare name: vLLM crashes on it
    if kind == 12:
        return {"kv_role": "kv_both"}  # no connector
    return draw(hisparse_connector(child=True))


@st.composite
def multi(draw: st.DrawFn, depth: int = 0) -> Json:
    shape = draw(st.integers(0, 13))
    extra: dict[str, Json]
    c: dict[str, Json] = {"kv_connector": "MultiConnector"}
    if shape == 0:
        extra = {"connectors": []}
    elif shape == 1:
        extra = {}
    elif shape == 2:  # one connector object where the list belongs
        extra = {"connectors": draw(child(depth))}
    elif shape == 3:  # the list beside kv_connector_extra_config (KVTransferConfig has no such field)
        extra = {}
        c["connectors"] = draw(st.lists(child(depth), min_size=1, max_size=2))
    else:
        extra = {"connectors": draw(st.lists(child(depth), min_size=1, max_size=3))}
    if draw(st.integers(0, 7)) == 0:  # host_pool_gib on the MultiConnector (vLLM ignores it there)
        extra["host_pool_gib"] = draw(host_pool_gib)
    c["kv_connector_extra_config"] = extra
    role = draw(st.sampled_from(["kv_both", "kv_consumer", "kv_consumer", None]))
    if role is not None:
        c["kv_role"] = role
    return c


kv_transfer_config = st.one_of(
    st.none(),
    hisparse_connector(child=False),
    other_connector(child=False),
    multi(),
    multi(),
    multi(),
    # A top-level list of connectors (vLLM's parser refuses it; the fix wraps it).
    st.lists(st.one_of(hisparse_connector(child=True), other_connector(child=True)), min_size=1, max_size=2),
)

attention_config = st.one_of(
    st.none(),
    st.none(),
    st.just({"hisparse_config": None}),
    st.just({"hisparse_config": {}}),
    st.builds(
        lambda n: {"hisparse_config": {"device_buffer_size": n}},
        st.sampled_from([1024, 2048, 4096, 4100, 6144, 8192, 32768, 40000]),
    ),
    st.builds(lambda b: {"hisparse_config": {"eager_host_mirror": b}}, st.booleans()),
    # HiSparse settings where vLLM does not read them (AttentionConfig / HiSparseConfig lack the field).
    st.builds(lambda g: {"hisparse_config": {"host_pool_gib": g}}, st.sampled_from([256, 64, 4])),
    st.builds(lambda n: {"device_buffer_size": n}, st.sampled_from([6144, 8192])),
)

speculative_config = st.one_of(
    st.none(),
    st.none(),
    st.builds(
        lambda n: {"method": "mtp", "num_speculative_tokens": n},
        # 10 and 14: past the resolver's shared memory on an H200 (not the int16 bound).
        st.sampled_from([1, 1, 2, 3, 7, 10, 14, 15]),
    ),
    st.just({"method": "mtp"}),
)

model = st.sampled_from(
    ["deepseek-v3.2"] * 8
    + ["glm-5", "glm-5.2", "glm-5.2", "deepseek-v4-flash", "deepseek-v3", "kimi-k2.5", "qwen3-8b"]
    + ["glm-5.3-flash-reap-exl3-k2-k256"]
)


def maybe(values: list[Json]) -> st.SearchStrategy[Json]:
    return st.sampled_from([None, *values])


@st.composite
def serve_args(draw: st.DrawFn) -> dict[str, Json]:
    name = draw(model)
    args: dict[str, Json] = {"model": str(MODELS / name)}
    overrides = draw(
        st.sampled_from(
            [None] * 6 + [{"index_topk": 1024}, {"index_topk": 4096}, {"index_topk": 20000}, SHRUNK]
        )
    )
    if overrides is not None:
        args["hf_overrides"] = overrides
    fields: dict[str, st.SearchStrategy[Json]] = {
        "kv_transfer_config": kv_transfer_config,
        "attention_config": attention_config,
        "speculative_config": speculative_config,
        "compilation_config": maybe(
            [
                {"cudagraph_mode": m}
                for m in ("FULL", "PIECEWISE", "FULL_AND_PIECEWISE", "NONE", "FULL_DECODE_ONLY")
            ]
        ),
        "tensor_parallel_size": maybe([1, 2, 4, 8, 8, 3]),
        "pipeline_parallel_size": maybe([1, 2]),
        "data_parallel_size": maybe([1, 2]),
        "data_parallel_size_local": maybe([1, 2]),
        "decode_context_parallel_size": maybe([1, 2, 4, 3]),
        "prefill_context_parallel_size": maybe([1, 2]),
        "nnodes": maybe([1, 2]),
        "node_rank": maybe([0, 1, 2, -1]),
        "headless": maybe([True]),
        "data_parallel_rank": maybe([0, 1, 2]),
        "distributed_executor_backend": maybe(["mp", "uni"]),
        "block_size": maybe([16, 32, 64, 128, 256]),
        "kv_cache_dtype": maybe(
            ["auto", "fp8", "fp8_ds_mla", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "bfloat16"]
        ),
        "max_model_len": maybe([4096, 32768, 131072, 200000, -1]),
        "scheduler_reserve_full_isl": maybe([True, False]),
        "disable_hybrid_kv_cache_manager": maybe([True, False]),
        "VLLM_USE_V2_MODEL_RUNNER": maybe(["1", "0"]),
        "platform": st.sampled_from(["cuda"] * 12 + ["rocm", "cpu"]),
    }
    for key, strategy in fields.items():
        # Most fields stay unset in most examples, as in real command lines.
        if draw(st.integers(0, 2)) == 0:
            value = draw(strategy)
            if value is not None:
                args[key] = value
    return within_the_nodes(args)


def within_the_nodes(args: dict[str, Json]) -> dict[str, Json]:
    """The harness is nodes of 8 GPUs: vLLM refuses more ranks per replica on one
    node by counting the machine's GPUs, which no configuration check can."""
    ranks = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "prefill_context_parallel_size"):
        ranks *= args.get(key, 1)
    if ranks > 8 * args.get("nnodes", 1):
        args["nnodes"] = 2 if ranks <= 16 else 4
    return args


@st.composite
def deployment(draw: st.DrawFn) -> dict[str, Json]:
    """A HiSparse deployment as operators write them, most of them valid, so
    that the resolved sizes are compared too; one field at a time goes astray."""
    name = draw(st.sampled_from(["deepseek-v3.2"] * 3 + ["glm-5", "glm-5.2"]))
    hs = {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": draw(st.floats(2, 512).map(lambda g: round(g, 2)))},
    }
    role = draw(st.sampled_from(["kv_consumer", "kv_both"]))
    nixl = {"kv_connector": "NixlConnector", "kv_role": role}
    kv = draw(
        st.sampled_from(
            [
                hs,
                {
                    "kv_connector": "MultiConnector",
                    "kv_role": role,
                    "kv_connector_extra_config": {"connectors": [nixl, hs]},
                },
                {
                    "kv_connector": "MultiConnector",
                    "kv_role": "kv_both",
                    "kv_connector_extra_config": {"connectors": [hs]},
                },
                {
                    "kv_connector": "MultiConnector",
                    "kv_role": "kv_both",
                    "kv_connector_extra_config": {
                        "connectors": [{"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}, hs]
                    },
                },
            ]
        )
    )
    args: dict[str, Json] = {"model": str(MODELS / name), "kv_transfer_config": kv}
    fields: dict[str, st.SearchStrategy[Json]] = {
        "tensor_parallel_size": st.sampled_from([1, 2, 4, 8, 8]),
        "kv_cache_dtype": st.sampled_from(
            ["fp8_ds_mla", "fp8_ds_mla", "auto", "fp8", "bfloat16", "fp8_e4m3"]
        ),
        "block_size": st.sampled_from([64, 128, 256]),
        "max_model_len": st.sampled_from([4096, 32768, 65536, 131072, -1]),
        "speculative_config": st.builds(
            lambda n: {"method": "mtp", "num_speculative_tokens": n}, st.sampled_from([1, 2, 3])
        ),
        "attention_config": st.builds(
            lambda n: {"hisparse_config": {"device_buffer_size": n}},
            st.sampled_from([4096, 6144, 8192, 12288]),
        ),
        "data_parallel_size": st.sampled_from([1, 2]),
        "data_parallel_size_local": st.sampled_from([1, 2]),
        "distributed_executor_backend": st.sampled_from(["mp", "uni"]),
        "nnodes": st.sampled_from([1, 2]),
    }
    for key, strategy in fields.items():
        if draw(st.integers(0, 2)) == 0:
            args[key] = draw(strategy)
    if draw(st.integers(0, 3)) == 0:  # one field astray, from the broad generator
        astray = draw(serve_args())
        key = draw(st.sampled_from(sorted(set(astray) - {"model"}) or ["model"]))
        args[key] = astray[key]
    return within_the_nodes(args)


# --- The comparison ---


#: vLLM 0.33.0's start-up stages in order (``Diagnostic.stage``; vllm_pipeline's ``stage``).
STAGES = ("argparse", "config", "engine_start", "model_load", "workers", "first_step", "never")


def earliest_stage(report: hisparse_rs.Report) -> str:
    """Where vLLM would have stopped, by the report: the earliest stage of its errors."""
    return min((d.stage for d in report.errors), key=STAGES.index)


def disagreements(report: hisparse_rs.Report, vllm: Verdict) -> list[str]:
    if report.valid != vllm.starts:
        return [f"starts: hisparse_rs {report.valid}, vLLM {vllm.starts}"]
    if not report.valid:
        # Both refuse: at the same stage (vLLM stops at its first refusal).
        ours = earliest_stage(report)
        return [] if ours == vllm.stage else [f"stage: hisparse_rs {ours}, vLLM {vllm.stage}"]
    if report.hisparse_enabled != vllm.hisparse:
        return [f"HiSparse on: hisparse_rs {report.hisparse_enabled}, vLLM {vllm.hisparse}"]
    hs = report.hisparse
    if hs is None:
        return []
    ours = (hs.device_buffer_size, hs.host_block_stride, hs.host_blocks)
    theirs = (vllm.device_buffer_size, vllm.host_block_stride, vllm.host_blocks)
    names = ("device_buffer_size", "host_block_stride", "host_blocks")
    return [f"{n}: hisparse_rs {a}, vLLM {b}" for n, a, b in zip(names, ours, theirs, strict=True) if a != b]


def compare(args: dict[str, Json]) -> hisparse_rs.Report:
    """One configuration through both; the harness's GPU is an H200 (vllm_pipeline), so the
    check is told so: vLLM's resolver shared-memory limit is the GPU's."""
    report = hisparse_rs.check_args(args, **MACHINE)
    vllm = vllm_verdict(args)
    FIGURES["examples"] += 1
    found = disagreements(report, vllm)
    if not found:
        FIGURES["agreements"] += 1
        if vllm.starts:
            FIGURES[
                "starts with HiSparse (sizes compared)" if vllm.hisparse else "starts without HiSparse"
            ] += 1
        else:
            FIGURES["refused by both, at the same stage"] += 1
            FIGURES[f"refused at {vllm.stage}"] += 1
        return report
    codes = [d.code for d in (*report.errors, *report.warnings)]
    named = sorted({c for c in codes if c in DEVIATIONS})
    assert named, (
        f"hisparse_rs and vLLM 0.33.0 disagree ({'; '.join(found)}) and the report names no deviation.\n"
        f"vLLM: stage {vllm.stage}: {vllm.error or 'started'}\n"
        f"hisparse_rs: {[(d.code, d.path, d.stage) for d in report.errors]}"
        f" warnings {[d.code for d in report.warnings]}\n"
        f"args: {json.dumps(args)}"
    )
    for code in named:
        FIGURES[f"deviation {code}"] += 1
    if found[0].startswith("stage:"):
        FIGURES["stage differs, deviation named"] += 1
    return report


def compare_with_fixes(args: dict[str, Json]) -> None:
    """``args``, then ``args`` with all of the report's fixes applied at once, in
    report order: that configuration must pass here (when every error has a fix:
    some, such as a quantization vLLM does not load, have none) and start in
    vLLM too, or name its deviation."""
    report = compare(args)
    if report.valid:
        return
    fixed = hisparse_rs.apply_fix(args, [op for d in report.errors for op in d.fix])
    if not hisparse_rs.check_args(fixed, **MACHINE).valid and not all(d.fix for d in report.errors):
        return
    after = compare(fixed)
    assert after.valid, (
        f"every fix at once does not pass: {[(d.code, d.path) for d in after.errors]}\n"
        f"args: {json.dumps(args)}"
    )
    FIGURES["fixed configurations"] += 1


HS = {
    "kv_connector": "HiSparseConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 128},
}


HS_SMALL = {**HS, "kv_connector_extra_config": {"host_pool_gib": 2}}
NIXL_BOTH = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def tree(*children: Json) -> Json:
    return {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": list(children)},
    }


@settings(max_examples=1000)
@given(st.one_of(deployment(), serve_args()))
# The divergences the first comparison with vLLM 0.33.0 found (issue 11), each
# fixed (the verdicts agree) or named (a deviation code):
# connectors: [] starts, without the hybrid KV cache manager;
@example({"model": DSV32, "kv_transfer_config": tree()})
@example({"model": DSV32, "kv_transfer_config": tree(), "attention_config": {"hisparse_config": {}}})
@example({"model": DSV32, "kv_transfer_config": tree(tree(), HS)})
# TP not divisible by DCP; DCP with a NixlConnector not 1 or max(TP, PCP);
@example({"model": DSV32, "tensor_parallel_size": 4, "decode_context_parallel_size": 3})
@example(
    {
        "model": DSV32,
        "tensor_parallel_size": 4,
        "decode_context_parallel_size": 2,
        "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
    }
)
# a MultiConnector child's own engine_id (TypeError in MultiConnector.__init__);
@example({"model": DSV32, "kv_transfer_config": tree({**HS, "engine_id": "d0"})})
# a quantization method vLLM does not know (GLM-5.3-Flash's exl3);
@example({"model": str(MODELS / "glm-5.3-flash-reap-exl3-k2-k256"), "kv_transfer_config": HS})
# a kv_cache_dtype no sparse-MLA backend takes (vLLM: at backend selection);
@example({"model": DSV32, "kv_transfer_config": HS, "kv_cache_dtype": "fp8_e5m2"})
# index_topk only under text_config (vLLM reads the top-level HF config);
@example({"model": GLM53_UNQUANTIZED, "kv_transfer_config": HS})
# MTP without num_speculative_tokens (vLLM does not take the checkpoint's depth).
@example({"model": DSV32, "kv_transfer_config": HS, "speculative_config": {"method": "mtp"}})
@example({"model": DSV32, "speculative_config": {"method": "mtp"}})
# The deviations themselves: a HiSparseConnector two MultiConnector levels deep
# (vLLM does not see it, and fails when it creates the connectors), and
# --max-model-len auto with a pool smaller than the model's context (vLLM
# shortens the context).
@example({"model": DSV32, "kv_transfer_config": tree(NIXL_BOTH, tree(HS))})
@example({"model": DSV32, "kv_transfer_config": HS_SMALL, "max_model_len": -1})
# After the merge with the config and harden work (joint fixes, misplaced
# settings, --gpu), with every configuration's fixes applied too: the
# resolver's shared memory on this H200 (MTP 14 on DeepSeek-V3.2);
@example(
    {
        "model": DSV32,
        "kv_transfer_config": HS,
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 14},
    }
)
# --data-parallel-size-local (new-user trial): more than the DP size; two a
# node over --nnodes 2, one node group, so each TP 8 replica spans both nodes
# and keeps private pools (packed stride); one a node, shared pools.
@example({"model": DSV32, "kv_transfer_config": HS, "data_parallel_size_local": 2})
@example(
    {
        "model": DSV32,
        "kv_transfer_config": HS,
        "tensor_parallel_size": 8,
        "data_parallel_size": 2,
        "data_parallel_size_local": 2,
        "nnodes": 2,
    }
)
@example(
    {
        "model": DSV32,
        "kv_transfer_config": HS,
        "tensor_parallel_size": 8,
        "data_parallel_size": 2,
        "data_parallel_size_local": 1,
        "nnodes": 2,
    }
)
# host_pool_gib on the MultiConnector (vLLM ignores it there; the fix moves it);
@example(
    {
        "model": DSV32,
        "kv_transfer_config": {
            "kv_connector": "MultiConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {
                "host_pool_gib": 96,
                "connectors": [NIXL_BOTH, {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}],
            },
        },
    }
)
# MTP on a model without MTP layers and without a count: removing
# speculative_config settles both; a count without a method or draft model;
@example({"model": str(MODELS / "qwen3-8b"), "speculative_config": {"method": "mtp"}})
@example({"model": DSV32, "speculative_config": {"num_speculative_tokens": 2}})
# a flat hf_overrides on a composite model does not reach its text model;
@example({"model": str(MODELS / "kimi-k2.5"), "hf_overrides": SHRUNK, "kv_transfer_config": HS_SMALL})
# a top-level list the fixes empty (DeepSeek-V4 cannot use HiSparse; no HMA).
@example(
    {
        "model": str(MODELS / "deepseek-v4-flash"),
        "kv_transfer_config": [HS, {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}],
    }
)
# Issue 17: the launch layouts vLLM refuses when its engine and executor start
# (an unset -dpl whose inferred node groups do not divide --nnodes; a replica
# spread over nodes its world does not divide; --headless with no local
# replica), and what it refuses while building its config (--nnodes with Ray,
# a --node-rank past the nodes, an external-LB rank with -dpl 2 or out of
# range); each stage compared. Ray is not installed here: only with --nnodes,
# where ParallelConfig refuses it before it looks for Ray.
@example({"model": DSV32, "tensor_parallel_size": 8, "data_parallel_size": 3, "nnodes": 2})
@example(
    {
        "model": DSV32,
        "tensor_parallel_size": 1,
        "data_parallel_size": 2,
        "data_parallel_size_local": 2,
        "nnodes": 2,
    }
)
@example(
    {
        "model": DSV32,
        "kv_transfer_config": HS,
        "headless": True,
        "data_parallel_size": 2,
        "data_parallel_size_local": 0,
    }
)
@example({"model": DSV32, "tensor_parallel_size": 8, "nnodes": 2, "distributed_executor_backend": "ray"})
@example(
    {
        "model": DSV32,
        "tensor_parallel_size": 8,
        "data_parallel_size": 2,
        "nnodes": 2,
        "data_parallel_backend": "ray",
    }
)
@example({"model": DSV32, "kv_transfer_config": HS, "tensor_parallel_size": 8, "nnodes": 2, "node_rank": 2})
@example({"model": DSV32, "data_parallel_size": 4, "data_parallel_rank": 1, "data_parallel_size_local": 2})
@example({"model": DSV32, "data_parallel_size": 4, "data_parallel_rank": 4})
@example({"model": DSV32, "kv_transfer_config": HS, "data_parallel_size": 4, "data_parallel_rank": 1})
# ... and the three disagreements issue 17 named: a modelopt_fp4 quantization_config
# without quant_algo (refused while the config is built), deepseek_mtp on a
# checkpoint without num_nextn_predict_layers (refused as the draft model loads),
# a kv_cache_dtype no sparse-MLA backend takes (refused as the layers select
# their attention backend).
@example({"model": DSV32, "hf_overrides": {"quantization_config": {"quant_method": "modelopt_fp4"}}})
@example(
    {"model": DSV32_NO_MTP, "speculative_config": {"method": "deepseek_mtp", "num_speculative_tokens": 1}}
)
@example({"model": DSV32, "kv_transfer_config": HS, "kv_cache_dtype": "fp8_e5m2"})
def test_hisparse_rs_agrees_with_vllm_or_names_the_deviation(args: dict[str, Json]) -> None:
    compare_with_fixes(args)
