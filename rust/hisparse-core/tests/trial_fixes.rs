//! Fixes as a new user read them in the new-user trial of main: the
//! fix text says what its figures assume, and each fix passes alone and
//! with the other fixes of its report.

use hisparse_core::check::check;
use hisparse_core::diagnostic::apply_fix;
use hisparse_core::plan::{plan, PlanOptions};
use hisparse_core::{resolve, Code, Report, ServeArgs};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A bundled model's directory (tests/data/models/NAME).
fn model_dir(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/models")
        .join(name)
        .display()
        .to_string()
}

fn model() -> String {
    model_dir("deepseek-v3.2")
}

fn args(mut doc: Value) -> ServeArgs {
    doc["model"] = json!(model());
    ServeArgs::from_json(doc).unwrap()
}

fn report(args: &ServeArgs) -> Report {
    resolve(args).unwrap()
}

/// `args` with `fixes` applied in order.
fn fixed(args: &ServeArgs, fixes: &[&hisparse_core::Diagnostic]) -> ServeArgs {
    let mut doc = args.normalized().0.into_owned().to_json();
    for d in fixes {
        apply_fix(&mut doc, &d.fix).unwrap();
    }
    ServeArgs::from_json(doc).unwrap()
}

/// Each fix alone removes its error; all of them together leave a valid
/// configuration; returns that configuration's report.
fn fixes_pass_alone_and_together(args: &ServeArgs) -> Report {
    fixes_pass_alone_and_together_by(args, report)
}

/// [`fixes_pass_alone_and_together`] for the check of `options` (the node's RAM).
fn fixes_pass_on(args: &ServeArgs, options: &PlanOptions) -> Report {
    fixes_pass_alone_and_together_by(args, |a| check(a, options).unwrap())
}

fn fixes_pass_alone_and_together_by(
    args: &ServeArgs,
    report: impl Fn(&ServeArgs) -> Report,
) -> Report {
    let r = report(args);
    assert!(!r.errors.is_empty());
    for d in &r.errors {
        let after = report(&fixed(args, &[d]));
        assert!(
            !after
                .errors
                .iter()
                .any(|e| e.code == d.code && e.path == d.path),
            "the fix of {} at {} alone leaves it",
            d.code.as_str(),
            d.path
        );
    }
    let all: Vec<_> = r.errors.iter().collect();
    let after = report(&fixed(args, &all));
    assert!(after.valid, "every fix at once leaves {:?}", after.errors);
    after
}

const PD_NO_POOL: &str = r#"{"kv_connector": "MultiConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"connectors": [
    {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
    {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}]}}"#;

/// Trial finding 5: a pool both misplaced and too small, with a block size
/// another fix changes. The figure was printed twice ("4.86 GiB 4.86 GiB"),
/// and the fix did not say which block size its figures were for.
#[test]
fn a_misplaced_pool_too_small_says_what_its_figures_assume() {
    let a = args(json!({
        "tensor_parallel_size": 8,
        "kv_cache_dtype": "fp8_ds_mla",
        "block_size": 16,
        "max_model_len": 128000,
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 1},
        "attention_config": {"hisparse_config": {"host_pool_gib": 2}},
        "kv_transfer_config": serde_json::from_str::<Value>(PD_NO_POOL).unwrap(),
    }));
    let r = report(&a);
    let d = r
        .errors
        .iter()
        .find(|e| e.code == Code::HostPoolGibMisplaced)
        .expect("host_pool_gib_misplaced");
    let hint = d.hint.as_deref().unwrap();
    assert!(!hint.contains("GiB 4.86 GiB"), "{hint}");
    let gib = hint
        .split(" as ")
        .nth(1)
        .and_then(|t| t.split(':').next())
        .unwrap();
    assert_eq!(hint.matches(&format!("{gib} GiB")).count(), 1, "{hint}");
    assert!(
        hint.contains("host blocks of 16 tokens, fewer than the 8002 that start-up needs as given"),
        "{hint}"
    );
    assert!(
        hint.contains(
            "once the other fixes of this report are applied (block_size 64: 2002 host blocks"
        ),
        "{hint}"
    );
    assert!(r
        .errors
        .iter()
        .any(|e| e.code == Code::BlockSizeUnsupported));
    let after = fixes_pass_alone_and_together(&a);
    assert_eq!(after.vllm_hisparse().cloned().unwrap().block_size.value, 64);
}

