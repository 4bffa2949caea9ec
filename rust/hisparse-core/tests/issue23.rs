//! Issue 23 (SGLang 0.5.23's own verdict on any launch) and issue 22's SGLang
//! items 1, 7 and 8: each defect fixed with a test that failed before it.
//! SGLang's real verdict on the same launches is pinned in tests/sglang
//! (EXAMPLES of test_differential.py, test_oracle.py).

use hisparse_core::diagnostic::{Code, Diagnostic, Severity};
use hisparse_core::engines::sglang_0_5_23::{self as sg, SglangArgs};
use hisparse_core::plan::{PlanError, PlanOptions};
use hisparse_core::report::Report;
use serde_json::{json, Value};

fn model(name: &str) -> String {
    format!(
        "{}/../../tests/data/models/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn args(v: Value) -> SglangArgs {
    let mut a = json!({"model_path": model("deepseek-v3.2")});
    for (k, x) in v.as_object().unwrap() {
        a[k] = x.clone();
    }
    SglangArgs::from_json(a).unwrap()
}

fn options(v: Value) -> PlanOptions {
    serde_json::from_value(v).unwrap()
}

fn check(v: Value) -> Report {
    sg::check(&args(v), &options(json!({"gpu": "h200"}))).unwrap()
}

fn error(r: &Report, code: Code) -> &Diagnostic {
    r.errors
        .iter()
        .find(|d| d.code == code)
        .unwrap_or_else(|| panic!("no {code:?} in {:#?}", r.errors))
}

fn stage(d: &Diagnostic) -> String {
    serde_json::to_value(d.stage)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// Every error's fix applied at once: the report of the fixed launch.
fn fixed(a: &SglangArgs, r: &Report) -> Report {
    let f = sg::fixes_applied(a, &r.errors).expect("the fixes apply");
    sg::check(&f, &options(json!({"gpu": "h200"}))).unwrap()
}

// --- Defect 12: a config.json that is a FIFO, a directory or a device ----------

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hisparse-i23-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_config_json_that_is_not_a_regular_file_is_a_load_error() {
    let dir = scratch("notregular");
    let fifo_dir = dir.join("fifo");
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let c = std::process::Command::new("mkfifo")
        .arg(fifo_dir.join("config.json"))
        .status()
        .unwrap();
    assert!(c.success());
    let dir_dir = dir.join("dir");
    std::fs::create_dir_all(dir_dir.join("config.json")).unwrap();
    for (path, needle) in [
        (fifo_dir.to_str().unwrap(), "FIFO"),
        (dir_dir.to_str().unwrap(), "a directory"),
        ("/dev/zero", "character device"),
    ] {
        let a = args(json!({"model_path": path, "enable_hisparse": true}));
        for result in [
            sg::check(&a, &PlanOptions::default()).map(|_| ()),
            sg::plan(&a, &PlanOptions::default()).map(|_| ()),
        ] {
            match result {
                Err(PlanError::Load(e)) => {
                    assert_eq!(e.code(), "not_a_regular_file", "{path}");
                    assert!(e.to_string().contains(needle), "{path}: {e}");
                    if needle == "a directory" {
                        assert!(!e.to_string().contains("block"), "{e}");
                    }
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }
    // A model that is not there stays SGLang's own refusal at resolve.
    let r = sg::check(
        &args(json!({"model_path": dir.join("missing").to_str().unwrap()})),
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(
        error(&r, Code::ModelConfigMissing).severity,
        Severity::Error
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The stage and whether the error has a fix, for `code` in the check of `v`.
fn refused(v: Value, code: Code) -> (Report, String) {
    let r = check(v);
    let s = stage(error(&r, code));
    (r, s)
}

// --- Defect 2: an unknown --speculative-algorithm ------------------------------

#[test]
fn an_unknown_speculative_algorithm_is_refused_at_resolve_without_eagle_fixes() {
    let v = json!({"enable_hisparse": true, "disable_radix_cache": true,
        "speculative_algorithm": "MTP", "speculative_eagle_topk": 2});
    let (r, s) = refused(v.clone(), Code::SpeculativeAlgorithmUnknown);
    assert_eq!(s, "resolve");
    let e = error(&r, Code::SpeculativeAlgorithmUnknown);
    assert_eq!(e.message, "Unknown speculative algorithm name: MTP");
    assert!(e.hint.as_deref().unwrap().contains("NEXTN"), "{e:?}");
    // Not read as EAGLE: none of EAGLE's rules (topk without steps, topk 1 for HiSparse).
    let codes: Vec<Code> = r.errors.iter().map(|d| d.code).collect();
    assert_eq!(
        codes,
        [Code::SpeculativeAlgorithmUnknown],
        "{:#?}",
        r.errors
    );
    let after = fixed(&args(v), &r);
    assert!(after.valid, "{:#?}", after.errors);
    // Every builtin name and the NEXTN alias, any case, is known.
    for name in [
        "eagle",
        "EAGLE3",
        "nextn",
        "NGRAM",
        "standalone",
        "none",
        "DFlash",
    ] {
        let r = check(json!({"speculative_algorithm": name}));
        assert!(
            r.errors
                .iter()
                .all(|d| d.code != Code::SpeculativeAlgorithmUnknown),
            "{name}"
        );
    }
}

// --- Defect 3: NGRAM's eagle_topk 10 against the DSA page 64 -------------------

#[test]
fn ngram_on_a_dsa_model_is_refused_at_resolve() {
    let v = json!({"speculative_algorithm": "NGRAM"});
    let (r, s) = refused(v.clone(), Code::NgramTopkWithPages);
    assert_eq!(s, "resolve");
    let e = error(&r, Code::NgramTopkWithPages);
    assert!(
        e.message
            .starts_with("speculative_eagle_topk(10) > 1 with page_size(64) > 1 is unstable"),
        "{}",
        e.message
    );
    let after = fixed(&args(v), &r);
    assert!(after.valid, "{:#?}", after.errors);
    // Not an EAGLE rule: the tree-backend rule stays silent for NGRAM.
    assert!(r
        .errors
        .iter()
        .all(|d| d.code != Code::EagleTopkNeedsTreeBackend));
}

// --- Defect 4: --context-length above the derived length -----------------------

#[test]
fn a_context_length_above_the_derived_one_is_refused_at_resolve() {
    let v = json!({"context_length": 262144});
    let (r, s) = refused(v.clone(), Code::ContextLengthOverDerived);
    assert_eq!(s, "resolve");
    let e = error(&r, Code::ContextLengthOverDerived);
    assert!(e.message.contains("User-specified context_length (262144) is greater than the derived context_length (163840)"), "{}", e.message);
    assert!(e
        .message
        .ends_with("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"));
    assert!(fixed(&args(v), &r).valid);
    assert!(check(json!({"context_length": 163840})).valid);
    assert!(sg::allow_longer_context(Some("Yes")) && !sg::allow_longer_context(Some("0")));
    assert_eq!(
        sg::ALLOW_LONGER_CONTEXT_ENV,
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
    );
}

// --- Defect 5: SGLang's default chunked_prefill_size under attention DP --------

#[test]
fn the_default_chunked_prefill_size_is_divided_by_attention_dp_too() {
    let v = json!({"tp_size": 3, "dp_size": 3, "enable_dp_attention": true});
    let (r, s) = refused(v.clone(), Code::ChunkedPrefillNotPageMultiple);
    assert_eq!(s, "check");
    let after = fixed(&args(v), &r);
    assert!(after.valid, "{:#?}", after.errors);
    assert!(check(json!({"tp_size": 4, "dp_size": 4, "enable_dp_attention": true})).valid);
    // --tp-size 3 --dp-size 4 gets the layout fix dp 3, and the chunk fix with it.
    let v = json!({"tp_size": 3, "dp_size": 4, "enable_dp_attention": true});
    let r = check(v.clone());
    error(&r, Code::DataParallelLayoutInvalid);
    assert!(fixed(&args(v), &r).valid);
}

// --- Defect 6: --attn-dp-size is read ------------------------------------------

#[test]
fn attn_dp_size_is_read_by_the_layout_rule() {
    let v = json!({"tp_size": 8, "attn_dp_size": 3});
    let (r, s) = refused(v.clone(), Code::DataParallelLayoutInvalid);
    assert_eq!(s, "resolve");
    assert_eq!(
        error(&r, Code::DataParallelLayoutInvalid).path.to_string(),
        "attn_dp_size"
    );
    assert!(
        fixed(&args(v), &r).valid,
        "{:#?}",
        fixed(&args(json!({"tp_size": 8, "attn_dp_size": 3})), &r).errors
    );
    assert!(check(json!({"tp_size": 8, "attn_dp_size": 4})).valid);
    let r = check(json!({"tp_size": 8, "attn_dp_size": 2, "dp_size": 2}));
    assert_eq!(stage(error(&r, Code::DpReplicasWithAttnDp)), "resolve");
    assert!(!check(json!({"attn_dp_size": -2})).valid);
}

// --- Defect 7: --dp 0 with DP attention ----------------------------------------

#[test]
fn dp_zero_with_dp_attention_is_refused_at_resolve() {
    let v = json!({"tp_size": 8, "dp_size": 0, "enable_dp_attention": true});
    let (r, s) = refused(v.clone(), Code::AttnDpSizeNotPositive);
    assert_eq!(s, "resolve");
    assert!(error(&r, Code::AttnDpSizeNotPositive)
        .message
        .starts_with("ZeroDivisionError"));
    assert!(fixed(&args(v), &r).valid);
}

// --- Defect 8: tp x pp divisible by nnodes -------------------------------------

#[test]
fn nnodes_must_divide_tp_times_pp() {
    for (nnodes, fit) in [(3, 2), (0, 1)] {
        let v = json!({"tp_size": 8, "nnodes": nnodes});
        let (r, s) = refused(v.clone(), Code::TpPpNotDivisibleByNnodes);
        assert_eq!(s, "check", "{nnodes}");
        let after = fixed(&args(v), &r);
        assert!(after.valid, "{nnodes}: {:#?}", after.errors);
        let _ = fit;
    }
    assert!(check(json!({"tp_size": 8, "nnodes": 2})).valid);
    assert!(check(json!({"tp_size": 4, "pp_size": 2, "nnodes": 2})).valid);
}

// --- Defect 9: PP with speculation only on a P/D prefill server ----------------

#[test]
fn pipeline_with_speculation_is_refused_off_prefill() {
    let (r, s) = refused(
        json!({"pp_size": 2, "tp_size": 4, "speculative_algorithm": "EAGLE", "disaggregation_mode": "decode"}),
        Code::PipelineSpeculationOffPrefill,
    );
    assert_eq!(s, "check");
    assert!(error(&r, Code::PipelineSpeculationOffPrefill)
        .fix
        .is_empty());
    let r = check(
        json!({"pp_size": 2, "tp_size": 4, "speculative_algorithm": "EAGLE", "disaggregation_mode": "prefill"}),
    );
    assert!(r
        .errors
        .iter()
        .all(|d| d.code != Code::PipelineSpeculationOffPrefill));
}

// --- Issue 22 item 7: fp8_e5m2's fix keeps the user's 8-bit precision ----------

#[test]
fn an_fp8_dtype_dsa_refuses_is_fixed_to_fp8_e4m3_not_auto() {
    for hisparse in [false, true] {
        let mut v = json!({"kv_cache_dtype": "fp8_e5m2"});
        if hisparse {
            v = json!({"kv_cache_dtype": "fp8_e5m2", "enable_hisparse": true, "disable_radix_cache": true});
        }
        let r = check(v.clone());
        let e = error(&r, Code::DsaKvCacheDtypeUnsupported);
        assert_eq!(
            serde_json::to_value(&e.fix).unwrap(),
            json!([{"op": "set", "path": "kv_cache_dtype", "value": "fp8_e4m3"}]),
            "{e:?}"
        );
        let after = fixed(&args(v), &r);
        assert!(after.valid, "{:#?}", after.errors);
    }
    // A 16-bit dtype keeps auto (bfloat16 on SM 9.0).
    let r = check(json!({"kv_cache_dtype": "float16"}));
    let e = error(&r, Code::DsaKvCacheDtypeUnsupported);
    assert!(
        serde_json::to_string(&e.fix).unwrap().contains("\"auto\""),
        "{e:?}"
    );
}

// --- Issue 22 item 1: host_pool_over_ram_budget asks for a ratio that fits -----

fn ram_check(ratio: u64) -> (SglangArgs, Report) {
    let a = args(
        json!({"tp_size": 8, "enable_hisparse": true, "disaggregation_mode": "decode",
        "mem_fraction_static": 0.85, "context_length": 131072,
        "hisparse_config": format!("{{\"host_to_device_ratio\": {ratio}}}")}),
    );
    let r = sg::check(
        &a,
        &options(json!({"gpu": "h200", "host_memory_gib": 2048})),
    )
    .unwrap();
    (a, r)
}

#[test]
fn the_ram_budget_fix_is_a_ratio_that_fits_in_one_paste() {
    let (a, r) = ram_check(32);
    let e = error(&r, Code::HostPoolOverRamBudget);
    let fixed_args = sg::fixes_applied(&a, &r.errors).unwrap();
    let after = sg::check(
        &fixed_args,
        &options(json!({"gpu": "h200", "host_memory_gib": 2048})),
    )
    .unwrap();
    assert!(after.valid, "{:?} -> {:#?}", e.fix, after.errors);
    // And it is the largest that fits: one more is refused.
    let ratio = fixed_args.to_json()["hisparse_config"]["host_to_device_ratio"]
        .as_u64()
        .unwrap_or_else(|| panic!("{:?}", fixed_args.to_json()));
    assert!(ratio < 29, "{ratio}");
    let (_, over) = ram_check(ratio + 1);
    error(&over, Code::HostPoolOverRamBudget);
}

// --- Issue 22 item 8: coordinator_memory_unreserved weighs the room left -------

fn coordinator_warning(v: Value) -> Option<Diagnostic> {
    let r = sg::check(&args(v), &options(json!({"gpu": "h200"}))).unwrap();
    assert!(r.valid, "{:#?}", r.errors);
    r.warnings
        .into_iter()
        .find(|w| w.code == Code::CoordinatorMemoryUnreserved)
}

#[test]
fn the_coordinator_warning_says_which_mem_fraction_leaves_room() {
    let base = json!({"tp_size": 8, "enable_hisparse": true, "disaggregation_mode": "decode"});
    // SGLang's default fraction leaves nothing beyond its own reserve: warned, with a fix.
    let w = coordinator_warning(base.clone()).expect("warned at the default fraction");
    let fix = serde_json::to_value(&w.fix).unwrap();
    let mfs = fix[0]["value"].as_f64().unwrap();
    assert!((0.5..0.9).contains(&mfs), "{fix}");
    // The fraction it gives leaves room: no warning once applied (one paste).
    let mut fixed = base.clone();
    fixed["mem_fraction_static"] = json!(mfs);
    assert!(coordinator_warning(fixed).is_none());
    // 0.85 leaves far more than a small coordinator needs: no noise.
    let mut small = base;
    small["mem_fraction_static"] = json!(0.85);
    small["max_running_requests"] = json!(64);
    assert!(coordinator_warning(small).is_none());
}

/// Found by the differential test: DeepSeek-V4's hook reads the name as given.
#[test]
fn deepseek_v4_takes_only_eagle_or_dspark_as_spelled() {
    let v4 = model("deepseek-v4-flash");
    for name in ["eagle", "NGRAM", "nextn", "NONE"] {
        let v = json!({"model_path": v4, "speculative_algorithm": name});
        let (r, s) = refused(v.clone(), Code::SpeculativeAlgorithmNotForModel);
        assert_eq!(s, "resolve", "{name}");
        let after = fixed(&args(v), &r);
        assert!(
            after
                .errors
                .iter()
                .all(|d| d.code != Code::SpeculativeAlgorithmNotForModel),
            "{name}: {:#?}",
            after.errors
        );
    }
    let r = check(json!({"model_path": v4, "speculative_algorithm": "MTP"}));
    assert!(r
        .errors
        .iter()
        .all(|d| d.code != Code::SpeculativeAlgorithmNotForModel));
}

/// Found by the differential test: the unknown name's fix drops the
/// speculative parameters given with it too (nothing reads them then).
#[test]
fn the_unknown_algorithm_fix_drops_the_speculative_parameters_too() {
    let v = json!({"speculative_algorithm": "MTP", "speculative_num_steps": 2,
        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 6});
    let r = check(v.clone());
    let f = sg::fixes_applied(&args(v), &r.errors).unwrap().to_json();
    for attr in [
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
    ] {
        assert!(f.get(attr).is_none(), "{attr}: {f}");
    }
}

/// Found by the differential test: EAGLE's defaults are (5, 4, 8) on Llama, so
/// a page > 1 off the tree backends is refused at resolve.
#[test]
fn eagle_defaults_on_llama_have_topk_4() {
    let v = json!({"model_path": model("llama-3.1-8b"), "page_size": 16,
        "attention_backend": "dsa", "speculative_algorithm": "EAGLE"});
    let (r, s) = refused(v.clone(), Code::EagleTopkNeedsTreeBackend);
    assert_eq!(s, "resolve");
    let after = fixed(&args(v), &r);
    assert!(after.valid, "{:#?}", after.errors);
}

// --- Defect 1: --hisparse-config read as Python's json.loads reads it -----------

fn hisparse(config: &str) -> Report {
    check(json!({"enable_hisparse": true, "disable_radix_cache": true, "hisparse_config": config}))
}

fn first_stage(r: &Report) -> Option<String> {
    const ORDER: [&str; 9] = [
        "argparse",
        "resolve",
        "check",
        "after_weights_load",
        "pool_build",
        "coordinator_init",
        "first_decode",
        "first_request",
        "request",
    ];
    r.errors
        .iter()
        .map(stage)
        .filter(|s| ORDER.contains(&s.as_str()))
        .min_by_key(|s| ORDER.iter().position(|o| o == s))
}

#[test]
fn nan_infinity_and_1e400_are_read_as_python_reads_them() {
    // json.loads reads them (factory.py:73): no hisparse_config_invalid_json.
    for text in [
        r#"{"top_k": NaN}"#,
        r#"{"swap_in_block_size": 960, "x": Infinity}"#,
        r#"{"x": -Infinity, "y": 1e400}"#,
    ] {
        let r = hisparse(text);
        assert!(
            !r.errors
                .iter()
                .any(|d| d.code == Code::HisparseConfigInvalidJson),
            "{text}: {:#?}",
            r.errors
        );
    }
    // An unknown key holding NaN has no effect: the launch is valid (warnings only).
    assert!(hisparse(r#"{"x": NaN}"#).valid);
    // A JSON error carries Python's own JSONDecodeError text.
    let r = hisparse("{top_k:2048}");
    let e = error(&r, Code::HisparseConfigInvalidJson);
    assert!(
        e.message.starts_with("ValueError: Failed to parse hisparse_config: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        "{}",
        e.message
    );
}

#[test]
fn device_buffer_size_1e3_is_sglangs_own_top_k_refusal_after_the_weights_load() {
    let r = hisparse(r#"{"device_buffer_size": 1e3}"#);
    let e = error(&r, Code::DeviceBufferSizeBelowTopK);
    assert_eq!(stage(e), "after_weights_load");
    assert_eq!(
        e.message,
        "device_buffer_size (1000.0) must be no smaller than top_k (2048)"
    );
    assert_eq!(first_stage(&r).as_deref(), Some("after_weights_load"));
    // Its fix passes.
    let a = args(json!({"enable_hisparse": true, "disable_radix_cache": true,
                        "hisparse_config": r#"{"device_buffer_size": 1e3}"#}));
    let after = fixed(&a, &r);
    assert!(
        after.errors.iter().all(|d| stage(d) == "never"),
        "{:#?}",
        after.errors
    );
}

#[test]
fn integers_of_any_size_compare_and_print_as_python_does() {
    let r = hisparse(r#"{"device_buffer_size": -9223372036854775809}"#);
    let e = error(&r, Code::DeviceBufferSizeBelowTopK);
    assert_eq!(
        e.message,
        "device_buffer_size (-9223372036854775809) must be no smaller than top_k (2048)"
    );
    // 2**63 passes SGLang's parse (factory.py:84): the first failure is later.
    let r = hisparse(r#"{"device_buffer_size": 9223372036854775808}"#);
    assert!(
        !r.errors.iter().any(|d| stage(d) == "after_weights_load"),
        "{:#?}",
        r.errors
    );
    assert_eq!(first_stage(&r).as_deref(), Some("coordinator_init"));
    let r = hisparse(r#"{"swap_in_block_size": 99999999999999999999999}"#);
    assert_eq!(
        error(&r, Code::SwapInBlockSizeOutOfRange).message,
        "swap_in_block_size (99999999999999999999999) must be in the range [1, 1024]"
    );
}

#[test]
fn a_bool_top_k_compares_as_an_int_and_sglang_runs_with_index_topk() {
    // top_k true is 1: device_buffer_size 4096 >= 1 passes, and SGLang runs
    // with the model's index_topk (model_runner.py:1038-1041): it starts.
    let r = hisparse(r#"{"top_k": true, "device_buffer_size": 4096}"#);
    assert!(r.valid, "{:#?}", r.errors);
    assert!(r
        .warnings
        .iter()
        .any(|w| w.code == Code::TopKDiffersFromIndexTopk));
    // A string against an int is Python's TypeError at the comparison.
    let r = hisparse(r#"{"top_k": "2048", "device_buffer_size": 4096}"#);
    let e = error(&r, Code::HisparseConfigInvalidType);
    assert_eq!(stage(e), "after_weights_load");
    assert!(
        e.message
            .contains("'<' not supported between instances of 'int' and 'str'"),
        "{}",
        e.message
    );
    // top_k null: 2 * None raises even with device_buffer_size given (factory.py:80).
    let r = hisparse(r#"{"top_k": null, "device_buffer_size": 4096}"#);
    let e = error(&r, Code::HisparseConfigInvalidType);
    assert!(
        e.message
            .contains("unsupported operand type(s) for *: 'int' and 'NoneType'"),
        "{}",
        e.message
    );
    // swap_in_block_size is printed with Python's repr.
    let r = hisparse(r#"{"swap_in_block_size": NaN}"#);
    assert_eq!(
        error(&r, Code::SwapInBlockSizeNotInt).message,
        "swap_in_block_size must be an integer, got nan"
    );
    // A NaN ratio fails where SGLang first computes with it: int(nan).
    let r = hisparse(r#"{"host_to_device_ratio": NaN}"#);
    let e = error(&r, Code::HisparseConfigInvalidType);
    assert_eq!(stage(e), "after_weights_load");
    assert!(e
        .message
        .starts_with("ValueError: cannot convert float NaN to integer"));
}

// --- Defect 10: SGLang's KV-cache rules without HiSparse --------------------------

#[test]
fn kv_cache_sharding_off_prefill_is_refused_without_hisparse() {
    let (r, s) = refused(
        json!({"enable_kv_cache_sharding": true, "disaggregation_mode": "decode"}),
        Code::KvCacheShardingOffPrefill,
    );
    assert_eq!(s, "resolve");
    assert!(error(&r, Code::KvCacheShardingOffPrefill)
        .message
        .starts_with("--enable-kv-cache-sharding is only supported on PD prefill workers"));
    let a = args(json!({"enable_kv_cache_sharding": true, "disaggregation_mode": "decode"}));
    assert!(fixed(&a, &r).valid);
}

#[test]
fn mxfp8_needs_blackwell_at_resolve() {
    let llama = |gpu: &str| {
        let mut a = args(json!({"kv_cache_dtype": "mxfp8"}));
        a.model_path = Some(model("llama-3.1-8b"));
        sg::check(&a, &options(json!({"gpu": gpu}))).unwrap()
    };
    let r = llama("h200");
    assert_eq!(
        stage(error(&r, Code::KvCacheDtypeNeedsBlackwell)),
        "resolve"
    );
    assert!(!llama("b200")
        .errors
        .iter()
        .any(|d| d.code == Code::KvCacheDtypeNeedsBlackwell));
}

#[test]
fn prefill_only_disable_kv_cache_needs_is_embedding() {
    let (r, s) = refused(
        json!({"prefill_only_disable_kv_cache": true}),
        Code::PrefillOnlyDisableKvCacheNeedsEmbedding,
    );
    assert_eq!(s, "resolve");
    let a = args(json!({"prefill_only_disable_kv_cache": true}));
    assert!(fixed(&a, &r).valid);
}

// --- Found by the generated differential --------------------------------------

#[test]
fn tilelang_for_one_dsa_backend_with_fp8_is_refused_without_hisparse() {
    let (r, s) = refused(
        json!({"kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "tilelang"}),
        Code::TilelangFp8BackendsMixed,
    );
    assert_eq!(s, "resolve");
    let a = args(json!({"kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "tilelang"}));
    assert!(fixed(&a, &r).valid);
}

#[test]
fn prefill_only_on_an_embedding_model_needs_its_preconditions() {
    let v = json!({"prefill_only_disable_kv_cache": true, "is_embedding": true,
                   "model_path": model("llama-3.1-8b")});
    let (r, s) = refused(v.clone(), Code::PrefillOnlyDisableKvCachePreconditions);
    assert_eq!(s, "resolve");
    assert_eq!(
        r.errors
            .iter()
            .filter(|d| d.code == Code::PrefillOnlyDisableKvCachePreconditions)
            .count(),
        2
    );
    assert!(fixed(&args(v), &r).valid);
}

#[test]
fn prefill_only_on_a_dsa_model_needs_the_fa_backend() {
    let v = json!({"prefill_only_disable_kv_cache": true, "is_embedding": true});
    let (r, _) = refused(v.clone(), Code::PrefillOnlyDisableKvCachePreconditions);
    assert!(error(&r, Code::PrefillOnlyDisableKvCachePreconditions)
        .message
        .contains("but got prefill backend 'dsa'"));
    assert!(fixed(&args(v), &r).valid);
    let r = check(json!({"dp_size": 2, "attn_dp_size": 0, "enable_dp_attention": true}));
    assert!(error(&r, Code::AttnDpSizeNotPositive).fix.is_empty());
}

#[test]
fn attn_dp_size_one_beside_the_deprecated_form_is_no_fix() {
    let r = check(json!({"dp_size": 2, "attn_dp_size": 2, "enable_dp_attention": true}));
    assert!(error(&r, Code::DataParallelLayoutInvalid).fix.is_empty());
}

#[test]
fn prefill_complete_is_refused_in_aggregated_serving_without_hisparse() {
    let v = json!({"disaggregation_decode_allocation_policy": "prefill_complete"});
    let (r, s) = refused(v.clone(), Code::PrefillCompletePolicyUnsupported);
    assert_eq!(s, "resolve");
    assert!(error(&r, Code::PrefillCompletePolicyUnsupported)
        .message
        .ends_with("does not yet support aggregated serving"));
    assert!(fixed(&args(v), &r).valid);
    // The prefill-only fix drops HiCache with the radix cache it needs.
    let v = json!({"prefill_only_disable_kv_cache": true, "is_embedding": true,
                   "enable_hierarchical_cache": true, "chunked_prefill_size": -1,
                   "model_path": model("llama-3.1-8b")});
    let r = check(v.clone());
    assert!(fixed(&args(v), &r).valid, "{:#?}", r.errors);
}

// --- Found by the 2,000-launch differential: --dcp-size 0 ----------------------

/// `--dcp-size 0` is SGLang's "must be >= 1" at resolve
/// (arg_groups/parallel_hook.py:240-247); we said valid. The fix (1) passes.
#[test]
fn a_dcp_size_below_one_is_refused_at_resolve() {
    for n in [0, -3] {
        let v = json!({"dcp_size": n});
        let (r, s) = refused(v.clone(), Code::DcpSizeNotPositive);
        assert_eq!(s, "resolve");
        assert!(fixed(&args(v), &r).valid, "{:#?}", r.errors);
    }
    assert!(check(json!({"dcp_size": 1})).valid);
}

/// `--pp-size 2` with NGRAM (any algorithm but EAGLE / NEXTN) fails SGLang's
/// pipeline assert at check (arg_groups/validation_hook.py:131-137), on P/D
/// prefill too; we said valid. EAGLE keeps its own rule (off prefill only).
#[test]
fn pipeline_parallelism_takes_only_eagle_speculation() {
    let v = json!({"pp_size": 2, "speculative_algorithm": "NGRAM"});
    let r = check(v);
    assert_eq!(stage(error(&r, Code::PipelineSpeculationNotEagle)), "check");
    let v =
        json!({"pp_size": 2, "speculative_algorithm": "NGRAM", "disaggregation_mode": "prefill"});
    assert!(check(v)
        .errors
        .iter()
        .any(|e| e.code == Code::PipelineSpeculationNotEagle));
    let r = check(
        json!({"pp_size": 2, "speculative_algorithm": "NEXTN", "disaggregation_mode": "prefill"}),
    );
    assert!(
        !r.errors
            .iter()
            .any(|e| e.code == Code::PipelineSpeculationNotEagle),
        "{:#?}",
        r.errors
    );
}

// --- Found by the differential past launch 400 ---------------------------------

/// `{"top_k": 2048.5}` with a buffer given passes SGLang's parse
/// (factory.py:84: 6144 < 2048.5 is False) and starts: SGLang holds the float
/// and runs with index_topk. The report's resolved settings hold Python's
/// value (there were none: the settings were integers); an integer stays a
/// JSON integer.
#[test]
fn a_float_top_k_is_held_as_python_holds_it() {
    let r = hisparse(r#"{"top_k": 2048.5, "device_buffer_size": 6144}"#);
    assert!(r.valid, "{:#?}", r.errors);
    let h = r.sglang_hisparse().expect("resolved settings");
    assert_eq!(h.top_k.value, json!(2048.5));
    assert_eq!(h.index_topk.value, 2048);
    let r = hisparse(r#"{"top_k": NaN, "device_buffer_size": 4096}"#);
    assert!(r.valid, "{:#?}", r.errors);
    assert_eq!(r.sglang_hisparse().unwrap().top_k.value, json!("nan"));
    let r = hisparse(r#"{"top_k": 1024}"#);
    let text = serde_json::to_value(&r).unwrap();
    assert_eq!(text["hisparse"]["top_k"]["value"], json!(1024));
    assert!(text["hisparse"]["top_k"]["value"].is_i64());
    let r = hisparse(r#"{"top_k": true, "device_buffer_size": 4096}"#);
    assert_eq!(r.sglang_hisparse().unwrap().top_k.value, json!(1));
}

/// NGRAM's topk is `--speculative-ngram-max-bfs-breadth` (default 10,
/// speculative_hook.py:1309-1313), whatever `--speculative-eagle-topk` says:
/// HiSparse's linear-speculation rule is fixed by the breadth (the fix was
/// `--speculative-eagle-topk 1`, which the user had given, and the fixed
/// launch was refused again).
#[test]
fn ngram_topk_under_hisparse_is_fixed_by_the_bfs_breadth() {
    let v = json!({"enable_hisparse": true, "disable_radix_cache": true,
        "attention_backend": "flashinfer", "speculative_algorithm": "NGRAM",
        "speculative_eagle_topk": 1, "speculative_num_steps": 3, "speculative_num_draft_tokens": 4});
    let r = check(v.clone());
    let e = error(&r, Code::SpeculativeEagleTopkNotOne);
    let fix = serde_json::to_value(&e.fix).unwrap();
    assert_eq!(
        fix[0]["path"],
        json!("speculative_ngram_max_bfs_breadth"),
        "{fix}"
    );
    let after = fixed(&args(v), &r);
    assert!(
        !after
            .errors
            .iter()
            .any(|d| d.code == Code::SpeculativeEagleTopkNotOne),
        "{:#?}",
        after.errors
    );
}

/// `--speculative-adaptive` with steps outside the default adaptive config's
/// candidates [0, 1, 3, 5, 7]: ValueError at resolve
/// (speculative_hook.py:1392-1420); we said the HiSparse rule at check (and
/// nothing without HiSparse). Adaptive that SGLang turns off (topk 2, NGRAM)
/// is neither this nor HiSparse's adaptive rule.
#[test]
fn adaptive_speculation_takes_the_candidate_steps_at_resolve() {
    let v = json!({"speculative_algorithm": "EAGLE", "speculative_adaptive": true,
        "speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3});
    let (r, s) = refused(v.clone(), Code::SpeculativeAdaptiveStepsNotCandidate);
    assert_eq!(s, "resolve");
    assert_eq!(
        error(&r, Code::SpeculativeAdaptiveStepsNotCandidate).message,
        "--speculative-num-steps=2 is not in the adaptive config candidate_steps [0, 1, 3, 5, 7]. Pass one of those values."
    );
    assert!(fixed(&args(v), &r).valid);
    let v = json!({"speculative_algorithm": "nextn", "speculative_adaptive": true,
        "speculative_num_steps": 6, "enable_hisparse": true, "disable_radix_cache": true});
    let r = check(v.clone());
    let fix =
        serde_json::to_value(&error(&r, Code::SpeculativeAdaptiveStepsNotCandidate).fix).unwrap();
    assert_eq!(
        fix[0]["value"],
        json!(3),
        "HiSparse takes 2-4 draft tokens: {fix}"
    );
    assert!(
        check(
            json!({"speculative_algorithm": "EAGLE", "speculative_adaptive": true,
        "speculative_num_steps": 3})
        )
        .valid
    );
    for off in [
        json!({"speculative_algorithm": "EAGLE", "speculative_adaptive": true, "speculative_eagle_topk": 2,
               "speculative_num_steps": 2, "speculative_num_draft_tokens": 4, "enable_hisparse": true,
               "disable_radix_cache": true}),
        json!({"speculative_algorithm": "NGRAM", "speculative_adaptive": true, "speculative_num_steps": 2,
               "speculative_ngram_max_bfs_breadth": 1, "enable_hisparse": true, "disable_radix_cache": true}),
    ] {
        let r = check(off);
        for code in [
            Code::SpeculativeAdaptiveStepsNotCandidate,
            Code::SpeculativeAdaptiveWithHisparse,
        ] {
            assert!(
                !r.errors.iter().any(|d| d.code == code),
                "{code:?}: {:#?}",
                r.errors
            );
        }
    }
}

/// `--ep-size 0`: ZeroDivisionError when the launcher publishes the arguments
/// after check_server_args (srt/runtime_context.py:154, entrypoints/engine.py:1165-1175).
#[test]
fn an_ep_size_of_zero_is_refused_at_check() {
    let v = json!({"ep_size": 0});
    let (r, s) = refused(v.clone(), Code::EpSizeZero);
    assert_eq!(s, "check");
    assert!(fixed(&args(v), &r).valid);
    assert!(check(json!({"ep_size": 1})).valid);
}

/// `--dp-size 0 --attn-dp-size 2 --enable-dp-attention` on tp 1: the layout
/// fix `--attn-dp-size 1` turned the deprecated form back on with width 0
/// (a ZeroDivisionError): no fix of that one alone, as for a width > 1.
#[test]
fn attn_dp_size_one_beside_a_zero_dp_size_is_no_fix() {
    let r = check(json!({"dp_size": 0, "attn_dp_size": 2, "enable_dp_attention": true}));
    assert!(error(&r, Code::DataParallelLayoutInvalid).fix.is_empty());
    let r = check(json!({"dp_size": -1, "attn_dp_size": 0, "enable_dp_attention": true}));
    assert!(error(&r, Code::AttnDpSizeNotPositive).fix.is_empty());
}

/// Adaptive speculation that SGLang turns off for topk 2 is back on once the
/// topk fix gives 1: the fixed launch met the adaptive rules and was refused
/// again (HiSparse: adaptive is unsupported; without: steps 2 is no
/// candidate). The fixes that open the gate now close those too.
#[test]
fn a_fix_that_turns_adaptive_back_on_also_fixes_what_adaptive_needs() {
    for v in [
        json!({"enable_hisparse": true, "disable_radix_cache": true, "speculative_algorithm": "EAGLE",
               "speculative_adaptive": true, "speculative_num_steps": 3, "speculative_eagle_topk": 2,
               "speculative_num_draft_tokens": 4}),
        json!({"speculative_algorithm": "EAGLE", "speculative_adaptive": true,
               "speculative_num_steps": 2, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 3}),
        json!({"speculative_algorithm": "EAGLE", "speculative_adaptive": true, "attn_dp_size": 3,
               "speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3}),
    ] {
        let r = check(v.clone());
        assert!(!r.valid);
        assert!(
            !r.errors
                .iter()
                .any(|d| d.code == Code::SpeculativeAdaptiveStepsNotCandidate
                    || d.code == Code::SpeculativeAdaptiveWithHisparse),
            "adaptive is off as given: {:#?}",
            r.errors
        );
        let after = fixed(&args(v.clone()), &r);
        assert!(after.valid, "{v}: {:#?}", after.errors);
    }
}

// --- NOT_DRAWN ported: decode host KV buffering without HiSparse ---------------

/// A threshold outside [0, 1], or below 1 off a P/D decode server (the
/// host_pool retraction backup it declares is decode-only), or with DCP:
/// SGLang refuses each at resolve (pd_disaggregation_hook.py:64-80,
/// kv_cache_hook.py:351-364); we said valid. The fix (threshold 1) passes.
#[test]
fn decode_host_receive_is_refused_where_sglang_refuses_it() {
    let t = "disaggregation_decode_host_receive_threshold";
    for (v, code) in [
        (json!({t: 1.5}), Code::HostReceiveThresholdOutOfRange),
        (json!({t: -0.1}), Code::HostReceiveThresholdOutOfRange),
        (json!({t: 0.5}), Code::HostReceiveOffDecode),
        (
            json!({t: 0.5, "disaggregation_mode": "prefill"}),
            Code::HostReceiveOffDecode,
        ),
        (
            json!({t: 0.5, "disaggregation_mode": "decode", "dcp_size": 2}),
            Code::HostReceiveWithDcp,
        ),
    ] {
        let (r, s) = refused(v.clone(), code);
        assert_eq!(s, "resolve", "{v}");
        let after = fixed(&args(v.clone()), &r);
        assert!(
            !after.errors.iter().any(|d| d.code == code),
            "{v}: {:#?}",
            after.errors
        );
    }
    assert!(check(json!({t: 0.5, "disaggregation_mode": "decode"})).valid);
    assert!(check(json!({t: 0.0, "disaggregation_mode": "decode"})).valid);
}

/// `--dp-size 2 --nnodes 2`: SGLang's check asserts no multi-node DP replicas
/// (arg_groups/validation_hook.py:199-202); we said valid. Attention DP over
/// nodes is not replicas.
#[test]
fn data_parallel_replicas_over_nodes_are_refused_at_check() {
    let (r, s) = refused(
        json!({"tp_size": 8, "dp_size": 2, "nnodes": 2}),
        Code::DpReplicasOverNodes,
    );
    assert_eq!(s, "check");
    assert!(error(&r, Code::DpReplicasOverNodes).fix.is_empty());
    let r = check(json!({"tp_size": 8, "dp_size": 2, "enable_dp_attention": true, "nnodes": 2}));
    assert!(
        !r.errors.iter().any(|d| d.code == Code::DpReplicasOverNodes),
        "{:#?}",
        r.errors
    );
}

/// Adaptive EAGLE on Llama with none of steps / topk / draft tokens: adaptive
/// gives topk 1; the fix that drops adaptive left Llama's (5, 4, 8), which
/// HiSparse refuses again. The fix now gives (3, 1, 4) with it.
#[test]
fn dropping_adaptive_on_llama_keeps_linear_speculation() {
    let v = json!({"model_path": model("llama-3.1-8b"), "enable_hisparse": true,
        "disable_radix_cache": true, "speculative_algorithm": "EAGLE", "speculative_adaptive": true});
    let r = check(v.clone());
    assert!(
        r.errors
            .iter()
            .any(|d| d.code == Code::SpeculativeAdaptiveWithHisparse),
        "{:#?}",
        r.errors
    );
    let after = fixed(&args(v), &r);
    assert!(
        !after
            .errors
            .iter()
            .any(|d| d.code == Code::SpeculativeEagleTopkNotOne),
        "{:#?}",
        after.errors
    );
}

/// `--tp 8 --moe-dense-tp-size 2`: SGLang's check asserts moe_dense_tp_size
/// is None, 1 or tp_size (arg_groups/validation_hook.py:207-211); we said
/// valid (break23). 1 and tp_size pass; the fix is 1. `--dwdp-size` forces it
/// to 1 at resolve (parallel_hook.py:480-484), so it is not refused there.
#[test]
fn a_moe_dense_tp_size_other_than_one_or_tp_is_refused_at_check() {
    let (r, s) = refused(
        json!({"tp_size": 8, "moe_dense_tp_size": 2}),
        Code::MoeDenseTpSizeUnsupported,
    );
    assert_eq!(s, "check");
    let fix = &error(&r, Code::MoeDenseTpSizeUnsupported).fix;
    assert_eq!(fix.len(), 1, "{fix:#?}");
    for ok in [
        json!({"tp_size": 8, "moe_dense_tp_size": 1}),
        json!({"tp_size": 8, "moe_dense_tp_size": 8}),
        json!({"tp_size": 8}),
        json!({"tp_size": 8, "moe_dense_tp_size": null}),
        json!({"tp_size": 8, "moe_dense_tp_size": 2, "dwdp_size": 2}),
    ] {
        let r = check(ok.clone());
        assert!(
            !r.errors
                .iter()
                .any(|d| d.code == Code::MoeDenseTpSizeUnsupported),
            "{ok}: {:#?}",
            r.errors
        );
    }
}

/// `--base-gpu-id -1` and `--gpu-id-step 0`: SGLang's check asserts
/// "base_gpu_id must be non-negative" and "gpu_id_step must be positive"
/// (arg_groups/validation_hook.py:204-205); we said valid (break23). The
/// fixes are SGLang's defaults, 0 and 1.
#[test]
fn a_negative_base_gpu_id_or_a_gpu_id_step_below_one_is_refused_at_check() {
    for (v, code, attr, fixed) in [
        (
            json!({"base_gpu_id": -1}),
            Code::BaseGpuIdNegative,
            "base_gpu_id",
            0,
        ),
        (
            json!({"gpu_id_step": 0}),
            Code::GpuIdStepNotPositive,
            "gpu_id_step",
            1,
        ),
        (
            json!({"gpu_id_step": -2}),
            Code::GpuIdStepNotPositive,
            "gpu_id_step",
            1,
        ),
    ] {
        let (r, s) = refused(v.clone(), code);
        assert_eq!(s, "check", "{v}");
        let fix = serde_json::to_value(&error(&r, code).fix).unwrap();
        assert_eq!(fix[0]["value"], json!(fixed), "{v}: {fix}");
        assert!(fix.to_string().contains(attr), "{fix}");
    }
    for ok in [
        json!({"base_gpu_id": 0, "gpu_id_step": 1}),
        json!({"base_gpu_id": 3, "gpu_id_step": 2}),
    ] {
        let r = check(ok.clone());
        assert!(
            !r.errors
                .iter()
                .any(|d| matches!(d.code, Code::BaseGpuIdNegative | Code::GpuIdStepNotPositive)),
            "{ok}: {:#?}",
            r.errors
        );
    }
}

/// `--speculative-algorithm NGRAM --speculative-ngram-max-bfs-breadth 0`:
/// NGRAM's topk is the breadth, and without `--speculative-num-steps` SGLang
/// derives the steps as draft tokens // topk (speculative_hook.py:1310-1326):
/// ZeroDivisionError at resolve; we said valid (break23). With the steps given
/// there is no division. The fix is breadth 1.
#[test]
fn an_ngram_bfs_breadth_of_zero_is_refused_at_resolve_without_steps() {
    let v = json!({"speculative_algorithm": "NGRAM", "speculative_ngram_max_bfs_breadth": 0});
    let (r, s) = refused(v, Code::NgramBfsBreadthZero);
    assert_eq!(s, "resolve");
    let fix = serde_json::to_value(&error(&r, Code::NgramBfsBreadthZero).fix).unwrap();
    assert_eq!(fix[0]["value"], json!(1), "{fix}");
    let r = check(json!({"speculative_algorithm": "NGRAM",
        "speculative_ngram_max_bfs_breadth": 0, "speculative_num_steps": 3}));
    assert!(
        !r.errors.iter().any(|d| d.code == Code::NgramBfsBreadthZero),
        "{:#?}",
        r.errors
    );
}

/// A served model name with a colon, given or defaulted from `--model-path`
/// (arg_groups/serving_hook.py:642-647): SGLang's check asserts no ':' (the
/// LoRA `model:adapter` syntax), except for s3://, gs://, az:// names
/// (arg_groups/validation_hook.py:213-219, utils/runai_utils.py:14, 48-50);
/// we said valid (break23). The fix names the server without the colon.
#[test]
fn a_served_model_name_with_a_colon_is_refused_at_check() {
    let (r, s) = refused(
        json!({"served_model_name": "ds:v32"}),
        Code::ServedModelNameColon,
    );
    assert_eq!(s, "check");
    let fix = serde_json::to_value(&error(&r, Code::ServedModelNameColon).fix).unwrap();
    assert_eq!(fix[0]["value"], json!("ds-v32"), "{fix}");
    for ok in [
        json!({"served_model_name": "S3://bucket/ds:v32"}),
        json!({"served_model_name": "ds-v32"}),
    ] {
        let r = check(ok.clone());
        assert!(
            !r.errors
                .iter()
                .any(|d| d.code == Code::ServedModelNameColon),
            "{ok}: {:#?}",
            r.errors
        );
    }
}

/// `--disaggregation-mode decode --dp-size 0 --max-running-requests 16`:
/// SGLang's P/D hook divides max_running_requests by dp_size x attn_dp_size
/// to default the decode extra slots (pd_disaggregation_hook.py:133-136):
/// ZeroDivisionError at resolve; we said valid (found by break23's run of the
/// differential). Given extra slots skip the division. The fix is dp_size 1.
#[test]
fn a_zero_dp_size_on_a_decode_server_with_max_running_requests_is_refused_at_resolve() {
    let v = json!({"disaggregation_mode": "decode", "dp_size": 0, "max_running_requests": 16});
    let (r, s) = refused(v, Code::DecodeDpSizeZero);
    assert_eq!(s, "resolve");
    let fix = serde_json::to_value(&error(&r, Code::DecodeDpSizeZero).fix).unwrap();
    assert_eq!(fix[0]["value"], json!(1), "{fix}");
    for ok in [
        json!({"disaggregation_mode": "decode", "dp_size": 0, "max_running_requests": 16,
            "disaggregation_decode_extra_slots": 4}),
        json!({"disaggregation_mode": "decode", "dp_size": 0}),
        json!({"disaggregation_mode": "prefill", "dp_size": 0, "max_running_requests": 16}),
    ] {
        let r = check(ok.clone());
        assert!(
            !r.errors.iter().any(|d| d.code == Code::DecodeDpSizeZero),
            "{ok}: {:#?}",
            r.errors
        );
    }
}
