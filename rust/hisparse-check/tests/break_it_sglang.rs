//! Hostile SGLang 0.5.23 launches (branch sgbreak): every input has a bound
//! with its own error that names the flag, usage errors exit 2 with no
//! backtrace, and the fixes of one report pass when applied together.

use serde_json::Value;
use std::process::Command;

mod common;
use common::{model, text, BIN};

/// exit status, stdout, stderr; never a panic.
fn run(args: &[String]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().expect("runs");
    let all = text(&out);
    assert!(
        !all.contains("panicked") && !all.contains("RUST_BACKTRACE"),
        "{all}"
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn launch(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["--engine", "sglang", "--gpu", "h200", "--model-path"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    a.push(model());
    for w in ["--enable-hisparse", "--disaggregation-mode", "decode"] {
        a.push(w.to_owned());
    }
    a.extend(extra.iter().map(|s| (*s).to_owned()));
    a
}

#[test]
fn a_non_finite_float_is_a_bound_that_names_the_flag() {
    for (flag, value) in [
        ("--mem-fraction-static", "nan"),
        ("--mem-fraction-static", "inf"),
        (
            "--disaggregation-decode-host-receive-threshold",
            "-Infinity",
        ),
    ] {
        let (code, out, err) = run(&launch(&[&format!("{flag}={value}")]));
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.starts_with(&format!("hisparse-check: error: {flag}={value}: ")),
            "{err}"
        );
        assert!(err.contains("only as a finite float"), "{err}");
        assert!(!err.contains("invalid type"), "serde's words: {err}");
    }
}

#[test]
fn an_int_beyond_64_bits_is_the_check_s_bound_not_argparse_s() {
    // Python's int() reads these: argparse does not refuse them.
    for (flag, value) in [
        ("--tp", "99999999999999999999"),
        ("--max-total-tokens", "99999999999999999999k"),
    ] {
        let (code, out, err) = run(&launch(&[flag, value]));
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains(&format!("{flag} {value}: "))
                && err.contains("beyond the 64-bit integers the check reads"),
            "{err}"
        );
        assert!(!err.contains("stops here"), "{err}");
    }
}

#[test]
fn a_command_line_beyond_the_word_bound_is_a_usage_error() {
    let many: Vec<&str> = std::iter::repeat_n("--port", 16_385).collect();
    let (code, out, err) = run(&launch(&many));
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("hisparse-check reads at most 16384 words"),
        "{err}"
    );
}

#[test]
fn thousands_of_unknown_flags_are_all_reported_only_the_first_get_did_you_mean() {
    let typos: Vec<String> = (0..3000).map(|i| format!("--pagesize{i}")).collect();
    let mut args = launch(&[]);
    args.insert(0, "--json".to_owned());
    args.extend(typos);
    let (code, out, err) = run(&args);
    assert_eq!(code, 1, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let unknown: Vec<&Value> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["code"] == "unknown_key")
        .collect();
    assert_eq!(unknown.len(), 3000);
    let suggested = unknown
        .iter()
        .filter(|e| e["hint"].as_str().unwrap_or("").starts_with("did you mean"))
        .count();
    assert_eq!(suggested, hisparse_core::limits::MAX_ARGV_SUGGESTIONS);
    assert!(unknown
        .iter()
        .all(|e| e["hint"].as_str().is_some_and(|h| !h.is_empty())));
}

#[test]
fn the_speculation_fix_passes_when_applied() {
    // --speculative-num-draft-tokens alone: the fix must set topk too, or
    // the next run is SGLang's TypeError for steps without topk.
    let (code, out, _) = run(&{
        let mut a = launch(&[
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-num-draft-tokens",
            "3",
        ]);
        a.insert(0, "--json".to_owned());
        a
    });
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    let fixed = v["fixed_flags"].as_str().unwrap().to_owned();
    assert_eq!(
        fixed,
        "--speculative-eagle-topk 1 --speculative-num-steps 2"
    );
    let mut again = launch(&[
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-num-draft-tokens",
        "3",
    ]);
    again.extend(fixed.split(' ').map(str::to_owned));
    let (code, out, err) = run(&again);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn errors_without_a_fix_say_what_to_do() {
    // A model without DSA: no fix can make it one.
    let llama = model().replace("deepseek-v3.2", "llama-3.1-8b");
    let args: Vec<String> = [
        "--json",
        "--engine",
        "sglang",
        "--model-path",
        &llama,
        "--enable-hisparse",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let (code, out, _) = run(&args);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    let e = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["code"] == "hisparse_model_not_dsa")
        .expect("hisparse_model_not_dsa");
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("drop --enable-hisparse"),
        "{e}"
    );
}

#[test]
fn the_dtype_fix_keeps_the_backends_given_working() {
    // fp8_e5m2 is refused for DSA; the fix keeps 8 bits, fp8_e4m3 (issue 22
    // item 7: `auto` is bfloat16 on an H200), which flashmla_kv takes; where
    // the two backends given take no one dtype, fp8_e4m3 without the one it refuses.
    for (backends, want) in [
        (
            &["--dsa-prefill-backend", "flashmla_kv"][..],
            "--kv-cache-dtype fp8_e4m3",
        ),
        (
            &[
                "--dsa-prefill-backend",
                "flashmla_sparse",
                "--dsa-decode-backend",
                "flashmla_kv",
            ][..],
            "(remove --dsa-prefill-backend) --kv-cache-dtype fp8_e4m3",
        ),
    ] {
        let mut a = launch(&["--kv-cache-dtype", "fp8_e5m2"]);
        a.extend(backends.iter().map(|s| (*s).to_owned()));
        a.insert(0, "--json".to_owned());
        let (code, out, _) = run(&a);
        assert_eq!(code, 1, "{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let fixed = v["fixed_flags"].as_str().unwrap();
        assert!(fixed.contains(want), "{fixed}");
    }
}

#[test]
fn a_gib_option_beyond_64_bits_of_bytes_says_the_upper_bound() {
    for flag in ["--host-memory-gib", "--gpu-memory-gib", "--weights-gib"] {
        let mut a = launch(&[]);
        a.splice(
            0..0,
            ["--plan".to_owned(), flag.to_owned(), "1e300".to_owned()],
        );
        if flag != "--host-memory-gib" {
            a.splice(0..0, ["--host-memory-gib".to_owned(), "100".to_owned()]);
        }
        let (code, _, err) = run(&a);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("below 2^34 GiB") && err.contains("got 1e300"),
            "{err}"
        );
    }
}

#[test]
fn a_huge_int_for_a_flag_the_check_does_not_read_is_ignored_as_sglang_takes_it() {
    let mut a = launch(&["--random-seed", "99999999999999999999"]);
    a.insert(0, "--json".to_owned());
    let (code, out, err) = run(&a);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["ignored_flags"][0], "--random-seed 99999999999999999999",
        "{v}"
    );
}

#[test]
fn an_argparse_value_error_says_what_to_do() {
    let mut a = launch(&["--tp", "eight", "--kv-cache-dtype", "fp9"]);
    a.insert(0, "--json".to_owned());
    let (code, out, _) = run(&a);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    for e in v["errors"].as_array().unwrap() {
        assert!(
            e["hint"].as_str().is_some_and(|h| !h.is_empty())
                || !e["fix"].as_array().unwrap().is_empty(),
            "{e}"
        );
    }
}
