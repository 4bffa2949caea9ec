"""Fixes converge (issue 17 item 2), as a property over generated configurations.

Two ways a user applies the advice of :func:`hisparse_rs.check_args`:

- one at a time: apply the fix of the first error that has one, check again,
  until no error has a fix;
- every fix at once: the fixes of one report applied together, in report order
  (what ``Report.fixed_flags`` prints as ``vllm serve`` flags, and the README's
  loop, which ends in one round on its own example: tests/test_readme.py).

Invariants, for connector trees (nested MultiConnectors, misspelled keys, roles
missing or misspelled), host pools (missing, misplaced, misspelled, too small,
too large), the node's RAM, the GPU, parallel layouts, lengths and block sizes:

1. the loop ends within one round per error of the first report plus
   ``MAX_ROUNDS``, and never comes back to a configuration it has seen;
2. it ends valid, or at a stated fixed point: no error left has a fix, and
   each says what to do instead or what is allowed (no silent dead end);
3. every fix applies (``apply_fix`` raises nothing);
4. every fix at once gives the loop's verdict or better: when the loop ends
   valid, so do the fixes of the first report applied together.

The ``ci`` profile (tests/conftest.py) derandomizes; the example count here is
sized for CI (each example runs up to ``MAX_ROUNDS`` + 2 checks).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import hisparse_rs
from conftest import MODELS

MAX_ROUNDS = 8

ROLES = st.sampled_from([None, "kv_both", "kv_consumer", "kv_producer"])
POOLS: st.SearchStrategy[Any] = st.sampled_from([None, 1, 4, 15.19, 64, 300, 2000, 4096, 0, "64g"])


@st.composite
def hisparse_connector(draw: st.DrawFn) -> dict[str, Any]:
    c: dict[str, Any] = {"kv_connector": "HiSparseConnector"}
    role = draw(ROLES)
    if role is not None:
        c[draw(st.sampled_from(["kv_role", "kv_role", "kv_rol"]))] = role
    extra: dict[str, Any] = {}
    pool = draw(POOLS)
    if pool is not None:
        extra[draw(st.sampled_from(["host_pool_gib", "host_pool_gib", "host_pool_gb"]))] = pool
    if draw(st.booleans()):
        c["kv_connector_extra_config"] = extra
    elif pool is not None:
        c["host_pool_gib"] = pool  # misplaced beside kv_connector
    if draw(st.integers(0, 5)) == 0:
        c["kv_conector"] = draw(st.sampled_from(["HiSparseConnector", "NixlConnector"]))
    return c


@st.composite
def other_connector(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(["NixlConnector", "ExampleConnector", "NixlConector"]))
    key = draw(st.sampled_from(["kv_connector", "kv_connector", "kv_conector"]))
    c: dict[str, Any] = {key: name}
    role = draw(ROLES)
    if role is not None:
        c["kv_role"] = role
    return c


def multi(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        m: dict[str, Any] = {"kv_connector": "MultiConnector"}
        role = draw(ROLES)
        if role is not None:
            m["kv_role"] = role
        kids = draw(st.lists(children, max_size=3))
        if draw(st.integers(0, 6)) == 0:
            m["kv_connector_extra_config"] = {"connectors": {}}
        else:
            m["kv_connector_extra_config"] = {"connectors": kids}
        return m

    return build()


CONNECTORS = st.recursive(
    st.one_of(hisparse_connector(), other_connector()),
    multi,
    max_leaves=4,
)


@st.composite
def configurations(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    kw: dict[str, Any] = {}
    tree = draw(
        st.one_of(st.none(), CONNECTORS, st.lists(hisparse_connector() | other_connector(), max_size=2))
    )
    if tree is not None:
        kw["kv_transfer_config"] = tree
    if draw(st.integers(0, 3)) == 0:
        kw["attention_config"] = {
            "hisparse_config": {"device_buffer_size": draw(st.sampled_from([2048, 4096]))}
        }
    choices: list[tuple[str, list[Any]]] = [
        ("max_model_len", [None, 4096, 163840, 400000]),
        ("block_size", [None, None, 32, 64, 128]),
        ("tensor_parallel_size", [None, 1, 4, 8]),
        ("data_parallel_size", [None, 1, 2, 8, 16]),
        ("pipeline_parallel_size", [None, None, 2]),
        ("disable_hybrid_kv_cache_manager", [None, None, True]),
        ("kv_cache_dtype", [None, None, "fp8_ds_mla", "bfloat16"]),
    ]
    for name, values in choices:
        v = draw(st.sampled_from(values))
        if v is not None:
            kw[name] = v
    model = draw(st.sampled_from(["deepseek-v3.2", "deepseek-v3.2", "glm-5"]))
    args = hisparse_rs.serve_args(MODELS / model, vllm_use_v2_model_runner=None, **kw)
    machine: dict[str, Any] = {}
    ram = draw(st.sampled_from([None, 8, 16, 64, 256, 1024, 2048]))
    if ram is not None:
        machine["host_memory_gib"] = ram
    gpu = draw(st.sampled_from([None, None, "h200", "b200"]))
    if gpu is not None:
        machine["gpu"] = gpu
    return args, machine


def trail(steps: list[str]) -> str:
    return "\n  ".join(steps)


def loop(args: dict[str, Any], machine: dict[str, Any]) -> tuple[hisparse_rs.Report, list[str]]:
    """One fix at a time: apply the first error's fix, until no error has one.

    Bounded: one round per error of the first report, plus ``MAX_ROUNDS`` for
    the errors fixes reveal; a configuration seen before is a cycle.
    """
    steps: list[str] = []
    seen: set[str] = set()
    first = hisparse_rs.check_args(args, **machine)
    for _ in range(len(first.errors) + MAX_ROUNDS + 1):
        report = hisparse_rs.check_args(args, **machine)
        if not report.errors or not report.errors[0].fix:
            # The loop stops here: then no error may have a fix left.
            assert not [e for e in report.errors if e.fix], (
                f"the first error has no fix, a later one has:\n  {trail(steps)}"
            )
            return report, steps
        e = report.errors[0]
        steps.append(f"{e.code}@{e.path}: {list(e.fix)}")
        args = hisparse_rs.apply_fix(args, e.fix)
        key = json.dumps(args, sort_keys=True)
        assert key not in seen, f"the fix loop cycles:\n  {trail(steps)}"
        seen.add(key)
    raise AssertionError(
        f"the fix loop did not end in {len(first.errors)} + {MAX_ROUNDS} rounds:\n  {trail(steps)}"
    )


def stated(report: hisparse_rs.Report) -> list[str]:
    """Errors left without a fix that say neither what to do (hint) nor what is allowed: silent dead ends."""
    return [
        f"{e.code}@{e.path}"
        for e in report.errors
        if not e.fix and not (e.hint or "").strip() and not (e.allowed or "").strip()
    ]


@settings(max_examples=200)
@given(configurations())
def test_both_fix_loops_converge(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    args, machine = case
    first = hisparse_rs.check_args(args, **machine)
    end, steps = loop(args, machine)
    assert not stated(end), f"errors left with neither fix nor hint: {stated(end)}\n  {trail(steps)}"
    # Every fix at once, in report order.
    joint = args
    for e in first.errors:
        joint = hisparse_rs.apply_fix(joint, e.fix)
    together = hisparse_rs.check_args(joint, **machine)
    if end.valid:
        assert together.valid or not [e for e in together.errors if e.fix], (
            "the loop ends valid, every fix at once does not:\n  "
            + trail([f"{e.code}@{e.path}: {list(e.fix)}" for e in together.errors])
            + "\nfixes applied:\n  "
            + trail([f"{e.code}@{e.path}: {list(e.fix)}" for e in first.errors])
        )


# Regression cases from issue 17 (each failed before the fix), through the public API.
DSV32 = MODELS / "deepseek-v3.2"


def hs(**extra: Any) -> dict[str, Any]:
    return {"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra}


def converges(args: dict[str, Any], machine: dict[str, Any]) -> hisparse_rs.Report:
    first = hisparse_rs.check_args(args, **machine)
    end, steps = loop(args, machine)
    assert end.valid, f"{[e.code for e in end.errors]}\n  {trail(steps)}"
    joint = args
    for e in first.errors:
        joint = hisparse_rs.apply_fix(joint, e.fix)
    together = hisparse_rs.check_args(joint, **machine)
    assert together.valid, [(e.code, e.path, e.fix) for e in together.errors]
    return first


def test_pool_too_small_at_a_length_the_ram_cannot_start_converges() -> None:
    args = hisparse_rs.serve_args(DSV32, kv_transfer_config=hs(host_pool_gib=4), max_model_len=400000)
    first = converges(args, {"host_memory_gib": 16})
    pool = next(e for e in first.errors if e.code == "host_pool_too_small")
    assert any(op["path"] == "max_model_len" for op in pool.fix), pool.fix


def test_hisparse_two_multiconnectors_deep_without_roles_converges() -> None:
    inner = {
        "kv_connector": "MultiConnector",
        "kv_connector_extra_config": {
            "connectors": [
                {"kv_connector": "HiSparseConnector", "kv_connector_extra_config": {"host_pool_gib": 64}}
            ]
        },
    }
    tree = {"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [inner]}}
    converges(hisparse_rs.serve_args(DSV32, kv_transfer_config=tree), {})


def test_empty_connectors_object_is_filled_not_removed() -> None:
    tree = {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": {}},
    }
    args = hisparse_rs.serve_args(
        DSV32, kv_transfer_config=tree, attention_config={"hisparse_config": {"device_buffer_size": 4096}}
    )
    first = converges(args, {})
    assert first.fixed_flags is not None and "--kv-transfer-config" in first.fixed_flags


def test_missing_pool_on_a_small_node_gets_a_pool_it_can_pin() -> None:
    for kw, ram in [({}, 8), ({"data_parallel_size": 16}, 64)]:
        converges(hisparse_rs.serve_args(DSV32, kv_transfer_config=hs(), **kw), {"host_memory_gib": ram})


def test_ram_cap_folds_in_behind_two_other_errors() -> None:
    args = hisparse_rs.serve_args(
        DSV32, kv_transfer_config=hs(host_pool_gib=2000), block_size=32, disable_hybrid_kv_cache_manager=True
    )
    first = converges(args, {"host_memory_gib": 1024})
    assert "host_memory_exceeded" in [e.code for e in first.errors]
    typo = {
        "kv_conector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": 300},
    }
    converges(
        hisparse_rs.serve_args(DSV32, kv_transfer_config=typo, pipeline_parallel_size=2),
        {"host_memory_gib": 256},
    )


def test_a_rename_never_overwrites_the_users_value() -> None:
    tree = {"kv_conector": "NixlConnector", **hs(host_pool_gib=64)}
    first = converges(hisparse_rs.serve_args(DSV32, kv_transfer_config=tree), {})
    assert first.fixed_flags is not None and "HiSparseConnector" in first.fixed_flags
    assert "NixlConnector" not in first.fixed_flags


def test_several_pools_say_which_one_is_read() -> None:
    tree = {**hs(host_pool_gib=64), "host_pool_gb": 100}
    first = converges(hisparse_rs.serve_args(DSV32, kv_transfer_config=tree), {})
    shadowed = [w for w in first.warnings if w.code == "host_pool_gib_shadowed"]
    assert shadowed and "64" in shadowed[0].message, [w.code for w in first.warnings]


def test_pool_fix_fits_the_ram_with_the_gpu_named() -> None:
    args = hisparse_rs.serve_args(
        DSV32, kv_transfer_config=hs(host_pool_gib=1), tensor_parallel_size=4, data_parallel_size=8
    )
    first = converges(args, {"host_memory_gib": 32, "gpu": "h200"})
    pool = next(e for e in first.errors if e.code == "host_pool_too_small")
    assert "--gpu" not in (pool.hint or ""), pool.hint


def test_misspelled_role_tells_one_story() -> None:
    tree = {
        "kv_connector": "HiSparseConnector",
        "kv_rol": "kv_consumer",
        "kv_connector_extra_config": {"host_pool_gib": 64},
    }
    first = converges(hisparse_rs.serve_args(DSV32, kv_transfer_config=tree), {})
    assert [e.code for e in first.errors] == ["unknown_key"], [(e.code, e.hint) for e in first.errors]


def test_a_count_is_not_set_inside_what_another_fix_removes() -> None:
    args = hisparse_rs.serve_args(
        DSV32,
        speculative_config={"method": "bogus", "num_speculative_tokens": 20},
        attention_config={"hisparse_config": {"device_buffer_size": 43008}},
    )
    first = converges(args, {})
    buffer = next(e for e in first.errors if e.code == "device_buffer_too_large")
    assert all(not op["path"].startswith("speculative_config") for op in buffer.fix), buffer.fix


# Issue 22: advice that is right the first time. For generated refused launches,
# the printed fixes applied once (all of them, in report order) and re-checked:
# no error whose fix was printed comes back; no fix lowers the GPU count, the KV
# precision or the context unless its message says why; each fix sets a path once.

# Bits per KV value of each kv_cache_dtype a fix may write or a user may give.
KV_BITS = {None: 16, "auto": 16, "bfloat16": 16, "float16": 16, "fp8": 8, "fp8_ds_mla": 8}


@st.composite
def refused_launches(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    args, machine = draw(configurations())
    extra = draw(st.sampled_from([None, None, "int8", "pp", "pool_in_hisparse_config", "dp"]))
    if extra == "int8":
        args["kv_cache_dtype"] = "int8"
    elif extra == "pp":
        args["tensor_parallel_size"], args["pipeline_parallel_size"] = 4, 2
    elif extra == "pool_in_hisparse_config":
        args["attention_config"] = {"hisparse_config": {"host_pool_gib": 128}}
    elif extra == "dp":
        args["data_parallel_size"], args["block_size"] = 8, 16
    return args, machine


def gpus(args: dict[str, Any]) -> int:
    size = 1
    for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        size *= max(int(args.get(name) or 1), 1)
    return size


def says(e: hisparse_rs.Diagnostic, *words: str) -> bool:
    text = f"{e.message} {e.hint or ''}"
    return any(w in text for w in words)


@settings(max_examples=150)
@given(refused_launches())
def test_printed_fixes_pass_once_and_keep_what_the_user_meant(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    args, machine = case
    first = hisparse_rs.check_args(args, **machine)
    fixed = [e for e in first.errors if e.fix]
    joint = args
    for e in first.errors:
        joint = hisparse_rs.apply_fix(joint, e.fix)
        sets = [op["path"] for op in e.fix if op["op"] == "set"]
        assert len(sets) == len(set(sets)), f"{e.code} sets a path twice: {list(e.fix)}"
        # Applied alone (a revealed error's fix names places after the others').
        alone = args if e.revealed else hisparse_rs.apply_fix(args, e.fix)
        if gpus(alone) < gpus(args):
            assert says(e, "GPU", "tensor_parallel_size", "data_parallel"), f"{e.code} lowers the GPU count"
        bits = KV_BITS.get(alone.get("kv_cache_dtype"), 8)
        if bits < KV_BITS.get(args.get("kv_cache_dtype"), 8):
            assert says(e, "kv_cache_dtype", "sparse-MLA"), f"{e.code} lowers the KV precision: {list(e.fix)}"
        length = alone.get("max_model_len")
        given_length = args.get("max_model_len")
        if given_length and length and length < given_length:
            assert says(e, "max_model_len", "context"), f"{e.code} shortens the context: {list(e.fix)}"
    after = hisparse_rs.check_args(joint, **machine)
    back = {(e.code, e.path) for e in fixed if "[" not in e.path} & {(e.code, e.path) for e in after.errors}
    assert not back, (
        f"printed fixes come back: {sorted(back)}\n  "
        + trail([f"{e.code}@{e.path}: {list(e.fix)}" for e in first.errors])
        + "\nafter:\n  "
        + trail([f"{e.code}@{e.path}: {list(e.fix)}" for e in after.errors])
    )
