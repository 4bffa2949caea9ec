//! `hisparse-check --plan --engine-log FILE`: the log's usage errors (exit 2,
//! one line, no backtrace) and the plan's engine-log section.

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_hisparse-check");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn run(extra: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let model = format!("{ROOT}/tests/data/models/deepseek-v3.2");
    let mut cmd = Command::new(BIN);
    cmd.arg(&model)
        .args(["--tensor-parallel-size", "8", "--kv-cache-dtype", "fp8_ds_mla"])
        .args(["--host-memory-gib", "2048", "--gpu", "h200"])
        .args(["--kv-transfer-config", r#"{"kv_connector":"HiSparseConnector","kv_role":"kv_both","kv_connector_extra_config":{"host_pool_gib":128}}"#])
        .args(extra)
        .env("RUST_BACKTRACE", "0")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn hisparse-check");
    if let Some(text) = stdin {
        use std::io::Write;
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !e.contains("panicked") && !e.contains("RUST_BACKTRACE"),
        "{e}"
    );
    (out.status.code().unwrap_or(-1), o, e)
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    let (code, _, err) = run(&["--engine-log", "x.log"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--plan"), "{err}");
    let (code, _, err) = run(&["--plan", "--engine-log", "/nonexistent/x.log"], None);
    assert_eq!(code, 2);
    assert!(
        err.contains("--engine-log /nonexistent/x.log: cannot open it"),
        "{err}"
    );
    let (code, _, err) = run(&["--plan", "--engine-log", ROOT], None);
    assert_eq!(code, 2);
    assert!(err.contains("is a directory"), "{err}");
    let sglang = "[2026-01-01 10:00:00 TP0] Load weight end. elapsed=1.00 s, type=X, avail mem=60.10 GB, mem usage=78.20 GB.\n";
    let (code, _, err) = run(&["--plan", "--engine-log", "-"], Some(sglang));
    assert_eq!(code, 2);
    assert!(err.contains("SGLang's start-up lines instead"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn an_older_logs_capacity_is_compared_at_its_own_length() {
    let log = format!("{ROOT}/tests/data/engine_logs/vllm-issue-15928-excerpt.log");
    let (code, out, err) = run(&["--plan", "--engine-log", &log], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("engine log "), "{out}");
    assert!(out.contains("a launch without HiSparse"), "{out}");
    assert!(out.contains("nothing the plan uses"), "{out}");
    assert!(out.contains("the log's max_model_len is 32768"), "{out}");
    let (_, json, _) = run(&["--plan", "--engine-log", &log, "--json"], None);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["engine_log"]["lines"], 6);
    assert_eq!(v["engine_log"]["compared"][0]["logged"], 3.29);
}
