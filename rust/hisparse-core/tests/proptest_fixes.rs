//! Fixes do what they promise: applying an error's `fix` to the JSON form of
//! the (normalized) arguments yields arguments whose report no longer has that
//! error, and repeatedly fixing the first error reaches a valid configuration.
//! Seeds are fixed (see `common::config`).

mod common;

use common::*;
use hisparse_core::check::check;
use hisparse_core::diagnostic::apply_fix;
use hisparse_core::plan::PlanOptions;
use hisparse_core::{resolve, Code, Diagnostic, FieldPath, FixOp, Report, Seg, ServeArgs};
use proptest::prelude::*;

/// Rounds allowed for the fix loop to reach a valid report.
const MAX_ROUNDS: usize = 30;

fn report_of(args: &ServeArgs) -> Result<Report, TestCaseError> {
    resolve(args)
        .map_err(|e| TestCaseError::fail(format!("resolve failed with hf_config given: {e}")))
}

/// `args` with `d`'s fix applied to its normalized JSON form.
fn apply(args: &ServeArgs, d: &Diagnostic) -> Result<ServeArgs, TestCaseError> {
    let mut doc = args.normalized().0.into_owned().to_json();
    let before = doc.to_string();
    apply_fix(&mut doc, &d.fix).map_err(|e| {
        TestCaseError::fail(format!(
            "apply_fix failed for {} at {}: {e}\nfix: {}\ndocument: {before}",
            d.code.as_str(),
            d.path,
            serde_json::to_string(&d.fix).unwrap_or_default()
        ))
    })?;
    ServeArgs::from_json(doc.clone()).map_err(|e| {
        TestCaseError::fail(format!(
            "after the fix for {} at {} the document is no longer ServeArgs: {e}\nfix: {}\nfixed: {doc}",
            d.code.as_str(),
            d.path,
            serde_json::to_string(&d.fix).unwrap_or_default()
        ))
    })
}

/// Map a path of the fixed document back to the original one: removing list
/// element `i` shifts the later elements down by one, so the error now at
/// `list[j]` (j >= i) is the one that was at `list[j + 1]`.
fn unshift(path: &FieldPath, fix: &[FixOp]) -> FieldPath {
    let mut segs = path.0.clone();
    for op in fix.iter().rev() {
        let removed = match op {
            FixOp::Remove { path } => path,
            FixOp::Move { from, .. } => from,
            FixOp::Set { .. } => continue,
        };
        let Some((Seg::Index(i), list)) = removed.0.split_last() else {
            continue;
        };
        if segs.len() > list.len() && segs[..list.len()] == *list {
            if let Seg::Index(j) = &mut segs[list.len()] {
                if *j >= *i {
                    *j += 1;
                }
            }
        }
    }
    FieldPath(segs)
}

fn summary(report: &Report) -> String {
    report
        .errors
        .iter()
        .map(|e| format!("{}@{}", e.code.as_str(), e.path))
        .collect::<Vec<_>>()
        .join(", ")
}

