"""GPU benchmark of the kernels; writes JSON and Markdown results. Needs CUDA.

Run through ``scripts/gpu_check.sh`` (which first runs the kernel tests on the
GPU), or directly::

    python benches/gpu_kernels.py --out gpu_results

- **Sparse MLA decode** at batch 64, top-k 2048, 128 heads (DeepSeek-V3.2
  decode) at s_q 1 and 2 and 16 / 8 heads per rank (GLM-5 at TP4 / TP8) at
  s_q 1, fp8_ds_mla and bf16 rows, each request's top-k in its own 4096-row hot
  buffer: time per call, TFLOP/s and GB/s from ``hisparse_rs.kernels.perf``
  (570 MFLOP and 1.62 MB per query token at 128 heads, HISPARSE.md §7; the
  bytes count each row once, although every head tile reads it, the first time
  from HBM). Each shape records the launcher's tiling (heads per program, rows
  per step, warps, stages), its head tiles and top-k splits. FlashMLA's sparse
  decode runs on the same fp8 inputs in the same process when ``flash_mla``
  imports; the ratio is ours / theirs (issue target: >= 0.70 at 128 heads).
  Otherwise the result says why not.
- **AOT cross-check**: each decode launch of the shapes above as the GPU's
  driver loaded it (registers, spills, shared memory from Triton's handle)
  against ``hisparse_rs.kernels.aot`` compiling the same launch without the
  driver: they must agree, or the AOT table in benches/README.md is not what runs.
- **Decode splits sweep**: the 128-head fp8_ds_mla call at batch 64 and 4 with
  1..16 top-k splits against the launcher's default, to tune
  ``default_num_splits`` on the device.
- **Gather** of 1K..64K planned rows (656 B) from a pinned host pool into a hot
  buffer, GB/s against a pinned -> device ``copy_`` of the same bytes measured
  in the same run (issue target: >= 0.80).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from hisparse_rs import kernels as K
from hisparse_rs.kernels import aot
from hisparse_rs.kernels._launch import device_arch
from hisparse_rs.kernels.perf import decode_bytes, decode_flops, gather_bytes
from hisparse_rs.kernels.sparse_mla_decode import (
    _rows_view,
    decode_launches,
    decode_tiling,
    default_num_splits,
)

H_Q, TOPK, DBS = 128, 2048, 4096
SCALE = 0.1352338  # DeepSeek-V3.2 (HISPARSE.md §7)
GATHER_ROWS = [1024, 4096, 16384, 65536]


def per_second(amount: float, ms: float) -> float:
    """``amount`` per second given a time in milliseconds (0 when no time was measured)."""
    return amount / (ms * 1e-3) if ms > 0 else 0.0


def no_cuda_reason() -> str | None:
    """Why this benchmark cannot run here, or None when a CUDA device is usable."""
    if K.INTERPRET:
        return "TRITON_INTERPRET is set: unset it to compile the kernels for the GPU"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def cuda_ms(fn: Callable[[], object], warmup: int = 5, iters: int = 30) -> float:
    """Mean milliseconds per call over ``iters`` back-to-back calls (CUDA events)."""
    for _ in range(warmup):
        fn()
    # torch's stubs leave Event.__init__ unannotated.
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / iters


def decode_inputs(
    batch: int, s_q: int, h_q: int, fp8: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(batch, s_q, h_q, 576, device="cuda", generator=g).clamp(-1, 1).to(torch.bfloat16)
    rows = (torch.randn(batch * DBS, 576, device="cuda", generator=g) / 10).to(torch.bfloat16)
    if fp8:
        rows = K.fp8_ds_mla_quantize(rows)
    base = (torch.arange(batch, device="cuda") * DBS).view(batch, 1, 1)
    slots = torch.rand(batch, s_q, DBS, device="cuda", generator=g).argsort(-1)[..., :TOPK]
    return q, rows, (slots + base).to(torch.int32)


def flashmla_runner(
    q: torch.Tensor, rows: torch.Tensor, indices: torch.Tensor
) -> tuple[Callable[[], Any] | None, str]:
    """FlashMLA's sparse fp8 decode on the same inputs (its README's call), or why not."""
    try:
        flash_mla = importlib.import_module("flash_mla")
    except ImportError as err:
        return None, f"flash_mla is not importable ({err}); install FlashMLA to compare"
    try:
        batch, s_q, h_q, _ = q.shape
        kcache = rows.view(-1, 64, 1, K.FP8_ROW_BYTES).view(torch.float8_e4m3fn)
        seqlens = torch.full((batch,), kcache.shape[0] * 64, dtype=torch.int32, device=q.device)
        try:
            meta, splits = flash_mla.get_mla_metadata(seqlens, s_q * h_q, 1, h_q, True, TOPK)
        except TypeError:  # newer FlashMLA: no arguments
            meta, splits = flash_mla.get_mla_metadata()

        def run() -> Any:
            return flash_mla.flash_mla_with_kvcache(
                q, kcache, None, seqlens, 512, meta, splits,
                softmax_scale=SCALE, causal=False, is_fp8_kvcache=True, indices=indices,
            )  # fmt: skip

        run()
        return run, f"flash_mla {getattr(flash_mla, '__version__', '(version unknown)')}"
    except Exception as err:  # any failure is a result to report, not a crash
        return None, f"flash_mla imported but the call failed: {type(err).__name__}: {err}"


DECODE_SHAPES = [(128, 1), (128, 2), (16, 1), (8, 1)]
"""(h_q, s_q) of the decode benchmark, each with fp8_ds_mla and bf16 rows at batch 64."""
SPLITS_SWEEP = [1, 2, 4, 8, 16]


def decode_launch_info(batch: int, s_q: int, h_q: int) -> dict[str, Any]:
    """The tiling, head tiles and default top-k splits the launcher picks on this GPU."""
    arch = device_arch(torch.device("cuda"))
    tiling = decode_tiling(h_q, arch)
    head_tiles = -(-h_q // tiling.block_h)
    return {
        "capability": arch.capability,
        "block_h": tiling.block_h,
        "block_n": tiling.block_n,
        "num_warps": tiling.num_warps,
        "num_stages": tiling.num_stages,
        "head_tiles": head_tiles,
        "splits": default_num_splits(batch * s_q, head_tiles, TOPK, torch.device("cuda")),
    }


def bench_decode() -> list[dict[str, Any]]:
    results = []
    for h_q, s_q in DECODE_SHAPES:
        for fp8 in (True, False):
            batch = 64
            q, rows, indices = decode_inputs(batch, s_q, h_q, fp8)
            ms = cuda_ms(partial(K.sparse_mla_decode, q, rows, indices, SCALE))
            row_bytes = K.FP8_ROW_BYTES if fp8 else K.BF16_ROW_BYTES
            entry: dict[str, Any] = {
                "batch": batch,
                "s_q": s_q,
                "h_q": h_q,
                "topk": TOPK,
                "rows": "fp8_ds_mla" if fp8 else "bf16",
                "ms": ms,
                "tflops": per_second(decode_flops(batch, s_q, h_q, TOPK), ms) / 1e12,
                "gbps": per_second(decode_bytes(batch, s_q, h_q, TOPK, row_bytes), ms) / 1e9,
                "launch": decode_launch_info(batch, s_q, h_q),
            }
            if fp8:
                run, note = flashmla_runner(q, rows, indices)
                entry["flashmla"] = note
                if run is not None:
                    theirs = cuda_ms(run)
                    out, lse = K.sparse_mla_decode(q, rows, indices, SCALE)
                    their_out, their_lse = run()[:2]
                    entry["flashmla_ms"] = theirs
                    entry["ratio_vs_flashmla"] = theirs / ms
                    entry["max_abs_diff_vs_flashmla"] = {
                        "out": float((out.float() - their_out.float()).abs().max()),
                        "lse": float((lse - their_lse.float()).abs().max()),
                    }
            results.append(entry)
    return results


def bench_decode_splits() -> list[dict[str, Any]]:
    """128-head fp8_ds_mla decode at batch 64 and 4 for each split count in SPLITS_SWEEP."""
    results = []
    for batch in (64, 4):
        q, rows, indices = decode_inputs(batch, 1, H_Q, True)
        default = decode_launch_info(batch, 1, H_Q)["splits"]
        for splits in sorted({*SPLITS_SWEEP, default}):
            ms = cuda_ms(partial(K.sparse_mla_decode, q, rows, indices, SCALE, num_splits=splits))
            results.append({"batch": batch, "splits": splits, "default": splits == default, "ms": ms})
    return results


def aot_crosscheck() -> list[dict[str, Any]]:
    """Registers, spills and shared memory of each decode launch: the driver's view of the
    kernel that ran against ``aot.py``'s compile of the same launch (``same`` when equal)."""
    arch = device_arch(torch.device("cuda"))
    target = next((t for t in aot.TARGETS.values() if t.capability == arch.capability), None)
    if target is None:
        return [{"note": f"no AOT target for sm_{arch.capability}; aot.TARGETS has {sorted(aot.TARGETS)}"}]
    compiler = aot.Compiler()
    results: list[dict[str, Any]] = []
    for h_q, s_q in DECODE_SHAPES:
        for fp8 in (True, False):
            q, rows, indices = decode_inputs(64, s_q, h_q, fp8)
            blocks, _ = _rows_view("aot_crosscheck", rows)
            out = torch.empty(64, s_q, h_q, K.D_V, dtype=torch.bfloat16, device="cuda")
            lse = torch.empty(64, h_q, s_q, dtype=torch.float32, device="cuda")
            for launch in decode_launches(q, blocks, fp8, indices, SCALE, None, out, lse, arch):
                what = f"{launch.kernel.__name__}, {'fp8_ds_mla' if fp8 else 'bf16'}, h_q {h_q}, s_q {s_q}"
                try:
                    ran = launch.run()
                    ours = compiler.compile(launch, target)
                except Exception as err:  # a failure is a result to report, not a crash
                    results.append({"note": f"{what}: {type(err).__name__}: {err}"})
                    continue
                driver = (int(ran.n_regs), int(ran.n_spills), int(ran.metadata.shared))
                results.append(
                    {
                        "kernel": launch.kernel.__name__,
                        "rows": "fp8_ds_mla" if fp8 else "bf16",
                        "h_q": h_q,
                        "s_q": s_q,
                        "driver": {"registers": driver[0], "spills": driver[1], "dynamic_shared": driver[2]},
                        "aot": {"registers": ours.registers, "local_bytes": ours.local_bytes},
                        "same": driver[0] == ours.registers and (driver[1] == 0) == (ours.local_bytes == 0),
                    }
                )
    return results


