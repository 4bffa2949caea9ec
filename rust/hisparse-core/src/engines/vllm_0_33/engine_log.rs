//! Planning from vLLM 0.33.0's start-up log (`--plan --engine-log FILE`):
//! the lines vLLM prints while it starts, which of them the plan takes in
//! place of its estimates (the weights one rank loaded, the KV room it
//! profiled), and what it compares with its own figures (the HiSparse pools'
//! blocks, the capacity line). Every phrase is a `logger.info` of the 0.33.0
//! wheel, cited by file:line.

use crate::diagnostic::{Code, Diagnostic};
use crate::engine_log::{
    labelled, launch_mismatches, leading_number, number_after, numbers, Compared, EngineLog,
    EngineLogReport, LineRule, Measured, Value,
};
use crate::engines::vllm_0_33::args::ServeArgs;
use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use crate::path::FieldPath;
use crate::plan::{Plan, PlanOptions};
use crate::sizes::{self, GIB};

use Value::Text;

/// The vLLM 0.33.0 lines read, and their figures.
pub const RULES: &[LineRule] = &[
    LineRule {
        // vllm/v1/engine/core.py:140 ("Initializing a V1 LLM engine (v%s) with
        // config: %s", the VllmConfig's __str__, config/vllm.py:2809-2844).
        phrase: "Initializing a V1 LLM engine (v",
        read: read_config_line,
        source: "vllm/v1/engine/core.py:140",
    },
    LineRule {
        phrase: "Model loading took ",
        read: |m| numbers(&[("weights_gib", number_after(m, "took "))]),
        source: "vllm/v1/worker/gpu_model_runner.py:5089",
    },
    LineRule {
        phrase: "Available KV cache memory: ",
        read: |m| numbers(&[("available_kv_cache_gib", number_after(m, "memory: "))]),
        source: "vllm/v1/worker/gpu_worker.py:773",
    },
    LineRule {
        phrase: "HiSparse HMA: ",
        read: |m| {
            let host = m.find("host source").map(|i| &m[i..]).unwrap_or("");
            let gpu = m.find("hot pool").map(|i| &m[i..]).unwrap_or("");
            numbers(&[
                ("hisparse_host_gib", number_after(m, "HMA: ")),
                ("hisparse_host_blocks", number_after(host, "(")),
                ("hisparse_gpu_gib", number_after(m, "blocks), ")),
                ("hisparse_gpu_blocks", number_after(gpu, "(")),
            ])
        },
        source: "vllm/v1/hisparse/layout.py:364",
    },
    LineRule {
        phrase: "Enabled experimental HiSparse HMA hot cache: ",
        read: |m| {
            numbers(&[
                ("hot_cache_top_k", number_after(m, "top_k=")),
                (
                    "hot_cache_device_buffer_size",
                    number_after(m, "device_buffer_size="),
                ),
                ("hot_cache_max_num_seqs", number_after(m, "max_num_seqs=")),
            ])
        },
        source: "vllm/v1/hisparse/runtime.py:1350",
    },
    LineRule {
        // "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per
        // request: %.2fx" with "GPU" or "GPU + host" (one line in 0.33; two
        // lines in older releases, read alike).
        phrase: "KV cache size: ",
        read: |m| numbers(&[("kv_cache_tokens", number_after(m, "size: "))]),
        source: "vllm/v1/core/kv_cache_utils.py:1148",
    },
    LineRule {
        phrase: "+ host KV cache size: ",
        read: |_| vec![("kv_cache_pools", Text("GPU + host".to_owned()))],
        source: "vllm/v1/core/kv_cache_utils.py:1148",
    },
    LineRule {
        phrase: "Maximum concurrency for ",
        read: |m| {
            let x = m
                .find("request: ")
                .and_then(|i| leading_number(&m[i + 9..]));
            numbers(&[
                ("concurrency_tokens", number_after(m, "for ")),
                ("max_concurrency", x),
            ])
        },
        source: "vllm/v1/core/kv_cache_utils.py:1149",
    },
];

