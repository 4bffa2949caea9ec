//! The capacity planner: how many concurrent requests of context L one DP
//! replica serves with and without HiSparse, which limit binds, and how much
//! host memory the pools pin per node.
//!
//! This module is the engine-neutral capacity model: the plan's shape
//! ([`Plan`], [`PlanPoint`], [`HostPlan`], [`GpuPlan`]), its options and
//! their bounds, and the pool arithmetic. An engine module reads its flags
//! into it: for vLLM 0.33.0, `engines/vllm_0_33/planner.rs` (the figures) and
//! `engines/vllm_0_33/plan.rs` (the entry point: the check, then the plan).
//! Every size comes from [`crate::sizes`]; the formulas are HISPARSE.md §5's
//! (vLLM's public HiSparse concurrency calculator), with the layout facts of
//! vLLM 0.33.0's `vllm/v1/hisparse/layout.py` (hot groups, GPU pool block bytes).
//!
//! Per GPU vs per replica: MLA latent KV and indexer keys have one KV head, so
//! vLLM replicates them on every TP rank; each GPU of a replica holds the
//! replica's whole KV, so the KV room of one GPU decides the replica's
//! concurrency. Weights are split across TP ranks (experts across TP x DP with
//! expert parallelism). Request counts are per DP replica.

pub(crate) mod weights;

pub use weights::{estimate as estimate_weights, WeightEstimate};

use crate::diagnostic::Diagnostic;
use crate::gpu::GpuSpec;
use crate::model::LoadError;
use crate::report::ModelSummary;
use crate::sizes::{self, GIB, OS_PAGE_BYTES};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the plan's JSON schema; bumped only on incompatible changes.
/// 2: every diagnostic carries `stage`, as in the check report's schema 2.
pub const PLAN_SCHEMA_VERSION: u32 = 2;
/// vLLM refuses a pinned host pool above 95 % of the host RAM (vLLM 0.33
/// `check_hisparse_host_memory`).
pub const HOST_MEMORY_FRACTION: f64 = 0.95;
/// vLLM 0.33 `CacheConfig.gpu_memory_utilization` default.
pub const DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.92;
/// The sweep starts at 8K tokens and doubles.
pub const SWEEP_START: u64 = 8192;

/// Planner inputs that are not `vllm serve` flags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanOptions {
    /// Tokens per request (prompt + output) to plan for; default `max_model_len`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u64>,
    /// Requests of `context_length` the host pool should hold; default: what
    /// the GPU holds (so the host pool is never the limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_requests: Option<u64>,
    /// The node's host RAM in GiB; default: `MemAvailable` in `/proc/meminfo`
    /// (vLLM checks the pool against available memory, `psutil.virtual_memory().available`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory_gib: Option<f64>,
    /// What `host_memory_gib` is, for the report's messages (default: "given
    /// with --host-memory-gib"); the vLLM plugin gives the node's available
    /// RAM and says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory_source: Option<String>,
    /// Memory of one GPU in GiB, for the KV room from `gpu_memory_utilization`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_gib: Option<f64>,
    /// Model weights on one GPU in GiB (vLLM logs "Model loading took X GiB");
    /// default: estimated from config.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_gib: Option<f64>,
    /// The GPU by name (`h200`; see [`crate::gpu`]): its memory fills
    /// `gpu_memory_gib` when that is not given, and the check runs vLLM's
    /// resolver shared-memory check for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// GPUs one node holds (`--gpus-per-node`; the vLLM plugin: the devices
    /// it sees); default: the usual server of `gpu` ([`GpuSpec::gpus_per_node`],
    /// 8 on HGX / DGX boards), else unknown. The layout rules refuse a launch
    /// that needs more GPUs on one node (vLLM 0.33 config/parallel.py:1068,
    /// v1/worker/gpu_worker.py:487; SGLang 0.5.23 model_executor/model_runner.py:455).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<u64>,
    /// The KV room of one GPU in GiB as the engine measured it (vLLM's
    /// "Available KV cache memory: X GiB", v1/worker/gpu_worker.py:773):
    /// the plan's KV room instead of GPU memory x utilization - weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_kv_cache_gib: Option<f64>,
    /// Where `weights_gib` and `available_kv_cache_gib` were measured (an
    /// engine log, `--engine-log`), for the sources the plan prints; without
    /// it they read as given by the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_in: Option<String>,
}

