//! Break-it regressions: vLLM's `type=int` / `type=float` flags read as
//! Python's `int()` / `float()` read them, and `--max-model-len` as
//! `human_readable_int_or_auto` (`value.strip()`, then `\d` of any script).
//! Each accepted form below is one `vllm serve` 0.33.0 accepts.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

mod common;
use common::{text, BIN};

fn check(args: &[&str]) -> Output {
    let model =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/models/deepseek-v3.2");
    let kv = r#"{"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}}"#;
    Command::new(BIN)
        .arg(model)
        .args(["--kv-transfer-config", kv])
        .args(args)
        .env_remove("VLLM_USE_V2_MODEL_RUNNER")
        .stdin(Stdio::null())
        .output()
        .expect("run hisparse-check")
}

#[test]
fn int_flags_take_what_python_int_takes() {
    for args in [
        &["-tp", " 8"][..],
        &["-tp", "+8"],
        &["-tp", "0_8"],
        &["-tp", "\u{668}"],
        &["--block-size", " +6_4 "],
        &["--block-size=\u{666}\u{664}"],
        &["--max-num-seqs", "1_0"],
        &["-pp", "\u{a0}1"],
        &["--gpu-memory-utilization", " 0.9 "],
        &["--gpu-memory-utilization", "0.9_0"],
        &["--max-model-len", "\u{1c}4096"],
        &["--max-model-len", "\u{663}k"],
    ] {
        let o = check(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    }
}

#[test]
fn int_flags_refuse_what_python_int_refuses() {
    for args in [
        &["-tp", "8x"][..],
        &["-tp", "\u{1c}8"],
        &["-tp", "1__0"],
        &["-tp", "8.0"],
        &["--block-size", "\u{b2}"],
        &["--gpu-memory-utilization", "0__9"],
        &["--gpu-memory-utilization", "0.9_"],
    ] {
        let o = check(args);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}");
        assert!(out.contains("refuses it too"), "{args:?}: {out}");
        assert!(!out.contains("panicked"), "{out}");
    }
}
