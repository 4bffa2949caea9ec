"""hisparse-check's table of ``vllm serve`` flags against vLLM 0.33.0's real parser.

hisparse-check reads every ``vllm serve`` flag with a hand-kept table
(rust/hisparse-check/src/vllm_flags.rs; ``_core._vllm_flag_table()`` gives it
as JSON). vLLM's parser is built here as ``vllm serve`` builds it
(``make_arg_parser``, vllm/entrypoints/common/cli_args.py) and every option is
compared: its spellings (aliases, short forms, ``--no-`` and the
``--enable-``/``--disable-`` inverses of ``EnableDisableAction``), which of
them turn it off, its ``nargs``, whether it takes a value, and its choices.
A mismatch prints the table's rows as vLLM has them, to paste in.

Then the parser itself is asked: argv forms it accepts (nargs lists,
store_true flags, choices, abbreviations, JSON with NaN) must pass
hisparse-check's reading, and forms it refuses must be refused.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import vllm_pipeline

from hisparse_rs import _core

MODEL = Path(__file__).resolve().parents[1] / "data" / "models" / "deepseek-v3.2"


def _vllm_rows() -> dict[str, dict[str, Any]]:
    """vLLM's options by long name: the same fields as the table's JSON."""
    parser = vllm_pipeline.serve_parser()
    rows: dict[str, dict[str, Any]] = {}
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
        rows[name] = {
            "option_strings": sorted(positive),
            "negative_option_strings": negative,
            "nargs": action.nargs,
            "takes_value": action.nargs != 0,
            "choices": sorted("None" if c is None else str(c) for c in choices),
            "int_choices": bool(choices)
            and all(isinstance(c, int) and not isinstance(c, bool) for c in choices if c is not None),
        }
    return rows


def _our_rows() -> dict[str, dict[str, Any]]:
    table = json.loads(_core._vllm_flag_table())
    assert table["vllm"] == "0.33.0"
    rows = {}
    for row in table["flags"]:
        name = row.pop("name")
        assert name not in rows, f"--{name} has two rows"
        row["option_strings"] = sorted(row["option_strings"])
        row["negative_option_strings"] = sorted(row["negative_option_strings"])
        row["choices"] = sorted(row["choices"])
        rows[name] = row
    return rows


def _rust_row(name: str, row: dict[str, Any]) -> str:
    """A row of vllm_flags.rs for an option as vLLM declares it."""
    takes = {None: "One", "+": "OneOrMore", "?": "Optional"}.get(row["nargs"])
    if takes is None:
        takes = "Bool" if row["negative_option_strings"] else "StoreTrue"
        takes = "Help" if name == "help" else takes
    aliases = [s for s in row["option_strings"] if s != f"--{name}"]
    alias_text = ", ".join(f'"{a}"' for a in aliases)
    choices = ", ".join(f'"{c}"' for c in row["choices"])
    make = "int_choice_flag" if row["int_choices"] else "flag"
    return f'    {make}("{name}", &[{alias_text}], {takes}, &[{choices}]),'


def test_the_flag_table_is_vllms() -> None:
    vllm, ours = _vllm_rows(), _our_rows()
    problems = []
    for name in sorted(set(vllm) - set(ours)):
        problems.append(f"--{name}: vLLM has it, the table does not")
    for name in sorted(set(ours) - set(vllm)):
        problems.append(f"--{name}: in the table, vLLM 0.33.0 has no such option")
    for name in sorted(set(vllm) & set(ours)):
        for key, want in vllm[name].items():
            if ours[name][key] != want:
                problems.append(f"--{name}: {key} is {ours[name][key]!r}, vLLM's is {want!r}")
    rows = "\n".join(_rust_row(name, row) for name, row in sorted(vllm.items()))
    assert not problems, "\n".join(problems) + "\n\nvLLM's rows:\n" + rows
    # Each of vLLM's option strings, as a figure for the log.
    spellings = sum(len(r["option_strings"]) + len(r["negative_option_strings"]) for r in vllm.values())
    assert spellings > len(vllm) > 300


def _check(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The pip-installed hisparse-check on argv (its exit status and output)."""
    script = "import sys; from hisparse_rs._cli import main; sys.argv[0] = 'hisparse-check'; main()"
    return subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )


def _vllm_accepts(argv: list[str]) -> bool:
    """Whether vLLM's ``vllm serve`` parser reads argv (argparse exits 2 on what it refuses)."""
    parser = vllm_pipeline.serve_parser()
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit:
        return False
    return True


HISPARSE = [
    str(MODEL),
    "--kv-transfer-config",
    '{"kv_connector": "HiSparseConnector", "kv_role": "kv_both", '
    '"kv_connector_extra_config": {"host_pool_gib": 64}}',
    "--attention-config",
    '{"hisparse_config": {}}',
]

ACCEPTED = [
    ["--served-model-name", "a", "b"],
    ["--served-model-name", "a", "b", "--port", "8000"],
    ["--api-key", "k1", "k2", "-tp", "8"],
    ["--cudagraph-capture-sizes", "1", "2", "4", "--served-model-name", "m"],
    ["--headless", "--trust-remote-code", "--no-enable-prefix-caching"],
    ["--disable-prefix-caching"],
    ["--disable-log-stats"],
    ["--max-model", "4096"],
    ["-O3"],
    ["-O", "2"],
    ["--dtype", "bfloat16"],
    ["--seed", "-1"],
    ["--hf-token"],
    ["-qfp8", "--tensor-parallel", "1"],
    ["--speculative-config", '{"method": "deepseek_mtp", "num_speculative_tokens": 1, "x": NaN}'],
    ["--hf-overrides", '{"rope_theta": 1e400}'],
]

REFUSED = [
    ["--served-model-name"],
    ["--dtype", "float7"],
    ["--headless=1"],
    ["--no-headless"],
    ["--port"],
    ["--max"],
    ["--seed", "-1e5"],
    ["--port", "8000", "9000"],
    ["--port", "--", "8000"],
    ["--max-lora-rank", "7"],
]


@pytest.mark.parametrize("extra", ACCEPTED, ids=" ".join)
def test_what_vllm_accepts_is_read(extra: list[str]) -> None:
    argv = HISPARSE + extra
    assert _vllm_accepts(argv), argv
    out = _check(argv)
    assert out.returncode in (0, 1), out.stderr
    assert "error:" not in out.stderr, out.stderr


@pytest.mark.parametrize("extra", REFUSED, ids=" ".join)
def test_what_vllm_refuses_is_refused(extra: list[str]) -> None:
    argv = HISPARSE + extra
    assert not _vllm_accepts(argv), argv
    out = _check(argv)
    assert out.returncode == 2, (out.returncode, out.stdout)
    assert "hisparse-check: error:" in out.stderr
