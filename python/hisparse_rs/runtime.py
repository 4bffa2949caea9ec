"""The HiSparse decode step: resolve -> gather -> sparse MLA decode, per layer.

:class:`DecodeRuntime` ties the pieces together the way vLLM 0.33's
``vllm/v1/hisparse/runtime.py`` does:

- the full MLA latent KV of every token lives in one host pool tensor
  (pinned when CUDA is available), laid out by :class:`PoolLayout`, with
  block tables kept by :class:`HostKVPool`;
- each request owns a device region per layer of ``device_buffer_size`` hot
  slots (an LRU cache, one resolver state per request and index group) plus
  two retained tail pages that hold the newest ``block_size``..``2 x
  block_size`` tokens (vLLM keeps decode-written pages GPU-resident;
  HISPARSE.md §6 step 1 resolves them directly);
- every step and layer the indexer's top-k logical positions are mapped to
  device rows: tail positions directly, the rest through the resolver, whose
  miss plan is gathered host -> device before the sparse-MLA kernel runs.

Two resolver paths, the same results (``tests/test_runtime_lossless.py``):

- ``resolver="triton"`` (default on CUDA): everything :meth:`forward_layer`
  does is device work on buffers preallocated for ``max_num_seqs`` (positions
  -> host rows from device block tables that :meth:`begin_step` uploads once
  per step, tail detection, the Triton resolver, the gather, the decode, the
  KV write and mirror). No host synchronization per layer, so the layer can be
  captured in a CUDA graph (:meth:`capture_layer`). What the device finds
  (a union larger than the hot buffer, a position outside its request) is
  counted on the device and raised by :meth:`end_step`, once per step;
- ``resolver="rust"`` (default on CPU): the Rust ``ResidencyResolver`` on the
  host, one host round trip per layer; errors raise in :meth:`forward_layer`.

:meth:`set_resolver` moves every request's hot-buffer state between the two
between steps; the requests continue identically.

Layers that share an indexer (``index_groups``; GLM-5.2 IndexShare) share the
top-k: the group's first layer resolves, the others replay its miss plan into
their own rows (HISPARSE.md §6).

Needs the ``kernels`` extra (torch, triton); imported only when used.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from hisparse_rs._core import HiSparseMetrics, HiSparseSettings, HostKVPool, ResidencyResolver
from hisparse_rs.exceptions import HostPoolExhausted, PoolError, missing_extra

try:
    import torch
except ImportError as err:  # as hisparse_rs.kernels says it (tests/test_kernels_packaging.py)
    raise missing_extra("hisparse_rs.DecodeRuntime", "kernels", err) from err
from hisparse_rs.kernels import (
    BF16_ROW_BYTES,
    D_QK,
    FP8_ROW_BYTES,
    INTERPRET,
    PlanBuffers,
    ResolverWorkspace,
    TritonResidencyResolver,
    copy_rows,
    copy_rows_reference,
    finish_decode_indices,
    fp8_ds_mla_quantize,
    fp8_ds_mla_quantize_reference,
    gather_plan,
    gather_rows,
    gather_rows_reference,
    map_topk_positions,
    resolve_residency,
    sparse_mla_decode,
    sparse_mla_decode_reference,
)
from hisparse_rs.kernels._common import check_tensors
from hisparse_rs.kernels.resolver import FLAG_UNION_EXCEEDS
from hisparse_rs.pool import allocate_pool_buffer, layer_views

if TYPE_CHECKING:
    from hisparse_rs.config import ResolvedConfig

__all__ = ["MAX_Q_HEADS", "CapturedLayer", "DecodeRuntime", "LayerResult"]

# Pages of the newest tokens kept on the device per (request, layer): the page
# being written and the one before it, as vLLM 0.33's layout retains them.
TAIL_PAGES = 2
ROW_BYTES = {"fp8_ds_mla": FP8_ROW_BYTES, "bfloat16": BF16_ROW_BYTES}
RESOLVERS = ("rust", "triton")
MAX_Q_HEADS = 128
"""Query heads per rank the decode takes: vLLM 0.33's sparse FlashMLA decode
runs h_q 64 or 128 and pads fewer up (vllm/v1/attention/backends/mla/flashmla_sparse.py:716)."""
_I32 = 2**31 - 1

# Per-row step metadata (rows of DecodeRuntime._meta, int64 [_META + groups, rows]).
_REGION, _TOKENS, _TAIL_START, _BASE, _TAIL_DST, _MIRROR_DST, _DEFERRED_DST = range(7)
_META = 7
# Per-group step counters (columns of DecodeRuntime._counts, int64 [groups, 8]):
# the resolver's status (hits, misses, flags, 1 + overflowing state), then the
# position map's (tail entries, invalid positions, 1 + last row with one).
_HITS, _MISSES, _FLAGS, _OVERFLOW, _TAIL, _BAD, _BAD_ROW = range(7)


def _int_arg(name: str, value: object, lo: int, hi: int = _I32) -> int:
    """``value`` as an int in ``[lo, hi]``, or a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")
    return v


def _check_tensor(op: str, name: str, t: object) -> torch.Tensor:
    """``t``, a tensor with data that needs no autograd (the kernels' ``check_tensors``),
    else a ValueError saying which."""
    tensor = cast(torch.Tensor, t)  # check_tensors refuses anything else
    check_tensors(op, **{name: tensor})
    return tensor


