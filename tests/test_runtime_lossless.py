"""Lossless offload: decode through the hot buffer equals sparse attention over a resident cache.

A small DSA-shaped stack (random weights, a lightning-style indexer over the
real cached keys) runs many decode steps in lockstep two ways:

- **resident**: every layer keeps the whole KV cache of every request and
  sparse attention reads the indexer's top-k positions straight from it;
- **offloaded**: :class:`hisparse_rs.DecodeRuntime`, whose hot buffer is much
  smaller than the context, so rows are evicted and swapped in every step.

Both see the same inputs each layer (the resident output drives the next layer),
so any difference is the offload's. With the PyTorch reference kernels the two
must agree bit for bit; with the Triton kernels (under TRITON_INTERPRET=1 on a
CPU) within FlashMLA's tolerances.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

import hisparse_rs
from hisparse_rs.kernels import (
    fp8_ds_mla_quantize_reference,
    sparse_mla_decode_reference,
)
from kernel_cases import DEVICE

D_QK, D_V = 576, 512


@dataclass
class TinyDSA:
    """Random-weight DSA layers: q, latent KV and indexer projections per layer."""

    num_layers: int
    hidden: int
    heads: int
    index_dim: int
    seed: int

    def __post_init__(self) -> None:
        g = torch.Generator().manual_seed(self.seed)

        def w(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=g) / shape[0] ** 0.5

        self.wq = [w(self.hidden, self.heads * D_QK) for _ in range(self.num_layers)]
        self.wkv = [w(self.hidden, D_QK) for _ in range(self.num_layers)]
        self.wo = [w(self.heads * D_V, self.hidden) for _ in range(self.num_layers)]
        self.wiq = [w(self.hidden, self.index_dim) for _ in range(self.num_layers)]
        self.wik = [w(self.hidden, self.index_dim) for _ in range(self.num_layers)]

    def project(
        self, layer: int, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [n, hidden] -> q bf16 [n, heads, 576], kv bf16 [n, 576], index q / k fp32 [n, index_dim]."""
        q = (x @ self.wq[layer]).reshape(-1, self.heads, D_QK).clamp(-1, 1).bfloat16()
        kv = (x @ self.wkv[layer] / 10).bfloat16()
        return q, kv, x @ self.wiq[layer], x @ self.wik[layer]


def topk_positions(iq: torch.Tensor, keys: torch.Tensor, topk: int) -> torch.Tensor:
    """Indexer: the ``topk`` best-scoring cached positions (all when fewer), -1 padded."""
    scores = keys @ iq
    k = min(topk, scores.numel())
    best = torch.topk(scores, k).indices.to(torch.int32)
    return torch.cat([best, torch.full((topk - k,), -1, dtype=torch.int32)])


