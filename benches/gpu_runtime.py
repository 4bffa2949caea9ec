"""GPU benchmark of the device-resident decode step; writes JSON and Markdown results.

Run through ``scripts/gpu_check.sh`` or directly::

    python benches/gpu_runtime.py --out gpu_results          # CUDA
    TRITON_INTERPRET=1 python benches/gpu_runtime.py --smoke  # tiny, any machine (CI runs it)

- **Resolver**: batch 64 x 61 layers, top-k 2048, device_buffer_size 4096,
  90 % of each (request, layer) top-k kept from one step to the next (the shape
  of ``benches/bench_resolver.py``): the Triton resolver (one launch per layer,
  on the device) against the Rust resolver on the host, on the same top-k in the
  same run, after warm-up steps that fill the hot buffers. Top-k entries per
  second and the ratio; every layer's slots are compared between the two
  (``equal``). Issue target: a whole step's resolve under 1 ms.
- **Decode step**: a :class:`hisparse_rs.DecodeRuntime` of 61 layers, batch 64,
  128 heads, top-k 2048, fp8_ds_mla rows, contexts of ``--context`` tokens:
  one step eagerly (``forward_layer`` per layer) and as CUDA graphs (one
  captured layer per layer, replayed), wall time per step; the eager step's GPU
  time split into resolve (position map + resolver + index finish), gather, KV
  write and decode by CUDA events around each part; and whether
  ``forward_layer`` synchronizes (``torch.cuda.set_sync_debug_mode("error")``).

``--smoke`` runs every part at toy sizes on whatever device there is (the CPU
under ``TRITON_INTERPRET=1``; CUDA graphs are then the replay emulation):
the figures mean nothing, the code paths stay alive.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import hisparse_rs
from hisparse_rs import kernels as K
from hisparse_rs import runtime as runtime_module


@dataclass(frozen=True)
class Shape:
    batch: int
    layers: int
    topk: int
    dbs: int
    heads: int
    context: int
    block_size: int
    warmup: int
    steps: int
    overlap: float = 0.9


FULL = Shape(
    batch=64, layers=61, topk=2048, dbs=4096, heads=128, context=8192, block_size=64, warmup=8, steps=5
)
SMOKE = Shape(batch=2, layers=2, topk=16, dbs=32, heads=8, context=80, block_size=8, warmup=1, steps=2)
SCALE = 0.1352338  # DeepSeek-V3.2


class Clock:
    """GPU time between marks (CUDA events) or wall time on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def mark(self) -> Any:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            e.record()
            return e
        return time.perf_counter()

    def ms(self, start: Any, end: Any) -> float:
        if self.cuda:
            torch.cuda.synchronize()
            return float(start.elapsed_time(end))
        return float(end - start) * 1e3

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def next_topk(prev: torch.Tensor, context: int, overlap: float, g: torch.Generator) -> torch.Tensor:
    """Keep ``overlap`` of each row's positions, redraw the rest (repeats allowed)."""
    fresh = torch.rand(prev.shape, generator=g, device=prev.device) >= overlap
    drawn = torch.randint(0, context, prev.shape, generator=g, device=prev.device, dtype=prev.dtype)
    return torch.where(fresh, drawn, prev)


