//! SGLang 0.5.23's reading of HiSparse (`--enable-hisparse --hisparse-config`),
//! from the 0.5.23 wheel, the final word: each rule cites `srt/...py:line`
//! of the wheel.
//!
//! Data flows one way, in layers (each file imports only those below it; the
//! module-graph test holds it): `args` ([`SglangArgs`], the `ServerArgs`
//! attributes) and `hisparse_config` (the JSON as SGLang reads it) ->
//! `diagnostics` + `flags` (an SGLang diagnostic, its fix as `sglang serve`
//! words) -> `resolution` (the model and the defaults, with provenance) ->
//! `rules_resolve` / `rules_check` / `rules_late` (stages S1, S2, S3-S7, each
//! with SGLang's message and file:line) and `deviations` (what SGLang does not
//! check) -> `resolve` (every rule at once, the report) -> `fixes` (the fix
//! form) -> `fixed_flags` -> `plan` (capacity, the host-RAM budget) -> `check`
//! (all of it for the machines) -> this module's entry points.
//!
//! Entry points (stable; the CLI and Python build on them):
//! - `resolve(&SglangArgs) -> Report`: the verdict without machine facts
//!   (SM 9.0 assumed; a model that cannot be read is an error diagnostic).
//! - `check(&SglangArgs, &PlanOptions) -> Result<Report, PlanError>`: with
//!   `options.gpu` (SM, memory) and `options.host_memory_gib` (RAM budget);
//!   `Err` only for options out of range or an unknown `--gpu`.
//! - `plan(&SglangArgs, &PlanOptions) -> Result<Plan, PlanError>`: the
//!   capacity plan of a valid launch; `Err(PlanError::Option)` when the launch
//!   is not valid with HiSparse on (its report says why).
//!
//! Every diagnostic has an SGLang stage ([`stages::SglangStage`]) set
//! explicitly, and the report has `engine: "sglang"`, `engine_version: "0.5.23"`.

pub mod args;
pub(crate) mod check;
pub mod codes;
pub mod deviations;
pub mod diagnostics;
pub(crate) mod dsa_dtype;
pub mod engine_log;
pub mod fixed_flags;
pub mod fixes;
pub mod flags;
pub mod hisparse_config;
pub mod plan;
pub mod resolution;
pub mod resolve;
pub(crate) mod rules_check;
pub(crate) mod rules_config;
pub(crate) mod rules_context;
pub(crate) mod rules_kv;
pub(crate) mod rules_late;
pub(crate) mod rules_parallel;
pub(crate) mod rules_resolve;
pub(crate) mod rules_spec;
pub mod settings;
pub mod stages;
pub mod version;

pub use args::SglangArgs;
pub use plan::plan;
pub use resolve::resolve;
pub use rules_context::{env_true as allow_longer_context, ALLOW_LONGER_CONTEXT_ENV};
pub use settings::SglangHiSparse;

use crate::plan::{PlanError, PlanOptions};
use crate::report::Report;

pub use version::VERSION;

/// `args` with the fixes of every diagnostic in `diags` applied in order
/// (the JSON form, `hisparse_config` as an object); None when one does not apply.
pub fn fixes_applied(args: &SglangArgs, diags: &[crate::Diagnostic]) -> Option<SglangArgs> {
    fixes::apply_all(args, diags)
}

/// Check an SGLang launch for the machines `options` describes: the GPU's
/// compute capability (`options.gpu`; without it SM 9.0 is assumed and a
/// warning says so), the host pool against the node's RAM budget
/// (`options.host_memory_gib`), and the fixes as SGLang flags
/// (`Report::fixed_flags`). `Err` for an option out of range or an unknown GPU.
pub fn check(args: &SglangArgs, options: &PlanOptions) -> Result<Report, PlanError> {
    plan::check_planned_length(options)?;
    crate::plan::check_options(options)?;
    if let Some(e) = resolution::unreadable_model(args) {
        return Err(PlanError::Load(e));
    }
    let gpu = options
        .gpu
        .as_deref()
        .map(crate::gpu::lookup)
        .transpose()
        .map_err(PlanError::Option)?;
    let node = resolution::node_gpus(gpu.as_ref(), options.gpus_per_node);
    let machine = resolution::Machine {
        gpu: gpu.as_ref(),
        host_memory_gib: options.host_memory_gib,
        gpu_memory_gib: options.gpu_memory_gib,
        weights_gib: options.weights_gib,
        available_kv_gib: options.available_kv_cache_gib,
        measured_in: options.measured_in.as_deref(),
        gpus_per_node: node.0,
        gpus_per_node_server: node.1,
    };
    let mut report = check::check_fixed(args, &machine);
    report.gpu = gpu;
    Ok(report)
}

#[cfg(test)]
mod tests;