/// Trial finding 1: the trial's launch command with the HiSparseConnector
/// entry's key misspelled `kv_conector`. The fix removed the entry (HiSparse
/// off, the 256 GiB lost); it renames the key, alone and with the others.
#[test]
fn a_misspelled_kv_connector_key_is_renamed_and_hisparse_stays_on() {
    for name in ["HiSparseConnector", "HiSparseConector"] {
        let a = args(json!({
            "tensor_parallel_size": 8,
            "kv_cache_dtype": "fp8_ds_mla",
            "max_model_len": 128000,
            "max_num_seqs": 64,
            "gpu_memory_utilization": 0.9,
            "speculative_config": {"method": "mtp", "num_speculative_tokens": 1},
            "kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"connectors": [
                {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
                {"kv_conector": name, "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 256}}]}},
        }));
        let r = report(&a);
        assert!(r.hisparse_enabled, "{name}");
        let codes: Vec<_> = r.errors.iter().map(|e| e.code).collect();
        assert_eq!(codes, [Code::MissingKvConnector], "{name}");
        hisparse_kept(fixes_pass_alone_and_together(&a), name);
    }
}

/// After the fixes: HiSparse on, the user's 256 GiB kept, the connector at
/// the MultiConnector's second place.
fn hisparse_kept(after: Report, case: &str) {
    let h = after
        .vllm_hisparse()
        .cloned()
        .expect("HiSparse on after the fixes");
    assert_eq!(h.host_pool_gib.value, 256.0, "{case}");
    assert_eq!(
        h.connector, "kv_transfer_config.kv_connector_extra_config.connectors[1]",
        "{case}"
    );
}

/// Found after the trial: the MultiConnector's list under a misspelled key
/// (`conectors`). The fix removed the whole --kv-transfer-config (HiSparse
/// off); it renames the list, alone and with the fixes of errors inside it
/// (whose paths are where the list is written).
#[test]
fn a_misspelled_connectors_list_is_renamed_and_hisparse_stays_on() {
    let nixl_ok = json!({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"});
    let nixl_no_role = json!({"kv_connector": "NixlConnector"});
    let hs_ok = json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 256}});
    let hs_typo = json!({"kv_conector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 256}});
    for (key, nixl, hs, errors) in [
        ("conectors", &nixl_ok, &hs_ok, 1),
        ("connector", &nixl_ok, &hs_ok, 1),
        ("conectors", &nixl_no_role, &hs_typo, 3),
    ] {
        let a = args(json!({
            "tensor_parallel_size": 8,
            "kv_cache_dtype": "fp8_ds_mla",
            "max_model_len": 128000,
            "kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_consumer",
                "kv_connector_extra_config": {key: [nixl, hs]}},
        }));
        let r = report(&a);
        assert!(r.hisparse_enabled, "{key}");
        assert_eq!(r.errors.len(), errors, "{key}: {:?}", r.errors);
        assert!(r.errors.iter().any(|e| e.code == Code::EmptyMultiConnector
            && e.path.to_string() == "kv_transfer_config.kv_connector_extra_config.connectors"));
        hisparse_kept(fixes_pass_alone_and_together(&a), key);
    }
}

/// Break-it: a misspelled `conectors` beside a real `connectors` list (or
/// `[]`) was silent, HiSparse off as in vLLM, which reads only `connectors`:
/// a warning names the ignored connectors, and its fix moves them in.
#[test]
fn misspelled_connectors_beside_real_ones_are_named() {
    let nixl = json!({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"});
    let hs = json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 256}});
    for listed in [json!([nixl]), json!([])] {
        let a = args(json!({
            "tensor_parallel_size": 8,
            "kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_consumer",
                "kv_connector_extra_config": {"connectors": listed, "conectors": [hs]}},
        }));
        let r = report(&a);
        assert!(r.valid && !r.hisparse_enabled, "{listed}: {:?}", r.errors);
        let w = r
            .warnings
            .iter()
            .find(|w| w.code == Code::UnknownKey)
            .unwrap_or_else(|| panic!("{listed}: {:?}", r.warnings));
        assert!(w.message.contains("HiSparseConnector"), "{}", w.message);
        let after = report(&fixed(&a, &[w]));
        assert!(
            after.valid && after.hisparse_enabled,
            "{listed}: {:?}",
            after.errors
        );
        let h = after.vllm_hisparse().cloned().unwrap();
        assert_eq!(h.host_pool_gib.value, 256.0);
    }
}

