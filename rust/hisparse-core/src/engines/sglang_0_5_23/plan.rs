//! Capacity planning for an SGLang 0.5.23 HiSparse launch (SGLANG.md §4,
//! verified in the wheel), in the planner's [`Plan`] shape with `engine: "sglang"`:
//!
//! - device KV slots per GPU: `N_dev = (available // cell) // 64 x 64`, with
//!   `available = gpu_memory x mem_fraction_static - weights` and the cell
//!   `L x kv_row + L x 132 x R` (every layer keeps its index buffer for the
//!   host's tokens, R = host_to_device_ratio), capped by `--max-total-tokens`;
//! - per request on the device `D + 64` slots (the newest token's extra page,
//!   hisparse_coordinator.py:644-646), plus the speculative scratch
//!   `min(W, max(1024, W - D))`, W = draft tokens x index_topk (:146, :187-193);
//! - host pool per rank `(int(N_dev x R) // 64 + 1) x 64` tokens x L x kv_row
//!   (pool_host/base.py:221-229), pinned; every rank holds its own copy, so a
//!   node pins `ranks_per_host` pools; budget per rank
//!   `(min(available RAM, cgroup) - 10 GiB) / ranks_per_host` (pool_host/base.py:84-107);
//! - requests served without HiSparse (every token on the device) and with it
//!   (the least of device slots, host pool, --max-running-requests).

use super::args::SglangArgs;
use super::hisparse_config::key_path;
use super::resolve::{resolve_for, Machine};
use super::settings::SglangHiSparse;
use super::stages::SglangStage;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::model::ModelInfo;
use crate::plan::{
    GpuPlan, HostPlan, Limit, Plan, PlanError, PlanOptions, PlanPoint, PoolMode, Sizes, SWEEP_START,
};
use crate::report::{Report, ENGINE_SGLANG};
use serde_json::json;

const GIB: f64 = (1u64 << 30) as f64;
/// pool_host/base.py:28 `HICACHE_HOST_MEMORY_RESERVE_BYTES`.
pub const HOST_MEMORY_RESERVE_BYTES: u64 = 10 << 30;
/// hisparse_coordinator.py:146.
pub const MIN_SCRATCH_CAPACITY: u64 = 1024;
/// `--mem-fraction-static` when not given: SGLang derives it from the GPU's
/// memory and the parallel layout; this planner assumes 0.85 and says so.
pub const ASSUMED_MEM_FRACTION_STATIC: f64 = 0.85;

/// The figures the planner and the host-RAM check share (per GPU / rank).
#[derive(Clone, Debug)]
pub struct Capacity {
    pub layers: u64,
    pub kv_row: u64,
    pub index_row: u64,
    pub ratio: u64,
    pub page: u64,
    pub d: u64,
    pub scratch: u64,
    pub cell: u64,
    pub available: u64,
    pub kv_source: String,
    pub mem_fraction_static: f64,
    pub weights: u64,
    pub weights_source: String,
    pub weights_estimated: bool,
    pub n_dev: u64,
    pub n_host: u64,
    pub pool_bytes: u64,
    /// Ranks of one launch world per host: tp x pp / nnodes (SGLang's split of the budget).
    pub ranks_per_host: u64,
    /// Pools pinned on one node: every rank's, attention-DP replicas included.
    pub pools_per_node: u64,
}

fn pos(v: Option<i64>) -> u64 {
    v.and_then(|x| u64::try_from(x).ok())
        .filter(|&x| x > 0)
        .unwrap_or(1)
}

