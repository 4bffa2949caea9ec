//! Unit tests of the SGLang tree on the real model configs (tests/data/models):
//! the figures behind the coordinator warning, the planner and the host-RAM rule.

use super::deviations::coordinator_bytes;
use super::*;
use crate::diagnostic::Code;
use serde_json::{json, Value};

fn model(name: &str) -> String {
    format!(
        "{}/../../tests/data/models/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn decode(extra: Value) -> SglangArgs {
    let mut a = json!({"model_path": model("deepseek-v3.2"), "tp_size": 8, "enable_hisparse": true, "disaggregation_mode": "decode"});
    for (k, v) in extra.as_object().unwrap() {
        a[k] = v.clone();
    }
    SglangArgs::from_json(a).unwrap()
}

fn options(v: Value) -> crate::plan::PlanOptions {
    serde_json::from_value(v).unwrap()
}

#[test]
fn coordinator_bookkeeping_is_about_7_gib_on_deepseek_v3_2() {
    // SGLANG.md §4: S 2049, D 4096, 61 layers, 163,840 context, page 64.
    let gib = coordinator_bytes(61, 2049, 4096, 64, 163_840, 2048) as f64 / f64::from(1u32 << 30);
    assert!((7.0..8.5).contains(&gib), "{gib}");
    // At SGLang's default mem fraction nothing is left for it: a warning with
    // the fraction that leaves room (issue 22 item 8), rows as the plan resolves.
    let r = check(&decode(json!({})), &options(json!({"gpu": "h200"}))).unwrap();
    let w = r
        .warnings
        .iter()
        .find(|w| w.code == Code::CoordinatorMemoryUnreserved)
        .unwrap();
    assert!(
        w.message
            .contains("2048 requests per worker + 1 = 2049 request rows"),
        "{}",
        w.message
    );
    assert!(!w.fix.is_empty(), "{w:?}");
    // Without the GPU's memory there is no room to weigh: no warning.
    let r = check(&decode(json!({})), &options(json!({}))).unwrap();
    assert!(r
        .warnings
        .iter()
        .all(|w| w.code != Code::CoordinatorMemoryUnreserved));
}

#[test]
fn resolve_alone_matches_check_without_machine() {
    let a = decode(json!({"hisparse_config": "{\"device_buffer_size\": 4000}"}));
    let mut r = resolve(&a);
    let c = check(&a, &options(json!({}))).unwrap();
    assert_eq!(r.errors, c.errors);
    assert!(r.fixed_flags.is_none());
    r.fixed_flags.clone_from(&c.fixed_flags);
    assert_eq!(r, c);
}

#[test]
fn unknown_gpu_and_bad_options_are_usage_errors() {
    assert!(check(&decode(json!({})), &options(json!({"gpu": "nope"}))).is_err());
    assert!(plan(&decode(json!({})), &options(json!({"gpu": "nope"}))).is_err());
}

#[test]
fn plan_of_a_pd_decode_server_on_h200() {
    let p = plan(
        &decode(json!({"mem_fraction_static": 0.9})),
        &options(json!({"gpu": "h200", "host_memory_gib": 2048, "context_length": 131072})),
    )
    .unwrap();
    assert_eq!(p.engine, "sglang");
    assert_eq!(p.engine_version, "0.5.23");
    assert!(p.vllm_version.is_empty());
    let json: Value = serde_json::from_str(&p.to_json()).unwrap();
    assert!(json.get("vllm_version").is_none());
    assert_eq!(p.sizes.block_size, 64);
    assert_eq!(p.sizes.mla_row_bytes, 1152);
    // cell: 61 x 1152 + 61 x 132 x 2 bytes per device slot.
    assert_eq!(
        p.sizes.hisparse_block_bytes,
        64 * (61 * 1152 + 61 * 132 * 2)
    );
    let n_dev = p.gpu.hisparse_blocks.unwrap() * 64;
    // Host: (N_dev x 2 // 64 + 1) x 64 tokens x 61 x 1152 per rank; 8 ranks per node.
    assert_eq!(p.host.pool_bytes, (n_dev * 2 / 64 + 1) * 64 * 61 * 1152);
    assert_eq!(p.host.pools_per_node, 8);
    assert_eq!(p.host.pinned_bytes_per_node, p.host.pool_bytes * 8);
    let at = &p.at_context;
    assert_eq!(at.context_length, 131072);
    assert_eq!(at.gpu_limit, Some(n_dev / (4096 + 64)));
    assert_eq!(at.host_limit, (n_dev * 2 / 64 + 1) * 64 / 131072);
    // HiSparse serves more than the baseline (every token on the device).
    assert!(
        at.hisparse_requests.unwrap() > at.baseline_requests.unwrap(),
        "{at:?}"
    );
    assert!(p.valid, "{:?}", p.errors);
    assert!(p.sweep.iter().any(|s| s.context_length == 163_840));
}

#[test]
fn host_pool_beyond_the_ram_budget_is_refused_with_a_ratio_that_fits() {
    let a = decode(
        json!({"mem_fraction_static": 0.9, "hisparse_config": "{\"host_to_device_ratio\": 4}"}),
    );
    let p = plan(&a, &options(json!({"gpu": "h200"}))).unwrap();
    let per_rank_gib = p.host.pool_bytes as f64 / f64::from(1u32 << 30);
    // A node whose budget holds ratio 2 but not 4: 8 ranks x (pool / 2 x 1.2) + 10 GiB.
    let host = 10.0 + 8.0 * per_rank_gib / 2.0 * 1.2;
    let r = check(
        &a,
        &options(json!({"gpu": "h200", "host_memory_gib": host})),
    )
    .unwrap();
    let e = r
        .errors
        .iter()
        .find(|e| e.code == Code::HostPoolOverRamBudget)
        .expect("over budget");
    assert!(
        e.message.starts_with("Not enough host memory available."),
        "{}",
        e.message
    );
    assert_eq!(e.stage, stages::SglangStage::CoordinatorInit.into());
    let fixed = fixes_applied(&a, &r.errors).unwrap();
    let again = check(
        &fixed,
        &options(json!({"gpu": "h200", "host_memory_gib": host})),
    )
    .unwrap();
    assert!(again.valid, "{:?}", again.errors);
    assert_eq!(
        again.sglang_hisparse().unwrap().host_to_device_ratio.value,
        2
    );
    assert!(r
        .fixed_flags
        .unwrap()
        .contains("\"host_to_device_ratio\": 2"));
    // Without the node's RAM there is nothing to check.
    assert!(check(&a, &options(json!({"gpu": "h200"}))).unwrap().valid);
}

#[test]
fn plan_refuses_an_invalid_launch() {
    let e = plan(
        &decode(json!({"hisparse_config": "[1]"})),
        &options(json!({"gpu": "h200"})),
    )
    .unwrap_err();
    assert!(e.to_string().contains("hisparse_config_not_object"), "{e}");
    let off = SglangArgs::from_json(json!({"model_path": model("deepseek-v3.2")})).unwrap();
    assert!(plan(&off, &options(json!({"gpu": "h200"})))
        .unwrap_err()
        .to_string()
        .contains("not enabled"));
}

#[test]
fn report_round_trips_with_sglang_settings_and_stages() {
    let r = check(
        &decode(json!({"hisparse_config": "{\"device_buffer_size\": 4000}"})),
        &options(json!({})),
    )
    .unwrap();
    let back: crate::Report = serde_json::from_str(&r.to_json()).unwrap();
    // Read by its engine: every stage is SGLang's, `never` and `argparse` too.
    assert_eq!(back.errors, r.errors);
    let ok = check(&decode(json!({})), &options(json!({}))).unwrap();
    let back: crate::Report = serde_json::from_str(&ok.to_json()).unwrap();
    assert!(back.sglang_hisparse().is_some());
    assert_eq!(back.hisparse, ok.hisparse);
    // Its warnings' `never` reads back as SGLang's `never`, not vLLM's.
    assert!(ok
        .warnings
        .iter()
        .any(|w| w.stage == crate::diagnostic::Stage::Sglang(super::stages::SglangStage::Never)));
    assert_eq!(back, ok);
    // A stage the engine does not have is refused, naming the engine's stages.
    let mut doc: Value = serde_json::from_str(&ok.to_json()).unwrap();
    doc["warnings"][0]["stage"] = json!("workers");
    let e = serde_json::from_value::<crate::Report>(doc).unwrap_err();
    assert!(
        e.to_string().contains("\"workers\" is not an SGLang stage"),
        "{e}"
    );
}

#[test]
fn draft_tokens_follow_steps_with_eagle_topk_one() {
    // speculative_hook.py:1255-1266: draft tokens = steps + 1 whatever was given.
    let r = check(&decode(json!({"speculative_algorithm": "EAGLE", "speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 6})), &options(json!({}))).unwrap();
    assert!(r.valid, "{:?}", r.errors);
    assert_eq!(
        r.sglang_hisparse()
            .unwrap()
            .speculative_num_draft_tokens
            .as_ref()
            .unwrap()
            .value,
        3
    );
}

#[test]
fn request_slots_are_per_attention_dp_worker_with_decode_transfer_slots() {
    let spec = json!({"speculative_algorithm": "EAGLE", "max_running_requests": 8191});
    // One worker: 8192 slots against the 4096 buffer.
    let r = check(&decode(spec.clone()), &options(json!({}))).unwrap();
    assert!(r
        .errors
        .iter()
        .any(|e| e.code == Code::RequestSlotsOverDeviceBuffer));
    // Attention DP 8: 8191 // 8 + 1 = 1024 slots per worker (pool_configurator.py:1141-1144).
    let mut dp = spec.clone();
    dp["enable_dp_attention"] = json!(true);
    dp["dp_size"] = json!(8);
    assert!(check(&decode(dp), &options(json!({}))).unwrap().valid);
    // A small decode batch reserves 2 x its size for in-transfer requests:
    // 16 + 32 + 1 = 49 slots (pd_disaggregation_hook.py:129-143).
    let a = decode(json!({"max_running_requests": 16}));
    let r = check(&a, &options(json!({"gpu": "h200"}))).unwrap();
    let w = r
        .warnings
        .iter()
        .find(|w| w.code == Code::CoordinatorMemoryUnreserved)
        .unwrap();
    assert!(
        w.message
            .contains("16 requests per worker + 32 in-transfer + 1 = 49 request rows"),
        "{}",
        w.message
    );
}

#[test]
fn speculative_parameters_are_all_or_none() {
    // speculative_hook.py:1159-1174 (FACTS_sglang.md #6).
    let r = check(
        &decode(json!({"speculative_algorithm": "EAGLE", "speculative_num_steps": 2})),
        &options(json!({})),
    )
    .unwrap();
    assert_eq!(
        r.errors.iter().map(|e| e.code).collect::<Vec<_>>(),
        [Code::SpeculativeEagleTopkMissing]
    );
    let r = check(
        &decode(json!({"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 3})),
        &options(json!({})),
    )
    .unwrap();
    assert_eq!(
        r.errors.iter().map(|e| e.code).collect::<Vec<_>>(),
        [Code::SpeculativeNumStepsMissing]
    );
    // The fix sets topk too: steps alone would be the TypeError above.
    assert_eq!(
        r.fixed_flags.as_deref(),
        Some("--speculative-eagle-topk 1 --speculative-num-steps 2")
    );
    let fixed = check(
        &decode(json!({"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 3, "speculative_num_steps": 2, "speculative_eagle_topk": 1})),
        &options(json!({})),
    )
    .unwrap();
    assert!(fixed.valid, "{:?}", fixed.errors);
    // EAGLE alone: (3, 1, 4) and 48 requests, 49 slots.
    let r = check(
        &decode(json!({"speculative_algorithm": "EAGLE"})),
        &options(json!({"gpu": "h200"})),
    )
    .unwrap();
    assert!(r.valid, "{:?}", r.errors);
    let w = r
        .warnings
        .iter()
        .find(|w| w.code == Code::CoordinatorMemoryUnreserved)
        .unwrap();
    assert!(
        w.message
            .contains("48 requests per worker + 1 = 49 request rows"),
        "{}",
        w.message
    );
}

#[test]
fn hints_name_sglang_flags() {
    let r = check(
        &decode(json!({"disaggregation_mode": null, "enable_mixed_chunk": true})),
        &options(json!({})),
    )
    .unwrap();
    for e in &r.errors {
        let h = e.hint.as_deref().unwrap_or("");
        assert!(!h.contains("vllm"), "{h}");
    }
    let radix = r
        .errors
        .iter()
        .find(|e| e.code == Code::RadixCacheEnabled)
        .unwrap();
    assert!(
        radix
            .hint
            .as_deref()
            .unwrap()
            .contains("sglang serve: --disable-radix-cache"),
        "{:?}",
        radix.hint
    );
}

/// Issue 22: a valid launch checked against the node's RAM says what its
/// pools pin and what is left, in the plan's figures; none without the RAM
/// or the GPU (which sizes the pool), nor on an invalid launch.
#[test]
fn a_valid_launch_says_the_ram_headroom_it_checked() {
    let a = decode(json!({"disable_radix_cache": true}));
    let machine = options(json!({"gpu": "h200", "host_memory_gib": 2048}));
    let r = check(&a, &machine).unwrap();
    assert!(r.valid, "{:?}", r.errors);
    let m = r.host_memory.as_ref().expect("the RAM it checked");
    let p = plan(&a, &machine).unwrap();
    assert_eq!(m.host_memory_gib, 2048.0);
    assert_eq!(m.pools_per_node, 8);
    assert_eq!(m.pool_bytes, p.host.pool_bytes);
    assert_eq!(m.pinned_bytes, p.host.pinned_bytes_per_node);
    assert_eq!(Some(m.usable_bytes), p.host.usable_host_memory_bytes);
    assert_eq!(m.left_bytes, m.usable_bytes - m.pinned_bytes);
    assert!(m.rule.contains("pool_host/base.py:84-107"), "{}", m.rule);
    let json: Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["host_memory"]["left_bytes"], json!(m.left_bytes));
    for machine in [json!({"gpu": "h200"}), json!({"host_memory_gib": 2048})] {
        let r = check(&a, &options(machine)).unwrap();
        assert!(r.valid && r.host_memory.is_none());
        assert!(!r.to_json().contains("host_memory\""));
    }
    let refused = check(&a, &options(json!({"gpu": "h200", "host_memory_gib": 64}))).unwrap();
    assert!(!refused.valid && refused.host_memory.is_none());
}

/// Issue 22: an error only the other fixes reveal joins the report, marked
/// `revealed`: the radix cache on (an error with a fix) hid a host pool the
/// node's RAM cannot pin, so pasting the printed flags once was refused again.
#[test]
fn an_error_the_fixes_reveal_is_in_the_first_report() {
    // Outside P/D decode, where SGLang keeps the radix cache on unless told.
    let a = SglangArgs::from_json(json!({"model_path": model("deepseek-v3.2"), "tp_size": 8,
        "enable_hisparse": true, "hisparse_config": "{\"host_to_device_ratio\": 4}"}))
    .unwrap();
    let machine = options(json!({"gpu": "h200", "host_memory_gib": 512}));
    let r = check(&a, &machine).unwrap();
    let codes: Vec<(Code, bool)> = r.errors.iter().map(|e| (e.code, e.revealed)).collect();
    assert_eq!(
        codes,
        vec![
            (Code::RadixCacheEnabled, false),
            (Code::HostPoolOverRamBudget, true)
        ],
        "{:#?}",
        r.errors
    );
    let fixed = fixes_applied(&a, &r.errors).unwrap();
    let again = check(&fixed, &machine).unwrap();
    assert!(again.valid, "{:?}", again.errors);
    let flags = r.fixed_flags.unwrap();
    assert!(
        flags.contains("--disable-radix-cache") && flags.contains("host_to_device_ratio"),
        "{flags}"
    );
}
