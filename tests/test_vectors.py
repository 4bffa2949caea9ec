"""The shared resolution vectors (tests/vectors/resolve.json), from Python.

The same file drives rust/hisparse-core/tests/vectors.rs; here it goes through
the Python API, so the binding and the core are held to one set of answers.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

import hisparse_rs
from conftest import ROOT, VECTORS

CASES: list[dict[str, Any]] = json.loads((VECTORS / "resolve.json").read_text())["cases"]
BY_NAME = {c["name"]: c for c in CASES}


def args_of(case: dict[str, Any]) -> dict[str, Any]:
    args = dict(case["args"])
    if "model" in args:
        args["model"] = str(ROOT / args["model"])
    return args


def pairs(diags: tuple[hisparse_rs.Diagnostic, ...]) -> set[tuple[str, str]]:
    return {(d.code, d.path) for d in diags}


# The vectors are the core's resolution; check_args adds the machine check's
# note that the node's RAM was not checked (no host_memory_gib), on every
# valid report that pins a pool: checked by itself in check().
NOT_CHECKED = ("host_memory_not_given", "host_memory_gib")


def machine_note(report: hisparse_rs.Report) -> set[tuple[str, str]]:
    notes = {p for p in pairs(report.warnings) if p == NOT_CHECKED}
    assert bool(notes) == (report.hisparse is not None), pairs(report.warnings)
    return notes


def expected(items: list[dict[str, str]]) -> set[tuple[str, str]]:
    return {(e["code"], e["path"]) for e in items}


def check(report: hisparse_rs.Report, expect: dict[str, Any], exhaustive: bool) -> None:
    if "valid" in expect:
        assert report.valid is expect["valid"], [(d.code, d.path) for d in report.errors]
    if "hisparse_enabled" in expect:
        assert report.hisparse_enabled is expect["hisparse_enabled"]
    if exhaustive:
        assert pairs(report.errors) == expected(expect["errors"])
        assert pairs(report.warnings) - machine_note(report) == expected(expect["warnings"])
    # A vector's diagnostic may name the stage vLLM 0.33.0 refuses it at.
    stages = {(d.code, d.path): d.stage for d in (*report.errors, *report.warnings)}
    for e in (*expect.get("errors", []), *expect.get("warnings", [])):
        if "stage" in e:
            assert stages.get((e["code"], e["path"])) == e["stage"], (e, stages)
    for key, want in expect.get("hisparse", {}).items():
        hs = report.hisparse
        assert hs is not None
        if key == "enabled_source":
            got: Any = hs.enabled_by.source
        elif key.endswith("_source"):
            got = hs.provenance[key.removesuffix("_source")].source
        else:
            got = getattr(hs, key)
        if isinstance(want, float) or isinstance(got, float):
            assert math.isclose(got, want), key
        else:
            assert got == want, key


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vector(case: dict[str, Any]) -> None:
    report = hisparse_rs.check_args(args_of(case))
    check(report, case["expect"], exhaustive=True)
    assert report.valid or report.hisparse is None  # no partial config


@pytest.mark.parametrize("case", [c for c in CASES if "same_settings_as" in c], ids=lambda c: c["name"])
def test_same_settings(case: dict[str, Any]) -> None:
    a = hisparse_rs.check_args(args_of(case)).hisparse
    b = hisparse_rs.check_args(args_of(BY_NAME[case["same_settings_as"]])).hisparse
    assert a is not None and b is not None
    # Everything but how HiSparse was switched on (explicit vs inferred) is identical.
    assert a.provenance == b.provenance
    assert {k: getattr(a, k) for k in a.provenance} == {k: getattr(b, k) for k in b.provenance}


@pytest.mark.parametrize("case", [c for c in CASES if "after_fixes" in c], ids=lambda c: c["name"])
def test_applying_every_hint_resolves_cleanly(case: dict[str, Any]) -> None:
    args = args_of(case)
    report = hisparse_rs.check_args(args)
    for _ in range(30):
        if not report.errors:
            break
        first = report.errors[0]
        assert first.fix, f"{first.code} at {first.path} has no fix"
        args = hisparse_rs.apply_fix(args, first.fix)
        report = hisparse_rs.check_args(args)
    assert report.valid, [(d.code, d.path) for d in report.errors]
    check(report, case["after_fixes"], exhaustive=False)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_each_fix_removes_its_error(case: dict[str, Any]) -> None:
    args = args_of(case)
    for d in hisparse_rs.check_args(args).errors:
        if d.fix:
            fixed = hisparse_rs.check_args(hisparse_rs.apply_fix(args, d.fix))
            assert (d.code, d.path) not in pairs(fixed.errors)


@pytest.mark.parametrize("case", [c for c in CASES if "after_fixes" in c], ids=lambda c: c["name"])
def test_every_fix_at_once_resolves_cleanly(case: dict[str, Any]) -> None:
    """The fixes of one report work together: all of them applied at once, in
    report order, give what fixing one error at a time gives."""
    args = args_of(case)
    for error in hisparse_rs.check_args(args).errors:
        args = hisparse_rs.apply_fix(args, error.fix)
    report = hisparse_rs.check_args(args)
    assert report.valid, [(d.code, d.path) for d in report.errors]
    check(report, case["after_fixes"], exhaustive=False)