/// The capacity of a valid launch, or why it cannot be sized.
pub fn capacity(
    args: &SglangArgs,
    h: &SglangHiSparse,
    model: &ModelInfo,
    machine: &Machine<'_>,
) -> Result<Capacity, String> {
    let layers = model
        .sparse_mla_layers
        .as_ref()
        .map(|s| u64::from(s.value))
        .ok_or("config.json has no layer count")?;
    let kv_row = h
        .kv_row_bytes
        .as_ref()
        .map(|r| r.value)
        .ok_or("the KV row size is unknown for this model and dtype")?;
    let index_row = u64::from(crate::sizes::indexer_row_bytes(
        model.index_head_dim.unwrap_or(128),
    ));
    let ratio = u64::try_from(h.host_to_device_ratio.value)
        .map_err(|_| "host_to_device_ratio is negative")?;
    let page = u64::try_from(h.page_size.value.max(1)).unwrap_or(64);
    let d = u64::try_from(h.device_buffer_size.value).unwrap_or(0);
    let scratch = h.speculative_num_draft_tokens.as_ref().map_or(0, |n| {
        let w = u64::try_from(n.value)
            .unwrap_or(0)
            .saturating_mul(u64::try_from(h.index_topk.value).unwrap_or(0));
        w.min(MIN_SCRATCH_CAPACITY.max(w.saturating_sub(d)))
    });
    let cell = layers.saturating_mul(kv_row).saturating_add(
        layers
            .saturating_mul(index_row)
            .saturating_mul(ratio.max(1)),
    );
    let gpu_gib = machine
        .gpu_memory_gib
        .or(machine.gpu.map(|g| g.memory_gib))
        .ok_or("the GPU memory is not known: pass --gpu or --gpu-memory-gib")?;
    let (mfs, mfs_source) = match args.mem_fraction_static {
        Some(f) => (f, "--mem-fraction-static".to_owned()),
        None => (ASSUMED_MEM_FRACTION_STATIC, format!("{ASSUMED_MEM_FRACTION_STATIC} assumed (SGLang derives --mem-fraction-static from the GPU and the parallel layout)")),
    };
    let (tp, dp, ep, pp) = (
        pos(args.tp_size),
        pos(args.dp_size),
        pos(args.ep_size),
        pos(args.pp_size),
    );
    let (weights, weights_source, weights_estimated) = match machine.weights_gib {
        Some(w) => ((w * GIB) as u64, "given (--weights-gib)".to_owned(), false),
        None => {
            let est = crate::plan::weights::estimate(model, layers, 0)?;
            (est.bytes_per_gpu(tp, dp, ep > 1), est.rule.clone(), true)
        }
    };
    let budget = (gpu_gib * GIB * mfs) as u64;
    let available = budget.saturating_sub(weights);
    let mut n_dev = available / cell.max(1) / 64 * 64;
    if let Some(cap) = args.max_total_tokens.and_then(|t| u64::try_from(t).ok()) {
        n_dev = n_dev.min(cap);
    }
    let n_host = (n_dev.saturating_mul(ratio) / page)
        .saturating_add(1)
        .saturating_mul(page);
    let pool_bytes = n_host.saturating_mul(layers).saturating_mul(kv_row);
    let nnodes = pos(args.nnodes);
    let ranks_per_host = (tp.saturating_mul(pp) / nnodes).max(1);
    let replicas = if args.enable_dp_attention == Some(true) {
        1
    } else {
        dp
    };
    let pools_per_node = (tp.saturating_mul(pp).saturating_mul(replicas) / nnodes).max(1);
    Ok(Capacity {
        layers,
        kv_row,
        index_row,
        ratio,
        page,
        d,
        scratch,
        cell,
        available,
        kv_source: format!("{gpu_gib} GiB x mem_fraction_static {mfs} ({mfs_source}) - weights"),
        mem_fraction_static: mfs,
        weights,
        weights_source,
        weights_estimated,
        n_dev,
        n_host,
        pool_bytes,
        ranks_per_host,
        pools_per_node,
    })
}

/// The RAM budget of one rank (pool_host/base.py:84-107), from the node's RAM.
pub fn budget_per_rank(host_memory_gib: f64, ranks_per_host: u64) -> u64 {
    ((host_memory_gib * GIB) as u64).saturating_sub(HOST_MEMORY_RESERVE_BYTES)
        / ranks_per_host.max(1)
}

