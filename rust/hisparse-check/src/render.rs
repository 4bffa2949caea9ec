//! Human-readable report: resolved settings with provenance, then warnings,
//! then errors, each with what was given, what is allowed and the fix.

use hisparse_core::diagnostic::Stage;
use hisparse_core::engines::vllm_0_33::args::flag_name;
use hisparse_core::engines::vllm_0_33::stages::VllmStage;
use hisparse_core::report::ModelSummary;
use hisparse_core::{Code, Diagnostic, Provenance, Report, Resolved};
use serde_json::Value;
use std::fmt::Write;

/// "Architecture (source)" for the first line of the check and plan output.
pub fn model_heading(model: Option<&ModelSummary>) -> String {
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

pub fn human(report: &Report) -> String {
    let mut out = String::new();
    let model = model_heading(report.model.as_ref());
    let _ = writeln!(
        out,
        "hisparse-check: {model}; rules of {} {}",
        if report.engine == hisparse_core::report::ENGINE_SGLANG {
            "SGLang"
        } else {
            "vLLM"
        },
        report.engine_version
    );
    match (report.vllm_hisparse(), report.hisparse_enabled) {
        (Some(h), _) => {
            let why = match &h.enabled.provenance {
                Provenance::Explicit { path } => format!("explicit ({path})"),
                Provenance::Inferred { connector } => {
                    format!("inferred from the HiSparseConnector at {connector}")
                }
                _ => String::new(),
            };
            let _ = writeln!(out, "\nHiSparse: enabled, {why}");
            let mut rows: Vec<(&str, String, &Provenance)> = vec![
                row("host_pool_gib", &h.host_pool_gib, |v| format!("{v} GiB")),
                row("device_buffer_size", &h.device_buffer_size, |v| {
                    format!("{v} rows")
                }),
                row("eager_host_mirror", &h.eager_host_mirror, |v| v.to_string()),
                row("index_topk", &h.index_topk, |v| v.to_string()),
                row("topk_buffer_width", &h.topk_buffer_width, |v| {
                    format!("{v} rows per query")
                }),
                row("max_decode_query_len", &h.max_decode_query_len, |v| {
                    v.to_string()
                }),
                row("kv_cache_dtype", &h.kv_cache_dtype, |v| v.clone()),
            ];
            if let Some(r) = &h.row_bytes {
                rows.push(row("row_bytes", r, |v| format!("{v} B")));
            }
            rows.push(row("block_size", &h.block_size, |v| format!("{v} tokens")));
            rows.push(row("max_model_len", &h.max_model_len, |v| {
                format!("{v} tokens")
            }));
            rows.push(row("sparse_mla_layers", &h.sparse_mla_layers, |v| {
                v.to_string()
            }));
            if let Some(r) = &h.host_block_bytes {
                rows.push(row("host_block_bytes", r, |v| format!("{v} B")));
            }
            if let Some(r) = &h.host_block_stride {
                rows.push(row("host_block_stride", r, |v| format!("{v} B")));
            }
            if let Some(r) = &h.host_blocks {
                rows.push(row("host_blocks", r, |v| v.to_string()));
            }
            rows.push(row("min_host_blocks", &h.min_host_blocks, |v| {
                v.to_string()
            }));
            if let Some(r) = &h.residency_shared_memory_bytes {
                rows.push(row("resolver_shared_memory", r, |v| {
                    format!("{v} B per block (vLLM's residency resolver)")
                }));
            }
            // One column, as wide as the longest name.
            let w = rows
                .iter()
                .map(|(name, _, _)| name.len())
                .max()
                .unwrap_or(0);
            for (name, value, prov) in rows {
                let _ = writeln!(out, "  {name:<w$} {value}");
                let _ = writeln!(out, "  {:<w$}   {}", "", provenance(prov));
            }
            if let Some(ours) = h.triton_resolver_shared_memory_bytes {
                let _ = writeln!(
                    out,
                    "  {:<w$}   hisparse_rs Triton resolver: {ours} B per program",
                    ""
                );
            }
            if let Some(g) = &report.gpu {
                let _ = writeln!(
                    out,
                    "  {:<w$}   {} allows {} B per block ({})",
                    "", g.name, g.max_shared_memory_per_block, g.shared_memory_source
                );
            }
        }
        (None, true) => {
            let _ = writeln!(
                out,
                "\nHiSparse: configured, but the configuration is invalid (no settings resolved)"
            );
        }
        (None, false) => {
            // A flag that could configure HiSparse and is not JSON: unknown, not off.
            let unread: Vec<String> = report
                .errors
                .iter()
                .filter(|e| e.code == Code::InvalidJson)
                .map(|e| e.path.to_string())
                .filter(|p| p == "kv_transfer_config" || p == "attention_config")
                .map(|p| flag_name(&p))
                .collect();
            let _ = if unread.is_empty() {
                writeln!(
                    out,
                    "\nHiSparse: not configured (no HiSparseConnector and no hisparse_config)"
                )
            } else {
                writeln!(
                    out,
                    "\nHiSparse: unknown: {} could not be read (not valid JSON, see the errors)",
                    unread.join(" and ")
                )
            };
        }
    }
    ignored(&mut out, &report.ignored_flags);
    section(&mut out, "warning", &report.warnings);
    section(&mut out, "error", &report.errors);
    if let Some(line) = engine_verdict(&report.errors) {
        let _ = writeln!(out, "\n{line}");
    }
    if let Some(flags) = &report.fixed_flags {
        let _ = writeln!(
            out,
            "\nWith every fix applied, change these vllm serve flags:\n  {flags}"
        );
    }
    if let Some(env) = &report.fixed_env {
        let _ = writeln!(
            out,
            "\nWith every fix applied, change the environment (before vllm serve):\n  {env}"
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
        Provenance::Derived { from, rule } => format!("derived: {rule} [from {}]", from.join(", ")),
    }
}

/// The vllm serve flags hisparse-check accepts but does not read (one term
/// for the check and the plan).
pub(crate) fn ignored(out: &mut String, flags: &[String]) {
    if !flags.is_empty() {
        let _ = writeln!(
            out,
            "\nignored (vllm serve flags hisparse-check does not read): {}",
            flags.join(" ")
        );
    }
}

pub(crate) fn section(out: &mut String, kind: &str, diags: &[Diagnostic]) {
    if diags.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{}{} ({}):", kind, plural(diags.len()), diags.len());
    for d in diags {
        let _ = writeln!(out, "  {kind}[{}] {}", d.code.as_str(), d.path);
        let _ = writeln!(out, "    {}", d.message);
        // Warnings vLLM takes as they are say nothing more.
        if d.is_error() || d.stage.as_str() != "never" {
            let _ = writeln!(
                out,
                "    stage:   {}: {}",
                d.stage.as_str(),
                d.stage.sentence(d.is_error())
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

/// What the engine itself would have done with these errors: it stops at the
/// earliest stage of them (a preflight saved that much of a start-up).
pub(crate) fn engine_verdict(errors: &[Diagnostic]) -> Option<String> {
    let earliest = errors
        .iter()
        .filter_map(|d| match d.stage {
            Stage::Vllm(s) => Some(s),
            // SGLang's verdict is rendered by its own front end (branch sgcli).
            Stage::Sglang(_) => None,
        })
        .min()?;
    let v = hisparse_core::VLLM_VERSION;
    Some(match earliest {
        VllmStage::Never => format!("Without this check: vLLM {v} would start with this configuration and then break on it or ignore it (stage never)"),
        s => format!("Without this check: vLLM {v} would refuse this configuration {} (stage {})", s.when(), s.as_str()),
    })
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
