"""hisparse-check's reading of an ``sglang serve`` argv is SGLang 0.5.23's own:
drawn command lines (aliases, prefixes, ``--flag=value``, store_true with a
value, bad types and choices, unknown and ambiguous flags, ``--``) go through
SGLang's real parser (``prepare_server_args``' parser, dump_flags.build_parser)
and through ``hisparse_rs._core._sglang_argv_json``, the Rust reader the CLI and
``check_sglang_argv`` use. They must agree: the same values for every option
given, or both refuse, with SGLang's message among ours (argparse stops at its
first error; ours lists them all, and each unrecognized flag apart, where
argparse joins them into one "unrecognized arguments" message).

Known, documented differences (DOCS_sgcli.md): argparse lists an ambiguous
prefix's matches and a choice list in registration order, the dumped table in
sorted order, so those messages are compared up to the list's order.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from typing import Any

import dump_flags
from hypothesis import given, settings
from hypothesis import strategies as st

from hisparse_rs import _core

PARSER = dump_flags.build_parser()

WORDS: list[list[str]] = [
    ["--tp", "8"],
    ["--tp=4"],
    ["--tp-size", "x"],
    ["--tensor-parallel-size", "2"],
    ["--dp", "2"],
    ["--ep", "8"],
    ["--expert-parallel-size=4"],
    ["--pp-size", "1"],
    ["--dcp-size", "2"],
    ["--enable-hisparse"],
    ["--enable-hisparse=1"],
    ["--enable-hisparse="],
    ["--enable-hi"],
    ["--enable-hisp"],
    ["--hisparse-config", '{"top_k": 2048}'],
    ["--hierarchical-sparse-attention-extra-config", "not json"],
    ["--hisparse", "{}"],
    ["--page-size", "-64"],
    ["--page-size"],
    ["--pagesize", "64"],
    ["--kv-cache-dtype", "fp8_e4m3"],
    ["--kv-cache-dtype", "fp9"],
    ["--disaggregation-mode", "decode"],
    ["--disaggregation-mode", "dec"],
    ["--disable-radix-cache"],
    ["--no-enable-tf32-matmul"],
    ["--enable-dp-attention"],
    ["--mem-fraction-static", "0.85"],
    ["--mem-fraction-static", "-5e3"],
    ["--mem-fraction-static", "-.5"],
    ["--chunked-prefill-size", "1k"],
    ["--max-running-requests", " 64 "],
    ["--max-lora-chunk-size", "17"],
    ["--max-lora-chunk-size", "32"],
    ["--cuda-graph-bs-decode", "1", "2", "4"],
    ["--cuda-graph-bs-decode"],
    ["--json-model-override-args", '{"a": 1}'],
    ["--json-model-override-args", "{bad"],
    ["--model-checksum"],
    ["--speculative-num-draft-tokens", "3.5"],
    ["--port", "30000"],
    ["--trust-remote-code"],
    ["stray"],
    ["-x"],
    ["--", "tail"],
]


def sglang_reads(argv: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """SGLang's namespace, or argparse's error message (after 'sglang serve: error: ')."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            return vars(PARSER.parse_args(argv)), None
        except SystemExit:
            pass
    lines = [line for line in err.getvalue().splitlines() if "error: " in line]
    return None, lines[-1].split("error: ", 1)[1] if lines else err.getvalue()


def listed(message: str) -> str:
    """The message with an ambiguous prefix's matches or a choice list sorted."""
    m = re.match(r"^(.*(?:could match |choose from ))(.*?)(\)?)$", message)
    if not m:
        return message
    return m.group(1) + ", ".join(sorted(m.group(2).split(", "))) + m.group(3)


@settings(max_examples=400)
@given(st.lists(st.sampled_from(WORDS), max_size=5), st.booleans())
def test_argv_reading_is_sglangs(words: list[list[str]], with_model: bool) -> None:
    argv = (["--model-path", "m"] if with_model else []) + [w for ws in words for w in ws]
    ours = json.loads(_core._sglang_argv_json(argv))
    namespace, error = sglang_reads(argv)
    if namespace is not None:
        assert ours["problems"] == [], (argv, ours["problems"])
        for dest, value in ours["values"].items():
            assert namespace[dest] == value, (argv, dest, namespace[dest], value)
    else:
        assert error is not None
        messages = [listed(p["message"]) for p in ours["problems"]]
        prefix = "unrecognized arguments: "
        if error.startswith(prefix):
            # argparse's last check: every other problem would have come first.
            assert all(p["kind"] == "Unrecognized" for p in ours["problems"]), (argv, messages)
            joined = " ".join(m.removeprefix(prefix) for m in messages)
            assert joined == error.removeprefix(prefix), (argv, error, messages)
        else:
            assert listed(error) in messages, (argv, error, messages)
