"""hisparse-check's table of ``vllm serve`` flags against vLLM 0.33.0's real parser.

hisparse-check reads every ``vllm serve`` flag with a table generated from
tests/vllm/vllm_flags.json (scripts/gen_vllm_flags.py writes
rust/hisparse-check/src/vllm_flag_table.rs; ``_core._vllm_flag_table()`` gives
it back as JSON). vLLM's parser is built here as ``vllm serve`` builds it
(``make_arg_parser``, vllm/entrypoints/common/cli_args.py): the JSON must be
dump_flags.py's dump of it, and every option of the table is compared with
it: its spellings (aliases, short forms, ``--no-`` and the
``--enable-``/``--disable-`` inverses of ``EnableDisableAction``), which of
them turn it off, its ``nargs``, whether it takes a value, its choices and
its ``type=`` callable.

Then the parser itself is asked: argv forms it accepts (nargs lists,
store_true flags, choices, abbreviations, JSON with NaN) must pass
hisparse-check's reading, and forms it refuses must be refused; and over
drawn argvs with values each flag's type may refuse (``abc``, ``1.5``, ``-1``
for an int, a misspelled choice, ``--flag=value`` on a boolean, ...),
hisparse-check refuses at argparse exactly what vLLM's parser refuses.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import dump_flags
import pytest
import vllm_pipeline

from hisparse_rs import _core

MODEL = Path(__file__).resolve().parents[1] / "data" / "models" / "deepseek-v3.2"


DUMP = Path(__file__).resolve().parent / "vllm_flags.json"


def test_the_dump_is_vllms() -> None:
    """tests/vllm/vllm_flags.json is what dump_flags.py makes of the installed parser."""
    want = dump_flags.render(dump_flags.dump(vllm_pipeline.serve_parser()))
    assert DUMP.read_text() == want, (
        "tests/vllm/vllm_flags.json is not vLLM's parser: in .venv-vllm run "
        "`cd tests/vllm && python dump_flags.py > vllm_flags.json`, then `python scripts/gen_vllm_flags.py`"
    )


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


def test_the_flag_table_is_vllms() -> None:
    vllm, ours = dump_flags.rows(vllm_pipeline.serve_parser()), _our_rows()
    problems = []
    for name in sorted(set(vllm) - set(ours)):
        problems.append(f"--{name}: vLLM has it, the table does not")
    for name in sorted(set(ours) - set(vllm)):
        problems.append(f"--{name}: in the table, vLLM 0.33.0 has no such option")
    for name in sorted(set(vllm) & set(ours)):
        for key, want in vllm[name].items():
            if ours[name][key] != want:
                problems.append(f"--{name}: {key} is {ours[name][key]!r}, vLLM's is {want!r}")
    regenerate = "regenerate: dump_flags.py > vllm_flags.json, then scripts/gen_vllm_flags.py"
    assert not problems, "\n".join(problems) + "\n\n" + regenerate
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
    ["--port", "-1"],
    ["--max-log-len", "None"],
    ["--moe-backend", "DEEP-GEMM"],
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
    ["--port", "abc"],
    ["--seed", "1.5"],
    ["--max-log-len", "x"],
    ["--max-num-batched-tokens", "1.5K"],
    ["--additional-config", "{rope}"],
    ["--moe-backend", "tritonn"],
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


# Values each type= callable may refuse (or read), for the drawn argvs below.
_VALUES = {
    "int": ["abc", "1.5", "-1", "7", " 8 ", "1_0", "0x10", "", "1e3", "\u0663"],
    "float": ["abc", "1.5", "-1", "nan", "1e-3", "1,5", "", "inf", "0_5"],
    "human_readable_int": ["1.5K", "16k", "abc", "-1", "auto", "2M", "1.5m", "1kk"],
    "json": ["{a}", "{}", "NaN", "x", "[1]", "", '{"a": Infinity}'],
    "union_dict_and_str": ["{a}", "cpu", "{}", " {x} "],
    "dataclass": ["abc", "5", "{a"],
}


def _values(row: dict[str, Any]) -> list[str]:
    """Values to try for an option taking one: its type's, and its choices misspelled."""
    ty = row["type"]
    optional = ty.startswith("optional(")
    inner = ty.removeprefix("optional(").removesuffix(")")
    inner = {"parse_type(json)": "json", "human_readable_int_or_auto": "human_readable_int"}.get(inner, inner)
    values = list(_VALUES.get(inner, ["text"]))
    for c in row["choices"][:3]:
        values += [c, c[:-1], c.upper(), c.replace("_", "-"), f"{c}x"]
    if optional:
        values += ["None", ""]
    return values


# Flags the check reads whose refusal it places at argparse where vLLM's parser takes the
# value and a later step refuses it (not a type= question): ``--kv-cache-dtype text`` (the
# parser's type is str, no choices; CacheConfig refuses it) and ``--hf-overrides cpu``
# (union_dict_and_str keeps text without braces a str; ModelConfig refuses it), and
# ``--speculative-config [1]`` (its type is json.loads, so SpeculativeConfig's fields are
# pydantic's at config, not at argparse as for a dataclass-typed flag).
_OTHER_STAGE = ("kv-cache-dtype", "hf-overrides", "speculative-config")


def _draw(rng: random.Random, rows: dict[str, dict[str, Any]]) -> list[str]:
    """One or two flags, each with a drawn value (or a drawn `=value` on a boolean)."""
    words: list[str] = []
    names = sorted(n for n in rows if n not in ("help", "config", "model", *_OTHER_STAGE))
    for name in rng.sample(names, rng.randint(1, 2)):
        row = rows[name]
        if not row["takes_value"]:
            spelling = rng.choice(row["option_strings"] + row["negative_option_strings"])
            words.append(rng.choice([spelling, f"{spelling}=1", f"{spelling}=false", f"{spelling}="]))
            continue
        picked = [rng.choice(_values(row)) for _ in range(2 if row["nargs"] == "+" else 1)]
        if len(picked) == 1 and rng.random() < 0.5:
            words.append(f"--{name}={picked[0]}")
        else:
            words += [f"--{name}", *picked]
    return words


def _check_refuses(argv: list[str]) -> bool:
    """Whether hisparse-check refuses argv at argparse: a usage error (its reading of vLLM's
    argparse), or an error at stage ``argparse`` (a JSON flag it reads: ``--attention-config 5``)."""
    try:
        report = _core.check_vllm_argv(argv)
    except ValueError:
        return True
    except _core.ModelLoadError:
        return False  # read past argparse (`--hf-config-path=` names no config)
    return any(d.stage == "argparse" for d in report.errors)


def test_drawn_values_are_refused_as_vllms_parser_refuses_them() -> None:
    rows = dump_flags.rows(vllm_pipeline.serve_parser())
    rng = random.Random(22)
    disagree, refused, drawn = [], 0, 1500
    for _ in range(drawn):
        extra = _draw(rng, rows)
        argv = HISPARSE + extra
        vllm_refuses = not _vllm_accepts(argv)
        refused += vllm_refuses
        if _check_refuses(argv) != vllm_refuses:
            disagree.append(f"{extra}: vLLM {'refuses' if vllm_refuses else 'accepts'}")
    assert not disagree, f"{len(disagree)} of {drawn} disagree:\n" + "\n".join(disagree[:40])
    assert drawn // 5 < refused < drawn - drawn // 5, refused  # both verdicts are drawn often
