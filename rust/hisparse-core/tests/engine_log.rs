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

mod sglang {
    use super::data;
    use hisparse_core::engines::read_engine_log;
    use hisparse_core::engines::sglang_0_5_23::{self as sg, SglangArgs};
    use hisparse_core::plan::{Plan, PlanOptions};
    use hisparse_core::sizes::GIB;
    use hisparse_core::Code;
    use serde_json::json;

    const LOG: &str = "sglang-dsv32-tp8-hisparse.log";

    fn plan(tp: u64) -> Plan {
        let model = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/models/deepseek-v3.2"
        );
        let args = SglangArgs::from_json(json!({"model_path": model, "tp_size": tp,
            "enable_hisparse": true, "disaggregation_mode": "decode",
            "hisparse_config": "{\"device_buffer_size\": 4096}"}))
        .unwrap();
        let options: PlanOptions =
            serde_json::from_value(json!({"gpu": "h200", "host_memory_gib": 2048})).unwrap();
        let text = data(LOG);
        let log = read_engine_log("sglang", &mut text.as_bytes(), LOG).unwrap();
        sg::engine_log::plan(&args, &options, &log, LOG).unwrap()
    }

    #[test]
    fn the_kv_budget_is_sglangs_from_the_load_weight_end_line() {
        // The fixture's "Load weight end": avail mem 62.20, mem usage 78.20;
        // server_args mem_fraction_static 0.929 (kv_cache_configurator.py:2990-3007:
        // free now - free before loading x (1 - mem_fraction_static)).
        let p = plan(8);
        assert!(p.valid, "{:?}", p.errors);
        let room = 62.2 - (62.2 + 78.2) * (1.0 - 0.929);
        assert_eq!(p.gpu.kv_bytes_per_gpu, Some((room * GIB) as u64));
        assert_eq!(p.gpu.weights_bytes_per_gpu, Some((78.2 * GIB) as u64));
        assert!(
            p.gpu.kv_source.starts_with("measured:"),
            "{}",
            p.gpu.kv_source
        );
        let r = p.engine_log.as_ref().unwrap();
        assert!(r.logged_hisparse);
        assert_eq!(r.engine, "sglang");
        let inputs: Vec<&str> = r.measured.iter().map(|m| m.input.as_str()).collect();
        assert_eq!(inputs, ["weights_gib", "available_kv_cache_gib"]);
        // Device slots from that room: 56,081,... // 86,376 B per slot, to pages.
        let s = p.sglang.as_ref().unwrap();
        assert_eq!(s.device_slots, (room * GIB) as u64 / 86_376 / 64 * 64);
    }

    #[test]
    fn the_schedulers_sizes_are_compared_with_the_plans() {
        // The scheduler's line as managers/scheduler.py:1268-1276 writes it
        // (tp_rank 0 only), with the figures this launch gives at that room.
        let base = plan(8);
        let s = base.sglang.as_ref().unwrap();
        let line = format!(
            "[2026-12-03 09:13:40 TP0] max_total_num_tokens={}, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests={}, context_len=163840, available_gpu_mem=9.12 GB\n",
            s.device_slots, s.max_running_requests
        );
        let text = data(LOG) + &line;
        let log = read_engine_log("sglang", &mut text.as_bytes(), LOG).unwrap();
        let model = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/models/deepseek-v3.2"
        );
        let args = SglangArgs::from_json(json!({"model_path": model, "tp_size": 8,
            "enable_hisparse": true, "disaggregation_mode": "decode",
            "hisparse_config": "{\"device_buffer_size\": 4096}"}))
        .unwrap();
        let options: PlanOptions =
            serde_json::from_value(json!({"gpu": "h200", "host_memory_gib": 2048})).unwrap();
        let p = sg::engine_log::plan(&args, &options, &log, LOG).unwrap();
        let compared = &p.engine_log.as_ref().unwrap().compared;
        let figures: Vec<(&str, f64, Option<f64>)> = compared
            .iter()
            .map(|c| (c.figure.as_str(), c.logged, c.difference))
            .collect();
        assert_eq!(figures.len(), 3, "{figures:?}");
        assert!(figures.iter().all(|f| f.2 == Some(0.0)), "{figures:?}");
        assert_eq!(compared[0].line, 3);
        assert_eq!(compared[0].source, "sglang/srt/managers/scheduler.py:1268");
    }

    #[test]
    fn a_log_of_another_layout_is_an_error_and_is_not_used() {
        let p = plan(4);
        assert!(!p.valid);
        let e = p
            .errors
            .iter()
            .find(|e| e.code == Code::EngineLogMismatch)
            .expect("engine_log_mismatch");
        assert_eq!(e.path.to_string(), "engine_log.tp_size");
        assert!(
            e.message.contains("tp_size 8, this launch has 4"),
            "{}",
            e.message
        );
        assert!(p.engine_log.as_ref().unwrap().measured.is_empty());
        assert!(!p.gpu.kv_source.starts_with("measured:"));
    }
}
