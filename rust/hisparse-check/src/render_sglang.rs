//! The human-readable report of an SGLang 0.5.23 launch: the resolved
//! HiSparse settings with SGLang's own names and their provenance, then the
//! warnings and errors (shared with vLLM's report: `render::section`), the
//! stage at which SGLang itself would have refused, and the fixed flags.

use crate::render::{model_heading, plural, section};
use hisparse_core::diagnostic::Stage;
use hisparse_core::engines::sglang_0_5_23::stages::SglangStage;
use hisparse_core::engines::sglang_0_5_23::VERSION;
use hisparse_core::{Provenance, Report, Resolved};
use std::fmt::Write;

pub fn human(report: &Report) -> String {
    let mut out = String::new();
    let model = model_heading(report.model.as_ref());
    let _ = writeln!(out, "hisparse-check: {model}; rules of SGLang {VERSION}");
    match (report.sglang_hisparse(), report.hisparse_enabled) {
        (Some(h), _) => {
            let _ = writeln!(
                out,
                "\nHiSparse: enabled ({})",
                provenance(&h.enable_hisparse.provenance)
            );
            let mut rows: Vec<(&str, String, &Provenance)> = vec![
                row("top_k", &h.top_k, |v| v.to_string()),
                row("index_topk", &h.index_topk, |v| {
                    format!("{v} (replaces top_k at run time)")
                }),
                row("device_buffer_size", &h.device_buffer_size, |v| {
                    format!("{v} slots per request")
                }),
                row("host_to_device_ratio", &h.host_to_device_ratio, |v| {
                    v.to_string()
                }),
                row("swap_in_block_size", &h.swap_in_block_size, |v| {
                    v.to_string()
                }),
                row("page_size", &h.page_size, |v| format!("{v} tokens")),
                row("kv_cache_dtype", &h.kv_cache_dtype, Clone::clone),
                row("compute_capability", &h.compute_capability, Clone::clone),
            ];
            if let Some(r) = &h.kv_row_bytes {
                rows.push(row("kv_row_bytes", r, |v| {
                    format!("{v} B per token and layer")
                }));
            }
            // DSA backends: absent for models without DSA (DeepSeek-V4, MiniMax-M3).
            if let Some(r) = &h.dsa_prefill_backend {
                rows.push(row("dsa_prefill_backend", r, Clone::clone));
            }
            if let Some(r) = &h.dsa_decode_backend {
                rows.push(row("dsa_decode_backend", r, Clone::clone));
            }
            rows.push(row("disable_radix_cache", &h.disable_radix_cache, |v| {
                v.to_string()
            }));
            rows.push(row(
                "disaggregation_mode",
                &h.disaggregation_mode,
                Clone::clone,
            ));
            if let Some(r) = &h.speculative_num_draft_tokens {
                rows.push(row("speculative_num_draft_tokens", r, |v| v.to_string()));
            }
            let w = rows.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0);
            for (name, value, prov) in rows {
                let _ = writeln!(out, "  {name:<w$} {value}");
                let _ = writeln!(out, "  {:<w$}   {}", "", provenance(prov));
            }
        }
        (None, true) => {
            let _ = writeln!(
                out,
                "\nHiSparse: --enable-hisparse given, but the launch is invalid (no settings resolved)"
            );
        }
        (None, false) => {
            let _ = writeln!(out, "\nHiSparse: not enabled (no --enable-hisparse)");
        }
    }
    ignored(&mut out, &report.ignored_flags);
    section(&mut out, "warning", &report.warnings);
    section(&mut out, "error", &report.errors);
    if let Some(line) = engine_verdict(report) {
        let _ = writeln!(out, "\n{line}");
    }
    if let Some(flags) = &report.fixed_flags {
        // argparse's refusals are words of the command line, not settings: their fixes are above.
        let argparse = report
            .errors
            .iter()
            .any(|d| d.stage == Stage::Sglang(SglangStage::Argparse));
        let also = if argparse {
            " (and correct the argparse errors above)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "\nWith every fix applied{also}, change these sglang serve flags:\n  {flags}"
        );
    }
    let verdict = if report.valid { "valid" } else { "INVALID" };
    let _ = write!(
        out,
        "\nresult: {verdict} ({} error{}, {} warning{})",
        report.errors.len(),
        plural(report.errors.len()),
        report.warnings.len(),
        plural(report.warnings.len())
    );
    out
}

/// The `sglang serve` flags hisparse-check accepts but does not read.
pub(crate) fn ignored(out: &mut String, flags: &[String]) {
    if !flags.is_empty() {
        let _ = writeln!(
            out,
            "\nignored (sglang serve flags hisparse-check does not read): {}",
            flags.join(" ")
        );
    }
}

/// What SGLang itself would have done: stop at the earliest stage of the
/// errors, or start and then break (stage never).
pub(crate) fn engine_verdict(report: &Report) -> Option<String> {
    let earliest = report
        .errors
        .iter()
        .filter_map(|d| match d.stage {
            Stage::Sglang(s) => Some(s),
            _ => None,
        })
        .min()?;
    Some(match earliest {
        SglangStage::Never => format!(
            "Without this check: SGLang {VERSION} would start with this launch and then break on it or corrupt silently (stage never)"
        ),
        s => format!(
            "Without this check: SGLang {VERSION} would refuse this launch {} (stage {})",
            s.when(),
            s.as_str()
        ),
    })
}

fn row<'a, T>(
    name: &'a str,
    r: &'a Resolved<T>,
    show: impl Fn(&T) -> String,
) -> (&'a str, String, &'a Provenance) {
    (name, show(&r.value), &r.provenance)
}

fn provenance(p: &Provenance) -> String {
    match p {
        Provenance::Explicit { path } => format!("explicit: {path}"),
        Provenance::Inferred { connector } => format!("inferred: {connector}"),
        Provenance::Default { rule } => format!("default: {rule}"),
        Provenance::Derived { from, rule } => {
            format!("derived: {rule} [from {}]", from.join(", "))
        }
    }
}