def bench_gather() -> list[dict[str, Any]]:
    results = []
    host = torch.randint(0, 256, (4 * max(GATHER_ROWS), K.FP8_ROW_BYTES), dtype=torch.uint8).pin_memory()
    hot = torch.zeros(max(GATHER_ROWS), K.FP8_ROW_BYTES, dtype=torch.uint8, device="cuda")
    for n in GATHER_ROWS:
        src = torch.randperm(host.shape[0])[:n].cuda()
        dst = torch.randperm(hot.shape[0])[:n].to(torch.int32).cuda()
        ms = cuda_ms(partial(K.gather_rows, host, hot, src, dst))
        check = torch.equal(hot[dst.long()].cpu(), host[src.cpu()])
        flat_src = host[:n].reshape(-1)
        flat_dst = torch.empty(flat_src.shape, dtype=torch.uint8, device="cuda")
        copy_ms = cuda_ms(partial(flat_dst.copy_, flat_src, non_blocking=True))
        nbytes = gather_bytes(n, K.FP8_ROW_BYTES)
        results.append(
            {
                "rows": n,
                "row_bytes": K.FP8_ROW_BYTES,
                "ms": ms,
                "gbps": per_second(nbytes, ms) / 1e9,
                "copy_gbps": per_second(nbytes, copy_ms) / 1e9,
                "ratio_vs_copy": copy_ms / ms if ms > 0 else 0.0,
                "byte_exact": check,
            }
        )
    return results


