"""Ahead-of-time compile check: every Triton kernel, at its production shapes, for real GPUs.

No GPU or driver is needed: ``triton.compile`` lowers each launch to a cubin
for sm_90 (H100, H200) and sm_100 (B200) with the ptxas in Triton's wheel, and
the wheel's ``cuobjdump --dump-resource-usage`` reads its registers, stack and
local memory (bytes per thread: spills) and static shared memory; Triton's
metadata gives the dynamic shared memory (and tensor memory on sm_100). The
launches are the launchers' own (``*_aot_launches``, meta tensors of the
production shapes), so what is compiled is what runs.

Run it::

    python -m hisparse_rs.kernels.aot                  # both targets, a table
    python -m hisparse_rs.kernels.aot --target sm_90   # one target
    python -m hisparse_rs.kernels.aot --write-readme benches/README.md

A kernel fails when it uses any local memory (a spill) or more shared memory
than the target's per-block opt-in limit. Exit status 1 then. Needs the
``kernels`` extra and ``TRITON_INTERPRET`` unset (the interpreter replaces
``@triton.jit`` functions by Python ones that cannot be compiled).

Adding a kernel: one :class:`Case` in :func:`production_cases`, whose
``launches`` calls the launcher's function that returns the launches it
would make for that shape.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
import triton

from ._common import INTERPRET, cdiv
from ._launch import GpuArch, Launch
from .decode_indices import decode_indices_aot_launches
from .fp8_ds_mla import fp8_aot_launches
from .gather import copy_rows_aot_launches, gather_aot_launches, gather_plan_aot_launches
from .resolver import resolver_aot_launches
from .sparse_mla_decode import decode_aot_launches


@dataclass(frozen=True)
class Target:
    """A GPU generation to compile for, with its per-SM and per-block limits.

    Limits: CUDA C++ Programming Guide, "Compute Capabilities", table
    "Technical Specifications per Compute Capability" (9.0 and 10.0 alike):
    64 K 32-bit registers per SM and per block, 255 per thread, 2048 threads
    and 32 blocks per SM, 228 KB shared memory per SM, 227 KB (232448 B) per
    block with the opt-in attribute (Triton's launcher sets it). Register
    allocation (CUDA Occupancy Calculator, ``cuda_occupancy.h``): per warp in
    units of 256 registers, from 4 sub-partitions of 16 K each; shared memory
    per block in units of 128 B plus 1 KB reserved by the system. Tensor memory
    (sm_100): 512 columns per SM (Triton's launch check).
    """

    name: str
    gpus: str
    capability: int
    num_sms: int
    shared_per_block: int = 232448
    shared_per_sm: int = 233472
    tensor_memory_columns: int = 0

    @property
    def arch(self) -> GpuArch:
        return GpuArch(capability=self.capability, num_sms=self.num_sms)


TARGETS = {
    "sm_90": Target("sm_90", "H100 / H200 SXM", capability=90, num_sms=132),
    "sm_100": Target("sm_100", "B200", capability=100, num_sms=148, tensor_memory_columns=512),
}
"""The targets compiled for; ``num_sms`` only sizes the grid (top-k splits), never the code."""

REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256  # registers per warp are allocated in units of this
SUB_PARTITIONS = 4
MAX_THREADS_PER_SM = 2048
MAX_BLOCKS_PER_SM = 32
SHARED_UNIT = 128
SHARED_RESERVED = 1024


@dataclass(frozen=True)
class Case:
    """One operation at one production shape: ``launches(arch)`` is what its launcher makes."""

    op: str
    shape: str
    launches: Callable[[GpuArch], list[Launch]]


def production_cases() -> list[Case]:
    """The shapes every kernel is compiled at (one place; add an entry for a new kernel).

    Decode: top-k 2048 (index_topk), s_q 1 and 2 (one MTP token), 128 heads
    (DeepSeek-V3.2) and 8 / 16 per rank (GLM-5 at TP8 / TP4), fp8_ds_mla and bf16
    rows, over flat hot buffers of 64 x (4096 + 2 x 64) rows (the runtime's
    device_buffer_size 4096 plus two tail pages of block_size 64); batch 64 and
    batch 1 (whose top-k is split over many programs, so the merge kernel is
    compiled for a split count other than 1). Quantize / dequantize: the new rows
    of a step. Gather: a 2048-row miss plan of 656- and 1152-byte rows, int32
    (resolver) and int64 slots.

    The device-resident decode step (``DecodeRuntime``, resolver "triton") at
    batch 64 (max_num_seqs) and top-k 2048: the position map and index finish
    at s_q 1 and 2 (block_size 64, block tables for 163840 tokens: DeepSeek-V3.2's
    max_position_embeddings); the resolver at device_buffer_size 4096 with 1
    query row per state, 10240 with 4 (MTP-3: vLLM's default dbs (3 + 2) x
    2048) and 32768 (the int16 limit) with 15, over 64 x 61 states (one per
    request and layer); the row-strided plan gather of a 64 x 2048 plan and
    the KV write of 64 new rows (copy_rows), 656- and 1152-byte rows.
    """
    seqs, topk, block_size, dbs = 64, 2048, 64, 4096  # max_num_seqs, index_topk, ...
    rows = seqs * (dbs + 2 * block_size)
    host_rows = 1 << 22
    cases = []
    for kv in ("fp8_ds_mla", "bfloat16"):
        for h_q in (128, 16, 8):
            for batch, s_q in ((64, 1), (64, 2), (1, 1)):
                launches = partial(
                    decode_aot_launches,
                    batch=batch,
                    s_q=s_q,
                    h_q=h_q,
                    topk=2048,
                    kv_cache_dtype=kv,
                    num_rows=rows,
                )
                cases.append(
                    Case("sparse_mla_decode", f"{kv}, h_q {h_q}, s_q {s_q}, batch {batch}", launches)
                )
    cases.append(Case("fp8_ds_mla_quantize, _dequantize", "128 rows", partial(fp8_aot_launches, rows=128)))
    for row_bytes in (656, 1152):
        for slot in (torch.int32, torch.int64):
            launches = partial(
                gather_aot_launches, row_bytes=row_bytes, rows=2048, num_host_rows=host_rows, num_slots=rows,
                slot_dtype=slot,
            )  # fmt: skip
            shape = f"2048 rows of {row_bytes} B, {str(slot).removeprefix('torch.')} slots"
            cases.append(Case("gather_rows", shape, launches))
    for s_q in (1, 2):
        launches = partial(
            decode_indices_aot_launches, batch=seqs, s_q=s_q, topk=topk, block_size=block_size,
            device_buffer_size=dbs, max_blocks=163840 // block_size,
        )  # fmt: skip
        cases.append(Case("map_topk_positions, finish_decode_indices", f"s_q {s_q}, batch {seqs}", launches))
    for resolver_dbs, per_state in ((4096, 1), (10240, 4), (32768, 15)):
        launches = partial(
            resolver_aot_launches, device_buffer_size=resolver_dbs, topk=topk, batch=seqs,
            rows_per_state=per_state, num_states=seqs * 61, num_host_rows=host_rows,
        )  # fmt: skip
        shape = f"dbs {resolver_dbs}, {per_state} row{'s' if per_state > 1 else ''} per state, batch {seqs}"
        cases.append(Case("resolve_residency", shape, launches))
    for row_bytes in (656, 1152):
        launches = partial(
            gather_plan_aot_launches, row_bytes=row_bytes, rows=seqs, width=topk, num_host_rows=host_rows,
            num_slots=rows,
        )  # fmt: skip
        cases.append(Case("gather_plan", f"{seqs} x {topk} plan of {row_bytes} B rows", launches))
        launches = partial(copy_rows_aot_launches, row_bytes=row_bytes, rows=seqs, num_dst_rows=rows)
        cases.append(Case("copy_rows", f"{seqs} new rows of {row_bytes} B", launches))
    return cases


@dataclass(frozen=True)
class Resources:
    """One compiled kernel's use of an SM, per the cubin (bytes per thread for local)."""

    registers: int
    local_bytes: int  # stack frame + local memory per thread: spills
    shared_bytes: int  # static + dynamic per block
    tensor_memory_columns: int
    num_warps: int

    def occupancy(self, target: Target) -> tuple[int, str]:
        """Upper bound on resident blocks per SM and what bounds it."""
        regs_per_warp = cdiv(max(self.registers, 1) * 32, REGISTER_UNIT) * REGISTER_UNIT
        warps_by_regs = (REGISTERS_PER_SM // SUB_PARTITIONS // regs_per_warp) * SUB_PARTITIONS
        limits = {
            "registers": warps_by_regs // self.num_warps,
            "threads": MAX_THREADS_PER_SM // (32 * self.num_warps),
            "blocks": MAX_BLOCKS_PER_SM,
        }
        if self.shared_bytes:
            per_block = cdiv(self.shared_bytes + SHARED_RESERVED, SHARED_UNIT) * SHARED_UNIT
            limits["shared memory"] = target.shared_per_sm // per_block
        if self.tensor_memory_columns:
            limits["tensor memory"] = target.tensor_memory_columns // self.tensor_memory_columns
        bound = min(limits.values())
        return bound, min(limits, key=lambda k: limits[k])


@dataclass(frozen=True)
class Row:
    """One line of the report: a kernel of a case, compiled for a target."""

    op: str
    shape: str
    kernel: str
    target: str
    num_warps: int
    num_stages: int
    constexprs: str
    registers: int
    local_bytes: int
    shared_bytes: int
    tensor_memory_columns: int
    blocks_per_sm: int
    warps_per_sm: int
    bound_by: str
    problems: tuple[str, ...]


class _Address:
    """Stands in for a tensor when specializing: its dtype and a device address.

    Meta tensors have no storage; their address is a 4 KB-aligned base (as from
    cudaMalloc or a pinned allocation) plus the view's offset, so the 16-byte
    alignment Triton specializes on is the one a real launch sees. Real tensors
    give their own address.
    """

    def __init__(self, t: torch.Tensor) -> None:
        self.dtype = t.dtype
        if t.device.type == "meta":
            self._addr = (1 << 40) + int(t.storage_offset()) * t.element_size()
        else:
            self._addr = t.data_ptr()

    def data_ptr(self) -> int:
        return self._addr


def _specialize(launch: Launch, backend: Any) -> tuple[dict[str, Any], dict[str, Any], dict[Any, Any], Any]:
    # JITFunction.run's own steps up to the compile (triton/runtime/jit.py: the
    # binder from create_function_from_signature, then _pack_args), so the
    # argument types, the ints equal to 1 made constants, the 16-byte divisibility
    # attributes and the options are exactly what a launch derives.
    from triton.runtime.jit import create_function_from_signature

    fn = launch.kernel
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    args = [_Address(a) if isinstance(a, torch.Tensor) else a for a in launch.args]
    kwargs = {
        **launch.constexprs,
        "num_warps": launch.num_warps,
        "num_stages": launch.num_stages,
        "maxnreg": launch.maxnreg,
        "debug": fn.debug or triton.knobs.runtime.debug,
    }
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    return signature, constexprs, attrs, options


_RESOURCE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


def _cuobjdump(cubin: bytes) -> tuple[int, int, int]:
    # -> (registers, stack + local bytes per thread, static shared bytes)
    tool = triton.knobs.nvidia.cuobjdump.path
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.cubin")
        Path(path).write_bytes(cubin)
        text = subprocess.run(
            [tool, "--dump-resource-usage", path], capture_output=True, text=True, check=True
        ).stdout
    m = _RESOURCE.search(text)
    if m is None:
        raise RuntimeError(f"cuobjdump printed no resource line:\n{text}")
    regs, stack, shared, local = (int(x) for x in m.groups())
    return regs, stack + local, shared


SASS_FAMILIES = (
    "HGMMA", "QGMMA", "HMMA", "IMMA", "FFMA", "FMUL", "FADD", "MUFU", "F2FP", "F2F", "I2F",
    "LDG", "LDGSTS", "UTMALDG", "LDS", "LDSM", "STS", "STG", "BAR", "LDL", "STL",
)  # fmt: skip
"""SASS opcodes the instruction mix reports (HOPPER.md: ``wgmma`` shows as ``HGMMA``,
``QGMMA`` for fp8; a matrix kernel with only ``HMMA`` is on the pre-Hopper path)."""

_SASS_OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


def sass_mix(cubin: bytes) -> dict[str, int]:
    """Static count of each SASS opcode family in a cubin (``cuobjdump --dump-sass`` of
    Triton's wheel), e.g. ``{"HGMMA": 40, "HMMA": 0, ...}`` for every name in
    :data:`SASS_FAMILIES` plus ``"total"``. Static: instructions in the code, not executed."""
    tool = triton.knobs.nvidia.cuobjdump.path
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.cubin")
        Path(path).write_bytes(cubin)
        text = subprocess.run([tool, "--dump-sass", path], capture_output=True, text=True, check=True).stdout
    counts = dict.fromkeys(SASS_FAMILIES, 0)
    total = 0
    for m in _SASS_OPCODE.finditer(text):
        total += 1
        op = m.group(1)
        if op in counts:
            counts[op] += 1
    counts["total"] = total
    return counts


def ptx_mix(ptx: str) -> dict[str, int]:
    """Count of ``wgmma.mma_async`` (Hopper warpgroup MMA) and ``mma.sync`` (the older
    warp MMA) instructions in Triton's PTX: the same question as :func:`sass_mix`, one
    level up, for a toolchain without a disassembler."""
    return {
        "wgmma.mma_async": len(re.findall(r"\bwgmma\.mma_async", ptx)),
        "mma.sync": len(re.findall(r"\bmma\.sync", ptx)),
    }


class Compiler:
    """Compiles launches for targets; identical compiles within a run are done once."""

    def __init__(self) -> None:
        self._done: dict[str, Resources] = {}
        self._asm: dict[str, tuple[bytes, str]] = {}

    def mix(self, launch: Launch, target: Target) -> dict[str, int]:
        """The SASS and PTX instruction mix (:func:`sass_mix`, :func:`ptx_mix`) of
        ``launch`` compiled for ``target``."""
        cubin, ptx = self._asm[self._compiled(launch, target)]
        return {**sass_mix(cubin), **ptx_mix(ptx)}

    def compile(self, launch: Launch, target: Target) -> Resources:
        """Registers, spills and shared memory of ``launch`` compiled for ``target``."""
        return self._done[self._compiled(launch, target)]

    def _compiled(self, launch: Launch, target: Target) -> str:
        # Compiles once per distinct (kernel source, specialization, target, options); the key.
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource, make_backend

        # Warp size 32, as the CUDA driver's get_current_target() reports it.
        gpu = GPUTarget("cuda", target.capability, 32)
        with warnings.catch_warnings():
            # Triton 3.9 warns that its fp-fusion default will change in 3.10; the
            # check compiles with the default that a launch gets.
            warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
            signature, constexprs, attrs, options = _specialize(launch, make_backend(gpu))
            src = ASTSource(launch.kernel, signature, constexprs, attrs)
            key = f"{src.hash()}-{target.name}-{options.hash()}"
            if key not in self._done:
                kernel = triton.compile(src, target=gpu, options=options.__dict__)
                self._asm[key] = (kernel.asm["cubin"], kernel.asm.get("ptx", ""))
                regs, local, static_shared = _cuobjdump(kernel.asm["cubin"])
                self._done[key] = Resources(
                    registers=regs,
                    local_bytes=local,
                    shared_bytes=static_shared + int(kernel.metadata.shared),
                    tensor_memory_columns=int(getattr(kernel.metadata, "tmem_size", 0) or 0),
                    num_warps=launch.num_warps,
                )
        return key


def _constexpr_text(launch: Launch) -> str:
    shown = {
        k: v
        for k, v in launch.constexprs.items()
        if k.startswith(("BLOCK", "FP8", "HAS_", "VEC", "TABLE_BITS"))
    }
    if launch.maxnreg is not None:
        shown["maxnreg"] = launch.maxnreg
    return " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in shown.items())


def check(
    targets: Iterable[Target], cases: Sequence[Case] | None = None, compiler: Compiler | None = None
) -> list[Row]:
    """Compile every launch of every case for every target; one :class:`Row` each."""
    compiler = compiler or Compiler()
    rows = []
    for target in targets:
        for case in production_cases() if cases is None else cases:
            for launch in case.launches(target.arch):
                res = compiler.compile(launch, target)
                blocks, bound_by = res.occupancy(target)
                problems = []
                if res.local_bytes:
                    problems.append(f"spills: {res.local_bytes} B of local memory per thread")
                if res.shared_bytes > target.shared_per_block:
                    problems.append(
                        f"shared memory {res.shared_bytes} B > {target.shared_per_block} B per block"
                    )
                if blocks < 1:
                    problems.append(f"cannot be resident on an SM ({bound_by})")
                rows.append(
                    Row(
                        op=case.op,
                        shape=case.shape,
                        kernel=launch.kernel.__name__,
                        target=target.name,
                        num_warps=launch.num_warps,
                        num_stages=launch.num_stages,
                        constexprs=_constexpr_text(launch),
                        registers=res.registers,
                        local_bytes=res.local_bytes,
                        shared_bytes=res.shared_bytes,
                        tensor_memory_columns=res.tensor_memory_columns,
                        blocks_per_sm=blocks,
                        warps_per_sm=blocks * launch.num_warps,
                        bound_by=bound_by,
                        problems=tuple(problems),
                    )
                )
    return rows


README_BEGIN = (
    "<!-- aot-table: generated by `python -m hisparse_rs.kernels.aot --write-readme`; do not edit -->"
)
README_END = "<!-- aot-table end -->"


def toolchain() -> str:
    """Triton and ptxas versions the table was compiled with."""
    ptxas = triton.knobs.nvidia.ptxas_blackwell.version
    return f"triton {triton.__version__}, ptxas {ptxas}"


def render_markdown(rows: Sequence[Row]) -> str:
    """The rows as Markdown, one table per target (what goes into benches/README.md)."""
    lines = [f"Compiled with {toolchain()}; spills are stack + local bytes per thread."]
    for name in dict.fromkeys(r.target for r in rows):
        target = TARGETS[name]
        lines += [
            "",
            f"**{name}** ({target.gpus}; limit {target.shared_per_block} B shared memory per block):",
            "",
            "| operation | shape | kernel | warps, stages | tiles | registers | spills | shared memory "
            "| occupancy bound: blocks (warps) / SM, by |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            if r.target != name:
                continue
            shared = f"{r.shared_bytes / 1024:.1f} KB" if r.shared_bytes else "0"
            if r.tensor_memory_columns:
                shared += f" + {r.tensor_memory_columns} TMEM columns"
            occupancy = f"{r.blocks_per_sm} ({r.warps_per_sm}), {r.bound_by}"
            lines.append(
                f"| {r.op} | {r.shape} | `{r.kernel}` | {r.num_warps}, {r.num_stages} | {r.constexprs} "
                f"| {r.registers} | {r.local_bytes} | {shared} | {occupancy} |"
            )
    return "\n".join(lines) + "\n"


def write_readme(path: Path, table: str) -> bool:
    """Replace the generated table between the markers in ``path``; True when it changed."""
    text = path.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise ValueError(f"{path} has no {README_BEGIN!r} ... {README_END!r} block to fill")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    new = f"{head}{README_BEGIN}\n{table}{README_END}{tail}"
    path.write_text(new)
    return new != text


MIX_SHAPES = ((128, 64), (128, 4), (16, 64), (16, 4), (8, 64), (8, 4))
"""(h_q, batch) of the instruction-mix table: the GPU check's decode shapes (s_q 1, top-k
2048, fp8_ds_mla rows)."""


def decode_mix(target: Target, compiler: Compiler | None = None) -> list[dict[str, Any]]:
    """The instruction mix of each decode launch at :data:`MIX_SHAPES` on ``target``."""
    compiler = compiler or Compiler()
    rows = 64 * (4096 + 2 * 64)  # production_cases()' flat hot buffer
    out = []
    for h_q, batch in MIX_SHAPES:
        launches = decode_aot_launches(
            target.arch, batch=batch, s_q=1, h_q=h_q, topk=2048, kv_cache_dtype="fp8_ds_mla", num_rows=rows
        )
        for launch in launches:
            out.append(
                {
                    "target": target.name,
                    "h_q": h_q,
                    "batch": batch,
                    "kernel": launch.kernel.__name__,
                    "tiles": _constexpr_text(launch),
                    "grid": list(launch.grid),
                    "mix": compiler.mix(launch, target),
                }
            )
    return out


def render_mix(rows: Sequence[dict[str, Any]]) -> str:
    """The instruction mix as a Markdown table (static counts in the cubin)."""
    fams = (
        "HGMMA",
        "QGMMA",
        "HMMA",
        "FFMA",
        "MUFU",
        "F2FP",
        "LDG",
        "LDGSTS",
        "UTMALDG",
        "LDS",
        "LDSM",
        "LDL",
        "STL",
    )
    lines = [
        f"SASS instruction mix (static counts, {toolchain()}; PTX: wgmma / mma.sync):",
        "",
        "| target | heads | batch | kernel | grid | "
        + " | ".join(fams)
        + " | wgmma / mma.sync (PTX) | total |",
        "|---|---|---|---|---|" + "---|" * len(fams) + "---|---|",
    ]
    for r in rows:
        m = r["mix"]
        cells = [r["target"], r["h_q"], r["batch"], f"`{r['kernel']}`", " x ".join(map(str, r["grid"]))]
        cells += [m[f] for f in fams] + [f"{m['wgmma.mma_async']} / {m['mma.sync']}", m["total"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", action="append", choices=list(TARGETS), help="default: all")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--write-readme", type=Path, help="fill the generated table in this Markdown file")
    ap.add_argument(
        "--mix", action="store_true", help="only the decode kernels' SASS/PTX instruction mix (with --json)"
    )
    args = ap.parse_args(argv)
    if INTERPRET:
        print(
            "aot: TRITON_INTERPRET is set, so the kernels are Python functions that cannot be compiled. "
            "Fix: run without TRITON_INTERPRET (no GPU is needed).",
            file=sys.stderr,
        )
        return 2
    targets = [TARGETS[t] for t in (args.target or list(TARGETS))]
    if args.mix:
        compiler = Compiler()
        mixes = [m for t in targets for m in decode_mix(t, compiler)]
        print(render_mix(mixes), end="")
        if args.json:
            import json

            args.json.write_text(json.dumps(mixes, indent=1) + "\n")
        return 0
    rows = check(targets)
    table = render_markdown(rows)
    print(table, end="")
    if args.json:
        import json

        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    if args.write_readme:
        changed = write_readme(args.write_readme, table)
        print(f"aot: {args.write_readme} {'updated' if changed else 'already current'}", file=sys.stderr)
    bad = [r for r in rows if r.problems]
    for r in bad:
        print(f"aot: FAIL {r.kernel} [{r.shape}] {r.target}: {'; '.join(r.problems)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
