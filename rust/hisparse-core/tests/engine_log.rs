//! The engine start-up log reader (`--plan --engine-log`) on logs as users
//! have them (tests/data/engine_logs/README.md says where each comes from).

use hisparse_core::engine_log::{read, EngineLog, Value};
use hisparse_core::engines::{read_engine_log, vllm_0_33};

fn data(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/engine_logs/");
    std::fs::read_to_string(format!("{path}{name}")).unwrap()
}

fn vllm(text: &str) -> EngineLog {
    read(&mut text.as_bytes(), vllm_0_33::engine_log::RULES).unwrap()
}

#[test]
fn an_older_vllm_two_line_capacity_is_read_per_rank() {
    // vllm-project/vllm#15928: one pair of lines per rank.
    let log = vllm(&data("vllm-issue-15928-excerpt.log"));
    let tokens: Vec<f64> = log
        .all("kv_cache_tokens")
        .filter_map(|f| f.value.number())
        .collect();
    assert_eq!(tokens, [107_824.0, 107_456.0, 107_312.0]);
    assert_eq!(
        log.min("max_concurrency").unwrap().value,
        Value::Number(3.27)
    );
    assert_eq!(
        log.first("concurrency_tokens").unwrap().value,
        Value::Number(32_768.0)
    );
    // The old form says "GPU KV cache size": no host pool.
    assert!(log.first("kv_cache_pools").is_none());
}

#[test]
fn a_log_of_the_other_engine_says_so() {
    let sglang = "[2026-01-01 10:00:00 TP0] Load weight end. elapsed=100.00 s, type=DeepseekV32ForCausalLM, avail mem=60.10 GB, mem usage=78.20 GB.\n";
    let e = read_engine_log("vllm", &mut sglang.as_bytes(), "x.log").unwrap_err();
    assert!(e.contains("SGLang's start-up lines instead"), "{e}");
    let ok = read_engine_log("sglang", &mut sglang.as_bytes(), "x.log").unwrap();
    assert_eq!(
        ok.first("sglang_weights_gib").unwrap().value,
        Value::Number(78.2)
    );
    assert_eq!(
        ok.first("sglang_weights_gib").unwrap().rank.as_deref(),
        Some("TP0")
    );
    let e = read_engine_log("vllm", &mut "hello\nworld\n".as_bytes(), "x.log").unwrap_err();
    assert!(
        e.contains("no vLLM 0.33.0 start-up line in its 2 lines"),
        "{e}"
    );
}

#[test]
fn a_log_cut_short_keeps_what_was_read() {
    let full = data("vllm-issue-15928-excerpt.log");
    let cut = &full[..full.len() - 20];
    let log = vllm(cut);
    assert_eq!(log.lines, 6);
    assert_eq!(log.all("max_concurrency").count(), 2);
}
