"""SGLang 0.5.23 argv words as its argparse parser reads them, from the parser's dump
(sglang_flags.json, which test_flag_table.py holds to the installed SGLang): no SGLang
import, so the main suite (tests/test_fix_convergence_sglang.py) applies printed fixes
with it too, beside this directory's differential test."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

Json = Any

#: SGLang 0.5.23's parser, as tests/sglang/sglang_flags.json records it (test_flag_table.py
#: holds it to the installed SGLang): option string -> (dest, nargs).
_OPTIONS: dict[str, tuple[str, Json]] = {
    option: (spec["dest"], spec["nargs"])
    for spec in json.loads((Path(__file__).resolve().parent / "sglang_flags.json").read_text())[
        "options"
    ].values()
    for option in spec["option_strings"]
}


def _option(word: str) -> tuple[str, Json] | None:
    """The (dest, nargs) of an argv word as argparse reads it: exact, else a
    unique prefix (allow_abbrev); None for a value or an unknown word."""
    if not word.startswith("--"):
        return None
    if word in _OPTIONS:
        return _OPTIONS[word]
    matches = {_OPTIONS[o] for o in _OPTIONS if o.startswith(word)}
    return matches.pop() if len(matches) == 1 else None


def _words(argv: list[str]) -> list[tuple[str | None, list[str]]]:
    """argv cut into (dest, words): an option with its values, or one other word."""
    out: list[tuple[str | None, list[str]]] = []
    i = 0
    while i < len(argv):
        head = argv[i].split("=", 1)
        known = _option(head[0])
        if known is None or len(head) == 2:
            out.append((known[0] if known else None, [argv[i]]))
            i += 1
            continue
        dest, nargs = known
        n = 0 if nargs == 0 else 1 if nargs in (None, 1) else None
        end = i + 1
        while end < len(argv) and (n is None or end - i - 1 < n) and not argv[end].startswith("--"):
            end += 1
        out.append((dest, argv[i:end]))
        i = end
    return out


def apply_fixed_flags(argv: list[str], fixed_flags: str) -> list[str]:
    """argv with `Report.fixed_flags` given in place of the user's flags: every
    word of a flag it names is dropped (its abbreviations and `--flag=value`
    too), then its new words are appended; `(remove --flag)` only drops."""
    tokens = shlex.split(fixed_flags)
    removed: set[str] = set()
    added: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "(remove":
            known = _option(tokens[i + 1].rstrip(")"))
            assert known, f"fixed_flags removes an unknown flag: {fixed_flags}"
            removed.add(known[0])
            i += 2
            continue
        known = _option(tokens[i])
        assert known, f"fixed_flags names an unknown flag {tokens[i]!r}: {fixed_flags}"
        end = i + 1
        while end < len(tokens) and not tokens[end].startswith("--") and tokens[end] != "(remove":
            end += 1
        added.append((known[0], tokens[i:end]))
        i = end
    dests = removed | {dest for dest, _ in added}
    kept = [w for dest, words in _words(argv) if dest not in dests for w in words]
    return kept + [w for _, words in added for w in words]
