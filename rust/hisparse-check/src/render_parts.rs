//! What every human-readable output prints the same way, in the engine's
//! words ([`Dialect`]): the first line, the resolved rows with their
//! provenance, the ignored flags, the warning and error sections, the
//! "Without this check" line, the fixes to paste and the result line. The
//! check renderers (render.rs, render_sglang.rs) and the plan renderers
//! (render_plan.rs, render_plan_sglang.rs) keep only their engine's settings
//! and figures.

use crate::dialect::Dialect;
use hisparse_core::plan::gib_text;
use hisparse_core::report::ModelSummary;
use hisparse_core::{Diagnostic, Provenance, Report, Resolved};
use serde_json::Value;
use std::fmt::Write;

/// "Architecture (source)" for the first line of the check and plan output.
pub(crate) fn model_heading(model: Option<&ModelSummary>) -> String {
    model.map_or_else(
        || "no model".to_owned(),
        |m| {
            format!(
                "{} ({})",
                m.architecture
                    .as_deref()
                    .or(m.model_type.as_deref())
                    .unwrap_or("unknown architecture"),
                m.source
            )
        },
    )
}

/// The first line: "`{program}`: Architecture (source); rules of vLLM 0.33.0".
pub(crate) fn heading(
    out: &mut String,
    program: &str,
    model: Option<&ModelSummary>,
    d: &Dialect,
    version: &str,
) {
    let _ = writeln!(
        out,
        "{program}: {}; rules of {} {version}",
        model_heading(model),
        d.name
    );
}

/// One resolved setting: its name, its value as printed, its provenance.
pub(crate) fn row<'a, T>(
    name: &'a str,
    r: &'a Resolved<T>,
    show: impl Fn(&T) -> String,
) -> (&'a str, String, &'a Provenance) {
    (name, show(&r.value), &r.provenance)
}

/// The rows in one column as wide as the longest name, each value with its
/// provenance below it; returns that width.
pub(crate) fn rows(out: &mut String, rows: Vec<(&str, String, &Provenance)>) -> usize {
    let w = rows.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0);
    for (name, value, prov) in rows {
        let _ = writeln!(out, "  {name:<w$} {value}");
        let _ = writeln!(out, "  {:<w$}   {}", "", provenance(prov));
    }
    w
}

pub(crate) fn provenance(p: &Provenance) -> String {
    match p {
        Provenance::Explicit { path } => format!("explicit: {path}"),
        Provenance::Inferred { connector } => format!("inferred: {connector}"),
        Provenance::Default { rule } => format!("default: {rule}"),
        Provenance::Derived { from, rule } => format!("derived: {rule} [from {}]", from.join(", ")),
    }
}

/// The engine's flags hisparse-check accepts but does not read (one term for
/// the check and the plan).
pub(crate) fn ignored(out: &mut String, d: &Dialect, flags: &[String]) {
    if !flags.is_empty() {
        let _ = writeln!(
            out,
            "\nignored ({} flags hisparse-check does not read): {}",
            d.program,
            flags.join(" ")
        );
    }
}

/// The warnings or errors, each with its stage, what was given, what is
/// allowed and its fix.
pub(crate) fn section(out: &mut String, kind: &str, diags: &[Diagnostic]) {
    if diags.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{}{} ({}):", kind, plural(diags.len()), diags.len());
    for d in diags {
        let _ = writeln!(out, "  {kind}[{}] {}", d.code.as_str(), d.path);
        let _ = writeln!(out, "    {}", d.message);
        // Warnings the engine takes as they are say nothing more.
        if d.is_error() || d.stage.as_str() != "never" {
            let _ = writeln!(
                out,
                "    stage:   {}: {}",
                d.stage.as_str(),
                hisparse_core::engines::stage_sentence(d.stage, d.is_error())
            );
        }
        if let Some(given) = &d.given {
            let _ = writeln!(out, "    given:   {}", short(given));
        }
        if let Some(allowed) = &d.allowed {
            let _ = writeln!(out, "    allowed: {allowed}");
        }
        if let Some(hint) = &d.hint {
            let _ = writeln!(out, "    fix:     {hint}");
        }
    }
}

