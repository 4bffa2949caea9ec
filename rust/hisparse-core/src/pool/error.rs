//! Errors of the host pool, its byte layout and the residency resolver.
//!
//! Every error is a value with a stable snake_case [`PoolError::code`] (tests
//! and callers match on it, never on the message), says what was given and
//! what is allowed, and leaves the pool or resolver unchanged: every public
//! mutating call validates first and mutates only when it cannot fail.

use thiserror::Error;

/// An allocation that does not fit the free host blocks. Nothing was allocated.
///
/// `needed` is the whole request's new blocks (allocation is all or nothing),
/// `free` the blocks free at the time of the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error(
    "host pool exhausted: {needed} host blocks needed, {free} free; \
     free finished requests, wait, or raise host_pool_gib"
)]
pub struct HostPoolExhausted {
    pub needed: u64,
    pub free: u64,
}

/// Every failure of [`crate::HostKVPool`], [`crate::PoolLayout`] and
/// [`crate::ResidencyResolver`]. `code()` is stable; messages may change.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PoolError {
    #[error(transparent)]
    HostPoolExhausted(#[from] HostPoolExhausted),

    #[error("unknown request {request_id:?}: it was never admitted or is already freed")]
    UnknownRequest { request_id: String },

    #[error("request {request_id:?} is already admitted; free it first or use a new request id")]
    DuplicateRequest { request_id: String },

    /// HISPARSE.md §10: a global layer id used to index stage-local buffers.
    #[error(
        "layer {layer} is outside this pipeline stage's layers [{start}, {end}); \
         pass a global layer id the stage owns"
    )]
    LayerOutOfRange { layer: i64, start: u64, end: u64 },

    #[error(
        "position {position} of request {request_id:?} is out of range: it has {num_tokens} tokens \
         (allowed: 0 <= position < num_tokens, or -1 for padding)"
    )]
    PositionOutOfRange {
        request_id: String,
        position: i64,
        num_tokens: u64,
    },

    /// HISPARSE.md §6: a hot buffer must hold one top-k row (dbs >= top-k).
    #[error(
        "top-k {topk} exceeds device_buffer_size {device_buffer_size}: the hot buffer must hold \
         a whole top-k row; raise device_buffer_size to at least {topk}"
    )]
    TopkExceedsDeviceBuffer { topk: u64, device_buffer_size: u64 },

    /// HISPARSE.md §4: slots are int16 in vLLM / SGLang.
    #[error(
        "device_buffer_size {device_buffer_size} exceeds {max} (hot-buffer slots are int16); \
         lower device_buffer_size"
    )]
    DeviceBufferTooLarge { device_buffer_size: u64, max: u64 },

    #[error("invalid {what}: {given} (allowed: {allowed})")]
    InvalidSize {
        what: &'static str,
        given: String,
        allowed: String,
    },

    #[error(
        "top-k rows are {width} wide, wider than the resolver's top-k {topk}; \
         build the resolver with topk >= {width}"
    )]
    TopkTooWide { width: u64, topk: u64 },

    #[error("shape mismatch: {what}")]
    ShapeMismatch { what: String },

    /// A bound on one call's work (README "Limits"), so every call returns soon.
    #[error("{what} has {entries} entries, more than the {max} one call takes; split it into several calls")]
    BatchTooLarge {
        what: &'static str,
        entries: u64,
        max: u64,
    },

    #[error(
        "unknown resolver state {state} (batch row {row}): it was never created or is already \
         freed; use an index from new_state(), or -1 for a padded row"
    )]
    UnknownState { state: i64, row: u64 },

    /// MTP rows of one state are resolved as one union, which must fit the hot buffer.
    #[error(
        "state {state}: the union of its rows' top-k holds {union} distinct host rows, more than \
         device_buffer_size {device_buffer_size}; raise device_buffer_size to \
         (max_decode_query_len + 1) x top-k"
    )]
    UnionExceedsDeviceBuffer {
        state: u64,
        union: u64,
        device_buffer_size: u64,
    },

    /// A hot-buffer state handed to `import_state` that no resolve could have
    /// produced (HISPARSE.md §6 state: unique rows, an LRU permutation).
    #[error(
        "resolver state {state}: {what}; pass a state exported by ResidencyResolver.export_state \
         or the Triton resolver (slot_rows int32 [dbs], -1 empty, each host row at most once; \
         lru_order int16 [dbs], a permutation of 0..dbs)"
    )]
    InvalidResolverState { state: i64, what: String },

    /// A resolved configuration without the numbers a pool needs.
    #[error(
        "the resolved configuration has no {field} (unknown kv_cache_dtype row size or HiSparse \
         not enabled); pass the numbers explicitly"
    )]
    SettingsIncomplete { field: &'static str },
}

impl PoolError {
    /// Every stable code, in declaration order.
    pub const CODES: &'static [&'static str] = &[
        "host_pool_exhausted",
        "unknown_request",
        "duplicate_request",
        "layer_out_of_range",
        "position_out_of_range",
        "topk_exceeds_device_buffer",
        "device_buffer_too_large",
        "invalid_size",
        "topk_too_wide",
        "shape_mismatch",
        "batch_too_large",
        "unknown_state",
        "union_exceeds_device_buffer",
        "settings_incomplete",
        "invalid_resolver_state",
    ];

    /// The stable snake_case code, e.g. `"host_pool_exhausted"`.
    pub fn code(&self) -> &'static str {
        match self {
            PoolError::HostPoolExhausted(_) => "host_pool_exhausted",
            PoolError::UnknownRequest { .. } => "unknown_request",
            PoolError::DuplicateRequest { .. } => "duplicate_request",
            PoolError::LayerOutOfRange { .. } => "layer_out_of_range",
            PoolError::PositionOutOfRange { .. } => "position_out_of_range",
            PoolError::TopkExceedsDeviceBuffer { .. } => "topk_exceeds_device_buffer",
            PoolError::DeviceBufferTooLarge { .. } => "device_buffer_too_large",
            PoolError::InvalidSize { .. } => "invalid_size",
            PoolError::TopkTooWide { .. } => "topk_too_wide",
            PoolError::ShapeMismatch { .. } => "shape_mismatch",
            PoolError::BatchTooLarge { .. } => "batch_too_large",
            PoolError::UnknownState { .. } => "unknown_state",
            PoolError::UnionExceedsDeviceBuffer { .. } => "union_exceeds_device_buffer",
            PoolError::SettingsIncomplete { .. } => "settings_incomplete",
            PoolError::InvalidResolverState { .. } => "invalid_resolver_state",
        }
    }

    pub(crate) fn invalid(
        what: &'static str,
        given: impl ToString,
        allowed: impl ToString,
    ) -> Self {
        PoolError::InvalidSize {
            what,
            given: given.to_string(),
            allowed: allowed.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_listed_and_unique() {
        let mut codes = PoolError::CODES.to_vec();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), PoolError::CODES.len());
        let e = PoolError::from(HostPoolExhausted { needed: 3, free: 1 });
        assert_eq!(e.code(), "host_pool_exhausted");
        assert!(PoolError::CODES.contains(&e.code()));
        assert!(e.to_string().contains("3 host blocks needed, 1 free"));
    }
}
