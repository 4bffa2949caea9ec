"""Dump SGLang 0.5.23's real `sglang serve` argparse parser as sorted, stable JSON.

The parser is built exactly as `prepare_server_args` builds it
(`srt/server_args.py:680-681`): `argparse.ArgumentParser(prog="sglang serve")`
then `ServerArgs.add_cli_args(parser)`, which adds every annotated field
(`arg_groups/arg_utils.py:298-420`) and the hand-registered ones (dynamic
choices, `--config`, the deprecated spellings; `server_args.py:351-443`).

One entry per option, keyed by its first option string, with every spelling
(`option_strings`), `dest`, the action kind (argparse's registry name:
store, store_true, store_false, append, count, help, ...; a custom Action
class by its class name), `nargs`, `choices` (sorted: argparse only tests
membership, and some lists follow import order), `type` (the callable's
name: int, float, str, json for json.loads, or SGLang's own parser functions
such as json_list_type), `default` (as JSON where it is JSON, else its
repr), `const` and `required`; at the top, argparse's `allow_abbrev`.

Run in .venv-sglang: `python dump_flags.py > sglang_flags.json` regenerates
the committed table (test_flag_table.py fails while the two differ).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    """SGLang's own parser, as prepare_server_args builds it (server_args.py:680-681)."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def _jsonable(value: Any) -> Any:
    """The value as JSON where it is plain data, else its repr (stable across runs)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if hasattr(value, "value") and hasattr(value, "name"):  # an Enum member
        return _jsonable(value.value)
    return repr(value)


def _type_name(t: Any) -> str | None:
    if t is None:
        return None
    if t is json.loads:
        return "json"
    func = getattr(t, "func", None)  # functools.partial
    name = getattr(func or t, "__name__", None)
    return name if name is not None else type(t).__name__


def dump(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Every option of the parser, keyed by its first option string."""
    kinds = {cls: name for name, cls in parser._registries["action"].items() if name is not None}
    options: dict[str, Any] = {}
    for action in parser._actions:
        if not action.option_strings:
            continue  # SGLang's server parser has no positionals
        kind = kinds.get(type(action), type(action).__name__)
        choices = action.choices
        options[action.option_strings[0]] = {
            "option_strings": list(action.option_strings),
            "dest": action.dest,
            "action": kind,
            "nargs": action.nargs,
            # Sorted: argparse reads choices as a set of values, and some of
            # SGLang's lists are built from registries in import order
            # (--reasoning-parser differs between a script and a pytest session).
            "choices": None if choices is None else sorted(_jsonable(list(choices)), key=repr),
            "type": _type_name(action.type),
            "default": None if action.default is argparse.SUPPRESS else _jsonable(action.default),
            "const": _jsonable(action.const),
            "required": bool(action.required),
        }
    return {
        "engine": "sglang",
        "engine_version": _version(),
        "source": "sglang.srt.server_args.ServerArgs.add_cli_args on argparse.ArgumentParser('sglang serve')",
        # argparse's defaults, kept by prepare_server_args: a unique prefix of a
        # long option is that option (`--tp 8` is `--tp-size 8`; SGLang has no
        # `--tp` spelling of its own), and `--flag=value` is accepted.
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "options": dict(sorted(options.items())),
    }


def _version() -> str:
    from importlib.metadata import version

    return version("sglang")


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render(dump(build_parser())))
