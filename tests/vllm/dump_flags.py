"""Dump vLLM 0.33.0's real ``vllm serve`` argparse parser as sorted, stable JSON.

The parser is built as ``vllm serve`` builds it: ``make_arg_parser`` on a
``FlexibleArgumentParser(prog="vllm serve")`` (vllm/entrypoints/common/cli_args.py,
``FrontendArgs`` and ``AsyncEngineArgs.add_cli_args`` in vllm/engine/arg_utils.py),
on vLLM's CUDA platform without a GPU (``vllm_pipeline.install_nodevice_cuda``:
``--mm-processor-device`` has ``cuda`` among its choices, arg_utils.py:1569).

One entry per option, keyed by its long name without dashes, with its
spellings (``option_strings``; those that turn it off, ``--no-X`` and
``EnableDisableAction``'s ``--disable-X`` / ``--enable-X``, apart), ``nargs``,
whether it takes a value, its ``choices`` (sorted text; ``None`` for the None
that ``optional_type`` adds), whether they are ints, ``action`` (argparse's registry name: ``store``,
``store_true``, ``append``, ``help``; a class of vLLM's by its name:
``EnableDisableAction``, ``LoRAParserAction``, which reads each value as
``name=path`` or a JSON ``LoRAModulePath``, cli_args.py:38-69,
``DeprecatedLogConfigFileAction``), and ``type``: the
``type=`` callable argparse applies to each value, by name:

- ``int``, ``float``, ``str``, ``json`` (``json.loads``), ``none`` (no type);
- vLLM's own: ``human_readable_int``, ``human_readable_int_or_auto``
  (utils/argparse_utils.py:30-94), ``union_dict_and_str`` (arg_utils.py:182),
  ``parse_reasoning_parser`` (arg_utils.py:188), ``dataclass`` (a config
  dataclass's ``parse_dataclass``: pydantic's ``validate_json``,
  arg_utils.py:369-374), ``parse_type(X)`` (arg_utils.py:161-170),
  ``optional(X)`` (``optional_type``: ``""`` and ``None`` are None,
  arg_utils.py:173-179), and the two lambdas of ``add_cli_args``:
  ``lower_dashes`` (``s.lower().replace("-", "_")``, arg_utils.py:1844-1850)
  and ``device_ids`` (arg_utils.py:1196).

Run in .venv-vllm from tests/vllm: ``python dump_flags.py > vllm_flags.json``
regenerates the committed table, then ``python scripts/gen_vllm_flags.py``
writes the Rust rows (test_flag_table.py fails while the dump and the JSON
differ; the crate test ``flag_table_matches_json`` while the JSON and the rows do).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import vllm_pipeline

_NAMED = ("human_readable_int", "human_readable_int_or_auto", "union_dict_and_str", "parse_reasoning_parser")


def _type_name(t: Any) -> str:
    """The name of a ``type=`` callable, as the docstring above lists them."""
    if t is None:
        return "none"
    if t is json.loads:
        return "json"
    if t in (int, float, str):
        return str(t.__name__)
    name = getattr(t, "__qualname__", "")
    inner = [c.cell_contents for c in (getattr(t, "__closure__", None) or ())]
    if name == "optional_type.<locals>._optional_type":
        return f"optional({_type_name(inner[0])})"
    if name == "parse_type.<locals>._parse_type":
        return f"parse_type({_type_name(inner[0])})"
    if name.endswith("parse_dataclass"):
        return "dataclass"
    if name.endswith("<lambda>"):
        names = t.__code__.co_names
        if names == ("split",):  # the comprehension of device ids (its isdigit is in an inner code)
            return "device_ids"
        if "lower" in names and "replace" in names:
            return "lower_dashes"
    if name in _NAMED:
        return name
    raise ValueError(f"a type= callable this dump does not name: {t!r}; add it (and to the Rust Ty)")


def rows(parser: argparse.ArgumentParser) -> dict[str, dict[str, Any]]:
    """vLLM's options by long name."""
    kinds = {cls: name for name, cls in parser._registries["action"].items() if isinstance(name, str)}
    out: dict[str, dict[str, Any]] = {}
    for action in parser._actions:
        if not action.option_strings:
            continue  # the positional model_tag
        spellings = sorted(s for s, a in parser._option_string_actions.items() if a is action)
        negative = sorted(getattr(action, "negative_option_strings", set()))
        if isinstance(action, argparse.BooleanOptionalAction) and not negative:
            negative = sorted(s for s in spellings if s.startswith("--no-"))
        positive = [s for s in spellings if s not in negative]
        name = next(s for s in action.option_strings if s.startswith("--") and s in positive)[2:]
        choices = [] if action.choices is None else list(action.choices)
        out[name] = {
            "option_strings": sorted(positive),
            "negative_option_strings": negative,
            "nargs": action.nargs,
            "takes_value": action.nargs != 0,
            "choices": sorted("None" if c is None else str(c) for c in choices),
            "int_choices": bool(choices)
            and all(isinstance(c, int) and not isinstance(c, bool) for c in choices if c is not None),
            "type": _type_name(action.type),
            "action": kinds.get(type(action), type(action).__name__),
        }
    return dict(sorted(out.items()))


def dump(parser: argparse.ArgumentParser) -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "engine": "vllm",
        "engine_version": version("vllm"),
        "source": "vllm.entrypoints.common.cli_args.make_arg_parser on "
        "FlexibleArgumentParser(prog='vllm serve'), CUDA platform without a GPU",
        "options": rows(parser),
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


if __name__ == "__main__":
    stub_dir = Path(tempfile.mkdtemp(prefix="hisparse-nodevice-cuda-"))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ["VLLM_HAS_FLASHINFER_CUBIN"] = "1"
    os.environ["TRITON_LIBCUDA_PATH"] = str(stub_dir)
    vllm_pipeline.install_nodevice_cuda(vllm_pipeline.build_stub(stub_dir))
    sys.stdout.write(render(dump(vllm_pipeline.serve_parser())))