/// Trial finding 7: `--hf-config-path` was listed as ignored, so the check
/// read another config than vLLM, which reads `hf_config_path or model`
/// (vllm/config/model.py:680).
#[test]
fn the_config_is_read_from_hf_config_path_first() {
    let llama = model_dir("llama-3.1-8b");
    let hs = json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}});
    let a = ServeArgs::from_json(json!({"model": llama, "hf_config_path": model(), "tensor_parallel_size": 8, "kv_transfer_config": hs}))
        .unwrap();
    let r = report(&a);
    assert!(r.valid, "{:?}", r.errors);
    assert_eq!(
        r.model.unwrap().architecture.as_deref(),
        Some("DeepseekV32ForCausalLM")
    );
    // Without it, the model's own config (not a DSA model: HiSparse refused).
    let b = ServeArgs::from_json(
        json!({"model": llama, "tensor_parallel_size": 8, "kv_transfer_config": hs}),
    )
    .unwrap();
    assert!(report(&b)
        .errors
        .iter()
        .any(|e| e.code == Code::ModelNotDsa));
}

/// `data_parallel_size_local` is checked as vLLM 0.33 reads it: 0 ..= DP
/// (vllm/config/parallel.py:150, :545), and with `--nnodes` its node groups
/// (DP / it) divide the nodes (parallel.py:826). Each fix passes alone and
/// with the others, including the nnodes fix it depends on.
#[test]
fn data_parallel_size_local_out_of_range_is_fixed() {
    for (doc, want) in [
        (
            json!({"data_parallel_size": 4, "data_parallel_size_local": 8}),
            json!(4),
        ),
        (
            json!({"data_parallel_size": 0, "data_parallel_size_local": 2}),
            json!(1),
        ),
        (
            json!({"data_parallel_size": 16, "data_parallel_size_local": 4, "nnodes": 2}),
            json!(8),
        ),
        (
            json!({"data_parallel_size": 16, "data_parallel_size_local": 0, "nnodes": 2}),
            json!(8),
        ),
        (
            json!({"data_parallel_size": 6, "data_parallel_size_local": 2, "nnodes": 2}),
            json!(3),
        ),
        // vLLM's inference (1 a node) does not divide either: one node group.
        (
            json!({"data_parallel_size": 3, "tensor_parallel_size": 2, "data_parallel_size_local": 1, "nnodes": 2}),
            json!(3),
        ),
        // nnodes 3 does not divide the world (16); its fix (2) is what dp_local's fix is for.
        (
            json!({"data_parallel_size": 16, "data_parallel_size_local": 4, "nnodes": 3}),
            json!(8),
        ),
    ] {
        let a = args(doc.clone());
        let r = report(&a);
        let d = r
            .errors
            .iter()
            .find(|e| e.path.to_string() == "data_parallel_size_local")
            .unwrap_or_else(|| panic!("{doc}: {:?}", r.errors));
        assert_eq!(d.code, Code::InvalidValue);
        // 0 over nodes: vLLM divides by it (parallel.py:822), said as its crash.
        let crash = r.warnings.iter().any(|w| {
            w.code == Code::Vllm033Crash && w.path.to_string() == "data_parallel_size_local"
        });
        assert_eq!(
            crash,
            doc["data_parallel_size_local"] == 0 && doc.get("nnodes").is_some(),
            "{doc}"
        );
        let after = fixed(&a, &[d]).to_json();
        assert_eq!(after["data_parallel_size_local"], want, "{doc}");
        fixes_pass_alone_and_together(&a);
    }
    let negative = args(json!({"data_parallel_size": 4, "data_parallel_size_local": -1}));
    let after = fixes_pass_alone_and_together(&negative);
    assert!(after.errors.is_empty());
    // In range: no error, on one node (0 runs no replica here) or over nodes.
    for doc in [
        json!({"data_parallel_size": 16, "data_parallel_size_local": 8}),
        json!({"data_parallel_size": 16, "data_parallel_size_local": 0}),
        json!({"data_parallel_size": 16, "data_parallel_size_local": 8, "nnodes": 2}),
        json!({"data_parallel_size": 2, "data_parallel_size_local": 2, "nnodes": 2, "tensor_parallel_size": 8}),
    ] {
        let r = report(&args(doc.clone()));
        assert!(r.valid, "{doc}: {:?}", r.errors);
    }
}

