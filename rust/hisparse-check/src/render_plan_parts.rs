//! What both engines' capacity plans (render_plan.rs, render_plan_sglang.rs)
//! print the same way: numbers, token counts, the request cells, the sweep
//! table and the plan's last lines, in the engine's words (dialect.rs).

use crate::dialect::Dialect;
use crate::render_parts::{findings, result_line};
use hisparse_core::plan::{FigureKind, GpuPlan, Limit, Plan, PlanPoint, Sizes};
use hisparse_core::Code;
use std::fmt::Write;

/// The sizes section's heading and its first two rows, the MLA latent KV and
/// the indexer keys per token, in the engine's words: (what the layers are
/// called, where the rows live) for each.
pub(crate) fn kv_rows(
    out: &mut String,
    s: &Sizes,
    (mla_layers, mla_where): (&str, &str),
    (index_layers, index_where): (&str, &str),
) {
    let _ = writeln!(out, "\nsizes");
    let _ = writeln!(
        out,
        "  MLA latent KV     {} B/token/layer ({}) x {} {mla_layers} = {} B/token, {mla_where}",
        s.mla_row_bytes,
        s.kv_cache_dtype,
        s.sparse_mla_layers,
        n(s.mla_bytes_per_token)
    );
    let _ = writeln!(
        out,
        "  indexer keys      {} B/token/layer x {} {index_layers} = {} B/token, {index_where}",
        s.indexer_row_bytes,
        s.indexer_layers,
        n(s.indexer_bytes_per_token)
    );
}

/// 1234567 -> "1,234,567".
pub(crate) fn n(x: u64) -> String {
    let digits = x.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Token counts as `--max-model-len` writes them: 128000 -> "128k" (k = 1000),
/// 131072 -> "128K" (K = 1024); decimal first, so 128k never prints as 125K.
pub(crate) fn tokens(t: u64) -> String {
    if t >= 1000 && t % 1000 == 0 {
        format!("{}k", t / 1000)
    } else if t >= 1024 && t % 1024 == 0 {
        format!("{}K", t / 1024)
    } else {
        t.to_string()
    }
}

/// A request count and the limit that binds it, "3 (gpu)"; the request cap
/// in the engine's name ("1024 (max_num_seqs)", "(max_running_requests)").
pub(crate) fn requests(d: &Dialect, r: Option<u64>, limit: Option<Limit>) -> String {
    match (r, limit) {
        (Some(r), Some(Limit::MaxNumSeqs)) => format!("{r} ({})", d.max_seqs),
        (Some(r), Some(l)) => format!("{r} ({})", l.as_str()),
        (Some(r), None) => r.to_string(),
        _ => "?".to_owned(),
    }
}

/// What the plan's figures are (issue 21 item 3), grouped by kind:
/// "figures: exact (the engine's arithmetic on known inputs): sizes, host pool,
/// host limit; estimated (our model of what the engine profiles): weights, ...".
pub(crate) fn figures_line(out: &mut String, p: &Plan) {
    let entries = p.figures.entries();
    let groups: Vec<String> = [
        FigureKind::Exact,
        FigureKind::Measured,
        FigureKind::Estimated,
        FigureKind::Unknown,
    ]
    .into_iter()
    .filter_map(|k| {
        let names: Vec<&str> = entries
            .iter()
            .filter(|(_, kind)| *kind == k)
            .map(|(name, _)| *name)
            .collect();
        (!names.is_empty())
            .then(|| format!("{} ({}): {}", k.as_str(), k.meaning(), names.join(", ")))
    })
    .collect();
    let _ = writeln!(out, "figures: {}", groups.join("; "));
}

/// The GPU's row from the --gpu table, with its sources (nothing without --gpu).
pub(crate) fn gpu_spec(out: &mut String, g: &GpuPlan) {
    if let Some(spec) = &g.spec {
        let _ = writeln!(
            out,
            "  GPU               {} ({}): {} GiB, {} B of shared memory per block",
            spec.name,
            spec.description,
            spec.memory_gib,
            n(spec.max_shared_memory_per_block)
        );
        let _ = writeln!(
            out,
            "                    sources: {}; {}",
            spec.memory_source, spec.shared_memory_source
        );
    }
}

/// "  KV room           {kv} = {GPU} GiB x {fraction} - {weights} weights", with
/// " (estimated)" when the weights are config.json's estimate; no newline.
pub(crate) fn kv_room(g: &GpuPlan, kv: u64, weights: u64, gib: fn(u64) -> String) -> String {
    format!(
        "  KV room           {} = {} GiB x {} - {} weights{}",
        gib(kv),
        g.gpu_memory_gib.unwrap_or(0.0),
        g.gpu_memory_utilization,
        gib(weights),
        if g.weights_estimated {
            " (estimated)"
        } else {
            ""
        }
    )
}

/// The heading of the answer at the planned context, and its two request
/// cells (without, with HiSparse) with the width they share.
pub(crate) fn at_context(out: &mut String, d: &Dialect, p: &Plan) -> (String, String, usize) {
    let a = &p.at_context;
    let which = if p.context_length == p.max_model_len {
        format!(" ({})", d.max_len)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\nat {} tokens{which}, per DP replica",
        n(p.context_length)
    );
    let (base, with) = (
        requests(d, a.baseline_requests, a.baseline_limit),
        requests(d, a.hisparse_requests, a.hisparse_limit),
    );
    let w = base.len().max(with.len()).max(18);
    (base, with, w)
}

/// Whether the node's RAM (SGLang: its budget per rank) caps the suggested
/// pool below its target.
pub(crate) fn capped(x: &PlanPoint) -> bool {
    matches!((x.min_host_pool_requests, x.target_requests), (Some(held), Some(t)) if held < t)
}

/// What an engine's sweep says that the other's does not.
pub(crate) struct SweepWords {
    /// Its heading's words on the pool column ("host_pool_gib: the smallest pool ...").
    pub pool: &'static str,
    /// Added to the heading when the RAM caps a row.
    pub capped: &'static str,
    /// The per-request bytes column: "GPU/request", "device/request".
    pub per_request: &'static str,
    /// The engine's last columns, after host/request.
    pub last: &'static [&'static str],
}