class _StepCounts:
    """One step's per-group counters: on the device until :meth:`finish` reads them (once, at end_step)."""

    def __init__(self, device: torch.Tensor | None, groups: int) -> None:
        self.device = device
        self.host: np.ndarray[Any, np.dtype[np.int64]] | None = (
            None if device is not None else np.zeros((groups, 8), np.int64)
        )

    def finish(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        if self.host is None:
            assert self.device is not None
            self.host = self.device.cpu().numpy().copy()  # the step's one device -> host read
        return self.host

    def row(self, group: int) -> list[int]:
        if self.host is not None:
            return [int(v) for v in self.host[group]]
        assert self.device is not None
        return [int(v) for v in self.device[group].tolist()]  # synchronizes: read on demand


@dataclass(frozen=True)
class LayerResult:
    """One layer's decode output and what it cost.

    ``out`` bfloat16 [batch, s_q, h_q, 512]; ``lse`` float32 [batch, h_q, s_q]
    (natural log; +inf where no index was valid). The counts are the layer's
    index group's this step: ``hits`` / ``misses``: top-k entries found in a hot
    slot / copied from the host pool (the resolver's counts, also in
    :attr:`DecodeRuntime.metrics`); ``tail``: entries served by the retained tail
    pages, never copied; ``host_to_device_bytes`` = misses x row_bytes. On the
    Triton path they live on the device: reading one before :meth:`DecodeRuntime.end_step`
    synchronizes; after it they are host ints.
    """

    out: torch.Tensor
    lse: torch.Tensor
    _counts: _StepCounts = field(repr=False)
    _group: int = field(repr=False)
    _row_bytes: int = field(repr=False)

    @property
    def hits(self) -> int:
        return self._counts.row(self._group)[_HITS]

    @property
    def misses(self) -> int:
        return self._counts.row(self._group)[_MISSES]

    @property
    def tail(self) -> int:
        return self._counts.row(self._group)[_TAIL]

    @property
    def host_to_device_bytes(self) -> int:
        return self.misses * self._row_bytes


@dataclass
class _Request:
    region: int
    states: list[int]  # one resolver state per index group (ids of the current resolver)


@dataclass
class _GroupPlan:
    # A group's resolution this step, replayed by its other layers. The Triton
    # path keeps it in the group's device buffers (only its width here).
    width: int
    indices: torch.Tensor | None = None  # Rust path: int32 [batch, s_q, topk] device rows
    src_rows: torch.Tensor | None = None  # Rust path: int64 [n] host rows
    dst_rows: torch.Tensor | None = None  # Rust path: int64 [n] device rows
    miss_slots: list[np.ndarray[Any, np.dtype[np.int32]]] | None = None  # Rust path: per request


@dataclass
class _Undo:
    """What a group's resolving layer changes, saved before it runs, so that a
    failure anywhere in the layer puts it back (:meth:`DecodeRuntime._rollback`)."""

    group: int
    states: list[int]  # the group's state of each request of the batch
    saved: Any  # Rust: [(slot_rows, lru_order)] per state; Triton: (index, slot_rows, lru) on the device
    counts: Any  # the group's step counters before the layer (host row copy or device clone)
    width: int  # the top-k width the layer resolves
    gathered: bool = False  # the miss plan's copies started: those hot slots may hold other rows now


class _StepBuffers:
    """Device buffers of a step, sized for max_num_seqs x s_q rows (fixed addresses)."""

    def __init__(self, rt: DecodeRuntime, s_q: int, generation: int) -> None:
        dev = rt.device
        self.s_q = s_q
        self.generation = generation
        rows = rt.max_num_seqs * s_q
        self.rows = rows
        groups = rt.num_index_groups
        topk = rt.index_topk
        pin = dev.type == "cuda"
        self.meta_host = torch.full((_META + groups, rows), -1, dtype=torch.int64, pin_memory=pin)
        self.meta = torch.full((_META + groups, rows), -1, dtype=torch.int64, device=dev)
        self.arange = torch.arange(rows, dtype=torch.int64, device=dev)
        self.host_rows = torch.empty((rows, topk), dtype=torch.int64, device=dev)
        # Decode indices: one buffer per group whose later layers replay them, one shared by the rest.
        shared = torch.empty((rows, topk), dtype=torch.int32, device=dev)
        self.indices = [
            torch.empty((rows, topk), dtype=torch.int32, device=dev) if rt._group_size[g] > 1 else shared
            for g in range(groups)
        ]
        self.encoded = torch.empty((rows, rt.row_bytes), dtype=torch.uint8, device=dev)
        self.deferred = (
            None
            if rt.eager_host_mirror
            else torch.empty((rt.num_layers, rows, rt.row_bytes), dtype=torch.uint8, device=dev)
        )
        self.counts = torch.zeros((groups, 8), dtype=torch.int64, device=dev)
        self.workspace: ResolverWorkspace | None = None
        self.plans: list[PlanBuffers] = []
        if rt.resolver_path == "triton":
            self.workspace = ResolverWorkspace(
                rt.device_buffer_size, topk, rows, max_rows_per_state=s_q, device=dev
            )
            self.plans = [
                PlanBuffers(rows, topk, dev) if rt._group_size[g] > 1 else self.workspace.outputs
                for g in range(groups)
            ]


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
        resolver: ``"triton"`` (device resident, default on CUDA) or ``"rust"``
            (host, default on CPU); ``"triton"`` on a CPU needs TRITON_INTERPRET=1.
        max_model_len: tokens a request may reach (sizes the device block
            tables: max_num_seqs x ceil(max_model_len / block_size) int32);
            default: the whole host pool.
        max_num_new_tokens: tokens per request and step the buffers are sized
            for (1 + MTP draft tokens); a larger step reallocates them (and
            invalidates captured layers).

    Attributes:
        resolver_path: ``"rust"`` or ``"triton"``, the path in use (:meth:`set_resolver`).
        resolver: the Rust :class:`ResidencyResolver` (the ``"rust"`` path's states;
            it counts into its own metrics, attempts that were undone included:
            the runtime's counts are :attr:`metrics`).
        device_resolver: the :class:`~hisparse_rs.kernels.TritonResidencyResolver`
            holding the ``"triton"`` path's states on the device (built on first use).
        pool, metrics, host_layers, device_layers, block_tables: the host pool,
            vLLM's counters, the pool's per-layer uint8 rows, the hot buffers'
            per-layer uint8 rows, the device block tables (int32, per region).

    Raises:
        ValueError: inconsistent sizes, an int argument outside its range (named).
        PoolError: sizes the Rust core rejects (e.g. device_buffer_size < index_topk or > 32768).
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
        resolver: str | None = None,
        max_model_len: int | None = None,
        max_num_new_tokens: int = 1,
    ) -> None:
        if kv_cache_dtype not in ROW_BYTES:
            raise ValueError(f"kv_cache_dtype must be one of {sorted(ROW_BYTES)}, got {kv_cache_dtype!r}")
        if (num_host_blocks is None) == (host_pool_gib is None):
            raise ValueError("give exactly one of num_host_blocks and host_pool_gib")
        num_layers = _int_arg("num_layers", num_layers, 1, 1 << 16)
        index_topk = _int_arg("index_topk", index_topk, 1)
        device_buffer_size = _int_arg("device_buffer_size", device_buffer_size, 1)
        block_size = _int_arg("block_size", block_size, 1, 1 << 20)
        max_num_seqs = _int_arg("max_num_seqs", max_num_seqs, 1, 1 << 16)
        max_num_new_tokens = _int_arg("max_num_new_tokens", max_num_new_tokens, 1, 1 << 10)
        if num_host_blocks is not None:
            num_host_blocks = _int_arg("num_host_blocks", num_host_blocks, 1)
        if host_pool_gib is not None:
            try:
                gib = float(host_pool_gib)
            except (TypeError, ValueError, OverflowError) as e:
                raise ValueError(f"host_pool_gib must be a finite number > 0, got {host_pool_gib!r}") from e
            if not (math.isfinite(gib) and gib > 0):
                raise ValueError(f"host_pool_gib must be a finite number > 0, got {host_pool_gib!r}")
        scale = float(softmax_scale)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"softmax_scale must be a finite number > 0, got {softmax_scale!r}")
        groups = list(range(num_layers)) if index_groups is None else list(index_groups)
        if len(groups) != num_layers:
            raise ValueError(f"index_groups has {len(groups)} entries for {num_layers} layers")
        self.device = torch.device(device)
        if self.device.type == "meta":
            raise ValueError("device must hold data (cpu or cuda), got meta")
        kind = resolver if resolver is not None else ("triton" if self.device.type == "cuda" else "rust")
        if kind not in RESOLVERS:
            raise ValueError(f"resolver must be one of {RESOLVERS}, got {resolver!r}")
        self._check_triton_runs(kind == "triton" or bool(use_triton))
        self.kv_cache_dtype = kv_cache_dtype
        self.row_bytes = ROW_BYTES[kv_cache_dtype]
        self.softmax_scale = scale
        self.block_size = block_size
        self.index_topk = index_topk
        self.device_buffer_size = device_buffer_size
        self.eager_host_mirror = eager_host_mirror
        self.max_num_seqs = max_num_seqs
        self.use_triton = self.device.type == "cuda" if use_triton is None else bool(use_triton)
        self.resolver_path = kind

        self.metrics = HiSparseMetrics()
        if num_host_blocks is not None:
            self.pool = HostKVPool(
                num_host_blocks, block_size, self.row_bytes, num_layers, metrics=self.metrics
            )
        else:
            self.pool = HostKVPool.from_host_pool_gib(
                gib, block_size, self.row_bytes, num_layers, metrics=self.metrics
            )
        # The Rust resolver (the "rust" path's states; it validates the sizes, with
        # their codes, for both paths). It counts into its own metrics: the
        # runtime records a layer's counts in self.metrics once the layer succeeded.
        self.resolver = ResidencyResolver(
            device_buffer_size, index_topk, self.pool.num_host_rows, self.row_bytes
        )
        self._dev: TritonResidencyResolver | None = None
        self._num_host_rows = self.pool.num_host_rows
        self.max_model_len = (
            self.pool.num_host_rows
            if max_model_len is None
            else _int_arg("max_model_len", max_model_len, 1, 1 << 40)
        )
        self.layout = self.pool.layout()
        self.host_buffer = allocate_pool_buffer(self.layout, backend="torch")
        self.host_layers: list[torch.Tensor] = layer_views(self.host_buffer, self.layout)

        # Group id -> dense group index; the first layer of a group leads it.
        dense = {g: i for i, g in enumerate(dict.fromkeys(groups))}
        self._layer_group = [dense[g] for g in groups]
        self._leaders = {i: self._layer_group.index(i) for i in range(len(dense))}
        self._group_size = [self._layer_group.count(i) for i in range(len(dense))]
        self.num_index_groups = len(dense)

        self.region_rows = device_buffer_size + TAIL_PAGES * block_size
        rows = max_num_seqs * self.region_rows
        # uint8 rows on the device, one tensor per layer; zeroed so an unused
        # row never holds NaN bit patterns (the kernels mask them anyway).
        self.device_layers = [
            torch.zeros((rows, self.row_bytes), dtype=torch.uint8, device=self.device)
            for _ in range(num_layers)
        ]
        max_blocks = -(-min(self.max_model_len, self.pool.num_host_rows) // block_size)
        pin = self.device.type == "cuda"
        self._block_tables_host = torch.zeros((max_num_seqs, max_blocks), dtype=torch.int32, pin_memory=pin)
        self.block_tables = torch.zeros((max_num_seqs, max_blocks), dtype=torch.int32, device=self.device)
        self._requests: dict[str, _Request] = {}
        self._free_regions = list(range(max_num_seqs - 1, -1, -1))
        self._step_ids: list[str] | None = None
        self._step_tokens = 0  # new tokens per request in the open step (s_q)
        self._step_plans: dict[int, _GroupPlan] = {}
        self._written: set[int] = set()
        self._generation = 0
        self._buffers = _StepBuffers(self, max_num_new_tokens, self._generation)
        self._upload_done: torch.cuda.Event | None = None
        self._step_counts = _StepCounts(None, self.num_index_groups)
        self._graph_pool: Any = None
        self._unusable: str | None = None  # why, after a failure that could not be undone

    @staticmethod
    def _check_triton_runs(wanted: bool) -> None:
        # A CPU run of Triton kernels needs the interpreter; say so at construction.
        if wanted and not INTERPRET and not torch.cuda.is_available():
            raise ValueError(
                "the Triton path needs a CUDA device, or TRITON_INTERPRET=1 set before hisparse_rs.kernels "
                "is imported (slow; for tests). Fix: resolver='rust' and use_triton=False on a CPU"
            )

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
        resolver: str | None = None,
    ) -> DecodeRuntime:
        """A runtime sized by a resolved configuration (``hisparse_rs.resolve``).

        Takes ``host_blocks``, ``block_size``, ``kv_cache_dtype`` (``auto`` is
        bfloat16), ``device_buffer_size``, ``eager_host_mirror``, the sparse-MLA
        layer count (MTP draft layers included), ``max_model_len``,
        ``max_decode_query_len`` (as ``max_num_new_tokens``) and, as the top-k
        width, ``topk_buffer_width`` (``index_topk``, wider for a pooled indexer).

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
        if not isinstance(h, HiSparseSettings):
            raise ValueError("DecodeRuntime runs vLLM 0.33's HiSparse layout: resolve a vLLM configuration")
        dtype = "bfloat16" if h.kv_cache_dtype in ("auto", "bfloat16") else h.kv_cache_dtype
        if dtype not in ROW_BYTES or h.row_bytes != ROW_BYTES[dtype]:
            raise ValueError(
                f"kv_cache_dtype {h.kv_cache_dtype!r} with {h.row_bytes}-byte rows has no runtime row format "
                f"(576-value MLA rows: fp8_ds_mla 656 B or bfloat16 1152 B)"
            )
        blocks = h.host_blocks
        if num_host_blocks is not None:
            num_host_blocks = _int_arg("num_host_blocks", num_host_blocks, 1)
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
            resolver=resolver,
            max_model_len=h.max_model_len,
            max_num_new_tokens=h.max_decode_query_len,
        )

    # ---- rows ---------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        return len(self.device_layers)

    def encode_rows(self, kv: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """bf16 [n, 576] latent KV -> uint8 [n, row_bytes] rows in the cache format
        (into ``out``, uint8 [n, row_bytes], when given and the dtype is fp8_ds_mla)."""
        if kv.dim() != 2 or kv.shape[1] != D_QK or kv.dtype != torch.bfloat16:
            raise ValueError(f"KV rows must be bfloat16 [n, {D_QK}], got {kv.dtype} {list(kv.shape)}")
        if self.kv_cache_dtype == "bfloat16":
            return kv.contiguous().view(torch.uint8)
        if self.use_triton:
            return fp8_ds_mla_quantize(kv.contiguous(), out)
        rows = fp8_ds_mla_quantize_reference(kv.contiguous())
        return rows if out is None else out.copy_(rows)

    def _tail_rows(self, region: int, positions: torch.Tensor) -> torch.Tensor:
        # Page k of a request lives in tail page k % TAIL_PAGES of its region.
        bs = self.block_size
        page = torch.div(positions, bs, rounding_mode="floor")
        return region * self.region_rows + self.device_buffer_size + (page % TAIL_PAGES) * bs + positions % bs

    def _tail_start(self, num_tokens: int) -> int:
        newest_page = (num_tokens - 1) // self.block_size
        return max(newest_page - TAIL_PAGES + 1, 0) * self.block_size

    # ---- requests -----------------------------------------------------------

    def add_request(self, request_id: str, kv: torch.Tensor | Sequence[torch.Tensor]) -> None:
        """Admit a request with its prefill KV: bf16 [num_layers, n, 576] (or one [n, 576] per layer).

        Every prefill row is written to the host pool (vLLM mirrors prefill rows
        always); the newest two pages also go to the request's tail pages.

        Raises (nothing changes then):
            HostPoolExhausted: the host pool cannot hold n tokens.
            PoolError ``duplicate_request``; ValueError: no free device region
                (max_num_seqs requests resident), KV of the wrong shape, dtype or
                kind (meta, requires_grad), more than max_model_len tokens, or a step is open.
        """
        self._check_usable()
        if self._step_ids is not None:
            raise ValueError("add requests between steps (after end_step)")
        if not isinstance(request_id, str):
            raise ValueError(f"request_id must be a str, got {type(request_id).__name__}")
        layers = [_check_tensor("add_request", "kv", t) for t in kv]
        if len(layers) != self.num_layers:
            raise ValueError(f"prefill KV has {len(layers)} layers, the runtime has {self.num_layers}")
        n = int(layers[0].shape[0]) if layers[0].dim() else 0
        if n < 1 or any(t.dim() != 2 or int(t.shape[0]) != n for t in layers):
            raise ValueError("prefill KV must have the same n >= 1 rows in every layer")
        if n > self.max_model_len:
            raise ValueError(
                f"request {request_id!r} has {n} tokens, more than max_model_len {self.max_model_len}"
            )
        if request_id in self._requests:
            raise PoolError("duplicate_request", f"request {request_id!r} is already admitted")
        if not self._free_regions:
            raise ValueError(
                f"all {self.max_num_seqs} device regions are in use (max_num_seqs); finish a request"
            )
        rows = [self.encode_rows(t) for t in layers]  # validates every layer's rows first
        table = self.pool.admit(request_id, n)  # HostPoolExhausted: nothing allocated
        region = self._free_regions.pop()
        states: list[int] = []
        try:
            states = [self._new_state() for _ in range(self.num_index_groups)]
            positions = torch.arange(n, dtype=torch.int64)
            host_rows = torch.from_numpy(self.pool.host_rows(request_id, positions.numpy()))
            tail = positions >= self._tail_start(n)
            tail_dst = self._tail_rows(region, positions[tail]).to(self.device)
            for layer, r in enumerate(rows):
                self.host_layers[layer][host_rows] = r.to("cpu")
                self.device_layers[layer][tail_dst] = r[tail.to(r.device)].to(self.device)
        except BaseException:
            # Roll back what this call took: the request, its blocks, its region and states.
            for s in states:
                self._free_state(s)
            self.pool.free(request_id)
            self._free_regions.append(region)
            raise
        self._requests[request_id] = _Request(region, states)
        self._wait_upload()
        self._block_tables_host[region].zero_()
        self._block_tables_host[region, : len(table)] = torch.from_numpy(table)

    def finish_request(self, request_id: str) -> None:
        """Release a finished or aborted request's host blocks, resolver states and device region.

        Raises PoolError ``unknown_request``; ValueError inside a step (nothing changes then).
        """
        self._check_usable()
        if self._step_ids is not None:
            raise ValueError("finish requests between steps (after end_step)")
        if not isinstance(request_id, str) or request_id not in self._requests:
            raise PoolError("unknown_request", f"request {request_id!r} is not admitted")
        req = self._requests.pop(request_id)
        for s in req.states:
            self._free_state(s)
        self.pool.free(request_id)
        self._free_regions.append(req.region)

    @property
    def request_ids(self) -> list[str]:
        return sorted(self._requests)

    def num_tokens(self, request_id: str) -> int:
        return self.pool.num_tokens(request_id)

    # ---- resolver states ----------------------------------------------------

    def _device_resolver(self) -> TritonResidencyResolver:
        if self._dev is None:
            self._dev = TritonResidencyResolver(
                self.device_buffer_size,
                self.index_topk,
                self.pool.num_host_rows,
                max_states=self.max_num_seqs * self.num_index_groups,
                max_rows=1,
                device=self.device,
            )
        return self._dev

    @property
    def device_resolver(self) -> TritonResidencyResolver:
        return self._device_resolver()

    def _new_state(self) -> int:
        if self.resolver_path == "triton":
            return self._device_resolver().new_state()
        return self.resolver.new_state()

    def _free_state(self, state: int) -> None:
        if self.resolver_path == "triton":
            self._device_resolver().free_state(state)
        else:
            self.resolver.free_state(state)

    def set_resolver(self, resolver: str) -> None:
        """Switch between the ``"rust"`` and ``"triton"`` resolver paths, between steps.

        Every request's hot-buffer states move to the other resolver (exported,
        imported, the old ones freed), so each request continues exactly as it
        would have. Raises ValueError inside a step, for an unknown name, or when
        the Triton path cannot run here (nothing changes then).
        """
        self._check_usable()
        if self._step_ids is not None:
            raise ValueError("switch resolvers between steps (after end_step)")
        if resolver not in RESOLVERS:
            raise ValueError(f"resolver must be one of {RESOLVERS}, got {resolver!r}")
        if resolver == self.resolver_path:
            return
        self._check_triton_runs(resolver == "triton")
        dev = self._device_resolver()
        moved: dict[str, list[int]] = {}
        for rid, req in self._requests.items():
            if resolver == "triton":
                new = [dev.new_state() for _ in req.states]
                for old, s in zip(req.states, new, strict=True):
                    dev.import_state(s, *(torch.from_numpy(a) for a in self.resolver.export_state(old)))
            else:
                new = [self.resolver.new_state() for _ in req.states]
                for old, s in zip(req.states, new, strict=True):
                    self.resolver.import_state(s, *(t.cpu().numpy() for t in dev.export_state(old)))
            moved[rid] = new
        for rid, req in self._requests.items():
            for old in req.states:
                (self.resolver.free_state(old) if resolver == "triton" else dev.free_state(old))
            req.states = moved[rid]
        self.resolver_path = resolver
        self._generation += 1
        self._buffers = _StepBuffers(self, self._buffers.s_q, self._generation)

    # ---- a step -------------------------------------------------------------

    def begin_step(self, request_ids: Sequence[str], num_new_tokens: int = 1) -> torch.Tensor:
        """Start a decode step for ``request_ids`` (the batch order), each
        generating ``num_new_tokens`` tokens (1, or 1 + MTP draft tokens).

        Host work, once per step: appends the new tokens to the host pool and
        uploads the step's metadata (block tables, regions, token counts, tail
        and mirror rows) to the device in one copy.

        Returns the new tokens' positions, int64 [batch, num_new_tokens] (CPU).
        Raises (nothing changes then) HostPoolExhausted when the batch's new
        blocks do not fit (finish or preempt a request and retry), PoolError
        ``unknown_request``, ValueError when a step is already open, a request
        appears twice, ``num_new_tokens`` is not an int >= 1, or a request
        would pass max_model_len.
        """
        self._check_usable()
        if self._step_ids is not None:
            raise ValueError("a step is already open: call end_step first")
        ids = list(request_ids)
        if len(set(ids)) != len(ids):
            raise ValueError("a request appears twice in the batch")
        for r in ids:
            if not isinstance(r, str) or r not in self._requests:
                raise PoolError("unknown_request", f"request {r!r} is not admitted")
        s_q = _int_arg("num_new_tokens", num_new_tokens, 1, 1 << 10)
        starts = [self.pool.num_tokens(r) for r in ids]
        for r, n in zip(ids, starts, strict=True):
            if n + s_q > self.max_model_len:
                raise ValueError(
                    f"request {r!r} would have {n + s_q} tokens, more than max_model_len {self.max_model_len}"
                )
        # All or nothing, as the pool's own allocations: check the whole batch first.
        needed = sum(
            self.pool.blocks_for(n + s_q) - len(self.pool.block_table(r))
            for r, n in zip(ids, starts, strict=True)
        )
        if needed > self.pool.free_blocks:
            raise HostPoolExhausted(needed, self.pool.free_blocks)
        if s_q > self._buffers.s_q:
            self._generation += 1
            self._buffers = _StepBuffers(self, s_q, self._generation)
        for r, n in zip(ids, starts, strict=True):
            new = self.pool.append(r, s_q)
            if len(new):
                have = self.pool.blocks_for(n)
                region = self._requests[r].region
                self._wait_upload()
                self._block_tables_host[region, have : have + len(new)] = torch.from_numpy(new)
        self._step_ids = ids
        self._step_tokens = s_q
        self._step_plans = {}
        self._written = set()
        self._upload_step(ids, starts, s_q)
        return torch.tensor(starts, dtype=torch.int64)[:, None] + torch.arange(s_q)

    def _wait_upload(self) -> None:
        # The pinned staging of the previous upload may still be read by its copy.
        if self._upload_done is not None:
            self._upload_done.synchronize()
            self._upload_done = None

    def _upload_step(self, ids: Sequence[str], starts: Sequence[int], s_q: int) -> None:
        """Step metadata, per token row b x s_q + j (padded rows: -1), to the device in one copy."""
        buf = self._buffers
        self._wait_upload()
        meta = buf.meta_host.numpy()
        meta.fill(-1)
        bs = self.block_size
        for b, (rid, start) in enumerate(zip(ids, starts, strict=True)):
            req = self._requests[rid]
            n = start + s_q
            tail_start = self._tail_start(n)
            rows = slice(b * s_q, (b + 1) * s_q)
            positions = np.arange(start, n, dtype=np.int64)
            host = self.pool.host_rows(rid, positions)
            in_tail = positions >= tail_start
            page = positions // bs
            tail_dst = req.region * self.region_rows + self.device_buffer_size + (page % TAIL_PAGES) * bs
            tail_dst += positions % bs
            meta[_REGION, rows] = req.region
            meta[_TOKENS, rows] = n
            meta[_TAIL_START, rows] = tail_start
            meta[_BASE, rows] = req.region * self.region_rows
            meta[_TAIL_DST, rows] = np.where(in_tail, tail_dst, -1)
            # A step of more than block_size + 1 tokens outgrows the tail pages: its
            # oldest rows go straight to the host pool (whatever eager_host_mirror
            # says), where this step's gather finds them.
            meta[_MIRROR_DST, rows] = host if self.eager_host_mirror else np.where(in_tail, -1, host)
            if not self.eager_host_mirror:
                meta[_DEFERRED_DST, rows] = np.where(in_tail, host, -1)
            for g, s in enumerate(req.states):
                meta[_META + g, rows] = s
        non_blocking = self.device.type == "cuda"
        buf.meta.copy_(buf.meta_host, non_blocking=non_blocking)
        self.block_tables.copy_(self._block_tables_host, non_blocking=non_blocking)
        buf.counts.zero_()
        self._step_counts = _StepCounts(
            buf.counts if self.resolver_path == "triton" else None, self.num_index_groups
        )
        if non_blocking:
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record()
            self._upload_done = event

    def _check_layer_inputs(
        self, op: str, layer: object, q: object, new_kv: object, topk_positions: object, batch: int, s_q: int
    ) -> tuple[int, torch.Tensor, torch.Tensor, torch.Tensor]:
        layer = _int_arg("layer", layer, 0, self.num_layers - 1)
        q = _check_tensor(op, "q", q)
        new_kv = _check_tensor(op, "new_kv", new_kv)
        topk_positions = _check_tensor(op, "topk_positions", topk_positions)
        if (
            q.dtype != torch.bfloat16
            or q.dim() != 4
            or tuple(q.shape[:2]) != (batch, s_q)
            or not 1 <= q.shape[2] <= MAX_Q_HEADS
            or q.shape[3] != D_QK
        ):
            raise ValueError(
                f"q must be bfloat16 [batch={batch}, s_q={s_q} (begin_step's num_new_tokens), "
                f"h_q in [1, {MAX_Q_HEADS}] (the query heads of one rank), {D_QK}], "
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
        for name, t in (("q", q), ("new_kv", new_kv)):
            if t.device != self.device:
                raise ValueError(f"{name} must be on the runtime's device {self.device}, got {t.device}")
        if self.resolver_path == "triton" and topk_positions.device != self.device:
            raise ValueError(
                f"topk_positions must be on {self.device} on the Triton resolver path (no host round trip), "
                f"got {topk_positions.device}"
            )
        return layer, q, new_kv, topk_positions

    def forward_layer(
        self, layer: int, q: torch.Tensor, new_kv: torch.Tensor, topk_positions: torch.Tensor
    ) -> LayerResult:
        """One layer of the open step: write the new KV rows, resolve, gather, decode.

        Args:
            layer: local layer id, 0 <= layer < num_layers.
            q: bf16 [batch, s_q, h_q, 576] queries (absorbed NoPE 512 + RoPE 64), on the runtime's device.
            new_kv: bf16 [batch, s_q, 576] the new tokens' latent KV for this layer, on the runtime's device.
            topk_positions: int32/int64 [batch, s_q, <= index_topk] logical token
                positions from the indexer, -1 = padding (on the runtime's device
                for the Triton resolver path). Layers of one index group pass the
                same top-k (only the first is read).

        Returns:
            :class:`LayerResult`.

        Sync contract: on the Triton path no host synchronization happens here
        (the counts in the result stay on the device); positions outside their
        request count as padding and :meth:`end_step` raises for them. On the
        Rust path the top-k goes to the host and back once per index group.

        Raises (nothing changes then):
            ValueError: no open step, a layer run twice, wrong shapes, dtypes or
                devices (``h_q`` at most :data:`MAX_Q_HEADS`), meta or
                requires_grad tensors, or (Rust path) a position outside
                [0, num_tokens) of its request.
            PoolError ``union_exceeds_device_buffer`` (Rust path): a request's
                query rows select more distinct rows than device_buffer_size.

        A failure after the checks (a kernel that raises, out of memory) is
        undone before it propagates: the layer's index group gets back its
        resolver states, step counters and metrics (nothing is counted), and
        the step stays open, so the same call can be retried. The one trace
        left: hot slots the failed layer's miss plan may have overwritten are
        emptied in the restored states (their rows miss once more on the
        retry; the outputs are the same). The new KV rows it wrote are written
        again by the retry. Should the undo itself fail (out of memory while
        restoring), this raises RuntimeError and the runtime refuses every
        later call with RuntimeError: build a new one.
        """
        self._check_usable()
        ids = self._step_ids
        if ids is None:
            raise ValueError("no open step: call begin_step first")
        batch, s_q = len(ids), self._step_tokens
        layer, q, new_kv, topk_positions = self._check_layer_inputs(
            "forward_layer", layer, q, new_kv, topk_positions, batch, s_q
        )
        if layer in self._written:
            raise ValueError(f"layer {layer} already ran this step")
        group = self._layer_group[layer]
        width = int(topk_positions.shape[2])
        self._check_group_width(group, width)
        if self.resolver_path == "triton":
            resolve = group not in self._step_plans
            undo = self._save(group, width) if resolve else None
            out, lse = self._undoable(
                undo, lambda: self._device_layer(layer, q, new_kv, topk_positions, resolve, undo)
            )
            self._step_plans.setdefault(group, _GroupPlan(width))
        else:
            resolve = group not in self._step_plans
            undo = self._save(group, width) if resolve else None
            out, lse = self._undoable(undo, lambda: self._host_layer(layer, q, new_kv, topk_positions, undo))
            self._commit_host_metrics(group, resolve)
        self._written.add(layer)
        return LayerResult(out, lse, self._step_counts, group, self.row_bytes)

    # ---- undoing a failed layer ---------------------------------------------

    def _save(self, group: int, width: int) -> _Undo:
        """What the group's resolving layer will change: the batch's states for
        the group and the group's step counters."""
        assert self._step_ids is not None
        states = [self._requests[r].states[group] for r in self._step_ids]
        if self.resolver_path == "rust":
            host = self._step_counts.host
            assert host is not None
            saved = [self.resolver.export_state(s) for s in states]
            return _Undo(group, states, saved, host[group].copy(), width)
        dev = self._device_resolver()
        # The states as the step's metadata holds them (one per request), on the device: no sync.
        index = self._buffers.meta[_META + group, : len(states) * self._step_tokens : self._step_tokens]
        on_device = (index, dev.slot_rows_all.index_select(0, index), dev.lru_all.index_select(0, index))
        return _Undo(group, states, on_device, self._buffers.counts[group].clone(), width)

    def _undoable(
        self, undo: _Undo | None, run: Callable[[], tuple[torch.Tensor, torch.Tensor]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            return run()
        except BaseException as failure:
            if undo is not None:
                try:
                    self._rollback(undo)
                except BaseException as e:
                    # The undo itself failed (out of memory, say): the group's states may be
                    # half restored. Nothing may run on them: the runtime refuses every call.
                    self._unusable = (
                        f"a layer of index group {undo.group} failed ({failure!r}) and undoing it failed "
                        f"too ({e!r}): its resolver states may not match the hot buffers"
                    )
                    raise self._unusable_error() from failure
            raise

    def _unusable_error(self) -> RuntimeError:
        return RuntimeError(
            f"DecodeRuntime is unusable: {self._unusable}. Build a new DecodeRuntime and "
            "admit the requests again (their prefill), as after a lost worker"
        )

    def _check_usable(self) -> None:
        if self._unusable is not None:
            raise self._unusable_error()

    def _rollback(self, undo: _Undo) -> None:
        """Put back what ``undo`` saved; slots a started gather may have written are emptied."""
        g = undo.group
        if self.resolver_path == "rust":
            plan = self._step_plans.pop(g, None)
            host = self._step_counts.host
            assert host is not None
            host[g] = undo.counts
            for b, (s, (rows, lru)) in enumerate(zip(undo.states, undo.saved, strict=True)):
                if undo.gathered and plan is not None and plan.miss_slots is not None:
                    rows = rows.copy()
                    rows[plan.miss_slots[b]] = -1
                self.resolver.import_state(s, rows, lru)
            return
        dev = self._device_resolver()
        index, slot_rows, lru_order = undo.saved
        if undo.gathered:
            buf, s_q = self._buffers, self._step_tokens
            n = len(undo.states) * s_q
            width = undo.width
            if width:
                written = buf.plans[g].views(n, width, buf.counts[g, _HITS : _OVERFLOW + 1])
                taken = torch.arange(width, device=self.device)[None, :] < written.miss_counts[:, None].long()
                request = (torch.arange(n, device=self.device) // s_q)[:, None].expand(n, width)
                slot_rows[request[taken], written.miss_slots[taken].long()] = -1
        dev.slot_rows_all.index_copy_(0, index, slot_rows)
        dev.lru_all.index_copy_(0, index, lru_order)
        self._buffers.counts[g].copy_(undo.counts)

    def _commit_host_metrics(self, group: int, resolved: bool) -> None:
        """The Rust path's metrics, recorded once the layer succeeded (the
        runtime's resolver counts into its own metrics, not these)."""
        host = self._step_counts.host
        assert host is not None
        misses = int(host[group, _MISSES])
        if resolved:
            self.metrics.record(
                hits=int(host[group, _HITS]), misses=misses, host_to_device_bytes=misses * self.row_bytes
            )
        else:
            # vLLM 0.33 charges misses x the row bytes of every layer in the group.
            self.metrics.record(host_to_device_bytes=misses * self.row_bytes)

    def end_step(self) -> None:
        """Close the step: write deferred host mirrors (``eager_host_mirror=False``),
        and, on the Triton path, read the step's counters once (metrics, errors).

        Raises ValueError when no step is open or a layer did not run (nothing
        changes then). On the Triton path, after closing the step (the runtime
        stays consistent: an overflowing state was left as it was): PoolError
        ``union_exceeds_device_buffer`` when a request's query rows selected more
        distinct rows than device_buffer_size (its outputs this step attended
        over nothing from the hot buffer), ValueError for a top-k position
        outside its request (treated as padding).
        """
        self._check_usable()
        if self._step_ids is None:
            raise ValueError("no open step")
        missing = sorted(set(range(self.num_layers)) - self._written)
        if missing:
            raise ValueError(f"layers {missing} did not run this step")
        ids, s_q = self._step_ids, self._step_tokens
        buf = self._buffers
        if buf.deferred is not None:
            rows = len(ids) * s_q
            copy = copy_rows if self._triton_copies else copy_rows_reference
            for layer in range(self.num_layers):
                copy(
                    buf.deferred[layer, :rows],
                    self.host_layers[layer],
                    buf.arange[:rows],
                    buf.meta[_DEFERRED_DST, :rows],
                )
        self._step_ids = None
        self._step_plans = {}
        error: Exception | None = None
        if self.resolver_path == "triton":
            counts = self._step_counts.finish()
            misses = int(counts[:, _MISSES].sum())
            layer_misses = sum(
                int(counts[self._layer_group[layer], _MISSES]) for layer in range(self.num_layers)
            )
            self.metrics.record(
                hits=int(counts[:, _HITS].sum()),
                misses=misses,
                host_to_device_bytes=layer_misses * self.row_bytes,
            )
            error = self._step_error(counts, ids, s_q)
        if error is not None:
            raise error

    def _step_error(
        self, counts: np.ndarray[Any, np.dtype[np.int64]], ids: list[str], s_q: int
    ) -> Exception | None:
        states = {s: (rid, g) for rid, req in self._requests.items() for g, s in enumerate(req.states)}
        over = [int(v) - 1 for v in counts[:, _OVERFLOW] if v > 0]
        if over and int(np.bitwise_or.reduce(counts[:, _FLAGS])) & FLAG_UNION_EXCEEDS:
            rid, g = states.get(max(over), ("?", -1))
            return PoolError(
                "union_exceeds_device_buffer",
                f"request {rid!r} (index group {g}): the union of its {s_q} query rows' top-k holds more "
                f"distinct host rows than device_buffer_size {self.device_buffer_size}; its hot buffer was "
                "left as it was and its outputs this step are invalid. Raise device_buffer_size to "
                "(max_decode_query_len + 1) x top-k",
            )
        bad_rows = [int(v) - 1 for v in counts[:, _BAD_ROW] if v > 0]
        if bad_rows:
            rid = ids[max(bad_rows) // s_q]
            return ValueError(
                f"request {rid!r}: {int(counts[:, _BAD].sum())} top-k position(s) this step were outside "
                f"[0, {self.pool.num_tokens(rid)}) (-1 is padding); they were treated as padding"
            )
        return None

    def _check_group_width(self, group: int, width: int) -> None:
        plan = self._step_plans.get(group)
        if plan is not None and plan.width != width:
            raise ValueError(
                f"index group {group} resolved top-k rows {plan.width} wide this step; its other layers "
                f"replay that plan and must pass the same width, got {width}"
            )

    @property
    def _triton_copies(self) -> bool:
        return self.use_triton or self.resolver_path == "triton"

    # ---- the layer's work ---------------------------------------------------

    def _write_new_rows(self, layer: int, new_kv: torch.Tensor, rows: int) -> None:
        # Tail pages always; the host pool now (eager, or rows past the tail pages); else staged.
        buf = self._buffers
        encoded = self.encode_rows(
            new_kv.reshape(rows, D_QK), None if self.kv_cache_dtype == "bfloat16" else buf.encoded[:rows]
        )
        copy = copy_rows if self._triton_copies else copy_rows_reference
        src = buf.arange[:rows]
        copy(encoded, self.device_layers[layer], src, buf.meta[_TAIL_DST, :rows])
        copy(encoded, self.host_layers[layer], src, buf.meta[_MIRROR_DST, :rows])
        if buf.deferred is not None:
            buf.deferred[layer, :rows].copy_(encoded)

    def _decode(
        self, q: torch.Tensor, layer: int, indices: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        dev = self.device_layers[layer]
        kv = dev if self.kv_cache_dtype == "fp8_ds_mla" else dev.view(torch.bfloat16)
        decode = sparse_mla_decode if self.use_triton else sparse_mla_decode_reference
        return decode(q, kv, indices, self.softmax_scale)

    def _device_layer(
        self,
        layer: int,
        q: torch.Tensor,
        new_kv: torch.Tensor,
        topk_positions: torch.Tensor,
        resolve: bool,
        undo: _Undo | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The Triton path's layer: device launches on fixed buffers only, so a
        CUDA graph can hold it. ``resolve``: this layer resolves its index group
        (its first layer this step); the others read the group's plan buffers."""
        buf = self._buffers
        assert buf.workspace is not None
        batch, s_q, width = topk_positions.shape
        rows = batch * s_q
        group = self._layer_group[layer]
        indices = buf.indices[group].view(-1)[: rows * width].view(rows, width)
        plan = buf.plans[group].views(rows, width, buf.counts[group, _HITS : _OVERFLOW + 1])
        if resolve:
            host_rows = buf.host_rows.view(-1)[: rows * width].view(rows, width)
            map_topk_positions(
                topk_positions.reshape(rows, width).contiguous(),
                self.block_tables,
                buf.meta[_REGION, :rows],
                buf.meta[_TOKENS, :rows],
                buf.meta[_TAIL_START, :rows],
                block_size=self.block_size,
                region_rows=self.region_rows,
                device_buffer_size=self.device_buffer_size,
                host_rows=host_rows,
                indices=indices,
                counters=buf.counts[group, _TAIL : _BAD_ROW + 1],
            )
            dev = self._device_resolver()
            resolve_residency(
                host_rows,
                buf.meta[_META + group, :rows],
                dev.slot_rows_all,
                dev.lru_all,
                num_host_rows=self._num_host_rows,
                workspace=buf.workspace,
                status=plan.status,
                out=buf.plans[group],
                live=dev.live,
            )
            finish_decode_indices(plan.slots, indices, buf.meta[_BASE, :rows])
        self._write_new_rows(layer, new_kv, rows)
        if undo is not None:
            undo.gathered = True
        gather_plan(
            self.host_layers[layer],
            self.device_layers[layer],
            plan.miss_host_rows,
            plan.miss_slots,
            plan.miss_counts,
            buf.meta[_BASE, :rows],
        )
        return self._decode(q, layer, indices.view(batch, s_q, width))

    def _host_layer(
        self,
        layer: int,
        q: torch.Tensor,
        new_kv: torch.Tensor,
        topk_positions: torch.Tensor,
        undo: _Undo | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The Rust path's layer: the top-k goes to the host resolver and back."""
        assert self._step_ids is not None
        batch, s_q, _ = topk_positions.shape
        group = self._layer_group[layer]
        plan = self._step_plans.get(group)
        if plan is None:
            # Raises for a bad position or an oversized union before any state changes.
            plan = self._resolve_on_host(group, topk_positions)
            self._step_plans[group] = plan
        self._write_new_rows(layer, new_kv, batch * s_q)
        assert plan.indices is not None and plan.src_rows is not None and plan.dst_rows is not None
        if plan.src_rows.numel():
            gather = gather_rows if self.use_triton else gather_rows_reference
            dst_rows = plan.dst_rows.to(self.device)
            if undo is not None:
                undo.gathered = True
            gather(self.host_layers[layer], self.device_layers[layer], plan.src_rows, dst_rows)
        return self._decode(q, layer, plan.indices.to(self.device))

    def _resolve_on_host(self, group: int, topk_positions: torch.Tensor) -> _GroupPlan:
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
            tail = valid & (p >= self._tail_start(n))
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
        host_counts = self._step_counts.host
        assert host_counts is not None
        host_counts[group, _HITS], host_counts[group, _MISSES], host_counts[group, _TAIL] = (
            res.hits,
            res.misses,
            served_by_tail,
        )
        offsets = res.miss_offsets[::s_q]  # where each request's plan starts (rows b x s_q ..)
        per_request = [res.miss_slots[offsets[b] : offsets[b + 1]] for b in range(batch)]
        return _GroupPlan(topk, indices, torch.from_numpy(res.miss_host_rows), dst, per_request)

    # ---- CUDA graphs --------------------------------------------------------

    def capture_layer(
        self, layer: int, q: torch.Tensor, new_kv: torch.Tensor, topk_positions: torch.Tensor
    ) -> CapturedLayer:
        """Record one layer's device work for replay in later steps (Triton path).

        ``q`` / ``new_kv`` / ``topk_positions`` are the layer's *static* inputs
        (shapes as :meth:`forward_layer`'s, for a batch of ``batch`` requests and
        ``s_q`` tokens each): write each step's inputs into them, then call
        :meth:`CapturedLayer.replay` inside the step. A step of fewer requests
        than ``batch`` pads the rest (they resolve nothing and write nothing).
        The layer that leads its index group resolves; the others replay its plan.
        Between steps: the capture runs on padded metadata, so it changes no state
        (a warm-up run compiles the kernels first). On CUDA this is a
        ``torch.cuda.CUDAGraph`` (all layers share one memory pool); elsewhere
        the replay re-runs the same device work (for tests).

        Raises ValueError: a step is open, the Rust resolver path, wrong inputs,
        or ``batch > max_num_seqs``.
        """
        self._check_usable()
        if self._step_ids is not None:
            raise ValueError("capture layers between steps (after end_step)")
        if self.resolver_path != "triton":
            raise ValueError(
                "capture_layer needs the Triton resolver path (resolver='triton'): the Rust path syncs"
            )
        if not isinstance(q, torch.Tensor) or q.dim() != 4:
            raise ValueError("q must be bfloat16 [batch, s_q, h_q, 576]")
        batch, s_q = int(q.shape[0]), int(q.shape[1])
        _int_arg("batch (q.shape[0])", batch, 1, self.max_num_seqs)
        _int_arg("s_q (q.shape[1])", s_q, 1, 1 << 10)
        layer, q, new_kv, topk_positions = self._check_layer_inputs(
            "capture_layer", layer, q, new_kv, topk_positions, batch, s_q
        )
        if s_q > self._buffers.s_q:
            self._generation += 1
            self._buffers = _StepBuffers(self, s_q, self._generation)
        # Padded metadata: every row resolves nothing and writes nothing.
        self._wait_upload()
        self._buffers.meta.fill_(-1)
        resolve = self._leaders[self._layer_group[layer]] == layer
        work = (layer, q, new_kv, topk_positions, resolve)
        out, lse = self._device_layer(*work)  # warm-up: compiles every kernel
        graph: torch.cuda.CUDAGraph | None = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            if self._graph_pool is None:
                self._graph_pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._graph_pool):
                out, lse = self._device_layer(*work)
        self._step_plans = {}
        return CapturedLayer(self, work, graph, out, lse, self._generation)


class CapturedLayer:
    """A layer's captured device work (:meth:`DecodeRuntime.capture_layer`)."""

    def __init__(
        self,
        rt: DecodeRuntime,
        work: tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, bool],
        graph: torch.cuda.CUDAGraph | None,
        out: torch.Tensor,
        lse: torch.Tensor,
        generation: int,
    ) -> None:
        self._rt, self._work, self._graph = rt, work, graph
        self._out, self._lse, self._generation = out, lse, generation
        self.layer = work[0]
        self.batch, self.s_q = int(work[1].shape[0]), int(work[1].shape[1])

    def replay(self) -> LayerResult:
        """Run the captured layer in the open step on its static inputs.

        Returns the layer's :class:`LayerResult` (``out`` / ``lse`` for the
        step's requests: the first ``len(request_ids)`` batch rows).

        Raises ValueError: no open step, another ``s_q`` or more requests than
        captured, the layer already ran, its group's leader did not run first,
        or the runtime's buffers were reallocated since the capture (capture again).
        A failure while it runs is undone as :meth:`DecodeRuntime.forward_layer`'s.
        """
        self._rt._check_usable()
        rt = self._rt
        ids = rt._step_ids
        if ids is None:
            raise ValueError("no open step: call begin_step first")
        if self._generation != rt._generation:
            raise ValueError(
                "the runtime's buffers changed since this capture (a larger step, or set_resolver): "
                "capture again"
            )
        if rt._step_tokens != self.s_q or len(ids) > self.batch:
            raise ValueError(
                f"captured for up to {self.batch} requests x {self.s_q} tokens; the step has "
                f"{len(ids)} x {rt._step_tokens}"
            )
        layer, group = self.layer, rt._layer_group[self.layer]
        if layer in rt._written:
            raise ValueError(f"layer {layer} already ran this step")
        resolve = self._work[4]
        rt._check_group_width(group, int(self._work[3].shape[2]))
        if resolve == (group in rt._step_plans):
            raise ValueError(
                f"layer {layer}: its index group's first layer {rt._leaders[group]} must run first, and once"
            )
        width = int(self._work[3].shape[2])
        undo = rt._save(group, width) if resolve else None
        if self._graph is not None:
            graph = self._graph

            def run() -> tuple[torch.Tensor, torch.Tensor]:
                if undo is not None:
                    undo.gathered = True  # the graph holds the whole layer
                graph.replay()
                return self._out, self._lse
        else:
            work = self._work

            def run() -> tuple[torch.Tensor, torch.Tensor]:
                return rt._device_layer(*work, undo)

        out, lse = rt._undoable(undo, run)
        rt._step_plans.setdefault(group, _GroupPlan(width))
        rt._written.add(layer)
        n = len(ids)
        return LayerResult(out[:n], lse[:n], rt._step_counts, group, rt.row_bytes)
