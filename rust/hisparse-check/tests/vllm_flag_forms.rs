//! Every `vllm serve` flag form reaches the check as vLLM 0.33 reads it
//! (issue 17, item 5): nargs lists on the command line and in `--config`,
//! store_true and BooleanOptionalAction flags, choices, abbreviations; JSON
//! flags as `json.loads` and pydantic read them (`NaN`, `Infinity`, `1e400`,
//! `80g`); `VLLM_USE_V2_MODEL_RUNNER` as Python's `int()` reads it; and a
//! result that cannot be written is exit 2.

use std::process::{Command, Output, Stdio};

mod common;
use common::{model, text, BIN};

fn kv(extra: &str) -> String {
    format!(
        r#"{{"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {{"host_pool_gib": 64{extra}}}}}"#
    )
}

fn check(args: &[&str], v2: Option<&str>) -> Output {
    let model = model();
    let mut cmd = Command::new(BIN);
    cmd.arg(&model)
        .args(args)
        .env_remove("VLLM_USE_V2_MODEL_RUNNER")
        .stdin(Stdio::null());
    if let Some(v) = v2 {
        cmd.env("VLLM_USE_V2_MODEL_RUNNER", v);
    }
    cmd.output().expect("run hisparse-check")
}

#[test]
fn list_valued_flags_take_every_value() {
    let kv = kv("");
    for extra in [
        &["--served-model-name", "a", "b"][..],
        &["--served-model-name", "a", "b", "--port", "8000"],
        &["--api-key", "k1", "k2", "-tp", "8"],
        &["--cudagraph-capture-sizes", "1", "2", "4"],
        &[
            "--headless",
            "--disable-log-stats",
            "--no-enable-prefix-caching",
        ],
        &["--disable-prefix-caching", "--dtype", "bfloat16", "-O3"],
        &["--max-model", "4096", "--served-model", "x"],
    ] {
        let o = check(
            &[&["--kv-transfer-config", kv.as_str()][..], extra].concat(),
            None,
        );
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("hisparse-check does not read"),
            "{extra:?}: {out}"
        );
    }
    // The abbreviation reaches the check: 4096 tokens, not the model's default.
    let o = check(
        &["--kv-transfer-config", &kv, "--max-model", "4096", "--json"],
        None,
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report.to_string().contains("4096"), "{report}");
}

#[test]
fn forms_vllm_refuses_are_usage_errors() {
    let kv = kv("");
    for (extra, want) in [
        (
            &["--served-model-name"][..],
            "expected at least one argument",
        ),
        (&["--dtype", "float7"], "invalid choice"),
        (&["--headless=1"], "ignored explicit argument"),
        (&["--no-headless"], "unrecognized flag --no-headless"),
        (&["--max"], "ambiguous option"),
        // Issue 22: argparse's type= on flags the check does not read.
        (
            &["--port", "abc"],
            "argument --port: invalid int value: 'abc'",
        ),
        (&["--seed=1.5"], "argument --seed: invalid int value: '1.5'"),
        (
            &["--max-num-batched-tokens", "1.5K"],
            "Decimals are not allowed",
        ),
    ] {
        let o = check(
            &[&["--kv-transfer-config", kv.as_str()][..], extra].concat(),
            None,
        );
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(err.starts_with("hisparse-check: error: "), "{err}");
    }
}

/// Issue 22: a value Python's argparse reads for a flag the check reads
/// passes: `1_0` and `-1` for an int (`--node-rank` took Rust's parse), `None`
/// for an `optional_type` flag (its default: no host pool limit here).
#[test]
fn values_vllms_types_read_pass_for_flags_the_check_reads() {
    let kv = kv("");
    for extra in [
        &["--node-rank", "0_0"][..],
        &[
            "--data-parallel-rank=0_0",
            "--data-parallel-size",
            "2",
            "--data-parallel-external-lb",
        ],
        &["--kv-cache-memory-bytes", "None"],
        &["--speculative-config", "{}", "--speculative-config="],
    ] {
        let o = check(
            &[&["--kv-transfer-config", kv.as_str()][..], extra].concat(),
            None,
        );
        assert_ne!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
    }
    // --kv-transfer-config None is no connector (vLLM's optional_type): HiSparse is
    // then off, which the check says, instead of "not valid JSON".
    let o = check(
        &["--kv-transfer-config", &kv, "--kv-transfer-config", "None"],
        None,
    );
    assert!(!text(&o).contains("not valid JSON"), "{}", text(&o));
}

