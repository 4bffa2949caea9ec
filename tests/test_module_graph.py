"""The Python package's module graph: no import cycle among python/hisparse_rs/*.py
(issue 24), as rust/hisparse-core/tests/module_graph.rs holds the crates.

Every module's imports are read with :mod:`ast` (nothing is imported): module
level, inside functions and under ``if TYPE_CHECKING:`` alike, since a deferred
import that closes a circle is still a circle. ``from hisparse_rs import x``
names the submodule ``x`` when there is one and the package (``__init__``)
otherwise; relative imports resolve against the package. ``_core`` (the
extension) and ``kernels`` (its own subpackage) have no edges to follow.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

PACKAGE = "hisparse_rs"
SOURCE = Path(__file__).resolve().parent.parent / "python" / PACKAGE
# Submodules that are not python/hisparse_rs/*.py files: no edges to follow.
NOT_READ = ("_core", "kernels")

Graph = dict[str, dict[str, int]]


def _target(parts: list[str], known: set[str]) -> str | None:
    """The known module a dotted name inside the package lands on: its longest known prefix."""
    for k in range(len(parts), 0, -1):
        name = ".".join(parts[:k])
        if name in known:
            return name
    return "__init__" if not parts else None


def graph(sources: Mapping[str, str]) -> Graph:
    """Module (file stem) -> (module it imports -> first line importing it)."""
    known = set(sources)
    g: Graph = {m: {} for m in sources}
    for module, text in sources.items():
        edges = g[module]
        for node in ast.walk(ast.parse(text)):
            targets: list[tuple[str | None, int]] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == PACKAGE:
                        targets.append((_target(parts[1:], known), node.lineno))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = (node.module or "").split(".") if node.module else []
                    inside = True
                else:
                    parts = (node.module or "").split(".")
                    inside = parts[0] == PACKAGE
                    base = parts[1:]
                if not inside:
                    continue
                if base:
                    targets.append((_target(base, known), node.lineno))
                else:
                    # `from hisparse_rs import x`: the submodule x, else the package.
                    for alias in node.names:
                        if alias.name in NOT_READ:
                            continue
                        hit = alias.name if alias.name in known else "__init__"
                        targets.append((hit, node.lineno))
            for target, line in targets:
                if target is not None and target in known and target != module:
                    edges.setdefault(target, line)
    return g


def cycles(g: Graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def problems(g: Graph) -> list[str]:
    """Each cycle in words, with its edges and their lines (empty: none)."""
    out = []
    for scc in cycles(g):
        edges = "; ".join(
            f"{m} -> {t} (line {line})" for m in scc for t, line in sorted(g[m].items()) if t in scc
        )
        out.append(f"import cycle among {{{', '.join(scc)}}}: {edges}")
    return out


def package_sources() -> dict[str, str]:
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(SOURCE.glob("*.py"))}


def test_the_package_has_no_import_cycle() -> None:
    sources = package_sources()
    assert len(sources) > 5, sorted(sources)
    g = graph(sources)
    # The graph is not empty by accident: known edges are seen.
    assert "config" in g["__init__"], g["__init__"]
    assert "exceptions" in g["config"], g["config"]
    found = problems(g)
    assert not found, "\n".join(found)


def test_a_cycle_through_a_deferred_import_is_found() -> None:
    g = graph(
        {
            "__init__": "from hisparse_rs.a import f\n",
            "a": "from hisparse_rs import _core, b\n",
            "b": "import json\n\ndef g():\n    from hisparse_rs.a import f\n    return f\n",
            "c": "from . import a\nfrom .b import g\n",
        }
    )
    assert problems(g) == ["import cycle among {a, b}: a -> b (line 1); b -> a (line 4)"]
    assert g["c"] == {"a": 1, "b": 2}
    assert "_core" not in g["a"]


def test_a_cycle_through_the_package_and_type_checking_is_found() -> None:
    g = graph(
        {
            "__init__": "from hisparse_rs.a import f\n",
            "a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from hisparse_rs import f\n",
        }
    )
    assert problems(g) == ["import cycle among {__init__, a}: __init__ -> a (line 1); a -> __init__ (line 3)"]
