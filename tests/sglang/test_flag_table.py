"""The committed tests/sglang/sglang_flags.json is SGLang 0.5.23's real parser.

hisparse-check's SGLang flag table is generated / checked from that file, so
it must be what `ServerArgs.add_cli_args` builds in the installed SGLang: on
an SGLang upgrade this fails until `python dump_flags.py > sglang_flags.json`
is rerun (and the Rust table with it).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import dump_flags

COMMITTED = Path(__file__).resolve().parent / "sglang_flags.json"


def test_committed_table_is_sglangs_parser() -> None:
    live = dump_flags.render(dump_flags.dump(dump_flags.build_parser()))
    committed = COMMITTED.read_text()
    if live != committed:
        diff = "".join(
            list(
                difflib.unified_diff(
                    committed.splitlines(keepends=True),
                    live.splitlines(keepends=True),
                    "sglang_flags.json (committed)",
                    "SGLang's parser (installed)",
                )
            )[:200]
        )
        raise AssertionError(
            "tests/sglang/sglang_flags.json differs from the installed SGLang's parser; "
            "regenerate it (cd tests/sglang && ../../.venv-sglang/bin/python dump_flags.py "
            f"> sglang_flags.json) and the Rust table from it:\n{diff}"
        )


def test_table_covers_the_flags_hisparse_reads() -> None:
    """The flags issue 16 names are SGLang's own spellings (a rename upstream fails here first)."""
    options = json.loads(COMMITTED.read_text())["options"]
    spellings = {s for entry in options.values() for s in entry["option_strings"]}
    for flag in (
        "--model-path", "--tp-size", "--dp-size", "--ep-size", "--pp-size", "--dcp-size",
        "--enable-dp-attention", "--attn-dp-size", "--nnodes", "--enable-hisparse",
        "--hisparse-config", "--hierarchical-sparse-attention-extra-config", "--page-size",
        "--kv-cache-dtype", "--dsa-prefill-backend", "--dsa-decode-backend", "--attention-backend",
        "--disable-radix-cache", "--disaggregation-mode", "--disaggregation-transfer-backend",
        "--enable-hierarchical-cache", "--enable-mixed-chunk", "--chunked-prefill-size",
        "--max-running-requests", "--mem-fraction-static", "--max-total-tokens",
        "--speculative-algorithm", "--speculative-num-draft-tokens", "--speculative-eagle-topk",
        "--speculative-num-steps", "--device",
    ):  # fmt: skip
        assert flag in spellings, flag
    hisparse = options["--enable-hisparse"]
    assert (hisparse["action"], hisparse["nargs"], hisparse["default"]) == ("store_true", 0, False)
    assert options["--hisparse-config"]["option_strings"] == [
        "--hisparse-config",
        "--hierarchical-sparse-attention-extra-config",
    ]
