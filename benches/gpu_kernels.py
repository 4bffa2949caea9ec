"""GPU benchmark of the kernels, with FlashMLA beside ours; writes JSON and Markdown.

Run through ``scripts/gpu_check.sh`` (which runs it part by part, each with its
own time budget), or directly::

    python benches/gpu_kernels.py --out gpu_results [--parts decode,gather] [--quick]
    TRITON_INTERPRET=1 python benches/gpu_kernels.py --rehearse --out /tmp/r   # CPU, small shapes

Parts (``--parts``, in this order by default):

- ``decode``: sparse MLA decode on fp8_ds_mla rows at 128, 16 and 8 heads,
  batch 64 and 4, s_q 1, top-k 2048, each request's top-k in its own 4096-row
  hot buffer (the full run adds 128 heads at s_q 2 and bf16 rows). Time per
  call against what the H200's peaks predict (``hisparse_rs.kernels.perf``:
  bytes at 4.8 TB/s, the tensor-core FLOPs the kernel issues at 790 TFLOP/s),
  the launch's tiling, the SASS instruction mix of the split kernel that ran
  (HGMMA against HMMA: ``aot.sass_mix``), and FlashMLA's sparse fp8 decode
  (``flash_mla_with_kvcache(..., indices=...)``, the sgl-flash-mla wheel) on
  the same bytes in the same run: ratio = FlashMLA time / ours (issue target
  >= 0.70 at 128 heads) and the largest difference of out and lse. FlashMLA's
  sm_90 kernel takes 64 or 128 heads; 8 and 16 are padded to 64 with zero
  heads as vLLM 0.33 does (``flashmla_sparse.py`` lines 1294-1302), outside
  the timing. When FlashMLA does not import or its call fails, that is the
  result. Inputs rotate over enough copies that the timed reads exceed 3x the
  L2 cache (batch 4 fits in L2 otherwise).
- ``gather``: 1K..64K planned rows (656 B) from a pinned host pool into a hot
  buffer, GB/s against a pinned -> device copy of the same bytes in one piece
  and against ``index_select`` on the host then ``.to(device)`` (issue target:
  >= 0.80 of the copy).
- ``splits``: the 128-head decode at batch 64 and 4 for 1..16 top-k splits.
- ``aot``: each decode launch as the driver loaded it against ``aot.py``'s
  compile of the same launch (registers, spills must agree).

``--rehearse`` (under ``TRITON_INTERPRET=1``, no GPU) runs the same code at
small shapes on CPU tensors, times nothing that means anything, and reports
what needs CUDA (FlashMLA, the SASS mix, pinned memory, the AOT cross-check)
as "not run on CPU". The JSON is rewritten after every shape, so a run stopped
by its time budget keeps what it measured.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from hisparse_rs import kernels as K
from hisparse_rs.kernels._launch import device_arch
from hisparse_rs.kernels.perf import (
    decode_bytes,
    decode_flops,
    decode_prediction,
    flashmla_heads,
    gather_bytes,
)
from hisparse_rs.kernels.sparse_mla_decode import (
    _rows_view,
    decode_launches,
    decode_tiling,
    default_num_splits,
)

SCALE = 0.1352338  # DeepSeek-V3.2 (HISPARSE.md §7)
NOT_ON_CPU = "not run on CPU"
PARTS = ("decode", "gather", "splits", "aot")


@dataclass(frozen=True)
class Sizes:
    """Shapes of one run: the device's (full or quick) or the CPU rehearsal's."""

    topk: int
    dbs: int
    decode: tuple[tuple[int, int, int, bool], ...]  # (h_q, batch, s_q, fp8)
    gather_rows: tuple[int, ...]
    splits_batches: tuple[int, ...]
    splits: tuple[int, ...]
    iters: int


_CORE = tuple((h, b, 1, True) for h in (128, 16, 8) for b in (64, 4))
FULL = Sizes(2048, 4096, (*_CORE, (128, 64, 2, True), (128, 64, 1, False)), (1024, 4096, 16384, 65536),
             (64, 4), (1, 2, 4, 8, 16), 50)  # fmt: skip
QUICK = Sizes(2048, 4096, _CORE, (4096, 65536), (), (), 20)
REHEARSE = Sizes(64, 128, tuple((h, 2, 1, True) for h in (128, 16, 8)), (64, 256), (2,), (1, 2), 1)


def per_second(amount: float, ms: float) -> float:
    """``amount`` per second given a time in milliseconds (0 when no time was measured)."""
    return amount / (ms * 1e-3) if ms > 0 else 0.0


def no_cuda_reason() -> str | None:
    """Why this benchmark cannot measure here, or None when a CUDA device is usable."""
    if K.INTERPRET:
        return "TRITON_INTERPRET is set: unset it to compile the kernels for the GPU"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def timed_ms(fns: Sequence[Callable[[], object]], iters: int, cuda: bool) -> float:
    """Mean milliseconds per call of ``fns`` called in turn (one input set each), after a
    warm-up call of each; CUDA events around the loop, or the host clock on the CPU."""
    for fn in fns:
        fn()
    calls = max(iters, len(fns))
    if not cuda:
        t0 = time.perf_counter()
        for i in range(calls):
            fns[i % len(fns)]()
        return (time.perf_counter() - t0) * 1e3 / calls
    # torch's stubs leave Event.__init__ unannotated.
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    torch.cuda.synchronize()
    start.record()
    for i in range(calls):
        fns[i % len(fns)]()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / calls


def graph_ms(fns: Sequence[Callable[[], object]], iters: int) -> float | str:
    """Mean milliseconds per call with the calls captured in one CUDA graph and replayed:
    the GPU's time without the host's launch cost (which bounds batch-4 calls eagerly).
    A capture that fails is returned as its error (a result, not a crash)."""
    try:
        for fn in fns:  # warm: compiles, FlashMLA's schedule, allocator pools
            fn()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for fn in fns:
                fn()
        replays = max(1, iters // len(fns))
        graph.replay()
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        return float(start.elapsed_time(end)) / (replays * len(fns))
    except Exception as err:
        return f"graph capture failed: {type(err).__name__}: {err}"


def input_sets(batch: int, topk: int, dbs: int, row_bytes: int, device: torch.device) -> int:
    """How many input copies to rotate so the timed reads exceed 3x the L2 cache (1 on CPU)."""
    if device.type != "cuda":
        return 1
    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20))
    per_set = batch * min(topk, dbs) * row_bytes
    return max(2, min(48, math.ceil(3 * l2 / per_set)))


def decode_inputs(
    batch: int, s_q: int, h_q: int, fp8: bool, sets: int, sizes: Sizes, device: torch.device
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``sets`` independent (q, rows, indices): random bf16 q and rows (fp8_ds_mla-quantized
    when ``fp8``), each request's top-k drawn from its own ``dbs`` rows. The rows of all
    sets share one tensor (paged as FlashMLA's 64-row blocks)."""
    g = torch.Generator(device=device).manual_seed(0)
    n = sets * batch * sizes.dbs
    rows = (torch.randn(n, 576, device=device, generator=g) / 10).to(torch.bfloat16)
    if fp8:
        rows = K.fp8_ds_mla_quantize(rows)
    out = []
    for k in range(sets):
        q = torch.randn(batch, s_q, h_q, 576, device=device, generator=g).clamp(-1, 1).to(torch.bfloat16)
        base = ((torch.arange(batch, device=device) + k * batch) * sizes.dbs).view(batch, 1, 1)
        slots = torch.rand(batch, s_q, sizes.dbs, device=device, generator=g).argsort(-1)[..., : sizes.topk]
        out.append((q, rows, (slots + base).to(torch.int32)))
    return out


