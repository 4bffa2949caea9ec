//! Break-it regression: a max_position_embeddings that is given but is not a
//! positive number of tokens (`--hf-overrides '{"max_position_embeddings":
//! NaN}'`, `"abc"`, 0, true, 4096.5) was reported as "gives no
//! max_position_embeddings", hiding the value; an integral float (4096.0),
//! which vLLM compares and uses as 4096, was refused the same way.

use std::path::PathBuf;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_hisparse-check");

fn check(overrides: &str) -> (Option<i32>, String) {
    let model =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/models/deepseek-v3.2");
    let kv = r#"{"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}}"#;
    let o = Command::new(BIN)
        .arg(model)
        .args(["--kv-transfer-config", kv, "--hf-overrides", overrides])
        .env_remove("VLLM_USE_V2_MODEL_RUNNER")
        .stdin(Stdio::null())
        .output()
        .expect("run hisparse-check");
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), out)
}

#[test]
fn a_bad_max_position_embeddings_is_named_with_its_value() {
    for (value, given) in [
        ("NaN", "\"nan\""),
        ("\"abc\"", "\"abc\""),
        ("0", "0"),
        ("true", "true"),
        ("4096.5", "4096.5"),
        ("[1]", "[1]"),
    ] {
        let (code, out) = check(&format!(r#"{{"max_position_embeddings": {value}}}"#));
        assert_eq!(code, Some(1), "{value}: {out}");
        assert!(
            out.contains("error[max_model_len_unknown]"),
            "{value}: {out}"
        );
        assert!(
            out.contains("max_position_embeddings (hf_overrides.max_position_embeddings) is not a positive number of tokens"),
            "{value}: {out}"
        );
        assert!(out.contains(&format!("given:   {given}")), "{value}: {out}");
        assert!(
            !out.contains("gives no max_position_embeddings"),
            "{value}: {out}"
        );
    }
}

#[test]
fn an_integral_float_max_position_embeddings_is_read() {
    let (code, out) = check(r#"{"max_position_embeddings": 4096.0}"#);
    assert_eq!(code, Some(0), "{out}");
}

/// Null counts as absent, and a config.json without a length key is vLLM
/// 0.33's 2048 tokens (config/model.py:2589-2595; issue 22), not an error.
#[test]
fn a_null_max_position_embeddings_is_absent_and_vllms_2048() {
    let (code, out) = check(r#"{"max_position_embeddings": null}"#);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("max_model_len          2048 tokens"), "{out}");
    assert!(out.contains("config/model.py:2589-2595"), "{out}");
}
