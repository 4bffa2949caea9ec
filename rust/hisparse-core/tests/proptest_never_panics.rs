//! `resolve` never panics, hangs or overflows the stack, whatever the input.
//!
//! Every check runs on a watchdog thread (`common::guarded`: a panic or a
//! hang over 0.5 s fails the case) inside a forked child process
//! (`common::forked_config`: a stack overflow fails the test instead of
//! aborting the binary). Seeds are fixed, so runs are deterministic (override
//! with PROPTEST_RNG_SEED / PROPTEST_CASES).

mod common;

use common::*;
use hisparse_core::{resolve, Code, ServeArgs};
use proptest::prelude::*;
use serde_json::json;

/// The parent kills a child that makes no progress for this long (a backstop:
/// `guarded` catches hangs in `resolve` after 0.5 s).
const TIMEOUT_MS: u32 = 20_000;

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
    #![proptest_config(forked_config(1024, TIMEOUT_MS))]

    /// Arbitrary JSON in every JSON-valued field (parsed, or as flag text),
    /// arbitrary i64 scalars and arbitrary strings elsewhere.
    #[test]
    fn arbitrary_json_never_panics(args in arb_args()) {
        guarded(&args, resolves)?;
    }

    /// MultiConnector trees with HiSparseConnector children against real
    /// model configs, plausible scalars: resolution goes deep into validation.
    #[test]
    fn realistic_configs_never_panic(args in realistic_args(false)) {
        guarded(&args, resolves)?;
    }

    /// The same trees with scalars anywhere in i64 and huge integers in
    /// `hf_overrides` (max_position_embeddings, num_hidden_layers, index_topk).
    #[test]
    fn realistic_configs_with_extreme_numbers_never_panic(args in realistic_args(true)) {
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
    #![proptest_config(forked_config(1, 120_000))]

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
    #![proptest_config(forked_config(1, TIMEOUT_MS))]

    /// `min_pool_gib` (config/validate.rs, formerly resolve.rs) looped
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
    /// (`Ctx` in config/validate.rs) overflowed u64 for block_size >= 2^32
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
