//! Byte sizes of HiSparse's caches: the one place for row bytes, host block
//! bytes and strides, pool block counts and the GPU pool's block layout.
//! Validation (`config::validate`) and the capacity planner (`plan`) both
//! read them from here.
//!
//! All arithmetic is u64 and saturating, so absurd inputs (1 TiB pools, 1 M
//! token contexts, u32::MAX layers) give large figures, never overflow panics.
//!
//! Sources: shared/spec/HISPARSE.md §5; vLLM 0.33.0 `vllm/v1/hisparse/layout.py`
//! (host pool, hot groups), `runtime.py` (shared pool stride),
//! `vllm/v1/core/kv_cache_planning.py` (`_get_kv_cache_bytes_per_block`),
//! `vllm/model_executor/models/deepseek_v2.py` (indexer key cache).

/// Bytes per token per layer of fp8_ds_mla: 512 e4m3 (NoPE latent, 4 tiles of
/// 128) + 4 fp32 scales (one per tile) + 64 bf16 (RoPE) = 656 (41 x 16).
pub const FP8_DS_MLA_ROW_BYTES: u32 = 656;
/// Bytes in a GiB (2^30).
pub const GIB: f64 = (1u64 << 30) as f64;

/// A size in GiB as a fix writes it: a whole number as an integer (`128`,
/// as the user wrote it, not `128.0`), anything else as the float.
pub fn gib_json(gib: f64) -> serde_json::Value {
    if gib.fract() == 0.0 && gib.abs() < 9.0e15 {
        serde_json::json!(gib as i64)
    } else {
        serde_json::json!(gib)
    }
}
/// Shared host pools align blocks to the OS page (vLLM `SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT`).
pub const OS_PAGE_BYTES: u64 = 4096;
/// Sealed pages behind the block-table tail that stay GPU-resident per
/// resident group (vLLM 0.33 `hisparse/types.py` `ACTIVE_TAIL_PAGES`).
pub const ACTIVE_TAIL_PAGES: u64 = 2;
/// The indexer quantizes keys in blocks of 128 values, one fp32 scale each
/// (vLLM 0.33 deepseek_v2 `Indexer.quant_block_size`).
const INDEXER_QUANT_BLOCK: u32 = 128;

/// Bytes of one token's MLA latent KV in one layer, by resolved KV cache dtype;
/// None for a dtype whose host row size is not known (`nvfp4_ds_mla`).
///
/// fp8_ds_mla: 656 B whatever the dims; 16-bit: (kv_lora_rank + qk_rope_head_dim) x 2
/// (1152 on DeepSeek-V3.2; a NoPE model stores 512 values); fp8_e4m3: 1 B per value.
pub fn mla_row_bytes(
    kv_cache_dtype: &str,
    kv_lora_rank: u32,
    qk_rope_head_dim: u32,
) -> Option<u32> {
    let latent = kv_lora_rank.saturating_add(qk_rope_head_dim);
    match kv_cache_dtype {
        "fp8_ds_mla" => Some(FP8_DS_MLA_ROW_BYTES),
        "bfloat16" | "float16" => Some(latent.saturating_mul(2)),
        "fp8_e4m3" => Some(latent),
        _ => None,
    }
}

/// Bytes of one token's indexer key in one layer: `index_head_dim` e4m3 values
/// plus one fp32 scale per 128 (132 B for index_head_dim 128; vLLM 0.33
/// `DeepseekV32IndexerCache(head_dim=index_head_dim + index_head_dim // 128 * 4)`).
pub fn indexer_row_bytes(index_head_dim: u32) -> u32 {
    index_head_dim.saturating_add(index_head_dim / INDEXER_QUANT_BLOCK * 4)
}

/// Blocks that hold `tokens` tokens: ceil(tokens / block_size) (0 for block_size 0).
pub fn blocks_for(tokens: u64, block_size: u64) -> u64 {
    if block_size == 0 {
        return 0;
    }
    tokens.div_ceil(block_size)
}

