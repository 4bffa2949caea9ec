//! Human-readable capacity plan for SGLang 0.5.23 (`hisparse-check --plan --
//! sglang serve ...`): the same sections and sweep table as vLLM's
//! (render_plan.rs), in SGLang's terms: device KV slots and their cell, the
//! per-request `D + 64` slots, the host pool sized from the device slots and
//! `host_to_device_ratio`, SGLang's RAM budget per rank, and how SGLang picks
//! `mem_fraction_static` and `max_running_requests` when they are not given.

use crate::dialect;
use crate::render_parts::{heading, plural};
use crate::render_plan_parts::{
    at_context, capped, figures_line, gpu_spec, kv_room, kv_rows, n, sweep, tail, SweepWords,
};
use hisparse_core::plan::{Plan, SglangSizing};
use hisparse_core::Code;
use std::fmt::Write;

const GIB: f64 = (1u64 << 30) as f64;

/// Bytes as GiB with thousands separators ("1,958.59 GiB"), MiB under 1 GiB.
fn gib(bytes: u64) -> String {
    gib_of(bytes as f64 / GIB)
}

fn gib_of(g: f64) -> String {
    if g < 1.0 {
        return format!("{:.1} MiB", g * 1024.0);
    }
    let cents = (g * 100.0).round() as u64;
    format!("{}.{:02} GiB", n(cents / 100), cents % 100)
}

