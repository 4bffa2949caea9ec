//! The host KV pool: which host blocks hold each request's MLA latent KV.
//!
//! Metadata only. The bytes live in a tensor the caller allocates (Python:
//! `hisparse_rs.allocate_pool_buffer`, pinned when CUDA is available) with the
//! byte layout [`HostKVPool::layout`] describes. One host block holds
//! `block_size` tokens of every layer the pool serves: host_block_bytes =
//! block_size x row_bytes x num_layers (HISPARSE.md §5); the pool has
//! floor(host_pool_gib x 2^30 / host_block_bytes) blocks (vLLM 0.33).
//!
//! Rules:
//! - allocation is all or nothing: a call that does not fit fails with
//!   [`HostPoolExhausted`] and changes nothing;
//! - blocks are handed out lowest free id first (a min-heap of freed ids
//!   below a high-water mark; every id above it is free), so the block
//!   tables are a pure function of the call sequence, and the pool's own
//!   memory grows with the blocks ever used, not with `num_blocks`;
//! - host row of token position `p` = block_table[p / block_size] x block_size
//!   + p % block_size, in 64-bit (HISPARSE.md §7).

use super::error::{HostPoolExhausted, PoolError};
use super::layout::PoolLayout;
use super::metrics::HiSparseMetrics;
use crate::report::ResolvedHiSparse;
use crate::sizes::pool_blocks;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

/// Used / total blocks and live requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStats {
    pub blocks_used: u64,
    pub blocks_total: u64,
    pub num_requests: u64,
}

