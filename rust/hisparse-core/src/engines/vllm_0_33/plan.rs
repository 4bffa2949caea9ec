//! `hisparse-check --plan` and `hisparse_rs.plan()` for vLLM 0.33.0: the
//! check ([`super::check`]) first, then the plan of its resolved HiSparse
//! settings (`super::planner`), or of the HiSparseConnector a configuration
//! without HiSparse would take.

use crate::diagnostic::{apply_fix, Code, Diagnostic};
use crate::engines::vllm_0_33::args::ServeArgs;
use crate::engines::vllm_0_33::check::check_with_model;
use crate::engines::vllm_0_33::kv_room;
use crate::engines::vllm_0_33::planner::plan_resolved;
use crate::engines::vllm_0_33::validate::add_hisparse_connector;
use crate::gpu::GpuSpec;
use crate::model::ModelInfo;
use crate::plan::{AssumedHiSparse, Plan, PlanError, PlanOptions};
use crate::report::Report;
use crate::report::ResolvedHiSparse;
use crate::sizes::GIB;
use serde_json::Value;

/// Plan a serve configuration. Returns the check report, and the plan when the
/// configuration is valid: of its HiSparse settings, or, when it has none, of
/// the HiSparseConnector it would take (`Plan::assumed` says which).
pub fn plan(args: &ServeArgs, options: &PlanOptions) -> Result<(Report, Option<Plan>), PlanError> {
    let (report, model, gpu) = check_with_model(args, options, false)?;
    let options = options.with_gpu(gpu.as_ref());
    match (report.vllm_hisparse().cloned(), model) {
        (Some(h), Some(model)) => {
            let mut plan = plan_resolved(args, &options, &report, &h, &model, gpu.as_ref())?;
            no_room_error(args, &options, &report, &h, &model, gpu.as_ref(), &mut plan);
            Ok((report, Some(plan)))
        }
        _ if report.valid && !report.hisparse_enabled => {
            let plan = plan_assumed(args, &options, gpu.as_ref())?;
            Ok((report, Some(plan)))
        }
        _ => Ok((report, None)),
    }
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

/// Weights that leave no GPU KV room are the plain check's `no_gpu_kv_room`
/// error, with its fix ([`kv_room::no_kv_room`]), in place of the planner's
/// warning and of `plan_serves_no_requests` (whose "lower
/// device_buffer_size" cannot help when there is no KV room at all).
fn no_room_error(
    args: &ServeArgs,
    options: &PlanOptions,
    report: &Report,
    h: &ResolvedHiSparse,
    model: &ModelInfo,
    gpu: Option<&GpuSpec>,
    plan: &mut Plan,
) {
    if kv_room::room_warning(plan).is_none() || args.kv_cache_memory_bytes.is_some() {
        return;
    }
    let Some(e) = kv_room::no_kv_room(args, options, report, h, model, gpu) else {
        return;
    };
    plan.warnings.retain(|w| w.code != Code::NoGpuKvRoom);
    plan.errors.retain(|d| d.code != Code::PlanServesNoRequests);
    plan.errors.insert(0, e);
}
