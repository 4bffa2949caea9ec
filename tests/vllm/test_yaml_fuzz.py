"""Generated ``--config`` files: hisparse-check's reader against vLLM 0.33.0's, file by file.

serve_yaml_gen.py writes serve files that exercise YAML 1.1 as PyYAML reads
it (every plain-scalar kind, quoting and block styles, anchors, merges,
duplicate keys, tags, tabs, directives, broken variants). For each, vLLM's
``FlexibleArgumentParser.load_config_file`` and hisparse_rs'
``_config_file_argv`` must agree: the same argv (a mapping value compared as
the JSON it holds), or both fail, ours naming the file. Where hisparse-check
deliberately refuses what vLLM passes on (a Python repr no flag reads, a
value JSON cannot hold: :func:`deliberate`), ours must fail. Hypothesis draws
the generator's seed; under ``HYPOTHESIS_PROFILE=ci`` the run is derandomized
and bounded (a few seconds).
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

import serve_yaml_gen
import test_yaml_vectors
import yaml  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hisparse_rs import _core

SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# Refusals that are ours alone, named (tests/vectors/serve_config_yaml.json has one
# of each, with what vLLM passes): an alias inside the node it names (PyYAML builds
# a recursive value, or merges a mapping into itself); and two places where
# libyaml's scanner refuses what PyYAML's reads: a block scalar's first line
# indented with spaces then a tab, a flow plain scalar ended by ':' before ']'.
LIBYAML_ONLY = (
    "circular reference",
    "found a tab character where an indentation space is expected",
    "found unexpected ':'",
)


def _has(value: Any, seen: set[int] | None = None) -> bool:
    """Whether a safe_load value holds what vLLM passes as a repr or JSON cannot hold."""
    seen = set() if seen is None else seen
    if isinstance(value, (list, dict)):
        if id(value) in seen:
            return True  # a recursive structure
        seen.add(id(value))
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        return any(_has(k, seen) or _has(v, seen) for k, v in items)
    if isinstance(value, (bytes, set, tuple)):
        return True
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)  # a lone surrogate (a "\ud800" escape)
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) > 1.7e308  # JSON flag text holds ints as floats
    return False


def deliberate(text: str) -> bool:
    """Whether hisparse-check refuses this file on purpose where vLLM passes it on (README, --config)."""
    if "!!binary" in text or "\ufeff" in text.lstrip("\ufeff") or SURROGATE_ESCAPE.search(text):
        # !!binary: refused once built, even where a later duplicate key replaces it;
        # a byte-order mark after the first character: libyaml skips it, PyYAML reads it;
        # a "\ud800" escape: libyaml refuses a lone surrogate, PyYAML builds it.
        return True
    config = yaml.safe_load(text)
    if not isinstance(config, dict):
        return False
    for value in config.values():
        if isinstance(value, list) and any(
            isinstance(item, (list, dict, bytes, set, tuple)) for item in value
        ):
            return True  # vLLM passes str(item): a Python repr
        if _has(value):
            return True
    return False


def same(ours: list[str], vllm: list[Any]) -> bool:
    """Argv equality, a mapping value's JSON text compared as the JSON value (numbers as floats)."""

    def value(x: Any) -> Any:
        if isinstance(x, bool) or x is None or isinstance(x, str):
            return x
        if isinstance(x, (int, float)):
            return float(x)
        if isinstance(x, list):
            return [value(v) for v in x]
        return {k: value(v) for k, v in x.items()}

    if len(ours) != len(vllm):
        return False
    for a, b in zip(ours, vllm, strict=True):
        if isinstance(b, str):
            if a != b:
                return False
        elif value(test_yaml_vectors.spelled(json.loads(a))) != value(b):
            return False
    return True


def check(text: str, path: Path) -> None:
    path.write_text(text, encoding="utf-8")
    try:
        want: list[Any] | None = test_yaml_vectors.vllm_argv(text, path.parent)
    except Exception:  # vLLM raises many kinds here
        want = None
    try:
        got: list[str] | None = _core._config_file_argv(str(path))
        error = ""
    except ValueError as e:
        got, error = None, str(e)
    if want is None:
        assert got is None, f"{text!r}: vLLM fails, hisparse-check gives {got}"
        assert str(path) in error, f"{text!r}: the error does not name the file: {error}"
    elif got is None:
        assert deliberate(text) or any(known in error for known in LIBYAML_ONLY), (
            f"{text!r}: vLLM gives {want}, we fail: {error}"
        )
    else:
        assert not any(isinstance(v, float) and math.isnan(v) for v in want)  # spelled "nan"
        assert same(got, want), f"{text!r}: vLLM gives {want}, we give {got}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_generated_serve_files_read_as_vllm_reads_them(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    for _ in range(5):
        check(serve_yaml_gen.serve_file(rng), tmp_path / "serve.yaml")


def test_alias_bombs_fail_fast(tmp_path: Path) -> None:
    """Nine levels of nine aliases (9**9 strings once expanded): refused at the documented bound."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = tmp_path / "serve.yaml"
    path.write_text("\n".join(lines) + "\n")
    try:
        _core._config_file_argv(str(path))
    except ValueError as e:
        assert "alias expanded" in str(e) and str(path) in str(e)
    else:
        raise AssertionError("an alias bomb was expanded")
