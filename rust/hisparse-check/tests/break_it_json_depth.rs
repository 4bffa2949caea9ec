//! Break-it regression: JSON flags nest as deep as vLLM 0.33 reads them.
//! serde_json's own limit (128 levels) refused an `--hf-overrides` of 200
//! levels, which Python's json.loads reads, with the fix "keys and strings
//! need double quotes". Now: `json.loads` flags to 900 levels, pydantic
//! (jiter) flags to 200, as printed by pydantic-core 2.50 in vLLM's venv.

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
fn hf_overrides_nest_as_deep_as_json_loads_reads() {
    let kv = kv("1");
    let deep = format!(r#"{{"a": {}}}"#, nest(899));
    let (code, out) = check(&["--kv-transfer-config", &kv, "--hf-overrides", &deep]);
    assert_eq!(code, Some(0), "{out}");

    let deeper = format!(r#"{{"a": {}}}"#, nest(900));
    let (code, out) = check(&["--kv-transfer-config", &kv, "--hf-overrides", &deeper]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("nested more than 900 levels deep"), "{out}");
    assert!(out.contains("nest the JSON less deeply"), "{out}");
    assert!(!out.contains("double quotes"), "{out}");
}

#[test]
fn dataclass_flags_nest_as_deep_as_pydantic_reads() {
    // Two objects around the list: 2 + 198 = 200 levels, pydantic's limit.
    let (code, out) = check(&["--kv-transfer-config", &kv(&nest(198))]);
    assert!(!out.contains("invalid_json"), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = check(&["--kv-transfer-config", &kv(&nest(199))]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("nested more than 200 levels deep"), "{out}");
}

#[test]
fn a_hundred_thousand_open_brackets_is_an_error_not_a_crash() {
    let (code, out) = check(&["--hf-overrides", &"[".repeat(100_000)]);
    assert_eq!(code, Some(1), "{out}");
    assert!(!out.contains("panicked"), "{out}");
}
