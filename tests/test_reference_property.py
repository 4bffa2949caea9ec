"""The Rust resolver agrees with the Python statement of the rules.

``tests/reference_resolver.py`` states the connector-tree resolution rules in
plain Python; these hypothesis tests generate serve arguments (connector trees
of random shape, names, roles and malformed entries, with and without an
explicit ``hisparse_config`` and speculative decoding) and require
``hisparse_rs.check_args`` to report exactly what the reference says: validity,
whether HiSparse is on, the multiset of ``(code, path)`` errors and warnings,
and, when valid, the resolved settings. A second property requires every
error's ``fix``, applied alone, to remove that error.

Deterministic under ``CI=true`` (the ``ci`` profile in conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import hisparse_rs
from reference_resolver import (
    HISPARSE,
    MISSING,
    MULTI,
    Expected,
    Settings,
    format_path,
    reference_check,
)

MODEL_DIR = Path(__file__).resolve().parent / "data" / "models" / "deepseek-v3.2"
HF_CONFIG: dict[str, Any] = json.loads((MODEL_DIR / "config.json").read_text())
MAX_MODEL_LEN = 4096  # small, so host-pool sizing does not dominate (0.28 GiB suffices)

Json = Any


# --- Generators ---

# Any text JSON can carry (lone surrogates cannot be encoded).
TEXT = st.text(st.characters(codec="utf-8"), max_size=10)
KNOWN_NAMES = st.sampled_from(
    [
        HISPARSE,
        HISPARSE,
        "NixlConnector",
        MULTI,
        MULTI,
        "OffloadingConnector",
        "MooncakeStoreConnector",
        "HiSparseConector",
        "hisparseconnector",
        "$KV_CONNECTOR",
    ]
)
ROLES = st.sampled_from(
    ["kv_both", "kv_both", "kv_consumer", "kv_producer", MISSING, MISSING, None, "kv_bothh", "", 3]
)
HOST_POOL_GIB = st.sampled_from(
    [64, 64, 64, 2.5, MISSING, 0.1, 0, -8, "64", " 1_024 ", "abc", None, True, "inf", "${POOL}"]
)
MALFORMED_CHILD = st.sampled_from([0, "NixlConnector", [], None, True, [{"kv_connector": MULTI}]])
MALFORMED_CHILDREN = st.sampled_from([MISSING, [], None, "x", 0, {"kv_connector": "NixlConnector"}])
# Keys vLLM 0.33 rejects, including the host-pool value under a misspelled key.
ODD_FIELDS = st.sampled_from(
    [
        ("kv_extra_config", {"host_pool_gib": 64}),
        ("kv_extra_config", {"other": 1}),
        ("kv_buffer_size", 1e9),
        ("kv_rol", "kv_both"),
        ("kv_port", "9000"),
        ("kv_port", "x"),
        ("kv_load_failure_policy", "fail"),
        ("kv_load_failure_policy", "oops"),
        ("kv_connector_module_path", ""),
        ("kv_connector_module_path", "my.module"),
        ("kv_connector_module_path", 5),
        ("engine_id", None),
        ("engine_id", 5),
        ("kv_buffer_device", None),
        ("enable_permute_local_kv", "yes"),
        ("enable_permute_local_kv", "maybe"),
        ("kv_connector", 7),
    ]
)


def _put(obj: dict[str, Json], key: str, value: Json) -> None:
    if value is not MISSING:
        obj[key] = value


CLEAN_NAMES = st.sampled_from(
    [HISPARSE, "NixlConnector", MULTI, "OffloadingConnector", "MooncakeStoreConnector"]
)
CLEAN_ROLES = st.sampled_from(["kv_both", "kv_both", "kv_consumer", "kv_producer"])
CLEAN_HOST_POOL_GIB = st.sampled_from([64, 2.5, "64", 128])


@st.composite
def connector(draw: st.DrawFn, depth_left: int, clean: bool = False) -> Json:
    """A KVTransferConfig-shaped object. ``clean`` ones are well formed (valid names,
    roles and host pools, MultiConnectors with children); the others may carry any
    of the malformations vLLM rejects, at any node."""
    if clean:
        name = draw(CLEAN_NAMES if depth_left > 0 else CLEAN_NAMES.filter(lambda n: n != MULTI))
        obj: dict[str, Json] = {"kv_connector": name, "kv_role": draw(CLEAN_ROLES)}
        if name == HISPARSE:
            obj["kv_connector_extra_config"] = {"host_pool_gib": draw(CLEAN_HOST_POOL_GIB)}
        elif name == MULTI:
            children = draw(st.lists(connector(depth_left - 1, clean=True), min_size=1, max_size=3))
            obj["kv_connector_extra_config"] = {"connectors": children}
        return obj

    pick = draw(st.integers(0, 11))
    name = draw(TEXT if pick == 0 else st.sampled_from([MISSING, None]) if pick == 1 else KNOWN_NAMES)
    obj = {}
    _put(obj, "kv_connector", name)
    _put(obj, "kv_role", draw(ROLES))

    extra: Json = {}
    if name == HISPARSE or draw(st.integers(0, 9)) == 0:
        _put(extra, "host_pool_gib", draw(HOST_POOL_GIB))
    if name == MULTI:
        if depth_left > 0 and draw(st.integers(0, 5)) > 0:
            children = draw(
                st.lists(
                    st.one_of(
                        connector(depth_left - 1),
                        connector(depth_left - 1),
                        connector(depth_left - 1, clean=True),
                        MALFORMED_CHILD,
                    ),
                    min_size=1,
                    max_size=3,
                )
            )
        else:
            children = draw(MALFORMED_CHILDREN)
        where = draw(st.sampled_from(["extra", "extra", "extra", "misplaced", "both"]))
        if where in ("extra", "both"):
            _put(extra, "connectors", children)
        if where in ("misplaced", "both"):
            _put(obj, "connectors", children)
    elif depth_left > 0 and draw(st.integers(0, 9)) == 0:
        # Children under a connector that is not a MultiConnector are ignored.
        extra["connectors"] = [draw(connector(0))]
    shape = draw(st.integers(0, 14))
    if shape == 0:
        obj["kv_connector_extra_config"] = draw(st.sampled_from([None, "x", [], 3]))
    elif shape > 1 or extra:
        obj["kv_connector_extra_config"] = extra

    for key, value in draw(st.lists(ODD_FIELDS, max_size=2)):
        obj[key] = value
    if draw(st.integers(0, 14)) == 0:
        obj[draw(TEXT)] = draw(st.one_of(TEXT, st.integers()))
    return obj


@st.composite
def deep_chain(draw: st.DrawFn) -> Json:
    """MultiConnectors nested around MAX_DEPTH (16) levels, HiSparse at the bottom,
    sometimes twice side by side (max_depth_exceeded is reported once)."""

    def chain(levels: int) -> Json:
        node: Json = {
            "kv_connector": HISPARSE,
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"host_pool_gib": 64},
        }
        for _ in range(levels):
            node = {
                "kv_connector": MULTI,
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"connectors": [node]},
            }
        return node

    levels = draw(st.integers(14, 20))
    if draw(st.booleans()):
        return chain(levels)
    return {
        "kv_connector": MULTI,
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": {"connectors": [chain(levels - 1), chain(draw(st.integers(14, 20)))]},
    }


KV_TRANSFER_CONFIG = st.one_of(
    connector(depth_left=0, clean=True),
    connector(depth_left=3, clean=True),
    connector(depth_left=3, clean=True),
    connector(depth_left=0),
    connector(depth_left=2),
    connector(depth_left=4),
    connector(depth_left=4),
    deep_chain(),
    st.lists(connector(depth_left=1), max_size=3),  # connectors_list_at_top_level
    st.sampled_from([MISSING, MISSING, None, 5]),
)

DEVICE_BUFFER_SIZE = st.one_of(
    st.integers(1, 40000),
    st.integers(1, 625).map(lambda n: n * 64),
    st.sampled_from([MISSING, None, "4096", 0, -1, "abc", 4096.0, True, [4096]]),
)
EAGER_HOST_MIRROR = st.sampled_from([MISSING, True, False, "yes", 0, "maybe", None])


@st.composite
def hisparse_config(draw: st.DrawFn) -> Json:
    hs: dict[str, Json] = {}
    _put(hs, "device_buffer_size", draw(DEVICE_BUFFER_SIZE))
    _put(hs, "eager_host_mirror", draw(EAGER_HOST_MIRROR))
    if draw(st.integers(0, 9)) == 0:
        hs["device_buffer"] = 4096  # misspelled field
    return hs


ATTENTION_CONFIG = st.one_of(
    st.sampled_from([MISSING, MISSING, MISSING, None, {}, {"hisparse_config": {}}]),
    st.builds(lambda hs: {"hisparse_config": hs}, hisparse_config()),
    st.sampled_from(
        [
            {"hisparse_config": None},
            {"hisparse_config": "on"},
            {"hisparse_config": [], "backend": "FLASHMLA_SPARSE"},
            {"hisparse": {}},
            3,
        ]
    ),
)
SPECULATIVE_CONFIG = st.one_of(
    st.sampled_from([MISSING, MISSING, MISSING, None]),
    st.builds(lambda n: {"num_speculative_tokens": n}, st.integers(1, 3)),
    st.builds(lambda n: {"num_speculative_tokens": n, "method": "mtp"}, st.integers(1, 20)),
    st.sampled_from(
        [
            {"num_speculative_tokens": "2"},
            {"num_speculative_tokens": 0},
            {"num_speculative_tokens": "abc"},
            {},
            {"method": "mtp"},
            {"method": "deepseek_mtp"},
            {"method": "eagle"},
            [],
        ]
    ),
)


def serve_args(kv: Json, attention: Json = MISSING, speculative: Json = MISSING) -> dict[str, Json]:
    args: dict[str, Json] = {"hf_config": HF_CONFIG, "max_model_len": MAX_MODEL_LEN}
    _put(args, "kv_transfer_config", kv)
    _put(args, "attention_config", attention)
    _put(args, "speculative_config", speculative)
    return args


def with_hisparse(others: list[Json], host_pool_gib: Json, at: int) -> Json:
    """A HiSparseConnector, alone or inserted among ``others`` in a MultiConnector."""
    hisparse: Json = {"kv_connector": HISPARSE, "kv_role": "kv_both"}
    if host_pool_gib is not MISSING:
        hisparse["kv_connector_extra_config"] = {"host_pool_gib": host_pool_gib}
    if not others:
        return hisparse
    children = [*others]
    children.insert(at % (len(children) + 1), hisparse)
    return {
        "kv_connector": MULTI,
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": {"connectors": children},
    }


TREES_WITH_HISPARSE = st.one_of(
    st.builds(
        with_hisparse,
        st.lists(connector(depth_left=2), max_size=3),
        HOST_POOL_GIB,
        st.integers(0, 3),
    ),
    st.builds(
        with_hisparse,
        st.lists(connector(depth_left=2, clean=True), max_size=3),
        CLEAN_HOST_POOL_GIB,
        st.integers(0, 3),
    ),
)


# Mostly-valid flags, so the resolved settings get compared often too.
PLAUSIBLE_FLAGS = st.tuples(
    st.builds(
        with_hisparse,
        st.lists(connector(depth_left=2, clean=True), max_size=3),
        CLEAN_HOST_POOL_GIB,
        st.integers(0, 3),
    ),
    st.one_of(
        st.sampled_from([MISSING, {"hisparse_config": {}}]),
        st.fixed_dictionaries(
            {
                "hisparse_config": st.fixed_dictionaries(
                    {},
                    optional={
                        "device_buffer_size": st.integers(32, 512).map(lambda n: n * 64),
                        "eager_host_mirror": st.booleans(),
                    },
                )
            }
        ),
    ),
    st.sampled_from(
        [MISSING, {"num_speculative_tokens": 1}, {"num_speculative_tokens": 3}, {"method": "mtp"}]
    ),
)
# (kv_transfer_config, attention_config, speculative_config): tests add the model
# themselves, so a falsifying example prints just the flags.
FLAGS = st.one_of(
    st.tuples(KV_TRANSFER_CONFIG, ATTENTION_CONFIG, SPECULATIVE_CONFIG),
    st.tuples(KV_TRANSFER_CONFIG, ATTENTION_CONFIG, SPECULATIVE_CONFIG),
    PLAUSIBLE_FLAGS,
)


# --- The Rust side, in the reference's terms ---


# Not a configuration rule (the reference states those): the machine note a
# check without --host-memory-gib adds to every report that resolves HiSparse.
NOT_CHECKED = ("host_memory_not_given", "host_memory_gib")


def revealed(d: hisparse_rs.Diagnostic) -> bool:
    """An error the configuration as given does not have: the report's other
    fixes, applied together, reveal it (fixes.rs, the joint pass), and its fix
    comes after theirs. The reference states the rules of the input as given."""
    return d.revealed


# Advisory warnings the reference does not state (tests/test_advice.py holds
# them): a second host_pool_gib that vLLM does not read.
UNSTATED = {"host_pool_gib_shadowed"}


def rust_view(report: hisparse_rs.Report) -> Expected:
    assert all(d.severity == "error" for d in report.errors)
    assert all(d.severity == "warning" for d in report.warnings)
    noted = any((d.code, d.path) == NOT_CHECKED for d in report.warnings)
    assert noted == (report.hisparse is not None), [(d.code, d.path) for d in report.warnings]
    settings = None
    hs = report.hisparse
    if hs is not None:
        prov = hs.provenance
        settings = Settings(
            enabled_by=(hs.enabled_by.source, hs.enabled_by.path or hs.enabled_by.connector or ""),
            connector=hs.connector,
            host_pool_gib=hs.host_pool_gib,
            device_buffer_size=hs.device_buffer_size,
            device_buffer_size_source=prov["device_buffer_size"].source,
            eager_host_mirror=hs.eager_host_mirror,
            eager_host_mirror_source=prov["eager_host_mirror"].source,
            max_decode_query_len=hs.max_decode_query_len,
        )
    return Expected(
        valid=report.valid,
        hisparse_enabled=report.hisparse_enabled,
        errors=sorted((d.code, d.path) for d in report.errors if not revealed(d)),
        warnings=sorted(
            w
            for w in ((d.code, d.path) for d in report.warnings)
            if w != NOT_CHECKED and w[0] not in UNSTATED
        ),
        settings=settings,
    )


# --- Property 1: Rust == reference ---

P2: dict[str, Any] = {
    "kv_connector": MULTI,
    "kv_role": "kv_consumer",
    "kv_connector_extra_config": {
        "connectors": [
            {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
            {
                "kv_connector": HISPARSE,
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"host_pool_gib": 64},
            },
        ]
    },
}


@given(FLAGS)
@example((P2, MISSING, MISSING))
@example((P2, {"hisparse_config": {}}, {"num_speculative_tokens": 3}))
@example((MISSING, {"hisparse_config": {"device_buffer_size": 8192}}, MISSING))
@example(([P2], MISSING, MISSING))
@example(({**P2, "connectors": P2["kv_connector_extra_config"]["connectors"]}, MISSING, MISSING))
@example(
    (
        {"kv_connector": HISPARSE, "kv_role": "kv_both", "kv_extra_config": {"host_pool_gib": 64}},
        MISSING,
        MISSING,
    )
)
def test_rust_agrees_with_reference(flags: tuple[Json, Json, Json]) -> None:
    args = serve_args(*flags)
    expected = reference_check(args)
    actual = rust_view(hisparse_rs.check_args(args))
    assert actual == expected


# --- Property 2: an empty explicit hisparse_config changes nothing but enabled_by ---


@given(TREES_WITH_HISPARSE, SPECULATIVE_CONFIG)
@example(P2, MISSING)
def test_empty_hisparse_config_resolves_like_the_connector_alone(kv: Json, speculative: Json) -> None:
    inferred = rust_view(hisparse_rs.check_args(serve_args(kv, MISSING, speculative)))
    explicit = rust_view(hisparse_rs.check_args(serve_args(kv, {"hisparse_config": {}}, speculative)))
    assert inferred.hisparse_enabled and explicit.hisparse_enabled
    assert (explicit.valid, explicit.errors, explicit.warnings) == (
        inferred.valid,
        inferred.errors,
        inferred.warnings,
    )
    if inferred.settings is not None:
        assert explicit.settings is not None
        assert explicit.settings.enabled_by == ("explicit", "attention_config.hisparse_config")
        assert inferred.settings.enabled_by[0] == "inferred"
        same_enabler = {"enabled_by": explicit.settings.enabled_by}
        assert Settings(**{**vars(inferred.settings), **same_enabler}) == explicit.settings


# --- Property 3: each error's fix, applied alone, removes that error ---


def parse_path(text: str) -> tuple[str | int, ...]:
    """Inverse of format_path: ``a.b[2]["odd key"]`` -> ("a", "b", 2, "odd key")."""
    segs: list[str | int] = []
    i = 0
    while i < len(text):
        if text[i] == ".":
            i += 1
        elif text[i] == "[":
            j, in_str = i + 1, False
            while in_str or text[j] != "]":
                if in_str and text[j] == "\\":
                    j += 1
                elif text[j] == '"':
                    in_str = not in_str
                j += 1
            inner = text[i + 1 : j]
            segs.append(json.loads(inner) if inner.startswith('"') else int(inner))
            i = j + 1
        else:
            j = i
            while j < len(text) and text[j] not in ".[":
                j += 1
            segs.append(text[i:j])
            i = j
    return tuple(segs)


def to_old_path(path: str, fix: tuple[Any, ...]) -> str:
    """Map a path after the fix back to before it: removing (or moving out) list
    element i shifts the later siblings down by one, so (code, path) keeps
    naming the same entry."""
    segs = list(parse_path(path))
    for op in reversed(fix):
        # A move takes its value out of a list just like a remove does.
        source = {"remove": "path", "move": "from"}.get(op["op"])
        removed = parse_path(op[source]) if source else ()
        if not removed or not isinstance(removed[-1], int):
            continue
        parent, idx = removed[:-1], removed[-1]
        n = len(parent)
        seg = segs[n] if len(segs) > n else None
        if tuple(segs[:n]) == parent and isinstance(seg, int) and seg >= idx:
            segs[n] = seg + 1
    return format_path(tuple(segs))


HISPARSE_64 = {
    "kv_connector": HISPARSE,
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"host_pool_gib": 64},
}


@given(FLAGS)
@example((P2, {"hisparse_config": {"device_buffer_size": 100}}, MISSING))
# Fixes that set a key under a parent of the wrong type (the parent's own
# invalid_type error is separate): found by this property, kept as regressions.
@example(
    (
        {"kv_connector": HISPARSE, "kv_role": "kv_both", "kv_connector_extra_config": "x"},
        MISSING,
        MISSING,
    )
)
@example(
    (
        {
            "kv_connector": MULTI,
            "kv_role": "kv_both",
            "kv_connector_extra_config": "x",
            "connectors": [HISPARSE_64],
        },
        MISSING,
        MISSING,
    )
)
@example((HISPARSE_64, {"hisparse_config": "on"}, {"num_speculative_tokens": 15}))
@example((HISPARSE_64, 3, {"num_speculative_tokens": 15}))
def test_each_fix_removes_its_error(flags: tuple[Json, Json, Json]) -> None:
    args = serve_args(*flags)
    report = hisparse_rs.check_args(args)
    failures = []
    for diag in report.errors:
        if not diag.fix or revealed(diag):
            continue
        try:
            fixed = hisparse_rs.apply_fix(args, diag.fix)
        except ValueError as e:
            failures.append(f"{diag.code} at {diag.path}: fix {list(map(dict, diag.fix))} fails: {e}")
            continue
        after = hisparse_rs.check_args(fixed)
        still = {(d.code, to_old_path(d.path, diag.fix)) for d in after.errors}
        if (diag.code, diag.path) in still:
            failures.append(f"{diag.code} at {diag.path} survives its fix {list(map(dict, diag.fix))}")
    assert not failures, "\n".join(failures)


# --- The reference itself, on hand-written cases (documents the rules) ---


@pytest.mark.parametrize(
    ("kv", "errors"),
    [
        (P2, []),
        # A top-level list's items are checked as the MultiConnector's children its fix
        # wraps them in: P2's HiSparseConnector then sits two levels deep.
        (
            [P2],
            [
                ("connectors_list_at_top_level", "kv_transfer_config"),
                (
                    "hisparse_connector_too_deep",
                    "kv_transfer_config[0].kv_connector_extra_config.connectors[1]",
                ),
            ],
        ),
        # A host_pool_gib on the MultiConnector is misplaced, not missing.
        (
            {
                "kv_connector": MULTI,
                "kv_role": "kv_both",
                "kv_connector_extra_config": {
                    "host_pool_gib": 256,
                    "connectors": [{"kv_connector": HISPARSE, "kv_role": "kv_both"}],
                },
            },
            [("host_pool_gib_misplaced", "kv_transfer_config.kv_connector_extra_config.host_pool_gib")],
        ),
        (
            {
                "kv_connector": MULTI,
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"connectors": [3]},
            },
            [
                (
                    "connector_not_object",
                    "kv_transfer_config.kv_connector_extra_config.connectors[0]",
                )
            ],
        ),
        (
            {"kv_connector": MULTI, "kv_role": "kv_both"},
            [("empty_multi_connector", "kv_transfer_config.kv_connector_extra_config.connectors")],
        ),
        ({"kv_connector": "NixlConnector"}, [("missing_kv_role", "kv_transfer_config.kv_role")]),
        (
            # A misspelled HiSparseConnector is still checked as HiSparse: all errors at once.
            {"kv_connector": "HiSparseConector", "kv_role": "kv_both"},
            [
                ("host_pool_gib_missing", "kv_transfer_config.kv_connector_extra_config.host_pool_gib"),
                ("unknown_connector", "kv_transfer_config.kv_connector"),
            ],
        ),
    ],
)
def test_reference_examples(kv: Json, errors: list[tuple[str, str]]) -> None:
    expected = reference_check(serve_args(kv))
    assert expected.errors == sorted(errors)
    assert rust_view(hisparse_rs.check_args(serve_args(kv))) == expected


def test_path_round_trip() -> None:
    path = ("kv_transfer_config", "connectors", 1, "a.b", "", 'q"[0]', "ü")
    assert parse_path(format_path(path)) == path
