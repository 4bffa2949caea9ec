//! `--data-parallel-size-local` (new-user trial): vLLM's multi-node DP launch
//! runs `-dp 16 --data-parallel-size-local 8` on each node, without
//! `--nnodes`, so each node pins the pools of its 8 replicas, not of all 16
//! (vLLM 0.33 `EngineArgs.create_engine_config`, vllm/engine/arg_utils.py:2486).

use std::process::Command;

mod common;
use common::{model, BIN};

/// The trial's command line, with `host_pool_gib` and extra flags.
fn trial(host_pool_gib: u32, extra: &[&str]) -> (i32, String) {
    let kv = format!(
        r#"{{"kv_connector":"HiSparseConnector","kv_role":"kv_both","kv_connector_extra_config":{{"host_pool_gib":{host_pool_gib}}}}}"#
    );
    let model = model();
    let mut args = vec![
        model.as_str(),
        "-dp",
        "16",
        "--data-parallel-size-local",
        "8",
        "--data-parallel-address",
        "10.0.0.1",
        "-ep",
        "--kv-cache-dtype",
        "fp8_ds_mla",
        "--kv-transfer-config",
        &kv,
        "--gpu",
        "h200",
        "--host-memory-gib",
        "2048",
    ];
    args.extend_from_slice(extra);
    let out = Command::new(BIN).args(&args).output().expect("runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_node_pins_the_pools_of_its_own_replicas() {
    // 8 pools of 200 GiB = 1600 GiB fit in 95 % of 2048 GiB; 16 would not.
    let (code, text) = trial(200, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("host_memory_exceeded"), "{text}");
    assert!(!text.contains("data-parallel-size-local 8"), "{text}");
    // --data-parallel-address is still not read.
    assert!(
        text.contains("ignored") && text.contains("--data-parallel-address 10.0.0.1"),
        "{text}"
    );
}

#[test]
fn too_many_pools_for_the_node_are_counted_per_node() {
    // 8 x 300 GiB = 2400 GiB > 0.95 x 2048: still refused, for 8 pools.
    let (code, text) = trial(300, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("error[host_memory_exceeded]")
            && text.contains("across 8 pools")
            && !text.contains("16 pools"),
        "{text}"
    );
}

#[test]
fn the_plan_counts_this_nodes_replicas() {
    // The second node of the launch: --headless --data-parallel-start-rank 8.
    for extra in [
        &[][..],
        &["--headless", "--data-parallel-start-rank", "8"][..],
    ] {
        let mut flags = vec!["--plan"];
        flags.extend_from_slice(extra);
        let (code, text) = trial(200, &flags);
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("plan fits"), "{text}");
        assert!(text.contains("= 8 pools x"), "{text}");
        assert!(
            text.contains("8 DP replicas on this node (--data-parallel-size-local 8)"),
            "{text}"
        );
    }
}

#[test]
fn more_local_replicas_than_the_deployment_is_refused_with_a_fix() {
    let model = model();
    let out = Command::new(BIN)
        .args([model.as_str(), "-dp", "4", "-dpl", "8", "--json"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = &report["errors"][0];
    assert_eq!(e["code"], "invalid_value");
    assert_eq!(e["path"], "data_parallel_size_local");
    assert_eq!(report["fixed_flags"], "--data-parallel-size-local 4");
}