/// Issue 17 item 6: the layouts vLLM 0.33.0 refuses only when its engine
/// starts, each with the stage, and a fix that passes alone and together.
#[test]
fn launch_layouts_vllm_refuses_at_engine_start_are_fixed() {
    use hisparse_core::engines::vllm_0_33::stages::VllmStage;
    for (doc, code, path, want) in [
        // An unset -dpl whose inferred node groups (3) do not divide 2 nodes
        // (vllm/config/parallel.py:827): one node group, each replica over both.
        (
            json!({"tensor_parallel_size": 8, "data_parallel_size": 3, "nnodes": 2}),
            Code::DataParallelLayoutInvalid,
            "data_parallel_size_local",
            json!(3),
        ),
        // A TP-1 replica spread over 2 nodes (multiproc_executor.py:305): one a node.
        (
            json!({"data_parallel_size": 2, "data_parallel_size_local": 2, "nnodes": 2, "tensor_parallel_size": 1}),
            Code::DataParallelLayoutInvalid,
            "data_parallel_size_local",
            json!(1),
        ),
        // vllm serve --headless with no local replica (serve.py:203).
        (
            json!({"headless": true, "data_parallel_size": 2, "data_parallel_size_local": 0}),
            Code::HeadlessWithoutLocalReplicas,
            "data_parallel_size_local",
            json!(2),
        ),
        (
            json!({"headless": true, "data_parallel_size": 4, "data_parallel_size_local": 0, "nnodes": 2, "tensor_parallel_size": 4}),
            Code::HeadlessWithoutLocalReplicas,
            "data_parallel_size_local",
            json!(2),
        ),
    ] {
        let a = args(doc.clone());
        let r = report(&a);
        let d = r
            .errors
            .iter()
            .find(|e| e.path.to_string() == path)
            .unwrap_or_else(|| panic!("{doc}: {:?}", r.errors));
        assert_eq!(
            (d.code, d.stage),
            (code, VllmStage::EngineStart.into()),
            "{doc}"
        );
        assert_eq!(fixed(&a, &[d]).to_json()[path], want, "{doc}");
        let after = fixes_pass_alone_and_together(&a);
        assert!(after.errors.is_empty(), "{doc}: {:?}", after.errors);
    }
}

/// Issue 17 item 6: what vLLM 0.33.0 refuses while building its config over nodes.
#[test]
fn node_rank_backend_and_external_lb_are_refused_while_the_config_is_built() {
    use hisparse_core::engines::vllm_0_33::stages::VllmStage;
    for (doc, code, path, want) in [
        (
            json!({"nnodes": 2, "tensor_parallel_size": 8, "node_rank": 2}),
            Code::NodeRankOutOfRange,
            "node_rank",
            json!(1),
        ),
        (
            json!({"node_rank": -1}),
            Code::NodeRankOutOfRange,
            "node_rank",
            json!(0),
        ),
        (
            json!({"nnodes": 2, "tensor_parallel_size": 16, "distributed_executor_backend": "ray"}),
            Code::MultiNodeBackendUnsupported,
            "distributed_executor_backend",
            json!("mp"),
        ),
        (
            json!({"data_parallel_size": 4, "data_parallel_rank": 1, "data_parallel_size_local": 2}),
            Code::ExternalLbLocalSizeInvalid,
            "data_parallel_size_local",
            json!(1),
        ),
        (
            json!({"data_parallel_size": 4, "data_parallel_rank": 4}),
            Code::InvalidValue,
            "data_parallel_rank",
            json!(3),
        ),
    ] {
        let a = args(doc.clone());
        let r = report(&a);
        let d = r
            .errors
            .iter()
            .find(|e| e.path.to_string() == path)
            .unwrap_or_else(|| panic!("{doc}: {:?}", r.errors));
        assert_eq!((d.code, d.stage), (code, VllmStage::Config.into()), "{doc}");
        assert_eq!(fixed(&a, &[d]).to_json()[path], want, "{doc}");
        let after = fixes_pass_alone_and_together(&a);
        assert!(after.errors.is_empty(), "{doc}: {:?}", after.errors);
    }
    // All at once: node rank, Ray and the layout, each fixed with the others.
    let a = args(
        json!({"nnodes": 2, "node_rank": 5, "tensor_parallel_size": 8, "data_parallel_size": 3, "distributed_executor_backend": "ray"}),
    );
    let after = fixes_pass_alone_and_together(&a);
    assert!(after.errors.is_empty(), "{:?}", after.errors);
    // Ray on one node, a rank in range: valid.
    for doc in [
        json!({"distributed_executor_backend": "ray", "tensor_parallel_size": 8}),
        json!({"nnodes": 2, "node_rank": 1, "tensor_parallel_size": 16}),
        json!({"data_parallel_size": 4, "data_parallel_rank": 3}),
    ] {
        let r = report(&args(doc.clone()));
        assert!(r.valid, "{doc}: {:?}", r.errors);
    }
}
/// The `--kv-transfer-config` of examples/dsv32-decode-pd.sh with `pool`.
fn pd_with_pool(pool: Value) -> Value {
    let mut kv: Value = serde_json::from_str(PD_NO_POOL).unwrap();
    kv["kv_connector_extra_config"]["connectors"][1]["kv_connector_extra_config"] =
        json!({"host_pool_gib": pool});
    kv
}

