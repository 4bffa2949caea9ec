"""What the vLLM plugin adds to a ``vllm serve`` start-up: ``preflight()`` against
vLLM's own ``create_engine_config()``.

Runs in the vLLM venv that scripts/test.sh makes, on the no-device CUDA
platform of the plugin tests (tests/vllm/vllm_pipeline.py; gcc builds the
driver stub)::

    .venv-vllm/bin/python benches/bench_vllm_plugin.py [--calls 200]

Prints the Markdown rows kept in benches/README.md: the median of
``hisparse_rs.vllm_plugin.preflight`` on the DeepSeek-V3.2 decode P/D
``EngineArgs`` (valid, and with three errors: the report is rendered and
raised), each against ``create_engine_config()`` of the same arguments with
the plugin off (what vLLM spends building its config, model config included,
before any model work), in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DSV32 = ROOT / "tests" / "data" / "models" / "deepseek-v3.2"


def median_us(fn: Callable[[], Any], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    sys.path.insert(0, str(ROOT / "tests" / "vllm"))
    pipeline: Any = importlib.import_module("vllm_pipeline")
    pipeline.install_nodevice_cuda(pipeline.build_stub(Path(tempfile.mkdtemp())))

    from vllm.config import KVTransferConfig
    from vllm.engine.arg_utils import EngineArgs

    from hisparse_rs import vllm_plugin

    def engine_args(host_pool_gib: float, **kwargs: Any) -> Any:
        kv = {
            "kv_connector": "MultiConnector",
            "kv_role": "kv_consumer",
            "kv_connector_extra_config": {
                "connectors": [
                    {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
                    {
                        "kv_connector": "HiSparseConnector",
                        "kv_role": "kv_both",
                        "kv_connector_extra_config": {"host_pool_gib": host_pool_gib},
                    },
                ]
            },
        }
        return EngineArgs(
            model=str(DSV32),
            skip_tokenizer_init=True,
            tensor_parallel_size=8,
            kv_cache_dtype="fp8_ds_mla",
            kv_transfer_config=KVTransferConfig(**kv),
            **kwargs,
        )

    valid = engine_args(128)
    broken = engine_args(4, block_size=32, scheduler_reserve_full_isl=False)

    def check(args: Any) -> None:
        os.environ.pop("HISPARSE_RS_PREFLIGHT_CHECKED", None)  # check every call
        with contextlib.suppress(ValueError):
            vllm_plugin.preflight(args)

    os.environ["HISPARSE_RS_PREFLIGHT"] = "0"
    engine_args(128).create_engine_config()  # warm vLLM's caches (model inspection)
    baseline = median_us(lambda: engine_args(128).create_engine_config(), max(20, calls // 10))
    os.environ.pop("HISPARSE_RS_PREFLIGHT")
    rows = [
        ("valid DeepSeek-V3.2 decode P/D", median_us(lambda: check(valid), calls)),
        ("the same with 3 errors (report rendered and raised)", median_us(lambda: check(broken), calls)),
    ]
    print("| what | figure | baseline (same run) | ratio | target |")
    print("|---|---|---|---|---|")
    for what, us in rows:
        print(
            f"| `preflight()`, {what} | {us / 1000:.2f} ms | vLLM `create_engine_config()` "
            f"{baseline / 1000:.1f} ms | {us / baseline:.3f}x | < 5 ms |"
        )


if __name__ == "__main__":
    main()