proptest! {
    #![proptest_config(config(512))]

    /// Every error's fix applies cleanly and removes that error (same code
    /// and path, allowing for list indices that shift when an element is removed).
    #[test]
    fn each_fix_removes_its_error(Brief(args) in brief(realistic_args(false))) {
        let report = report_of(&args)?;
        for d in report.errors.iter().filter(|d| !d.fix.is_empty()) {
            let fixed = apply(&args, d)?;
            let after = report_of(&fixed)?;
            let still = after
                .errors
                .iter()
                .find(|e| e.code == d.code && unshift(&e.path, &d.fix) == d.path);
            prop_assert!(
                still.is_none(),
                "the fix for {} at {} did not remove it\nfix: {}\nerrors before: {}\nerrors after: {}\nstill there: {:?}",
                d.code.as_str(),
                d.path,
                serde_json::to_string(&d.fix).unwrap_or_default(),
                summary(&report),
                summary(&after),
                still.map(|e| &e.message)
            );
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// A fix never turns HiSparse off as a side effect: only the fixes of
    /// `model_not_dsa`, `deepseek_v4_unsupported` and `index_topk_too_large`
    /// (the model cannot use HiSparse) are meant to remove it.
    #[test]
    fn fixes_keep_hisparse_enabled(Brief(args) in brief(realistic_args(false))) {
        let report = report_of(&args)?;
        if !report.hisparse_enabled {
            return Ok(());
        }
        for d in report.errors.iter().filter(|d| !d.fix.is_empty()) {
            if matches!(d.code, Code::ModelNotDsa | Code::DeepseekV4Unsupported | Code::IndexTopkTooLarge) {
                continue;
            }
            let after = report_of(&apply(&args, d)?)?;
            prop_assert!(
                after.hisparse_enabled,
                "the fix for {} at {} turned HiSparse off\nfix: {}\nbefore: {}\nafter: {}",
                d.code.as_str(),
                d.path,
                serde_json::to_string(&d.fix).unwrap_or_default(),
                args.kv_transfer_config.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                apply(&args, d)?.kv_transfer_config.map(|v| v.to_string()).unwrap_or_default()
            );
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Fixing the first error again and again reaches a valid report within
    /// MAX_ROUNDS rounds, unless an error without a fix turns up (then the
    /// case is skipped: there is nothing to apply).
    #[test]
    fn fixing_first_errors_converges(Brief(args) in brief(realistic_args(false))) {
        let mut args = args;
        let mut trail = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let report = report_of(&args)?;
            let Some(first) = report.errors.first() else {
                return Ok(());
            };
            if first.fix.is_empty() {
                return Ok(());
            }
            trail.push(format!(
                "{}@{}: {}",
                first.code.as_str(),
                first.path,
                serde_json::to_string(&first.fix).unwrap_or_default()
            ));
            args = apply(&args, first)?;
        }
        let last = report_of(&args)?;
        prop_assert!(
            last.valid,
            "still invalid after {} rounds: {}\nfixes applied:\n  {}",
            MAX_ROUNDS,
            summary(&last),
            trail.join("\n  ")
        );
    }
}

// ---------------------------------------------------------------------------
// Minimal reproductions of what the properties above found.

/// `Ctx::disable_hisparse` (engines/vllm_0_33/resolve.rs), the fix of `model_not_dsa`
/// and `deepseek_v4_unsupported`, removes only the *first* HiSparseConnector;
/// with two of them HiSparse stays on and the error stays.
#[test]
fn regression_disabling_hisparse_removes_every_connector() {
    let hisparse = serde_json::json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": 64}});
    for (model, code) in [
        (LLAMA, Code::ModelNotDsa),
        (DSV4_FLASH, Code::DeepseekV4Unsupported),
    ] {
        let args = ServeArgs {
            hf_config: Some(parse(model)),
            kv_transfer_config: Some(serde_json::json!({
                "kv_connector": "MultiConnector", "kv_role": "kv_both",
                "kv_connector_extra_config": {"connectors": [hisparse.clone(), hisparse.clone()]}})),
            ..Default::default()
        };
        let report = resolve(&args).expect("no I/O");
        let d = report
            .errors
            .iter()
            .find(|d| d.code == code)
            .unwrap_or_else(|| panic!("expected {}: {}", code.as_str(), summary(&report)));
        let fixed = apply(&args, d).expect("fix applies");
        let after = resolve(&fixed).expect("no I/O");
        assert!(
            !after.errors.iter().any(|e| e.code == code),
            "{} still reported after its fix {}: {}",
            code.as_str(),
            serde_json::to_string(&d.fix).unwrap_or_default(),
            summary(&after)
        );
    }
}

/// The `misplaced_connectors` fix is a Move onto
/// `kv_connector_extra_config.connectors`; `apply_fix` merges only objects, so
/// when that list already exists it is *replaced* by the misplaced one. Here
/// the HiSparseConnector is lost and the "fixed" configuration is valid with
/// HiSparse silently off.
#[test]
fn regression_misplaced_connectors_fix_keeps_the_existing_children() {
    let args = ServeArgs {
        hf_config: Some(dsv32()),
        kv_transfer_config: Some(serde_json::json!({
            "kv_connector": "MultiConnector", "kv_role": "kv_both",
            "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"}],
            "kv_connector_extra_config": {"connectors": [
                {"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
                 "kv_connector_extra_config": {"host_pool_gib": 64}}]}})),
        ..Default::default()
    };
    let report = resolve(&args).expect("no I/O");
    assert!(report.hisparse_enabled);
    let d = report
        .errors
        .iter()
        .find(|d| d.code == Code::MisplacedConnectors)
        .expect("misplaced_connectors");
    let fixed = apply(&args, d).expect("fix applies");
    let after = resolve(&fixed).expect("no I/O");
    assert!(
        after.hisparse_enabled,
        "the fix dropped the HiSparseConnector: {}",
        fixed.kv_transfer_config.unwrap_or_default()
    );
}

proptest! {
    // Guarded and forked: older code looped forever on this input.
    #![proptest_config(forked_config(1))]

    /// A model whose `layer_types` has no "deepseek_sparse_attention" entry
    /// has 0 sparse-MLA layers, so host_block_bytes is 0 and `pool_blocks`
    /// returns 0 for every pool: `host_pool_too_small` is reported with a fix
    /// (`min_pool_gib`'s estimate) that cannot remove it, and the fix loop never
    /// converges. (Before `min_pool_gib` was bounded this input hung resolve.)
    #[test]
    fn regression_zero_sparse_mla_layers_has_a_working_fix(_x in Just(())) {
        let args = ServeArgs {
            hf_config: Some(dsv32()),
            hf_overrides: Some(serde_json::json!({"layer_types": []})),
            kv_transfer_config: Some(serde_json::json!({"kv_connector": "HiSparseConnector",
                "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}})),
            ..Default::default()
        };
        guarded(&args, |args| {
            let report = report_of(args)?;
            for d in report.errors.iter().filter(|d| !d.fix.is_empty()) {
                let after = report_of(&apply(args, d)?)?;
                prop_assert!(
                    !after.errors.iter().any(|e| e.code == d.code && e.path == d.path),
                    "the fix for {} at {} did not remove it: {}",
                    d.code.as_str(),
                    d.path,
                    serde_json::to_string(&d.fix).unwrap_or_default()
                );
            }
            Ok(())
        })?;
    }
}

/// `args` with every error's fix of `report` applied, in report order.
fn apply_every_fix(args: &ServeArgs, report: &Report) -> Result<ServeArgs, TestCaseError> {
    let mut doc = args.normalized().0.into_owned().to_json();
    for d in &report.errors {
        apply_fix(&mut doc, &d.fix).map_err(|e| {
            TestCaseError::fail(format!(
                "applying every fix at once: the fix for {} at {} failed: {e}",
                d.code.as_str(),
                d.path
            ))
        })?;
    }
    ServeArgs::from_json(doc.clone()).map_err(|e| {
        TestCaseError::fail(format!("every fix at once leaves no ServeArgs: {e}\n{doc}"))
    })
}

/// The errors of a report that have a fix, for messages.
fn trail(report: &Report) -> String {
    report
        .errors
        .iter()
        .map(|e| {
            format!(
                "{}@{}: {}",
                e.code.as_str(),
                e.path,
                serde_json::to_string(&e.fix).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n  ")
}

proptest! {
    #![proptest_config(config(512))]

    /// The fixes of one report work together: applying every error's fix at
    /// once (in report order) leaves no error that has a fix. What may remain
    /// are errors no edit of the configuration fixes (connectors: null, an
    /// index_topk that is not a number...), which the message names.
    #[test]
    fn every_fix_at_once_passes(Brief(args) in brief(mistaken_args())) {
        let report = report_of(&args)?;
        if report.errors.iter().all(|e| e.fix.is_empty()) {
            return Ok(());
        }
        let fixed = apply_every_fix(&args, &report)?;
        let after = report_of(&fixed)?;
        let fixable: Vec<&Diagnostic> = after.errors.iter().filter(|e| !e.fix.is_empty()).collect();
        prop_assert!(
            fixable.is_empty(),
            "after every fix at once, errors with a fix remain:\n  {}\nfixes applied:\n  {}\nleft without a fix: {:?}",
            trail(&after),
            trail(&report),
            after.errors.iter().filter(|e| e.fix.is_empty()).map(|e| e.code.as_str()).collect::<Vec<_>>()
        );
    }
}

// ---------------------------------------------------------------------------
// Fixes converge on the machines too (issue 17 item 2): the README loop and
// every fix at once, through `check` with the node's RAM and the GPU.

/// Rounds the loop may take beyond one per error of the first report (for
/// the errors that fixes reveal).
const EXTRA_ROUNDS: usize = 8;

/// The serve args with a length, a block size and a DP size of their own,
/// and the machines: host RAM and GPU.
fn machine_case() -> impl Strategy<Value = (ServeArgs, PlanOptions)> {
    (
        prop_oneof![realistic_args(false), mistaken_args()],
        prop::sample::select(vec![None, Some(4096i64), Some(163_840), Some(400_000)]),
        prop::sample::select(vec![None, None, Some(32i64), Some(64), Some(128)]),
        prop::sample::select(vec![None, None, Some(2i64), Some(8), Some(16)]),
        prop::sample::select(vec![
            None,
            Some(8.0),
            Some(16.0),
            Some(64.0),
            Some(256.0),
            Some(1024.0),
            Some(2048.0),
        ]),
        prop::sample::select(vec![None, None, Some("h200"), Some("b200"), Some("h20")]),
    )
        .prop_map(|(mut args, len, block, dp, ram, gpu)| {
            if len.is_some() {
                args.max_model_len = len;
            }
            if block.is_some() {
                args.block_size = block;
            }
            if dp.is_some() {
                args.data_parallel_size = dp;
            }
            let options = PlanOptions {
                host_memory_gib: ram,
                gpu: gpu.map(str::to_owned),
                ..PlanOptions::default()
            };
            (args, options)
        })
}

fn checked(args: &ServeArgs, options: &PlanOptions) -> Result<Report, TestCaseError> {
    check(args, options).map_err(|e| TestCaseError::fail(format!("check failed: {e}")))
}

proptest! {
    #![proptest_config(config(256))]

    /// The README loop (apply `errors[0].fix` until no error has one) ends
    /// within one round per error of the first report plus EXTRA_ROUNDS,
    /// never revisits a configuration, and ends valid or at a stated fixed
    /// point (no error with a fix, every error left says what is allowed or
    /// what to do); every fix
    /// of the first report applied at once ends valid whenever the loop does
    /// (or leaves no error with a fix).
    #[test]
    fn both_fix_loops_converge_on_the_machines((args, options) in machine_case()) {
        let first = checked(&args, &options)?;
        let mut now = args.clone();
        let mut steps = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let end = loop {
            let report = checked(&now, &options)?;
            let Some(e) = report.errors.first().filter(|e| !e.fix.is_empty()) else {
                prop_assert!(
                    report.errors.iter().all(|e| e.fix.is_empty()),
                    "the first error has no fix, a later one has: {}\n  {}",
                    summary(&report),
                    steps.join("\n  ")
                );
                break report;
            };
            prop_assert!(
                steps.len() < first.errors.len() + EXTRA_ROUNDS,
                "the loop did not end in {} + {EXTRA_ROUNDS} rounds:\n  {}",
                first.errors.len(),
                steps.join("\n  ")
            );
            steps.push(format!("{}@{}: {}", e.code.as_str(), e.path, serde_json::to_string(&e.fix).unwrap_or_default()));
            now = apply(&now, e)?;
            prop_assert!(
                seen.insert(now.normalized().0.into_owned().to_json().to_string()),
                "the loop cycles:\n  {}",
                steps.join("\n  ")
            );
        };
        let silent: Vec<String> = end
            .errors
            .iter()
            .filter(|e| {
                let said = |t: &Option<String>| t.as_deref().is_some_and(|t| !t.trim().is_empty());
                !said(&e.hint) && !said(&e.allowed)
            })
            .map(|e| format!("{}@{}", e.code.as_str(), e.path))
            .collect();
        prop_assert!(silent.is_empty(), "errors left with neither fix, hint nor allowed values: {silent:?}\n  {}", steps.join("\n  "));
        if end.valid && first.errors.iter().any(|e| !e.fix.is_empty()) {
            let together = checked(&apply_every_fix(&args, &first)?, &options)?;
            prop_assert!(
                together.valid || together.errors.iter().all(|e| e.fix.is_empty()),
                "the loop ends valid, every fix at once does not:\n  {}\nfixes applied:\n  {}",
                trail(&together),
                trail(&first)
            );
        }
    }
}

/// The issue-17 inputs, each a regression for the property above.
#[test]
fn regression_issue_17_cases_converge() {
    let hs = |extra: serde_json::Value| serde_json::json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra});
    let base = || ServeArgs {
        hf_config: Some(dsv32()),
        ..Default::default()
    };
    let ram = |gib: f64| PlanOptions {
        host_memory_gib: Some(gib),
        ..PlanOptions::default()
    };
    let inner = serde_json::json!({"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [
        {"kv_connector": "HiSparseConnector", "kv_connector_extra_config": {"host_pool_gib": 64}}]}});
    let cases: Vec<(&str, ServeArgs, PlanOptions)> = vec![
        (
            "400000 tokens, pool 4 GiB, 16 GiB node",
            ServeArgs {
                kv_transfer_config: Some(hs(serde_json::json!({"host_pool_gib": 4}))),
                max_model_len: Some(400_000),
                ..base()
            },
            ram(16.0),
        ),
        (
            "HiSparseConnector two MultiConnectors deep, no kv_role",
            ServeArgs {
                kv_transfer_config: Some(
                    serde_json::json!({"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [inner]}}),
                ),
                ..base()
            },
            PlanOptions::default(),
        ),
        (
            "hisparse_config with connectors: {}",
            ServeArgs {
                kv_transfer_config: Some(
                    serde_json::json!({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": {}}}),
                ),
                attention_config: Some(
                    serde_json::json!({"hisparse_config": {"device_buffer_size": 4096}}),
                ),
                ..base()
            },
            PlanOptions::default(),
        ),
        (
            "no host_pool_gib on an 8 GiB node",
            ServeArgs {
                kv_transfer_config: Some(hs(serde_json::json!({}))),
                ..base()
            },
            ram(8.0),
        ),
        (
            "no host_pool_gib, -dp 16 on a 64 GiB node",
            ServeArgs {
                kv_transfer_config: Some(hs(serde_json::json!({}))),
                data_parallel_size: Some(16),
                ..base()
            },
            ram(64.0),
        ),
        (
            "2000 GiB pool on 1024 GiB behind two errors",
            ServeArgs {
                kv_transfer_config: Some(hs(serde_json::json!({"host_pool_gib": 2000}))),
                block_size: Some(32),
                disable_hybrid_kv_cache_manager: Some(true),
                ..base()
            },
            ram(1024.0),
        ),
        (
            "kv_conector, -pp 2, 300 GiB on 256 GiB",
            ServeArgs {
                kv_transfer_config: Some(
                    serde_json::json!({"kv_conector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 300}}),
                ),
                pipeline_parallel_size: Some(2),
                ..base()
            },
            ram(256.0),
        ),
        (
            "a count set inside the speculative_config another fix removes",
            ServeArgs {
                speculative_config: Some(
                    serde_json::json!({"method": "bogus", "num_speculative_tokens": 20}),
                ),
                attention_config: Some(
                    serde_json::json!({"hisparse_config": {"device_buffer_size": 43008}}),
                ),
                ..base()
            },
            PlanOptions::default(),
        ),
        (
            "-tp 4 -dp 8 on 32 GiB with --gpu h200",
            ServeArgs {
                kv_transfer_config: Some(hs(serde_json::json!({"host_pool_gib": 1}))),
                tensor_parallel_size: Some(4),
                data_parallel_size: Some(8),
                ..base()
            },
            PlanOptions {
                gpu: Some("h200".into()),
                ..ram(32.0)
            },
        ),
    ];
    for (name, args, options) in cases {
        let first = check(&args, &options).unwrap();
        assert!(!first.valid, "{name}");
        let together = check(&apply_every_fix(&args, &first).unwrap(), &options).unwrap();
        assert!(
            together.valid,
            "{name}: every fix at once: {}",
            summary(&together)
        );
        let mut now = args;
        for _ in 0..first.errors.len() + EXTRA_ROUNDS {
            let r = check(&now, &options).unwrap();
            let Some(e) = r.errors.first() else { break };
            assert!(!e.fix.is_empty(), "{name}: {} has no fix", e.code.as_str());
            now = apply(&now, e).unwrap();
        }
        assert!(
            check(&now, &options).unwrap().valid,
            "{name}: the loop did not end valid"
        );
    }
}

/// A rename never overwrites what the user set under the right name.
#[test]
fn regression_a_rename_keeps_the_users_value() {
    let args = ServeArgs {
        hf_config: Some(dsv32()),
        kv_transfer_config: Some(
            serde_json::json!({"kv_conector": "NixlConnector", "kv_connector": "HiSparseConnector",
            "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}}),
        ),
        ..Default::default()
    };
    let report = resolve(&args).unwrap();
    let fixed = apply_every_fix(&args, &report).unwrap();
    assert_eq!(
        fixed.kv_transfer_config.unwrap()["kv_connector"],
        "HiSparseConnector"
    );
    // A misspelled object beside the real one still moves: the two merge, nothing is lost.
    let args = ServeArgs {
        hf_config: Some(dsv32()),
        kv_transfer_config: Some(
            serde_json::json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
            "kv_connector_extra_confg": {"host_pool_gib": 64}, "kv_connector_extra_config": {}}),
        ),
        ..Default::default()
    };
    let report = resolve(&args).unwrap();
    let fixed = resolve(&apply_every_fix(&args, &report).unwrap()).unwrap();
    assert_eq!(
        fixed.vllm_hisparse().cloned().unwrap().host_pool_gib.value,
        64.0
    );
}