fn on_node(gpu: &str, host_memory_gib: f64) -> PlanOptions {
    PlanOptions {
        gpu: Some(gpu.to_owned()),
        host_memory_gib: Some(host_memory_gib),
        ..PlanOptions::default()
    }
}

/// `doc` (serve args as JSON) with host_pool_gib `pool` at `path`.
fn with_pool(doc: &Value, path: &str, pool: f64) -> ServeArgs {
    let mut doc = doc.clone();
    let set = hisparse_core::FixOp::Set {
        path: hisparse_core::FieldPath::parse(path).unwrap(),
        value: json!(pool),
    };
    apply_fix(&mut doc, &[set]).unwrap();
    ServeArgs::from_json(doc).unwrap()
}

/// Trial: `--plan` suggested a host_pool_gib the node's RAM cannot hold
/// (207.86 GiB on a 160 GiB node; 367.16 GiB x 8 ranks on a 2048 GiB node),
/// and the check then refused the pasted figure. With the node's RAM given,
/// the suggestion at the planned context and in every sweep cell is capped
/// by what the node pins, holds fewer requests (the host binds), and passes.
#[test]
fn the_planned_pool_fits_the_nodes_ram() {
    let glm = model_dir("glm-5-fp8");
    let hs = json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}});
    let cases = [
        (
            json!({"model": model(), "tensor_parallel_size": 8, "kv_cache_dtype": "fp8_ds_mla", "kv_transfer_config": pd_with_pool(json!(128))}),
            "kv_transfer_config.kv_connector_extra_config.connectors[1].kv_connector_extra_config.host_pool_gib",
            160.0,
        ),
        (
            json!({"model": glm, "tensor_parallel_size": 16, "nnodes": 2, "kv_transfer_config": hs}),
            "kv_transfer_config.kv_connector_extra_config.host_pool_gib",
            2048.0,
        ),
    ];
    for (doc, path, ram) in cases {
        let options = on_node("h200", ram);
        let (_, p) = plan(&ServeArgs::from_json(doc.clone()).unwrap(), &options).unwrap();
        let p = p.unwrap();
        assert!(p.valid, "{:?}", p.errors);
        let at = &p.at_context;
        let (target, held) = (
            at.target_requests.unwrap(),
            at.min_host_pool_requests.unwrap(),
        );
        assert!(
            held < target,
            "{ram} GiB: the node's RAM caps the pool ({held} of {target})"
        );
        let usable = p.host.usable_host_memory_bytes.unwrap();
        for x in p.sweep.iter().chain([at]) {
            let gib = x.min_host_pool_gib.expect("a pool that fits");
            let r = check(&with_pool(&doc, path, gib), &options).unwrap();
            assert!(
                r.valid,
                "{ram} GiB: host_pool_gib {gib} at {}: {:?}",
                x.context_length, r.errors
            );
            // About the most the node pins: 0.05 GiB more does not fit.
            if x.min_host_pool_requests < x.target_requests {
                let r = check(&with_pool(&doc, path, gib + 0.05), &options).unwrap();
                assert!(
                    r.errors.iter().any(|e| e.code == Code::HostMemoryExceeded),
                    "{gib} + 0.05 GiB fits {usable} B"
                );
            }
        }
    }
}