impl PlanOptions {
    /// These options with `gpu_memory_gib` filled from the GPU when not given.
    pub(crate) fn with_gpu(&self, gpu: Option<&GpuSpec>) -> PlanOptions {
        let mut o = self.clone();
        if o.gpu_memory_gib.is_none() {
            o.gpu_memory_gib = gpu.map(|g| g.memory_gib);
        }
        if o.gpus_per_node.is_none() {
            o.gpus_per_node = gpu.and_then(|g| g.gpus_per_node).map(u64::from);
        }
        o
    }
}

/// Inputs the planner cannot work with (a usage error, not a configuration error).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{0}")]
    Option(String),
}

/// How the TP ranks of a replica hold the host pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolMode {
    /// One pool per DP replica, shared by its TP ranks.
    Shared,
    /// One pool per rank.
    Private,
}

/// What caps the number of concurrent requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// GPU KV blocks.
    Gpu,
    /// Host pool blocks.
    Host,
    /// `--max-num-seqs`.
    MaxNumSeqs,
    /// HiSparse would hold fewer than the baseline; vLLM keeps pages GPU-resident
    /// until memory pressure, so the baseline figure holds.
    Baseline,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Gpu => "gpu",
            Limit::Host => "host",
            Limit::MaxNumSeqs => "max_num_seqs",
            Limit::Baseline => "baseline",
        }
    }
}

/// Per-token and per-block sizes (bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sizes {
    pub kv_cache_dtype: String,
    /// MLA latent KV per token per layer: 656 fp8_ds_mla, 1152 bf16 (576 x 2), 576 fp8_e4m3.
    pub mla_row_bytes: u32,
    /// Indexer key per token per layer: index_head_dim e4m3 + one fp32 scale per 128 (132).
    pub indexer_row_bytes: u32,
    /// Layers with MLA latent KV in the host pool (MTP draft layers included).
    pub sparse_mla_layers: u32,
    /// Layers with indexer keys on the GPU (fewer than sparse_mla_layers with IndexShare).
    pub indexer_layers: u32,
    /// MTP draft layers among them (speculative decoding with the checkpoint's MTP).
    pub draft_layers: u32,
    /// mla_row_bytes x sparse_mla_layers.
    pub mla_bytes_per_token: u64,
    /// indexer_row_bytes x indexer_layers.
    pub indexer_bytes_per_token: u64,
    pub block_size: u32,
    pub device_buffer_size: u32,
    /// One request's hot buffer: device_buffer_size x mla_row_bytes x sparse_mla_layers.
    pub hot_buffer_bytes: u64,
    /// Groups of hot (and resident) layers in the GPU pool (vLLM 0.33 layout).
    pub hot_groups: u64,
    /// Without HiSparse: one block holds MLA KV and indexer keys of every layer.
    pub baseline_block_bytes: u64,
    /// With HiSparse: one block of the shared GPU pool (indexer page, rounded up
    /// to whole MLA pages).
    pub hisparse_block_bytes: u64,
}

/// The host pools of one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostPlan {
    pub mode: PoolMode,
    /// Why this mode (vLLM 0.33 `use_shared_hisparse_host_pool`).
    pub mode_rule: String,
    /// Usable capacity per DP replica, GiB.
    pub host_pool_gib: f64,
    pub host_block_bytes: u64,
    /// host_block_bytes, rounded up to 4 KiB in a shared pool.
    pub host_block_stride: u64,
    /// floor(host_pool_gib x 2^30 / host_block_stride).
    pub host_blocks: u64,
    /// ceil(max_model_len / block_size) + 2: what start-up requires.
    pub min_host_blocks: u64,
    /// The smallest host_pool_gib that starts.
    pub min_host_pool_gib: f64,
    /// Pinned bytes of one pool (host_blocks x stride, page-rounded).
    pub pool_bytes: u64,
    /// Pools on this node: its DP replicas (shared) or their TP ranks
    /// (private). The replicas are `--data-parallel-size-local` when given,
    /// else an even share over `--nnodes`, as vLLM 0.33 places them.
    pub pools_per_node: u64,
    pub pinned_bytes_per_node: u64,
    /// The node's host RAM the check used, bytes; null when unknown.
    pub host_memory_bytes: Option<u64>,
    /// `--host-memory-gib`, or `/proc/meminfo MemAvailable`, or why unknown.
    pub host_memory_source: String,
    /// 95 % of host_memory_bytes.
    pub usable_host_memory_bytes: Option<u64>,
    /// True when the node's RAM was given (`--host-memory-gib`); otherwise
    /// this machine's is used and a pool that does not fit is only a warning.
    #[serde(default)]
    pub host_memory_given: bool,
    /// A note when a separate speculative draft model runs: it gets no HiSparse pool.
    pub draft_model: Option<String>,
}