#[test]
fn yaml_lists_fill_list_valued_flags() {
    let dir = std::env::temp_dir().join(format!("hisparse-forms-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("serve.yaml");
    std::fs::write(
        &file,
        format!(
            "kv-transfer-config: '{}'\nheadless: true\nserved-model-name:\n  - a\n  - b\n",
            kv("")
        ),
    )
    .unwrap();
    let o = check(&["--config", file.to_str().unwrap()], None);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn json_reads_pythons_numbers() {
    // vLLM reads these (json.loads; pydantic's JSON for the config classes):
    // a value no check reads passes as it is.
    for extra in [
        r#", "x": NaN"#,
        r#", "x": Infinity"#,
        r#", "x": -Infinity"#,
        r#", "x": 1e400"#,
        r#", "x": 80g"#,
    ] {
        let kv = kv(extra);
        let o = check(&["--kv-transfer-config", &kv], None);
        assert_eq!(o.status.code(), Some(0), "{extra}: {}", text(&o));
    }
    let o = check(
        &[
            "--kv-transfer-config",
            &kv(""),
            "--hf-overrides",
            r#"{"x": NaN, "y": 1e999}"#,
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Where the check reads a number, Python's value is what it checks: an
    // infinite pool is refused (vLLM: int(inf * 2**30) raises OverflowError).
    let inf_pool = r#"{"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": Infinity}}"#;
    let o = check(&["--kv-transfer-config", inf_pool], None);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!text(&o).contains("invalid_json"), "{}", text(&o));
    // What Python's json refuses stays refused.
    for bad in [r#"{"x": nan}"#, r#"{"x": inf}"#, r#"{"x": -NaN}"#] {
        let o = check(
            &["--kv-transfer-config", &kv(""), "--hf-overrides", bad],
            None,
        );
        assert_eq!(o.status.code(), Some(1), "{bad}: {}", text(&o));
        assert!(text(&o).contains("invalid_json"), "{bad}: {}", text(&o));
    }
}

#[test]
fn the_v2_runner_variable_is_read_as_python_reads_it() {
    let kv = kv("");
    let args = ["--kv-transfer-config", kv.as_str()];
    // int() reads these: non-zero is Model Runner V2, which HiSparse needs.
    for on in [
        "1",
        "1_0",
        " 1 ",
        "+1",
        "12345678901234567890123",
        "-3",
        "007",
    ] {
        let o = check(&args, Some(on));
        assert_eq!(o.status.code(), Some(0), "{on:?}: {}", text(&o));
    }
    // int() reads these as 0: V1, which HiSparse refuses.
    for off in ["0", "0_0", "-0", " 00 ", &"0".repeat(40)] {
        let o = check(&args, Some(off));
        assert_eq!(o.status.code(), Some(1), "{off:?}: {}", text(&o));
        assert!(
            text(&o).contains("model_runner_v2_disabled"),
            "{off:?}: {}",
            text(&o)
        );
    }
    // int() refuses these (vLLM fails to start): invalid_value.
    let too_long = "1".repeat(4301);
    for bad in ["1.0", "0x1", "1__0", "", "true", too_long.as_str()] {
        let o = check(&args, Some(bad));
        assert_eq!(o.status.code(), Some(1), "{bad:?}: {}", text(&o));
        assert!(
            text(&o).contains("VLLM_USE_V2_MODEL_RUNNER"),
            "{bad:?}: {}",
            text(&o)
        );
    }
}

/// `hisparse-check ... >&-` and `1</dev/null`: the result cannot be written
/// at all, so exit 2 with a message, as the pip-installed console script does
/// (Rust's runtime reopens a closed stdout on /dev/null before main, and its
/// stdout takes EBADF as written: both gave exit 0).
#[test]
fn a_closed_or_read_only_stdout_is_an_error_exit() {
    use std::os::unix::process::CommandExt;
    let kv = kv("");
    for closed in [true, false] {
        let mut cmd = Command::new(BIN);
        cmd.args([model().as_str(), "--kv-transfer-config", &kv])
            .stderr(Stdio::piped());
        if closed {
            // SAFETY: close(2) on the child's own stdout, between fork and exec.
            unsafe {
                cmd.stdout(Stdio::inherit()).pre_exec(|| {
                    libc::close(libc::STDOUT_FILENO);
                    Ok(())
                });
            }
        } else {
            cmd.stdout(std::fs::File::open("/dev/null").unwrap());
        }
        let o = cmd.output().expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "closed={closed}: {err}");
        assert!(err.contains("cannot write the result to stdout"), "{err}");
    }
}
