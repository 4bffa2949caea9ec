//! `resolve` never panics, hangs or overflows the stack, whatever the input.
//!
//! Every check runs on a watchdog thread (`common::guarded`: a panic, or a
//! case that has not returned after `common::HANG_MS`, two minutes, fails
//! it; no speed is asserted) inside a forked child process
//! (`common::forked_config`: a stack overflow fails the test instead of
//! aborting the binary). Seeds are fixed, so runs are deterministic (override
//! with PROPTEST_RNG_SEED / PROPTEST_CASES).

mod common;

use common::*;
use hisparse_core::check::check;
use hisparse_core::engines::vllm_0_33::plan::plan;
use hisparse_core::plan::PlanOptions;
use hisparse_core::{resolve, Code, ServeArgs};
use proptest::prelude::*;
use serde_json::{json, Value};

/// `resolve` returns `Ok` (hf_config is given, so there is no I/O), the report
/// is internally consistent, and it serializes.
fn resolves(args: &ServeArgs) -> Result<(), TestCaseError> {
    let report = resolve(args).map_err(|e| {
        TestCaseError::fail(format!(
            "resolve returned Err although hf_config is given: {e}"
        ))
    })?;
    prop_assert_eq!(report.valid, report.errors.is_empty());
    prop_assert!(report.errors.iter().all(|d| d.is_error()));
    prop_assert!(report.warnings.iter().all(|d| !d.is_error()));
    if report.hisparse.is_some() {
        prop_assert!(report.valid && report.hisparse_enabled);
    }
    let _ = report.to_json();
    let _ = report.to_json_compact();
    Ok(())
}

proptest! {
    #![proptest_config(forked_config(1024))]

    /// Arbitrary JSON in every JSON-valued field (parsed, or as flag text),
    /// arbitrary i64 scalars and arbitrary strings elsewhere.
    #[test]
    fn arbitrary_json_never_panics(Brief(args) in brief(arb_args())) {
        guarded(&args, resolves)?;
    }

    /// MultiConnector trees with HiSparseConnector children against real
    /// model configs, plausible scalars: resolution goes deep into validation.
    #[test]
    fn realistic_configs_never_panic(Brief(args) in brief(realistic_args(false))) {
        guarded(&args, resolves)?;
    }

    /// The same trees with scalars anywhere in i64 and huge integers in
    /// `hf_overrides` (max_position_embeddings, num_hidden_layers, index_topk).
    #[test]
    fn realistic_configs_with_extreme_numbers_never_panic(Brief(args) in brief(realistic_args(true))) {
        guarded(&args, resolves)?;
    }
}

/// Depth of the nested MultiConnector chain; the walk is iterative, so any
/// depth works on a small stack (see the 100,000-level test below).
const DEPTH: usize = 2_000;
/// Stack of the thread that resolves: a recursive walk over `DEPTH` levels
/// would need far more than this in a debug build.
const SMALL_STACK: usize = 256 * 1024;

fn resolve_deep_chain(depth: usize) {
    let worker = std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(move || {
            let mut args = ServeArgs {
                kv_transfer_config: Some(multiconnector_chain(depth)),
                hf_config: Some(dsv32()),
                ..Default::default()
            };
            let report = resolve(&args).expect("hf_config given: no I/O");
            assert!(
                report
                    .errors
                    .iter()
                    .any(|d| d.code == Code::MaxDepthExceeded),
                "expected max_depth_exceeded: {:?}",
                report.errors
            );
            // The HiSparseConnector sits below the depth limit: not found.
            assert!(!report.hisparse_enabled);
            let _ = report.to_json();
            // serde_json's Drop recurses per level: take the chain apart by hand.
            drop_iteratively(args.kv_transfer_config.take().expect("set above"));
        })
        .expect("spawn");
    worker.join().expect("resolve panicked on a deep chain");
}

