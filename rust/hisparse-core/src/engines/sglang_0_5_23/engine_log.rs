//! Planning from SGLang 0.5.23's start-up log (`--plan --engine-log FILE`):
//! the launch it logged (`server_args=ServerArgs(...)`), the weights and the
//! free memory after loading them ("Load weight end"), from which SGLang's
//! KV pool budget follows exactly, and the scheduler's sizes
//! (`max_total_num_tokens=...`), compared with the plan's. Every phrase is a
//! `logger.info` of the 0.5.23 wheel, cited by file:line.

use crate::diagnostic::{Code, Diagnostic};
use crate::engine_log::{
    labelled, launch_mismatches, number_after, numbers, Compared, EngineLog, EngineLogReport,
    LineRule, Measured, Value,
};
use crate::engines::sglang_0_5_23::args::SglangArgs;
use crate::engines::sglang_0_5_23::stages::SglangStage;
use crate::path::FieldPath;
use crate::plan::{Plan, PlanOptions};

/// The SGLang 0.5.23 lines read, and their figures.
pub const RULES: &[LineRule] = &[
    LineRule {
        phrase: "server_args={",
        read: read_server_args,
        source: "sglang/srt/entrypoints/engine.py:311",
    },
    LineRule {
        phrase: "Load weight end.",
        read: |m| {
            numbers(&[
                ("sglang_avail_mem_gib", number_after(m, "avail mem=")),
                ("sglang_weights_gib", number_after(m, "mem usage=")),
            ])
        },
        source: "sglang/srt/model_executor/model_runner.py:1372",
    },
    LineRule {
        phrase: "max_total_num_tokens=",
        read: |m| {
            numbers(&[
                (
                    "max_total_num_tokens",
                    number_after(m, "max_total_num_tokens="),
                ),
                (
                    "max_running_requests",
                    number_after(m, "max_running_requests="),
                ),
                ("context_len", number_after(m, "context_len=")),
            ])
        },
        source: "sglang/srt/managers/scheduler.py:1268",
    },
];

/// The resolved ServerArgs as SGLang logs them: the dict of
/// `_server_args_for_logging` (`resolved_dict()`, entrypoints/engine.py:173-174),
/// `{'model_path': '/m', 'tp_size': 8, ...}`. A key is matched with its quote
/// (`'tp_size'` is not the tail of `'attn_tp_size'`).
fn read_server_args(m: &str) -> Vec<(&'static str, Value)> {
    labelled(
        m,
        &[
            ("sglang_model_path", "'model_path': "),
            ("sglang_enable_hisparse", "'enable_hisparse': "),
        ],
        &[
            ("sglang_tp_size", "'tp_size': "),
            ("sglang_pp_size", "'pp_size': "),
            ("sglang_dp_size", "'dp_size': "),
            ("sglang_mem_fraction_static", "'mem_fraction_static': "),
        ],
    )
}

/// The planner inputs the log measured, and the errors of a log of another
/// launch (model, parallel layout).
pub fn measurements(
    log: &EngineLog,
    args: &SglangArgs,
    options: &mut PlanOptions,
    path: &str,
) -> (Vec<Measured>, Vec<Diagnostic>) {
    let pos = |v: Option<i64>| v.filter(|&x| x > 0).unwrap_or(1);
    let sizes = [
        ("sglang_tp_size", "tp_size", pos(args.tp_size)),
        ("sglang_pp_size", "pp_size", pos(args.pp_size)),
        ("sglang_dp_size", "dp_size", pos(args.dp_size)),
    ];
    let model = args
        .model_path
        .as_deref()
        .map(|m| ("sglang_model_path", "model_path", m));
    let errors: Vec<Diagnostic> = launch_mismatches(log, path, &sizes, model, "the memory")
        .into_iter()
        .map(|(field, message, given)| mismatch(field, message, &given))
        .collect();
    let mut measured = Vec::new();
    // The rank with the most weights and the least room binds (SGLang takes
    // the minimum free memory over the launch's ranks, utils/common.py:427-576).
    let Some(load) = log.min("sglang_avail_mem_gib") else {
        return (measured, errors);
    };
    let usage_on_that_line = log
        .all("sglang_weights_gib")
        .find(|f| f.line == load.line)
        .or_else(|| log.max("sglang_weights_gib"));
    if let Some(w) = usage_on_that_line {
        let weights = w.value.number().unwrap_or(0.0);
        options.weights_gib = Some(weights);
        measured.push(Measured {
            input: "weights_gib".into(),
            value: weights,
            rule: "the \"mem usage\" of the \"Load weight end\" line with the least memory left"
                .into(),
            figure: w.clone(),
        });
        let mfs = log
            .first("sglang_mem_fraction_static")
            .and_then(|f| f.value.number())
            .or(args.mem_fraction_static);
        let avail = load.value.number().unwrap_or(0.0);
        if let Some(mfs) = mfs.filter(|m| *m > 0.0 && *m <= 1.0) {
            // SGLang's KV budget: the free memory now minus the slack kept
            // from the free memory before loading (kv_cache_configurator.py:2990-3007).
            let room = avail - (avail + weights) * (1.0 - mfs);
            if room > 0.0 {
                options.available_kv_cache_gib = Some(room);
                measured.push(Measured {
                    input: "available_kv_cache_gib".into(),
                    value: room,
                    rule: format!("avail mem {avail} - (avail mem + mem usage {weights}) x (1 - mem_fraction_static {mfs}) GB of \"Load weight end\" (SGLang's 'GB' is GiB: utils/common.py:576)"),
                    figure: load.clone(),
                });
            }
        }
    }
    options.measured_in = Some(format!("the engine log {path}"));
    (measured, errors)
}

