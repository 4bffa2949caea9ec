//! Fixes as a new user read them in the new-user trial of main: the
//! fix text says what its figures assume, and each fix passes alone and
//! with the other fixes of its report.

use hisparse_core::diagnostic::apply_fix;
use hisparse_core::{resolve, Code, Report, ServeArgs};
use serde_json::{json, Value};
use std::path::PathBuf;

fn model() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/models/deepseek-v3.2")
        .display()
        .to_string()
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
    assert_eq!(after.hisparse.unwrap().block_size.value, 64);
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
        let after = fixes_pass_alone_and_together(&a);
        let h = after.hisparse.expect("HiSparse on after the fix");
        assert_eq!(h.host_pool_gib.value, 256.0, "{name}");
        assert_eq!(
            h.connector,
            "kv_transfer_config.kv_connector_extra_config.connectors[1]"
        );
    }
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
        let after = fixes_pass_alone_and_together(&a);
        let h = after.hisparse.expect("HiSparse on after the fixes");
        assert_eq!(h.host_pool_gib.value, 256.0, "{key}");
        assert_eq!(
            h.connector,
            "kv_transfer_config.kv_connector_extra_config.connectors[1]"
        );
    }
}

/// Trial finding 7: `--hf-config-path` was listed as ignored, so the check
/// read another config than vLLM, which reads `hf_config_path or model`
/// (vllm/config/model.py:680).
#[test]
fn the_config_is_read_from_hf_config_path_first() {
    let llama = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/models/llama-3.1-8b")
        .display()
        .to_string();
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
        json!({"data_parallel_size": 2, "data_parallel_size_local": 2, "nnodes": 2}),
    ] {
        let r = report(&args(doc.clone()));
        assert!(r.valid, "{doc}: {:?}", r.errors);
    }
}
