//! HiSparse settings as SGLang 0.5.23 would run them: the report's `hisparse`
//! object for an SGLang launch, with SGLang's own field names, each value with
//! its provenance.

use crate::report::Resolved;
use serde::{Deserialize, Serialize};

/// The resolved SGLang settings (a valid report with `--enable-hisparse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SglangHiSparse {
    /// `--enable-hisparse`.
    pub enable_hisparse: Resolved<bool>,
    /// `hisparse_config.top_k`: feeds only the default buffer and the
    /// `device_buffer_size >= top_k` check (mem_cache/sparsity/factory.py:85-90).
    pub top_k: Resolved<i64>,
    /// The model's `index_topk`, which replaces `top_k` at run time
    /// (model_executor/model_runner.py:1039-1041).
    pub index_topk: Resolved<i64>,
    /// `hisparse_config.device_buffer_size`: device slots per request and layer
    /// (default 2 x top_k, factory.py:86).
    pub device_buffer_size: Resolved<i64>,
    /// `hisparse_config.host_to_device_ratio`: host pool tokens per device KV slot (default 2).
    pub host_to_device_ratio: Resolved<i64>,
    /// `hisparse_config.swap_in_block_size` (default 960, 1..1024).
    pub swap_in_block_size: Resolved<i64>,
    /// Tokens per page: 64 x index_kpool for DSA (model_overrides/deepseek_v2.py:161-173).
    pub page_size: Resolved<i64>,
    /// The KV cache dtype after `auto` (arg_groups/overrides.py:532-544).
    pub kv_cache_dtype: Resolved<String>,
    /// The compute capability the dtype was resolved for, e.g. `9.0`.
    pub compute_capability: Resolved<String>,
    /// The DSA backends (absent for DeepSeek-V4 and MiniMax-M3, which pick their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsa_prefill_backend: Option<Resolved<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsa_decode_backend: Option<Resolved<String>>,
    /// Radix cache off (HiSparse requires it; P/D decode turns it off itself).
    pub disable_radix_cache: Resolved<bool>,
    /// `null`, `prefill` or `decode`.
    pub disaggregation_mode: Resolved<String>,
    /// Draft tokens per verify step; absent without speculation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_num_draft_tokens: Option<Resolved<i64>>,
    /// Bytes of one token's MLA latent in one layer (1152 bfloat16, 656
    /// fp8_e4m3; mem_cache/kv_cache_configurator.py:3412-3475); absent if unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_row_bytes: Option<Resolved<u64>>,
}
