//! The result of resolution: resolved HiSparse settings, each with its
//! provenance, plus every error and warning. Its JSON form is the stable
//! `--json` schema of `hisparse-check` (documented in README.md) and the
//! data behind `hisparse_rs.check()` / `resolve()` in Python.

use crate::diagnostic::Diagnostic;
use crate::gpu::GpuSpec;
use serde::{Deserialize, Serialize};

/// Version of the JSON schema; bumped only on incompatible changes. 2: every
/// diagnostic carries `stage` (when vLLM 0.33.0 would have refused it).
pub const SCHEMA_VERSION: u32 = 2;

/// Where a resolved value came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum Provenance {
    /// The user set it, at `path` (e.g. `attention_config.hisparse_config.device_buffer_size`).
    Explicit { path: String },
    /// Inferred from the HiSparseConnector at `connector` (vLLM PR 57041).
    Inferred { connector: String },
    /// vLLM's default; `rule` says which.
    Default { rule: String },
    /// Computed from other inputs named in `from` by `rule`.
    Derived { from: Vec<String>, rule: String },
}

/// A value with its provenance; JSON: `{"value": ..., "source": ..., ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resolved<T> {
    pub value: T,
    #[serde(flatten)]
    pub provenance: Provenance,
}

impl<T> Resolved<T> {
    pub fn new(value: T, provenance: Provenance) -> Self {
        Resolved { value, provenance }
    }
}

/// HiSparse settings as vLLM 0.33.0 would run them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResolvedHiSparse {
    /// Whether HiSparse is on, and why (explicit `hisparse_config` or inferred from the connector).
    pub enabled: Resolved<bool>,
    /// Path of the HiSparseConnector, e.g. `kv_transfer_config.kv_connector_extra_config.connectors[1]`.
    pub connector: String,
    /// Usable host-pool capacity per data-parallel replica, GiB (2^30 bytes).
    pub host_pool_gib: Resolved<f64>,
    /// Hot-buffer rows per request, including the newest-token slot.
    pub device_buffer_size: Resolved<u32>,
    /// Mirror decode-written rows to host inside the forward pass.
    pub eager_host_mirror: Resolved<bool>,
    /// Rows the indexer selects per query token.
    pub index_topk: Resolved<u32>,
    /// Top-k rows the hot buffer must hold per query: index_topk, or wider for a
    /// pooled indexer (GLM-5.3-Flash: round_up(index_topk + index_kpool - 1, 128)).
    pub topk_buffer_width: Resolved<u32>,
    /// Widest decode query per request: 1, or 1 + num_speculative_tokens.
    pub max_decode_query_len: Resolved<u32>,
    /// KV cache dtype after "auto" and aliases are resolved.
    pub kv_cache_dtype: Resolved<String>,
    /// Bytes of one token's MLA latent KV in one layer (656 fp8_ds_mla, 1152 bf16); null if unknown.
    pub row_bytes: Option<Resolved<u32>>,
    /// KV block size in tokens.
    pub block_size: Resolved<u32>,
    /// Longest context in tokens.
    pub max_model_len: Resolved<u64>,
    /// Layers whose MLA KV lives in the host pool.
    pub sparse_mla_layers: Resolved<u32>,
    /// block_size x row_bytes x sparse_mla_layers, bytes.
    pub host_block_bytes: Option<Resolved<u64>>,
    /// Bytes one host block takes in the pool: host_block_bytes, rounded up to
    /// the 4 KiB OS page when TP ranks share the pool.
    pub host_block_stride: Option<Resolved<u64>>,
    /// floor(host_pool_gib x 2^30 / host_block_stride).
    pub host_blocks: Option<Resolved<u64>>,
    /// ceil(max_model_len / block_size) + 2: what start-up requires.
    pub min_host_blocks: Resolved<u64>,
    /// Index group of each host-pool layer (sparse-MLA layers, then MTP draft
    /// layers): layers that reuse an earlier layer's top-k (IndexShare) share
    /// its group and its hot-buffer state. Empty for implausibly many layers.
    #[serde(default)]
    pub index_groups: Vec<u32>,
    /// Shared memory per CUDA block vLLM 0.33's residency resolver needs for
    /// this hot buffer and query length (`runtime.py` `_check_residency_shared_memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residency_shared_memory_bytes: Option<Resolved<u64>>,
    /// The same figure per program for hisparse_rs's Triton resolver, from its
    /// compiled cubins (`sizes::triton_resolver_shared_memory_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton_resolver_shared_memory_bytes: Option<u64>,
}