/// `x` rounded up to a multiple of `to` (saturating; `to` 0 leaves `x`).
pub fn round_up(x: u64, to: u64) -> u64 {
    if to == 0 {
        return x;
    }
    x.div_ceil(to).saturating_mul(to)
}

/// One host block: block_size x row_bytes x sparse-MLA layers (HISPARSE.md §5:
/// 64 x 656 x 61 = 2,561,024 B on DeepSeek-V3.2 fp8_ds_mla).
pub fn host_block_bytes(block_size: u32, row_bytes: u32, layers: u32) -> u64 {
    u64::from(block_size)
        .saturating_mul(u64::from(row_bytes))
        .saturating_mul(u64::from(layers))
}

/// The parallel sizes the host-pool rule reads (vLLM 0.33 `ParallelConfig`;
/// 1 when not given).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallel {
    pub tp: i64,
    pub pp: i64,
    pub dcp: i64,
    pub pcp: i64,
    pub dp: i64,
    /// `--nnodes`: the nodes of the whole deployment.
    pub nnodes: i64,
    /// `--data-parallel-size-local`: DP replicas on this node, when given.
    pub dp_local: Option<i64>,
}

impl Parallel {
    /// GPUs of one DP replica: PP x TP x PCP (vLLM 0.33 `world_size_within_dp`,
    /// vllm/engine/arg_utils.py:2400).
    fn world_within_dp(&self) -> i64 {
        [self.pp, self.tp, self.pcp]
            .iter()
            .fold(1i64, |w, n| w.saturating_mul((*n).max(1)))
    }

    /// DP replicas on this node: vLLM 0.33's `data_parallel_size_local`
    /// (`EngineArgs.create_engine_config`). Given, it is taken as is
    /// (arg_utils.py:2486; clamped to 0 ..= DP, the range `ParallelConfig`
    /// allows, vllm/config/parallel.py:150 and :545); unset with `--nnodes`,
    /// this node's share of the world in whole replicas, at least 1
    /// (arg_utils.py:2442-2446); unset on one node, every replica (:2535).
    pub fn dp_local(&self) -> i64 {
        let dp = self.dp.max(1);
        match self.dp_local {
            Some(n) => n.clamp(0, dp),
            None if self.nnodes > 1 => {
                let within = self.world_within_dp();
                (within.saturating_mul(dp) / self.nnodes / within).max(1)
            }
            None => dp,
        }
    }

    /// Nodes one DP replica spans (vLLM 0.33 `ParallelConfig.nnodes_within_dp`,
    /// vllm/config/parallel.py:811-836): nnodes / (DP / dp_local) node groups,
    /// 1 on one node. The layouts vLLM refuses there (dp_local 0, node groups
    /// that do not divide nnodes; `check_launch` reports them) give the
    /// quotient, at least 1.
    pub fn nnodes_within_dp(&self) -> i64 {
        if self.nnodes <= 1 {
            return 1;
        }
        let node_groups = (self.dp.max(1) / self.dp_local().max(1)).max(1);
        (self.nnodes / node_groups).max(1)
    }

    /// GPUs this node runs: dp_local replicas of `local_world_size` GPUs,
    /// the replica's world over the nodes it spans (vLLM 0.33
    /// `ParallelConfig.local_world_size`, vllm/config/parallel.py:839-840;
    /// the executor starts `local_world_size x data_parallel_size_local`
    /// workers, v1/executor/multiproc_executor.py:147-149).
    pub fn gpus_on_this_node(&self) -> u64 {
        let local_world = self.world_within_dp() / self.nnodes_within_dp().max(1);
        (self.dp_local().max(0) as u64).saturating_mul(local_world.max(1) as u64)
    }

    /// The ranks of `per_replica` pools each (1 shared, TP private) that pin
    /// host pools on this node: dp_local replicas, each spread over
    /// `nnodes_within_dp` nodes (vLLM 0.33 `local_world_size`,
    /// parallel.py:839, times dp_local, v1/executor/multiproc_executor.py:147).
    pub fn pools_on_this_node(&self, per_replica: u64) -> u64 {
        (self.dp_local().max(0) as u64)
            .saturating_mul(per_replica)
            .div_ceil(self.nnodes_within_dp().max(1) as u64)
    }
}

