//! vLLM 0.33.0's human-readable report: its resolved HiSparse settings with
//! provenance (the rest, warnings, errors, the fixes and the result line, is
//! render_parts.rs's, in vLLM's words from dialect.rs).

use crate::dialect;
use crate::render_parts::{heading, report_tail, row, rows as rows_out};
use hisparse_core::engines::vllm_0_33::args::flag_name;
use hisparse_core::{Code, Provenance, Report};
use std::fmt::Write;

pub fn human(report: &Report) -> String {
    let mut out = String::new();
    let d = dialect::of(&report.engine);
    heading(
        &mut out,
        "hisparse-check",
        report.model.as_ref(),
        d,
        &report.engine_version,
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
            let w = rows_out(&mut out, rows);
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
    report_tail(&mut out, d, report, "");
    out
}