def render_markdown(results: dict[str, Any]) -> str:
    """The results as Markdown tables (pure: unit-tested without a GPU)."""
    lines = [f"# GPU kernel benchmark: {results['device']}", "", results["versions"], ""]
    lines += [
        "| decode | batch | s_q | heads | top-k | time | TFLOP/s | GB/s | FlashMLA | ours / FlashMLA |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in results["decode"]:
        ratio = f"{d['ratio_vs_flashmla']:.2f}" if "ratio_vs_flashmla" in d else "n/a"
        theirs = f"{d['flashmla_ms'] * 1e3:.1f} us" if "flashmla_ms" in d else d.get("flashmla", "n/a")
        lines.append(
            f"| {d['rows']} | {d['batch']} | {d['s_q']} | {d['h_q']} | {d['topk']} | {d['ms'] * 1e3:.1f} us "
            f"| {d['tflops']:.1f} | {d['gbps']:.0f} | {theirs} | {ratio} |"
        )
    lines += [
        "",
        "| decode launch | heads | s_q | sm | heads / program | rows / step | warps, stages "
        "| head tiles | splits |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in results["decode"]:
        if "launch" in d:
            t = d["launch"]
            cells = [d["rows"], d["h_q"], d["s_q"], t["capability"], t["block_h"], t["block_n"]]
            cells += [f"{t['num_warps']}, {t['num_stages']}", t["head_tiles"], t["splits"]]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if results.get("decode_splits"):
        lines += ["", "| decode splits sweep (fp8_ds_mla, 128 heads, s_q 1) | batch | splits | time |"]
        lines += ["|---|---|---|---|"]
        for d in results["decode_splits"]:
            mark = " (default)" if d["default"] else ""
            lines.append(f"| | {d['batch']} | {d['splits']}{mark} | {d['ms'] * 1e3:.1f} us |")
    if results.get("aot_crosscheck"):
        lines += [
            "",
            "| AOT cross-check | rows | heads | s_q | driver: registers, spills | aot.py: registers, local B "
            "| agree |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in results["aot_crosscheck"]:
            if "note" in c:
                lines.append(f"| {c['note']} | | | | | | |")
                continue
            drv, ours = c["driver"], c["aot"]
            cells = [
                f"`{c['kernel']}`",
                c["rows"],
                c["h_q"],
                c["s_q"],
                f"{drv['registers']}, {drv['spills']}",
            ]
            cells += [f"{ours['registers']}, {ours['local_bytes']}", c["same"]]
            lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    lines += [
        "",
        "| gather rows | row bytes | time | GB/s | pinned->device copy GB/s | ratio | byte exact |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in results["gather"]:
        lines.append(
            f"| {g['rows']} | {g['row_bytes']} | {g['ms'] * 1e3:.1f} us | {g['gbps']:.1f} "
            f"| {g['copy_gbps']:.1f} | {g['ratio_vs_copy']:.2f} | {g['byte_exact']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_results"), help="directory for results")
    args = ap.parse_args(argv)
    reason = no_cuda_reason()
    if reason is not None:
        print(f"gpu_kernels: {reason}; nothing measured", file=sys.stderr)
        return 2
    import triton

    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "versions": f"torch {torch.__version__}, triton {triton.__version__}, CUDA {torch.version.cuda}",
        "decode": bench_decode(),
        "decode_splits": bench_decode_splits(),
        "aot_crosscheck": aot_crosscheck(),
        "gather": bench_gather(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_kernels.json").write_text(json.dumps(results, indent=2) + "\n")
    markdown = render_markdown(results)
    (args.out / "gpu_kernels.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
