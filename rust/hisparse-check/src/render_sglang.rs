//! The human-readable report of an SGLang 0.5.23 launch: the resolved
//! HiSparse settings with SGLang's own names and their provenance, then the
//! warnings and errors, the stage at which SGLang itself would have refused,
//! the fixed flags and the result line (render_parts.rs's, in SGLang's words).

use crate::dialect;
use crate::render_parts::{heading, provenance, report_tail, row, rows as rows_out};
use hisparse_core::diagnostic::Stage;
use hisparse_core::engines::sglang_0_5_23::stages::SglangStage;
use hisparse_core::engines::sglang_0_5_23::VERSION;
use hisparse_core::{Provenance, Report};
use std::fmt::Write;

pub fn human(report: &Report) -> String {
    let mut out = String::new();
    let d = &dialect::SGLANG;
    heading(
        &mut out,
        "hisparse-check",
        report.model.as_ref(),
        d,
        VERSION,
    );
    match (report.sglang_hisparse(), report.hisparse_enabled) {
        (Some(h), _) => {
            let _ = writeln!(
                out,
                "\nHiSparse: enabled ({})",
                provenance(&h.enable_hisparse.provenance)
            );
            let mut rows: Vec<(&str, String, &Provenance)> = vec![
                row("top_k", &h.top_k, |v| match v {
                    serde_json::Value::String(s) => s.clone(),
                    n => n.to_string(),
                }),
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
            rows_out(&mut out, rows);
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
    // argparse's refusals are words of the command line, not settings: their
    // fixes are above, but for a store_true flag given a value, whose flag
    // alone is in the flags line (read.rs `finish`).
    let argparse = report.errors.iter().any(|e| {
        e.stage == Stage::Sglang(SglangStage::Argparse)
            && !(e.code == hisparse_core::Code::InvalidValue
                && matches!(
                    e.fix.as_slice(),
                    [hisparse_core::FixOp::Set {
                        value: serde_json::Value::Bool(true),
                        ..
                    }]
                ))
    });
    let also = if argparse {
        " (and correct the argparse errors above)"
    } else {
        ""
    };
    report_tail(&mut out, d, report, also);
    out
}
