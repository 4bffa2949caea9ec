"""Write tests/data/engine_logs/sglang-dsv32-tp8-hisparse.log: an SGLang 0.5.23
start-up log of a DeepSeek-V3.2 P/D decode launch with HiSparse on 8 x H200, made
by SGLang's own code in .venv-sglang (run from tests/sglang:
``../../.venv-sglang/bin/python make_engine_logs.py``).

- the logger is SGLang's (``configure_logger(server_args, prefix=" TP0")``,
  srt/utils/common.py:2618-2638: ``[time TP0] message``);
- ``server_args=...`` is entrypoints/engine.py:311 on the real resolved
  ServerArgs (``prepare_server_args`` + ``resolve_once``, then
  ``_server_args_for_logging``, engine.py:173-174);
- "Load weight end. ..." is model_executor/model_runner.py:1372-1379's
  f-string with the free memory and the weights a rank of this launch has on
  an H200 (140.4 GiB free before loading, as the driver reports an H200, and
  78.2 GiB of weights: the figures are inputs, not SGLang's measurement).

The scheduler's ``max_total_num_tokens=...`` line needs the model runner's
pool configurator on a GPU, so it is not in this log.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import sglang_oracle

OUT = Path(__file__).resolve().parents[1] / "data" / "engine_logs" / "sglang-dsv32-tp8-hisparse.log"
FREE_BEFORE_GIB = 140.40
WEIGHTS_GIB = 78.20


def main() -> int:
    sglang_oracle.import_sglang()
    # entrypoints/engine.py:173-174's _server_args_for_logging (engine.py
    # itself imports uvloop, which this venv leaves out).
    from sglang.srt.sampling.watermarking.core import redact_watermark_secrets
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils.common import configure_logger

    argv = [
        "--model-path", sglang_oracle.model_dir("deepseek-v3.2"),
        "--device", "cuda",
        "--tp-size", "8",
        "--enable-hisparse",
        "--disaggregation-mode", "decode",
        "--hisparse-config", '{"device_buffer_size": 4096}',
        # What SGLang resolves on an H200 (its heuristic reads the GPU's
        # memory, which this machine has not: tests/test_sglang_plan.py works it out).
        "--mem-fraction-static", "0.929",
    ]  # fmt: skip
    server_args = prepare_server_args(argv)
    server_args.resolve_once()
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    configure_logger(server_args, prefix=" TP0")
    keep = Keep()
    keep.setFormatter(logging.getLogger().handlers[0].formatter)
    logging.getLogger().addHandler(keep)
    logging.getLogger("sglang.srt.entrypoints.engine").info(
        f"server_args={redact_watermark_secrets(server_args.resolved_dict())}"
    )
    after = FREE_BEFORE_GIB - WEIGHTS_GIB
    logging.getLogger("sglang.srt.model_executor.model_runner").info(
        f"Load weight end. "
        f"elapsed={512.34:.2f} s, "
        f"type=DeepseekV32ForCausalLM, "
        f"avail mem={after:.2f} GB, "
        f"mem usage={WEIGHTS_GIB:.2f} GB."
    )
    # The model's own path is a temporary copy: name the bundled one instead.
    copy = sglang_oracle.model_dir("deepseek-v3.2")
    text = "\n".join(lines).replace(copy, "tests/data/models/deepseek-v3.2")
    OUT.write_text(text + "\n")
    print(f"wrote {OUT} ({len(lines)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
