//! SGLang 0.5.23 launches drawn at random (the flags HiSparse constrains, the
//! real model configs, malformed --hisparse-config): the check never panics,
//! every diagnostic carries an SGLang stage, each error's fix removes it when
//! applied alone, and all fixes together converge (bounded rounds) to a report
//! with no error that had a fix.

mod common;

use hisparse_core::diagnostic::Stage;
use hisparse_core::engines::sglang_0_5_23::{self as sg, SglangArgs};
use hisparse_core::plan::PlanOptions;
use hisparse_core::report::Report;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const MODELS: &[&str] = &[
    "deepseek-v3.2",
    "glm-5",
    "glm-5.1",
    "deepseek-v4-flash",
    "qwen3-8b",
    "kimi-k2.5",
    "glm-5.3-flash-unquantized",
];
/// Rounds of "apply every fix, re-check" allowed to converge.
const MAX_ROUNDS: usize = 6;

fn model(name: &str) -> String {
    format!(
        "{}/../../tests/data/models/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop_oneof![2 => Just(None), 1 => s.prop_map(Some)].boxed()
}

fn int_like() -> BoxedStrategy<Value> {
    prop_oneof![
        (-10i64..70000).prop_map(Value::from),
        prop::sample::select(vec![
            0i64, 64, 1000, 1024, 2048, 4000, 4096, 8192, 32767, 32768, 40000
        ])
        .prop_map(Value::from),
        (0.0f64..5.0).prop_map(Value::from),
        Just(json!(true)),
        Just(json!("2048")),
        prop::sample::select(vec![
            json!(i64::MIN),
            json!(i64::MAX),
            json!(u64::MAX),
            json!(-1e300)
        ]),
        Just(Value::Null),
    ]
    .boxed()
}

fn hisparse_config() -> BoxedStrategy<Option<Value>> {
    let keys = prop::sample::select(vec![
        "top_k",
        "device_buffer_size",
        "host_to_device_ratio",
        "swap_in_block_size",
        "device_bufer_size",
        "algorithm",
        "page_size",
    ]);
    let object = prop::collection::vec((keys, int_like()), 0..5).prop_map(|kv| {
        let m: Map<String, Value> = kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        Value::Object(m)
    });
    prop_oneof![
        2 => Just(None),
        4 => object.clone().prop_map(|o| Some(Value::String(o.to_string()))),
        1 => object.prop_map(Some),
        1 => prop::sample::select(vec!["{top_k: 1}", "[1, 2]", "null", "3", "\"x\"", ""]).prop_map(|s| Some(Value::String(s.to_owned()))),
    ]
    .boxed()
}

prop_compose! {
    fn launch()(
        m in prop::sample::select(MODELS),
        on in opt(any::<bool>()),
        cfg in hisparse_config(),
        mode in opt(prop::sample::select(vec!["null", "prefill", "decode"])),
        tp in opt(prop::sample::select(vec![1i64, 2, 8, 16, 0, -3, i64::MAX])),
        dcp in opt(1i64..3),
        page in opt(prop::sample::select(vec![1i64, 16, 32, 64, 128])),
        dtype in opt(prop::sample::select(vec!["auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"])),
        pre in opt(prop::sample::select(vec!["flashmla_sparse", "flashmla_kv", "tilelang", "triton", "flashinfer_sparse_mla"])),
        dec in opt(prop::sample::select(vec!["flashmla_sparse", "flashmla_kv", "tilelang", "triton"])),
        flags in prop::collection::vec(any::<bool>(), 8),
        chunk in opt(prop::sample::select(vec![-1i64, 1000, 4096, 8192])),
        mrr in opt(prop::sample::select(vec![16i64, 256, 4095, 8191, i64::MAX, -5])),
        spec in opt(prop::sample::select(vec!["EAGLE", "NONE"])),
        steps in opt(prop_oneof![1i64..7, Just(i64::MAX), Just(i64::MIN)]),
        topk in opt(1i64..3),
        draft in opt(1i64..8),
        backend in opt(prop::sample::select(vec!["mooncake", "nixl", "fake"])),
        threshold in opt(prop::sample::select(vec![0.0f64, 0.5, 1.0])),
        policy in opt(prop::sample::select(vec!["early", "prefill_complete"])),
    ) -> Value {
        let mut a = json!({"model_path": model(m)});
        let mut put = |k: &str, v: Option<Value>| { if let Some(v) = v { a[k] = v; } };
        put("enable_hisparse", on.map(Value::from));
        put("hisparse_config", cfg);
        put("disaggregation_mode", mode.map(Value::from));
        put("tp_size", tp.map(Value::from));
        put("dcp_size", dcp.map(Value::from));
        put("page_size", page.map(Value::from));
        put("kv_cache_dtype", dtype.map(Value::from));
        put("dsa_prefill_backend", pre.map(Value::from));
        put("dsa_decode_backend", dec.map(Value::from));
        for (i, f) in ["disable_radix_cache", "disaggregation_decode_enable_radix_cache", "enable_hierarchical_cache", "enable_kv_cache_sharding", "prefill_only_disable_kv_cache", "enable_mixed_chunk", "speculative_adaptive", "enable_dp_attention"].iter().enumerate() {
            if flags[i] { put(f, Some(json!(true))); }
        }
        put("chunked_prefill_size", chunk.map(Value::from));
        put("max_running_requests", mrr.map(Value::from));
        put("speculative_algorithm", spec.map(Value::from));
        put("speculative_num_steps", steps.map(Value::from));
        put("speculative_eagle_topk", topk.map(Value::from));
        put("speculative_num_draft_tokens", draft.map(Value::from));
        put("disaggregation_transfer_backend", backend.map(Value::from));
        put("disaggregation_decode_host_receive_threshold", threshold.map(Value::from));
        put("disaggregation_decode_allocation_policy", policy.map(Value::from));
        a
    }
}

fn options() -> BoxedStrategy<PlanOptions> {
    (
        opt(prop::sample::select(vec!["h200", "b200", "h100", "mi300x"])),
        opt(prop::sample::select(vec![64.0f64, 512.0, 2048.0])),
    )
        .prop_map(|(gpu, host)| PlanOptions {
            gpu: gpu.map(str::to_owned),
            host_memory_gib: host,
            ..Default::default()
        })
        .boxed()
}

fn run(args: &SglangArgs, o: &PlanOptions) -> Result<Report, TestCaseError> {
    let r = sg::check(args, o).map_err(|e| TestCaseError::fail(format!("check: {e}")))?;
    prop_assert_eq!(r.valid, r.errors.is_empty());
    for d in r.errors.iter().chain(&r.warnings) {
        prop_assert!(
            matches!(d.stage, Stage::Sglang(_))
                || d.stage.as_str() == "argparse"
                || d.stage.as_str() == "never",
            "{} has stage {:?}",
            d.code.as_str(),
            d.stage
        );
    }
    Ok(r)
}

proptest! {
    #![proptest_config(common::config(256))]

    #[test]
    fn never_panics_and_fixes_converge(raw in launch(), o in options()) {
        let args = SglangArgs::from_json(raw).unwrap();
        let first = run(&args, &o)?;
        let _ = sg::plan(&args, &o);
        // Alone: an error's fix removes that error (code and path).
        for e in first.errors.iter().filter(|e| !e.fix.is_empty()) {
            let fixed = sg::fixes_applied(&args, std::slice::from_ref(e)).ok_or_else(|| TestCaseError::fail(format!("{} fix does not apply", e.code.as_str())))?;
            let again = run(&fixed, &o)?;
            prop_assert!(!again.errors.iter().any(|x| x.code == e.code && x.path == e.path), "{} at {} survives its own fix {:?}", e.code.as_str(), e.path, e.fix);
        }
        // Together, in rounds: no error that had a fix remains.
        let mut cur = args.clone();
        let mut report = first;
        for _ in 0..MAX_ROUNDS {
            if report.errors.iter().all(|e| e.fix.is_empty()) { break; }
            cur = sg::fixes_applied(&cur, &report.errors).ok_or_else(|| TestCaseError::fail("fixes do not apply together"))?;
            report = run(&cur, &o)?;
        }
        let left: Vec<&str> = report.errors.iter().filter(|e| !e.fix.is_empty()).map(|e| e.code.as_str()).collect();
        prop_assert!(left.is_empty(), "after {MAX_ROUNDS} rounds: {left:?} for {}", serde_json::to_string(&cur).unwrap());
    }
}