/// The ignored flags, then the warnings and the errors.
pub(crate) fn findings(
    out: &mut String,
    d: &Dialect,
    ignored_flags: &[String],
    warnings: &[Diagnostic],
    errors: &[Diagnostic],
) {
    ignored(out, d, ignored_flags);
    section(out, "warning", warnings);
    section(out, "error", errors);
}

/// What the engine itself would have done with these errors: it stops at the
/// earliest stage of them (a preflight saved that much of a start-up), or
/// starts and then breaks (stage never).
pub(crate) fn engine_verdict(d: &Dialect, errors: &[Diagnostic]) -> Option<String> {
    let e = (d.earliest)(errors)?;
    let (name, v, given) = (d.name, d.version, d.given);
    Some(if e.never {
        format!(
            "Without this check: {name} {v} would start with this {given} and then break on it or {} (stage never)",
            d.never
        )
    } else {
        format!(
            "Without this check: {name} {v} would refuse this {given} {} (stage {})",
            e.when, e.name
        )
    })
}

/// The flags (and environment) that apply every fix at once, to paste;
/// `also` follows "With every fix applied" (SGLang's argparse note).
pub(crate) fn fixes(
    out: &mut String,
    d: &Dialect,
    also: &str,
    flags: Option<&str>,
    env: Option<&str>,
) {
    if let Some(flags) = flags {
        let _ = writeln!(
            out,
            "\nWith every fix applied{also}, change these {} flags:\n  {flags}",
            d.program
        );
    }
    if let Some(env) = env {
        let _ = writeln!(
            out,
            "\nWith every fix applied, change the environment (before {}):\n  {env}",
            d.program
        );
    }
}

/// A check report's last parts: ignored flags, warnings, errors, the
/// "Without this check" line, the fixes to paste (`also`: see [`fixes`]), and
/// "result: valid" or "result: INVALID".
pub(crate) fn report_tail(out: &mut String, d: &Dialect, report: &Report, also: &str) {
    host_memory(out, report);
    findings(
        out,
        d,
        &report.ignored_flags,
        &report.warnings,
        &report.errors,
    );
    if let Some(line) = engine_verdict(d, &report.errors) {
        let _ = writeln!(out, "\n{line}");
    }
    fixes(
        out,
        d,
        also,
        report.fixed_flags.as_deref(),
        report.fixed_env.as_deref(),
    );
    let verdict = if report.valid { "valid" } else { "INVALID" };
    result_line(out, verdict, report.errors.len(), report.warnings.len());
}

/// A valid report's RAM headroom, when the node's RAM is known: what the
/// pinned pools take of what the engine lets them pin, and what is left.
fn host_memory(out: &mut String, report: &Report) {
    let Some(m) = &report.host_memory else {
        return;
    };
    let _ = writeln!(
        out,
        "\nhost RAM: {} GiB ({}): the {} pool{} pin{} {} of the {} usable, {} left\n  usable: {}",
        m.host_memory_gib,
        m.source,
        m.pools_per_node,
        plural(usize::try_from(m.pools_per_node).unwrap_or(usize::MAX)),
        if m.pools_per_node == 1 { "s" } else { "" },
        gib_text(m.pinned_bytes),
        gib_text(m.usable_bytes),
        gib_text(m.left_bytes),
        m.rule
    );
}

/// The last line: "result: {verdict} (n errors, m warnings)", no newline after it.
pub(crate) fn result_line(out: &mut String, verdict: &str, errors: usize, warnings: usize) {
    let _ = write!(
        out,
        "\nresult: {verdict} ({errors} error{}, {warnings} warning{})",
        plural(errors),
        plural(warnings)
    );
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 160 {
        format!("{}...", text.chars().take(157).collect::<String>())
    } else {
        text
    }
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