/// GPU memory of one replica's GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuPlan {
    pub tensor_parallel_size: u64,
    pub data_parallel_size: u64,
    /// KV cache room on each GPU (bytes); null when neither
    /// kv_cache_memory_bytes nor gpu_memory_gib is given.
    pub kv_bytes_per_gpu: Option<u64>,
    /// How kv_bytes_per_gpu was found.
    pub kv_source: String,
    pub gpu_memory_gib: Option<f64>,
    pub gpu_memory_utilization: f64,
    pub weights_bytes_per_gpu: Option<u64>,
    /// "given (--weights-gib)", or the estimate's rule.
    pub weights_source: Option<String>,
    pub weights_estimated: bool,
    pub max_num_seqs: u64,
    pub max_num_seqs_source: String,
    /// GPU blocks per GPU without and with HiSparse.
    pub baseline_blocks: Option<u64>,
    pub hisparse_blocks: Option<u64>,
    /// The GPU named with `--gpu`, whose memory is `gpu_memory_gib` unless that was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<GpuSpec>,
}

/// Capacity at one context length, per DP replica.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanPoint {
    pub context_length: u64,
    /// MLA latent KV of one request: context_length x mla_bytes_per_token (host, HiSparse).
    pub host_kv_bytes_per_request: u64,
    /// Indexer keys of one request: context_length x indexer_bytes_per_token (GPU).
    pub indexer_bytes_per_request: u64,
    /// Without HiSparse: ceil(context / block_size) x baseline_block_bytes.
    pub baseline_gpu_bytes_per_request: u64,
    /// With HiSparse: ceil(context / block_size) indexer blocks + hot_groups x
    /// (ceil(device_buffer_size / block_size) hot + 2 retained tail) blocks.
    pub hisparse_gpu_blocks_per_request: u64,
    pub hisparse_gpu_bytes_per_request: u64,
    /// ceil(context / block_size).
    pub host_blocks_per_request: u64,
    pub baseline_requests: Option<u64>,
    pub baseline_limit: Option<Limit>,
    /// floor(hisparse_blocks / hisparse_gpu_blocks_per_request).
    pub gpu_limit: Option<u64>,
    /// floor(host_blocks / host_blocks_per_request).
    pub host_limit: u64,
    /// max(baseline, min(max_num_seqs, gpu_limit, host_limit)).
    pub hisparse_requests: Option<u64>,
    pub hisparse_limit: Option<Limit>,
    /// Requests the host-pool figure below is sized for.
    pub target_requests: Option<u64>,
    /// The smallest host_pool_gib holding target_requests requests (and
    /// starting), capped by what the node's RAM pins when it is given
    /// (`--host-memory-gib`): a suggestion the check passes. None when even
    /// the start-up minimum does not fit the node.
    pub min_host_pool_gib: Option<f64>,
    /// Requests of this context min_host_pool_gib holds: target_requests, or
    /// fewer when the node's RAM caps the pool (the host then binds).
    #[serde(default)]
    pub min_host_pool_requests: Option<u64>,
    /// SGLang only (omitted for vLLM): the smallest `host_to_device_ratio`
    /// whose host pool (sized from the device slots, pool_host/base.py:221-229)
    /// holds `min_host_pool_requests` requests of this context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_to_device_ratio: Option<u64>,
}

