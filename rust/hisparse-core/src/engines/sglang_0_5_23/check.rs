//! The full check of an SGLang launch: resolution with every rule, the host
//! pool against the node's RAM budget (when the machine is known), the
//! errors only the fixes together reveal, and the fixes as SGLang flags. The
//! top of the tree: it calls the layers below.

use super::args::SglangArgs;
use super::fixed_flags::fixed_flags;
use super::fixes::apply_all;
use super::plan;
use super::resolution::Machine;
use super::resolve::resolve_for;
use crate::report::Report;

/// Rounds of [`reveal`]: each applies every fix so far and checks again.
const REVEAL_ROUNDS: usize = 4;

/// The full check: resolution, the host RAM budget (when the machine is
/// known), the revealed errors, and the fixed flags.
pub(crate) fn check_fixed(args: &SglangArgs, machine: &Machine<'_>) -> Report {
    let mut report = checked(args, machine);
    reveal(args, machine, &mut report);
    report.fixed_flags = fixed_flags(args, &report.errors);
    report
}

/// One launch's rules, its RAM budget and the coordinator's room.
fn checked(args: &SglangArgs, machine: &Machine<'_>) -> Report {
    let mut report = resolve_for(args, machine);
    plan::host_budget_check(args, machine, &mut report);
    if let Some(h) = report.sglang_hisparse().cloned() {
        report
            .warnings
            .extend(plan::coordinator_room(args, machine, &h));
    }
    report
}

/// The errors that only the fixes together reveal (issue 22): the RAM budget
/// runs on a launch the other rules pass, so a launch refused for its radix
/// cache that would then pin more than the node holds gets both errors in
/// one report. Each joins after the errors with a fix, marked `revealed`,
/// with its own message and fix (which names places as they are after the
/// other fixes): pasting the printed flags once passes, or leaves only errors
/// without a fix.
fn reveal(args: &SglangArgs, machine: &Machine<'_>, report: &mut Report) {
    for _ in 0..REVEAL_ROUNDS {
        if report.errors.iter().all(|e| e.fix.is_empty()) {
            return;
        }
        let Some(fixed) = apply_all(args, &report.errors) else {
            return;
        };
        let again = checked(&fixed, machine);
        let new: Vec<_> = again
            .errors
            .into_iter()
            .filter(|e| {
                !report
                    .errors
                    .iter()
                    .any(|d| d.code == e.code && d.path == e.path)
            })
            .collect();
        if !report.insert_revealed(new) {
            return;
        }
    }
}