/// Whether the TP ranks of one DP replica share one host pool (vLLM 0.33
/// `use_shared_hisparse_host_pool`, `vllm/v1/hisparse/runtime.py:278`: CUDA,
/// TP > 1, no PP/PCP/DCP, the mp executor (the default; `backend` None), a
/// replica within one node). Otherwise each rank pins its own full copy: MLA latent KV is
/// replicated across TP ranks.
pub fn shared_host_pool(platform: &str, p: Parallel, backend: Option<&str>) -> bool {
    platform == "cuda"
        && p.tp > 1
        && p.pp == 1
        && p.pcp == 1
        && p.dcp == 1
        && p.nnodes_within_dp() == 1
        && matches!(backend, None | Some("mp"))
}

/// Bytes one host block takes in the pool: rounded up to the 4 KiB OS page in a
/// shared pool (vLLM 0.33 `get_hisparse_host_block_stride`), packed otherwise.
pub fn host_block_stride(host_block_bytes: u64, shared: bool) -> u64 {
    if shared {
        round_up(host_block_bytes, OS_PAGE_BYTES)
    } else {
        host_block_bytes
    }
}

/// ceil(max_model_len / block_size) + 2: one request at max_model_len plus the
/// pool's null block and a copy-on-write tail (vLLM 0.33 `create_hisparse_layout`).
pub fn min_host_blocks(max_model_len: u64, block_size: u64) -> u64 {
    blocks_for(max_model_len, block_size).saturating_add(2)
}

/// The inverse of [`min_host_blocks`]: the longest max_model_len (a whole
/// number of blocks) whose start-up minimum `blocks` host blocks hold; 0 when
/// they hold none.
pub fn longest_context(blocks: u64, block_size: u64) -> u64 {
    blocks.saturating_sub(2).saturating_mul(block_size)
}

/// Host blocks in a pool: vLLM takes `int(host_pool_gib * 2**30)` bytes, then whole blocks.
pub fn pool_blocks(host_pool_gib: f64, host_block_bytes: u64) -> u64 {
    if host_block_bytes == 0 {
        return 0;
    }
    ((host_pool_gib * GIB) as u64) / host_block_bytes
}

/// The smallest host_pool_gib, in hundredths of a GiB, holding `blocks` blocks.
/// Bounded: past f64's precision (absurd contexts) the estimate is returned as is.
pub fn min_pool_gib(blocks: u64, host_block_bytes: u64) -> f64 {
    let bytes = blocks as f64 * host_block_bytes as f64;
    let mut gib = (bytes / GIB * 100.0).ceil() / 100.0;
    for _ in 0..4 {
        if pool_blocks(gib, host_block_bytes) >= blocks {
            break;
        }
        gib = ((gib * 100.0).round() + 1.0) / 100.0;
    }
    gib
}

/// Shared memory per CUDA block that vLLM 0.33's residency resolver
/// (`hisparse_resolve_residency`) needs, bytes: the union hash's keys and
/// values (plus an empty slot), three words per 32-slot chunk, seven counters,
/// and the int16 compacted LRU:
/// `4 x (2 x (max_union_rows + 1) + 3 x ceil(dbs / 32) + 7) + 2 x dbs`
/// (`vllm/v1/hisparse/runtime.py:168-193`, `_check_residency_shared_memory`),
/// with max_union_rows = max_decode_query_len x the top-k width.
pub fn vllm_resolver_shared_memory_bytes(device_buffer_size: u64, max_union_rows: u64) -> u64 {
    let words = max_union_rows
        .saturating_add(1)
        .saturating_mul(2)
        .saturating_add(blocks_for(device_buffer_size, 32).saturating_mul(3))
        .saturating_add(7);
    words
        .saturating_mul(4)
        .saturating_add(device_buffer_size.saturating_mul(2))
}