impl PoolStats {
    /// blocks_used / blocks_total; 1.0 = 100 % (vLLM `hisparse_host_cache_usage_perc`).
    pub fn usage(&self) -> f64 {
        if self.blocks_total == 0 {
            0.0
        } else {
            self.blocks_used as f64 / self.blocks_total as f64
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Request {
    blocks: Vec<u32>,
    num_tokens: u64,
}

/// Per-request host block tables over a fixed number of host blocks.
#[derive(Debug)]
pub struct HostKVPool {
    block_size: u32,
    row_bytes: u32,
    num_layers: u32,
    num_blocks: u64,
    /// Free ids below `high_water` (ids at or above it were never handed out).
    freed: BinaryHeap<Reverse<u32>>,
    high_water: u64,
    requests: HashMap<String, Request>,
    metrics: Arc<HiSparseMetrics>,
}

impl HostKVPool {
    /// A pool of `num_blocks` blocks of `block_size` tokens, `row_bytes` bytes
    /// per token per layer (656 fp8_ds_mla, 1152 bf16) and `num_layers` layers.
    ///
    /// Errors (`invalid_size`): a zero argument, `num_blocks > 2^31 - 1`, or a
    /// pool whose byte size overflows u64.
    pub fn new(
        num_blocks: u64,
        block_size: u32,
        row_bytes: u32,
        num_layers: u32,
    ) -> Result<Self, PoolError> {
        // Block ids are int32 in block tables (as in vLLM's).
        if num_blocks == 0 || num_blocks > i32::MAX as u64 {
            return Err(PoolError::invalid(
                "num_blocks",
                num_blocks,
                "1 ..= 2^31 - 1 (a host_pool_gib too small for one host block gives 0)",
            ));
        }
        if block_size == 0 {
            return Err(PoolError::invalid("block_size", 0, ">= 1 token"));
        }
        let rows = num_blocks * u64::from(block_size); // < 2^31 x 2^32 = 2^63
                                                       // Validates row_bytes, num_layers and the byte math.
        PoolLayout::new(rows, row_bytes, num_layers, 0)?;
        let metrics = Arc::new(HiSparseMetrics::new());
        metrics.set_host_usage(0, num_blocks);
        Ok(HostKVPool {
            block_size,
            row_bytes,
            num_layers,
            num_blocks,
            freed: BinaryHeap::new(),
            high_water: 0,
            requests: HashMap::new(),
            metrics,
        })
    }

    /// Sized from `host_pool_gib` (GiB = 2^30 bytes): floor(host_pool_gib x 2^30
    /// / (block_size x row_bytes x num_layers)) blocks, as vLLM 0.33 sizes it.
    pub fn from_host_pool_gib(
        host_pool_gib: f64,
        block_size: u32,
        row_bytes: u32,
        num_layers: u32,
    ) -> Result<Self, PoolError> {
        if !(host_pool_gib.is_finite() && host_pool_gib > 0.0) {
            return Err(PoolError::invalid(
                "host_pool_gib",
                host_pool_gib,
                "a finite number > 0",
            ));
        }
        let block_bytes = u64::from(block_size)
            .checked_mul(u64::from(row_bytes))
            .and_then(|b| b.checked_mul(u64::from(num_layers)))
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                PoolError::invalid(
                    "block_size x row_bytes x num_layers",
                    block_size,
                    "1 ..= 2^64 - 1",
                )
            })?;
        Self::new(
            pool_blocks(host_pool_gib, block_bytes),
            block_size,
            row_bytes,
            num_layers,
        )
    }

    /// The pool a resolved configuration describes: `host_blocks` blocks of
    /// `block_size` tokens, `row_bytes`, `sparse_mla_layers` layers
    /// ([`crate::resolve`]). Error `settings_incomplete` when the report lacks
    /// row_bytes or host_blocks (an unknown kv_cache_dtype).
    pub fn from_resolved(h: &ResolvedHiSparse) -> Result<Self, PoolError> {
        let row_bytes = h
            .row_bytes
            .as_ref()
            .ok_or(PoolError::SettingsIncomplete { field: "row_bytes" })?
            .value;
        let blocks = h
            .host_blocks
            .as_ref()
            .ok_or(PoolError::SettingsIncomplete {
                field: "host_blocks",
            })?
            .value;
        Self::new(
            blocks,
            h.block_size.value,
            row_bytes,
            h.sparse_mla_layers.value,
        )
    }

    /// Report to `metrics` (shared with resolvers) instead of the pool's own.
    pub fn with_metrics(mut self, metrics: Arc<HiSparseMetrics>) -> Self {
        self.metrics = metrics;
        self.publish();
        self
    }

    pub fn metrics(&self) -> &Arc<HiSparseMetrics> {
        &self.metrics
    }
    pub fn block_size(&self) -> u32 {
        self.block_size
    }
    pub fn row_bytes(&self) -> u32 {
        self.row_bytes
    }
    pub fn num_layers(&self) -> u32 {
        self.num_layers
    }
    pub fn num_blocks(&self) -> u64 {
        self.num_blocks
    }
    /// Host rows per layer: num_blocks x block_size (valid host row ids are below it).
    pub fn num_host_rows(&self) -> u64 {
        self.num_blocks * u64::from(self.block_size)
    }
    /// block_size x row_bytes x num_layers, bytes (HISPARSE.md §5).
    pub fn host_block_bytes(&self) -> u64 {
        u64::from(self.block_size) * u64::from(self.row_bytes) * u64::from(self.num_layers)
    }
    pub fn free_blocks(&self) -> u64 {
        self.freed.len() as u64 + (self.num_blocks - self.high_water)
    }

    /// The layer-major byte layout of this pool's tensor for a pipeline stage
    /// whose first global layer is `first_layer`.
    pub fn layout(&self, first_layer: u64) -> Result<PoolLayout, PoolError> {
        PoolLayout::new(
            self.num_host_rows(),
            self.row_bytes,
            self.num_layers,
            first_layer,
        )
    }

    /// Blocks a request of `num_tokens` tokens takes: ceil(num_tokens / block_size).
    pub fn blocks_for(&self, num_tokens: u64) -> u64 {
        num_tokens.div_ceil(u64::from(self.block_size))
    }

    /// Whether a new request of `num_tokens` tokens fits the free blocks now.
    pub fn can_admit(&self, num_tokens: u64) -> bool {
        self.blocks_for(num_tokens) <= self.free_blocks()
    }

    /// Admit a request with `num_tokens` tokens (its prompt); returns its block
    /// table. Errors: `duplicate_request`, `host_pool_exhausted` (nothing changes).
    pub fn admit(&mut self, request_id: &str, num_tokens: u64) -> Result<&[u32], PoolError> {
        if self.requests.contains_key(request_id) {
            return Err(PoolError::DuplicateRequest {
                request_id: request_id.to_owned(),
            });
        }
        let blocks = self.take(self.blocks_for(num_tokens))?;
        self.requests
            .insert(request_id.to_owned(), Request { blocks, num_tokens });
        self.publish();
        self.block_table(request_id)
    }

    /// Grow a request by `num_new_tokens` (generated tokens); returns the newly
    /// allocated block ids (empty unless a block boundary is crossed).
    /// Errors: `unknown_request`, `host_pool_exhausted` (nothing changes).
    pub fn append(&mut self, request_id: &str, num_new_tokens: u64) -> Result<Vec<u32>, PoolError> {
        let (have, tokens) = match self.requests.get(request_id) {
            Some(r) => (r.blocks.len() as u64, r.num_tokens),
            None => return Err(unknown(request_id)),
        };
        let total = tokens.checked_add(num_new_tokens).ok_or_else(|| {
            PoolError::invalid(
                "num_new_tokens",
                num_new_tokens,
                "a total below 2^64 tokens",
            )
        })?;
        let new = self.take(self.blocks_for(total) - have)?;
        if let Some(r) = self.requests.get_mut(request_id) {
            r.blocks.extend_from_slice(&new);
            r.num_tokens = total;
        }
        self.publish();
        Ok(new)
    }

    /// Free a finished or aborted request's blocks; returns how many were freed.
    /// Error: `unknown_request`.
    pub fn free(&mut self, request_id: &str) -> Result<u64, PoolError> {
        let req = self
            .requests
            .remove(request_id)
            .ok_or_else(|| unknown(request_id))?;
        let n = req.blocks.len() as u64;
        self.freed.extend(req.blocks.into_iter().map(Reverse));
        self.publish();
        Ok(n)
    }

    /// A request's block table (block ids, in token order). Error: `unknown_request`.
    pub fn block_table(&self, request_id: &str) -> Result<&[u32], PoolError> {
        self.requests
            .get(request_id)
            .map(|r| r.blocks.as_slice())
            .ok_or_else(|| unknown(request_id))
    }

    /// A request's token count. Error: `unknown_request`.
    pub fn num_tokens(&self, request_id: &str) -> Result<u64, PoolError> {
        self.requests
            .get(request_id)
            .map(|r| r.num_tokens)
            .ok_or_else(|| unknown(request_id))
    }

    /// Host row ids of token `positions` (int64, 64-bit math): row =
    /// block_table[p / block_size] x block_size + p % block_size. A position of
    /// -1 (padding) gives -1; any other position outside `[0, num_tokens)` is
    /// the error `position_out_of_range` and writes nothing.
    pub fn host_rows(&self, request_id: &str, positions: &[i64]) -> Result<Vec<i64>, PoolError> {
        let req = self
            .requests
            .get(request_id)
            .ok_or_else(|| unknown(request_id))?;
        let bs = u64::from(self.block_size);
        positions
            .iter()
            .map(|&p| {
                if p == -1 {
                    return Ok(-1);
                }
                match u64::try_from(p) {
                    Ok(pos) if pos < req.num_tokens => {
                        // pos < num_tokens <= blocks.len() x block_size, so the index exists.
                        let block = req.blocks[(pos / bs) as usize];
                        // < num_blocks x block_size < 2^31 x 2^32 = 2^63.
                        Ok((u64::from(block) * bs + pos % bs) as i64)
                    }
                    _ => Err(PoolError::PositionOutOfRange {
                        request_id: request_id.to_owned(),
                        position: p,
                        num_tokens: req.num_tokens,
                    }),
                }
            })
            .collect()
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            blocks_used: self.num_blocks - self.free_blocks(),
            blocks_total: self.num_blocks,
            num_requests: self.requests.len() as u64,
        }
    }

