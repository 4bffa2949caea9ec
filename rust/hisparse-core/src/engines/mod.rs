//! One module tree per engine release: each owns its flag dialect, schema,
//! resolution and defaults, rules (with the engine's file:line and the stage
//! at which it refuses), deviations and fixes. What HiSparse itself is (model
//! dimensions, sizes, pools, capacity) lives outside, engine-neutral.

pub mod sglang_0_5_23;
pub mod vllm_0_33;

use crate::diagnostic::Stage;

/// The sentence `hisparse-check` and the vLLM plugin print for a
/// diagnostic's stage ("vLLM 0.33.0 refuses this after the model has loaded,
/// ..."): the engine release's own words.
pub fn stage_sentence(stage: Stage, is_error: bool) -> String {
    match stage {
        Stage::Vllm(s) => vllm_0_33::stages::sentence(s, is_error),
        Stage::Sglang(s) => sglang_0_5_23::stages::sentence(s, is_error),
    }
}

/// Every engine release's start-up log lines, read in one pass
/// (`--engine-log`): a log is kept for `engine` (`vllm`, `sglang`), and a log
/// with none of its lines says whose lines it has instead.
pub fn read_engine_log(
    engine: &str,
    reader: &mut dyn std::io::BufRead,
    path: &str,
) -> Result<crate::engine_log::EngineLog, String> {
    let all: Vec<crate::engine_log::LineRule> = vllm_0_33::engine_log::RULES
        .iter()
        .chain(sglang_0_5_23::engine_log::RULES)
        .copied()
        .collect();
    let mut log = crate::engine_log::read(reader, &all)
        .map_err(|e| format!("--engine-log {path}: cannot read it: {e}"))?;
    let (prefix, name, other) = match engine {
        crate::report::ENGINE_SGLANG => ("sglang/", "SGLang 0.5.23", "vLLM"),
        _ => ("vllm/", "vLLM 0.33.0", "SGLang"),
    };
    let others = log
        .figures
        .iter()
        .filter(|f| !f.source.starts_with(prefix))
        .count();
    log.figures.retain(|f| f.source.starts_with(prefix));
    if log.figures.is_empty() {
        let found = if others > 0 {
            format!("it has {other}'s start-up lines instead: plan with that engine")
        } else {
            "it has none of the lines the engine prints while it starts (\"Model loading took\", \"Available KV cache memory\", \"Load weight end\", \"max_total_num_tokens=\")".to_owned()
        };
        let read = match (log.lines, log.stopped_early) {
            (1, false) => "its one line".to_owned(),
            (n, false) => format!("its {n} lines"),
            (1, true) => "the one line of its first GiB (the rest not read)".to_owned(),
            (n, true) => format!("the {n} lines of its first GiB (the rest not read)"),
        };
        return Err(format!(
            "--engine-log {path}: no {name} start-up line in {read}: {found}"
        ));
    }
    Ok(log)
}
