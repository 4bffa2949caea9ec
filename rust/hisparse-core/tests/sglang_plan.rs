//! The SGLang 0.5.23 plan's figures, pinned to numbers worked out by hand from
//! the wheel's formulas (the arithmetic is in each comment), and its
//! `mem_fraction_static` default pinned to what SGLang's own
//! `prepare_server_args` + `resolve_once` resolved (run in .venv-sglang with
//! `arg_groups.memory_hook.get_device_memory_capacity` stubbed to the MiB given,
//! `--device cuda`, on 2026-12-01).

use hisparse_core::engines::sglang_0_5_23::{self as sg, SglangArgs};
use hisparse_core::plan::{Limit, Plan, PlanOptions};
use serde_json::{json, Value};

fn model() -> String {
    format!(
        "{}/../../tests/data/models/deepseek-v3.2",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn args(extra: Value) -> SglangArgs {
    let mut a = json!({"model_path": model(), "tp_size": 8, "enable_hisparse": true,
        "disaggregation_mode": "decode", "hisparse_config": "{\"device_buffer_size\": 4096}"});
    for (k, v) in extra.as_object().unwrap() {
        a[k] = v.clone();
    }
    SglangArgs::from_json(a).unwrap()
}

fn plan(extra: Value, options: Value) -> Plan {
    let o: PlanOptions = serde_json::from_value(options).unwrap();
    sg::plan(&args(extra), &o).unwrap()
}

/// The README's P/D decode launch on H200 with 78 GiB of weights given.
fn dsv32() -> Plan {
    plan(
        json!({}),
        json!({"gpu": "h200", "host_memory_gib": 2048, "weights_gib": 78}),
    )
}

#[test]
fn mem_fraction_static_default_is_sglangs() {
    // round((144,384 - max(512 + 1.5 x 2048 + 1024 + 512 x 2, 10240)) / 144,384, 3)
    // = round(134,144 / 144,384, 3) = 0.929
    let p = dsv32();
    assert_eq!(p.gpu.gpu_memory_utilization, 0.929);
    let sgz = p.sglang.as_ref().unwrap();
    assert!(
        sgz.mem_fraction_static_rule
            .contains("arg_groups/memory_hook.py:281-342"),
        "{}",
        sgz.mem_fraction_static_rule
    );
    // The same values SGLang 0.5.23 resolved for these launches (see the header).
    let cases: [(Value, f64, f64); 4] = [
        // no P/D: 512 + 1.5 x 8192 (chunked_prefill_size) + 1024 + 1024 = 14,848 -> 0.897
        (
            json!({"disaggregation_mode": null, "disable_radix_cache": true}),
            141.0,
            0.897,
        ),
        // EAGLE in P/D decode: under the 10 GiB floor -> 0.929
        (json!({"speculative_algorithm": "EAGLE"}), 141.0, 0.929),
        // DP attention 8: 512 + 3072 + 1024 + 512 x 2 + 512 x 8 x 3 + 512 x 8 x 1.5 = 24,064 -> 0.833
        (
            json!({"dp_size": 8, "enable_dp_attention": true}),
            141.0,
            0.833,
        ),
        // 80 GiB, TP 4, chunked 16384: 512 + 24,576 + 512 + 1024 = 26,624 -> 0.675
        (
            json!({"tp_size": 4, "disaggregation_mode": null, "disable_radix_cache": true,
                   "chunked_prefill_size": 16384}),
            80.0,
            0.675,
        ),
    ];
    for (extra, gpu_gib, want) in cases {
        let p = plan(
            extra.clone(),
            json!({"gpu_memory_gib": gpu_gib, "weights_gib": 20}),
        );
        assert_eq!(p.gpu.gpu_memory_utilization, want, "{extra}");
    }
    // Given: used as is.
    let p = plan(
        json!({"mem_fraction_static": 0.8}),
        json!({"gpu": "h200", "weights_gib": 78}),
    );
    assert_eq!(p.gpu.gpu_memory_utilization, 0.8);
}

#[test]
fn device_slots_cell_and_request_footprint() {
    let p = dsv32();
    let s = p.sglang.as_ref().unwrap();
    // cell 61 x 1152 + 61 x 132 x 2 = 86,376 B
    assert_eq!(s.device_cell_bytes, 86_376);
    // available = int(141 GiB x 0.929) - 78 GiB = 56,896,505,511 B
    assert_eq!(p.gpu.kv_bytes_per_gpu, Some(56_896_505_511));
    // N_dev = 56,896,505,511 // 86,376 // 64 x 64 = 658,688
    assert_eq!(s.device_slots, 658_688);
    // D + 64 = 4160 slots, no speculation
    assert_eq!(s.request_device_slots, 4160);
    assert_eq!(s.speculative_scratch_slots, 0);
    assert_eq!(p.at_context.hisparse_gpu_bytes_per_request, 4160 * 86_376);
    // without HiSparse: 56,896,505,511 // (61 x 1284) // 64 x 64 = 726,400 slots
    assert_eq!(s.baseline_device_slots, 726_400);
    assert_eq!(p.at_context.baseline_requests, Some(726_400 / 163_840));
}

#[test]
fn max_running_requests_as_sglang_resolves_it() {
    let p = dsv32();
    // not given: min(max(min(int(658,688 / 163,840 x 512) = 2058, 4096), 2048), 329,344) = 2058
    assert_eq!(p.gpu.max_num_seqs, 2058);
    assert_eq!(p.sglang.as_ref().unwrap().max_running_requests, 2058);
    // EAGLE resolves 48; its scratch: W = 4 x 2048 = 8192, min(8192, max(1024, 8192 - 4096)) = 4096.
    let e = plan(
        json!({"speculative_algorithm": "EAGLE"}),
        json!({"gpu": "h200", "weights_gib": 78}),
    );
    let s = e.sglang.as_ref().unwrap();
    assert_eq!(s.max_running_requests, 48);
    assert_eq!(s.speculative_scratch_slots, 4096);
    assert_eq!(s.request_device_slots, 4096 + 64 + 4096);
    // Given: split over attention-DP workers, min(m // dp, N_dev // 2).
    let g = plan(
        json!({"max_running_requests": 64, "dp_size": 8, "enable_dp_attention": true}),
        json!({"gpu": "h200", "weights_gib": 78, "context_length": 8192}),
    );
    assert_eq!(g.gpu.max_num_seqs, 8);
    // A cap below the device limit binds, named as SGLang names it in the text.
    assert_eq!(g.at_context.hisparse_limit, Some(Limit::MaxNumSeqs));
}

#[test]
fn host_pool_from_device_slots_and_ratio() {
    let p = dsv32();
    let s = p.sglang.as_ref().unwrap();
    // N_host = (658,688 x 2 // 64 + 1) x 64 = 1,317,440 tokens
    assert_eq!(s.host_tokens, 1_317_440);
    // x 61 x 1152 = 92,579,143,680 B = 86.22 GiB (2 decimals)
    assert_eq!(p.host.pool_bytes, 92_579_143_680);
    assert_eq!(p.host.host_pool_gib, 86.22);
    assert_eq!(p.host.pools_per_node, 8);
    // budget per rank (2048 GiB - 10 GiB) / 8 = 273,535,729,664 B
    assert_eq!(s.ranks_per_host, 8);
    assert_eq!(s.host_budget_per_rank_bytes, Some(273_535_729_664));
    assert!(p.valid, "{:?}", p.errors);
}

#[test]
fn limits_and_the_ratio_the_sweep_suggests() {
    let p = dsv32();
    let a = &p.at_context;
    // device 658,688 // 4160 = 158; host 1,317,440 // 163,840 = 8
    assert_eq!(a.gpu_limit, Some(158));
    assert_eq!(a.host_limit, 8);
    assert_eq!(a.hisparse_requests, Some(8));
    assert_eq!(a.hisparse_limit, Some(Limit::Host));
    // Ratio 10: cell 61 x 1152 + 61 x 132 x 10 = 150,792; N_dev 377,280; N_host
    // 3,772,864 holds 23 of 163,840 tokens; ratio 11 pins 3,939,648 x 70,272 B
    // = 276.85 GB, over the 273.54 GB budget per rank.
    assert_eq!(a.host_to_device_ratio, Some(10));
    assert_eq!(a.min_host_pool_requests, Some(23));
    // ... of the 377,280 // 4160 = 90 the device holds at ratio 10
    // (max_running_requests there: max(min(int(377,280 / 163,840 x 512) = 1179, 4096), 2048) = 2048).
    assert_eq!(a.target_requests, Some(90));
    assert_eq!(a.min_host_pool_gib, Some(246.92));
    // 8K: ratio 2 already holds the device's 158 (1,317,440 // 8192 = 160).
    let first = &p.sweep[0];
    assert_eq!(first.context_length, 8192);
    assert_eq!(first.host_to_device_ratio, Some(2));
    assert_eq!(first.min_host_pool_requests, Some(158));
}

#[test]
fn sglang_fields_are_in_the_json() {
    let p = dsv32();
    let j: Value = serde_json::from_str(&p.to_json()).unwrap();
    assert!(j["sglang"].is_object());
    assert!(j["at_context"]["host_to_device_ratio"].is_u64());
    assert_eq!(j["host"]["host_pool_gib"], json!(86.22));
    let back: Plan = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(back.sglang, p.sglang);
    assert_eq!(back.sweep, p.sweep);
}

#[test]
fn pd_decode_does_not_hold_the_prompt_in_device_slots() {
    // The operator's launch: --max-total-tokens 131072, R 4, weights estimated.
    let launch = |extra: Value| {
        let mut a = json!({"max_total_tokens": 131072,
            "hisparse_config": "{\"host_to_device_ratio\": 4}"});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        plan(a, json!({"gpu": "h200"}))
    };
    let p = launch(json!({}));
    let s = p.sglang.as_ref().unwrap();
    // N_dev capped at 131,072; the prompt lands in the host pool
    // (disaggregation/decode.py:2321-2330), so the device holds 131,072 // 4160 = 31.
    assert_eq!(s.device_slots, 131_072);
    assert!(!s.prompt_on_device);
    assert_eq!(p.at_context.gpu_limit, Some(31));
    // N_host = (131,072 x 4 // 64 + 1) x 64 = 524,352 holds 3 of 163,840 tokens.
    assert_eq!(s.host_tokens, 524_352);
    assert_eq!(p.at_context.hisparse_requests, Some(3));
    assert_eq!(p.at_context.hisparse_limit, Some(Limit::Host));
    assert!(p.valid, "{:?}", p.errors);
    // Aggregated serving prefills into device slots (hisparse_coordinator.py:838-876):
    // a 163,840-token prompt does not fit 131,072 slots.
    let agg = launch(json!({"disaggregation_mode": null, "disable_radix_cache": true}));
    assert!(agg.sglang.as_ref().unwrap().prompt_on_device);
    assert_eq!(agg.at_context.gpu_limit, Some(0));
    let e = &agg.errors[0];
    assert_eq!(e.code.as_str(), "sglang_plan_serves_no_requests");
    assert_eq!(e.path.to_string(), "hisparse_config.device_buffer_size");
    assert!(
        e.message
            .contains("163840-token prompt does not fit the 131072 device KV slots"),
        "{}",
        e.message
    );
}

#[test]
fn mtp_adds_the_draft_layer_to_the_cell_and_the_weights() {
    let e = plan(
        json!({"speculative_algorithm": "EAGLE"}),
        json!({"gpu": "h200", "weights_gib": 78}),
    );
    let s = e.sglang.as_ref().unwrap();
    assert_eq!(e.sizes.draft_layers, 1);
    // 61 x 1152 + 61 x 132 x 2 + 1 x (1152 + 132) x 2 = 88,944 B
    // (pool_configurator.py:260-311: the draft indexed by the host-expanded ids)
    assert_eq!(s.device_cell_bytes, 88_944);
    // 56,896,505,511 // 88,944 // 64 x 64 = 639,680
    assert_eq!(s.device_slots, 639_680);
    // without HiSparse: // (62 x 1284) // 64 x 64 = 714,688
    assert_eq!(s.baseline_device_slots, 714_688);
    // NEXTN is EAGLE (arg_groups/speculative_hook.py:109): the same cell.
    let n = plan(
        json!({"speculative_algorithm": "NEXTN"}),
        json!({"gpu": "h200", "weights_gib": 78}),
    );
    assert_eq!(n.sglang.as_ref().unwrap().device_cell_bytes, 88_944);
    // The estimate loads the MTP layer's weights too.
    let est = |extra: Value| {
        plan(extra, json!({"gpu": "h200"}))
            .gpu
            .weights_bytes_per_gpu
            .unwrap()
    };
    assert!(est(json!({"speculative_algorithm": "EAGLE"})) > est(json!({})));
}

#[test]
fn weights_over_the_gpu_fail_at_the_weight_load_not_at_a_request() {
    // GLM-5 in bf16 on H200, TP 8: ~173 GiB of weights per GPU > 141 GiB.
    let dir = format!(
        "{}/../../tests/data/models/glm-5",
        env!("CARGO_MANIFEST_DIR")
    );
    let p = plan(json!({"model_path": dir}), json!({"gpu": "h200"}));
    assert_eq!(p.sglang.as_ref().unwrap().device_slots, 0);
    let e = &p.errors[0];
    assert_eq!(e.code.as_str(), "sglang_plan_serves_no_requests");
    assert_eq!(e.path.to_string(), "mem_fraction_static");
    assert_eq!(e.stage.as_str(), "after_weights_load");
    assert!(
        e.message.contains("exceed the GPU's 141 GiB"),
        "{}",
        e.message
    );
    // Weights under the GPU but over its fraction: SGLang's own message.
    let q = plan(json!({}), json!({"gpu": "h200", "weights_gib": 135}));
    let e = &q.errors[0];
    assert_eq!(e.path.to_string(), "mem_fraction_static");
    assert!(
        e.message
            .contains("Not enough memory. Please try to increase --mem-fraction-static."),
        "{}",
        e.message
    );
}

#[test]
fn dp_attention_counts_the_attention_weights_each_gpu_holds() {
    let w = |extra: Value| {
        plan(extra, json!({"gpu": "h200", "context_length": 8192}))
            .gpu
            .weights_bytes_per_gpu
            .unwrap()
    };
    let tp8 = w(json!({}));
    let dp8 = w(json!({"dp_size": 8, "enable_dp_attention": true}));
    // q_b / kv_b / o_proj split over attention TP = 8 / 8 = 1 (runtime_context.py:73-76)
    // instead of 8: 61 x (1536 x 128 x 192 + 512 x 128 x 256 + 128 x 128 x 7168)
    // = 10,489,954,304 params x (1 + 4/16384) B = 10,492,515,328 B, 7/8 of it more per GPU.
    assert_eq!(dp8 - tp8, 10_492_515_328 - 10_492_515_328 / 8);
    let p = plan(
        json!({"dp_size": 8, "enable_dp_attention": true}),
        json!({"gpu": "h200"}),
    );
    let rule = p.gpu.weights_source.unwrap();
    assert!(
        rule.contains("split over attention TP 1 = tp / dp"),
        "{rule}"
    );
}

#[test]
fn a_plan_with_warnings_round_trips_with_sglangs_stage_names() {
    // Issue 24: a plan read back from JSON labelled SGLang's `never` warnings
    // with vLLM's `never`. Read by its engine, it is the plan it was.
    use hisparse_core::diagnostic::Stage;
    use hisparse_core::engines::sglang_0_5_23::stages::SglangStage;
    let p = dsv32();
    assert!(
        p.warnings
            .iter()
            .any(|w| w.stage == Stage::Sglang(SglangStage::Never)),
        "{:?}",
        p.warnings
    );
    let back: Plan = serde_json::from_str(&p.to_json()).unwrap();
    assert!(back
        .warnings
        .iter()
        .chain(&back.errors)
        .all(|d| matches!(d.stage, Stage::Sglang(_))));
    assert_eq!(back, p);
    // A plan without `engine` (written before SGLang) reads as vLLM's.
    let mut doc: Value = serde_json::from_str(&p.to_json()).unwrap();
    doc.as_object_mut().unwrap().remove("engine");
    let old: Plan = serde_json::from_value(doc).unwrap();
    assert!(old
        .warnings
        .iter()
        .all(|d| matches!(d.stage, Stage::Vllm(_))));
}

/// Without HiSparse SGLang gives GLM-5.2's IndexShare layers (57 of 78 reuse
/// the previous indexer's top-k) no index-K rows
/// (mem_cache/kv_cache_configurator.py:131-145, model_executor/pool_configurator.py:598-633);
/// with HiSparse every layer keeps them (:592-597). Found by
/// tests/sglang/test_capacity_differential.py: SGLang's cell 53,940 B at fp8_e4m3,
/// the plan's was 61,464 (every layer's 132 B).
#[test]
fn baseline_cell_leaves_out_indexshare_layers_index_rows() {
    let glm52 = format!(
        "{}/../../tests/data/models/glm-5.2",
        env!("CARGO_MANIFEST_DIR")
    );
    let p = plan(
        json!({"model_path": glm52, "kv_cache_dtype": "fp8_e4m3"}),
        json!({"gpu": "h200", "host_memory_gib": 2048, "available_kv_cache_gib": 10.0}),
    );
    // 78 x 656 + 21 x 132 = 51,168 + 2,772 = 53,940 B per slot
    assert_eq!(p.sizes.baseline_block_bytes, 64 * 53_940);
    // (10 GiB // 53,940) // 64 x 64 = 199,040 // 64 x 64 = 199,040
    assert_eq!(
        p.sglang.as_ref().unwrap().baseline_device_slots,
        (10u64 << 30) / 53_940 / 64 * 64
    );
    // With HiSparse every layer: 78 x 656 + 78 x 132 x 1 (ratio 1) = 61,464
    let s = p.sglang.as_ref().unwrap();
    assert_eq!(
        s.device_cell_bytes,
        78 * 656 + 78 * 132 * s.host_to_device_ratio
    );
}