def _best(ms: float, graph: float | str) -> float:
    # The GPU's own time: the graph replay's when it was measured, else the eager call's.
    return graph if isinstance(graph, float) else ms


def flashmla_module() -> tuple[Any | None, str]:
    """``flash_mla`` and its version, or None and why it does not import."""
    try:
        fm = importlib.import_module("flash_mla")
    except Exception as err:  # any failure to load is a result to report, not a crash
        return None, f"flash_mla does not import: {type(err).__name__}: {err}"
    return fm, f"flash_mla {getattr(fm, '__version__', '(version unknown)')}"


def flashmla_call(
    fm: Any, q: torch.Tensor, rows: torch.Tensor, indices: torch.Tensor
) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """FlashMLA's sparse fp8 decode on our inputs, as vLLM 0.33 calls it.

    Its KV layout for DeepSeek-V3.2 ("FP8 with scale", 656 bytes a token: 512
    float8_e4m3 values, 4 float32 tile scales, 64 bfloat16 RoPE values) is the
    fp8_ds_mla row byte for byte, so ``rows`` is passed as pages of 64 rows
    ``[num_blocks, 64, 1, 656]``, and a row id (block x 64 + offset) is the same
    index in both. sgl-flash-mla keeps the sm_90 kernels behind ``use_legacy=True``;
    its ``get_mla_metadata()`` takes no arguments (the schedule is made on the first
    call), older FlashMLA's takes the shape.
    """
    batch, s_q, h_q, d = q.shape
    heads = flashmla_heads(h_q)
    if heads != h_q:  # vLLM flashmla_sparse.py: zero heads up to 64, sliced off after
        padded = q.new_zeros((batch, s_q, heads, d))
        padded[:, :, :h_q] = q
        q = padded
    kcache = rows.view(-1, 64, 1, rows.shape[-1])
    kwargs: dict[str, Any] = {"softmax_scale": SCALE, "causal": False, "is_fp8_kvcache": True}
    params = inspect.signature(fm.flash_mla_with_kvcache).parameters
    if (
        "use_legacy" in params
        and q.device.type == "cuda"
        and torch.cuda.get_device_capability(q.device)[0] < 10
    ):
        kwargs["use_legacy"] = True
    try:
        meta = fm.get_mla_metadata()[0]
    except TypeError:  # FlashMLA before its 2025 sparse release: the old scheduler arguments
        seqlens = torch.full((batch,), kcache.shape[0] * 64, dtype=torch.int32, device=q.device)
        meta, splits = fm.get_mla_metadata(seqlens, s_q * heads, 1, heads, True, indices.shape[-1])
        kwargs["num_splits"] = splits

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        out, lse = fm.flash_mla_with_kvcache(q, kcache, None, None, 512, meta, indices=indices, **kwargs)[:2]
        return out[:, :, :h_q], lse[:, :h_q]

    return run


