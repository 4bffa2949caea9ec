//! Fixes on the JSON form of [`SglangArgs`]: every error's [`FixOp`]s, applied
//! in report order, re-checked. The fix form has `hisparse_config` as an
//! object (its JSON text parsed), so fixes of its keys (`hisparse_config.device_buffer_size`)
//! compose with each other and keep the user's other keys.

use super::args::SglangArgs;
use super::fixed_flags::fixed_flags;
use super::plan;
use super::resolve::{resolve_for, Machine};
use crate::diagnostic::{apply_fix, Diagnostic};
use crate::report::Report;
use serde_json::Value;

/// `args` as JSON, with `hisparse_config` parsed into an object when its
/// text is a JSON object (else as given).
pub fn fix_form(args: &SglangArgs) -> Value {
    let mut v = args.to_json();
    if let Some(Value::String(text)) = v.get("hisparse_config") {
        if let Ok(obj @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
            v["hisparse_config"] = obj;
        }
    }
    v
}

/// `args` with the fixes of every diagnostic in `diags` applied, or None when
/// one does not apply or the result is not `SglangArgs`.
pub fn apply_all(args: &SglangArgs, diags: &[Diagnostic]) -> Option<SglangArgs> {
    let mut doc = fix_form(args);
    for d in diags {
        apply_fix(&mut doc, &d.fix).ok()?;
    }
    SglangArgs::from_json(doc).ok()
}

/// The full check: resolution, the host RAM budget (when the machine is
/// known), and the fixed flags.
pub(crate) fn check_fixed(args: &SglangArgs, machine: &Machine<'_>) -> Report {
    let mut report = resolve_for(args, machine);
    plan::host_budget_check(args, machine, &mut report);
    report.fixed_flags = fixed_flags(args, &report.errors);
    report
}