/// The host pool against the node's RAM budget, on a valid report, when the
/// GPU memory and the node's RAM are known: `host_pool_over_ram_budget`
/// (SGLang's "Not enough host memory available", pool_host/base.py:248-257,
/// at coordinator_init), with the largest host_to_device_ratio that fits.
pub(crate) fn host_budget_check(args: &SglangArgs, machine: &Machine<'_>, report: &mut Report) {
    let (Some(host_gib), Some(h)) = (machine.host_memory_gib, report.sglang_hisparse().cloned())
    else {
        return;
    };
    let mut ignored = Vec::new();
    let Some((model, _)) = super::resolve::load_model(args, &mut ignored) else {
        return;
    };
    let Ok(c) = capacity(args, &h, &model, machine) else {
        return;
    };
    let budget = budget_per_rank(host_gib, c.ranks_per_host);
    if c.pool_bytes <= budget {
        return;
    }
    // The largest integer ratio whose pool fits, as pool_host/base.py:221-229 sizes it.
    let pool = |r: u64| {
        (c.n_dev.saturating_mul(r) / c.page)
            .saturating_add(1)
            .saturating_mul(c.page)
            .saturating_mul(c.layers)
            .saturating_mul(c.kv_row)
    };
    let fit = (1..c.ratio).rev().find(|&r| pool(r) <= budget);
    let mut e = Diagnostic::error(
        Code::HostPoolOverRamBudget,
        key_path("host_to_device_ratio"),
        format!("Not enough host memory available. Requesting {:.2} GB but only have {:.2} GB free. Please reduce the size of the hierarchical cache. (each of the {} ranks on a node pins {} host tokens x {} layers x {} B = {}; budget per rank (min(available, cgroup) - 10 GiB) / {} from {host_gib} GiB; pool_host/base.py:84-107, :248-257)", c.pool_bytes as f64 / 1e9, budget as f64 / 1e9, c.ranks_per_host, c.n_host, c.layers, c.kv_row, crate::plan::gib_text(c.pool_bytes), c.ranks_per_host),
    )
    .stage(SglangStage::CoordinatorInit)
    .given(&json!(h.host_to_device_ratio.value))
    .allowed(format!("a host pool of at most {} per rank", crate::plan::gib_text(budget)));
    if let Some(r) = fit {
        e = e.fix(vec![FixOp::Set {
            path: key_path("host_to_device_ratio"),
            value: json!(r),
        }]);
    }
    report.errors.push(e);
    report.valid = false;
    report.hisparse = None;
}