proptest! {
    // One case, forked: a stack overflow aborts only the child process and is
    // reported as this test's failure.
    #![proptest_config(forked_config(1))]

    #[test]
    fn deep_multiconnector_chain_does_not_overflow_the_stack(depth in Just(DEPTH)) {
        resolve_deep_chain(depth);
    }
}

/// 100,000 levels on the same small stack: the walk and the shell-variable
/// scan are iterative and linear in the document (the scan was once quadratic).
#[test]
fn very_deep_multiconnector_chain_does_not_overflow_the_stack() {
    resolve_deep_chain(100_000);
}

// ---------------------------------------------------------------------------
// Minimal reproductions of what the properties above found (see each test).

fn hisparse_connector() -> serde_json::Value {
    json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": 64}})
}

proptest! {
    #![proptest_config(forked_config(1))]

    /// `min_pool_gib` (engines/vllm_0_33/validate.rs, formerly resolve.rs) looped
    /// forever once `min_host_blocks x host_block_bytes` exceeds what
    /// `pool_blocks` can count (about 2^64 bytes): with DeepSeek-V3.2 any
    /// max_model_len above ~2.6e14 hung, connector or not
    /// (`hisparse-check MODEL --kv-transfer-config ... --max-model-len 300t`).
    #[test]
    fn regression_huge_max_model_len_does_not_hang(_x in Just(())) {
        let args = ServeArgs {
            hf_config: Some(dsv32()),
            attention_config: Some(json!({"hisparse_config": {}})),
            max_model_len: Some(1 << 53),
            ..Default::default()
        };
        guarded(&args, resolves)?;
    }

    /// `min_blocks = max_model_len.div_ceil(block_size) + 2` (`Ctx` in
    /// config/validate.rs) overflows u64 when max_position_embeddings is
    /// u64::MAX and block_size 1 (panic in debug, wraps to a tiny minimum in
    /// release).
    #[test]
    fn regression_min_host_blocks_does_not_overflow(_x in Just(())) {
        let args = ServeArgs {
            hf_config: Some(dsv32()),
            hf_overrides: Some(json!({"max_position_embeddings": u64::MAX})),
            kv_transfer_config: Some(hisparse_connector()),
            block_size: Some(1),
            ..Default::default()
        };
        guarded(&args, resolves)?;
    }

    /// `host_block_bytes = block_size x row_bytes x sparse_mla_layers`
    /// (`Ctx` in engines/vllm_0_33/validate.rs) overflowed u64 for block_size >= 2^32
    /// (clamped to u32::MAX) with a huge num_hidden_layers.
    #[test]
    fn regression_host_block_bytes_does_not_overflow(_x in Just(())) {
        let args = ServeArgs {
            hf_config: Some(dsv32()),
            hf_overrides: Some(json!({"num_hidden_layers": u32::MAX})),
            kv_transfer_config: Some(hisparse_connector()),
            block_size: Some(1 << 32),
            ..Default::default()
        };
        guarded(&args, resolves)?;
    }
}

// ---------------------------------------------------------------------------
// The planner (and the check's GPU-aware host_pool_gib fix, which plans):
// absurd model dimensions, machines and contexts give figures or errors,
// never a panic. `plan` multiplies and sums dimensions into parameter,
// byte and block counts, so every config.json field it reads gets values
// at the edges of u32 / u64.

/// Model dimensions the weight estimate and the sizes read.
const PLAN_DIMS: &[&str] = &[
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "index_n_heads",
    "index_head_dim",
    "index_topk",
    "intermediate_size",
    "moe_intermediate_size",
    "n_routed_experts",
    "n_shared_experts",
    "first_k_dense_replace",
    "vocab_size",
    "max_position_embeddings",
    "num_nextn_predict_layers",
];

