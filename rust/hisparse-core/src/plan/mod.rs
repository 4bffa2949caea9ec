//! The capacity planner: how many concurrent requests of context L one DP
//! replica serves with and without HiSparse, which limit binds, and how much
//! host memory the pools pin per node.
//!
//! Data flow: [`ServeArgs`] -> [`crate::check`] (resolution and the machine checks: a valid configuration
//! with HiSparse on, and the model facts) -> [`plan`] -> [`Plan`]. Every size
//! comes from [`crate::sizes`]; the formulas are HISPARSE.md §5's (vLLM's public
//! HiSparse concurrency calculator), with the layout facts of vLLM 0.33.0's
//! `vllm/v1/hisparse/layout.py` (hot groups, GPU pool block bytes).
//!
//! Per GPU vs per replica: MLA latent KV and indexer keys have one KV head, so
//! vLLM replicates them on every TP rank; each GPU of a replica holds the
//! replica's whole KV, so the KV room of one GPU decides the replica's
//! concurrency. Weights are split across TP ranks (experts across TP x DP with
//! expert parallelism). Request counts are per DP replica.

pub(crate) mod weights;

pub use weights::{estimate as estimate_weights, WeightEstimate};

use crate::check::check_with_model;
use crate::diagnostic::{apply_fix, Code, Diagnostic, FixOp};
use crate::engines::vllm_0_33::args::{LoadError, ServeArgs};
use crate::engines::vllm_0_33::validate::add_hisparse_connector;
use crate::gpu::GpuSpec;
use crate::model::ModelInfo;
use crate::path::FieldPath;
use crate::report::{ModelSummary, Provenance, Report, ResolvedHiSparse};
use crate::sizes::{self, GpuLayout, ACTIVE_TAIL_PAGES, GIB, OS_PAGE_BYTES};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

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
}