/// The SGLang plan; `ratio_flag`: the flag that serves the suggested
/// `host_to_device_ratio` (`sglang_cli::ratio_flag`), printed under it to paste.
pub fn plan(p: &Plan, sg: &SglangSizing, ratio_flag: Option<&str>) -> String {
    let mut out = String::new();
    let d = &dialect::SGLANG;
    let (s, h, g) = (&p.sizes, &p.host, &p.gpu);
    heading(
        &mut out,
        "hisparse-check --plan",
        p.model.as_ref(),
        d,
        &p.engine_version,
    );
    let _ = writeln!(
        out,
        "Requests are per DP replica (per attention-DP worker with --enable-dp-attention); each of its GPUs holds the whole MLA latent and indexer keys of every request (one KV head) and pins its own host pool; byte figures are per GPU (TP {}, {} DP replica{}).",
        g.tensor_parallel_size,
        g.data_parallel_size,
        plural(g.data_parallel_size as usize)
    );
    figures_line(&mut out, p);
    let r = sg.host_to_device_ratio;
    let page = u64::from(s.block_size);

    kv_rows(
        &mut out,
        s,
        (
            "layers",
            "on the device for D + 64 slots, in the host pool for every token",
        ),
        ("layers", "on the device for every token"),
    );
    let draft = if s.draft_layers > 0 {
        format!(
            " + {} MTP draft layer{} x ({} + {}) x {r} (the draft pool is indexed by the host-expanded ids; pool_configurator.py:260-311)",
            s.draft_layers,
            plural(s.draft_layers as usize),
            s.mla_row_bytes,
            s.indexer_row_bytes
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  device cell       {} B per device KV slot = {} x {} + {} x {} x host_to_device_ratio {r}{draft} (the indexer holds R tokens per slot; model_executor/pool_configurator.py:560-635)",
        n(sg.device_cell_bytes),
        s.sparse_mla_layers,
        s.mla_row_bytes,
        s.indexer_layers,
        s.indexer_row_bytes
    );
    let scratch = if sg.speculative_scratch_slots > 0 {
        format!(
            " + {} speculative scratch (min(W, max(1024, W - D)), W = draft tokens x index_topk; hisparse_coordinator.py:146, :187-193)",
            n(sg.speculative_scratch_slots)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  per request       {} device slots = device_buffer_size {} + 64 (the newest token's page; managers/hisparse_coordinator.py:644-646){scratch} = {} while it decodes",
        n(sg.request_device_slots),
        s.device_buffer_size,
        gib(s.hot_buffer_bytes)
    );
    let _ = if sg.prompt_on_device {
        writeln!(
            out,
            "  prefill           a whole prompt sits in device slots while it is prefilled, then is backed up to the host (managers/hisparse_coordinator.py:838-876): at most {} tokens",
            n(sg.device_slots)
        )
    } else {
        writeln!(
            out,
            "  prefill           none here (P/D decode): the prompt's KV arrives into the host pool, only logical ids are allocated (disaggregation/decode.py:2321-2330); admission charges the {} slots above per request (:1418-1430)",
            n(sg.request_device_slots)
        )
    };

    let _ = writeln!(out, "\nGPU (each GPU)");
    gpu_spec(&mut out, g);
    let _ = writeln!(
        out,
        "  mem_fraction_static {} ({})",
        g.gpu_memory_utilization, sg.mem_fraction_static_rule
    );
    if let (Some(kv), Some(w)) = (g.kv_bytes_per_gpu, g.weights_bytes_per_gpu) {
        if g.kv_source.starts_with("measured:") {
            // Planned from SGLang's start-up log (--engine-log): its own budget.
            let _ = writeln!(out, "  KV room           {} ({})", gib(kv), g.kv_source);
        } else {
            let _ = writeln!(
                out,
                "{}: the free memory before loading is taken as the whole GPU (mem_cache/kv_cache_configurator.py:2990-3007), an upper bound",
                kv_room(g, kv, w, gib)
            );
        }
        if let Some(src) = &g.weights_source {
            if g.weights_estimated {
                let _ = writeln!(out, "  weights           estimated from config.json: {src}; pass the \"mem usage\" of SGLang's \"Load weight end\" log line as --weights-gib (model_executor/model_runner.py:1372-1379)");
            } else {
                let _ = writeln!(out, "  weights           {src}");
            }
        }
    }
    let _ = writeln!(
        out,
        "  device KV slots   N_dev = (KV room // {} B) // {page} x {page} = {} (pool_configurator.py:637-647; --max-total-tokens caps it); without HiSparse {} (cell {} x ({} + {}) B)",
        n(sg.device_cell_bytes),
        n(sg.device_slots),
        n(sg.baseline_device_slots),
        s.sparse_mla_layers,
        s.mla_row_bytes,
        s.indexer_row_bytes
    );
    let _ = writeln!(
        out,
        "  max_running_requests {} per attention-DP worker ({})",
        g.max_num_seqs, sg.max_running_requests_rule
    );

    let _ = writeln!(out, "\nhost pool: {}", h.mode_rule);
    let _ = writeln!(
        out,
        "  host tokens       N_host = (int(N_dev {} x R {r}) // {page} + 1) x {page} = {} (pool_host/base.py:221-229)",
        n(sg.device_slots),
        n(sg.host_tokens)
    );
    let _ = writeln!(
        out,
        "  host_pool_gib     {:.2} GiB per rank = {} tokens x {} B = {:.2} GB as SGLang's host-memory check counts it (pool_host/base.py:248-257)",
        h.host_pool_gib,
        n(sg.host_tokens),
        n(s.mla_bytes_per_token),
        h.pool_bytes as f64 / 1e9
    );
    let ram = match (h.host_memory_bytes, sg.host_budget_per_rank_bytes) {
        (Some(total), Some(budget)) => format!(
            "; host RAM {} ({}): budget per rank ({} - 10 GiB) / {} ranks per host = {} (pool_host/base.py:84-107): {}",
            gib(total),
            h.host_memory_source,
            gib(total),
            sg.ranks_per_host,
            gib(budget),
            if h.pool_bytes <= budget {
                "fits"
            } else {
                "DOES NOT FIT"
            }
        ),
        _ => "; host RAM unknown: pass --host-memory-gib".to_owned(),
    };
    let _ = writeln!(
        out,
        "  pinned per node   {} = {} rank{} x {}{ram}",
        gib(h.pinned_bytes_per_node),
        h.pools_per_node,
        plural(h.pools_per_node as usize),
        gib(h.pool_bytes)
    );

    let a = &p.at_context;
    let (base, with, w) = at_context(&mut out, d, p);
    let _ = writeln!(
        out,
        "  without HiSparse  {base:<w$} device {} per request ({} slots x {} B)",
        gib(a.baseline_gpu_bytes_per_request),
        n(a.host_blocks_per_request * page),
        n(s.baseline_block_bytes / page.max(1))
    );
    let _ = writeln!(
        out,
        "  with HiSparse     {with:<w$} device {} per request ({} slots x {} B); host {} per request ({} tokens)",
        gib(a.hisparse_gpu_bytes_per_request),
        n(sg.request_device_slots),
        n(sg.device_cell_bytes),
        gib(a.host_kv_bytes_per_request),
        n(a.host_blocks_per_request * page)
    );
    let _ = writeln!(
        out,
        "  limits            device {} (N_dev // {}), host {} (N_host // {}), max_running_requests {}",
        a.gpu_limit
            .map_or_else(|| "?".to_owned(), |x| x.to_string()),
        n(sg.request_device_slots),
        a.host_limit,
        n(a.host_blocks_per_request * page),
        g.max_num_seqs
    );
    if let Some(c) = &p.concurrency {
        let _ = writeln!(
            out,
            "  concurrency       a decoding request holds {} device slots whatever its length (D + 64{}), none that grow with it: the device limit is the same at every context{}, only the host limit shrinks with it",
            n(c.fixed_units),
            if sg.speculative_scratch_slots > 0 { " + speculative scratch" } else { "" },
            if sg.prompt_on_device { " whose prompt fits the device slots while it is prefilled" } else { "" }
        );
    }
    if let (Some(ratio), Some(pool), Some(held), Some(t)) = (
        a.host_to_device_ratio,
        a.min_host_pool_gib,
        a.min_host_pool_requests,
        a.target_requests,
    ) {
        let pinned = pool * h.pools_per_node as f64;
        let ram = h.host_memory_bytes.map(|total| {
            let total = total as f64 / GIB;
            format!(
                ": that pins {} of the node's {} RAM ({:.0}%), leaving {} for the OS, the transfer engine's memory registration and everything else: SGLang's budget keeps only 10 GiB back (pool_host/base.py:84-107), so leave a margin with a smaller ratio or a --host-memory-gib below the node's RAM",
                gib_of(pinned),
                gib_of(total),
                pinned / total.max(f64::MIN_POSITIVE) * 100.0,
                gib_of((total - pinned).max(0.0))
            )
        });
        let pool = format!(
            "a {} pool per rank, x {} ranks per node{}",
            gib_of(pool),
            h.pools_per_node,
            if ram.is_some() {
                String::new()
            } else {
                format!(" = {} pinned", gib_of(pinned))
            }
        );
        let _ = if held < t {
            writeln!(
                out,
                "  host_to_device_ratio {ratio} is the largest the RAM budget per rank allows: it holds {held} of the {t} request{} the device holds at that ratio ({pool}){}",
                plural(t as usize),
                ram.unwrap_or_default()
            )
        } else if t > 0 {
            writeln!(
                out,
                "  host_to_device_ratio {ratio} holds the {t} request{} the device holds at that ratio ({pool}; each R adds {} x {} B to the device cell)",
                plural(t as usize),
                s.indexer_layers,
                s.indexer_row_bytes
            )
        } else {
            Ok(())
        };
        if let Some(flag) = ratio_flag {
            let _ = writeln!(
                out,
                "  to serve it       {flag} (in place of the launch's --hisparse-config; the launch has host_to_device_ratio {r})"
            );
        }
    }

    sweep(
        &mut out,
        d,
        p,
        &SweepWords {
            pool: "ratio: the smallest host_to_device_ratio whose host pool holds what the device holds",
            capped: ", at most what the RAM budget per rank allows ((host): it holds fewer)",
            per_request: "device/request",
            last: &["ratio", "host_pool_gib"],
        },
        gib,
        |x| {
            let host = if capped(x) { " (host)" } else { "" };
            vec![
                x.host_to_device_ratio
                    .map_or_else(|| "none fits".to_owned(), |r| format!("{r}{host}")),
                x.min_host_pool_gib
                    .map_or_else(|| "-".to_owned(), |g| format!("{g:.2}")),
            ]
        },
    );
    tail(&mut out, d, p, Code::SglangPlanServesNoRequests);
    out
}