/// The launch as the engine printed it: model, lengths, parallelism, dtype.
fn read_config_line(m: &str) -> Vec<(&'static str, Value)> {
    // ", " before each name: `draft_tensor_parallel_size=` inside the
    // speculative config's repr is another field.
    labelled(
        m,
        &[
            ("vllm_version", "(v"),
            ("model", "config: model="),
            ("kv_cache_dtype", ", kv_cache_dtype="),
        ],
        &[
            ("max_model_len", ", max_seq_len="),
            ("tensor_parallel_size", ", tensor_parallel_size="),
            ("pipeline_parallel_size", ", pipeline_parallel_size="),
            ("data_parallel_size", ", data_parallel_size="),
        ],
    )
}

/// The planner inputs the log measured, and the errors of a log that is not
/// this launch's (another model, another parallel layout): the weights one
/// rank holds and the KV room depend on them, so a log of another layout
/// would plan the wrong thing.
pub fn measurements(
    log: &EngineLog,
    args: &ServeArgs,
    options: &mut PlanOptions,
    path: &str,
) -> (Vec<Measured>, Vec<Diagnostic>) {
    let sizes = [
        (
            "tensor_parallel_size",
            "tensor_parallel_size",
            args.tensor_parallel_size.unwrap_or(1),
        ),
        (
            "pipeline_parallel_size",
            "pipeline_parallel_size",
            args.pipeline_parallel_size.unwrap_or(1),
        ),
        (
            "data_parallel_size",
            "data_parallel_size",
            args.data_parallel_size.unwrap_or(1),
        ),
    ];
    let model = args.model.as_deref().map(|m| ("model", "model", m));
    let errors: Vec<Diagnostic> = launch_mismatches(log, path, &sizes, model, "the KV room")
        .into_iter()
        .map(|(field, message, given)| mismatch(field, message, &given))
        .collect();
    let mut measured = Vec::new();
    let ranks = |key: &str| log.all(key).count();
    if let Some(f) = log.max("weights_gib") {
        let v = f.value.number().unwrap_or(0.0);
        options.weights_gib = Some(v);
        measured.push(Measured {
            input: "weights_gib".into(),
            value: v,
            rule: format!(
                "the largest of the {} \"Model loading took\" lines (the fullest rank)",
                ranks("weights_gib")
            ),
            figure: f.clone(),
        });
    }
    if let Some(f) = log.min("available_kv_cache_gib") {
        let v = f.value.number().unwrap_or(0.0);
        if v > 0.0 {
            options.available_kv_cache_gib = Some(v);
            measured.push(Measured {
                input: "available_kv_cache_gib".into(),
                value: v,
                rule: format!("the smallest of the {} \"Available KV cache memory\" lines (vLLM sizes every rank's pool to the smallest, v1/core/kv_cache_utils.py:1099-1105)", ranks("available_kv_cache_gib")),
                figure: f.clone(),
            });
        }
    }
    options.measured_in = Some(format!("the engine log {path}"));
    (measured, errors)
}

fn mismatch(key: &str, message: String, given: &str) -> Diagnostic {
    Diagnostic::error(
        Code::EngineLogMismatch,
        FieldPath::root("engine_log").key(key),
        message,
    )
    .given(&serde_json::json!(given))
    .hint("pass the start-up log of this launch (same model and parallel layout), or plan the launch the log is of")
}

