//! Issue 25: `hisparse-check deploy` on the four examples in examples/deploy
//! (vLLM and SGLang, a valid 1P+1D DeepSeek-V3.2 deployment on 8x H200 and one
//! with the mismatches users hit): the exit codes, and the codes between
//! launches pinned, each on the prefill side with its stage and a fix.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

mod common;
use common::{text, BIN};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deploy(example: &str, extra: &[&str]) -> (i32, String, String) {
    let r = root();
    let models = format!("/models={}", r.join("tests/data/models").display());
    let out = Command::new(BIN)
        .arg("deploy")
        .arg(r.join("examples/deploy").join(example))
        .args(["--model-dir", &models])
        .args(extra)
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

fn codes(json: &str) -> Vec<(String, String, String)> {
    let v: Value = serde_json::from_str(json).expect("JSON");
    v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["code"].as_str().unwrap().to_owned(),
                e["stage"].as_str().unwrap().to_owned(),
                e["launch"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_valid_examples_are_valid() {
    for example in ["vllm-1p1d.yaml", "sglang-1p1d.yaml"] {
        let (code, out, err) = deploy(example, &["--json"]);
        assert_eq!(code, 0, "{example}: {out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["valid"], true);
        assert_eq!(v["launches"].as_array().unwrap().len(), 2);
        let roles: Vec<&str> = v["launches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["prefill", "decode"], "{example}");
        assert_eq!(
            v["launches"][1]["report"]["hisparse_enabled"], true,
            "{example}"
        );
        assert_eq!(v["launches"][0]["machine"]["gpu"], "h200");
    }
}

#[test]
fn the_mismatched_vllm_example() {
    let (code, out, err) = deploy("vllm-1p1d-mismatched.yaml", &["--json"]);
    assert_eq!(code, 1, "{out}{err}");
    let p = "Deployment/dsv32-prefill/vllm".to_owned();
    let want: Vec<(String, String, String)> = [
        "pd_kv_role_unpaired",
        "pd_kv_cache_dtype_mismatch",
        "pd_hybrid_kv_cache_manager_mismatch",
    ]
    .iter()
    .map(|c| ((*c).to_owned(), "handshake".to_owned(), p.clone()))
    .collect();
    assert_eq!(codes(&out), want);
    let (_, human, _) = deploy("vllm-1p1d-mismatched.yaml", &[]);
    assert!(
        human.contains("fix: on Deployment/dsv32-prefill/vllm: --kv-cache-dtype fp8_ds_mla"),
        "{human}"
    );
    assert!(
        human.contains("--no-disable-hybrid-kv-cache-manager"),
        "{human}"
    );
    assert!(human.contains("metadata.py:146-216"), "{human}");
    // --block-size 128 against 64 is no mismatch: both workers transfer DSA
    // blocks at the indexer's kernel block size, 64.
    assert!(!out.contains("pd_block_size_mismatch"));
}

#[test]
fn the_mismatched_sglang_example() {
    let (code, out, err) = deploy("sglang-1p1d-mismatched.yaml", &["--json"]);
    assert_eq!(code, 1, "{out}{err}");
    let p = "StatefulSet/dsv32-prefill/sglang".to_owned();
    let want: Vec<(String, String, String)> = [
        "pd_kv_role_unpaired",
        "pd_transfer_backend_mismatch",
        "pd_kv_cache_dtype_mismatch",
    ]
    .iter()
    .map(|c| ((*c).to_owned(), "first_request".to_owned(), p.clone()))
    .collect();
    assert_eq!(codes(&out), want);
    // The --page-size values differ, and both sides resolve DeepSeek-V3.2's to 64.
    assert!(!out.contains("pd_page_size_mismatch"));
    // Attention TP 1 (DP attention) against 8: each decode rank reads prefill rank 0.
    assert!(!out.contains("pd_attention_tp_mismatch"));
}

#[test]
fn usage_errors() {
    let (code, _, err) = deploy("vllm-1p1d.yaml", &["--model-dir", "nonsense"]);
    assert_eq!(code, 2);
    assert!(err.contains("CONTAINER_PATH=LOCAL_PATH"), "{err}");
    let out = Command::new(BIN)
        .args(["deploy", "/nonexistent.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = Command::new(BIN).arg("deploy").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let dir = std::env::temp_dir().join(format!("hisparse-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svc = dir.join("svc.yaml");
    std::fs::write(&svc, "kind: Service\nmetadata: {name: s}\n").unwrap();
    let out = Command::new(BIN).arg("deploy").arg(&svc).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no vllm serve / sglang serve launch"),
        "{}",
        text(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("kind Service is not read"),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