pub use crate::stage::{ENGINE_SGLANG, ENGINE_VLLM};

fn default_engine() -> String {
    ENGINE_VLLM.to_owned()
}

/// A report's resolved HiSparse settings, in its engine's terms. Untagged:
/// the JSON is the engine's own object (`engine` at the top of the report says
/// which); vLLM's is tried first, and its required `connector` tells them apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HiSparseSettings {
    Vllm(ResolvedHiSparse),
    Sglang(SglangHiSparse),
}

/// HiSparse settings as SGLang 0.5.23 would run them (`engines/sglang_0_5_23`
/// resolves them): the report's `hisparse` object for an SGLang launch, with
/// SGLang's own field names, each value with its provenance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SglangHiSparse {
    /// `--enable-hisparse`.
    pub enable_hisparse: Resolved<bool>,
    /// `hisparse_config.top_k`: feeds only the default buffer and the
    /// `device_buffer_size >= top_k` check (mem_cache/sparsity/factory.py:85-90).
    /// Python's value, which SGLang holds as it is (`{"top_k": 2048.5}` with a
    /// buffer given starts): an integer (a bool is 0 or 1), written as a JSON
    /// integer; a float, as a JSON number, NaN and infinities as `"nan"`,
    /// `"inf"`, `"-inf"`; an integer beyond 64 bits as its digits, a string
    /// ([`crate::pyvalue::PyValue::to_json`]).
    pub top_k: Resolved<serde_json::Value>,
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

/// The model the configuration was checked against.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    /// Where its config came from (a file path, or `hf_config`).
    pub source: String,
    pub architecture: Option<String>,
    pub model_type: Option<String>,
}

/// The node's host RAM that a valid report's pinned host pools were checked
/// against (`Report::host_memory`): present when the RAM is known
/// (`--host-memory-gib`, Python's `host_memory_gib=`, or the machine's, read
/// by the vLLM plugin) and the pools could be sized. `usable_bytes` is what
/// the engine lets this node's pools pin (`rule` says how), `pinned_bytes`
/// what they pin, `left_bytes` the difference (never negative: past it the
/// report is invalid, with the engine's RAM error).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostMemoryCheck {
    /// The node's RAM, in GiB, as given or read.
    pub host_memory_gib: f64,
    /// Where that figure came from (`--host-memory-gib`, this node's available RAM, ...).
    pub source: String,
    /// The host pools this node pins (vLLM: one per DP replica or per rank;
    /// SGLang: one per rank on the node).
    pub pools_per_node: u64,
    /// Bytes each pool pins.
    pub pool_bytes: u64,
    /// Bytes the node's pools pin together.
    pub pinned_bytes: u64,
    /// Bytes the engine lets the node's pools pin.
    pub usable_bytes: u64,
    /// `usable_bytes - pinned_bytes`: the headroom the check found.
    pub left_bytes: u64,
    /// How `usable_bytes` follows from the RAM, with the engine's file:line.
    pub rule: String,
}