    /// Request ids currently admitted (any order).
    pub fn request_ids(&self) -> impl Iterator<Item = &str> {
        self.requests.keys().map(String::as_str)
    }

    /// Take the `n` lowest free ids, or fail without taking any.
    fn take(&mut self, n: u64) -> Result<Vec<u32>, PoolError> {
        let free = self.free_blocks();
        if n > free {
            return Err(HostPoolExhausted { needed: n, free }.into());
        }
        // A block table is 4 bytes per block: an error, not an abort, if that
        // much host memory cannot be had.
        let mut out = Vec::new();
        out.try_reserve_exact(n as usize).map_err(|_| {
            PoolError::invalid(
                "num_tokens",
                format!("{n} host blocks"),
                "a block table that fits in host memory (4 bytes per block)",
            )
        })?;
        // Freed ids are all below the high-water mark: take them first.
        while out.len() < n as usize {
            match self.freed.pop() {
                Some(Reverse(b)) => out.push(b),
                None => break,
            }
        }
        let fresh = n - out.len() as u64; // <= num_blocks - high_water (n <= free)
        out.extend((self.high_water..self.high_water + fresh).map(|b| b as u32)); // < 2^31
        self.high_water += fresh;
        Ok(out)
    }

    fn publish(&self) {
        self.metrics
            .set_host_usage(self.num_blocks - self.free_blocks(), self.num_blocks);
    }
}

