//! Capacity planning for an SGLang 0.5.23 HiSparse launch (rules from the
//! 0.5.23 wheel, each with its file:line), in the planner's [`Plan`] shape with `engine: "sglang"`
//! and SGLang's own figures under `sglang` ([`SglangSizing`]):
//!
//! - `mem_fraction_static` when not given: SGLang's heuristic
//!   `round((gpu_mem - reserved) / gpu_mem, 3)` (arg_groups/memory_hook.py:281-342,
//!   [`default_mem_fraction_static`]);
//! - device KV slots per GPU: `N_dev = (available // cell) // 64 x 64`
//!   (model_executor/pool_configurator.py:637-647), with `available = gpu_memory
//!   x mem_fraction_static - weights` (mem_cache/kv_cache_configurator.py:2990-3007,
//!   the pre-load free memory taken as the whole GPU: an upper bound) and the cell
//!   `L x kv_row + L x 132 x R` (every layer keeps its index buffer for the
//!   host's tokens, R = host_to_device_ratio, pool_configurator.py:560-635),
//!   plus, with EAGLE/NEXTN (MTP), the draft's `L_d x (kv_row + index_row) x R`
//!   (its pool is indexed by the host-expanded ids, pool_configurator.py:260-311),
//!   capped by `--max-total-tokens`;
//! - `max_running_requests` per attention-DP worker: given `min(m // attn_dp,
//!   N_dev // 2)`, else `min(max(min(int(N_dev / context_len x 512), 4096),
//!   2048), N_dev // 2)` (mem_cache/kv_cache_configurator.py:3119-3132); 48 with
//!   speculation (arg_groups/speculative_hook.py:1086-1091);
//! - per request on the device `D + 64` slots (the newest token's extra page,
//!   hisparse_coordinator.py:644-646), plus the speculative scratch
//!   `min(W, max(1024, W - D))`, W = draft tokens x index_topk (:146, :187-193);
//!   outside P/D decode a whole prompt sits in device slots while it is
//!   prefilled (its device ids are backed up to the host after the prefill,
//!   managers/hisparse_coordinator.py:838-876, from
//!   scheduler_components/batch_result_processor.py:396); a P/D decode instance
//!   allocates the prompt logical ids only, its KV lands in the host pool
//!   (disaggregation/decode.py:2321-2330), and admits `D + 64 + scratch` per
//!   request (:1418-1430);
//! - host pool per rank `(int(N_dev x R) // 64 + 1) x 64` tokens x L x kv_row
//!   (pool_host/base.py:221-229), pinned; every rank holds its own copy, so a
//!   node pins `ranks_per_host` pools; budget per rank
//!   `(min(available RAM, cgroup) - 10 GiB) / ranks_per_host` (pool_host/base.py:84-107);
//! - requests served without HiSparse (every token on the device) and with it
//!   (the least of device slots, host pool, max_running_requests).

use super::args::SglangArgs;
use super::diagnostics::SglangDiagnostic;
use super::hisparse_config::key_path;
use super::resolution::Machine;
use super::resolve::resolve_for;
use super::settings::SglangHiSparse;
use super::stages::SglangStage;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::gpu::GpuSpec;
use crate::model::ModelInfo;
use crate::plan::{
    GpuPlan, HostPlan, Limit, Plan, PlanError, PlanOptions, PlanPoint, PoolMode, SglangSizing,
    Sizes, SWEEP_START,
};
use crate::report::{HostMemoryCheck, Report, ENGINE_SGLANG};
use serde_json::json;

const GIB: f64 = (1u64 << 30) as f64;
/// pool_host/base.py:28 `HICACHE_HOST_MEMORY_RESERVE_BYTES`.
pub const HOST_MEMORY_RESERVE_BYTES: u64 = 10 << 30;
/// hisparse_coordinator.py:146.
pub const MIN_SCRATCH_CAPACITY: u64 = 1024;
/// `max_prefill_tokens` default (arg_groups/fields/schedule.py:71-81).
const DEFAULT_MAX_PREFILL_TOKENS: u64 = 16384;
/// The largest host_to_device_ratio the planner tries when it looks for the
/// ratio whose host pool holds what the GPU holds.
const MAX_RATIO_SEARCHED: u64 = 256;