/// The capacity plan of one valid HiSparse configuration.
///
/// Read back from JSON by its engine, as [`crate::Report`] is: `engine`
/// first, then its diagnostics' stages with that engine's table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct Plan {
    pub schema_version: u32,
    /// The engine planned for: `vllm` or `sglang` (older plans: `vllm`).
    #[serde(default = "default_engine")]
    pub engine: String,
    /// That engine's release.
    #[serde(default)]
    pub engine_version: String,
    /// The vLLM release (vLLM plans only; empty and omitted for SGLang).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vllm_version: String,
    /// False when the pinned host memory does not fit (see errors).
    pub valid: bool,
    pub model: Option<ModelSummary>,
    pub context_length: u64,
    pub max_model_len: u64,
    pub sizes: Sizes,
    pub host: HostPlan,
    pub gpu: GpuPlan,
    /// The plan at context_length.
    pub at_context: PlanPoint,
    /// 8K, 16K, ... up to max_model_len (and context_length).
    pub sweep: Vec<PlanPoint>,
    pub errors: Vec<Diagnostic>,
    /// The check's warnings, then the planner's.
    pub warnings: Vec<Diagnostic>,
    /// vllm serve flags on the command line that were not read (CLI only; omitted when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_flags: Vec<String>,
    /// Set when the configuration has no HiSparse: the plan is for the
    /// HiSparseConnector this describes, added to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumed: Option<AssumedHiSparse>,
    /// SGLang only (omitted for vLLM): the figures SGLang sizes its pools from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sglang: Option<SglangSizing>,
    /// Planned from an engine's start-up log (`--engine-log`): what it
    /// measured and logged, beside what the plan computes (omitted otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_log: Option<crate::engine_log::EngineLogReport>,
    /// What each group of the plan's figures is: exact, measured, estimated
    /// or unknown (issue 21 item 3).
    #[serde(default)]
    pub figures: Figures,
    /// Why the GPU concurrency at `context_length` is what it is: the blocks
    /// (SGLang: device slots) of one request that grow with its length, and
    /// those it holds whatever its length (issue 21 item 4, vllm#51041).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
}

/// One request's GPU footprint split into what grows with its context and
/// what is fixed per request (issue 21 item 4): the GPU limit is
/// `floor(gpu_units / (per_token_units + fixed_units))`, so the fixed part
/// decides how the concurrency moves with the context (the
/// "the pool shrinks at shorter max_model_len" surprise of vllm#51041).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Concurrency {
    /// What is counted: `blocks` (vLLM's GPU blocks) or `slots` (SGLang's device KV slots).
    pub unit: String,
    /// The GPU's units (`gpu.hisparse_blocks`, SGLang's `device_slots`); null when unknown.
    pub gpu_units: Option<u64>,
    /// Units of one request that grow with its context (vLLM: its indexer
    /// blocks, `ceil(context / block_size)`; SGLang in P/D decode: none).
    pub per_token_units: u64,
    /// Units one request holds whatever its length (vLLM: hot-buffer and
    /// tail blocks of every hot group; SGLang: `D + 64 + scratch` slots).
    pub fixed_units: u64,
    /// How the fixed units are made, with the engine's file:line.
    pub fixed_rule: String,
    /// The fixed units' share of one request at `context_length` (0 to 1).
    pub fixed_share: f64,
    /// The explanation the text prints.
    pub why: String,
}

/// What a plan figure is (issue 21 item 3), from the most to the least sure:
/// a figure computed from several inputs is the least sure of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FigureKind {
    /// The engine's own arithmetic on inputs the configuration fixes (the
    /// checkpoint's config.json, the flags): tests/vllm and tests/sglang run
    /// the engines' sizing code against it.
    Exact,
    /// From what the engine measured (`--engine-log`) or the user gave for it
    /// (`--kv-cache-memory-bytes`, `--weights-gib`), and what follows from it
    /// by the engine's arithmetic.
    Measured,
    /// From our model of what the engine profiles at start-up (the weights
    /// estimated from config.json; the KV room as GPU memory x fraction -
    /// weights, an upper bound), and what follows from it.
    Estimated,
    /// Not known: no GPU memory was given (`--gpu`, `--gpu-memory-gib`,
    /// `--kv-cache-memory-bytes`, `--engine-log`), so these figures are `?` / null.
    #[default]
    Unknown,
}

impl FigureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FigureKind::Exact => "exact",
            FigureKind::Measured => "measured",
            FigureKind::Estimated => "estimated",
            FigureKind::Unknown => "unknown",
        }
    }

    /// What the word means, for the text output's legend.
    pub fn meaning(self) -> &'static str {
        match self {
            FigureKind::Exact => "the engine's arithmetic on known inputs",
            FigureKind::Measured => "from the engine's start-up log or a measured flag",
            FigureKind::Estimated => "our model of what the engine profiles",
            FigureKind::Unknown => "no GPU memory given",
        }
    }
}