/// The largest hot buffer (at most `max_rows`) whose vLLM resolver fits in
/// `available` bytes of shared memory with `max_union_rows` union rows; None
/// when not even `max_union_rows` rows fit. Binary search: the need grows with
/// the buffer.
pub fn largest_resolver_buffer(max_union_rows: u64, max_rows: u64, available: u64) -> Option<u64> {
    let fits = |dbs: u64| vllm_resolver_shared_memory_bytes(dbs, max_union_rows) <= available;
    if max_union_rows > max_rows || !fits(max_union_rows) {
        return None;
    }
    let (mut lo, mut hi) = (max_union_rows, max_rows);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// Shared memory per program that hisparse_rs's own Triton residency resolver
/// (`hisparse_rs.kernels.resolve_residency`, issue 9) needs for the same
/// buffer, to print beside vLLM's figure.
///
/// Its union table lives in global memory, so the need does not grow with the
/// union (`_max_union_rows`) or the buffer: it is Triton's scan and reduction
/// scratch, which follows the launch's warps (`resolver_tiling` in
/// `kernels/resolver.py`: `next_power_of_two(min(dbs, 1024)) / 64`, 1 to 16):
/// none with one warp, else 1024 + 512 B per warp (9216 B from dbs 513 up).
/// Read from the cubins compiled for sm_90 and sm_100 (the same on both);
/// `tests/test_kernels_aot.py` holds this figure equal to the compiled one.
pub fn triton_resolver_shared_memory_bytes(
    device_buffer_size: u64,
    _max_union_rows: u64,
) -> Option<u64> {
    let warps = (device_buffer_size.clamp(1, 1024).next_power_of_two() / 64).clamp(1, 16);
    Some(if warps == 1 { 0 } else { 1024 + 512 * warps })
}

/// How HiSparse lays out one DP replica's shared GPU pool (vLLM 0.33
/// `_lay_out_hisparse_groups` and `_get_kv_cache_bytes_per_block`).
///
/// The indexer keys of all indexer layers form one group whose block is the
/// reference page. Sparse-MLA layers are cut into hot units (an indexer layer
/// and the layers that reuse its top-k), and units are packed into hot groups
/// while a group's page stays within the indexer page. Each hot group also has
/// a resident group with the same page. One pool block is the largest group
/// page, rounded up to a multiple of one layer's MLA page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuLayout {
    /// Groups of hot (and resident) layers.
    pub hot_groups: u64,
    /// Bytes of one indexer block: block_size x indexer_row_bytes x indexer layers.
    pub indexer_page_bytes: u64,
    /// Bytes of one block in the shared GPU pool.
    pub block_bytes: u64,
}

impl GpuLayout {
    /// `units` are runs `(layers per hot unit, number of such units)` in layer
    /// order: a hot unit is an indexer layer and the layers that reuse its top-k
    /// (IndexShare); without sharing every unit is one layer. `indexer_layers`
    /// is the number of units. Runs keep the work O(runs), not O(layers).
    pub fn new(
        units: &[(u64, u64)],
        block_size: u32,
        mla_row_bytes: u32,
        indexer_row_bytes: u32,
    ) -> Self {
        let layer_page = u64::from(block_size).saturating_mul(u64::from(mla_row_bytes));
        let indexer_layers = units.iter().fold(0u64, |a, (_, n)| a.saturating_add(*n));
        let indexer_page_bytes = u64::from(block_size)
            .saturating_mul(u64::from(indexer_row_bytes))
            .saturating_mul(indexer_layers);
        let mut hot_groups = 0u64;
        let mut largest_group_page = 0u64;
        let mut current = 0u64; // page of the group being filled
        for &(layers, count) in units {
            let unit_page = layers.saturating_mul(layer_page);
            if unit_page == 0 {
                continue;
            }
            let mut left = count;
            // Top up the open group, then whole groups, then open the next one.
            if current > 0 {
                let fit = (indexer_page_bytes.saturating_sub(current) / unit_page).min(left);
                current = current.saturating_add(fit.saturating_mul(unit_page));
                left -= fit;
                if left > 0 {
                    hot_groups = hot_groups.saturating_add(1);
                    largest_group_page = largest_group_page.max(current);
                    current = 0;
                }
            }
            if left > 0 {
                // A unit larger than the indexer page is a group of its own.
                let per_group = (indexer_page_bytes / unit_page).max(1);
                let full = (left - 1) / per_group;
                if full > 0 {
                    hot_groups = hot_groups.saturating_add(full);
                    largest_group_page =
                        largest_group_page.max(per_group.saturating_mul(unit_page));
                }
                current = (left - full.saturating_mul(per_group)).saturating_mul(unit_page);
            }
        }
        if current > 0 {
            hot_groups = hot_groups.saturating_add(1);
            largest_group_page = largest_group_page.max(current);
        }
        let block_bytes = round_up(indexer_page_bytes.max(largest_group_page), layer_page);
        GpuLayout {
            hot_groups,
            indexer_page_bytes,
            block_bytes,
        }
    }
}

