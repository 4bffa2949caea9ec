//! The check for the machines a configuration runs on: `--gpu`,
//! `--gpu-memory-gib`, `--host-memory-gib`, `--weights-gib` (and
//! `--context-length`, `--target-requests` for the pool it suggests). These
//! are not `vllm serve` flags; vLLM reads the same facts from the machine at
//! start-up, late. On top of [`super::advise::resolve`]:
//!
//! - the GPU's resolver shared-memory limit (vLLM 0.33
//!   `_check_residency_shared_memory`), when the GPU is named;
//! - weights that leave no GPU KV room, when the GPU memory is known
//!   ([`kv_room`], the planner's figure), inside the joint pass like the RAM
//!   check, so an error only other fixes reveal is its own (`revealed`);
//! - the pinned host pools against 95 % of the node's RAM, when it is given
//!   (without it, the plain check cannot know the node; `--plan` uses this
//!   machine's RAM and only warns);
//! - host_pool_gib fixes that offer the pool that lets the GPUs bind (from
//!   the planner, for the configuration the report's fixes give) when the GPU
//!   memory is known, instead of the start-up minimum that holds one request.

use crate::engines::vllm_0_33::advise::{fixed_args, resolve_advised, MachineCheck};
use crate::engines::vllm_0_33::args::ServeArgs;
use crate::engines::vllm_0_33::fixed_flags::fixed_flags;
use crate::engines::vllm_0_33::input::Hw;
use crate::engines::vllm_0_33::kv_room;
use crate::engines::vllm_0_33::planner;
use crate::engines::vllm_0_33::validate::PoolAdvice;
use crate::gpu::{self, GpuSpec};
use crate::model::ModelInfo;
use crate::path::FieldPath;
use crate::plan::{self, PlanError, PlanOptions};
use crate::report::{HostMemoryCheck, Provenance, Report};

/// Check a serve configuration for the machines `options` describes (see the
/// module docs). `Err` for an option out of range or an unknown `--gpu`
/// (usage errors) and for a model config that cannot be read.
pub fn check(args: &ServeArgs, options: &PlanOptions) -> Result<Report, PlanError> {
    Ok(check_with_model(args, options, true)?.0)
}

/// [`check`], also returning the model facts and the GPU; `host_ram` runs the
/// host-RAM check (the planner runs its own).
pub(crate) fn check_with_model(
    args: &ServeArgs,
    options: &PlanOptions,
    host_ram: bool,
) -> Result<(Report, Option<ModelInfo>, Option<GpuSpec>), PlanError> {
    plan::check_options(options)?;
    let gpu = options
        .gpu
        .as_deref()
        .map(gpu::lookup)
        .transpose()
        .map_err(PlanError::Option)?;
    // Given, or (None) the GPU's usual server's, which Hw names.
    let gpus_per_node = options.gpus_per_node;
    let options = &options.with_gpu(gpu.as_ref());
    // The host-RAM check runs inside the joint pass, so a fix whose result
    // pins more than the node holds (a misplaced pool moved into place) takes
    // its fix too.
    // So does the GPU's: weights that leave no KV room, with the GPU memory known.
    let ram = host_ram && options.host_memory_gib.is_some();
    // Not inside vllm serve (the plugin names its RAM's source): there vLLM
    // measures the weights as it loads them, and an estimate must not stop it.
    let room = host_ram && options.gpu_memory_gib.is_some() && options.host_memory_source.is_none();
    let gpu_ref = gpu.as_ref();
    let hw = Hw::new(gpu_ref, gpus_per_node);
    let machine_check = |a: &ServeArgs, m: Option<&ModelInfo>, r: &mut Report, advice| {
        if ram {
            host_ram_check(a, options, r, advice);
        }
        if room {
            weights_room_check(a, options, gpu_ref, m, r);
        }
    };
    let host_check =
        |a: &ServeArgs, m: Option<&ModelInfo>, r: &mut Report| machine_check(a, m, r, None);
    let machine: Option<MachineCheck<'_>> = (ram || room).then_some(&host_check);
    let (mut report, mut model) = resolve_advised(args, hw, None, machine)?;
    // With the GPU memory known, every host_pool_gib fix (host_memory_exceeded's
    // too) offers the pool that lets the GPUs bind, not the start-up minimum
    // nor the most the node's RAM pins.
    if !report.errors.is_empty() {
        if let Some(advice) = binding_pool(args, options, hw, &report) {
            let advised = |a: &ServeArgs, m: Option<&ModelInfo>, r: &mut Report| {
                machine_check(a, m, r, Some(&advice))
            };
            let machine: Option<MachineCheck<'_>> = (ram || room).then_some(&advised);
            (report, model) = resolve_advised(args, hw, Some(&advice), machine)?;
        }
    }
    // Without the node's RAM the pools are not checked: say so on a valid
    // report (what they pin; this machine's RAM is not read).
    if host_ram && options.host_memory_gib.is_none() {
        if let Some(h) = report.vllm_hisparse() {
            let host = planner::node_pools(args, options, h);
            report.warnings.push(planner::pinned_unchecked(&host));
        }
    }
    if ram {
        report.host_memory = host_memory_checked(args, options, &report);
    }
    let fixed = fixed_flags(args, &report.errors);
    (report.fixed_flags, report.fixed_env) = (fixed.flags, fixed.env);
    Ok((report, model, gpu))
}