def bench_resolver(shape: Shape, device: torch.device) -> dict[str, Any]:
    s = shape
    rows_total = s.batch * s.context
    rust = hisparse_rs.ResidencyResolver(s.dbs, s.topk, rows_total, K.FP8_ROW_BYTES)
    dev = K.TritonResidencyResolver(
        s.dbs,
        s.topk,
        rows_total,
        max_states=s.batch * s.layers,
        max_rows=s.batch,
        max_rows_per_state=1,
        device=device,
    )
    states = np.array([[rust.new_state() for _ in range(s.batch)] for _ in range(s.layers)], np.int32)
    for _ in range(s.batch * s.layers):
        dev.new_state()
    states_dev = torch.from_numpy(states).to(device)
    g = torch.Generator(device=device).manual_seed(0)
    # Request b's host rows are b x context + position (a pool filled in order).
    base = (torch.arange(s.batch, device=device) * s.context)[:, None]
    pos = torch.stack([torch.randint(0, s.context, (s.batch, s.topk), generator=g, device=device)] * s.layers)
    plans = [K.PlanBuffers(s.batch, s.topk, device) for _ in range(s.layers)]  # each layer's plan kept
    clock = Clock(device)
    dev_ms: list[float] = []
    rust_ms: list[float] = []
    equal = True
    status = torch.zeros(4, dtype=torch.int64, device=device)
    hits = misses = 0
    for step in range(s.warmup + s.steps):
        pos = torch.stack([next_topk(p, s.context, s.overlap, g) for p in pos])
        rows = pos + base
        rows_host = rows.cpu().numpy()
        status.zero_()
        clock.sync()
        t0 = clock.mark()
        for layer in range(s.layers):
            K.resolve_residency(
                rows[layer],
                states_dev[layer],
                dev.slot_rows_all,
                dev.lru_all,
                num_host_rows=rows_total,
                workspace=dev.workspace,
                status=status,
                out=plans[layer],
            )
        t1 = clock.mark()
        elapsed = clock.ms(t0, t1)
        w0 = time.perf_counter()
        outs = [rust.resolve(rows_host[layer], states[layer]) for layer in range(s.layers)]
        w1 = time.perf_counter()
        equal &= all(
            np.array_equal(p.slots[: s.batch * s.topk].view(s.batch, s.topk).cpu().numpy(), o.slots)
            for p, o in zip(plans, outs, strict=True)
        )
        if step >= s.warmup:
            dev_ms.append(elapsed)
            rust_ms.append((w1 - w0) * 1e3)
            hits += sum(o.hits for o in outs)
            misses += sum(o.misses for o in outs)
    entries = s.batch * s.topk * s.layers
    dev_step, rust_step = float(np.median(dev_ms)), float(np.median(rust_ms))
    tiling = dev.workspace.tiling
    return {
        "triton_ms_per_step": dev_step,
        "rust_ms_per_step": rust_step,
        "triton_entries_per_s": entries / (dev_step * 1e-3),
        "rust_entries_per_s": entries / (rust_step * 1e-3),
        "ratio_vs_rust": rust_step / dev_step if dev_step > 0 else 0.0,
        "hit_rate": hits / max(hits + misses, 1),
        "equal": bool(equal),
        "state_bytes_per_slot": dev.state_bytes // s.dbs,
        "workspace_bytes": dev.workspace.nbytes,
        "tiling": {**tiling.constexprs(), "num_warps": tiling.num_warps},
    }