def run_lockstep(
    *,
    kv_cache_dtype: str,
    use_triton: bool,
    steps: int,
    eager_host_mirror: bool = True,
    index_groups: list[int] | None = None,
    num_layers: int = 3,
    topk: int = 16,
    device_buffer_size: int = 32,
    block_size: int = 8,
    prompt_lens: tuple[int, ...] = (40, 75, 9),
    s_q: int = 1,
    seed: int = 0,
    resolver: str = "rust",
    switch_at: tuple[int, ...] = (),
) -> dict[str, int]:
    # Kernels and the Triton path run where the kernels do (the GPU, or the CPU
    # under the interpreter); the Rust path with the references on the CPU.
    device = DEVICE if (use_triton or resolver == "triton" or switch_at) else torch.device("cpu")
    model = TinyDSA(num_layers=num_layers, hidden=48, heads=8, index_dim=16, seed=seed)
    scale = D_QK**-0.5
    rt = hisparse_rs.DecodeRuntime(
        num_layers=num_layers,
        index_topk=topk,
        device_buffer_size=device_buffer_size,
        softmax_scale=scale,
        block_size=block_size,
        kv_cache_dtype=kv_cache_dtype,
        num_host_blocks=256,
        max_num_seqs=4,
        index_groups=index_groups,
        eager_host_mirror=eager_host_mirror,
        use_triton=use_triton,
        resolver=resolver,
        device=device,
    )
    groups = list(range(num_layers)) if index_groups is None else index_groups
    g = torch.Generator().manual_seed(seed + 1)

    def encode(kv: torch.Tensor) -> torch.Tensor:
        if kv_cache_dtype == "fp8_ds_mla":
            return fp8_ds_mla_quantize_reference(kv)
        return kv

    # Resident state per request: cache rows and indexer keys per layer.
    rows: dict[str, list[torch.Tensor]] = {}
    keys: dict[str, list[torch.Tensor]] = {}
    counter = 0

    def admit(n: int) -> None:
        nonlocal counter
        rid = f"req-{counter}"
        counter += 1
        x = torch.randn(n, model.hidden, generator=g)
        prefill, rows[rid], keys[rid] = [], [], []
        for layer in range(num_layers):
            _, kv, _, ik = model.project(layer, x)
            prefill.append(kv)
            rows[rid].append(encode(kv))
            keys[rid].append(ik)
            x = torch.tanh(x + torch.randn(n, model.hidden, generator=g) * 0.1)
        rt.add_request(rid, [t.to(device) for t in prefill])

    for n in prompt_lens:
        admit(n)
    totals = {"hits": 0, "misses": 0, "tail": 0, "steps_with_misses": 0}
    for step in range(steps):
        if step in switch_at:  # every request's hot-buffer state moves to the other path
            rt.set_resolver("rust" if rt.resolver_path == "triton" else "triton")
        # Requests come and go between steps.
        if step == steps // 3:
            rt.finish_request(rt.request_ids[0])
        if step == steps // 2:
            admit(30)
        ids = rt.request_ids
        batch = len(ids)
        rt.begin_step(ids, num_new_tokens=s_q)
        # s_q new tokens per request (1, or 1 + MTP drafts), row b * s_q + j.
        x = torch.randn(batch * s_q, model.hidden, generator=g)
        step_misses = 0
        leader_topk: dict[int, torch.Tensor] = {}
        for layer in range(num_layers):
            q, kv, iq, ik = model.project(layer, x)
            for b, rid in enumerate(ids):
                rows[rid][layer] = torch.cat([rows[rid][layer], encode(kv[b * s_q : (b + 1) * s_q])])
                keys[rid][layer] = torch.cat([keys[rid][layer], ik[b * s_q : (b + 1) * s_q]])
            group = groups[layer]
            if groups.index(group) == layer:  # the group's leader runs the indexer
                # Query row j of a request sees its cache up to and including token j (causal).
                leader_topk[group] = torch.stack(
                    [
                        torch.stack(
                            [
                                topk_positions(
                                    iq[b * s_q + j],
                                    keys[rid][layer][: len(keys[rid][layer]) - s_q + j + 1],
                                    topk,
                                )
                                for j in range(s_q)
                            ]
                        )
                        for b, rid in enumerate(ids)
                    ]
                )
            topk_b = leader_topk[group]  # [batch, s_q, topk]
            q4 = q.reshape(batch, s_q, model.heads, D_QK)
            res = rt.forward_layer(
                layer, q4.to(device), kv.reshape(batch, s_q, D_QK).to(device), topk_b.to(device)
            )
            # Resident: every request's whole cache side by side, indices offset into it.
            resident = torch.cat([rows[rid][layer] for rid in ids])
            offsets = torch.tensor([0] + [rows[rid][layer].shape[0] for rid in ids[:-1]]).cumsum(0)
            idx = torch.where(topk_b >= 0, topk_b + offsets[:, None, None].to(torch.int32), -1)
            want_out, want_lse = sparse_mla_decode_reference(
                q4.to(device), resident.to(device), idx.to(device), scale
            )
            if use_triton:
                torch.testing.assert_close(res.out.float(), want_out.float(), atol=1e-3, rtol=2.01 / 128)
                torch.testing.assert_close(res.lse, want_lse, atol=1e-6, rtol=8.01 / 65536)
            else:
                assert torch.equal(res.out, want_out), f"step {step} layer {layer}: out differs"
                assert torch.equal(res.lse, want_lse), f"step {step} layer {layer}: lse differs"
            totals["hits"] += res.hits
            totals["misses"] += res.misses
            totals["tail"] += res.tail
            step_misses += res.misses
            x = torch.tanh(x + want_out.float().cpu().reshape(batch * s_q, -1) @ model.wo[layer])
        rt.end_step()
        totals["steps_with_misses"] += step_misses > 0
    return totals