/// Each group of a plan's figures with its [`FigureKind`] (`figures` in the
/// JSON, `Plan.figures` in Python).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// `sizes`: bytes per token, rows, blocks (always exact).
    pub sizes: FigureKind,
    /// `host`: the host pool's blocks and bytes, pinned per node (vLLM:
    /// exact, from `host_pool_gib`; SGLang: sized from the device slots, so
    /// as sure as the KV room).
    pub host_pool: FigureKind,
    /// `gpu.weights_bytes_per_gpu`: measured (given or logged) or estimated;
    /// null when the plan did not need them (a measured KV room).
    pub weights: Option<FigureKind>,
    /// `gpu.kv_bytes_per_gpu`, the KV room of one GPU.
    pub kv_room: FigureKind,
    /// `gpu.baseline_blocks` / `hisparse_blocks` (SGLang: the device slots)
    /// and the GPU limit: as sure as the KV room.
    pub gpu_blocks: FigureKind,
    /// The host limit of each point (requests the host pool holds).
    pub host_limit: FigureKind,
    /// The request counts with and without HiSparse (the least sure of the
    /// GPU blocks and the host limit).
    pub requests: FigureKind,
}

impl Figures {
    /// The kinds of a plan whose KV room is `kv_room` (from its weights, when
    /// the room was computed from them), the host pool `host_pool`.
    pub fn new(kv_room: FigureKind, weights: Option<FigureKind>, host_pool: FigureKind) -> Figures {
        Figures {
            sizes: FigureKind::Exact,
            host_pool,
            weights,
            kv_room,
            gpu_blocks: kv_room,
            host_limit: host_pool,
            requests: kv_room.max(host_pool),
        }
    }

    /// `(figure, kind)` in the plan's order, for the text legend and tests.
    pub fn entries(&self) -> Vec<(&'static str, FigureKind)> {
        let mut out = vec![("sizes", self.sizes), ("host pool", self.host_pool)];
        if let Some(w) = self.weights {
            out.push(("weights", w));
        }
        out.extend([
            ("KV room", self.kv_room),
            ("GPU blocks", self.gpu_blocks),
            ("host limit", self.host_limit),
            ("requests", self.requests),
        ]);
        out
    }
}

/// How SGLang 0.5.23 sizes one GPU's pools for a HiSparse launch (per GPU /
/// rank; every figure a count or bytes, rules with the wheel's file:line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SglangSizing {
    /// `hisparse_config.host_to_device_ratio` (R).
    pub host_to_device_ratio: u64,
    /// Bytes of one device KV slot: `L x kv_row + L x index_row x R`.
    pub device_cell_bytes: u64,
    /// Device KV slots `N_dev = (available // cell) // page x page`.
    pub device_slots: u64,
    /// Host pool tokens `(int(N_dev x R) // page + 1) x page`.
    pub host_tokens: u64,
    /// Device slots one request holds while it decodes: `D + 64 + scratch`.
    pub request_device_slots: u64,
    /// The speculative scratch per request (0 without speculation).
    pub speculative_scratch_slots: u64,
    /// How `mem_fraction_static` was found (given, or SGLang's heuristic with its terms).
    pub mem_fraction_static_rule: String,
    /// `max_running_requests` per attention-DP worker as SGLang resolves it.
    pub max_running_requests: u64,
    /// How it was found.
    pub max_running_requests_rule: String,
    /// Ranks of the launch world per node, which split the host RAM budget.
    pub ranks_per_host: u64,
    /// `(min(available RAM, cgroup) - 10 GiB) / ranks_per_host`; null when the RAM is not given.
    pub host_budget_per_rank_bytes: Option<u64>,
    /// Device slots without HiSparse (cell `L x kv_row + I x index_row`, I the
    /// layers that run an indexer: GLM-5.2's IndexShare layers hold no index-K rows).
    pub baseline_device_slots: u64,
    /// Whether a whole prompt sits in device slots while it is prefilled: true
    /// outside P/D decode (managers/hisparse_coordinator.py:838-876); false on a
    /// P/D decode instance, whose prompt KV arrives into the host pool
    /// (disaggregation/decode.py:2321-2330).
    pub prompt_on_device: bool,
}

/// The HiSparse settings a plan assumed for a configuration without HiSparse.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssumedHiSparse {
    /// The `--kv-transfer-config` with the HiSparseConnector added.
    pub kv_transfer_config: Value,
    /// Its host_pool_gib, and why that size.
    pub host_pool_gib: f64,
    pub host_pool_rule: String,
    /// Everything else is vLLM 0.33's default (hisparse_config inferred from the connector).
    pub rule: String,
}

fn default_engine() -> String {
    crate::report::ENGINE_VLLM.to_owned()
}

impl Plan {
    /// Indented JSON (`hisparse-check --plan --json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("Plan always serializes")
    }
}

