"""Break-it regressions, against vLLM 0.33.0's own ``vllm serve`` parser: number
forms Python's ``int()`` / ``float()`` / ``human_readable_int`` read (any
script's digits, ``_`` between digits, surrounding spaces) are read by
hisparse-check too, and what they refuse is refused, as ``vllm serve`` does.
Before: ``-tp " 8"``, ``-tp 0_8`` and ``--block-size ٦٤`` were exit 2 here;
``int("\\x1c1")`` (a ValueError) was read as 1.
"""

from __future__ import annotations

import pytest
from test_flag_table import HISPARSE, _check, _vllm_accepts

ACCEPTED = [
    ["-tp", " 8"],
    ["-tp", "0_8"],
    ["-tp", "\u0668"],
    ["--block-size=\u0666\u0664"],
    ["--block-size", " +6_4 "],
    ["--max-num-seqs", "1_0"],
    ["--max-model-len", "\u0663k"],
    ["--max-model-len", "\x1c4096"],
    ["--max-model-len", " AUTO "],
    ["--gpu-memory-utilization", " 0.9"],
    ["--gpu-memory-utilization", "0.9_0"],
]

REFUSED = [
    ["-tp", "\x1c8"],
    ["-tp", "1__0"],
    ["-tp", "8.0"],
    ["--block-size", "\u00b2"],
    ["--gpu-memory-utilization", "0__9"],
    ["--max-model-len", "1.5K"],
]


@pytest.mark.parametrize("extra", ACCEPTED, ids=repr)
def test_number_forms_vllm_reads_are_read(extra: list[str]) -> None:
    argv = [*HISPARSE, *extra]
    assert _vllm_accepts(argv), argv
    out = _check(argv)
    assert out.returncode in (0, 1), out.stderr
    assert "error:" not in out.stderr, out.stderr


@pytest.mark.parametrize("extra", REFUSED, ids=repr)
def test_number_forms_vllm_refuses_are_refused(extra: list[str]) -> None:
    argv = [*HISPARSE, *extra]
    assert not _vllm_accepts(argv), argv
    out = _check(argv)
    assert out.returncode == 2, (out.returncode, out.stdout)
    assert "hisparse-check: error:" in out.stderr
