//! SGLang 0.5.23's reading of HiSparse (`--enable-hisparse --hisparse-config`),
//! from the 0.5.23 wheel (`shared/spec/SGLANG.md` has the facts; each rule
//! cites `srt/...py:line` of the wheel).
//!
//! Data flows one way: [`SglangArgs`] (the `ServerArgs` attributes, `args`)
//! -> [`resolve`] (defaults with provenance and every rule of stages S0-S7
//! at once, `resolve` + `rules_resolve` / `rules_check` / `rules_late`,
//! SGLang's own messages; deviations from SGLang in `deviations`)
//! -> [`check`] (adds the machines: `--gpu`'s compute capability, the node's
//! RAM, and the fixes as SGLang flags, `fixes` + `fixed_flags`)
//! -> [`plan()`] (device slots, requests served, pinned host RAM, `plan`).
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
pub mod codes;
pub mod deviations;
pub mod fixed_flags;
pub(crate) mod fixes;
pub mod hisparse_config;
pub mod plan;
pub mod resolve;
pub(crate) mod rules_check;
pub(crate) mod rules_late;
pub(crate) mod rules_resolve;
pub mod settings;
pub mod stages;

pub use args::SglangArgs;
pub use plan::plan;
pub use resolve::resolve;
pub use settings::SglangHiSparse;

use crate::plan::{PlanError, PlanOptions};
use crate::report::Report;

/// The SGLang release whose behaviour this module follows.
pub const VERSION: &str = "0.5.23";

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
    crate::plan::check_options(options)?;
    let gpu = options
        .gpu
        .as_deref()
        .map(crate::gpu::lookup)
        .transpose()
        .map_err(PlanError::Option)?;
    let machine = resolve::Machine {
        gpu: gpu.as_ref(),
        host_memory_gib: options.host_memory_gib,
        gpu_memory_gib: options.gpu_memory_gib,
        weights_gib: options.weights_gib,
    };
    let mut report = fixes::check_fixed(args, &machine);
    report.gpu = gpu;
    Ok(report)
}

#[cfg(test)]
mod tests;