/// Trial: a pool misplaced on the MultiConnector, larger than the node's RAM.
/// The fix moved the 2000 into place, and the fixed flags then failed
/// host_memory_exceeded; the move now lowers it to what the node pins, and
/// says so. A pool that fits is moved as given.
#[test]
fn a_misplaced_pool_moved_into_place_fits_the_node() {
    let multi = |pool: f64| {
        args(json!({
            "tensor_parallel_size": 8,
            "kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                "kv_connector_extra_config": {"host_pool_gib": pool, "connectors": [
                    {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                    {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}]}},
        }))
    };
    let options = PlanOptions {
        host_memory_gib: Some(1024.0),
        ..PlanOptions::default()
    };
    let a = multi(2000.0);
    let r = check(&a, &options).unwrap();
    let codes: Vec<_> = r.errors.iter().map(|e| e.code).collect();
    assert_eq!(codes, [Code::HostPoolGibMisplaced]);
    assert!(
        r.errors[0].hint.as_deref().unwrap().contains("as 972.79"),
        "{:?}",
        r.errors[0].hint
    );
    assert!(r
        .fixed_flags
        .as_deref()
        .unwrap()
        .contains(r#""host_pool_gib": 972.79"#));
    let after = fixes_pass_on(&a, &options);
    assert_eq!(
        after.vllm_hisparse().cloned().unwrap().host_pool_gib.value,
        972.79
    );
    // A pool that fits keeps the user's value.
    let after = fixes_pass_on(&multi(500.0), &options);
    assert_eq!(
        after.vllm_hisparse().cloned().unwrap().host_pool_gib.value,
        500.0
    );
}

/// The same with other errors in the launch (GLM-5, a misplaced pool too
/// large for the node, a block size, a misspelled flag value): every fix
/// alone and all of them together pass the node's check.
#[test]
fn a_misplaced_pool_too_large_with_other_errors_fits_the_node() {
    let glm = model_dir("glm-5-fp8");
    let a = ServeArgs::from_json(json!({
        "model": glm,
        "tensor_parallel_size": 8,
        "block_size": 16,
        "attention_config": {"hisparse_config": {"host_pool_gib": 3000}},
        "compilation_config": {"cudagraph_mod": "FULL"},
        "kv_transfer_config": serde_json::from_str::<Value>(PD_NO_POOL).unwrap(),
    }))
    .unwrap();
    let options = on_node("h200", 2048.0);
    let r = check(&a, &options).unwrap();
    assert!(r.errors.len() >= 2, "{:?}", r.errors);
    let after = fixes_pass_on(&a, &options);
    assert!(after.vllm_hisparse().cloned().unwrap().host_pool_gib.value < 3000.0);
}

/// Trial: `kv_conector_extra_config: {host_pool_gb: 64}` (both keys
/// misspelled). The fixes together set a one-request pool beside the stale
/// host_pool_gb, dropping the 64; the unknown_key fix alone kept it. Now
/// both keys are renamed, alone and together, and nothing is left behind.
#[test]
fn a_misspelled_pool_in_a_misspelled_extra_config_keeps_the_users_value() {
    let a = args(json!({
        "tensor_parallel_size": 8,
        "kv_transfer_config": {"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
            "kv_conector_extra_config": {"host_pool_gb": 64}},
    }));
    let r = report(&a);
    let codes: Vec<_> = r.errors.iter().map(|e| e.code).collect();
    assert_eq!(codes, [Code::UnknownKey], "{:?}", r.errors);
    // Its fix says it renames the inner key too.
    let hint = r.errors[0].hint.as_deref().unwrap();
    assert!(
        hint.contains(
            "then move your 64 to kv_transfer_config.kv_connector_extra_config.host_pool_gib"
        ),
        "{hint}"
    );
    let after = fixes_pass_alone_and_together(&a);
    assert_eq!(
        after.vllm_hisparse().cloned().unwrap().host_pool_gib.value,
        64.0
    );
    let all: Vec<_> = r.errors.iter().collect();
    let doc = fixed(&a, &all).to_json();
    assert_eq!(
        doc["kv_transfer_config"]["kv_connector_extra_config"],
        json!({"host_pool_gib": 64})
    );
    assert!(doc["kv_transfer_config"]
        .get("kv_conector_extra_config")
        .is_none());
}