/// A GiB figure for a message: `1e300`, not its 301 digits.
fn shown(x: f64) -> String {
    if x.is_finite() && x.abs() >= 1e15 {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}

pub(crate) fn check_options(o: &PlanOptions) -> Result<(), PlanError> {
    let positive = |name: &str, v: Option<f64>| {
        match v {
        Some(x) if !(x.is_finite() && x > 0.0 && x * GIB < u64::MAX as f64) => {
            Err(PlanError::Option(format!(
                "{name} must be a positive number of GiB below 2^34 GiB (16 EiB, what 64 bits of bytes hold), got {}",
                shown(x)
            )))
        }
        _ => Ok(()),
    }
    };
    positive("--host-memory-gib", o.host_memory_gib)?;
    if let Some(source) = &o.host_memory_source {
        if o.host_memory_gib.is_none() {
            return Err(PlanError::Option(
                "host_memory_source describes host_memory_gib: give both".into(),
            ));
        }
        if source.len() > crate::limits::MAX_HOST_MEMORY_SOURCE_BYTES {
            return Err(PlanError::Option(format!(
                "host_memory_source is {} bytes long; at most {}",
                source.len(),
                crate::limits::MAX_HOST_MEMORY_SOURCE_BYTES
            )));
        }
    }
    positive("--gpu-memory-gib", o.gpu_memory_gib)?;
    positive("available_kv_cache_gib", o.available_kv_cache_gib)?;
    if o.measured_in
        .as_ref()
        .is_some_and(|m| m.len() > crate::limits::MAX_HOST_MEMORY_SOURCE_BYTES)
    {
        return Err(PlanError::Option(format!(
            "measured_in is longer than {} bytes",
            crate::limits::MAX_HOST_MEMORY_SOURCE_BYTES
        )));
    }
    match o.weights_gib {
        Some(x) if !(x.is_finite() && x >= 0.0 && x * GIB < u64::MAX as f64) => {
            Err(PlanError::Option(format!(
                "--weights-gib must be a number of GiB >= 0 and below 2^34 GiB (16 EiB), got {}",
                shown(x)
            )))
        }
        _ => Ok(()),
    }?;
    if let Some(n) = o.gpus_per_node {
        if !(1..=crate::limits::MAX_GPUS_PER_NODE).contains(&n) {
            return Err(PlanError::Option(format!(
                "--gpus-per-node must be 1 ..= {}, got {n}",
                crate::limits::MAX_GPUS_PER_NODE
            )));
        }
    }
    if o.context_length == Some(0) {
        return Err(PlanError::Option(
            "--context-length must be at least 1 token".into(),
        ));
    }
    Ok(())
}

/// `MemAvailable` of `/proc/meminfo` in bytes (what vLLM's psutil check reads).
pub fn host_memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

pub(crate) fn gib_bytes(gib: f64) -> u64 {
    (gib * GIB) as u64
}

/// Bytes as GiB, or MiB below 1 GiB, for messages and the plan's text.
pub fn gib_text(bytes: u64) -> String {
    let g = bytes as f64 / GIB;
    if g < 1.0 {
        format!("{:.1} MiB", g * 1024.0)
    } else {
        format!("{g:.2} GiB")
    }
}

/// Physical bytes of one pool: blocks x stride, rounded up to the OS page
/// (vLLM 0.33 `allocate_pinned_host_pool` and the shared mmap region).
pub(crate) fn pool_bytes(host_pool_gib: f64, stride: u64) -> u64 {
    sizes::round_up(
        sizes::pool_blocks(host_pool_gib, stride).saturating_mul(stride),
        OS_PAGE_BYTES,
    )
}

/// The largest host_pool_gib (hundredths) whose pools fit in `usable` bytes.
pub(crate) fn largest_fitting_pool_gib(usable: u64, pools: u64, stride: u64) -> Option<f64> {
    let per_pool = usable / pools.max(1);
    let mut gib = (per_pool as f64 / GIB * 100.0).floor() / 100.0;
    for _ in 0..8 {
        if gib <= 0.0 {
            return None;
        }
        if pool_bytes(gib, stride).saturating_mul(pools) <= usable {
            return Some(gib);
        }
        gib = ((gib * 100.0).round() - 1.0) / 100.0;
    }
    None
}

impl Serialize for Plan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Plan::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for Plan {
    /// By its engine: `engine` first, then the typed read, then the
    /// diagnostics' stages by that engine's table.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::diagnostic::read_by_engine(d, Plan::deserialize, |p| {
            [&mut p.errors, &mut p.warnings]
        })
    }
}
