//! Resolution of an SGLang 0.5.23 launch (stage S1, `ServerArgs.resolve_once`,
//! srt/arg_groups/pipeline.py): the model, the defaults HiSparse depends on,
//! each with its provenance, then every rule of S1-S7 and every deviation at
//! once (SGLang stops at the first failure; we report them all).

use super::args::SglangArgs;
use super::hisparse_config as hc;
use super::resolution::{
    derived, explicit, kv_row_bytes, raw_layout, resolution, Machine, Resolution,
};
use super::settings::SglangHiSparse;
use super::{
    deviations, rules_check, rules_config, rules_context, rules_kv, rules_late, rules_parallel,
    rules_resolve, rules_spec,
};
use crate::diagnostic::Diagnostic;
use crate::report::{
    HiSparseSettings, ModelSummary, Report, Resolved, ENGINE_SGLANG, SCHEMA_VERSION,
};
use serde_json::Value;

/// Resolve an SGLang launch without machine facts (SM 9.0 assumed).
pub fn resolve(args: &SglangArgs) -> Report {
    resolve_for(args, &Machine::default())
}

/// Resolve for the machine (see [`Machine`]).
pub fn resolve_for(args: &SglangArgs, machine: &Machine<'_>) -> Report {
    let mut diags = Vec::new();
    let r = resolution(args, machine, &mut diags);
    // S1's rules fire with or without HiSparse (those about HiSparse check it
    // themselves); S2 onwards are HiSparse's, but for the chunked-prefill page rule.
    rules_resolve::check(&r, &mut diags);
    rules_kv::check(&r, &mut diags);
    rules_spec::check(&r, &mut diags);
    rules_context::check(&r, &mut diags);
    rules_parallel::check_resolve(&r, &mut diags);
    rules_parallel::check_check(&r, &mut diags);
    rules_check::check_always(&r, &mut diags);
    if args.hisparse_on() {
        rules_check::check(&r, &mut diags);
        rules_config::check(&r, &mut diags);
        rules_late::check(&r, &mut diags);
    }
    deviations::check(&r, &mut diags);
    rules_spec::adaptive_revived_by_fixes(&r, &mut diags);
    report(&r, diags)
}

/// An int setting; a bool is Python's 0 or 1 (`{"top_k": true}` starts, and
/// SGLang holds True, which equals 1).
fn int_resolved(r: &Resolved<Value>) -> Option<Resolved<i64>> {
    let v = match &r.value {
        Value::Bool(b) => Some(i64::from(*b)),
        other => hc::as_int(other),
    };
    v.map(|v| Resolved::new(v, r.provenance.clone()))
}

/// top_k as Python holds it: any number (`2048.5` and `nan` pass SGLang's
/// checks when a buffer is given, and are never used again), a bool as 0 or 1.
/// A string stands for a float or an integer [`crate::pyvalue::PyValue::to_json`]
/// cannot write as a JSON number; anything else never gets this far.
fn number_resolved(r: &Resolved<Value>) -> Option<Resolved<Value>> {
    let v = match &r.value {
        Value::Bool(b) => Value::from(i64::from(*b)),
        n @ (Value::Number(_) | Value::String(_)) => n.clone(),
        _ => return None,
    };
    Some(Resolved::new(v, r.provenance.clone()))
}

fn settings(r: &Resolution<'_>) -> Option<SglangHiSparse> {
    let index_topk = r.index_topk?;
    Some(SglangHiSparse {
        enable_hisparse: Resolved::new(true, explicit("enable_hisparse")),
        top_k: number_resolved(&r.top_k)?,
        index_topk: Resolved::new(index_topk, derived(&["config.json:index_topk"], "the model's index_topk replaces top_k at run time (model_executor/model_runner.py:1039-1041)")),
        device_buffer_size: int_resolved(&r.device_buffer_size)?,
        host_to_device_ratio: int_resolved(&r.host_to_device_ratio)?,
        swap_in_block_size: int_resolved(&r.swap_in_block_size)?,
        page_size: r.page_size.clone(),
        kv_cache_dtype: r.kv_cache_dtype.clone(),
        compute_capability: r.compute_capability.clone(),
        dsa_prefill_backend: r.dsa_prefill_backend.clone(),
        dsa_decode_backend: r.dsa_decode_backend.clone(),
        disable_radix_cache: r.disable_radix_cache.clone(),
        disaggregation_mode: r.disaggregation_mode.clone(),
        speculative_num_draft_tokens: r.speculative.as_ref().map(|s| s.2.clone()),
        kv_row_bytes: r.model.as_ref().and_then(|m| kv_row_bytes(&r.kv_cache_dtype.value, m, raw_layout(r))).map(|b| {
            Resolved::new(b, derived(&["kv_cache_dtype", "kv_lora_rank", "qk_rope_head_dim"], "mem_cache/kv_cache_configurator.py:3412-3475"))
        }),
    })
}

fn report(r: &Resolution<'_>, diags: Vec<Diagnostic>) -> Report {
    let (errors, warnings): (Vec<_>, Vec<_>) = diags.into_iter().partition(Diagnostic::is_error);
    let valid = errors.is_empty();
    let hisparse = (valid && r.args.hisparse_on())
        .then(|| settings(r))
        .flatten()
        .map(HiSparseSettings::Sglang);
    Report {
        schema_version: SCHEMA_VERSION,
        engine: ENGINE_SGLANG.to_owned(),
        engine_version: super::version::VERSION.to_owned(),
        vllm_version: None,
        valid,
        hisparse_enabled: r.args.hisparse_on(),
        model: r.model.as_ref().map(|m| ModelSummary {
            source: r.model_source.clone().unwrap_or_default(),
            architecture: m.architecture.clone(),
            model_type: m.model_type.clone(),
        }),
        hisparse,
        errors,
        warnings,
        gpu: None,
        ignored_flags: r.args.not_read(),
        fixed_flags: None,
        fixed_env: None,
        host_memory: None,
    }
}
