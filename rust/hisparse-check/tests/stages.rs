//! Issue 17: every diagnostic says when vLLM 0.33.0 would have refused it
//! (`stage`, in `--json` schema 2 and in the text), and the launch flags the
//! engine-start rules read (`--node-rank`/`-r`, `--headless`,
//! `--data-parallel-rank`/`-dpn`).

use std::process::Command;

mod common;
use common::{model, BIN};

const HS_200: &str = r#"{"kv_connector":"HiSparseConnector","kv_role":"kv_both","kv_connector_extra_config":{"host_pool_gib":200}}"#;

fn run(extra: &[&str]) -> (i32, String) {
    let model = model();
    let mut args = vec![model.as_str()];
    args.extend_from_slice(extra);
    let out = Command::new(BIN).args(&args).output().expect("runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn json(extra: &[&str]) -> serde_json::Value {
    let mut args = extra.to_vec();
    args.push("--json");
    let (_, text) = run(&args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn json_schema_2_carries_each_diagnostics_stage() {
    let report = json(&["-tp", "8", "-dp", "3", "--nnodes", "2"]);
    assert_eq!(report["schema_version"], 2);
    let e = &report["errors"][0];
    assert_eq!(e["code"], "data_parallel_layout_invalid");
    assert_eq!(e["stage"], "engine_start");
    assert_eq!(e["fix"][0]["value"], 3);
    // Warnings carry it too (vLLM takes a producer-only role as it is).
    let report = json(&[
        "--kv-transfer-config",
        r#"{"kv_connector":"HiSparseConnector","kv_role":"kv_producer","kv_connector_extra_config":{"host_pool_gib":64}}"#,
    ]);
    let w = report["warnings"].as_array().unwrap();
    assert!(
        w.iter()
            .any(|w| w["code"] == "kv_producer_role" && w["stage"] == "never"),
        "{w:?}"
    );
}

#[test]
fn the_text_says_when_vllm_would_have_refused() {
    let (code, text) = run(&["--block-size", "32", "--kv-transfer-config", HS_200]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "stage:   model_load: vLLM 0.33.0 refuses this while its workers load the model"
        ),
        "{text}"
    );
    assert!(
        text.contains("Without this check: vLLM 0.33.0 would refuse this configuration while its workers load the model"),
        "{text}"
    );
    // Two errors: vLLM stops at the earlier one (config, before the model loads).
    let (_, text) = run(&[
        "--block-size",
        "32",
        "-pp",
        "2",
        "--kv-transfer-config",
        HS_200,
    ]);
    assert!(
        text.contains("would refuse this configuration while building its config"),
        "{text}"
    );
}

#[test]
fn node_rank_headless_and_data_parallel_rank_are_read_in_every_form() {
    let (code, text) = run(&["-tp", "16", "--nnodes", "2", "-r", "2"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("node_rank_out_of_range") && text.contains("--node-rank 1"),
        "{text}"
    );
    let (code, text) = run(&["-tp", "16", "--nnodes", "2", "--node_rank", "1"]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = run(&["--headless", "-dp", "2", "-dpl", "0"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("headless_without_local_replicas")
            && text.contains("--data-parallel-size-local 2"),
        "{text}"
    );
    let (code, text) = run(&["-dp", "4", "-dpn", "1", "-dpl", "2"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("external_lb_local_size_invalid"), "{text}");
    let (code, text) = run(&["-dp", "4", "--data-parallel-rank", "3"]);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("ignored"), "{text}");
}

#[test]
fn an_external_lb_rank_counts_its_own_replicas_pools() {
    // 16 replicas' pools of 200 GiB do not fit in 95 % of 2048 GiB; with
    // --data-parallel-rank this process runs one replica: one pool.
    let base = [
        "-dp",
        "16",
        "-ep",
        "--kv-transfer-config",
        HS_200,
        "--host-memory-gib",
        "2048",
    ];
    let (code, text) = run(&base);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("host_memory_exceeded"), "{text}");
    let mut external = base.to_vec();
    external.extend_from_slice(&["--data-parallel-rank", "5"]);
    let (code, text) = run(&external);
    assert_eq!(code, 0, "{text}");
}