def max_diff(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> dict[str, float]:
    """Largest |a - b| of out and of lse (finite entries)."""
    out = (a[0].float() - b[0].float()).abs().max()
    lse = (a[1].float() - b[1].float()).abs().nan_to_num(0.0, 0.0, 0.0).max()
    return {"out": float(out), "lse": float(lse)}


def decode_launch_info(
    batch: int, s_q: int, h_q: int, topk: int, device: torch.device, fp8: bool = True
) -> dict[str, Any]:
    """The tiling, head tiles and default top-k splits the launcher picks on this device."""
    arch = device_arch(device)
    tiling = decode_tiling(h_q, arch, fp8)
    head_tiles = -(-h_q // tiling.block_h)
    return {
        "capability": arch.capability,
        "block_h": tiling.block_h,
        "block_n": tiling.block_n,
        "num_warps": tiling.num_warps,
        "num_stages": tiling.num_stages,
        "head_tiles": head_tiles,
        "splits": default_num_splits(batch * s_q, head_tiles, topk, device),
    }


def split_kernel_mix(q: torch.Tensor, rows: torch.Tensor, indices: torch.Tensor) -> dict[str, int] | str:
    """SASS instruction mix of the split kernel this launch ran (its cubin), or why not."""
    if q.device.type != "cuda":
        return NOT_ON_CPU
    from hisparse_rs.kernels import aot

    blocks, fp8 = _rows_view("mix", rows)
    batch, s_q, h_q, _ = q.shape
    out = torch.empty(batch, s_q, h_q, K.D_V, dtype=torch.bfloat16, device=q.device)
    lse = torch.empty(batch, h_q, s_q, dtype=torch.float32, device=q.device)
    launch = decode_launches(q, blocks, fp8, indices, SCALE, None, out, lse, device_arch(q.device))[0]
    try:
        ran = launch.run()
        return {**aot.sass_mix(ran.asm["cubin"]), "registers": int(ran.n_regs)}
    except Exception as err:  # no cuobjdump, or another Triton: a result, not a crash
        return f"{type(err).__name__}: {err}"


def bench_decode(sizes: Sizes, device: torch.device, record: Callable[[dict[str, Any]], None]) -> None:
    """Ours at every shape first (each recorded as it finishes), then FlashMLA on the same
    inputs: a FlashMLA fault that poisons the CUDA context cannot take our numbers with it."""
    cuda = device.type == "cuda"
    done = []
    for h_q, batch, s_q, fp8 in sizes.decode:
        row_bytes = K.FP8_ROW_BYTES if fp8 else K.BF16_ROW_BYTES
        sets = input_sets(batch * s_q, sizes.topk, sizes.dbs, row_bytes, device)
        inputs = decode_inputs(batch, s_q, h_q, fp8, sets, sizes, device)
        launch = decode_launch_info(batch, s_q, h_q, sizes.topk, device, fp8)
        ours = [partial(K.sparse_mla_decode, q, rows, idx, SCALE) for q, rows, idx in inputs]
        ms = timed_ms(ours, sizes.iters, cuda)
        our_graph = graph_ms(ours, sizes.iters) if cuda else NOT_ON_CPU
        best = _best(ms, our_graph)  # rates and the floor use the GPU's own time
        pred = decode_prediction(batch, s_q, h_q, sizes.topk, row_bytes, launch["block_h"])
        q0, rows0, idx0 = inputs[0]
        mine = K.sparse_mla_decode(q0, rows0, idx0, SCALE)
        entry: dict[str, Any] = {
            "rows": "fp8_ds_mla" if fp8 else "bf16",
            "batch": batch,
            "s_q": s_q,
            "h_q": h_q,
            "topk": sizes.topk,
            "input_sets": sets,
            "ms": ms,
            "graph_ms": our_graph,
            "tflops": per_second(decode_flops(batch, s_q, h_q, sizes.topk), best) / 1e12,
            "gbps": per_second(decode_bytes(batch, s_q, h_q, sizes.topk, row_bytes), best) / 1e9,
            "predicted": {**asdict(pred), "floor_s": pred.floor_s, "bound": pred.bound},
            "of_floor": pred.floor_s * 1e3 / best if best > 0 else 0.0,
            "launch": launch,
            "vs_reference": max_diff(mine, K.sparse_mla_decode_reference(q0, rows0, idx0, SCALE)),
            "sass_mix": split_kernel_mix(q0, rows0, idx0),
            "flashmla": "pending" if fp8 else "FlashMLA's sparse decode reads fp8 rows only",
        }
        record(entry)
        if fp8:
            done.append((entry, inputs, mine))
    fm, note = flashmla_module() if cuda else (None, NOT_ON_CPU)
    for entry, inputs, mine in done:
        entry["flashmla"] = note
        if fm is not None:
            compare_flashmla(fm, note, entry, inputs, mine, sizes.iters)
        record(entry)


def compare_flashmla(
    fm: Any,
    note: str,
    entry: dict[str, Any],
    inputs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    mine: tuple[torch.Tensor, torch.Tensor],
    iters: int,
) -> None:
    """FlashMLA's times, ratios and largest differences from ours, into ``entry``; a failure
    is written there as the result."""
    cuda = inputs[0][0].device.type == "cuda"
    try:
        theirs = [flashmla_call(fm, q, rows, idx) for q, rows, idx in inputs]
        their_ms = timed_ms(theirs, iters, cuda)
        entry["flashmla_heads"] = flashmla_heads(entry["h_q"])
        entry["flashmla_ms"] = their_ms
        entry["ratio_vs_flashmla"] = their_ms / entry["ms"] if entry["ms"] > 0 else 0.0
        our_graph = entry["graph_ms"]
        their_graph = graph_ms(theirs, iters) if cuda else NOT_ON_CPU
        entry["flashmla_graph_ms"] = their_graph
        if isinstance(their_graph, float) and isinstance(our_graph, float) and our_graph > 0:
            entry["graph_ratio_vs_flashmla"] = their_graph / our_graph
        entry["max_abs_diff_vs_flashmla"] = max_diff(mine, theirs[0]())
    except Exception as err:  # a result to report, not a crash
        entry["flashmla"] = f"{note} imported, but the call failed: {type(err).__name__}: {err}"


def bench_decode_splits(sizes: Sizes, device: torch.device, record: Callable[[dict[str, Any]], None]) -> None:
    """128-head fp8_ds_mla decode for each split count of ``sizes.splits`` and the default."""
    cuda = device.type == "cuda"
    for batch in sizes.splits_batches:
        sets = input_sets(batch, sizes.topk, sizes.dbs, K.FP8_ROW_BYTES, device)
        inputs = decode_inputs(batch, 1, 128, True, sets, sizes, device)
        default = decode_launch_info(batch, 1, 128, sizes.topk, device)["splits"]
        for splits in sorted({*sizes.splits, default}):
            fns = [partial(K.sparse_mla_decode, q, r, i, SCALE, num_splits=splits) for q, r, i in inputs]
            ms = timed_ms(fns, sizes.iters, cuda)
            record({"batch": batch, "splits": splits, "default": splits == default, "ms": ms})


def aot_crosscheck(sizes: Sizes, device: torch.device, record: Callable[[dict[str, Any]], None]) -> None:
    """Registers and spills of each decode launch as the driver loaded it against ``aot.py``'s
    compile of the same launch (``same`` when equal)."""
    if device.type != "cuda":
        record({"note": f"aot cross-check: {NOT_ON_CPU} (the rehearsal runs aot.py itself)"})
        return
    from hisparse_rs.kernels import aot

    arch = device_arch(device)
    target = next((t for t in aot.TARGETS.values() if t.capability == arch.capability), None)
    if target is None:
        record({"note": f"no AOT target for sm_{arch.capability}; aot.TARGETS has {sorted(aot.TARGETS)}"})
        return
    compiler = aot.Compiler()
    for h_q, batch, s_q, fp8 in sizes.decode:
        q, rows, indices = decode_inputs(batch, s_q, h_q, fp8, 1, sizes, device)[0]
        blocks, _ = _rows_view("aot_crosscheck", rows)
        out = torch.empty(batch, s_q, h_q, K.D_V, dtype=torch.bfloat16, device=device)
        lse = torch.empty(batch, h_q, s_q, dtype=torch.float32, device=device)
        for launch in decode_launches(q, blocks, fp8, indices, SCALE, None, out, lse, arch):
            what = f"{launch.kernel.__name__}, {'fp8_ds_mla' if fp8 else 'bf16'}, h_q {h_q}, batch {batch}"
            try:
                ran = launch.run()
                ours = compiler.compile(launch, target)
            except Exception as err:  # a result to report, not a crash
                record({"note": f"{what}: {type(err).__name__}: {err}"})
                continue
            regs, spills = int(ran.n_regs), int(ran.n_spills)
            record(
                {
                    "kernel": launch.kernel.__name__,
                    "rows": "fp8_ds_mla" if fp8 else "bf16",
                    "h_q": h_q,
                    "batch": batch,
                    "s_q": s_q,
                    "driver": {"registers": regs, "spills": spills},
                    "aot": {"registers": ours.registers, "local_bytes": ours.local_bytes},
                    "same": regs == ours.registers and (spills == 0) == (ours.local_bytes == 0),
                }
            )


def bench_gather(sizes: Sizes, device: torch.device, record: Callable[[dict[str, Any]], None]) -> None:
    cuda = device.type == "cuda"
    n_max = max(sizes.gather_rows)
    host = torch.randint(0, 256, (4 * n_max, K.FP8_ROW_BYTES), dtype=torch.uint8)
    if cuda:
        host = host.pin_memory()
    hot = torch.zeros(n_max, K.FP8_ROW_BYTES, dtype=torch.uint8, device=device)
    for n in sizes.gather_rows:
        src = torch.randperm(host.shape[0])[:n]
        dst = torch.randperm(hot.shape[0])[:n].to(torch.int32)
        src_dev, dst_dev = src.to(device), dst.to(device)
        ms = timed_ms([partial(K.gather_rows, host, hot, src_dev, dst_dev)], sizes.iters, cuda)
        exact = torch.equal(hot[dst.long().to(device)].cpu(), host[src])
        flat_src = host[:n].reshape(-1)
        flat_dst = torch.empty(flat_src.shape, dtype=torch.uint8, device=device)
        copy_ms = timed_ms([partial(flat_dst.copy_, flat_src, non_blocking=True)], sizes.iters, cuda)

        def index_select_to(src: torch.Tensor = src) -> torch.Tensor:
            return host.index_select(0, src).to(device, non_blocking=True)

        select_ms = timed_ms([index_select_to], sizes.iters, cuda)
        nbytes = gather_bytes(n, K.FP8_ROW_BYTES)
        record(
            {
                "rows": n,
                "row_bytes": K.FP8_ROW_BYTES,
                "pinned": bool(host.is_pinned()) if cuda else NOT_ON_CPU,
                "ms": ms,
                "gbps": per_second(nbytes, ms) / 1e9,
                "copy_gbps": per_second(nbytes, copy_ms) / 1e9,
                "ratio_vs_copy": copy_ms / ms if ms > 0 else 0.0,
                "index_select_to_gbps": per_second(nbytes, select_ms) / 1e9,
                "ratio_vs_index_select_to": select_ms / ms if ms > 0 else 0.0,
                "byte_exact": exact,
            }
        )


BENCHES: dict[str, Callable[[Sizes, torch.device, Callable[[dict[str, Any]], None]], None]] = {
    "decode": bench_decode,
    "gather": bench_gather,
    "splits": bench_decode_splits,
    "aot": aot_crosscheck,
}
KEYS = {"decode": "decode", "gather": "gather", "splits": "decode_splits", "aot": "aot_crosscheck"}


def _us(ms: float) -> str:
    return f"{ms * 1e3:.1f} us"


def _maybe_us(value: float | str | None) -> str:
    return _us(value) if isinstance(value, float) else str(value or "n/a")


def render_markdown(results: dict[str, Any]) -> str:
    """The results as Markdown tables (pure: unit-tested without a GPU)."""
    lines = [f"# GPU kernel benchmark: {results['device']}", "", results["versions"], ""]
    if results.get("decode"):
        lines += [
            "| decode | batch | s_q | heads | top-k | eager | CUDA graph | predicted floor (bound) "
            "| floor / measured | TFLOP/s | GB/s | FlashMLA eager | FlashMLA graph | FlashMLA / ours "
            "(graph; eager) | FlashMLA at 410 TFLOP/s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for d in results["decode"]:
            ratio = f"{d['ratio_vs_flashmla']:.2f}" if "ratio_vs_flashmla" in d else "n/a"
            if "graph_ratio_vs_flashmla" in d:
                ratio = f"{d['graph_ratio_vs_flashmla']:.2f}; {ratio}"
            theirs = _us(d["flashmla_ms"]) if "flashmla_ms" in d else d.get("flashmla", "n/a")
            p = d.get("predicted")
            floor = f"{p['floor_s'] * 1e6:.1f} us ({p['bound']})" if p else "n/a"
            anchor = f"{p['flashmla_s'] * 1e6:.1f} us" if p else "n/a"
            of_floor = f"{d['of_floor']:.2f}" if "of_floor" in d else "n/a"
            lines.append(
                f"| {d['rows']} | {d['batch']} | {d['s_q']} | {d['h_q']} | {d['topk']} | {_us(d['ms'])} "
                f"| {_maybe_us(d.get('graph_ms'))} | {floor} | {of_floor} | {d['tflops']:.1f} "
                f"| {d['gbps']:.0f} "
                f"| {theirs} | {_maybe_us(d.get('flashmla_graph_ms'))} | {ratio} | {anchor} |"
            )
        lines += [
            "",
            "| decode launch | heads | batch | s_q | sm | heads / program | rows / step | warps, stages "
            "| head tiles | splits | HGMMA / HMMA (SASS) | registers |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for d in results["decode"]:
            if "launch" not in d:
                continue
            t, mix = d["launch"], d.get("sass_mix")
            mma = f"{mix['HGMMA']} / {mix['HMMA']}" if isinstance(mix, dict) else str(mix or "n/a")
            regs = mix.get("registers", "n/a") if isinstance(mix, dict) else "n/a"
            cells = [d["rows"], d["h_q"], d["batch"], d["s_q"], t["capability"], t["block_h"], t["block_n"]]
            cells += [f"{t['num_warps']}, {t['num_stages']}", t["head_tiles"], t["splits"], mma, regs]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if results.get("decode_splits"):
        lines += ["", "| decode splits sweep (fp8_ds_mla, 128 heads, s_q 1) | batch | splits | time |"]
        lines += ["|---|---|---|---|"]
        for d in results["decode_splits"]:
            mark = " (default)" if d["default"] else ""
            lines.append(f"| | {d['batch']} | {d['splits']}{mark} | {_us(d['ms'])} |")
    if results.get("aot_crosscheck"):
        lines += [
            "",
            "| AOT cross-check | rows | heads | batch | driver: registers, spills "
            "| aot.py: registers, local B "
            "| agree |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in results["aot_crosscheck"]:
            if "note" in c:
                lines.append(f"| {c['note']} | | | | | | |")
                continue
            drv, ours = c["driver"], c["aot"]
            cells = [f"`{c['kernel']}`", c["rows"], c["h_q"], c.get("batch", "")]
            cells += [f"{drv['registers']}, {drv['spills']}", f"{ours['registers']}, {ours['local_bytes']}"]
            cells += [c["same"]]
            lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    if results.get("gather"):
        lines += [
            "",
            "| gather rows | row bytes | time | GB/s | pinned->device copy GB/s | ratio "
            "| index_select + .to GB/s "
            "| ratio | byte exact |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for g in results["gather"]:
            lines.append(
                f"| {g['rows']} | {g['row_bytes']} | {_us(g['ms'])} | {g['gbps']:.1f} "
                f"| {g['copy_gbps']:.1f} | {g['ratio_vs_copy']:.2f} | {g.get('index_select_to_gbps', 0):.1f} "
                f"| {g.get('ratio_vs_index_select_to', 0):.2f} | {g['byte_exact']} |"
            )
    return "\n".join(lines) + "\n"


def predicted_markdown(sizes: Sizes = FULL, block_h: int = 16) -> str:
    """What the H200's peaks imply for each decode shape, before any measurement
    (``perf.decode_prediction``; ``block_h`` 16: the sm_90 tiling)."""
    lines = [
        "| decode (fp8_ds_mla unless bf16) | heads | batch | s_q | MB moved | GFLOP | GFLOP issued (MMA) "
        "| at 4.8 TB/s | at 790 TFLOP/s | floor (bound) | FlashMLA at 410 TFLOP/s (heads run) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for h_q, batch, s_q, fp8 in sizes.decode:
        row_bytes = K.FP8_ROW_BYTES if fp8 else K.BF16_ROW_BYTES
        p = decode_prediction(batch, s_q, h_q, sizes.topk, row_bytes, block_h)
        what = "fp8_ds_mla" if fp8 else "bf16"
        theirs = f"{p.flashmla_s * 1e6:.1f} us ({flashmla_heads(h_q)})" if fp8 else "n/a"
        lines.append(
            f"| {what} | {h_q} | {batch} | {s_q} | {p.bytes / 1e6:.1f} | {p.flops / 1e9:.2f} "
            f"| {p.mma_flops / 1e9:.2f} | {p.memory_s * 1e6:.1f} us | {p.mma_s * 1e6:.1f} us "
            f"| {p.floor_s * 1e6:.1f} us ({p.bound}) | {theirs} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_results"), help="directory for results")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--quick", action="store_true", help="the six fp8 decode shapes, fewer repeats")
    ap.add_argument("--rehearse", action="store_true", help="CPU under TRITON_INTERPRET=1, small shapes")
    ap.add_argument("--predict", action="store_true", help="print the predicted decode table and exit")
    args = ap.parse_args(argv)
    if args.predict:
        print(predicted_markdown(), end="")
        return 0
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        print(f"gpu_kernels: unknown parts {unknown}; choose from {list(PARTS)}", file=sys.stderr)
        return 2
    reason = no_cuda_reason()
    if args.rehearse and not K.INTERPRET:
        print("gpu_kernels: --rehearse runs on CPU and needs TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    if reason is not None and not args.rehearse:
        print(f"gpu_kernels: {reason}; nothing measured (--rehearse runs on CPU)", file=sys.stderr)
        return 2
    import triton

    sizes = REHEARSE if args.rehearse else QUICK if args.quick else FULL
    device = torch.device("cpu" if args.rehearse else "cuda")
    path = args.out / "gpu_kernels.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    results.update(
        device="CPU (Triton interpreter; rehearsal)" if args.rehearse else torch.cuda.get_device_name(),
        versions=f"torch {torch.__version__}, triton {triton.__version__}, CUDA {torch.version.cuda}",
        mode="rehearse" if args.rehearse else "quick" if args.quick else "full",
    )
    args.out.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        results["markdown"] = render_markdown(results)  # what gpu_summary.py shows
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1) + "\n")
        tmp.replace(path)

    for part in parts:
        key = KEYS[part]
        results[key] = []

        def record(entry: dict[str, Any], key: str = key) -> None:
            if not any(e is entry for e in results[key]):  # an entry recorded again was updated
                results[key].append(entry)
            save()  # each shape as it finishes: a stopped run keeps what it measured

        save()
        BENCHES[part](sizes, device, record)
    save()
    print(results["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