/// What a valid report's pools pin of the node's RAM, and the headroom left
/// (issue 22: a valid check says the RAM it checked). None on an invalid
/// report, without HiSparse, or when the RAM is unknown.
fn host_memory_checked(
    args: &ServeArgs,
    options: &PlanOptions,
    report: &Report,
) -> Option<HostMemoryCheck> {
    let h = report.vllm_hisparse().filter(|_| report.valid)?;
    let host = planner::host_plan(args, options, h, &mut Vec::new());
    let usable = host.usable_host_memory_bytes?;
    Some(HostMemoryCheck {
        host_memory_gib: options.host_memory_gib?,
        source: host.host_memory_source.clone(),
        pools_per_node: host.pools_per_node,
        pool_bytes: host.pool_bytes,
        pinned_bytes: host.pinned_bytes_per_node,
        usable_bytes: usable,
        left_bytes: usable.saturating_sub(host.pinned_bytes_per_node),
        rule: format!(
            "95 % of the node's RAM, for this node's {} (vLLM 0.33 refuses a pool over 0.95 x the RAM available when its rank pins it: v1/hisparse/runtime.py:195-203 check_hisparse_host_memory)",
            planner::pools_text(&host)
        ),
    })
}

/// With the GPU memory known (and no `--kv-cache-memory-bytes`), a valid
/// configuration whose weights per GPU leave no KV room is refused: the
/// planner's figure ([`kv_room::no_kv_room`]); `--plan` shows the same.
fn weights_room_check(
    args: &ServeArgs,
    options: &PlanOptions,
    gpu: Option<&GpuSpec>,
    model: Option<&ModelInfo>,
    report: &mut Report,
) {
    if !report.valid || options.gpu_memory_gib.is_none() || args.kv_cache_memory_bytes.is_some() {
        return;
    }
    let (Some(h), Some(model)) = (report.vllm_hisparse().cloned(), model) else {
        return;
    };
    if let Some(e) = kv_room::no_kv_room(args, options, report, &h, model, gpu) {
        report.errors.push(e);
        report.valid = false;
        report.hisparse = None;
    }
}

/// The pinned pools of a valid configuration against 95 % of the node's RAM
/// (`options.host_memory_gib`): an error (whose message names the deviation
/// when each pool fits alone) that makes the report invalid.
/// With `advice` (the pool that lets the GPUs bind) below the most the RAM
/// pins, the fix offers it instead.
fn host_ram_check(
    args: &ServeArgs,
    options: &PlanOptions,
    report: &mut Report,
    advice: Option<&PoolAdvice>,
) {
    let Some(h) = report.vllm_hisparse().cloned() else {
        return;
    };
    let host = planner::host_plan(args, options, &h, &mut Vec::new());
    let path = match &h.host_pool_gib.provenance {
        Provenance::Explicit { path } => FieldPath::parse(path).ok(),
        _ => None,
    }
    .unwrap_or_else(|| FieldPath::root("host_pool_gib"));
    let gpu_memory_known = options.gpu_memory_gib.is_some() || args.kv_cache_memory_bytes.is_some();
    if let Some(e) = planner::host_memory_error(&host, &h, &path, gpu_memory_known, advice) {
        report.errors.push(e);
        report.valid = false;
        report.hisparse = None;
    }
}

/// The host pool that lets the GPUs bind, for the configuration the report's
/// fixes give, capped by the node's RAM when it is given; None when the GPU
/// memory is unknown or that configuration does not plan.
fn binding_pool(
    args: &ServeArgs,
    options: &PlanOptions,
    hw: Hw<'_>,
    report: &Report,
) -> Option<PoolAdvice> {
    let gpu = hw.gpu;
    if options.gpu_memory_gib.is_none() && args.kv_cache_memory_bytes.is_none() {
        return None;
    }
    let fixed = fixed_args(args, report)?;
    let (r, model) = resolve_advised(&fixed, hw, None, None).ok()?;
    let (h, model) = (r.vllm_hisparse().cloned()?, model?);
    let p = planner::plan_resolved(&fixed, options, &r, &h, &model, gpu).ok()?;
    let at = &p.at_context;
    // The planner caps the pool by the node's RAM when it is given.
    let (gib, target, held) = (
        at.min_host_pool_gib?,
        at.target_requests?,
        at.min_host_pool_requests?,
    );
    if target == 0 {
        return None;
    }
    let why = match (held < target, options.target_requests) {
        (true, _) => "as many as the node's RAM allows",
        (false, Some(_)) => "the --target-requests",
        (false, None) => "what the GPUs hold",
    };
    Some(PoolAdvice {
        gib,
        holds: format!(
            "{gib} GiB holds {} requests of {} tokens per DP replica, {why} (hisparse-check --plan shows the sweep); the start-up minimum, {} GiB, holds one",
            held,
            at.context_length,
            p.host.min_host_pool_gib
        ),
    })
}
