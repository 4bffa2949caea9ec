//! The full check of an SGLang launch: resolution with every rule, the host
//! pool against the node's RAM budget (when the machine is known), and the
//! fixes as SGLang flags. The top of the tree: it calls the layers below.

use super::args::SglangArgs;
use super::fixed_flags::fixed_flags;
use super::plan;
use super::resolution::Machine;
use super::resolve::resolve_for;
use crate::report::Report;

/// The full check: resolution, the host RAM budget (when the machine is
/// known), and the fixed flags.
pub(crate) fn check_fixed(args: &SglangArgs, machine: &Machine<'_>) -> Report {
    let mut report = resolve_for(args, machine);
    plan::host_budget_check(args, machine, &mut report);
    if let Some(h) = report.sglang_hisparse().cloned() {
        report
            .warnings
            .extend(plan::coordinator_room(args, machine, &h));
    }
    report.fixed_flags = fixed_flags(args, &report.errors);
    report
}