/// The figures the planner and the host-RAM check share (per GPU / rank).
#[derive(Clone, Debug)]
pub struct Capacity {
    pub layers: u64,
    /// Layers that run their own indexer (all but GLM-5.2's IndexShare
    /// layers): without HiSparse SGLang gives the others no index-K rows
    /// (mem_cache/kv_cache_configurator.py:131-145, model_executor/pool_configurator.py:598-633,
    /// configs/model_config.py:488-522); with HiSparse every layer keeps them (:592-597).
    pub indexer_layers: u64,
    /// MTP draft layers (EAGLE/NEXTN with the checkpoint's `num_nextn_predict_layers`).
    pub draft_layers: u64,
    /// Whether a whole prompt sits in device slots while it is prefilled (not in P/D decode).
    pub prompt_on_device: bool,
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
    /// How mem_fraction_static was found.
    pub mem_fraction_static_rule: String,
    /// GPU memory, GiB.
    pub gpu_gib: f64,
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
    let scratch = scratch(h, d);
    let draft_layers = draft_layers(args, model);
    let cell = device_cell(layers, kv_row, index_row, ratio).saturating_add(draft_cell(
        draft_layers,
        kv_row,
        index_row,
        ratio,
    ));
    let gpu_gib = machine
        .gpu_memory_gib
        .or(machine.gpu.map(|g| g.memory_gib))
        .ok_or("the GPU memory is not known: pass --gpu or --gpu-memory-gib")?;
    let draft = h
        .speculative_num_draft_tokens
        .as_ref()
        .and_then(|n| u64::try_from(n.value).ok());
    let (mfs, mfs_rule) = match args.mem_fraction_static {
        Some(f) => (f, "given (--mem-fraction-static)".to_owned()),
        None => default_mem_fraction_static(args, draft, gpu_gib),
    };
    let (tp, dp, ep, pp) = (
        pos(args.tp_size),
        pos(args.dp_size),
        pos(args.ep_size),
        pos(args.pp_size),
    );
    let (weights, weights_source, weights_estimated) =
        weights(args, model, machine, (layers, draft_layers), (tp, dp, ep))?;
    let budget = (gpu_gib * GIB * mfs) as u64;
    let available = match machine.available_kv_gib {
        Some(g) => (g * GIB) as u64,
        None => budget.saturating_sub(weights),
    };
    let n_dev = device_slots(available, cell, page, args);
    let n_host = host_tokens(n_dev, ratio, page);
    let pool_bytes = n_host.saturating_mul(layers).saturating_mul(kv_row);
    let nnodes = pos(args.nnodes);
    let ranks_per_host = (tp.saturating_mul(pp) / nnodes).max(1);
    let replicas = if args.enable_dp_attention == Some(true) {
        1
    } else {
        dp
    };
    let pools_per_node = (tp.saturating_mul(pp).saturating_mul(replicas) / nnodes).max(1);
    let indexer_layers = model.indexer_leaders.as_ref().map_or(layers, |l| {
        u64::try_from(l.value.iter().filter(|&&lead| lead).count()).unwrap_or(layers)
    });
    Ok(Capacity {
        layers,
        indexer_layers,
        draft_layers,
        prompt_on_device: args.pd_mode() != "decode",
        kv_row,
        index_row,
        ratio,
        page,
        d,
        scratch,
        cell,
        available,
        kv_source: kv_source(machine, mfs, gpu_gib),
        mem_fraction_static: mfs,
        mem_fraction_static_rule: mfs_rule,
        gpu_gib,
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

/// The indexer's scratch rows per request with speculative decoding: draft
/// tokens x top-k, past what the device buffer already holds.
fn scratch(h: &SglangHiSparse, d: u64) -> u64 {
    h.speculative_num_draft_tokens.as_ref().map_or(0, |n| {
        let w = u64::try_from(n.value)
            .unwrap_or(0)
            .saturating_mul(u64::try_from(h.index_topk.value).unwrap_or(0));
        w.min(MIN_SCRATCH_CAPACITY.max(w.saturating_sub(d)))
    })
}

/// The weights per GPU, where the figure comes from, and whether it is an
/// estimate: given or measured, else estimated from config.json.
fn weights(
    args: &SglangArgs,
    model: &ModelInfo,
    machine: &Machine<'_>,
    (layers, draft_layers): (u64, u64),
    (tp, dp, ep): (u64, u64, u64),
) -> Result<(u64, String, bool), String> {
    Ok(match machine.weights_gib {
        Some(w) => (
            (w * GIB) as u64,
            match machine.measured_in {
                Some(log) => format!("measured: the \"mem usage\" of \"Load weight end\" in {log} (model_executor/model_runner.py:1372-1379)"),
                None => "given (--weights-gib)".to_owned(),
            },
            false,
        ),
        None => {
            let est = crate::plan::weights::estimate(model, layers, draft_layers)?;
            // Attention TP = tp / dp under DP attention (runtime_context.py:73-76).
            let attn_tp = (tp / pos(Some(args.attn_dp_given().0))).max(1);
            let rule = format!(
                "{}; attention per GPU: q_a/kv_a and the indexer whole on every GPU (ReplicatedLinear, models/deepseek_v2.py:2070, :2095, layers/attention/dsa/dsa_indexer.py:344-368), q_b/kv_b/o_proj split over attention TP {attn_tp}{} (models/deepseek_v2.py:2051-2058, :2078-2161): {} of attention weights per GPU",
                est.rule,
                if attn_tp < tp { " = tp / dp with --enable-dp-attention (runtime_context.py:73-76)" } else { "" },
                crate::plan::gib_text(est.replicated_attention_bytes.saturating_add(est.sharded_attention_bytes / attn_tp)),
            );
            (
                est.sglang_bytes_per_gpu(tp, attn_tp, dp, ep > 1),
                rule,
                true,
            )
        }
    })
}

/// Where the KV room comes from: the engine log, else the GPU's memory.
fn kv_source(machine: &Machine<'_>, mfs: f64, gpu_gib: f64) -> String {
    match (machine.available_kv_gib, machine.measured_in) {
        (Some(g), log) => format!("measured: {g:.2} GiB = avail mem - (avail mem + mem usage) x (1 - mem_fraction_static {mfs}) of \"Load weight end\" in {} (mem_cache/kv_cache_configurator.py:2990-3007)", log.unwrap_or("the engine log")),
        (None, _) => format!("{gpu_gib} GiB x mem_fraction_static {mfs} - weights (mem_cache/kv_cache_configurator.py:2990-3007, the free memory before loading taken as the whole GPU: an upper bound)"),
    }
}

/// One device KV slot: `L x kv_row + L x index_row x R` (the indexer pool holds
/// R tokens per slot, pool_configurator.py:560-635; R 0 is taken as 1, the
/// floor of SGLang's `int(...)` being 0 would leave no indexer at all).
pub fn device_cell(layers: u64, kv_row: u64, index_row: u64, ratio: u64) -> u64 {
    layers.saturating_mul(kv_row).saturating_add(
        layers
            .saturating_mul(index_row)
            .saturating_mul(ratio.max(1)),
    )
}

/// One device KV slot without HiSparse: `L x kv_row + I x index_row` (I the
/// layers that run an indexer, [`Capacity::indexer_layers`]) plus the MTP
/// draft's `L_d x (kv_row + index_row)` (model_executor/pool_configurator.py:340-420,
/// :560-635, :262-311).
pub fn baseline_cell(c: &Capacity) -> u64 {
    c.layers
        .saturating_mul(c.kv_row)
        .saturating_add(c.indexer_layers.saturating_mul(c.index_row))
        .saturating_add(draft_cell(c.draft_layers, c.kv_row, c.index_row, 1))
}

/// MTP draft layers SGLang adds to the device cell and loads: the checkpoint's
/// `num_nextn_predict_layers` with EAGLE or NEXTN (NEXTN resolves to EAGLE,
/// arg_groups/speculative_hook.py:109; the count,
/// model_executor/model_runner_components/spec_aux_hidden_state.py:171-174);
/// 0 without speculation.
pub fn draft_layers(args: &SglangArgs, model: &ModelInfo) -> u64 {
    let eagle = args
        .speculative_algorithm
        .as_deref()
        .is_some_and(|a| a.eq_ignore_ascii_case("EAGLE") || a.eq_ignore_ascii_case("NEXTN"));
    if eagle {
        model.num_nextn_predict_layers.map_or(0, u64::from)
    } else {
        0
    }
}

/// The draft's part of one device slot with HiSparse on a DSA model:
/// `int(L x kv_row x L_d / L) x R + L_d x index_row x R` (the draft pool is
/// direct-indexed by the host-expanded logical ids, pool_configurator.py:260-311).
pub fn draft_cell(draft_layers: u64, kv_row: u64, index_row: u64, ratio: u64) -> u64 {
    draft_layers
        .saturating_mul(kv_row.saturating_add(index_row))
        .saturating_mul(ratio.max(1))
}

impl Capacity {
    /// Device slots and the host pool of one rank, bytes, at ratio `r`: a
    /// larger ratio makes the device cell larger (the indexer rows of every
    /// host token), so N_dev shrinks as the ratio grows, and the pool is
    /// `host_tokens(N_dev(r), r)` rows (pool_host/base.py:221-229). The plan
    /// and the RAM rule's fix both size a ratio with it.
    pub fn at_ratio(&self, args: &SglangArgs, r: u64) -> (u64, u64) {
        let cell = device_cell(self.layers, self.kv_row, self.index_row, r).saturating_add(
            draft_cell(self.draft_layers, self.kv_row, self.index_row, r),
        );
        let n_dev = device_slots(self.available, cell, self.page, args);
        let pool = host_tokens(n_dev, r, self.page)
            .saturating_mul(self.layers)
            .saturating_mul(self.kv_row);
        (n_dev, pool)
    }
}

/// `N_dev = (available // cell) // page x page` (pool_configurator.py:637-647),
/// capped by `--max-total-tokens`.
fn device_slots(available: u64, cell: u64, page: u64, args: &SglangArgs) -> u64 {
    let mut n_dev = available / cell.max(1) / page.max(1) * page.max(1);
    if let Some(cap) = args.max_total_tokens.and_then(|t| u64::try_from(t).ok()) {
        n_dev = n_dev.min(cap / page.max(1) * page.max(1));
    }
    n_dev
}

/// `(int(N_dev x R) // page + 1) x page` host tokens (pool_host/base.py:221-229).
pub fn host_tokens(n_dev: u64, ratio: u64, page: u64) -> u64 {
    (n_dev.saturating_mul(ratio) / page.max(1))
        .saturating_add(1)
        .saturating_mul(page.max(1))
}

/// `max_running_requests` per attention-DP worker as SGLang 0.5.23 resolves
/// it from `token_capacity` device slots (mem_cache/kv_cache_configurator.py:3119-3132),
/// with the rule in words.
pub fn resolved_max_running_requests(
    given: Option<u64>,
    speculative: bool,
    attn_dp: u64,
    token_capacity: u64,
    context_len: u64,
) -> (u64, String) {
    let half = token_capacity / 2;
    let per_worker = |m: u64, why: &str| {
        let w = (m / attn_dp.max(1)).max(1);
        (
            w.min(half),
            format!("{why}: min(max(1, {m} // attention-DP {attn_dp}), N_dev {token_capacity} // 2) (mem_cache/kv_cache_configurator.py:3126-3129)"),
        )
    };
    match (given, speculative) {
        (Some(m), _) => per_worker(m, "--max-running-requests"),
        (None, true) => per_worker(
            u64::try_from(super::resolution::SPEC_DEFAULT_MAX_RUNNING_REQUESTS).unwrap_or(48),
            "not given, speculation resolves 48 (arg_groups/speculative_hook.py:1086-1091)",
        ),
        (None, false) => {
            let estimate = (token_capacity as f64 / context_len.max(1) as f64 * 512.0) as u64;
            let clamped = estimate.clamp(2048, 4096);
            (
                clamped.min(half),
                format!("not given: min(max(min(int(N_dev {token_capacity} / context_len {context_len} x 512) = {estimate}, 4096), 2048), N_dev // 2) (mem_cache/kv_cache_configurator.py:3123-3132)"),
            )
        }
    }
}

/// SGLang's `--mem-fraction-static` when it is not given, as
/// `handle_gpu_memory_settings` picks it for a CUDA GPU and an MLA model
/// (arg_groups/memory_hook.py:87-158 for the GPU tier's chunked_prefill_size and
/// decode CUDA-graph max_bs, :281-342 for the fraction, :357-392 for the graph
/// reserve; MLA models skip post-capture KV sizing, arg_groups/overrides.py:1809-1810).
/// Assumed: nvidia-smi reports the GPU's memory as given here (SGLang reads
/// `memory.total` in MiB, utils/common.py:802-806), the decode CUDA graph on
/// and prefill CUDA graphs off (the defaults), their batch sizes not given, no
/// DeepEP all-to-all (+2 GiB, :397-409). Checked against SGLang's own
/// `prepare_server_args` + `resolve_once` with the GPU memory stubbed (tests/sglang_plan.rs).
pub fn default_mem_fraction_static(
    args: &SglangArgs,
    draft_tokens: Option<u64>,
    gpu_gib: f64,
) -> (f64, String) {
    let gpu = gpu_gib * 1024.0;
    let tp = pos(args.tp_size);
    let pp = pos(args.pp_size);
    let (chunked_default, mut max_bs) = if gpu < 20.0 * 1024.0 {
        (2048, 8)
    } else if gpu < 35.0 * 1024.0 {
        (4096, if tp < 4 { 48 } else { 160 })
    } else if gpu < 60.0 * 1024.0 {
        (4096, if tp < 4 { 32 } else { 160 })
    } else if gpu < 160.0 * 1024.0 {
        (8192, if tp < 4 { 256 } else { 512 })
    } else {
        (16384, 512)
    };
    let given_mrr = args
        .max_running_requests
        .and_then(|m| u64::try_from(m).ok());
    if let Some(m) = given_mrr.filter(|&m| m < max_bs) {
        max_bs = m;
    }
    let mode = args.pd_mode();
    let (activation, activation_rule) = if mode == "decode" {
        let running = given_mrr.filter(|&m| m > 0).unwrap_or(max_bs);
        let d = draft_tokens.unwrap_or(1).max(1);
        (
            (running * d).max(2048),
            format!("max({running} running x {d} draft tokens, 2048)"),
        )
    } else {
        let chunked = args.chunked_prefill_size.unwrap_or(chunked_default);
        if chunked > 0 {
            let c = u64::try_from(chunked).unwrap_or(0);
            (c.max(2048), format!("max(chunked_prefill_size {c}, 2048)"))
        } else {
            (
                DEFAULT_MAX_PREFILL_TOKENS,
                format!("max(max_prefill_tokens {DEFAULT_MAX_PREFILL_TOKENS}, 2048)"),
            )
        }
    };
    let parallel = (tp * pp) as f64 / 8.0 * 1024.0;
    let mut graph = 0.0;
    let mut graph_rule = Vec::new();
    if mode != "prefill" {
        graph += max_bs as f64 * 2.0;
        graph_rule.push(format!("decode max_bs {max_bs} x 2"));
        if args.enable_dp_attention == Some(true) {
            let adp = pos(args.dp_size) as f64;
            graph += max_bs as f64 * adp * 3.0;
            if max_bs > 300 {
                graph += max_bs as f64 * adp * 1.5;
            }
            graph_rule.push(format!(
                "DP attention max_bs x {adp} x 3{}",
                if max_bs > 300 {
                    " (+ x 1.5 above 300)"
                } else {
                    ""
                }
            ));
        }
    }
    // The MLA prefill-graph term (+1536, :383-389) applies only with prefill
    // CUDA graphs on, which they are not by default (SGLang's own resolve_once
    // gives 0.897 for TP 8 on 144,384 MiB without P/D: no prefill term).
    let sum = 512.0 + activation as f64 * 1.5 + parallel + graph;
    let floor = gpu > 60.0 * 1024.0;
    let reserved = if floor { sum.max(10.0 * 1024.0) } else { sum };
    let mfs = ((gpu - reserved) / gpu * 1000.0).round() / 1000.0;
    let rule = format!(
        "not given: SGLang's default round(({gpu} MiB - {reserved} MiB reserved) / {gpu} MiB, 3), reserved = {}512 + 1.5 x {activation} activation tokens ({activation_rule}) + {parallel} (TP {tp} x PP {pp} / 8 x 1024) + {graph} CUDA graphs ({}){} MiB (arg_groups/memory_hook.py:281-342, :357-392); assumes nvidia-smi reports {gpu} MiB and no DeepEP",
        if floor { "max(" } else { "" },
        graph_rule.join(" + "),
        if floor { ", 10240 on GPUs above 60 GiB)" } else { "" },
    );
    (mfs, rule)
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
    let Some((model, _)) = super::resolution::load_model(args, &mut ignored) else {
        return;
    };
    let Ok(c) = capacity(args, &h, &model, machine) else {
        return;
    };
    let budget = budget_per_rank(host_gib, c.ranks_per_host);
    if c.pool_bytes <= budget {
        report.host_memory = report
            .valid
            .then(|| host_memory_checked(&c, host_gib, budget));
        return;
    }
    // The largest integer ratio whose pool fits, each with the device slots
    // it leaves (issue 22 item 1: sized with this ratio's N_dev, the fix asked
    // for a ratio still too large), as the plan sizes it.
    let fit = (1..c.ratio)
        .rev()
        .find(|&r| c.at_ratio(args, r).1 <= budget);
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

/// What a valid launch's pools pin of the node's RAM and the headroom left
/// (issue 22: a valid check says the RAM it checked), in the plan's figures:
/// SGLang's budget per rank times the ranks it divides the RAM among.
fn host_memory_checked(c: &Capacity, host_gib: f64, budget: u64) -> HostMemoryCheck {
    let pinned = c.pool_bytes.saturating_mul(c.pools_per_node);
    let usable = budget.saturating_mul(c.ranks_per_host);
    HostMemoryCheck {
        host_memory_gib: host_gib,
        source: "given with --host-memory-gib".to_owned(),
        pools_per_node: c.pools_per_node,
        pool_bytes: c.pool_bytes,
        pinned_bytes: pinned,
        usable_bytes: usable,
        left_bytes: usable.saturating_sub(pinned),
        rule: format!(
            "the node's RAM less SGLang's 10 GiB reserve, as {} ranks' budgets of (min(available, cgroup) - 10 GiB) / {}, each rank's pool within its own (mem_cache/pool_host/base.py:84-107, :248-257)",
            c.ranks_per_host, c.ranks_per_host
        ),
    }
}

/// The coordinator's GPU bookkeeping (managers/hisparse_coordinator.py:637-724)
/// against the room `--mem-fraction-static` leaves beyond what SGLang's own
/// default reserves for activations and CUDA graphs (memory_hook.py:281-392):
/// room = GPU x (default fraction - fraction). A warning
/// (`coordinator_memory_unreserved`, a deviation: SGLang does not reserve it)
/// only when the room is smaller than the bookkeeping, with the fraction that
/// leaves room as its fix. Rows as the plan resolves them: max_running_requests
/// per attention-DP worker (given, or from N_dev) + 1 (ReqToTokenPool's
/// size + 1, memory_pool.py:399-402), plus P/D decode's in-transfer slots.
/// Needs the GPU memory (`--gpu` / `--gpu-memory-gib`); None otherwise.
pub(crate) fn coordinator_room(
    args: &SglangArgs,
    machine: &Machine<'_>,
    h: &SglangHiSparse,
) -> Option<Diagnostic> {
    let (model, _) = super::resolution::load_model(args, &mut Vec::new())?;
    let c = capacity(args, h, &model, machine).ok()?;
    let max_len = served_length(args, &model);
    let given = args
        .max_running_requests
        .and_then(|m| u64::try_from(m).ok());
    let spec = h.speculative_num_draft_tokens.is_some();
    let attn_dp = pos(Some(args.attn_dp_given().0));
    let (per_worker, _) = resolved_max_running_requests(given, spec, attn_dp, c.n_dev, max_len);
    let extra = match (args.pd_mode(), args.disaggregation_decode_extra_slots) {
        ("decode", Some(e)) => u64::try_from(e).unwrap_or(0),
        ("decode", None) if per_worker <= 32 => per_worker * 2,
        _ => 0,
    };
    let rows = per_worker.saturating_add(extra).saturating_add(1);
    let top_k = u64::try_from(h.index_topk.value).unwrap_or(0);
    let need = super::deviations::coordinator_bytes(c.layers, rows, c.d, c.page, max_len, top_k);
    let draft = h
        .speculative_num_draft_tokens
        .as_ref()
        .and_then(|n| u64::try_from(n.value).ok());
    let (default_mfs, _) = default_mem_fraction_static(args, draft, c.gpu_gib);
    let gpu = c.gpu_gib * GIB;
    let room = (gpu * (default_mfs - c.mem_fraction_static)).max(0.0);
    if need as f64 <= room {
        return None;
    }
    let fix = ((default_mfs - need as f64 / gpu) * 100.0).floor() / 100.0;
    let gib = |b: f64| b / GIB;
    let extra_text = if extra > 0 {
        format!(" + {extra} in-transfer")
    } else {
        String::new()
    };
    let mut w = Diagnostic::warning(
        Code::CoordinatorMemoryUnreserved,
        crate::path::FieldPath::root("mem_fraction_static"),
        format!("the HiSparse coordinator allocates {:.2} GiB per GPU of bookkeeping ({} layers, {per_worker} requests per worker{extra_text} + 1 = {rows} request rows, device_buffer_size {}, context {max_len}; managers/hisparse_coordinator.py:637-724) after SGLang has sized the KV pool from --mem-fraction-static {} ({}), which does not reserve it: beyond the {:.2} GiB SGLang's default {default_mfs} keeps for activations and CUDA graphs (arg_groups/memory_hook.py:281-392) that leaves {:.2} GiB", gib(need as f64), c.layers, c.d, c.mem_fraction_static, c.mem_fraction_static_rule, gib(gpu * (1.0 - default_mfs)), gib(room)),
    )
    .stage(SglangStage::Never)
    .given(&json!(c.mem_fraction_static));
    if fix > 0.0 {
        w = w.allowed(format!(
            "--mem-fraction-static {fix} or lower on this GPU ({} GiB)",
            c.gpu_gib
        ));
        w = w.fix(vec![FixOp::Set {
            path: crate::path::FieldPath::root("mem_fraction_static"),
            value: json!(fix),
        }]);
    } else {
        w = w.hint("lower --max-running-requests or --context-length: no --mem-fraction-static leaves room on this GPU");
    }
    Some(w)
}

/// The planner's length in SGLang's words: `PlanOptions::context_length` is
/// hisparse-check's `--plan-context-length` (Python: `plan(context_length=)`),
/// never SGLang's own `--context-length`, which is the launch's.
const PLANNED_LENGTH: &str =
    "the planned context length (--plan-context-length; Python: plan(context_length=))";

/// `PlanOptions::context_length` of 0, named as the planned length, not as
/// SGLang's `--context-length` (the shared `check_options` says vLLM's words).
pub(crate) fn check_planned_length(options: &PlanOptions) -> Result<(), PlanError> {
    if options.context_length == Some(0) {
        return Err(PlanError::Option(format!(
            "{PLANNED_LENGTH} must be at least 1 token (SGLang's own --context-length is the launch's, read as such)"
        )));
    }
    Ok(())
}

/// The longest context the launch serves: `--context-length`, else the
/// model's `max_position_embeddings` (163,840 when neither is known).
fn served_length(args: &SglangArgs, model: &ModelInfo) -> u64 {
    args.context_length
        .and_then(|c| u64::try_from(c).ok())
        .or(model.max_position_embeddings.as_ref().map(|s| s.value))
        .unwrap_or(163_840)
}

/// The planned length over the longest request the launch serves: SGLang
/// refuses an input of `context_len` tokens or more
/// (managers/tokenizer_manager.py:1337-1350), so such requests serve nothing.
fn planned_length_over(args: &SglangArgs, context: u64, max_len: u64) -> Option<PlanError> {
    (context > max_len).then(|| {
        let whose = if args.context_length.is_some() {
            format!("the launch's --context-length {max_len}")
        } else {
            format!("{max_len}, the model's context length (the launch gives no --context-length)")
        };
        PlanError::Option(format!(
            "{PLANNED_LENGTH} {context} is longer than {whose}: SGLang refuses longer requests (managers/tokenizer_manager.py:1337-1350); plan a shorter context, or raise --context-length"
        ))
    })
}

/// Plan a valid SGLang HiSparse launch. `Err(PlanError::Option)` when the
/// launch is not valid with HiSparse on (its `check` report says why) or the
/// GPU memory is unknown; `Err` for options out of range (a planned length
/// of 0 or over the launch's `--context-length`).
pub fn plan(args: &SglangArgs, options: &PlanOptions) -> Result<Plan, PlanError> {
    check_planned_length(options)?;
    crate::plan::check_options(options)?;
    if let Some(e) = super::resolution::unreadable_model(args) {
        return Err(PlanError::Load(e));
    }
    let gpu = options
        .gpu
        .as_deref()
        .map(crate::gpu::lookup)
        .transpose()
        .map_err(PlanError::Option)?;
    let machine = machine(options, gpu.as_ref());
    let report = resolve_for(args, &machine);
    let no = |why: String| {
        PlanError::Option(format!(
            "--plan (SGLang {}): {why}",
            super::version::VERSION
        ))
    };
    let h = settings(args, &report).map_err(no)?;
    let mut ignored = Vec::new();
    let (model, _) = super::resolution::load_model(args, &mut ignored)
        .ok_or_else(|| no("the model's config cannot be read".to_owned()))?;
    let c = capacity(args, &h, &model, &machine).map_err(no)?;
    let max_len = served_length(args, &model);
    let context = options.context_length.unwrap_or(max_len);
    planned_length_over(args, context, max_len).map_or(Ok(()), Err)?;
    let host_mem = options.host_memory_gib.map(|g| (g * GIB) as u64);
    let budget = options
        .host_memory_gib
        .map(|g| budget_per_rank(g, c.ranks_per_host));
    let (mut errors, warnings) =
        plan_diagnostics(args, &machine, &h, &report, &c, budget, host_mem);
    // Without HiSparse: index-K rows only on the layers that run an indexer
    // (IndexShare layers have none, pool_configurator.py:598-633), and the
    // draft's cell is its layers' rows once (R = 1; the draft keeps every
    // layer's index rows, allocate_all_layers, :262-311).
    let base_cell = baseline_cell(&c);
    let base_slots = device_slots(c.available, base_cell, c.page, args);
    let base_per_token = base_cell;
    // --max-running-requests is split over attention-DP workers (kv_cache_configurator.py:3128);
    // the figures here are one worker's (its TP ranks share each request).
    let attn_dp = pos(Some(args.attn_dp_given().0));
    let given = args
        .max_running_requests
        .and_then(|m| u64::try_from(m).ok());
    let spec = h.speculative_num_draft_tokens.is_some();
    let mrr_for = |slots: u64| resolved_max_running_requests(given, spec, attn_dp, slots, max_len);
    let (max_running, max_running_rule) = mrr_for(c.n_dev);
    let (base_running, _) = mrr_for(base_slots);
    let per_req_dev = c.d.saturating_add(64).saturating_add(c.scratch);
    let sweep = Sweep {
        args,
        options,
        c: &c,
        budget,
        base_slots,
        base_per_token,
        base_running,
        max_running,
        per_req_dev,
        given,
        spec,
        attn_dp,
        max_len,
    };
    let contexts = sweep_contexts(max_len, context);
    let at_context = sweep.point(context);
    if at_context.hisparse_requests == Some(0) {
        errors.push(no_requests(
            &c,
            &at_context,
            context,
            per_req_dev,
            max_running,
        ));
    }
    let concurrency = concurrency(&c, &at_context, per_req_dev, base_slots);
    let (tp, dp) = (pos(args.tp_size), pos(args.dp_size));
    Ok(Plan {
        schema_version: crate::report::SCHEMA_VERSION,
        engine: ENGINE_SGLANG.to_owned(),
        engine_version: super::version::VERSION.to_owned(),
        vllm_version: String::new(),
        valid: errors.is_empty(),
        model: report.model.clone(),
        context_length: context,
        max_model_len: max_len,
        sizes: plan_sizes(&c, &h, per_req_dev, base_per_token),
        host: host_plan(&c, host_mem, budget),
        gpu: gpu_plan(
            &c,
            (tp, dp),
            (max_running, max_running_rule.clone()),
            base_slots,
            gpu.clone(),
        ),
        at_context,
        sweep: contexts.into_iter().map(|ctx| sweep.point(ctx)).collect(),
        errors,
        warnings,
        ignored_flags: args.not_read(),
        assumed: None,
        sglang: Some(sglang_sizing(
            &c,
            per_req_dev,
            (max_running, max_running_rule),
            budget,
            base_slots,
        )),
        engine_log: None,
        figures: figures(&c, machine.available_kv_gib.is_some()),
        concurrency: Some(concurrency),
    })
}

/// The machine the plan options describe.
fn machine<'a>(options: &'a PlanOptions, gpu: Option<&'a GpuSpec>) -> Machine<'a> {
    let node = super::resolution::node_gpus(gpu, options.gpus_per_node);
    Machine {
        gpu,
        host_memory_gib: options.host_memory_gib,
        gpu_memory_gib: options.gpu_memory_gib,
        weights_gib: options.weights_gib,
        available_kv_gib: options.available_kv_cache_gib,
        measured_in: options.measured_in.as_deref(),
        gpus_per_node: node.0,
        gpus_per_node_server: node.1,
    }
}

/// The launch's HiSparse settings, or why it cannot be planned.
fn settings(args: &SglangArgs, report: &Report) -> Result<SglangHiSparse, String> {
    match report.sglang_hisparse().cloned() {
        Some(h) => Ok(h),
        None => {
            let codes: Vec<&str> = report.errors.iter().map(|e| e.code.as_str()).collect();
            Err(if args.hisparse_on() {
                format!(
                    "the launch is not valid ({}); run the check",
                    codes.join(", ")
                )
            } else {
                "HiSparse is not enabled (--enable-hisparse)".to_owned()
            })
        }
    }
}

/// The plan's errors and warnings: the check's, the coordinator's room, the
/// node's RAM budget when the pool exceeds it, and a warning when the RAM is
/// not given.
fn plan_diagnostics(
    args: &SglangArgs,
    machine: &Machine<'_>,
    h: &SglangHiSparse,
    report: &Report,
    c: &Capacity,
    budget: Option<u64>,
    host_mem: Option<u64>,
) -> (Vec<Diagnostic>, Vec<Diagnostic>) {
    let mut errors = report.errors.clone();
    let mut warnings = report.warnings.clone();
    warnings.extend(coordinator_room(args, machine, h));
    if budget.is_some_and(|b| c.pool_bytes > b) {
        let mut r = report.clone();
        host_budget_check(args, machine, &mut r);
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
    (errors, warnings)
}

/// What one point of the sweep reads: the capacity and the figures
/// `plan` derives from it.
#[derive(Clone, Copy)]
struct Sweep<'a> {
    args: &'a SglangArgs,
    options: &'a PlanOptions,
    c: &'a Capacity,
    budget: Option<u64>,
    base_slots: u64,
    base_per_token: u64,
    base_running: u64,
    max_running: u64,
    per_req_dev: u64,
    given: Option<u64>,
    spec: bool,
    attn_dp: u64,
    max_len: u64,
}

impl Sweep<'_> {
    /// max_running_requests for `slots` device slots, and its rule.
    fn mrr_for(&self, slots: u64) -> (u64, String) {
        resolved_max_running_requests(self.given, self.spec, self.attn_dp, slots, self.max_len)
    }

    /// Requests one GPU holds with HiSparse at ratio `r`: (device, host, cap).
    fn with_ratio(&self, r: u64, tokens: u64) -> (u64, u64, u64, u64) {
        let Sweep {
            args,
            c,
            per_req_dev,
            ..
        } = *self;
        let mrr_for = |slots: u64| self.mrr_for(slots);
        let (n_dev, pool) = c.at_ratio(args, r);
        let gpu = if c.prompt_on_device && tokens > n_dev {
            0
        } else {
            n_dev / per_req_dev.max(1)
        };
        let host = host_tokens(n_dev, r, c.page) / tokens.max(1);
        (gpu, host, mrr_for(n_dev).0, pool)
    }

    /// One context length's point of the sweep.
    fn point(&self, ctx: u64) -> PlanPoint {
        let Sweep {
            options,
            c,
            budget,
            base_slots,
            base_per_token,
            base_running,
            max_running,
            per_req_dev,
            ..
        } = *self;
        let with_ratio = |r: u64, tokens: u64| self.with_ratio(r, tokens);
        let tokens = crate::sizes::round_up(ctx, c.page);
        let base = if tokens > base_slots {
            0
        } else {
            base_slots / tokens.max(1)
        };
        // Outside P/D decode a whole prompt sits in device slots while it is
        // prefilled (hisparse_coordinator.py:838-876); P/D decode receives it
        // into the host pool (disaggregation/decode.py:2321-2330).
        let gpu_limit = if c.prompt_on_device && tokens > c.n_dev {
            0
        } else {
            c.n_dev / per_req_dev.max(1)
        };
        let host_limit = c.n_host / tokens.max(1);
        let (mut best, mut limit) = (gpu_limit, Limit::Gpu);
        if host_limit < best {
            (best, limit) = (host_limit, Limit::Host);
        }
        if max_running < best {
            (best, limit) = (max_running, Limit::MaxNumSeqs);
        }
        // The smallest ratio whose host pool holds what the GPU holds (or the
        // target), within the node's RAM budget when it is given.
        let want = |r: u64| {
            let (g, _, m, _) = with_ratio(r, tokens);
            options.target_requests.unwrap_or(g.min(m))
        };
        let fits = |pool: u64| budget.is_none_or(|b| pool <= b);
        let mut needed = None;
        for r in 1..=MAX_RATIO_SEARCHED {
            let (_, host, _, pool) = with_ratio(r, tokens);
            if !fits(pool) {
                break;
            }
            needed = Some((r, host.min(want(r)), want(r), pool));
            if host >= want(r) {
                break;
            }
        }
        PlanPoint {
            context_length: ctx,
            host_kv_bytes_per_request: tokens.saturating_mul(c.layers).saturating_mul(c.kv_row),
            indexer_bytes_per_request: tokens.saturating_mul(c.layers).saturating_mul(c.index_row),
            baseline_gpu_bytes_per_request: tokens.saturating_mul(base_per_token),
            hisparse_gpu_blocks_per_request: per_req_dev.div_ceil(c.page),
            hisparse_gpu_bytes_per_request: per_req_dev.saturating_mul(c.cell),
            host_blocks_per_request: tokens / c.page,
            baseline_requests: Some(base.min(base_running)),
            baseline_limit: Some(if base_running < base {
                Limit::MaxNumSeqs
            } else {
                Limit::Gpu
            }),
            gpu_limit: Some(gpu_limit),
            host_limit,
            hisparse_requests: Some(best),
            hisparse_limit: Some(limit),
            // The target is what the device holds at the ratio found (a larger
            // ratio leaves fewer device slots), or --target-requests.
            target_requests: Some(
                needed.map_or(gpu_limit.min(max_running), |(_, _, target, _)| target),
            ),
            min_host_pool_gib: needed.map(|(_, _, _, pool)| round2(pool as f64 / GIB)),
            min_host_pool_requests: needed.map(|(_, held, _, _)| held),
            host_to_device_ratio: needed.map(|(r, _, _, _)| r),
        }
    }
}

/// The sweep's context lengths: doubling from SWEEP_START below max_len,
/// max_len, and the planned context.
fn sweep_contexts(max_len: u64, context: u64) -> Vec<u64> {
    let mut contexts: Vec<u64> = std::iter::successors(Some(SWEEP_START), |x| x.checked_mul(2))
        .take_while(|&x| x < max_len)
        .collect();
    contexts.push(max_len);
    if !contexts.contains(&context) {
        contexts.push(context);
        contexts.sort_unstable();
    }
    contexts
}

/// The plan's sizes: rows, layers, blocks and the hot buffer.
fn plan_sizes(c: &Capacity, h: &SglangHiSparse, per_req_dev: u64, base_per_token: u64) -> Sizes {
    Sizes {
        kv_cache_dtype: h.kv_cache_dtype.value.clone(),
        mla_row_bytes: u32::try_from(c.kv_row).unwrap_or(u32::MAX),
        indexer_row_bytes: u32::try_from(c.index_row).unwrap_or(u32::MAX),
        sparse_mla_layers: u32::try_from(c.layers).unwrap_or(u32::MAX),
        indexer_layers: u32::try_from(c.layers).unwrap_or(u32::MAX),
        draft_layers: u32::try_from(c.draft_layers).unwrap_or(u32::MAX),
        mla_bytes_per_token: c.layers.saturating_mul(c.kv_row),
        indexer_bytes_per_token: c.layers.saturating_mul(c.index_row),
        block_size: u32::try_from(c.page).unwrap_or(u32::MAX),
        device_buffer_size: u32::try_from(c.d).unwrap_or(u32::MAX),
        hot_buffer_bytes: per_req_dev.saturating_mul(c.cell),
        hot_groups: 1,
        baseline_block_bytes: c.page.saturating_mul(base_per_token),
        hisparse_block_bytes: c.page.saturating_mul(c.cell),
    }
}

/// The host side: each rank's private pool and what a node pins.
fn host_plan(c: &Capacity, host_mem: Option<u64>, budget: Option<u64>) -> HostPlan {
    let pinned = c.pool_bytes.saturating_mul(c.pools_per_node);
    let host_block = c.page.saturating_mul(c.layers).saturating_mul(c.kv_row);
    HostPlan {
        mode: PoolMode::Private,
        mode_rule: "every rank pins its own copy: the MLA latent has no head dimension to split (pool_host/base.py:221-229, pool_host/mla.py:195-197)".to_owned(),
        host_pool_gib: round2(c.pool_bytes as f64 / GIB),
        host_block_bytes: host_block,
        host_block_stride: host_block,
        host_blocks: c.n_host / c.page,
        // SGLang sizes the pool from the device slots; the least it builds
        // is the padding page (host_to_device_ratio 0, pool_host/base.py:226-228).
        min_host_blocks: 1,
        min_host_pool_gib: host_block as f64 / GIB,
        pool_bytes: c.pool_bytes,
        pools_per_node: c.pools_per_node,
        pinned_bytes_per_node: pinned,
        host_memory_bytes: host_mem,
        host_memory_source: if host_mem.is_some() { "given with --host-memory-gib".to_owned() } else { "not given".to_owned() },
        usable_host_memory_bytes: budget.map(|b| b.saturating_mul(c.ranks_per_host)),
        host_memory_given: host_mem.is_some(),
        draft_model: None,
    }
}

/// The GPU side: SGLang's KV room, weights and max_running_requests.
fn gpu_plan(
    c: &Capacity,
    (tp, dp): (u64, u64),
    (max_running, max_running_rule): (u64, String),
    base_slots: u64,
    gpu: Option<GpuSpec>,
) -> GpuPlan {
    GpuPlan {
        tensor_parallel_size: tp,
        data_parallel_size: dp,
        kv_bytes_per_gpu: Some(c.available),
        kv_source: c.kv_source.clone(),
        gpu_memory_gib: Some(c.gpu_gib),
        gpu_memory_utilization: c.mem_fraction_static,
        weights_bytes_per_gpu: Some(c.weights),
        weights_source: Some(c.weights_source.clone()),
        weights_estimated: c.weights_estimated,
        max_num_seqs: max_running,
        max_num_seqs_source: max_running_rule,
        baseline_blocks: Some(base_slots / c.page),
        hisparse_blocks: Some(c.n_dev / c.page),
        spec: gpu,
    }
}

/// SGLang's own figures of the plan.
fn sglang_sizing(
    c: &Capacity,
    per_req_dev: u64,
    (max_running, max_running_rule): (u64, String),
    budget: Option<u64>,
    base_slots: u64,
) -> SglangSizing {
    SglangSizing {
        host_to_device_ratio: c.ratio,
        device_cell_bytes: c.cell,
        device_slots: c.n_dev,
        host_tokens: c.n_host,
        request_device_slots: per_req_dev,
        speculative_scratch_slots: c.scratch,
        mem_fraction_static_rule: c.mem_fraction_static_rule.clone(),
        max_running_requests: max_running,
        max_running_requests_rule: max_running_rule,
        ranks_per_host: c.ranks_per_host,
        host_budget_per_rank_bytes: budget,
        baseline_device_slots: base_slots,
        prompt_on_device: c.prompt_on_device,
    }
}

/// Why the device limit is what it is (issue 21 item 4): a decoding request
/// holds `D + 64 + scratch` device slots whatever its length (the hot buffer,
/// managers/hisparse_coordinator.py:644-646; admission, disaggregation/decode.py:1418-1430),
/// so the device limit is the same at every context; only the host limit
/// (host tokens / context) and the baseline (slots / context) shrink with it.
fn concurrency(
    c: &Capacity,
    at: &PlanPoint,
    per_req_dev: u64,
    base_slots: u64,
) -> crate::plan::Concurrency {
    let fixed_rule = format!(
        "device_buffer_size {} + 64 (the newest token's page, managers/hisparse_coordinator.py:644-646){} slots while it decodes (disaggregation/decode.py:1418-1430)",
        c.d,
        if c.scratch > 0 {
            format!(" + {} speculative scratch (:146, :187-193)", c.scratch)
        } else {
            String::new()
        }
    );
    let prefill = if c.prompt_on_device {
        format!("; outside P/D decode the whole prompt also sits in device slots while it is prefilled (managers/hisparse_coordinator.py:838-876), so no context over the {} slots fits", c.n_dev)
    } else {
        String::new()
    };
    let why = format!(
        "one request holds {per_req_dev} device slots whatever its length ({fixed_rule}) and none that grow with it: the {} device slots hold {} requests at every context{prefill}; only the host limit ({} host tokens / {} tokens = {}) shrinks with the context, and without HiSparse every token takes a slot ({base_slots} slots / context)",
        c.n_dev,
        at.gpu_limit.unwrap_or(0),
        c.n_host,
        at.context_length,
        at.host_limit,
    );
    crate::plan::Concurrency {
        unit: "slots".to_owned(),
        gpu_units: Some(c.n_dev),
        per_token_units: 0,
        fixed_units: per_req_dev,
        fixed_rule,
        fixed_share: 1.0,
        why,
    }
}

/// What the SGLang plan's figures are (issue 21 item 3): the KV room measured
/// (an engine log's "Load weight end", `available_kv_cache_gib`) or estimated
/// (GPU x mem_fraction_static - weights: SGLang measures the free memory
/// before loading); the host pool is sized from the device slots
/// (pool_host/base.py:221-229), so it is as sure as the room.
fn figures(c: &Capacity, measured_room: bool) -> crate::plan::Figures {
    use crate::plan::FigureKind as K;
    let weights = if measured_room {
        None
    } else if c.weights_estimated {
        Some(K::Estimated)
    } else {
        Some(K::Measured)
    };
    let kv_room = if measured_room {
        K::Measured
    } else {
        K::Estimated
    };
    crate::plan::Figures::new(kv_room, weights, kv_room)
}

/// `sglang_plan_serves_no_requests`, at the stage where SGLang meets it and
/// on the path that fixes it, saying which limit is zero.
fn no_requests(
    c: &Capacity,
    a: &PlanPoint,
    context: u64,
    per_req_dev: u64,
    max_running: u64,
) -> Diagnostic {
    let gib = crate::plan::gib_text;
    if c.n_dev == 0 {
        // No device slot at all: the weights take the KV room. SGLang fails at
        // the weight load (out of memory) when they exceed the GPU, else when it
        // sizes the pool (pool_configurator.py:94-99).
        let budget = (c.gpu_gib * GIB * c.mem_fraction_static) as u64;
        let over_gpu = c.weights as f64 > c.gpu_gib * GIB;
        let weights = format!(
            "{} of weights{}",
            gib(c.weights),
            if c.weights_estimated {
                " (estimated from config.json; --weights-gib gives the real figure)"
            } else {
                ""
            }
        );
        let msg = if over_gpu {
            format!("the device limit is 0: {weights} per GPU exceed the GPU's {} GiB, so SGLang runs out of memory while it loads them, before its \"Load weight end\" log line (model_executor/model_runner.py:1372-1379); spread the weights over more GPUs (a larger --tp-size over --nnodes) or serve a quantized (fp8) checkpoint", c.gpu_gib)
        } else {
            format!("the device limit is 0: {weights} per GPU leave nothing of mem_fraction_static {} x {} GiB = {} for the KV pool, so SGLang stops with \"Not enough memory. Please try to increase --mem-fraction-static.\" (model_executor/pool_configurator.py:94-99)", c.mem_fraction_static, c.gpu_gib, gib(budget))
        };
        return Diagnostic::error(
            Code::SglangPlanServesNoRequests,
            crate::FieldPath::root("mem_fraction_static"),
            msg,
        )
        .stage(SglangStage::AfterWeightsLoad)
        .given(&json!(c.mem_fraction_static))
        .allowed(format!("a KV room above 0: weights under {}", gib(budget)));
    }
    let mut zero = Vec::new();
    if a.gpu_limit == Some(0) {
        zero.push(if c.prompt_on_device && context > c.n_dev {
            format!("the device limit is 0: the {context}-token prompt does not fit the {} device KV slots while it is prefilled (managers/hisparse_coordinator.py:838-876)", c.n_dev)
        } else {
            format!("the device limit is 0: {} device KV slots per GPU hold no request of D + 64 + scratch = {per_req_dev} slots (disaggregation/decode.py:1418-1430)", c.n_dev)
        });
    }
    if a.host_limit == 0 {
        zero.push(format!(
            "the host limit is 0: the host pool of {} tokens holds no {context}-token request (pool_host/base.py:221-229)",
            c.n_host
        ));
    }
    if max_running == 0 {
        zero.push("max_running_requests is 0".to_owned());
    }
    let path = if a.host_limit == 0 && a.gpu_limit != Some(0) {
        key_path("host_to_device_ratio")
    } else {
        key_path("device_buffer_size")
    };
    Diagnostic::error(Code::SglangPlanServesNoRequests, path, zero.join("; "))
        .stage(SglangStage::Request)
}

/// GiB to 2 decimals, as the vLLM side writes host_pool_gib.
fn round2(g: f64) -> f64 {
    (g * 100.0).round() / 100.0
}