# Both resolver paths: the Rust resolver on the host, and the device-resident
# Triton path (resolver, position map, gather, KV write under the interpreter),
# fewer steps there (the interpreter is slow). Each is held bit for bit to
# sparse attention over a resident cache.
RESOLVERS = ["rust", "triton"]


def steps_for(resolver: str, rust_steps: int) -> int:
    return rust_steps if resolver == "rust" else max(4, rust_steps // 3)


@pytest.mark.parametrize("resolver", RESOLVERS)
@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "fp8_ds_mla"])
def test_offload_is_lossless_with_reference_kernels(kv_cache_dtype: str, resolver: str) -> None:
    steps = steps_for(resolver, 60)
    t = run_lockstep(kv_cache_dtype=kv_cache_dtype, use_triton=False, steps=steps, resolver=resolver)
    # The hot buffer (32 rows) is far smaller than the contexts (up to 135
    # tokens): rows are swapped in on (almost) every step.
    assert t["steps_with_misses"] >= steps - 2
    assert t["misses"] > 10 * steps


@pytest.mark.parametrize("resolver", RESOLVERS)
@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "fp8_ds_mla"])
def test_offload_is_lossless_with_triton_kernels(kv_cache_dtype: str, resolver: str) -> None:
    t = run_lockstep(kv_cache_dtype=kv_cache_dtype, use_triton=True, steps=6, num_layers=2, resolver=resolver)
    assert t["misses"] > 0


@pytest.mark.parametrize("resolver", RESOLVERS)
def test_lossless_with_deferred_mirror_and_shared_indexer(resolver: str) -> None:
    # GLM-5.2-style IndexShare: layers 0-1 and 2-3 share a top-k and a hot-buffer state.
    t = run_lockstep(
        kv_cache_dtype="fp8_ds_mla",
        use_triton=False,
        steps=steps_for(resolver, 40),
        eager_host_mirror=False,
        index_groups=[0, 0, 1, 1],
        num_layers=4,
        resolver=resolver,
    )
    assert t["misses"] > 0


@pytest.mark.parametrize("resolver", RESOLVERS)
def test_lossless_with_mtp_query_rows(resolver: str) -> None:
    # MTP: two query rows per request resolved as one union (dbs = (2 + 1) x top-k).
    t = run_lockstep(
        kv_cache_dtype="fp8_ds_mla",
        use_triton=False,
        steps=steps_for(resolver, 30),
        s_q=2,
        device_buffer_size=48,
        resolver=resolver,
    )
    assert t["misses"] > 0


@pytest.mark.parametrize("resolver", RESOLVERS)
@pytest.mark.parametrize("eager_host_mirror", [True, False])
def test_lossless_when_a_step_outgrows_the_tail_pages(eager_host_mirror: bool, resolver: str) -> None:
    # 5 new tokens per step with 2-token pages: the step's oldest rows are out of
    # the two tail pages at once and must come from the host pool this very step.
    t = run_lockstep(
        kv_cache_dtype="bfloat16",
        use_triton=False,
        steps=steps_for(resolver, 12),
        s_q=5,
        block_size=2,
        topk=8,
        device_buffer_size=48,
        eager_host_mirror=eager_host_mirror,
        resolver=resolver,
    )
    assert t["misses"] > 0


def test_requests_move_between_the_paths_and_continue_identically() -> None:
    # Rust for 4 steps, then every state moves to the device, then back at step 8:
    # the same hits, misses and tail entries as the Rust path alone (and lossless throughout).
    kw: dict[str, object] = {"kv_cache_dtype": "fp8_ds_mla", "use_triton": False, "steps": 12, "s_q": 2}
    kw["device_buffer_size"] = 48
    alone = run_lockstep(**kw)  # type: ignore[arg-type]
    moved = run_lockstep(switch_at=(4, 8), **kw)  # type: ignore[arg-type]
    assert moved == alone and alone["misses"] > 0