/// Plan a valid SGLang HiSparse launch. `Err(PlanError::Option)` when the
/// launch is not valid with HiSparse on (its `check` report says why) or the
/// GPU memory is unknown; `Err` for options out of range.
pub fn plan(args: &SglangArgs, options: &PlanOptions) -> Result<Plan, PlanError> {
    crate::plan::check_options(options)?;
    let gpu = options
        .gpu
        .as_deref()
        .map(crate::gpu::lookup)
        .transpose()
        .map_err(PlanError::Option)?;
    let machine = Machine {
        gpu: gpu.as_ref(),
        host_memory_gib: options.host_memory_gib,
        gpu_memory_gib: options.gpu_memory_gib,
        weights_gib: options.weights_gib,
    };
    let report = resolve_for(args, &machine);
    let no = |why: String| PlanError::Option(format!("--plan (SGLang {}): {why}", super::VERSION));
    let Some(h) = report.sglang_hisparse().cloned() else {
        let codes: Vec<&str> = report.errors.iter().map(|e| e.code.as_str()).collect();
        return Err(no(if args.hisparse_on() {
            format!(
                "the launch is not valid ({}); run the check",
                codes.join(", ")
            )
        } else {
            "HiSparse is not enabled (--enable-hisparse)".to_owned()
        }));
    };
    let mut ignored = Vec::new();
    let (model, _) = super::resolve::load_model(args, &mut ignored)
        .ok_or_else(|| no("the model's config cannot be read".to_owned()))?;
    let c = capacity(args, &h, &model, &machine).map_err(no)?;
    let max_len = args
        .context_length
        .and_then(|c| u64::try_from(c).ok())
        .or(model.max_position_embeddings.as_ref().map(|s| s.value))
        .unwrap_or(163_840);
    let context = options.context_length.unwrap_or(max_len);
    let host_mem = options.host_memory_gib.map(|g| (g * GIB) as u64);
    let budget = options
        .host_memory_gib
        .map(|g| budget_per_rank(g, c.ranks_per_host));
    let mut errors = report.errors.clone();
    let mut warnings = report.warnings.clone();
    if budget.is_some_and(|b| c.pool_bytes > b) {
        let mut r = report.clone();
        host_budget_check(args, &machine, &mut r);
        errors.extend(
            r.errors
                .into_iter()
                .filter(|e| e.code == Code::HostPoolOverRamBudget),
        );
    }
    if host_mem.is_none() {
        warnings.push(
            Diagnostic::warning(Code::HostMemoryNotGiven, key_path("host_to_device_ratio"), format!("the node's RAM is not given (--host-memory-gib): {} ranks x {} pinned per node are not checked against (min(available, cgroup) - 10 GiB) / ranks_per_host (pool_host/base.py:84-107)", c.pools_per_node, crate::plan::gib_text(c.pool_bytes)))
                .stage(SglangStage::Never),
        );
    }
    let base_per_token = c.layers.saturating_mul(c.kv_row + c.index_row);
    let base_slots = c.available / base_per_token.max(1) / c.page * c.page;
    let max_running = args
        .max_running_requests
        .and_then(|m| u64::try_from(m).ok());
    let per_req_dev = c.d.saturating_add(64).saturating_add(c.scratch);
    let point = |ctx: u64| -> PlanPoint {
        let tokens = crate::sizes::round_up(ctx, c.page);
        let base = base_slots / tokens.max(1);
        let gpu_limit = c.n_dev / per_req_dev.max(1);
        let host_limit = c.n_host / tokens.max(1);
        let (mut best, mut limit) = (gpu_limit, Limit::Gpu);
        if host_limit < best {
            (best, limit) = (host_limit, Limit::Host);
        }
        if let Some(m) = max_running.filter(|&m| m < best) {
            (best, limit) = (m, Limit::MaxNumSeqs);
        }
        let base_cap = max_running.map_or(base, |m| base.min(m));
        PlanPoint {
            context_length: ctx,
            host_kv_bytes_per_request: tokens.saturating_mul(c.layers).saturating_mul(c.kv_row),
            indexer_bytes_per_request: tokens.saturating_mul(c.layers).saturating_mul(c.index_row),
            baseline_gpu_bytes_per_request: tokens.saturating_mul(base_per_token),
            hisparse_gpu_blocks_per_request: per_req_dev.div_ceil(c.page),
            hisparse_gpu_bytes_per_request: per_req_dev.saturating_mul(c.cell),
            host_blocks_per_request: tokens / c.page,
            baseline_requests: Some(base_cap),
            baseline_limit: Some(if max_running.is_some_and(|m| m < base) {
                Limit::MaxNumSeqs
            } else {
                Limit::Gpu
            }),
            gpu_limit: Some(gpu_limit),
            host_limit,
            hisparse_requests: Some(best),
            hisparse_limit: Some(limit),
            target_requests: options.target_requests,
            min_host_pool_gib: None,
            min_host_pool_requests: None,
        }
    };
    let mut contexts: Vec<u64> = std::iter::successors(Some(SWEEP_START), |x| x.checked_mul(2))
        .take_while(|&x| x < max_len)
        .collect();
    contexts.push(max_len);
    if !contexts.contains(&context) {
        contexts.push(context);
        contexts.sort_unstable();
    }
    let at_context = point(context);
    if at_context.hisparse_requests == Some(0) {
        errors.push(
            Diagnostic::error(Code::SglangPlanServesNoRequests, key_path("device_buffer_size"), format!("{} device KV slots per GPU hold no request of D + 64 + scratch = {per_req_dev} slots (or the host pool holds no {context}-token request)", c.n_dev))
                .stage(SglangStage::Request),
        );
    }
    let pinned = c.pool_bytes.saturating_mul(c.pools_per_node);
    let host_block = c.page.saturating_mul(c.layers).saturating_mul(c.kv_row);
    // ceil(context / page) + 1: one request at the longest context, and the padding page.
    let min_blocks = crate::sizes::blocks_for(max_len, c.page).saturating_add(1);
    let (tp, dp) = (pos(args.tp_size), pos(args.dp_size));
    Ok(Plan {
        schema_version: crate::report::SCHEMA_VERSION,
        engine: ENGINE_SGLANG.to_owned(),
        engine_version: super::VERSION.to_owned(),
        vllm_version: String::new(),
        valid: errors.is_empty(),
        model: report.model.clone(),
        context_length: context,
        max_model_len: max_len,
        sizes: Sizes {
            kv_cache_dtype: h.kv_cache_dtype.value.clone(),
            mla_row_bytes: u32::try_from(c.kv_row).unwrap_or(u32::MAX),
            indexer_row_bytes: u32::try_from(c.index_row).unwrap_or(u32::MAX),
            sparse_mla_layers: u32::try_from(c.layers).unwrap_or(u32::MAX),
            indexer_layers: u32::try_from(c.layers).unwrap_or(u32::MAX),
            draft_layers: 0,
            mla_bytes_per_token: c.layers.saturating_mul(c.kv_row),
            indexer_bytes_per_token: c.layers.saturating_mul(c.index_row),
            block_size: u32::try_from(c.page).unwrap_or(u32::MAX),
            device_buffer_size: u32::try_from(c.d).unwrap_or(u32::MAX),
            hot_buffer_bytes: (c.d + 64).saturating_mul(c.layers).saturating_mul(c.kv_row),
            hot_groups: 1,
            baseline_block_bytes: c.page.saturating_mul(base_per_token),
            hisparse_block_bytes: c.page.saturating_mul(c.cell),
        },
        host: HostPlan {
            mode: PoolMode::Private,
            mode_rule: "every rank pins its own copy: the MLA latent has no head dimension to split (pool_host/base.py:221-229, pool_host/mla.py:195-197)".to_owned(),
            host_pool_gib: c.pool_bytes as f64 / GIB,
            host_block_bytes: host_block,
            host_block_stride: host_block,
            host_blocks: c.n_host / c.page,
            min_host_blocks: min_blocks,
            min_host_pool_gib: min_blocks.saturating_mul(host_block) as f64 / GIB,
            pool_bytes: c.pool_bytes,
            pools_per_node: c.pools_per_node,
            pinned_bytes_per_node: pinned,
            host_memory_bytes: host_mem,
            host_memory_source: if host_mem.is_some() { "given with --host-memory-gib".to_owned() } else { "not given".to_owned() },
            usable_host_memory_bytes: budget.map(|b| b.saturating_mul(c.ranks_per_host)),
            host_memory_given: host_mem.is_some(),
            draft_model: None,
        },
        gpu: GpuPlan {
            tensor_parallel_size: tp,
            data_parallel_size: dp,
            kv_bytes_per_gpu: Some(c.available),
            kv_source: c.kv_source.clone(),
            gpu_memory_gib: machine.gpu_memory_gib.or(gpu.as_ref().map(|g| g.memory_gib)),
            gpu_memory_utilization: c.mem_fraction_static,
            weights_bytes_per_gpu: Some(c.weights),
            weights_source: Some(c.weights_source.clone()),
            weights_estimated: c.weights_estimated,
            max_num_seqs: max_running.unwrap_or(0),
            max_num_seqs_source: if max_running.is_some() { "--max-running-requests".to_owned() } else { "not given: SGLang sizes it from memory (0 here: no cap)".to_owned() },
            baseline_blocks: Some(base_slots / c.page),
            hisparse_blocks: Some(c.n_dev / c.page),
            spec: gpu.clone(),
        },
        at_context,
        sweep: contexts.into_iter().map(point).collect(),
        errors,
        warnings,
        ignored_flags: args.not_read(),
        assumed: None,
    })
}