/// Everything `hisparse-check` says about one serve configuration.
///
/// Read back from JSON by its engine: `engine` first, then every diagnostic's
/// stage with that engine's table, so an SGLang report's `never` is SGLang's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct Report {
    pub schema_version: u32,
    /// The engine whose rules this report follows: `vllm` or `sglang`
    /// (a report without it was written before SGLang: `vllm`).
    #[serde(default = "default_engine")]
    pub engine: String,
    /// That engine's release, e.g. `0.33.0` or `0.5.23`.
    #[serde(default)]
    pub engine_version: String,
    /// The vLLM release whose behaviour this report follows (vLLM reports only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_version: Option<String>,
    /// True when there are no errors.
    pub valid: bool,
    /// True when HiSparse is configured (explicitly or through a connector), valid or not.
    pub hisparse_enabled: bool,
    pub model: Option<ModelSummary>,
    /// The resolved settings: present only when valid and HiSparse is enabled,
    /// in the engine's own terms.
    pub hisparse: Option<HiSparseSettings>,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// The GPU the check was for (`--gpu`), with the sources of its figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSpec>,
    /// vLLM flags on the command line that hisparse-check does not check
    /// (`--port 8000`), as given. Empty from Python.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_flags: Vec<String>,
    /// The `vllm serve` flags to change, with every fix of this report
    /// applied, e.g. `--block-size 64 --kv-transfer-config '{...}'`: pasted in
    /// place of the flags given (with `fixed_env` applied), they pass
    /// (`config::fixed_flags`). Absent when no fix changes a flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_flags: Option<String>,
    /// The environment variables the fixes change, as shell text run before
    /// `vllm serve` (`unset VLLM_USE_V2_MODEL_RUNNER`). Absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_env: Option<String>,
    /// On a valid report with HiSparse, when the node's RAM is known: what
    /// the pools pin of it and what is left ([`HostMemoryCheck`]). Absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory: Option<HostMemoryCheck>,
}

impl Report {
    /// Inserts the errors the fixes together reveal (each engine's advise
    /// pass finds them), marked `revealed`, after every error with a fix and
    /// before those without (so the first error has a fix whenever one
    /// does); whether there were any.
    pub fn insert_revealed(&mut self, revealed: Vec<Diagnostic>) -> bool {
        let grown = !revealed.is_empty();
        for mut e in revealed {
            e.revealed = true;
            let at = self
                .errors
                .iter()
                .rposition(|d| !d.fix.is_empty())
                .map_or(0, |i| i + 1);
            self.errors.insert(at, e);
        }
        grown
    }

    /// A report from diagnostics alone (e.g. flags that are not valid JSON),
    /// for `engine` ([`ENGINE_VLLM`], [`ENGINE_SGLANG`]) at the release
    /// `engine_version` its engine module states.
    pub fn from_diagnostics(engine: &str, engine_version: &str, diags: Vec<Diagnostic>) -> Self {
        let (errors, warnings): (Vec<_>, Vec<_>) =
            diags.into_iter().partition(Diagnostic::is_error);
        Report {
            schema_version: SCHEMA_VERSION,
            engine: engine.to_owned(),
            engine_version: engine_version.to_owned(),
            vllm_version: (engine == ENGINE_VLLM).then(|| engine_version.to_owned()),
            valid: errors.is_empty(),
            hisparse_enabled: false,
            model: None,
            hisparse: None,
            errors,
            warnings,
            gpu: None,
            ignored_flags: Vec::new(),
            fixed_flags: None,
            fixed_env: None,
            host_memory: None,
        }
    }

    /// Indented JSON, for people and `hisparse-check --json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("Report always serializes")
    }

    /// The vLLM settings, when this is a valid vLLM report with HiSparse.
    pub fn vllm_hisparse(&self) -> Option<&ResolvedHiSparse> {
        match &self.hisparse {
            Some(HiSparseSettings::Vllm(h)) => Some(h),
            _ => None,
        }
    }

    /// The SGLang settings, when this is a valid SGLang report with HiSparse.
    pub fn sglang_hisparse(&self) -> Option<&SglangHiSparse> {
        match &self.hisparse {
            Some(HiSparseSettings::Sglang(h)) => Some(h),
            _ => None,
        }
    }

    /// Compact JSON, for machines (the Python binding).
    pub fn to_json_compact(&self) -> String {
        serde_json::to_string(self).expect("Report always serializes")
    }
}

impl Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Report::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for Report {
    /// By its engine: `engine` first, then the typed read, then the
    /// diagnostics' stages by that engine's table.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::diagnostic::read_by_engine(d, Report::deserialize, |r| {
            [&mut r.errors, &mut r.warnings]
        })
    }
}