fn mismatch(flag: &str, message: String, given: &str) -> Diagnostic {
    Diagnostic::new(
        Code::EngineLogMismatch,
        crate::diagnostic::Severity::Error,
        SglangStage::Never,
        FieldPath::root("engine_log").key(flag),
        message,
    )
    .given(&serde_json::json!(given))
    .hint("pass the start-up log of this launch (same model and parallel layout), or plan the launch the log is of")
}

/// The log's figures beside the plan's.
pub fn compare(log: &EngineLog, plan: &Plan) -> Vec<Compared> {
    let mut out = Vec::new();
    let Some(s) = &plan.sglang else { return out };
    if let Some(f) = log.first("max_total_num_tokens") {
        out.push(Compared::new(
            "max_total_num_tokens (device KV slots)",
            "slots",
            f,
            Some(s.device_slots as f64),
            Some(format!(
                "available bytes // {} B per slot (L x kv_row + L x index_row x host_to_device_ratio {}), rounded down to pages (model_executor/pool_configurator.py:560-647); the logged memory is rounded to 0.01 GB, so a few pages either way",
                s.device_cell_bytes, s.host_to_device_ratio
            )),
        ));
    }
    if let Some(f) = log.first("max_running_requests") {
        out.push(Compared::new(
            "max_running_requests",
            "requests",
            f,
            Some(s.max_running_requests as f64),
            Some(s.max_running_requests_rule.clone()),
        ));
    }
    if let Some(f) = log.first("context_len") {
        out.push(Compared::new(
            "context_len",
            "tokens",
            f,
            Some(plan.max_model_len as f64),
            None,
        ));
    }
    out
}

/// Plan a launch from its start-up log: the plan with the log's
/// measurements in place of the estimates, the log's figures beside the
/// plan's; a log of another launch is an `engine_log_mismatch` error in the
/// plan (planned without the log's figures).
pub fn plan(
    args: &SglangArgs,
    options: &PlanOptions,
    log: &EngineLog,
    path: &str,
) -> Result<Plan, crate::plan::PlanError> {
    let mut measured_options = options.clone();
    let (measured, errors) = measurements(log, args, &mut measured_options, path);
    let use_log = errors.is_empty();
    let mut plan = super::plan::plan(args, if use_log { &measured_options } else { options })?;
    if !errors.is_empty() {
        plan.errors.extend(errors);
        plan.valid = false;
    }
    let measured = if use_log { measured } else { Vec::new() };
    plan.engine_log = Some(report(log, path, measured, &plan));
    Ok(plan)
}

/// The report a plan carries.
pub fn report(
    log: &EngineLog,
    path: &str,
    measured: Vec<Measured>,
    plan: &Plan,
) -> EngineLogReport {
    let logged_hisparse = log
        .first("sglang_enable_hisparse")
        .is_some_and(|f| f.value.text() == Some("True"));
    EngineLogReport::new(
        log,
        path,
        crate::report::ENGINE_SGLANG,
        logged_hisparse,
        measured,
        compare(log, plan),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_log::Value::{Number, Text};

    #[test]
    fn server_args_fields_are_read_by_name() {
        let m = "server_args={'model_path': '/m/DeepSeek-V3.2', 'tokenizer_path': '/m', 'attn_tp_size': 2, 'tp_size': 8, 'pp_size': 1, 'mem_fraction_static': 0.835, 'dp_size': 1, 'enable_hisparse': True}";
        let got = read_server_args(m);
        assert!(got.contains(&("sglang_model_path", Text("/m/DeepSeek-V3.2".into()))));
        assert!(got.contains(&("sglang_tp_size", Number(8.0))));
        assert!(got.contains(&("sglang_mem_fraction_static", Number(0.835))));
        assert!(got.contains(&("sglang_enable_hisparse", Text("True".into()))));
    }
}