fn unknown(request_id: &str) -> PoolError {
    PoolError::UnknownRequest {
        request_id: request_id.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admit_append_free_lowest_id_first() {
        let mut p = HostKVPool::new(8, 4, 656, 2).unwrap();
        assert_eq!(p.admit("a", 5).unwrap(), &[0, 1]);
        assert_eq!(p.admit("b", 4).unwrap(), &[2]);
        assert!(p.append("a", 3).unwrap().is_empty()); // 8 tokens: still 2 blocks
        assert_eq!(p.append("a", 1).unwrap(), vec![3]);
        assert_eq!(p.free("a").unwrap(), 3);
        assert_eq!(p.admit("c", 9).unwrap(), &[0, 1, 3]);
        assert_eq!(p.stats().blocks_used, 4);
        assert_eq!(
            p.host_rows("c", &[0, 4, 8, -1]).unwrap(),
            vec![0, 4, 12, -1]
        );
        assert_eq!(
            p.host_rows("c", &[9]).unwrap_err().code(),
            "position_out_of_range"
        );
        assert_eq!(
            p.host_rows("c", &[-2]).unwrap_err().code(),
            "position_out_of_range"
        );
        assert_eq!(p.metrics().snapshot().host_cache_usage_perc, 0.5);
    }

    #[test]
    fn exhaustion_changes_nothing() {
        let mut p = HostKVPool::new(3, 16, 656, 1).unwrap();
        p.admit("a", 20).unwrap();
        let e = p.admit("b", 33).unwrap_err();
        assert_eq!(
            e,
            PoolError::HostPoolExhausted(HostPoolExhausted { needed: 3, free: 1 })
        );
        assert!(p.block_table("b").is_err());
        assert!(!p.can_admit(17) && p.can_admit(16));
        let e = p.append("a", 30).unwrap_err(); // 50 tokens: 4 blocks, has 2
        assert_eq!(e.code(), "host_pool_exhausted");
        assert_eq!(p.num_tokens("a").unwrap(), 20);
        assert_eq!(p.block_table("a").unwrap(), &[0, 1]);
        assert_eq!(p.free_blocks(), 1);
        assert_eq!(p.admit("a", 1).unwrap_err().code(), "duplicate_request");
        assert_eq!(p.free("zz").unwrap_err().code(), "unknown_request");
    }

    #[test]
    fn sized_from_gib_like_vllm() {
        // 64 x 656 x 61 = 2,561,024 B per block (HISPARSE.md §5).
        let p = HostKVPool::from_host_pool_gib(1.0, 64, 656, 61).unwrap();
        assert_eq!(p.host_block_bytes(), 2_561_024);
        assert_eq!(p.num_blocks(), (1u64 << 30) / 2_561_024);
        assert_eq!(
            HostKVPool::from_host_pool_gib(0.001, 64, 656, 61)
                .unwrap_err()
                .code(),
            "invalid_size"
        );
        assert_eq!(
            HostKVPool::from_host_pool_gib(f64::NAN, 64, 656, 61)
                .unwrap_err()
                .code(),
            "invalid_size"
        );
    }

    #[test]
    fn a_huge_pool_costs_what_it_uses() {
        // 2^31 - 1 blocks: no per-block work or memory until blocks are used.
        let mut p = HostKVPool::new(i32::MAX as u64, 1, 1, 1).unwrap();
        assert_eq!(p.free_blocks(), i32::MAX as u64);
        assert_eq!(p.admit("a", 3).unwrap(), &[0, 1, 2]);
        assert_eq!(p.admit("b", 2).unwrap(), &[3, 4]);
        p.free("a").unwrap();
        // Freed ids come back lowest first, then fresh ones.
        assert_eq!(p.admit("c", 4).unwrap(), &[0, 1, 2, 5]);
        assert_eq!(p.free_blocks(), i32::MAX as u64 - 6);
        assert_eq!(p.stats().blocks_used, 6);
    }

    #[test]
    fn row_ids_beyond_2_31() {
        // 256 blocks of 2^24 tokens: rows up to 2^32.
        let mut p = HostKVPool::new(256, 1 << 24, 656, 1).unwrap();
        p.admit("x", 255 << 24).unwrap();
        p.admit("y", 1 << 24).unwrap();
        assert_eq!(p.host_rows("y", &[5]).unwrap(), vec![(255i64 << 24) + 5]);
        assert!(p.host_rows("y", &[5]).unwrap()[0] > i64::from(i32::MAX));
    }
}