fn extreme_dim() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        json!(0),
        json!(1),
        json!(7),
        json!(1u64 << 20),
        json!(u32::MAX),
        json!(u32::MAX as u64 + 1),
        json!(1u64 << 40),
        json!(i64::MAX),
        json!(u64::MAX),
        json!(1e300),
    ])
}

fn finite_gib() -> impl Strategy<Value = Option<f64>> {
    prop::option::of(prop::sample::select(vec![
        1e-300,
        1e-6,
        0.5,
        24.0,
        141.0,
        2048.0,
        1e12,
        1e300,
        f64::MAX,
    ]))
}

type PlanCase = (ServeArgs, PlanOptions);

fn plan_case() -> impl Strategy<Value = PlanCase> {
    let dims = prop::collection::btree_map(
        prop::sample::select(PLAN_DIMS.to_vec()),
        extreme_dim(),
        1..6,
    );
    let options = (
        prop::option::of(prop::sample::select(vec![1u64, 8192, 1 << 40, u64::MAX])),
        prop::option::of(prop::sample::select(vec![0u64, 1, 1 << 40, u64::MAX])),
        finite_gib(),
        finite_gib(),
        finite_gib(),
        prop::option::of(prop::sample::select(vec!["h200", "b200", "mi300x"])),
    );
    let scalars = (
        prop::option::of(prop::sample::select(vec![1i64, 8, 1 << 31, i64::MAX])),
        prop::option::of(prop::sample::select(vec![1i64, 8, 1 << 31, i64::MAX])),
        prop::option::of(prop::sample::select(vec![1i64, 64, 1 << 32, i64::MAX])),
        prop::option::of(prop::sample::select(vec![1i64, 1 << 40, i64::MAX])),
        prop::option::of(any::<bool>()),
    );
    (dims, options, scalars).prop_map(
        |(dims, (ctx, target, host, gpu_gib, weights, gpu), (tp, dp, seqs, kv_bytes, ep))| {
            let args = ServeArgs {
                hf_config: Some(dsv32()),
                hf_overrides: Some(Value::Object(
                    dims.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                )),
                kv_transfer_config: Some(hisparse_connector()),
                tensor_parallel_size: tp,
                data_parallel_size: dp,
                max_num_seqs: seqs,
                kv_cache_memory_bytes: kv_bytes,
                enable_expert_parallel: ep,
                ..Default::default()
            };
            let options = PlanOptions {
                context_length: ctx,
                target_requests: target,
                host_memory_gib: host,
                gpu_memory_gib: gpu_gib,
                weights_gib: weights,
                gpu: gpu.map(str::to_owned),
                host_memory_source: None,
                ..PlanOptions::default()
            };
            (args, options)
        },
    )
}

fn plans(case: &PlanCase) -> Result<(), TestCaseError> {
    let (args, options) = case;
    if let Ok((report, plan)) = plan(args, options) {
        let _ = report.to_json();
        if let Some(p) = plan {
            let _ = p.to_json();
        }
    }
    let _ = check(args, options);
    Ok(())
}

proptest! {
    #![proptest_config(forked_config(256))]

    #[test]
    fn plan_never_panics_on_absurd_dimensions_and_machines(Brief(case) in brief(plan_case())) {
        guarded(&case, plans)?;
    }

    /// `(dense_params + expert_params) as f64` for the weights line
    /// (plan/mod.rs) overflowed u64 once the estimate saturated
    /// (`hidden_size` and `vocab_size` u64::MAX with a GPU given).
    #[test]
    fn regression_saturated_weight_estimate_does_not_overflow(_x in Just(())) {
        let args = ServeArgs {
            hf_config: Some(dsv32()),
            hf_overrides: Some(json!({"hidden_size": u64::MAX, "vocab_size": u64::MAX})),
            kv_transfer_config: Some(hisparse_connector()),
            ..Default::default()
        };
        let options = PlanOptions {
            gpu: Some("h200".to_owned()),
            ..Default::default()
        };
        guarded(&(args, options), plans)?;
    }
}