/// The log's figures beside the plan's: the HiSparse pools' blocks, the
/// capacity line, the hot cache line.
pub fn compare(log: &EngineLog, plan: &Plan) -> Vec<Compared> {
    let mut out = Vec::new();
    let hisparse = log.first("hisparse_gpu_blocks").is_some();
    // format_gib rounds to 0.01 GiB (vllm/utils/mem_utils.py:30-31).
    let rounding = |block_bytes: u64| (0.005 * GIB / block_bytes.max(1) as f64).ceil();
    if let Some(f) = log.first("hisparse_gpu_blocks") {
        let bb = plan.sizes.hisparse_block_bytes;
        let computed = plan.gpu.hisparse_blocks.map(|b| b as f64);
        let within = computed
            .zip(f.value.number())
            .is_some_and(|(c, l)| (c - l).abs() <= rounding(bb));
        out.push(Compared::new(
            "GPU pool blocks (the HiSparse HMA line)",
            "blocks",
            f,
            computed,
            Some(format!(
                "available KV bytes // {bb} B per block (one indexer page rounded up to whole MLA pages, v1/hisparse/layout.py:325-350); {}",
                if within {
                    format!("within the rounding of the logged room (0.01 GiB, +/- {} blocks): the same pool", rounding(bb))
                } else {
                    format!("more than the rounding of the logged room (+/- {} blocks) apart: the block size or the layer layout differ from the logged launch's", rounding(bb))
                }
            )),
        ));
    }
    if let Some(f) = log.first("hisparse_host_blocks") {
        out.push(Compared::new(
            "host pool blocks (the HiSparse HMA line)",
            "blocks",
            f,
            Some(plan.host.host_blocks as f64),
            Some(format!(
                "host_pool_gib x 2^30 // {} B stride",
                plan.host.host_block_stride
            )),
        ));
    }
    if let Some(f) = log.first("max_concurrency") {
        let len = log
            .first("concurrency_tokens")
            .and_then(|t| t.value.number())
            .map_or(plan.max_model_len, |t| t as u64);
        // vLLM prints it to 2 decimals ("%.2fx").
        let computed = concurrency(plan, len, hisparse).map(|c| (c * 100.0).round() / 100.0);
        let exact = concurrency(plan, len, hisparse);
        let why = if len != plan.max_model_len {
            Some(format!(
                "the log's max_model_len is {len}, the plan's {}: compared at {len}",
                plan.max_model_len
            ))
        } else {
            Some(concurrency_terms(plan, len, hisparse))
        };
        out.push(Compared::new(
            if hisparse {
                "Maximum concurrency (GPU + host), requests at max_model_len"
            } else {
                "Maximum concurrency (GPU), requests at max_model_len"
            },
            "requests",
            f,
            computed,
            why,
        ));
        if let (Some(t), Some(c)) = (log.first("kv_cache_tokens"), exact) {
            out.push(Compared::new(
                "KV cache size (max_concurrency x max_model_len, not a per-token capacity)",
                "tokens",
                t,
                Some((c * len as f64).floor()),
                Some("vLLM derives it from the concurrency (v1/core/kv_cache_utils.py:1117-1127): it changes with max_model_len when part of a request's blocks are fixed (hot buffer and tail)".to_owned()),
            ));
        }
    }
    out
}

/// vLLM's "Maximum concurrency" at `len` tokens per request
/// (get_max_concurrency_for_kv_cache_config, v1/core/kv_cache_utils.py:1061-1093):
/// GPU blocks / blocks one request takes at admission ([`admission_gpu_blocks`]), and with HiSparse the host pool's
/// blocks / the host blocks one request takes, whichever is smaller.
fn concurrency(plan: &Plan, len: u64, hisparse: bool) -> Option<f64> {
    let s = &plan.sizes;
    let bs = u64::from(s.block_size);
    let per_token_blocks = sizes::blocks_for(len, bs);
    if hisparse {
        let gpu = plan.gpu.hisparse_blocks? as f64;
        let per = admission_gpu_blocks(plan, len).0 as f64;
        let host = plan.host.host_blocks as f64 / per_token_blocks.max(1) as f64;
        Some((gpu / per).min(host))
    } else {
        let gpu = plan.gpu.baseline_blocks? as f64;
        Some(gpu / per_token_blocks.max(1) as f64)
    }
}

/// The GPU blocks vLLM's "Maximum concurrency" charges one request of `len`
/// tokens with HiSparse: its indexer blocks plus, per hot group, the hot
/// buffer and the resident group's whole admission window
/// (`HiSparseResidentSpec`'s `max_in_flight_tokens`, kv_cache_interface.py:533-544,
/// config/vllm.py:588-609), not the 2-page tail it keeps at steady state
/// (the plan's requests; hisparse/layout.py:384-420).
fn admission_gpu_blocks(plan: &Plan, len: u64) -> (u64, u64) {
    let s = &plan.sizes;
    let bs = u64::from(s.block_size);
    let hot = sizes::blocks_for(u64::from(s.device_buffer_size), bs);
    let window = sizes::blocks_for(
        len.min(super::planner::in_flight_tokens(plan.gpu.gpu_memory_gib)),
        bs,
    );
    let fixed = s.hot_groups.saturating_mul(hot.saturating_add(window));
    (sizes::blocks_for(len, bs).saturating_add(fixed), window)
}

