//! Human-readable capacity plan (`hisparse-check --plan`): the sizes it rests
//! on, the host pools per node, the GPU room, the answer at the planned
//! context, then the sweep table; warnings and errors last.

use crate::dialect;
use crate::render_parts::{heading, plural};
use crate::render_plan_parts::{
    at_context, capped, figures_line, gpu_spec, kv_room, kv_rows, n, sweep, tail, SweepWords,
};
use hisparse_core::plan::{gib_text as gib, Plan, PoolMode};
use hisparse_core::Code;
use std::fmt::Write;

/// The plan in its engine's terms: SGLang's (render_plan_sglang.rs) or vLLM's;
/// `sglang_flag`: the flag that serves an SGLang plan's suggested
/// `host_to_device_ratio` (`--hisparse-config '{...}'`, the launch's own keys
/// kept), which only the launch's words can give.
pub fn plan(p: &Plan, sglang_flag: Option<&str>) -> String {
    if let Some(sg) = &p.sglang {
        return crate::render_plan_sglang::plan(p, sg, sglang_flag);
    }
    let mut out = String::new();
    let d = &dialect::VLLM;
    let (s, h, g) = (&p.sizes, &p.host, &p.gpu);
    let (max_len, max_seqs) = (d.max_len, d.max_seqs);
    heading(
        &mut out,
        "hisparse-check --plan",
        p.model.as_ref(),
        d,
        &p.engine_version,
    );
    if let Some(a) = &p.assumed {
        let _ = writeln!(
            out,
            "HiSparse is NOT configured: this plans what it would give, ASSUMING {}: host_pool_gib {} ({}).\nTo serve this: --kv-transfer-config '{}'",
            a.rule, a.host_pool_gib, a.host_pool_rule, a.kv_transfer_config
        );
    }
    let _ = writeln!(
        out,
        "Figures are per DP replica (TP {} GPUs; {} replica{}); GPU figures are per GPU: MLA latent KV and indexer keys are replicated on every TP rank.",
        g.tensor_parallel_size,
        g.data_parallel_size,
        plural(g.data_parallel_size as usize)
    );
    figures_line(&mut out, p);

    let draft = if s.draft_layers > 0 {
        format!(" (incl. {} MTP draft)", s.draft_layers)
    } else {
        String::new()
    };
    kv_rows(
        &mut out,
        s,
        (&format!("sparse-MLA layers{draft}"), "in the host pool"),
        ("indexer layers", "on the GPU for the whole context"),
    );
    let _ = writeln!(
        out,
        "  hot buffer        {} rows x {} B = {} per request, in {} hot groups (+ {} retained tail pages each)",
        s.device_buffer_size,
        n(s.mla_bytes_per_token),
        gib(s.hot_buffer_bytes),
        s.hot_groups,
        hisparse_core::sizes::ACTIVE_TAIL_PAGES
    );
    let _ = writeln!(
        out,
        "  GPU block         {} B with HiSparse (indexer page of {} tokens); {} B without (MLA + indexer)",
        n(s.hisparse_block_bytes),
        s.block_size,
        n(s.baseline_block_bytes)
    );

    let mode = match h.mode {
        PoolMode::Shared => "shared",
        PoolMode::Private => "private",
    };
    let _ = writeln!(out, "\nhost pool: {mode} mode: {}", h.mode_rule);
    let _ = writeln!(
        out,
        "  host_pool_gib     {} GiB = {} blocks of {} B{}",
        h.host_pool_gib,
        n(h.host_blocks),
        n(h.host_block_stride),
        if h.host_block_stride != h.host_block_bytes {
            format!(" ({} B rounded up to 4 KiB)", n(h.host_block_bytes))
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "  start-up minimum  {} blocks (ceil({max_len} {} / {}) + 2) = {} GiB",
        n(h.min_host_blocks),
        p.max_model_len,
        s.block_size,
        h.min_host_pool_gib
    );
    let ram = match (h.host_memory_bytes, h.usable_host_memory_bytes) {
        (Some(total), Some(usable)) => {
            let verdict = match (h.pinned_bytes_per_node <= usable, h.host_memory_given) {
                (true, _) => "fits",
                (false, true) => "DOES NOT FIT",
                (false, false) => {
                    "does not fit on this machine (not an error: give the node's RAM)"
                }
            };
            format!(
                "; host RAM {} ({}), 95 % usable = {}: {verdict}",
                gib(total),
                h.host_memory_source,
                gib(usable)
            )
        }
        _ => "; host RAM unknown: pass --host-memory-gib".to_owned(),
    };
    let _ = writeln!(
        out,
        "  pinned per node   {} = {} pool{} x {}{ram}",
        gib(h.pinned_bytes_per_node),
        h.pools_per_node,
        plural(h.pools_per_node as usize),
        gib(h.pool_bytes)
    );
    if let Some(note) = &h.draft_model {
        let _ = writeln!(out, "  draft model       {note}");
    }

    let _ = writeln!(out, "\nGPU (each GPU of a replica)");
    gpu_spec(&mut out, g);
    match (g.kv_bytes_per_gpu, &g.weights_bytes_per_gpu) {
        // Planned from an engine log (--engine-log): the room vLLM measured.
        (Some(kv), w) if g.kv_source.starts_with("measured:") => {
            let _ = writeln!(out, "  KV room           {} ({})", gib(kv), g.kv_source);
            if let (Some(w), Some(src)) = (w, &g.weights_source) {
                let _ = writeln!(out, "  weights           {} ({src})", gib(*w));
            }
        }
        (Some(kv), Some(w)) => {
            let _ = writeln!(out, "{}", kv_room(g, kv, *w, gib));
            if let Some(src) = &g.weights_source {
                let _ = writeln!(out, "  weights           {src}");
            }
            let _ = writeln!(out, "                    upper bound: vLLM also reserves activation and CUDA-graph memory; pass the KV size from its start-up log as --kv-cache-memory-bytes");
        }
        (Some(kv), None) => {
            let _ = writeln!(out, "  KV room           {} ({})", gib(kv), g.kv_source);
        }
        (None, _) => {
            let _ = writeln!(out, "  KV room           {}", g.kv_source);
        }
    }
    let _ = writeln!(
        out,
        "  {max_seqs:<17} {} ({})",
        g.max_num_seqs, g.max_num_seqs_source
    );
    if let (Some(b), Some(hb)) = (g.baseline_blocks, g.hisparse_blocks) {
        let _ = writeln!(
            out,
            "  GPU blocks        {} without HiSparse, {} with",
            n(b),
            n(hb)
        );
    }

    let a = &p.at_context;
    let (base, with, w) = at_context(&mut out, d, p);
    let _ = writeln!(
        out,
        "  without HiSparse  {base:<w$} GPU {} per request",
        gib(a.baseline_gpu_bytes_per_request)
    );
    let _ = writeln!(
        out,
        "  with HiSparse     {with:<w$} GPU {} per request ({} blocks: {} indexer + {} hot + {} tail); host {} per request",
        gib(a.hisparse_gpu_bytes_per_request),
        n(a.hisparse_gpu_blocks_per_request),
        n(a.host_blocks_per_request),
        n(a.hisparse_gpu_blocks_per_request
            .saturating_sub(a.host_blocks_per_request)
            .saturating_sub(s.hot_groups * hisparse_core::sizes::ACTIVE_TAIL_PAGES)),
        n(s.hot_groups * hisparse_core::sizes::ACTIVE_TAIL_PAGES),
        gib(a.host_kv_bytes_per_request)
    );
    let _ = writeln!(
        out,
        "  limits            GPU {}, host {}, {max_seqs} {}",
        a.gpu_limit
            .map_or_else(|| "?".to_owned(), |x| x.to_string()),
        a.host_limit,
        g.max_num_seqs
    );
    if let Some(c) = &p.concurrency {
        let hot = u64::from(s.device_buffer_size).div_ceil(u64::from(s.block_size).max(1));
        let _ = writeln!(
            out,
            "  concurrency       a request holds {} indexer {} that grow with its context and {} fixed ({} hot groups x ({hot} hot + {} tail)): {:.0} % of it here, more at a shorter max_model_len, so the requests grow less than the context shrinks (vllm#51041)",
            n(c.per_token_units),
            c.unit,
            n(c.fixed_units),
            s.hot_groups,
            (c.fixed_units / s.hot_groups.max(1)).saturating_sub(hot),
            c.fixed_share * 100.0
        );
    }
    let pins = |pool: f64| match h.mode {
        PoolMode::Shared => format!("{pool} GiB x {}", h.pools_per_node),
        PoolMode::Private => format!("{pool} GiB x {} ranks", h.pools_per_node),
    };
    match (
        a.target_requests,
        a.min_host_pool_gib,
        a.min_host_pool_requests,
    ) {
        (Some(t), Some(pool), Some(held)) if capped(a) => {
            let _ = writeln!(
                out,
                "  host_pool_gib     {pool} GiB holds {held} of the {t} requests targeted at this context: the most this node's RAM pins, so the host binds (pins {} per node)",
                pins(pool)
            );
        }
        (Some(t), Some(pool), _) => {
            let _ = writeln!(
                out,
                "  host_pool_gib     {pool} GiB holds {t} request{} of this context (pins {} per node)",
                plural(t as usize),
                pins(pool)
            );
        }
        (Some(t), None, _) if h.host_memory_given => {
            let _ = writeln!(
                out,
                "  host_pool_gib     none holds {t} request{} of this context: this node's RAM cannot pin even the start-up minimum",
                plural(t as usize)
            );
        }
        _ => {}
    }

    sweep(
        &mut out,
        d,
        p,
        &SweepWords {
            pool: "host_pool_gib: the smallest pool for --target-requests, by default what the GPU holds",
            capped: ", at most what the node's RAM pins ((host): it holds fewer)",
            per_request: "GPU/request",
            last: &["host_pool_gib"],
        },
        gib,
        |x| {
            vec![match x.min_host_pool_gib {
                Some(g) if capped(x) => format!("{g:.2} (host)"),
                Some(g) => format!("{g:.2}"),
                None => "?".to_owned(),
            }]
        },
    );
    tail(&mut out, d, p, Code::PlanServesNoRequests);
    out
}
