//! What resolution read from the flags before the rules run: the explicit
//! `hisparse_config` and the scalars, handed from [`super::resolve`] to
//! [`super::startup`] and [`super::validate`].

use crate::path::FieldPath;
use crate::sizes::Parallel;

/// The explicit `attention_config.hisparse_config`, as far as it parsed.
pub(crate) struct HiSparseInput {
    pub(crate) path: FieldPath,
    pub(crate) device_buffer_size: Option<u64>,
    pub(crate) eager_host_mirror: Option<bool>,
}

/// Scalars after their own checks; invalid ones fall back to vLLM's defaults
/// (their error is already recorded).
pub(crate) struct Scalars {
    pub(crate) parallel: Parallel,
    pub(crate) block_size: Option<u64>,
    pub(crate) max_model_len: Option<u64>,
    /// `--max-model-len auto` / -1: vLLM fits the context to memory.
    pub(crate) max_model_len_auto: bool,
    pub(crate) platform: String,
    pub(crate) kv_cache_dtype: Option<String>,
    pub(crate) v2_runner: Option<bool>,
}
