"""The HiSparse decode step: resolve -> gather -> sparse MLA decode, per layer.

:class:`DecodeRuntime` ties the pieces together the way vLLM 0.33's
``vllm/v1/hisparse/runtime.py`` does, in plain PyTorch so it runs on a CPU:

- the full MLA latent KV of every token lives in one host pool tensor
  (pinned when CUDA is available), laid out by :class:`PoolLayout`, with
  block tables kept by :class:`HostKVPool`;
- each request owns a device region per layer of ``device_buffer_size`` hot
  slots (an LRU cache kept by :class:`ResidencyResolver`, one state per
  request and index group) plus two retained tail pages that hold the newest
  ``block_size``..``2 x block_size`` tokens (vLLM keeps decode-written pages
  GPU-resident; HISPARSE.md §6 step 1 resolves them directly);
- every step and layer the indexer's top-k logical positions are mapped to
  device rows: tail positions directly, the rest through the resolver, whose
  miss plan is gathered host -> device before the sparse-MLA kernel runs.

Layers that share an indexer (``index_groups``; GLM-5.2 IndexShare) share the
top-k: the group's first layer resolves, the others replay its miss plan into
their own rows (HISPARSE.md §6).

Needs the ``kernels`` extra (torch, triton); imported only when used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from hisparse_rs._core import HiSparseMetrics, HostKVPool, ResidencyResolver
from hisparse_rs.exceptions import HostPoolExhausted, PoolError
from hisparse_rs.kernels import (
    BF16_ROW_BYTES,
    D_QK,
    FP8_ROW_BYTES,
    fp8_ds_mla_quantize,
    fp8_ds_mla_quantize_reference,
    gather_rows,
    gather_rows_reference,
    sparse_mla_decode,
    sparse_mla_decode_reference,
)
from hisparse_rs.pool import allocate_pool_buffer, layer_views

if TYPE_CHECKING:
    from hisparse_rs.config import ResolvedConfig

__all__ = ["DecodeRuntime", "LayerResult"]

# Pages of the newest tokens kept on the device per (request, layer): the page
# being written and the one before it, as vLLM 0.33's layout retains them.
TAIL_PAGES = 2
ROW_BYTES = {"fp8_ds_mla": FP8_ROW_BYTES, "bfloat16": BF16_ROW_BYTES}


@dataclass(frozen=True)
class LayerResult:
    """One layer's decode output and what it cost.

    ``out`` bfloat16 [batch, s_q, h_q, 512]; ``lse`` float32 [batch, h_q, s_q]
    (natural log; +inf where no index was valid); ``hits`` / ``misses``: top-k
    entries found in a hot slot / copied from the host pool this layer (the
    resolver's counts, also in :attr:`DecodeRuntime.metrics`); ``tail``:
    entries served by the retained tail pages, never copied;
    ``host_to_device_bytes`` = misses x row_bytes.
    """

    out: torch.Tensor
    lse: torch.Tensor
    hits: int
    misses: int
    tail: int
    host_to_device_bytes: int


@dataclass
class _Request:
    region: int
    states: list[int]  # one resolver state per index group
    pending_mirror: list[tuple[int, int, torch.Tensor]] = field(default_factory=list)


@dataclass
class _GroupPlan:
    # The group leader's resolution this step, replayed by the other layers.
    indices: torch.Tensor  # int32 [batch, s_q, topk] device rows
    src_rows: torch.Tensor  # int64 [n] host rows
    dst_rows: torch.Tensor  # int64 [n] device rows
    hits: int
    tail: int


class DecodeRuntime:
    """Owns the host pool tensor, the hot buffers and the resolver; runs decode steps.

    A step is ``begin_step(request_ids)``, then :meth:`forward_layer` for every
    layer in order, then :meth:`end_step`. Requests join with
    :meth:`add_request` (their prefill KV goes to the host pool and the tail
    pages) and leave with :meth:`finish_request`, both between steps.

    Args:
        num_layers: sparse-MLA layers this runtime serves (local ids 0..num_layers-1).
        index_topk: the indexer's top-k (width of ``topk_positions``).
        device_buffer_size: hot slots per request and layer (vLLM 0.33
            HiSparseConfig; default there (max_decode_query_len + 1) x index_topk).
        softmax_scale: the attention softmax scale (DeepSeek-V3.2 0.1352338; GLM-5 0.0625).
        block_size: tokens per host block and per tail page.
        kv_cache_dtype: ``"fp8_ds_mla"`` (656-byte rows) or ``"bfloat16"`` (1152).
        num_host_blocks / host_pool_gib: host pool size (exactly one of them).
        max_num_seqs: requests resident at once (device regions allocated up front).
        index_groups: group id per layer; layers with the same id share the
            top-k and the hot-buffer state (default: every layer its own group).
        eager_host_mirror: mirror decode-written rows to host inside
            :meth:`forward_layer` (vLLM default) or at :meth:`end_step`.
        device: where the hot buffers and the kernels run.
        use_triton: the Triton kernels (default on CUDA) or the PyTorch
            references (default on CPU; ``True`` there needs TRITON_INTERPRET=1
            and is slow: for tests).

    Raises:
        ValueError: inconsistent sizes. PoolError: sizes the Rust core rejects
            (e.g. device_buffer_size < index_topk or > 32768).
    """

    def __init__(
        self,
        *,
        num_layers: int,
        index_topk: int,
        device_buffer_size: int,
        softmax_scale: float,
        block_size: int = 64,
        kv_cache_dtype: str = "fp8_ds_mla",
        num_host_blocks: int | None = None,
        host_pool_gib: float | None = None,
        max_num_seqs: int = 8,
        index_groups: Sequence[int] | None = None,
        eager_host_mirror: bool = True,
        device: str | torch.device = "cpu",
        use_triton: bool | None = None,
    ) -> None:
        if kv_cache_dtype not in ROW_BYTES:
            raise ValueError(f"kv_cache_dtype must be one of {sorted(ROW_BYTES)}, got {kv_cache_dtype!r}")
        if (num_host_blocks is None) == (host_pool_gib is None):
            raise ValueError("give exactly one of num_host_blocks and host_pool_gib")
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
        groups = list(range(num_layers)) if index_groups is None else list(index_groups)
        if len(groups) != num_layers:
            raise ValueError(f"index_groups has {len(groups)} entries for {num_layers} layers")
        self.device = torch.device(device)
        self.kv_cache_dtype = kv_cache_dtype
        self.row_bytes = ROW_BYTES[kv_cache_dtype]
        self.softmax_scale = float(softmax_scale)
        self.block_size = block_size
        self.index_topk = index_topk
        self.device_buffer_size = device_buffer_size
        self.eager_host_mirror = eager_host_mirror
        self.max_num_seqs = max_num_seqs
        self.use_triton = self.device.type == "cuda" if use_triton is None else use_triton

        self.metrics = HiSparseMetrics()
        if num_host_blocks is not None:
            self.pool = HostKVPool(
                num_host_blocks, block_size, self.row_bytes, num_layers, metrics=self.metrics
            )
        else:
            assert host_pool_gib is not None
            self.pool = HostKVPool.from_host_pool_gib(
                host_pool_gib, block_size, self.row_bytes, num_layers, metrics=self.metrics
            )
        self.resolver = ResidencyResolver(
            device_buffer_size, index_topk, self.pool.num_host_rows, self.row_bytes, metrics=self.metrics
        )
        self.layout = self.pool.layout()
        self.host_buffer = allocate_pool_buffer(self.layout, backend="torch")
        self.host_layers: list[torch.Tensor] = layer_views(self.host_buffer, self.layout)

        # Group id -> dense group index; the first layer of a group leads it.
        dense = {g: i for i, g in enumerate(dict.fromkeys(groups))}
        self._layer_group = [dense[g] for g in groups]
        self._leaders = {i: self._layer_group.index(i) for i in range(len(dense))}
        self.num_index_groups = len(dense)

        self.region_rows = device_buffer_size + TAIL_PAGES * block_size
        rows = max_num_seqs * self.region_rows
        # uint8 rows on the device, one tensor per layer; zeroed so an unused
        # row never holds NaN bit patterns (the kernels mask them anyway).
        self.device_layers = [
            torch.zeros((rows, self.row_bytes), dtype=torch.uint8, device=self.device)
            for _ in range(num_layers)
        ]
        self._requests: dict[str, _Request] = {}
        self._free_regions = list(range(max_num_seqs - 1, -1, -1))
        self._step_ids: list[str] | None = None
        self._step_tokens = 0  # new tokens per request in the open step (s_q)
        self._step_plans: dict[int, _GroupPlan] = {}
        self._written: set[int] = set()

    @classmethod
    def from_config(
        cls,
        resolved: ResolvedConfig,
        *,
        softmax_scale: float,
        max_num_seqs: int = 8,
        num_host_blocks: int | None = None,
        index_groups: Sequence[int] | None = None,
        device: str | torch.device = "cpu",
        use_triton: bool | None = None,
    ) -> DecodeRuntime:
        """A runtime sized by a resolved configuration (``hisparse_rs.resolve``).

        Takes ``host_blocks``, ``block_size``, ``kv_cache_dtype`` (``auto`` is
        bfloat16), ``device_buffer_size``, ``eager_host_mirror``, the sparse-MLA
        layer count (MTP draft layers included) and, as the top-k width,
        ``topk_buffer_width`` (``index_topk``, wider for a pooled indexer).

        Args:
            num_host_blocks: a smaller host pool than the configuration's
                ``host_blocks`` (the pool tensor is allocated up front, e.g.
                128 GiB for ``host_pool_gib`` 128; pages are touched only when written).
            index_groups: group id per layer; default: the configuration's
                ``index_groups`` (layers that share an indexer, GLM-5.2
                IndexShare, share a group), else one group per layer.

        Raises:
            ValueError: HiSparse is not enabled in ``resolved``, its dtype has
                no runtime row format (576-value rows of 656 or 1152 bytes), or
                ``num_host_blocks`` exceeds the configuration's.
        """
        h = resolved.hisparse
        if h is None:
            raise ValueError("HiSparse is not enabled in this configuration: nothing to run")
        dtype = "bfloat16" if h.kv_cache_dtype in ("auto", "bfloat16") else h.kv_cache_dtype
        if dtype not in ROW_BYTES or h.row_bytes != ROW_BYTES[dtype]:
            raise ValueError(
                f"kv_cache_dtype {h.kv_cache_dtype!r} with {h.row_bytes}-byte rows has no runtime row format "
                f"(576-value MLA rows: fp8_ds_mla 656 B or bfloat16 1152 B)"
            )
        blocks = h.host_blocks
        if num_host_blocks is not None:
            if blocks is not None and num_host_blocks > blocks:
                raise ValueError(f"num_host_blocks {num_host_blocks} exceeds the configuration's {blocks}")
            blocks = num_host_blocks
        return cls(
            num_layers=h.sparse_mla_layers,
            index_topk=h.topk_buffer_width,
            device_buffer_size=h.device_buffer_size,
            softmax_scale=softmax_scale,
            block_size=h.block_size,
            kv_cache_dtype=dtype,
            num_host_blocks=blocks,
            max_num_seqs=max_num_seqs,
            index_groups=index_groups if index_groups is not None else (h.index_groups or None),
            eager_host_mirror=h.eager_host_mirror,
            device=device,
            use_triton=use_triton,
        )

    # ---- rows ---------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        return len(self.device_layers)

    def encode_rows(self, kv: torch.Tensor) -> torch.Tensor:
        """bf16 [n, 576] latent KV -> uint8 [n, row_bytes] rows in the cache format."""
        if kv.dim() != 2 or kv.shape[1] != D_QK or kv.dtype != torch.bfloat16:
            raise ValueError(f"KV rows must be bfloat16 [n, {D_QK}], got {kv.dtype} {list(kv.shape)}")
        if self.kv_cache_dtype == "bfloat16":
            return kv.contiguous().view(torch.uint8)
        quantize = fp8_ds_mla_quantize if self.use_triton else fp8_ds_mla_quantize_reference
        return quantize(kv.contiguous())

    def _tail_rows(self, region: int, positions: torch.Tensor) -> torch.Tensor:
        # Page k of a request lives in tail page k % TAIL_PAGES of its region.
        bs = self.block_size
        page = torch.div(positions, bs, rounding_mode="floor")
        return region * self.region_rows + self.device_buffer_size + (page % TAIL_PAGES) * bs + positions % bs

    def _in_tail(self, positions: torch.Tensor, num_tokens: int) -> torch.Tensor:
        newest_page = (num_tokens - 1) // self.block_size
        return positions >= max(newest_page - TAIL_PAGES + 1, 0) * self.block_size

    # ---- requests -----------------------------------------------------------

    def add_request(self, request_id: str, kv: torch.Tensor | Sequence[torch.Tensor]) -> None:
        """Admit a request with its prefill KV: bf16 [num_layers, n, 576] (or one [n, 576] per layer).

        Every prefill row is written to the host pool (vLLM mirrors prefill rows
        always); the newest two pages also go to the request's tail pages.

        Raises:
            HostPoolExhausted: the host pool cannot hold n tokens (nothing changes).
            PoolError ``duplicate_request``; ValueError: no free device region
                (max_num_seqs requests resident), KV of the wrong shape, or a step is open.
        """
        if self._step_ids is not None:
            raise ValueError("add requests between steps (after end_step)")
        layers = list(kv)
        if len(layers) != self.num_layers:
            raise ValueError(f"prefill KV has {len(layers)} layers, the runtime has {self.num_layers}")
        n = int(layers[0].shape[0])
        if n < 1 or any(int(t.shape[0]) != n for t in layers):
            raise ValueError("prefill KV must have the same n >= 1 rows in every layer")
        if request_id in self._requests:
            raise PoolError("duplicate_request", f"request {request_id!r} is already admitted")
        if not self._free_regions:
            raise ValueError(
                f"all {self.max_num_seqs} device regions are in use (max_num_seqs); finish a request"
            )
        rows = [self.encode_rows(t) for t in layers]
        self.pool.admit(request_id, n)
        region = self._free_regions.pop()
        states = [self.resolver.new_state() for _ in range(self.num_index_groups)]
        self._requests[request_id] = _Request(region, states)
        positions = torch.arange(n, dtype=torch.int64)
        host_rows = torch.from_numpy(self.pool.host_rows(request_id, positions.numpy()))
        tail = self._in_tail(positions, n)
        tail_dst = self._tail_rows(region, positions[tail]).to(self.device)
        for layer, r in enumerate(rows):
            self.host_layers[layer][host_rows] = r.to("cpu")
            self.device_layers[layer][tail_dst] = r[tail.to(r.device)].to(self.device)

    def finish_request(self, request_id: str) -> None:
        """Release a finished or aborted request's host blocks, resolver states and device region.

        Raises PoolError ``unknown_request``; ValueError inside a step.
        """
        if self._step_ids is not None:
            raise ValueError("finish requests between steps (after end_step)")
        req = self._requests.pop(request_id, None)
        if req is None:
            raise PoolError("unknown_request", f"request {request_id!r} is not admitted")
        # Unwritten mirrors of a finished request are dropped: its blocks may be
        # handed to another request next.
        req.pending_mirror.clear()
        for s in req.states:
            self.resolver.free_state(s)
        self.pool.free(request_id)
        self._free_regions.append(req.region)

    @property
    def request_ids(self) -> list[str]:
        return sorted(self._requests)

    def num_tokens(self, request_id: str) -> int:
        return self.pool.num_tokens(request_id)

    # ---- a step -------------------------------------------------------------

    def begin_step(self, request_ids: Sequence[str], num_new_tokens: int = 1) -> torch.Tensor:
        """Start a decode step for ``request_ids`` (the batch order), each
        generating ``num_new_tokens`` tokens (1, or 1 + MTP draft tokens).

        Returns the new tokens' positions, int64 [batch, num_new_tokens].
        Raises HostPoolExhausted when the batch's new blocks do not fit (nothing
        changes: finish or preempt a request and retry), PoolError
        ``unknown_request``, ValueError when a step is already open or a
        request appears twice.
        """
        if self._step_ids is not None:
            raise ValueError("a step is already open: call end_step first")
        ids = list(request_ids)
        if len(set(ids)) != len(ids):
            raise ValueError("a request appears twice in the batch")
        for r in ids:
            if r not in self._requests:
                raise PoolError("unknown_request", f"request {r!r} is not admitted")
        if isinstance(num_new_tokens, bool) or not isinstance(num_new_tokens, int) or num_new_tokens < 1:
            raise ValueError(f"num_new_tokens must be an int >= 1, got {num_new_tokens!r}")
        starts = [self.pool.num_tokens(r) for r in ids]
        # All or nothing, as the pool's own allocations: check the whole batch first.
        needed = sum(
            self.pool.blocks_for(n + num_new_tokens) - len(self.pool.block_table(r))
            for r, n in zip(ids, starts, strict=True)
        )
        if needed > self.pool.free_blocks:
            raise HostPoolExhausted(needed, self.pool.free_blocks)
        self._flush_mirror()
        for r in ids:
            self.pool.append(r, num_new_tokens)
        self._step_ids = ids
        self._step_tokens = num_new_tokens
        self._step_plans = {}
        self._written = set()
        return torch.tensor(starts, dtype=torch.int64)[:, None] + torch.arange(num_new_tokens)

    def forward_layer(
        self, layer: int, q: torch.Tensor, new_kv: torch.Tensor, topk_positions: torch.Tensor
    ) -> LayerResult:
        """One layer of the open step: write the new KV rows, resolve, gather, decode.

        Args:
            layer: local layer id, 0 <= layer < num_layers.
            q: bf16 [batch, s_q, h_q, 576] queries (absorbed NoPE 512 + RoPE 64).
            new_kv: bf16 [batch, s_q, 576] the new tokens' latent KV for this layer.
            topk_positions: int32/int64 [batch, s_q, index_topk] logical token
                positions from the indexer, -1 = padding. Layers of one index
                group must pass the same top-k (only the first is read).

        Returns:
            :class:`LayerResult`.

        Raises:
            ValueError: no open step, a layer run twice, wrong shapes, or a
                position outside [0, num_tokens) of its request.
            PoolError ``union_exceeds_device_buffer``: a request's query rows
                select more distinct rows than device_buffer_size.
        """
        ids = self._step_ids
        if ids is None:
            raise ValueError("no open step: call begin_step first")
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"layer {layer} outside 0..{self.num_layers - 1}")
        if layer in self._written:
            raise ValueError(f"layer {layer} already ran this step")
        # Every input is checked before anything changes, so a rejected call can
        # be retried with fixed inputs.
        batch, s_q = len(ids), self._step_tokens
        if (
            q.dtype != torch.bfloat16
            or q.dim() != 4
            or tuple(q.shape[:2]) != (batch, s_q)
            or q.shape[3] != D_QK
        ):
            raise ValueError(
                f"q must be bfloat16 [batch={batch}, s_q={s_q} (begin_step's num_new_tokens), h_q, {D_QK}], "
                f"got {q.dtype} {list(q.shape)}"
            )
        if new_kv.dtype != torch.bfloat16 or tuple(new_kv.shape) != (batch, s_q, D_QK):
            raise ValueError(
                f"new_kv must be bfloat16 [{batch}, {s_q}, {D_QK}], got {new_kv.dtype} {list(new_kv.shape)}"
            )
        if (
            topk_positions.dtype not in (torch.int32, torch.int64)
            or topk_positions.dim() != 3
            or tuple(topk_positions.shape[:2]) != (batch, s_q)
            or topk_positions.shape[2] > self.index_topk
        ):
            raise ValueError(
                f"topk_positions must be int32/int64 [{batch}, {s_q}, <= {self.index_topk}], "
                f"got {topk_positions.dtype} {list(topk_positions.shape)}"
            )

        group = self._layer_group[layer]
        plan = self._step_plans.get(group)
        if plan is None:
            # Raises for a bad position or an oversized union before any state changes.
            plan = self._resolve(group, topk_positions)
            self._step_plans[group] = plan
        self._write_new_rows(layer, new_kv)

        dev = self.device_layers[layer]
        if plan.src_rows.numel():
            gather = gather_rows if self.use_triton else gather_rows_reference
            gather(self.host_layers[layer], dev, plan.src_rows, plan.dst_rows.to(self.device))
        kv = dev if self.kv_cache_dtype == "fp8_ds_mla" else dev.view(torch.bfloat16)
        decode = sparse_mla_decode if self.use_triton else sparse_mla_decode_reference
        out, lse = decode(q, kv, plan.indices.to(self.device), self.softmax_scale)
        self._written.add(layer)
        misses = int(plan.src_rows.numel())
        if layer != self._leaders[group]:
            # The resolver counted the leader's copies; count this layer's too (vLLM 0.33
            # charges misses x the row bytes of every layer in the group).
            self.metrics.record(host_to_device_bytes=misses * self.row_bytes)
        return LayerResult(out, lse, plan.hits, misses, plan.tail, misses * self.row_bytes)

    def end_step(self) -> None:
        """Close the step: write deferred host mirrors (``eager_host_mirror=False``).

        Raises ValueError when no step is open or a layer did not run.
        """
        if self._step_ids is None:
            raise ValueError("no open step")
        missing = sorted(set(range(self.num_layers)) - self._written)
        if missing:
            raise ValueError(f"layers {missing} did not run this step")
        self._flush_mirror()
        self._step_ids = None
        self._step_plans = {}

    # ---- internals ----------------------------------------------------------

    def _write_new_rows(self, layer: int, new_kv: torch.Tensor) -> None:
        assert self._step_ids is not None
        batch, s_q, _ = new_kv.shape
        rows = self.encode_rows(new_kv.reshape(batch * s_q, D_QK))
        for b, rid in enumerate(self._step_ids):
            req = self._requests[rid]
            n = self.pool.num_tokens(rid)
            positions = torch.arange(n - s_q, n, dtype=torch.int64)
            mine = rows[b * s_q : (b + 1) * s_q]
            host = torch.from_numpy(self.pool.host_rows(rid, positions.numpy()))
            # A step of more than block_size + 1 tokens outgrows the tail pages: its
            # oldest rows go straight to the host pool (whatever eager_host_mirror
            # says), where this step's gather finds them.
            tail = self._in_tail(positions, n)
            tail_dev = tail.to(mine.device)
            self.device_layers[layer][self._tail_rows(req.region, positions[tail]).to(self.device)] = mine[
                tail_dev
            ]
            if self.eager_host_mirror:
                self.host_layers[layer][host] = mine.to("cpu")
            else:
                self.host_layers[layer][host[~tail]] = mine[~tail_dev].to("cpu")
                req.pending_mirror.append((layer, n - s_q, mine))

    def _flush_mirror(self) -> None:
        for rid, req in self._requests.items():
            for layer, start, rows in req.pending_mirror:
                positions = np.arange(start, start + rows.shape[0], dtype=np.int64)
                host = torch.from_numpy(self.pool.host_rows(rid, positions))
                self.host_layers[layer][host] = rows.to("cpu")
            req.pending_mirror.clear()

    def _resolve(self, group: int, topk_positions: torch.Tensor) -> _GroupPlan:
        assert self._step_ids is not None
        ids = self._step_ids
        batch, s_q, topk = topk_positions.shape
        pos = topk_positions.to("cpu", torch.int64)
        host = torch.full((batch, s_q, topk), -1, dtype=torch.int64)
        indices = torch.full((batch, s_q, topk), -1, dtype=torch.int32)
        states = torch.empty((batch, s_q), dtype=torch.int32)
        for b, rid in enumerate(ids):
            req = self._requests[rid]
            n = self.pool.num_tokens(rid)
            p = pos[b]
            bad = (p < -1) | (p >= n)
            if bool(bad.any()):
                raise ValueError(
                    f"request {rid!r}: top-k position {int(p[bad][0])} outside [0, {n}) (-1 is padding)"
                )
            valid = p >= 0
            tail = valid & self._in_tail(p, n)
            indices[b][tail] = self._tail_rows(req.region, p[tail]).to(torch.int32)
            cold = valid & ~tail
            if bool(cold.any()):
                host[b][cold] = torch.from_numpy(self.pool.host_rows(rid, p[cold].numpy()))
            states[b] = req.states[group]
        res = self.resolver.resolve(host.reshape(batch * s_q, topk).numpy(), states.reshape(-1).numpy())
        slots = torch.from_numpy(res.slots).reshape(batch, s_q, topk)
        base = torch.tensor([self._requests[r].region * self.region_rows for r in ids], dtype=torch.int32)
        hot = slots >= 0
        indices[hot] = (slots + base[:, None, None])[hot]
        counts = torch.from_numpy(res.miss_counts).to(torch.int64)
        row_base = base.repeat_interleave(s_q).to(torch.int64)
        dst = torch.from_numpy(res.miss_slots).to(torch.int64) + row_base.repeat_interleave(counts)
        served_by_tail = int((indices >= 0).sum()) - int((slots >= 0).sum())
        return _GroupPlan(indices, torch.from_numpy(res.miss_host_rows), dst, res.hits, served_by_tail)