impl PlanOptions {
    /// These options with `gpu_memory_gib` filled from the GPU when not given.
    pub(crate) fn with_gpu(&self, gpu: Option<&GpuSpec>) -> PlanOptions {
        let mut o = self.clone();
        if o.gpu_memory_gib.is_none() {
            o.gpu_memory_gib = gpu.map(|g| g.memory_gib);
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
}

/// The capacity plan of one valid HiSparse configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// Plan a serve configuration. Returns the check report, and the plan when the
/// configuration is valid: of its HiSparse settings, or, when it has none, of
/// the HiSparseConnector it would take (`Plan::assumed` says which).
pub fn plan(args: &ServeArgs, options: &PlanOptions) -> Result<(Report, Option<Plan>), PlanError> {
    let (report, model, gpu) = check_with_model(args, options, false)?;
    let options = options.with_gpu(gpu.as_ref());
    match (report.vllm_hisparse().cloned(), model) {
        (Some(h), Some(model)) => {
            let plan = plan_resolved(args, &options, &report, &h, &model, gpu.as_ref())?;
            Ok((report, Some(plan)))
        }
        _ if report.valid && !report.hisparse_enabled => {
            let plan = plan_assumed(args, &options, gpu.as_ref())?;
            Ok((report, Some(plan)))
        }
        _ => Ok((report, None)),
    }
}

/// The plan of a resolved HiSparse configuration (`options` with the GPU filled in).
pub(crate) fn plan_resolved(
    args: &ServeArgs,
    options: &PlanOptions,
    report: &Report,
    h: &ResolvedHiSparse,
    model: &ModelInfo,
    gpu: Option<&GpuSpec>,
) -> Result<Plan, PlanError> {
    let mut plan = Planner::new(args, options, report, h, model)?.run();
    plan.gpu.spec = gpu.cloned();
    Ok(plan)
}

/// What HiSparse would give a configuration without it: add a
/// HiSparseConnector (kv_both, vLLM's defaults otherwise) whose pool is the
/// start-up minimum, or the pool that lets the GPUs bind when the GPU is
/// known (the check's fix for a pool too small), and plan that.
fn plan_assumed(
    args: &ServeArgs,
    options: &PlanOptions,
    gpu: Option<&GpuSpec>,
) -> Result<Plan, PlanError> {
    let nothing =
        |why: String| PlanError::Option(format!("--plan: HiSparse is not configured, and {why}"));
    let mut doc = args.normalized().0.into_owned().to_json();
    let kv = doc.get("kv_transfer_config");
    // A pool of one byte: the check's fix then gives the size to plan with.
    let add = add_hisparse_connector(kv, 1.0 / GIB).ok_or_else(|| {
        nothing("kv_transfer_config is not an object a connector can join".to_owned())
    })?;
    apply_fix(&mut doc, &add).map_err(nothing)?;
    let first = ServeArgs::from_json(doc).map_err(|e| nothing(e.to_string()))?;
    let (r, _, _) = check_with_model(&first, options, false)?;
    // A prefill (kv_producer) instance never decodes: a pool there is pinned
    // and unused, so there is nothing to plan (the check warns the same).
    if r.warnings.iter().any(|w| w.code == Code::KvProducerRole) {
        return Err(nothing(
            "this is a prefill instance (its kv_transfer_config is kv_producer): HiSparse serves decoding, and a pool here would be allocated but never used; plan the decode instance's configuration (kv_consumer) instead".to_owned(),
        ));
    }
    let too_small =
        |d: &&Diagnostic| matches!(d.code, Code::HostPoolTooSmall | Code::HostPoolLimitsContext);
    let others: Vec<String> = r
        .errors
        .iter()
        .filter(|e| !too_small(e))
        .map(|e| format!("{}: {}", e.code.as_str(), e.message))
        .collect();
    if !others.is_empty() {
        return Err(nothing(format!(
            "it cannot be: with a HiSparseConnector added, {}",
            others.join("; ")
        )));
    }
    let pool_fix = r
        .errors
        .iter()
        .chain(&r.warnings)
        .find(|d| too_small(d) && !d.fix.is_empty())
        .ok_or_else(|| nothing("the host pool it needs cannot be sized".to_owned()))?;
    let mut doc = first.to_json();
    apply_fix(&mut doc, &pool_fix.fix).map_err(nothing)?;
    let assumed = ServeArgs::from_json(doc).map_err(|e| nothing(e.to_string()))?;
    let (report, model, _) = check_with_model(&assumed, options, false)?;
    let (Some(h), Some(model)) = (report.vllm_hisparse().cloned(), model) else {
        return Err(nothing(
            "the assumed HiSparseConnector does not resolve".to_owned(),
        ));
    };
    let mut plan = plan_resolved(&assumed, options, &report, &h, &model, gpu)?;
    let pool = h.host_pool_gib.value;
    let host_pool_rule = match plan.at_context.target_requests {
        Some(n) if pool > plan.host.min_host_pool_gib => format!(
            "the pool that lets the GPUs bind: it holds {n} requests of {} tokens per DP replica",
            plan.context_length
        ),
        _ => format!(
            "the start-up minimum: it holds one {}-token request; give the GPU (--gpu NAME or --gpu-memory-gib) to size it for what the GPUs hold",
            plan.max_model_len
        ),
    };
    plan.assumed = Some(AssumedHiSparse {
        kv_transfer_config: assumed.kv_transfer_config.clone().unwrap_or(Value::Null),
        host_pool_gib: pool,
        host_pool_rule,
        rule: "a HiSparseConnector (kv_role kv_both) added to --kv-transfer-config; hisparse_config inferred from it with vLLM 0.33's defaults".to_owned(),
    });
    plan.warnings.retain(|w| !too_small(&w));
    Ok(plan)
}

pub(crate) fn check_options(o: &PlanOptions) -> Result<(), PlanError> {
    let positive = |name: &str, v: Option<f64>| match v {
        Some(x) if !(x.is_finite() && x > 0.0 && x * GIB < u64::MAX as f64) => Err(
            PlanError::Option(format!("{name} must be a positive number of GiB, got {x}")),
        ),
        _ => Ok(()),
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
    match o.weights_gib {
        Some(x) if !(x.is_finite() && x >= 0.0 && x * GIB < u64::MAX as f64) => {
            Err(PlanError::Option(format!(
                "--weights-gib must be a number of GiB >= 0, got {x}"
            )))
        }
        _ => Ok(()),
    }?;
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

/// Everything the per-context figures share.
struct Planner<'a> {
    h: &'a ResolvedHiSparse,
    model: Option<ModelSummary>,
    context_length: u64,
    target_requests: Option<u64>,
    sizes: Sizes,
    host: HostPlan,
    gpu: GpuPlan,
    host_pool_path: Option<FieldPath>,
    /// The largest host_pool_gib the node's RAM pins, when it is given
    /// (Some(None): not even the start-up minimum fits).
    pool_cap: Option<Option<f64>>,
    warnings: Vec<Diagnostic>,
}

fn gib_bytes(gib: f64) -> u64 {
    (gib * GIB) as u64
}

impl<'a> Planner<'a> {
    fn new(
        args: &'a ServeArgs,
        options: &PlanOptions,
        report: &Report,
        h: &'a ResolvedHiSparse,
        model: &ModelInfo,
    ) -> Result<Self, PlanError> {
        let max_model_len = h.max_model_len.value;
        let context_length = options.context_length.unwrap_or(max_model_len);
        if context_length > max_model_len {
            return Err(PlanError::Option(format!(
                "--context-length {context_length} is longer than max_model_len {max_model_len}; raise --max-model-len or plan a shorter context"
            )));
        }
        let mut warnings = report.warnings.clone();
        let Some(row) = h.row_bytes.as_ref().map(|r| r.value) else {
            return Err(PlanError::Option(format!(
                "the host row size of kv_cache_dtype {} is not known, so there is nothing to plan",
                h.kv_cache_dtype.value
            )));
        };
        let layers = h.sparse_mla_layers.value;
        let target_layers = model.sparse_mla_layers.as_ref().map_or(layers, |l| l.value);
        let draft_layers = layers.saturating_sub(target_layers);
        // Hot-unit runs of the target layers, then the draft (MTP) layers, which
        // always run a full indexer (vLLM 0.33 deepseek_v2).
        let mut units = match &model.indexer_leaders {
            Some(l) if l.value.len() as u64 == u64::from(target_layers) => {
                sizes::hot_unit_runs(&l.value)
            }
            _ => vec![(1, u64::from(target_layers))],
        };
        let target_indexer_layers: u64 = units.iter().map(|(_, n)| n).sum();
        units.push((1, u64::from(draft_layers)));
        let indexer_layers =
            u32::try_from(target_indexer_layers.saturating_add(u64::from(draft_layers)))
                .unwrap_or(u32::MAX);
        let index_head_dim = model.index_head_dim.unwrap_or_else(|| {
            warnings.push(Diagnostic::warning(
                Code::PlanAssumption,
                FieldPath::root("model"),
                format!("{} gives no index_head_dim; the indexer key cache is sized for 128 (DeepSeek-V3.2, GLM-5)", model.name()),
            ));
            128
        });
        let indexer_row = sizes::indexer_row_bytes(index_head_dim);
        let block_size = h.block_size.value;
        let layout = GpuLayout::new(&units, block_size, row, indexer_row);
        let mla_bytes_per_token = u64::from(row).saturating_mul(u64::from(layers));
        let indexer_bytes_per_token =
            u64::from(indexer_row).saturating_mul(u64::from(indexer_layers));
        let sizes = Sizes {
            kv_cache_dtype: h.kv_cache_dtype.value.clone(),
            mla_row_bytes: row,
            indexer_row_bytes: indexer_row,
            sparse_mla_layers: layers,
            indexer_layers,
            draft_layers,
            mla_bytes_per_token,
            indexer_bytes_per_token,
            block_size,
            device_buffer_size: h.device_buffer_size.value,
            hot_buffer_bytes: u64::from(h.device_buffer_size.value)
                .saturating_mul(mla_bytes_per_token),
            hot_groups: layout.hot_groups,
            baseline_block_bytes: u64::from(block_size)
                .saturating_mul(mla_bytes_per_token.saturating_add(indexer_bytes_per_token)),
            hisparse_block_bytes: layout.block_bytes,
        };

        let (tp, dp) = tp_dp(args);
        let host = host_plan(args, options, h, &mut warnings);
        let gpu = gpu_plan(
            args,
            options,
            model,
            &sizes,
            tp,
            dp,
            target_indexer_layers,
            &mut warnings,
        );
        let host_pool_path = match &h.host_pool_gib.provenance {
            Provenance::Explicit { path } => FieldPath::parse(path).ok(),
            _ => None,
        };
        // A pool the planner suggests must pass the check: with the node's
        // RAM given, no larger than what its pools can pin.
        let pool_cap = match (host.host_memory_given, host.usable_host_memory_bytes) {
            (true, Some(usable)) => Some(
                largest_fitting_pool_gib(usable, host.pools_per_node, host.host_block_stride)
                    .filter(|c| *c >= host.min_host_pool_gib),
            ),
            _ => None,
        };
        Ok(Planner {
            h,
            model: report.model.clone(),
            context_length,
            target_requests: options.target_requests,
            sizes,
            host,
            gpu,
            host_pool_path,
            pool_cap,
            warnings,
        })
    }

    /// Capacity at `context` tokens.
    fn point(&self, context: u64) -> PlanPoint {
        let s = &self.sizes;
        let bs = u64::from(s.block_size);
        let per_request_blocks = sizes::blocks_for(context, bs);
        let hot_blocks = sizes::blocks_for(u64::from(s.device_buffer_size), bs);
        let hisparse_blocks = per_request_blocks.saturating_add(
            s.hot_groups
                .saturating_mul(hot_blocks.saturating_add(ACTIVE_TAIL_PAGES)),
        );
        let seqs = self.gpu.max_num_seqs;
        let fit = |pool: u64, per: u64| pool.checked_div(per).unwrap_or(u64::MAX);
        let capped = |n: u64, limit: Limit| {
            if seqs < n {
                (seqs, Limit::MaxNumSeqs)
            } else {
                (n, limit)
            }
        };
        let baseline = self
            .gpu
            .baseline_blocks
            .map(|b| capped(fit(b, per_request_blocks), Limit::Gpu));
        let gpu_limit = self.gpu.hisparse_blocks.map(|b| fit(b, hisparse_blocks));
        let host_limit = fit(self.host.host_blocks, per_request_blocks);
        let hisparse = match (gpu_limit, baseline) {
            (Some(g), Some((base, _))) => {
                let (n, limit) = if host_limit < g {
                    capped(host_limit, Limit::Host)
                } else {
                    capped(g, Limit::Gpu)
                };
                Some(if base > n {
                    (base, Limit::Baseline)
                } else {
                    (n, limit)
                })
            }
            _ => None,
        };
        let target = self
            .target_requests
            .or_else(|| gpu_limit.map(|g| g.min(seqs)));
        let stride = self.host.host_block_stride;
        let min_host_pool_gib = target.and_then(|n| {
            let blocks = n
                .saturating_mul(per_request_blocks)
                .max(self.host.min_host_blocks);
            let gib = sizes::min_pool_gib(blocks, stride);
            match self.pool_cap {
                Some(cap) => cap.map(|c| gib.min(c)),
                None => Some(gib),
            }
        });
        let min_host_pool_requests = target
            .zip(min_host_pool_gib)
            .map(|(n, gib)| n.min(fit(sizes::pool_blocks(gib, stride), per_request_blocks)));
        PlanPoint {
            context_length: context,
            host_kv_bytes_per_request: context.saturating_mul(s.mla_bytes_per_token),
            indexer_bytes_per_request: context.saturating_mul(s.indexer_bytes_per_token),
            baseline_gpu_bytes_per_request: per_request_blocks
                .saturating_mul(s.baseline_block_bytes),
            hisparse_gpu_blocks_per_request: hisparse_blocks,
            hisparse_gpu_bytes_per_request: hisparse_blocks.saturating_mul(s.hisparse_block_bytes),
            host_blocks_per_request: per_request_blocks,
            baseline_requests: baseline.map(|b| b.0),
            baseline_limit: baseline.map(|b| b.1),
            gpu_limit,
            host_limit,
            hisparse_requests: hisparse.map(|x| x.0),
            hisparse_limit: hisparse.map(|x| x.1),
            target_requests: target,
            min_host_pool_gib,
            min_host_pool_requests,
        }
    }

    fn run(mut self) -> Plan {
        let max_model_len = self.h.max_model_len.value;
        let mut contexts: Vec<u64> = std::iter::successors(Some(SWEEP_START), |c| c.checked_mul(2))
            .take_while(|c| *c < max_model_len)
            .chain([max_model_len, self.context_length])
            .collect();
        contexts.sort_unstable();
        contexts.dedup();
        let sweep: Vec<PlanPoint> = contexts.iter().map(|c| self.point(*c)).collect();
        let at_context = self.point(self.context_length);
        let mut errors = Vec::new();
        let path = self
            .host_pool_path
            .clone()
            .unwrap_or_else(|| FieldPath::root("host_pool_gib"));
        if let Some(e) = host_memory_error(
            &self.host,
            self.h,
            &path,
            self.gpu.kv_bytes_per_gpu.is_some(),
        ) {
            if self.host.host_memory_given {
                errors.push(e);
                self.warnings.extend(pools_fit_alone(&self.host, &path));
            } else {
                // This machine's RAM is not the serving node's: say so, do not fail on it.
                self.warnings.push(host_memory_not_given(
                    &self.host,
                    format!("{}; that is this machine's RAM, not necessarily the serving node's, so the plan does not fail on it", e.message),
                ));
            }
        }
        errors.extend(self.serves_no_requests(&at_context));
        Plan {
            schema_version: PLAN_SCHEMA_VERSION,
            engine: crate::report::ENGINE_VLLM.to_owned(),
            engine_version: crate::VLLM_VERSION.to_owned(),
            vllm_version: crate::VLLM_VERSION.to_owned(),
            valid: errors.is_empty(),
            model: self.model.take(),
            context_length: self.context_length,
            max_model_len,
            sizes: self.sizes,
            host: self.host,
            gpu: self.gpu,
            at_context,
            sweep,
            errors,
            warnings: self.warnings,
            ignored_flags: Vec::new(),
            assumed: None,
        }
    }

    /// A replica that serves no request at the planned context is not a plan
    /// that fits: the GPUs bind (the host pool always holds the one request
    /// start-up requires). The fix lowers max_model_len to the longest
    /// context one request fits in, when there is one.
    fn serves_no_requests(&self, at: &PlanPoint) -> Option<Diagnostic> {
        if at.hisparse_requests != Some(0) {
            return None;
        }
        let (s, g) = (&self.sizes, &self.gpu);
        let bs = u64::from(s.block_size);
        let kv = g.kv_bytes_per_gpu.unwrap_or(0);
        // Blocks one request takes besides its context: the hot buffers and tail pages.
        let fixed = s.hot_groups.saturating_mul(
            sizes::blocks_for(u64::from(s.device_buffer_size), bs)
                .saturating_add(ACTIVE_TAIL_PAGES),
        );
        let longest = [
            g.hisparse_blocks.map(|b| b.saturating_sub(fixed)),
            g.baseline_blocks,
        ]
        .into_iter()
        .flatten()
        .max()
        .map(|blocks| blocks.saturating_mul(bs).min(self.h.max_model_len.value))
        .filter(|t| *t >= bs);
        let path = FieldPath::root("max_model_len");
        let mut d = Diagnostic::error(
            Code::PlanServesNoRequests,
            path.clone(),
            format!(
                "at {} tokens this DP replica serves no request: the GPUs bind (one request needs {} of GPU KV per GPU with HiSparse, {} without, and the KV room of each GPU is {:.2} GiB: {})",
                at.context_length,
                gib_text(at.hisparse_gpu_bytes_per_request),
                gib_text(at.baseline_gpu_bytes_per_request),
                kv as f64 / GIB,
                g.kv_source
            ),
        )
        .given(&json!(at.context_length));
        let more = "or use more tensor-parallel ranks or GPUs with more memory (if the weights estimate is too high, give --weights-gib or --kv-cache-memory-bytes from vLLM's start-up log)";
        match longest {
            Some(t) => {
                d = d
                    .allowed(format!("a context of at most {t} tokens on these GPUs"))
                    .hint(format!("lower max_model_len to {t}, the longest context one request fits in, {more}"))
                    .fix(vec![FixOp::Set { path, value: json!(t) }]);
            }
            None => {
                d = d
                    .allowed("at least one request's hot buffers in each GPU's KV room")
                    .hint(format!(
                        "the hot buffers alone do not fit: lower device_buffer_size, {more}"
                    ));
            }
        }
        Some(d)
    }
}

/// The warning that the pools were not checked against the serving node's
/// RAM (`--host-memory-gib` not given): the plan's, when they do not fit on
/// this machine, and the plain check's, whenever HiSparse pins a pool
/// ([`pinned_unchecked`]). One code, one hint.
pub(crate) fn host_memory_not_given(host: &HostPlan, message: String) -> Diagnostic {
    Diagnostic::warning(
        Code::HostMemoryNotGiven,
        FieldPath::root("host_memory_gib"),
        message,
    )
    .given(&json!(host.host_pool_gib))
    .hint("pass the serving node's RAM with --host-memory-gib (Python: host_memory_gib=) to check the pools against it (vLLM 0.33 checks them when the workers allocate them, after the weights have loaded)")
}

/// The plain check's [`host_memory_not_given`]: what the pools pin, unchecked.
pub(crate) fn pinned_unchecked(host: &HostPlan) -> Diagnostic {
    host_memory_not_given(
        host,
        format!(
            "host RAM was not checked: host_pool_gib {} pins {} on this node across {}, and without --host-memory-gib the check does not know the node's RAM",
            host.host_pool_gib,
            pinned_text(host),
            pools_text(host)
        ),
    )
}

/// What the node's pools pin; past 2^64 bytes (the bytes saturate) the GiB
/// as given, times the pools.
fn pinned_text(host: &HostPlan) -> String {
    let as_given = host.host_pool_gib * host.pools_per_node as f64;
    if as_given * GIB >= u64::MAX as f64 {
        format!("about {as_given:.0} GiB (past 2^64 bytes)")
    } else {
        gib_text(host.pinned_bytes_per_node)
    }
}

/// How many pools this node pins, and why (the pool mode).
fn pools_text(host: &HostPlan) -> String {
    match host.mode {
        PoolMode::Shared => format!(
            "{} pool{} (shared mode: one per DP replica)",
            host.pools_per_node,
            if host.pools_per_node == 1 { "" } else { "s" }
        ),
        PoolMode::Private if host.pools_per_node == 1 => {
            "1 pool (private mode: one per rank, 1 rank)".to_owned()
        }
        PoolMode::Private => format!(
            "{} pools (private mode: one per rank, {} ranks)",
            host.pools_per_node, host.pools_per_node
        ),
    }
}

/// The pinned pools must fit in 95 % of the node's host RAM (vLLM 0.33
/// `check_hisparse_host_memory`); the error's fix lowers host_pool_gib (at
/// `path`) to the largest size that fits, if that size still starts. None
/// when they fit or the RAM is unknown.
pub(crate) fn host_memory_error(
    host: &HostPlan,
    h: &ResolvedHiSparse,
    path: &FieldPath,
    gpu_memory_known: bool,
) -> Option<Diagnostic> {
    let usable = host.usable_host_memory_bytes?;
    if host.pinned_bytes_per_node <= usable {
        return None;
    }
    let gib = |b: u64| b as f64 / GIB;
    let pools = pools_text(host);
    let largest = largest_fitting_pool_gib(usable, host.pools_per_node, host.host_block_stride);
    let mut diag = Diagnostic::error(
        Code::HostMemoryExceeded,
        path.clone(),
        format!(
            "host_pool_gib {} pins {} on this node across {pools}, more than the {:.1} GiB usable (95 % of {:.1} GiB host RAM, {})",
            host.host_pool_gib,
            pinned_text(host),
            gib(usable),
            gib(host.host_memory_bytes.unwrap_or(0)),
            host.host_memory_source
        ),
    )
    .given(&json!(host.host_pool_gib));
    // A size suffix vLLM expanded (`128G` for 128 GiB) that fits as the number
    // meant: that is the fix, as the host_pool_implausible warning says.
    let meant = crate::pytext::suffixed_size(host.host_pool_gib)
        .map(|(n, suffix, _)| (n, suffix))
        .filter(|(n, _)| {
            let n = *n as f64;
            largest.is_some_and(|g| n <= g) && n >= host.min_host_pool_gib
        });
    if let Some((n, suffix)) = meant {
        return Some(
            diag.allowed(format!(
                "{} <= host_pool_gib <= {} (start-up minimum .. what fits in host RAM)",
                host.min_host_pool_gib,
                largest.unwrap_or(n as f64)
            ))
            .hint(format!(
                "set {path} to {n}: {n}{suffix} is a size suffix vLLM expands, and host_pool_gib is already in GiB"
            ))
            .fix(vec![FixOp::Set {
                path: path.clone(),
                value: json!(n),
            }]),
        );
    }
    match largest.filter(|g| *g >= host.min_host_pool_gib) {
        Some(fits) => {
            diag = diag
                .allowed(format!(
                    "{} <= host_pool_gib <= {fits} (start-up minimum .. what fits in host RAM)",
                    host.min_host_pool_gib
                ))
                .hint(format!("set {path} to {fits}, the most this node's RAM pins ({} per node: nearly all of the 95 % vLLM allows, with little left for the rest of the host); {}", gib_text(host.usable_host_memory_bytes.unwrap_or(0)),
                    // With the GPU known, the check has offered the GPU-binding
                    // pool already when it is the smaller one.
                    if gpu_memory_known {
                        "the pool that lets the GPUs bind is no smaller here (hisparse-check --plan shows the sweep)"
                    } else {
                        "a pool sized for your concurrency is usually far smaller: hisparse-check --plan with --gpu shows the pool that lets the GPUs bind"
                    }))
                .fix(vec![FixOp::Set {
                    path: path.clone(),
                    value: json!(fits),
                }]);
        }
        None => {
            diag = diag.allowed(format!(
                "at least {} GiB per pool to start, which {pools} cannot pin",
                host.min_host_pool_gib
            ));
            let others = "run fewer DP replicas per node, or use a node with more RAM";
            // The pool that fits starts with a shorter context: lower max_model_len
            // to the longest one its blocks hold (a whole number of blocks).
            let bs = u64::from(h.block_size.value);
            let shorter = largest.map(|g| {
                let blocks = sizes::pool_blocks(g, host.host_block_stride);
                (g, sizes::longest_context(blocks, bs))
            });
            match shorter.filter(|(_, t)| *t >= bs && *t < h.max_model_len.value) {
                Some((fits, t)) => {
                    diag = diag
                        .hint(format!("set {path} to {fits}, the largest pool this node's RAM pins, and lower max_model_len to {t} tokens, the longest context whose start-up minimum it holds (one request at a time); or {others}"))
                        .fix(vec![
                            FixOp::Set {
                                path: path.clone(),
                                value: json!(fits),
                            },
                            FixOp::Set {
                                path: FieldPath::root("max_model_len"),
                                value: json!(t),
                            },
                        ]);
                }
                None => {
                    diag = diag.hint(format!(
                        "no host_pool_gib and max_model_len fix this on this node (not even one {bs}-token block of context starts in what its RAM pins): {others}"
                    ));
                }
            }
        }
    }
    Some(diag)
}

/// The deviation beside a [`host_memory_error`] when every pool fits alone:
/// vLLM 0.33 checks each pool by itself against 95 % of the RAM available
/// when its rank allocates it (`check_hisparse_host_memory`,
/// `v1/hisparse/runtime.py:195`, called per pool at :256, :384 and :403),
/// so the pools that hisparse_rs refuses together may start there.
pub(crate) fn pools_fit_alone(host: &HostPlan, path: &FieldPath) -> Option<Diagnostic> {
    let usable = host.usable_host_memory_bytes?;
    if host.pools_per_node < 2 || host.pool_bytes > usable || host.pinned_bytes_per_node <= usable {
        return None;
    }
    Some(
        Diagnostic::warning(
            Code::HostPoolsFitAlone,
            path.clone(),
            format!(
                "each of the {} pools on this node ({}) fits alone in the {} usable, and vLLM 0.33 checks each pool alone as its rank allocates it, after the weights have loaded (check_hisparse_host_memory): it may start with these pools, with more than 95 % of the node's available RAM pinned, or fail at a later rank's allocation; hisparse_rs checks the node's pools together",
                host.pools_per_node,
                gib_text(host.pool_bytes),
                gib_text(usable)
            ),
        )
        .given(&json!(host.host_pool_gib)),
    )
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
fn pool_bytes(host_pool_gib: f64, stride: u64) -> u64 {
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

/// TP and DP sizes as given, at least 1.
fn tp_dp(args: &ServeArgs) -> (u64, u64) {
    let size = |n: Option<i64>| n.unwrap_or(1).max(1) as u64;
    (
        size(args.tensor_parallel_size),
        size(args.data_parallel_size),
    )
}

/// The host pools of a resolved configuration on this node: mode, blocks,
/// bytes, and what this node pins against its RAM.
pub(crate) fn host_plan(
    args: &ServeArgs,
    options: &PlanOptions,
    h: &ResolvedHiSparse,
    warnings: &mut Vec<Diagnostic>,
) -> HostPlan {
    let (tp, dp) = tp_dp(args);
    let platform = args.platform.as_deref().unwrap_or("cuda");
    let parallel = sizes::Parallel {
        tp: tp as i64,
        ..sizes::Parallel::of(args)
    };
    let shared = sizes::shared_host_pool(
        platform,
        parallel,
        args.distributed_executor_backend.as_deref(),
    );
    // This node pins the pools of the DP replicas it runs: --data-parallel-size-local
    // when given, else vLLM's even share over --nnodes (`Parallel::dp_local`,
    // vllm/engine/arg_utils.py:2442-2535), each replica spread over the nodes
    // it spans (`nnodes_within_dp`, vllm/config/parallel.py:811).
    let nnodes = args.nnodes.unwrap_or(1).max(1);
    let nodes = match args.data_parallel_size_local {
        Some(n) => format!(" (--data-parallel-size-local {n})"),
        None if nnodes > 1 => format!(" ({nnodes} nodes)"),
        None => String::new(),
    };
    let replicas = match parallel.dp_local() {
        1 => "1 DP replica".to_owned(),
        n => format!("{n} DP replicas"),
    };
    let (mode, mode_rule, pools_per_node) = if shared {
        (
            PoolMode::Shared,
            format!("the {tp} TP ranks of each DP replica share one pool (vLLM 0.33 use_shared_hisparse_host_pool: CUDA, TP > 1, no PP/DCP, mp executor, a replica within one node); {replicas} on this node{nodes}"),
            parallel.pools_on_this_node(1),
        )
    } else {
        let ranks = parallel.pools_on_this_node(tp);
        (
            PoolMode::Private,
            if tp > 1 {
                format!("each of the {tp} x {dp} ranks pins its own pool, a full copy: MLA KV is replicated across TP ranks (vLLM 0.33 shares a pool only under the mp executor, with a replica on one node); {ranks} of them on this node{nodes}")
            } else {
                format!("one pool per rank (TP 1); {replicas} on this node{nodes}")
            },
            ranks,
        )
    };
    let host_block_bytes = h.host_block_bytes.as_ref().map_or(0, |r| r.value);
    let stride = h
        .host_block_stride
        .as_ref()
        .map_or(host_block_bytes, |r| r.value);
    let host_pool_gib = h.host_pool_gib.value;
    let pool = pool_bytes(host_pool_gib, stride);
    let (host_memory_bytes, host_memory_source) = match options.host_memory_gib {
        Some(g) => (
            Some(gib_bytes(g)),
            options
                .host_memory_source
                .clone()
                .unwrap_or_else(|| "given with --host-memory-gib".to_owned()),
        ),
        None => match host_memory_available() {
            Some(b) => (
                Some(b),
                "this machine's MemAvailable (/proc/meminfo), what vLLM checks on the node it runs on; --host-memory-gib gives the serving node's".to_owned(),
            ),
            None => {
                warnings.push(
                    Diagnostic::warning(
                        Code::HostMemoryUnknown,
                        FieldPath::root("host_memory_gib"),
                        "this machine's host RAM could not be read (/proc/meminfo), so the pinned pools are not checked against it",
                    )
                    .hint("pass --host-memory-gib (Python: host_memory_gib=) with the serving node's RAM"),
                );
                (None, "unknown".to_owned())
            }
        },
    };
    let speculative_model = args
        .speculative_config
        .as_ref()
        .and_then(|s| s.get("method").or_else(|| s.get("model")))
        .and_then(Value::as_str)
        .filter(|m| !(*m == "mtp" || m.ends_with("_mtp")));
    HostPlan {
        mode,
        mode_rule,
        host_pool_gib,
        host_block_bytes,
        host_block_stride: stride,
        host_blocks: h.host_blocks.as_ref().map_or(0, |r| r.value),
        min_host_blocks: h.min_host_blocks.value,
        min_host_pool_gib: sizes::min_pool_gib(h.min_host_blocks.value, stride),
        pool_bytes: pool,
        pools_per_node,
        pinned_bytes_per_node: pool.saturating_mul(pools_per_node),
        host_memory_bytes,
        host_memory_source,
        usable_host_memory_bytes: host_memory_bytes.map(|b| (b as f64 * HOST_MEMORY_FRACTION) as u64),
        host_memory_given: options.host_memory_gib.is_some(),
        draft_model: speculative_model.map(|m| {
            format!("speculative draft {m} keeps its KV on the GPU: HiSparse pools hold the target model's (and its MTP layers') KV only")
        }),
    }
}

#[allow(clippy::too_many_arguments)]
fn gpu_plan(
    args: &ServeArgs,
    options: &PlanOptions,
    model: &ModelInfo,
    sizes: &Sizes,
    tp: u64,
    dp: u64,
    target_indexer_layers: u64,
    warnings: &mut Vec<Diagnostic>,
) -> GpuPlan {
    let utilization = args
        .gpu_memory_utilization
        .unwrap_or(DEFAULT_GPU_MEMORY_UTILIZATION);
    let mut weights_bytes_per_gpu = None;
    let mut weights_source = None;
    let mut weights_estimated = false;
    let (kv, kv_source) = if let Some(b) = args.kv_cache_memory_bytes {
        (
            Some(b.max(0) as u64),
            "kv_cache_memory_bytes (vLLM flag; vLLM then ignores gpu_memory_utilization)"
                .to_owned(),
        )
    } else if let Some(gpu) = options.gpu_memory_gib {
        let weights = match options.weights_gib {
            Some(w) => {
                weights_source = Some("given with --weights-gib".to_owned());
                Some(gib_bytes(w))
            }
            None => {
                match weights::estimate(model, target_indexer_layers, u64::from(sizes.draft_layers))
                {
                    Ok(w) => {
                        weights_estimated = true;
                        weights_source = Some(format!(
                        "estimated from config.json: {:.1} B parameters, {}; vLLM's start-up log is exact (pass --weights-gib)",
                        (w.dense_params as f64 + w.expert_params as f64) / 1e9,
                        w.rule
                    ));
                        Some(w.bytes_per_gpu(tp, dp, args.enable_expert_parallel == Some(true)))
                    }
                    Err(why) => {
                        warnings.push(
                        Diagnostic::warning(
                            Code::WeightsUnknown,
                            FieldPath::root("weights_gib"),
                            format!("the model weights cannot be estimated ({why}), so the GPU KV room is unknown"),
                        )
                        .hint("pass --weights-gib (per GPU, from vLLM's \"Model loading took X GiB\") or --kv-cache-memory-bytes"),
                    );
                        None
                    }
                }
            }
        };
        weights_bytes_per_gpu = weights;
        match weights {
            Some(w) => {
                let budget = (gpu * GIB * utilization) as u64;
                if w >= budget {
                    warnings.push(
                        Diagnostic::warning(
                            Code::NoGpuKvRoom,
                            FieldPath::root("gpu_memory_utilization"),
                            format!(
                                "the weights ({:.1} GiB per GPU) leave no KV room in {gpu} GiB x gpu_memory_utilization {utilization}",
                                w as f64 / GIB
                            ),
                        )
                        .hint("use more tensor-parallel ranks, a quantized checkpoint, or GPUs with more memory"),
                    );
                }
                (
                    Some(budget.saturating_sub(w)),
                    format!("gpu_memory_gib x gpu_memory_utilization - weights per GPU ({gpu} GiB x {utilization}); an upper bound: vLLM also reserves activation and CUDA-graph memory, its start-up log gives the exact KV size (--kv-cache-memory-bytes)"),
                )
            }
            None => (None, "unknown: the weights per GPU are unknown".to_owned()),
        }
    } else {
        (
            None,
            "unknown: pass --gpu-memory-gib or --kv-cache-memory-bytes".to_owned(),
        )
    };
    let (max_num_seqs, max_num_seqs_source) = match args.max_num_seqs {
        Some(n) => (n.max(1) as u64, "given with --max-num-seqs".to_owned()),
        None => match options.gpu_memory_gib {
            Some(g) if g >= 70.0 => (1024, "vLLM 0.33 default on GPUs with 70 GiB or more".to_owned()),
            Some(_) => (256, "vLLM 0.33 default on GPUs under 70 GiB".to_owned()),
            None => (256, "vLLM 0.33 default when the GPU is unknown (1024 on GPUs with 70 GiB or more: pass --gpu-memory-gib or --max-num-seqs)".to_owned()),
        },
    };
    let blocks = |per: u64| kv.and_then(|k| k.checked_div(per));
    GpuPlan {
        tensor_parallel_size: tp,
        data_parallel_size: dp,
        kv_bytes_per_gpu: kv,
        kv_source,
        gpu_memory_gib: options.gpu_memory_gib,
        gpu_memory_utilization: utilization,
        weights_bytes_per_gpu,
        weights_source,
        weights_estimated,
        max_num_seqs,
        max_num_seqs_source,
        baseline_blocks: blocks(sizes.baseline_block_bytes),
        hisparse_blocks: blocks(sizes.hisparse_block_bytes),
        spec: None,
    }
}