@contextmanager
def phase_timers(clock: Clock, totals: dict[str, float]) -> Iterator[None]:
    """Time the runtime's kernels by part: events around each call, summed per part."""
    parts = {
        "resolve": ("map_topk_positions", "resolve_residency", "finish_decode_indices"),
        "gather": ("gather_plan",),
        "kv write": (
            "copy_rows",
            "copy_rows_reference",
            "fp8_ds_mla_quantize",
            "fp8_ds_mla_quantize_reference",
        ),
        "decode": ("sparse_mla_decode", "sparse_mla_decode_reference"),
    }
    saved: dict[str, Callable[..., Any]] = {}

    def timed(part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = clock.mark()
            out = fn(*args, **kwargs)
            pending.append((part, start, clock.mark()))
            return out

        return run

    pending: list[tuple[str, Any, Any]] = []
    for part, names in parts.items():
        for name in names:
            saved[name] = getattr(runtime_module, name)
            setattr(runtime_module, name, timed(part, saved[name]))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(runtime_module, name, fn)
        for part, start, end in pending:
            totals[part] = totals.get(part, 0.0) + clock.ms(start, end)


def bench_decode_step(shape: Shape, device: torch.device) -> dict[str, Any]:
    s = shape
    blocks = s.batch * (-(-(s.context + s.warmup + s.steps + 2) // s.block_size))
    rt = hisparse_rs.DecodeRuntime(
        num_layers=s.layers,
        index_topk=s.topk,
        device_buffer_size=s.dbs,
        softmax_scale=SCALE,
        block_size=s.block_size,
        kv_cache_dtype="fp8_ds_mla",
        num_host_blocks=blocks,
        max_num_seqs=s.batch,
        device=device,
        resolver="triton",
    )
    g = torch.Generator(device=device).manual_seed(1)
    prefill = (torch.randn(s.layers, s.context, 576, generator=g, device=device) / 10).bfloat16()
    ids = [f"req-{b}" for b in range(s.batch)]
    for rid in ids:
        rt.add_request(rid, prefill)
    q = torch.randn(s.batch, 1, s.heads, 576, generator=g, device=device).clamp(-1, 1).bfloat16()
    new_kv = (torch.randn(s.batch, 1, 576, generator=g, device=device) / 10).bfloat16()
    pos = torch.randint(
        0, s.context, (s.layers, s.batch, 1, s.topk), generator=g, device=device, dtype=torch.int32
    )
    static = [pos[layer].clone() for layer in range(s.layers)]
    captured = [rt.capture_layer(layer, q, new_kv, static[layer]) for layer in range(s.layers)]
    clock = Clock(device)
    eager_ms: list[float] = []
    graph_ms: list[float] = []
    parts: dict[str, list[float]] = {}
    syncs = "not checked (no CUDA)"
    for step in range(s.warmup + s.steps):
        pos = torch.stack([next_topk(p, s.context, s.overlap, g) for p in pos])
        timed = step >= s.warmup
        # Eager.
        clock.sync()
        w0 = time.perf_counter()
        rt.begin_step(ids)
        step_parts: dict[str, float] = {}
        with phase_timers(clock, step_parts) if timed else _nothing():
            for layer in range(s.layers):
                if device.type == "cuda" and step == 0 and layer == 0:
                    torch.cuda.set_sync_debug_mode("error")
                    try:
                        rt.forward_layer(layer, q, new_kv, pos[layer])
                        syncs = "none (torch.cuda.set_sync_debug_mode('error'))"
                    except RuntimeError as err:
                        syncs = f"synchronizes: {err}"
                    finally:
                        torch.cuda.set_sync_debug_mode("default")
                    continue
                rt.forward_layer(layer, q, new_kv, pos[layer])
        rt.end_step()
        clock.sync()
        w1 = time.perf_counter()
        # Graphs: the same step's top-k written into the captured inputs, then replays.
        for layer in range(s.layers):
            static[layer].copy_(pos[layer])
        clock.sync()
        w2 = time.perf_counter()
        rt.begin_step(ids)
        for layer in range(s.layers):
            captured[layer].replay()
        rt.end_step()
        clock.sync()
        w3 = time.perf_counter()
        if timed:
            eager_ms.append((w1 - w0) * 1e3)
            graph_ms.append((w3 - w2) * 1e3)
            for k, v in step_parts.items():
                parts.setdefault(k, []).append(v)
    m = rt.metrics.to_dict()
    return {
        "eager_ms_per_step": float(np.median(eager_ms)),
        "graph_ms_per_step": float(np.median(graph_ms)),
        "graph": "CUDA graphs" if device.type == "cuda" else "replay emulation (no CUDA)",
        "eager_gpu_ms_by_part": {k: float(np.median(v)) for k, v in parts.items()},
        "forward_layer_syncs": syncs,
        "hit_rate": m["hisparse_cache_hits"] / max(m["hisparse_cache_hits"] + m["hisparse_cache_misses"], 1),
    }


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def render_markdown(results: dict[str, Any]) -> str:
    """The results as Markdown tables (pure: unit-tested without a GPU)."""
    s = results["shape"]
    lines = [f"# Decode-step benchmark: {results['device']}", "", results["versions"], ""]
    if "resolver" in results:
        lines += _resolver_lines(s, results["resolver"])
    if "decode_step" in results:
        lines += _step_lines(s, results["decode_step"])
    return "\n".join(lines) + "\n"


def _resolver_lines(s: dict[str, Any], r: dict[str, Any]) -> list[str]:
    return [
        f"Resolver: batch {s['batch']} x {s['layers']} layers, top-k {s['topk']}, dbs {s['dbs']}, "
        f"{s['overlap']:.0%} overlap (hit rate {r['hit_rate']:.1%}); "
        f"equal to the Rust resolver: {r['equal']}",
        "",
        "| resolver | per decode step | top-k entries / s | ratio |",
        "|---|---|---|---|",
        f"| Triton (device, {s['layers']} launches) | {r['triton_ms_per_step']:.3f} ms "
        f"| {r['triton_entries_per_s'] / 1e6:.1f} M/s | {r['ratio_vs_rust']:.1f}x |",
        f"| Rust (host, same run) | {r['rust_ms_per_step']:.3f} ms "
        f"| {r['rust_entries_per_s'] / 1e6:.1f} M/s | 1x |",
        "",
    ]


def _step_lines(s: dict[str, Any], d: dict[str, Any]) -> list[str]:
    lines = [
        f"Decode step: {s['layers']} layers, batch {s['batch']}, {s['heads']} heads, top-k {s['topk']}, "
        f"fp8_ds_mla, contexts of {s['context']} tokens (hit rate {d['hit_rate']:.1%}); "
        f"forward_layer host syncs: {d['forward_layer_syncs']}",
        "",
        "| step | wall time |",
        "|---|---|",
        f"| eager (forward_layer x {s['layers']}) | {d['eager_ms_per_step']:.2f} ms |",
        f"| {d['graph']} (replay x {s['layers']}) | {d['graph_ms_per_step']:.2f} ms |",
        "",
        "| eager step, GPU time by part | time |",
        "|---|---|",
    ]
    for part, ms in d["eager_gpu_ms_by_part"].items():
        lines.append(f"| {part} | {ms:.3f} ms |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_results"), help="directory for results")
    ap.add_argument("--smoke", action="store_true", help="toy sizes on any device (CI)")
    ap.add_argument("--quick", action="store_true", help="full sizes, fewer warm-up and timed steps")
    ap.add_argument("--parts", default="resolver,step", help="comma-separated, of resolver, step")
    ap.add_argument("--context", type=int, default=FULL.context, help="tokens per request (full run)")
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    if not parts or set(parts) - {"resolver", "step"}:
        print(f"gpu_runtime: --parts takes resolver and/or step, got {args.parts!r}", file=sys.stderr)
        return 2
    cuda = torch.cuda.is_available() and not K.INTERPRET
    if not args.smoke and not cuda:
        print("gpu_runtime: no CUDA device (or TRITON_INTERPRET is set); run with --smoke", file=sys.stderr)
        return 2
    if args.smoke and not cuda and not K.INTERPRET:
        print("gpu_runtime: --smoke without CUDA needs TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    shape = SMOKE if args.smoke else Shape(**{**asdict(FULL), "context": args.context})
    if args.quick and not args.smoke:
        shape = Shape(**{**asdict(shape), "warmup": 3, "steps": 3})
    device = torch.device("cuda" if cuda else "cpu")
    import triton

    path = args.out / "gpu_runtime.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    results.update(
        device=torch.cuda.get_device_name() if cuda else "CPU (Triton interpreter)",
        versions=(
            f"torch {torch.__version__}, triton {triton.__version__}, hisparse_rs {hisparse_rs.__version__}"
        ),
        shape=asdict(shape),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    for part in parts:  # written after each, so a run stopped later keeps this one
        if part == "resolver":
            results["resolver"] = bench_resolver(shape, device)
        else:
            results["decode_step"] = bench_decode_step(shape, device)
        results["markdown"] = render_markdown(results)  # what gpu_summary.py shows
        path.write_text(json.dumps(results, indent=2) + "\n")
    markdown = results["markdown"]
    if set(parts) == {"resolver", "step"}:
        (args.out / "gpu_runtime.md").write_text(markdown)
    print(markdown)
    return 0 if results.get("resolver", {}).get("equal", True) else 1


if __name__ == "__main__":
    sys.exit(main())
