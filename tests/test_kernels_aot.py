"""Ahead-of-time compile proof (kernels/aot.py): every Triton kernel, at the launches its
launcher makes for the production shapes, compiles for sm_90 and sm_100 with the ptxas in
Triton's wheel, without spills and within shared memory; benches/README.md shows the
table this compile gives. No GPU: the compile runs in a subprocess without
TRITON_INTERPRET (under the interpreter ``@triton.jit`` functions cannot be compiled)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hisparse_rs
from conftest import MODELS, ROOT
from hisparse_rs.kernels import aot
from hisparse_rs.kernels.sparse_mla_decode import TRITON_VERSION

README = ROOT / "benches" / "README.md"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton_cache"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "aot_probe.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    for key in ("rows", "controls"):
        result[key] = [aot.Row(**{**r, "problems": tuple(r["problems"])}) for r in result[key]]
    return result


def test_every_kernel_is_compiled_for_every_target(compiled: dict[str, Any]) -> None:
    rows: list[aot.Row] = compiled["rows"]
    for target in aot.TARGETS:
        done = {r.kernel for r in rows if r.target == target}
        assert done == set(compiled["kernels"]), (
            f"{target}: kernels without a production case in aot.production_cases(): "
            f"{sorted(set(compiled['kernels']) - done)}"
        )
    cases = {(c.op, c.shape) for c in aot.production_cases()}
    assert {(r.op, r.shape, r.target) for r in rows} == {
        (op, shape, t) for op, shape in cases for t in aot.TARGETS
    }


OLDER_TRITON_SPILLS = {("sm_90", "_decode_split_kernel", "fp8_ds_mla"): 8}
"""The one deviation allowed, and only under Triton before 3.9: with Triton 3.6 (the lowest
supported: the lent H200 image's, scripts/gpu_rehearsal.sh) the fp8_ds_mla split kernel on
sm_90 takes all 255 registers and spills 8 B a thread at every decode shape (3.9: 234
registers, none). Keyed by (target, kernel, rows); the value is the bytes it spills."""


def test_no_spills_and_shared_memory_within_the_limit(compiled: dict[str, Any]) -> None:
    allowed = OLDER_TRITON_SPILLS if TRITON_VERSION < (3, 9) else {}
    seen: set[tuple[str, str, str]] = set()
    bad = []
    for r in compiled["rows"]:
        key = (r.target, r.kernel, r.shape.split(",")[0])
        if key in allowed and r.local_bytes == allowed[key] and all("spills" in p for p in r.problems):
            seen.add(key)
        elif r.problems:
            bad.append(f"{r.kernel} [{r.shape}] {r.target}: {'; '.join(r.problems)}")
    assert not bad, "\n".join(bad)
    assert seen == set(allowed), f"allowed spills no longer seen: {set(allowed) - seen}; remove them"
    for r in compiled["rows"]:
        assert r.registers <= 255 and r.blocks_per_sm >= 1


def test_the_check_fails_a_spill_and_an_oversized_tile(compiled: dict[str, Any]) -> None:
    spills, shared = compiled["controls"]
    assert spills.local_bytes > 0 and any("spills" in p for p in spills.problems)
    assert shared.shared_bytes > aot.TARGETS["sm_90"].shared_per_block
    assert any("shared memory" in p for p in shared.problems)


def test_the_config_check_reports_the_compiled_resolver_shared_memory(compiled: dict[str, Any]) -> None:
    # hisparse-check prints our Triton resolver's shared memory beside vLLM's
    # (sizes.rs triton_resolver_shared_memory_bytes): the compiled kernel's figure.
    rows = [r for r in compiled["rows"] if r.kernel == "_resolve_residency_kernel"]
    assert len(rows) == 3 * len(aot.TARGETS)
    kv = {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": 512},
    }
    for r in rows:
        m = re.match(r"dbs (\d+), (\d+) rows? per state", r.shape)
        assert m, r.shape
        dbs, per_state = int(m[1]), int(m[2])
        spec = {"speculative_config": {"method": "mtp", "num_speculative_tokens": per_state - 1}}
        hs = hisparse_rs.resolve(
            MODELS / "deepseek-v3.2",
            kv_transfer_config=kv,
            attention_config={"hisparse_config": {"device_buffer_size": dbs}},
            **(spec if per_state > 1 else {}),
        ).hisparse
        assert hs is not None and hs.max_decode_query_len == per_state
        assert hs.triton_resolver_shared_memory_bytes == r.shared_bytes, r


def _committed_table(path: Path) -> str:
    text = path.read_text()
    assert aot.README_BEGIN in text and aot.README_END in text, f"{path} lacks the generated AOT table"
    return text.split(aot.README_BEGIN, 1)[1].split(aot.README_END, 1)[0].strip("\n") + "\n"


def _keys(table: str) -> list[str]:
    # "target | operation | shape | kernel" of every row, in order.
    keys, target = [], ""
    for line in table.splitlines():
        if line.startswith("**"):
            target = line.split("**")[1]
        elif line.startswith("| ") and not line.startswith("| operation"):
            keys.append(" | ".join([target, *[c.strip() for c in line.split("|")[1:4]]]))
    return keys


def test_benches_readme_table_is_current(compiled: dict[str, Any]) -> None:
    fresh = aot.render_markdown(compiled["rows"])
    committed = _committed_table(README)
    fix = "python -m hisparse_rs.kernels.aot --write-readme benches/README.md"
    assert _keys(committed) == _keys(fresh), f"the table lists other kernels or shapes. Fix: {fix}"
    if committed.splitlines()[0] == fresh.splitlines()[0]:  # same Triton and ptxas: same figures
        assert committed == fresh, f"the figures changed. Fix: {fix}"


@pytest.mark.parametrize(
    ("registers", "warps", "shared", "tmem", "want"),
    [
        (255, 8, 0, 0, (1, "registers")),  # 255 -> 256 a thread: 8 warps use the whole SM
        (128, 8, 0, 0, (2, "registers")),
        (168, 4, 0, 0, (3, "registers")),  # 168 x 32 = 5376 per warp: 3 warps per 16 K sub-partition
        (24, 4, 0, 0, (16, "threads")),  # 2048 threads / 128
        (22, 1, 0, 0, (32, "blocks")),
        (64, 4, 100 * 1024, 0, (2, "shared memory")),  # 101 KB + 1 KB reserved, twice in 228 KB
        (64, 4, 232448, 0, (1, "shared memory")),
        (64, 4, 0, 256, (2, "tensor memory")),
    ],
)
def test_occupancy_bound(registers: int, warps: int, shared: int, tmem: int, want: tuple[int, str]) -> None:
    res = aot.Resources(
        registers=registers, local_bytes=0, shared_bytes=shared, tensor_memory_columns=tmem, num_warps=warps
    )
    assert res.occupancy(aot.TARGETS["sm_100"]) == want
