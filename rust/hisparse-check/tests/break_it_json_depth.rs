//! Break-it regression: a JSON flag nested past the 128 levels the check
//! reads (limits::MAX_JSON_DEPTH) got serde_json's "recursion limit exceeded"
//! (at 127 levels) with the fix "keys and strings need double quotes", which
//! cannot pass. Now 128 levels are read, and deeper is its own message, with
//! how deep vLLM reads the flag and the fix "nest the JSON less deeply".

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_hisparse-check");

fn check(args: &[&str]) -> (Option<i32>, String) {
    let model =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/models/deepseek-v3.2");
    let o: Output = Command::new(BIN)
        .arg(model)
        .args(args)
        .stdin(Stdio::null())
        .env_remove("VLLM_USE_V2_MODEL_RUNNER")
        .output()
        .expect("run hisparse-check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

fn kv(x: &str) -> String {
    format!(
        r#"{{"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {{"host_pool_gib": 64, "x": {x}}}}}"#
    )
}

fn nest(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn json_flags_nest_128_levels_and_deeper_is_its_own_error() {
    let kv = kv("1");
    // {"a": ...} is one level.
    let deep = format!(r#"{{"a": {}}}"#, nest(127));
    let (code, out) = check(&["--kv-transfer-config", &kv, "--hf-overrides", &deep]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = check(&["--kv-transfer-config", &super_kv(126)]);
    assert_eq!(code, Some(0), "{out}");

    let deeper = format!(r#"{{"a": {}}}"#, nest(128));
    let (code, out) = check(&["--kv-transfer-config", &kv, "--hf-overrides", &deeper]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("nested more than 128 levels deep"), "{out}");
    assert!(out.contains("vLLM reads about 990 levels"), "{out}");
    assert!(out.contains("nest the JSON less deeply"), "{out}");
    assert!(!out.contains("double quotes"), "{out}");
    let (code, out) = check(&["--kv-transfer-config", &super_kv(127)]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("vLLM reads 200 levels"), "{out}");
}

/// A kv_transfer_config whose extra config holds a list `depth` deep (two objects around it).
fn super_kv(depth: usize) -> String {
    kv(&nest(depth))
}

#[test]
fn a_hundred_thousand_open_brackets_is_an_error_not_a_crash() {
    let (code, out) = check(&["--hf-overrides", &"[".repeat(100_000)]);
    assert_eq!(code, Some(1), "{out}");
    assert!(!out.contains("panicked"), "{out}");
}
