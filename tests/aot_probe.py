"""Run by tests/test_kernels_aot.py in a subprocess without TRITON_INTERPRET: the
production AOT check, two configurations that must fail (the proof that the check
can), and the name of every ``@triton.jit`` kernel of the package, as JSON on stdout."""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import sys

import triton

import hisparse_rs.kernels as K
from hisparse_rs.kernels import aot
from hisparse_rs.kernels._launch import Launch
from hisparse_rs.kernels.sparse_mla_decode import decode_aot_launches

SM90 = aot.TARGETS["sm_90"]


def split_launch(kv_cache_dtype: str, **constexprs: int) -> Launch:
    """The 128-head decode split launch on sm_90 with some constexprs replaced."""
    launch = decode_aot_launches(
        SM90.arch, batch=64, s_q=1, h_q=128, topk=2048, kv_cache_dtype=kv_cache_dtype, num_rows=1 << 18
    )[0]
    return dataclasses.replace(launch, constexprs={**launch.constexprs, **constexprs})


def jit_kernels() -> list[str]:
    """Every ``*_kernel`` @triton.jit function in the package's ``_*_triton`` modules."""
    names = []
    for info in pkgutil.iter_modules(K.__path__):
        if info.name.endswith("_triton"):
            module = importlib.import_module(f"hisparse_rs.kernels.{info.name}")
            for name, obj in vars(module).items():
                if isinstance(obj, triton.runtime.JITFunction) and name.endswith("_kernel"):
                    names.append(name)
    return sorted(names)


def main() -> None:
    compiler = aot.Compiler()
    rows = aot.check(aot.TARGETS.values(), compiler=compiler)
    # 64-head tiles: four [128, 64] float32 accumulators, 128 registers a thread on their own.
    spills = split_launch("fp8_ds_mla", BLOCK_H=64)
    # 128-row steps: two stages of [128, 576] bf16 rows, about 300 KB.
    shared = split_launch("bfloat16", BLOCK_N=128)
    controls = aot.check(
        [SM90],
        [
            aot.Case("control", "spills", lambda a: [spills]),
            aot.Case("control", "shared", lambda a: [shared]),
        ],
        compiler=compiler,
    )
    json.dump(
        {
            "rows": [dataclasses.asdict(r) for r in rows],
            "controls": [dataclasses.asdict(r) for r in controls],
            "kernels": jit_kernels(),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
