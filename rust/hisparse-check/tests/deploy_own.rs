//! Issue 25 (h25b): `hisparse-check deploy` on the deployment files in
//! examples/deploy (`kind: HisparseDeployment`) and on `--launch`: exit
//! codes, the per-node RAM rule on the shared-node example, `--plan`, and the
//! usage errors of `--role` / `--node` and bad fields (exit 2, no panic).

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

mod common;
use common::{text, BIN};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let models = format!("/models={}", root().join("tests/data/models").display());
    let out = Command::new(BIN)
        .current_dir(root())
        .arg("deploy")
        .args(args)
        .args(["--model-dir", &models])
        .output()
        .expect("runs");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        text(&out)
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_deployment_file_example_and_its_plan() {
    let (code, out, err) = run(&["examples/deploy/vllm-1p1d-file.yaml", "--plan"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Plan of the deployment"), "{out}");
    assert!(
        out.contains("decode (vLLM, 160K tokens, 1 DP replica): without HiSparse "),
        "{out}"
    );
    assert!(
        out.contains("node-d: pinned 128.00 GiB of 1710.00 GiB usable"),
        "{out}"
    );
    // Without --plan, no plan in the text; the JSON always has it.
    let (_, out, _) = run(&["examples/deploy/vllm-1p1d-file.yaml"]);
    assert!(!out.contains("Plan of the deployment"), "{out}");
    let (_, out, _) = run(&["examples/deploy/vllm-1p1d-file.yaml", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["plan"]["instances"][0]["launch"], "decode");
    assert_eq!(v["plan"]["nodes"].as_array().unwrap().len(), 2);
}

#[test]
fn the_shared_node_example() {
    let (code, out, err) = run(&["examples/deploy/vllm-shared-node-file.yaml", "--json"]);
    assert_eq!(code, 1, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let errors = v["errors"].as_array().unwrap();
    let got: Vec<(&str, &str)> = errors
        .iter()
        .map(|e| (e["code"].as_str().unwrap(), e["launch"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("node_host_memory_exceeded", "decode-a"),
            ("node_host_memory_exceeded", "decode-b")
        ]
    );
    for e in errors {
        assert_eq!(e["stage"], "workers");
        assert!(e["source"].as_str().unwrap().contains("runtime.py:195-203"));
        assert_eq!(e["fix_flags"][0]["set"], "--kv-transfer-config");
        assert!(e["path"]
            .as_str()
            .unwrap()
            .ends_with("connectors[1].kv_connector_extra_config.host_pool_gib"));
    }
    assert!(v["launches"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["report"]["valid"] == true));
}

#[test]
fn launches_on_the_command_line() {
    let prefill = r#"vllm serve /models/deepseek-v3.2 -tp 8 --kv-cache-dtype fp8_ds_mla --no-disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'"#;
    // A decode copied from the prefill, declared decode: its role is fixed.
    #[rustfmt::skip]
    let (code, out, err) = run(&[
        "--gpu", "h200", "--gpus-per-node", "8", "--host-memory-gib", "1800",
        "--launch", prefill, "--role", "prefill", "--node", "p",
        "--launch", prefill, "--role", "decode", "--node", "d",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("error[launch_role_mismatch] at handshake: launch-2"),
        "{out}"
    );
    // The pair is the one declared: no second error for the two producers.
    assert!(out.contains("Between launches: 1 error(s)"), "{out}");
    assert!(out.contains(r#"fix: on launch-2: --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'"#), "{out}");
    let (code, _, err) = run(&["--node", "d", "--launch", prefill]);
    assert_eq!(code, 2);
    assert!(err.contains("before any --launch"), "{err}");
    let (code, _, err) = run(&["--launch", prefill, "--role", "decoder"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("error[invalid_value] at launch[0].role"),
        "{err}"
    );
    let (code, _, err) = run(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("nothing to check"), "{err}");
}

/// A vLLM instance whose tensor parallel world spans two nodes (`-tp 16
/// --nnodes 2`, no data parallelism) uses 8 GPUs on each: vLLM's mp
/// executor spreads the world over the nodes (config/parallel.py:1064-1076).
/// Before, deploy counted 16 GPUs on each 8-GPU node (new-user trial).
#[test]
fn tensor_parallel_over_two_nodes_uses_half_the_gpus_of_each() {
    let kv = r#"{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_consumer"},{"kv_connector":"HiSparseConnector","kv_role":"kv_both","kv_connector_extra_config":{"host_pool_gib":128}}]}}"#;
    let launch = |rank: u32| {
        format!(
            "vllm serve /models/deepseek-v3.2 --tensor-parallel-size 16 --nnodes 2 --node-rank {rank}{} --kv-cache-dtype fp8_ds_mla --kv-transfer-config '{kv}'",
            if rank > 0 { " --headless" } else { "" }
        )
    };
    let (l0, l1) = (launch(0), launch(1));
    let args = [
        "--gpu",
        "h200",
        "--gpus-per-node",
        "8",
        "--host-memory-gib",
        "2048",
        "--launch",
        &l0,
        "--role",
        "decode",
        "--node",
        "n0",
        "--launch",
        &l1,
        "--role",
        "decode",
        "--node",
        "n1",
        "--json",
    ];
    let (code, out, err) = run(&args);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let codes: Vec<&str> = v["errors"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["code"].as_str()).collect())
        .unwrap_or_default();
    // The decode instance has no prefill here: that is the only error.
    assert_eq!(codes, ["pd_kv_role_unpaired"], "{out}");
    for node in v["plan"]["nodes"].as_array().unwrap() {
        assert_eq!(node["gpus_used"], 8, "{out}");
    }
    assert_eq!(code, 1, "{out}{err}");
}

/// A launch without `node` runs on a node of its own, which is never the
/// declared node of the same name (before, `solo` and node `solo` were one
/// node of 16 GPUs: a false node_gpus_exceeded, break-it trial).
#[test]
fn a_launch_s_own_node_is_not_a_declared_node_of_its_name() {
    let dir = std::env::temp_dir().join(format!("hisparse-own-node-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("collide.yaml");
    std::fs::write(
        &file,
        "kind: HisparseDeployment\nnodes:\n  solo: {gpu: h200, gpus_per_node: 8, ram_gib: 100}\nlaunches:\n- name: a\n  node: solo\n  command: vllm serve /models/deepseek-v3.2 -tp 8\n- name: solo\n  machine: {gpu: h200, gpus_per_node: 8, ram_gib: 100}\n  command: vllm serve /models/deepseek-v3.2 -tp 8\n",
    )
    .unwrap();
    let (code, out, err) = run(&[file.to_str().unwrap(), "--json"]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let nodes = v["plan"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{out}");
    assert!(nodes.iter().all(|n| n["gpus_used"] == 8), "{out}");
}