/// What one request's blocks are made of (the vllm#51041 question: why the
/// concurrency changes with max_model_len).
fn concurrency_terms(plan: &Plan, len: u64, hisparse: bool) -> String {
    let s = &plan.sizes;
    let bs = u64::from(s.block_size);
    let per_token = sizes::blocks_for(len, bs);
    if hisparse {
        let (total, window) = admission_gpu_blocks(plan, len);
        let fixed = total - per_token;
        format!(
            "one request takes {per_token} indexer blocks ({len} tokens / {bs}) that grow with its length, plus {fixed} fixed blocks ({} hot groups x (device buffer {} / {bs} + {window} blocks of the resident admission window, max_in_flight_tokens)) that do not: so the concurrency is not proportional to 1 / max_model_len. vLLM logs this admission figure (get_max_concurrency_for_kv_cache_config, v1/core/kv_cache_utils.py:1061-1093); at steady state a request keeps {} tail blocks per group instead of the window, which the plan's requests count",
            s.hot_groups,
            s.device_buffer_size,
            sizes::ACTIVE_TAIL_PAGES
        )
    } else {
        format!("one request takes {per_token} blocks ({len} tokens / {bs}), each of every layer's MLA row and indexer key")
    }
}

/// Plan a configuration from its start-up log: the check and the plan with
/// the log's measurements in place of the estimates, the log's figures beside
/// the plan's; a log of another launch is an `engine_log_mismatch` error in
/// the plan (planned without the log's figures).
pub fn plan(
    args: &ServeArgs,
    options: &PlanOptions,
    log: &EngineLog,
    path: &str,
) -> Result<(crate::report::Report, Option<Plan>), crate::plan::PlanError> {
    let mut measured_options = options.clone();
    let (measured, errors) = measurements(log, args, &mut measured_options, path);
    let use_log = errors.is_empty();
    let (report_, plan) =
        super::plan::plan(args, if use_log { &measured_options } else { options })?;
    let plan = plan.map(|mut p| {
        if !errors.is_empty() {
            p.errors.extend(errors);
            p.valid = false;
        }
        let measured = if use_log { measured } else { Vec::new() };
        p.engine_log = Some(report(log, path, measured, &p));
        p
    });
    Ok((report_, plan))
}

/// The report a plan carries: what was read, measured and compared.
pub fn report(
    log: &EngineLog,
    path: &str,
    measured: Vec<Measured>,
    plan: &Plan,
) -> EngineLogReport {
    let logged_hisparse =
        log.first("hisparse_gpu_blocks").is_some() || log.first("hot_cache_top_k").is_some();
    EngineLogReport::new(
        log,
        path,
        crate::report::ENGINE_VLLM,
        logged_hisparse,
        measured,
        compare(log, plan),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_log::model_name;
    use crate::engine_log::Value::{Number, Text};

    #[test]
    fn model_names_compare_across_paths_ids_and_snapshots() {
        assert_eq!(model_name("/models/DeepSeek-V3.2/"), "deepseek-v3.2");
        assert_eq!(model_name("deepseek-ai/DeepSeek-V3.2"), "deepseek-v3.2");
        assert_eq!(
            model_name(
                "/root/.cache/huggingface/hub/models--deepseek-ai--DeepSeek-V3.2/snapshots/abc"
            ),
            "deepseek-v3.2"
        );
    }

    #[test]
    fn the_config_line_reads_its_fields_not_the_draft_models() {
        let m = "Initializing a V1 LLM engine (v0.33.0) with config: model='/m/DeepSeek-V3.2', speculative_config=SpeculativeConfig(method='mtp', draft_tensor_parallel_size=1), tokenizer='/m', dtype=torch.bfloat16, max_seq_len=131072, download_dir=None, tensor_parallel_size=8, pipeline_parallel_size=1, data_parallel_size=2, kv_cache_dtype=fp8_ds_mla, device_config=cuda";
        let got = read_config_line(m);
        let get = |k: &str| {
            got.iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("vllm_version"), Some(Text("0.33.0".into())));
        assert_eq!(get("model"), Some(Text("/m/DeepSeek-V3.2".into())));
        assert_eq!(get("tensor_parallel_size"), Some(Number(8.0)));
        assert_eq!(get("data_parallel_size"), Some(Number(2.0)));
        assert_eq!(get("max_model_len"), Some(Number(131072.0)));
        assert_eq!(get("kv_cache_dtype"), Some(Text("fp8_ds_mla".into())));
    }
}