/// Hot-unit runs from per-layer leader flags (see [`GpuLayout::new`]): a leader
/// starts a unit, and so does the first layer.
pub fn hot_unit_runs(leaders: &[bool]) -> Vec<(u64, u64)> {
    let mut sizes: Vec<u64> = Vec::new();
    for (i, leader) in leaders.iter().enumerate() {
        match sizes.last_mut() {
            Some(n) if !*leader && i > 0 => *n += 1,
            _ => sizes.push(1),
        }
    }
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for size in sizes {
        match runs.last_mut() {
            Some((s, n)) if *s == size => *n += 1,
            _ => runs.push((size, 1)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_and_block_bytes() {
        assert_eq!(mla_row_bytes("fp8_ds_mla", 512, 64), Some(656));
        assert_eq!(mla_row_bytes("bfloat16", 512, 64), Some(1152));
        assert_eq!(mla_row_bytes("fp8_e4m3", 512, 64), Some(576));
        assert_eq!(mla_row_bytes("nvfp4_ds_mla", 512, 64), None);
        assert_eq!(indexer_row_bytes(128), 132);
        assert_eq!(host_block_bytes(64, 656, 61), 2_561_024);
        assert_eq!(host_block_stride(2_561_024, true), 2_564_096);
        assert_eq!(host_block_stride(2_561_024, false), 2_561_024);
        assert_eq!(min_host_blocks(163_840, 64), 2562);
    }

    /// TP x DP over `nnodes`, `dp_local` a node; no PP, DCP or PCP.
    fn parallel(tp: i64, dp: i64, nnodes: i64, dp_local: Option<i64>) -> Parallel {
        Parallel {
            tp,
            pp: 1,
            dcp: 1,
            pcp: 1,
            dp,
            nnodes,
            dp_local,
        }
    }

    #[test]
    fn a_replica_within_one_node_shares_its_pool() {
        let p = |tp, dp, nnodes| parallel(tp, dp, nnodes, None);
        // vLLM 0.33 infers data_parallel_size_local = world / nnodes / (TP x PP x PCP).
        assert_eq!(p(2, 2, 2).nnodes_within_dp(), 1);
        assert_eq!(p(2, 1, 2).nnodes_within_dp(), 2);
        assert_eq!(p(8, 4, 2).nnodes_within_dp(), 1);
        assert!(shared_host_pool("cuda", p(2, 2, 2), None));
        assert!(!shared_host_pool("cuda", p(2, 1, 2), Some("mp")));
        assert!(!shared_host_pool("cuda", p(2, 1, 1), Some("uni")));
        assert!(!shared_host_pool(
            "cuda",
            Parallel {
                pcp: 2,
                ..p(2, 1, 1)
            },
            None
        ));
    }

    #[test]
    fn data_parallel_size_local_places_the_replicas() {
        let p = parallel;
        // vLLM's multi-node DP launch: -dp 16 -dpl 8 on each node, no --nnodes.
        assert_eq!(p(1, 16, 1, Some(8)).dp_local(), 8);
        assert_eq!(p(1, 16, 1, Some(8)).pools_on_this_node(1), 8);
        assert_eq!(p(2, 16, 1, Some(8)).pools_on_this_node(2), 16);
        // Unset: every replica on one node, an even share over --nnodes.
        assert_eq!(p(1, 16, 1, None).dp_local(), 16);
        assert_eq!(p(1, 16, 2, None).dp_local(), 8);
        assert_eq!(p(16, 1, 2, None).pools_on_this_node(16), 8);
        // DP 2 with 2 a node over 2 nodes: one node group, so each replica spans both.
        assert_eq!(p(8, 2, 2, Some(2)).nnodes_within_dp(), 2);
        assert_eq!(p(8, 2, 2, Some(2)).pools_on_this_node(8), 8);
        assert_eq!(p(8, 2, 2, Some(1)).nnodes_within_dp(), 1);
        assert!(!shared_host_pool("cuda", p(8, 2, 2, Some(2)), None));
        assert!(shared_host_pool("cuda", p(8, 2, 2, Some(1)), None));
        // A node that runs no replica pins no pool; out of range is clamped.
        assert_eq!(p(1, 4, 1, Some(0)).pools_on_this_node(8), 0);
        assert_eq!(p(1, 4, 1, Some(9)).dp_local(), 4);
        assert_eq!(p(1, 4, 2, Some(0)).nnodes_within_dp(), 1);
        assert_eq!(p(1, i64::MAX, i64::MAX, None).nnodes_within_dp(), 1);
    }

    #[test]
    fn min_pool_gib_is_the_smallest_passing_size() {
        // DeepSeek-V3.2 fp8_ds_mla at 163840 tokens: 2562 blocks of 2,561,024 B.
        let gib = min_pool_gib(2562, 2_561_024);
        assert_eq!(gib, 6.12);
        assert!(pool_blocks(gib, 2_561_024) >= 2562);
        assert!(pool_blocks(gib - 0.01, 2_561_024) < 2562);
    }

    #[test]
    fn min_pool_gib_terminates_on_absurd_sizes() {
        let gib = min_pool_gib(u64::MAX / 2, u64::MAX / 3);
        assert!(gib.is_finite() && gib > 0.0);
        assert_eq!(pool_blocks(f64::MAX, 1), u64::MAX);
    }

    #[test]
    fn vllm_resolver_shared_memory() {
        // DeepSeek-V3.2 without MTP: 2048 union rows, 4096 slots (128 chunks):
        // 4 x (2 x 2049 + 3 x 128 + 7) + 2 x 4096.
        assert_eq!(vllm_resolver_shared_memory_bytes(4096, 2048), 26_148);
        // MTP 14 (15 x 2048 union rows) at 30720 slots exceeds an H100's 227 KB.
        assert_eq!(
            vllm_resolver_shared_memory_bytes(30_720, 30_720),
            4 * (2 * 30_721 + 3 * 960 + 7) + 61_440
        );
        assert!(vllm_resolver_shared_memory_bytes(30_720, 30_720) > 232_448);
        assert_eq!(
            vllm_resolver_shared_memory_bytes(u64::MAX, u64::MAX),
            u64::MAX
        );
        // The largest buffer that fits, and one row more does not.
        let d = largest_resolver_buffer(8192, 32_768, 101_376).unwrap();
        assert!(d > 8192 && d < 32_768);
        assert!(vllm_resolver_shared_memory_bytes(d, 8192) <= 101_376);
        assert!(vllm_resolver_shared_memory_bytes(d + 1, 8192) > 101_376);
        assert_eq!(largest_resolver_buffer(8192, 32_768, 65_536), None);
        assert_eq!(largest_resolver_buffer(2048, 32_768, 232_448), Some(32_768));
        assert_eq!(largest_resolver_buffer(30_720, 32_768, 232_448), None);
    }

    #[test]
    fn triton_resolver_shared_memory() {
        // The compiled cubins' figures (benches/README.md's AOT table): by warps.
        for (dbs, want) in [
            (1, 0),
            (64, 0),
            (65, 2048),
            (128, 2048),
            (256, 3072),
            (512, 5120),
            (513, 9216),
            (4096, 9216),
            (32_768, 9216),
            (u64::MAX, 9216),
        ] {
            assert_eq!(
                triton_resolver_shared_memory_bytes(dbs, 30_720),
                Some(want),
                "dbs {dbs}"
            );
        }
    }

    #[test]
    fn gpu_layout_deepseek_v32() {
        // 61 layers, every one its own indexer: indexer page 61 x 64 x 132 = 515,328 B;
        // 12 MLA pages of 41,984 B fit in it, so 61 layers make 6 hot groups, and a
        // pool block is the indexer page rounded up to 13 MLA pages.
        let l = GpuLayout::new(&[(1, 61)], 64, 656, 132);
        assert_eq!(l.indexer_page_bytes, 515_328);
        assert_eq!(l.hot_groups, 6);
        assert_eq!(l.block_bytes, 13 * 41_984);
    }

    #[test]
    fn gpu_layout_index_share() {
        // GLM-5.2: layers 0, 1, 2 and every 4th from 6 run an indexer (21 of 78).
        // Units: [0], [1], [2..=5], [6..=9], ... ; a 4-layer unit (167,936 B) fits
        // the 177,408 B indexer page alone, so: {0, 1}, then one group per unit.
        let leaders: Vec<bool> = (0..78u32).map(|i| (i.saturating_sub(2)) % 4 == 0).collect();
        assert_eq!(leaders.iter().filter(|l| **l).count(), 21);
        let runs = hot_unit_runs(&leaders);
        assert_eq!(runs, vec![(1, 2), (4, 19)]);
        let l = GpuLayout::new(&runs, 64, 656, 132);
        assert_eq!(l.indexer_page_bytes, 177_408);
        assert_eq!(l.hot_groups, 20);
        assert_eq!(l.block_bytes, 5 * 41_984);
    }

    #[test]
    fn gpu_layout_degenerate_inputs() {
        assert_eq!(GpuLayout::new(&[], 64, 656, 132).hot_groups, 0);
        let huge = GpuLayout::new(&[(1, 3)], u32::MAX, u32::MAX, u32::MAX);
        assert!(huge.block_bytes >= huge.indexer_page_bytes);
        let many = GpuLayout::new(&[(u64::MAX, u64::MAX), (1, u64::MAX)], 64, 656, 132);
        assert!(many.hot_groups > 0);
    }

    /// The run-length packing equals vLLM's layer-by-layer loop.
    fn packed_by_layers(leaders: &[bool], lp: u64, ip: u64) -> (u64, u64) {
        let runs = hot_unit_runs(leaders);
        let units: Vec<u64> = runs
            .iter()
            .flat_map(|(s, n)| std::iter::repeat_n(*s, *n as usize))
            .collect();
        let (mut groups, mut largest, mut current) = (0, 0, 0);
        for u in units {
            if current > 0 && current + u * lp > ip {
                groups += 1;
                largest = largest.max(current);
                current = 0;
            }
            current += u * lp;
        }
        if current > 0 {
            groups += 1;
            largest = largest.max(current);
        }
        (groups, largest)
    }

    #[test]
    fn run_length_packing_matches_the_layer_loop() {
        for n in 1..90usize {
            for freq in 1..6usize {
                for offset in 0..4usize {
                    let leaders: Vec<bool> = (0..n)
                        .map(|i| (i + 1).saturating_sub(offset) % freq == 0)
                        .collect();
                    let runs = hot_unit_runs(&leaders);
                    let idx = runs.iter().map(|r| r.1).sum::<u64>();
                    for (bs, row) in [(64u32, 656u32), (128, 1152), (64, 576)] {
                        let l = GpuLayout::new(&runs, bs, row, 132);
                        let lp = u64::from(bs) * u64::from(row);
                        let ip = u64::from(bs) * 132 * idx;
                        let (groups, largest) = packed_by_layers(&leaders, lp, ip);
                        assert_eq!(l.hot_groups, groups, "n={n} freq={freq} offset={offset}");
                        assert_eq!(l.block_bytes, round_up(ip.max(largest), lp));
                    }
                }
            }
        }
    }
}