/// The sweep: its heading, then a row per context, right-aligned; the first
/// five cells are both engines' (context, requests without and with
/// HiSparse, device and host bytes per request), `last` gives the rest.
pub(crate) fn sweep(
    out: &mut String,
    d: &Dialect,
    p: &Plan,
    w: &SweepWords,
    gib: fn(u64) -> String,
    last: impl Fn(&PlanPoint) -> Vec<String>,
) {
    let _ = writeln!(
        out,
        "\nsweep (requests per DP replica, binding limit in parentheses; {}{}; k = 1000 tokens, K = 1024)",
        w.pool,
        if p.sweep.iter().any(capped) {
            w.capped
        } else {
            ""
        }
    );
    let mut header = vec![
        "context",
        "without HiSparse",
        "with HiSparse",
        w.per_request,
        "host/request",
    ];
    header.extend_from_slice(w.last);
    let rows: Vec<Vec<String>> = p
        .sweep
        .iter()
        .map(|x| {
            let mut row = vec![
                tokens(x.context_length),
                requests(d, x.baseline_requests, x.baseline_limit),
                requests(d, x.hisparse_requests, x.hisparse_limit),
                gib(x.hisparse_gpu_bytes_per_request),
                gib(x.host_kv_bytes_per_request),
            ];
            row.extend(last(x));
            row
        })
        .collect();
    table(out, &header, &rows);
}

/// A table, right-aligned, each column as wide as its widest cell (a
/// "1024 (max_num_seqs)" cell widens its column instead of shifting the row).
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:>w$}"))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  "));
    }
}

/// The plan's verdict: it fits (of the assumed configuration, when HiSparse
/// was not configured), serves no requests (`serves_none`, the engine's code
/// for it), or does not fit.
pub(crate) fn verdict(p: &Plan, serves_none: Code) -> &'static str {
    let unknown = p.figures.requests == FigureKind::Unknown;
    match (p.valid, &p.assumed) {
        // No GPU memory: the host pool is checked, the requests are "?".
        (true, _) if unknown => "plan INCOMPLETE: the host pools fit, the GPU figures are unknown (pass --gpu, --gpu-memory-gib, --kv-cache-memory-bytes or --engine-log)",
        (true, None) => "plan fits",
        (true, Some(_)) => "plan of the assumed HiSparse configuration fits",
        (false, _) if p.errors.iter().any(|e| e.code == serves_none) => "plan SERVES NO REQUESTS",
        (false, _) => "plan DOES NOT FIT",
    }
}

/// The plan's last lines: ignored flags, warnings, errors, and the result.
pub(crate) fn tail(out: &mut String, d: &Dialect, p: &Plan, serves_none: Code) {
    findings(out, d, &p.ignored_flags, &p.warnings, &p.errors);
    result_line(
        out,
        verdict(p, serves_none),
        p.errors.len(),
        p.warnings.len(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(n(0), "0");
        assert_eq!(n(1234567), "1,234,567");
        assert_eq!(n(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(tokens(131072), "128K");
        assert_eq!(tokens(128_000), "128k");
        assert_eq!(tokens(8192), "8K");
        assert_eq!(tokens(1_000_000), "1000k");
        assert_eq!(tokens(163_841), "163841");
    }
}
