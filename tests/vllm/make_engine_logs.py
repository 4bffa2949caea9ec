"""Write tests/data/engine_logs/vllm-dsv32-tp8-hisparse.log: a vLLM 0.33.0 start-up
log of a DeepSeek-V3.2 HiSparse launch on 8 GPUs (TP 8, fp8_ds_mla, a
HiSparseConnector with host_pool_gib 128), made by vLLM's own code in
.venv-vllm (run from tests/vllm: ``../../.venv-vllm/bin/python make_engine_logs.py``).

- the logger and its format are vLLM's (``vllm.logger``'s handler and
  ``NewLineFormatter``, logger.py:28-33: ``(EngineCore_DP0 pid=N) INFO date
  [file.py:line] message``; the process name set by ``set_vllm_process_name``,
  logger.py:54-60);
- "Initializing a V1 LLM engine (v%s) with config: %s" is v1/engine/core.py:140's
  statement on the real ``VllmConfig`` ``vllm serve`` builds for the launch
  (``vllm_capacity.engine_config``: vLLM's parser and ``create_engine_config``);
- "Model loading took %s GiB memory and %.6f seconds" (v1/worker/gpu_model_runner.py:5088-5092)
  and "Available KV cache memory: %s GiB" (v1/worker/gpu_worker.py:772-775)
  are those statements, their format strings read from the wheel, with the
  weights and the KV room a rank of this launch has (``WEIGHTS_BYTES``,
  ``KV_ROOM_BYTES``: inputs, not a measurement; the room is a multiple of
  0.01 GiB, so the logged figure is the room itself);
- "HiSparse HMA: ..." is logged by vLLM's own ``get_hisparse_kv_cache_config``
  (v1/hisparse/layout.py:325-381, through ``get_kv_cache_config_from_groups``)
  and "GPU + host KV cache size: ... Maximum concurrency ..." by its own
  ``update_kv_cache_capacity`` (v1/core/kv_cache_utils.py:1135-1152), run on
  the KV-cache groups of the layer specs the model runner registers
  (``vllm_capacity.layer_specs``) with that room: the capacity lines are
  vLLM's arithmetic, not ours.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

import vllm_pipeline
from vllm_capacity import engine_config, layer_specs, resolve_layout

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "engine_logs" / "vllm-dsv32-tp8-hisparse.log"
MODEL = ROOT / "tests" / "data" / "models" / "deepseek-v3.2"
ARGS = {
    "model": str(MODEL),
    "tensor_parallel_size": 8,
    "kv_cache_dtype": "fp8_ds_mla",
    "kv_transfer_config": {
        "kv_connector": "HiSparseConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": 128},
    },
}
WEIGHTS_BYTES = int(78.63 * 2**30)
KV_ROOM_BYTES = int(47.35 * 2**30)


def main() -> int:
    # As conftest.py sets the session up: vLLM's CudaPlatform on the no-device
    # driver stub (README.md here); INFO, for the lines are info lines.
    stub_dir = Path(tempfile.mkdtemp(prefix="hisparse-nodevice-cuda-"))
    os.environ["VLLM_LOGGING_LEVEL"] = "INFO"
    os.environ["VLLM_HAS_FLASHINFER_CUBIN"] = "1"
    os.environ["TRITON_LIBCUDA_PATH"] = str(stub_dir)
    vllm_pipeline.install_nodevice_cuda(vllm_pipeline.build_stub(stub_dir))
    from vllm import __version__ as vllm_version
    from vllm.logger import set_vllm_process_name
    from vllm.utils.mem_utils import format_gib
    from vllm.v1.core.kv_cache_planning import get_kv_cache_config_from_groups, get_kv_cache_groups
    from vllm.v1.core.kv_cache_utils import update_kv_cache_capacity
    from vllm_pipeline import _environment

    vllm_config, loaded = engine_config(ARGS)
    lines: list[str] = []
    root = logging.getLogger("vllm")
    formatter = root.handlers[0].formatter

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    keep = Keep()
    keep.setFormatter(formatter)
    root.addHandler(keep)
    set_vllm_process_name("EngineCore_DP0")
    try:
        import vllm

        wheel = Path(vllm.__file__).parent

        def log(module: str, line: int, fmt: str, *args: object) -> None:
            """vLLM's statement at module:line (its format string), as that module's logger emits it."""
            logger = logging.getLogger(f"vllm.{module.replace('/', '.')}")
            path = str(wheel / f"{module}.py")
            logger.handle(logger.makeRecord(logger.name, logging.INFO, path, line, fmt, args, None))

        init = "Initializing a V1 LLM engine (v%s) with config: %s"
        log("v1/engine/core", 139, init, vllm_version, vllm_config)
        log(
            "v1/worker/gpu_model_runner",
            5088,
            "Model loading took %s GiB memory and %.6f seconds",
            format_gib(WEIGHTS_BYTES),
            41.87,
        )
        log("v1/worker/gpu_worker", 772, "Available KV cache memory: %s GiB", format_gib(KV_ROOM_BYTES))
        with _environment(ARGS):
            specs = layer_specs(vllm_config, loaded)
            resolve_layout(vllm_config, loaded[0], specs)
            groups = get_kv_cache_groups(vllm_config, dict(specs))
            config = get_kv_cache_config_from_groups(vllm_config, groups, KV_ROOM_BYTES)
            update_kv_cache_capacity(vllm_config, config)
    finally:
        root.removeHandler(keep)
    text = "\n".join(lines).replace(str(MODEL), "tests/data/models/deepseek-v3.2")
    OUT.write_text(text + "\n")
    print(f"wrote {OUT} ({len(lines)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
