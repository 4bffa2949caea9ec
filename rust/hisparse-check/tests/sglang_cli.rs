//! Issue 16, part 2: `hisparse-check` for an SGLang 0.5.23 launch, in each of
//! its argv forms, with SGLang's argparse dialect (aliases, prefixes,
//! store_true, choices, did-you-mean), every stage's errors at once, the
//! ignored flags and vLLM's exit codes.

use serde_json::Value;
use std::process::Command;

mod common;
use common::{model, text, BIN};

const HS: &str = r#"{"top_k": 2048, "device_buffer_size": 4096, "host_to_device_ratio": 2}"#;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().expect("runs");
    let code = out.status.code().unwrap_or(-1);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        text(&out)
    );
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A valid decode-server launch of the bundled DeepSeek-V3.2, after `prefix`.
fn valid_launch(prefix: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = prefix.iter().map(|s| (*s).to_owned()).collect();
    if !prefix.contains(&"serve") {
        args.push("--model-path".to_owned());
    }
    args.push(model());
    for w in [
        "--tp",
        "8",
        "--enable-hisparse",
        "--disaggregation-mode",
        "decode",
        "--hisparse-config",
        HS,
        "--port",
        "30000",
    ] {
        args.push(w.to_owned());
    }
    args
}

fn json_of(args: &[String]) -> (i32, Value) {
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.insert(0, "--json");
    let (code, out, err) = run(&a);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (code, v)
}

#[test]
fn a_valid_launch_in_every_argv_form() {
    let forms: [&[&str]; 6] = [
        &["--engine", "sglang"],
        &["--engine=sglang", "--"],
        &["--", "sglang", "serve"],
        &["sglang", "serve"],
        &["--", "python", "-m", "sglang.launch_server"],
        &["--", "/usr/bin/python3", "-m", "sglang.launch_server"],
    ];
    let mut reports = Vec::new();
    for form in forms {
        let args = valid_launch(form);
        let (code, report) = json_of(&args);
        assert_eq!(code, 0, "{form:?}: {report}");
        assert_eq!(report["engine"], "sglang", "{form:?}");
        assert_eq!(report["engine_version"], "0.5.23");
        assert_eq!(report["valid"], true);
        assert_eq!(report["hisparse"]["device_buffer_size"]["value"], 4096);
        assert_eq!(report["hisparse"]["page_size"]["value"], 64);
        assert_eq!(report["ignored_flags"], serde_json::json!(["--port 30000"]));
        reports.push(report);
    }
    assert!(
        reports.windows(2).all(|w| w[0] == w[1]),
        "one reading for every form"
    );
}

#[test]
fn the_text_names_sglang_and_its_settings() {
    let args = valid_launch(&["--", "sglang", "serve"]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, _) = run(&a);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("rules of SGLang 0.5.23"), "{out}");
    assert!(out.contains("HiSparse: enabled"), "{out}");
    assert!(out.contains("device_buffer_size"), "{out}");
    assert!(
        out.contains("ignored (sglang serve flags hisparse-check does not read): --port 30000"),
        "{out}"
    );
    assert!(out.contains("result: valid"), "{out}");
}

#[test]
fn a_broken_launch_gets_every_error_at_once_with_its_stage() {
    let m = model();
    let (code, out, _) = run(&[
        "--",
        "sglang",
        "serve",
        &m,
        "--tp",
        "8",
        "--enable-hisparse=1",
        "--hisparse-config",
        r#"{"device_buffer_size": 4000}"#,
        "--enable-mixed-chunk",
        "--kv-cache-dtype",
        "fp9",
        "--pagesize",
        "64",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "Without this check: SGLang 0.5.23 would refuse this launch at argument parsing"
        ),
        "{out}"
    );
    let (code, report) = json_of(
        &[
            "--",
            "sglang",
            "serve",
            &m,
            "--tp",
            "8",
            "--enable-hisparse=1",
            "--hisparse-config",
            r#"{"device_buffer_size": 4000}"#,
            "--enable-mixed-chunk",
            "--kv-cache-dtype",
            "fp9",
            "--pagesize",
            "64",
        ]
        .map(str::to_owned),
    );
    assert_eq!(code, 1);
    let errors = report["errors"].as_array().unwrap();
    let seen: Vec<(&str, &str)> = errors
        .iter()
        .map(|e| (e["stage"].as_str().unwrap(), e["path"].as_str().unwrap()))
        .collect();
    for want in [
        ("argparse", "enable_hisparse"),
        ("argparse", "kv_cache_dtype"),
        ("argparse", "--pagesize"),
        ("check", "enable_mixed_chunk"),
        ("coordinator_init", "hisparse_config.device_buffer_size"),
    ] {
        assert!(seen.contains(&want), "{want:?} not in {seen:?}");
    }
    assert_eq!(report["hisparse"], Value::Null);
}

#[test]
fn store_true_with_a_value_is_argparse_s_error() {
    let m = model();
    let (code, report) =
        json_of(&["--engine", "sglang", "--model", &m, "--enable-hisparse=1"].map(str::to_owned));
    assert_eq!(code, 1);
    let e = &report["errors"][0];
    assert_eq!(e["stage"], "argparse");
    assert_eq!(e["code"], "invalid_value");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("argument --enable-hisparse: ignored explicit argument '1'"),
        "{e}"
    );
    assert_eq!(e["fix"][0]["path"], "enable_hisparse");
}

#[test]
fn did_you_mean_comes_from_sglang_s_flags() {
    let m = model();
    let (code, report) = json_of(
        &[
            "--engine",
            "sglang",
            "--model",
            &m,
            "--disagregation-mode",
            "decode",
        ]
        .map(str::to_owned),
    );
    assert_eq!(code, 1);
    let e = &report["errors"][0];
    assert_eq!(e["code"], "unknown_key");
    assert_eq!(e["given"], "--disagregation-mode decode");
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("did you mean --disaggregation-mode?"),
        "{e}"
    );
}

#[test]
fn aliases_and_prefixes_as_argparse_reads_them() {
    let m = model();
    let base = |extra: &[&str]| {
        let mut a = vec![
            "--engine",
            "sglang",
            "--model",
            m.as_str(),
            "--enable-hisparse",
            "--disaggregation-mode",
            "decode",
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let (_, a) = json_of(&base(&[
        "--hierarchical-sparse-attention-extra-config",
        HS,
        "--tensor-parallel-size",
        "8",
    ]));
    let (_, b) = json_of(&base(&["--hisparse-config", HS, "--tp=8"]));
    assert_eq!(a["hisparse"], b["hisparse"]);
    assert_eq!(a["valid"], true, "{a}");
    // A prefix of several spellings is ambiguous, as in argparse.
    let (code, r) = json_of(&base(&["--enable-hi"]));
    assert_eq!(code, 1);
    assert!(
        r["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("ambiguous option: --enable-hi could match"),
        "{r}"
    );
}

#[test]
fn a_missing_model_and_a_bad_type_are_argparse_errors() {
    let (code, report) = json_of(&["--engine", "sglang", "--tp-size", "eight"].map(str::to_owned));
    assert_eq!(code, 1);
    let msgs: Vec<&str> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(
        msgs.iter()
            .any(|m| m
                .contains("argument --tp-size/--tensor-parallel-size: invalid int value: 'eight'")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.contains("the following arguments are required: --model-path/--model")),
        "{msgs:?}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, err) = run(&["--engine", "trtllm", "--model", "m"]);
    assert_eq!(code, 2);
    assert!(err.contains("allowed: vllm, sglang"), "{err}");
    let (code, _, err) = run(&["--engine", "vllm", "--", "sglang", "serve", "m"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&[
        "--engine",
        "sglang",
        "--gpu",
        "no-such-gpu",
        "--model",
        &model(),
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = run(&["--engine", "sglang"]);
    assert_eq!(code, 2);
    // A config file would change the launch: refused rather than checked without it.
    let (code, _, err) = run(&[
        "--engine",
        "sglang",
        "--model",
        &model(),
        "--config",
        "x.yaml",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--config FILE"), "{err}");
    let (code, out, _) = run(&["--engine", "sglang", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--plan-context-length"), "{out}");
}

#[test]
fn the_gpu_picks_the_kv_cache_dtype() {
    let mut args = valid_launch(&["--engine", "sglang"]);
    args.extend(["--gpu".to_owned(), "b200".to_owned()]);
    let (code, report) = json_of(&args);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["hisparse"]["kv_cache_dtype"]["value"], "fp8_e4m3");
}

#[test]
fn plan_for_an_sglang_launch() {
    let mut args = valid_launch(&["--", "sglang", "serve"]);
    args.splice(
        0..0,
        ["--plan".to_owned(), "--gpu".to_owned(), "h200".to_owned()],
    );
    let (code, plan) = json_of(&args);
    assert_eq!(code, 0, "{plan}");
    assert_eq!(plan["ignored_flags"], serde_json::json!(["--port 30000"]));
}

#[test]
fn vllm_is_still_the_default_engine() {
    let (code, report) = json_of(&[model(), "--kv-transfer-config".to_owned(), "{}".to_owned()]);
    assert_eq!(report["engine"], "vllm");
    let (code2, report2) = json_of(&[
        "--".to_owned(),
        "vllm".to_owned(),
        "serve".to_owned(),
        model(),
        "--kv-transfer-config".to_owned(),
        "{}".to_owned(),
    ]);
    assert_eq!((code, &report), (code2, &report2));
}

/// Issue 23 defect 12: a config.json that is a FIFO, a directory or a device
/// exits 2 under `--engine sglang` as under vLLM (docs/cli.md, docs/limits.md),
/// never blocking; a directory is not explained as a read that could block.
#[test]
fn a_config_json_that_is_not_a_regular_file_exits_2() {
    let dir = std::env::temp_dir().join(format!("hisparse-sg-cli-{}-files", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("fifo")).unwrap();
    std::fs::create_dir_all(dir.join("dir").join("config.json")).unwrap();
    let fifo = dir.join("fifo").join("config.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (path, needle) in [
        (dir.join("fifo").to_str().unwrap().to_owned(), "FIFO"),
        (dir.join("dir").to_str().unwrap().to_owned(), "a directory"),
        ("/dev/zero".to_owned(), "character device"),
    ] {
        for plan in [false, true] {
            let mut a = vec![
                "--engine",
                "sglang",
                "--model-path",
                &path,
                "--enable-hisparse",
            ];
            if plan {
                a.push("--plan");
            }
            let (code, out, err) = run(&a);
            assert_eq!(code, 2, "{path}: {out}{err}");
            assert!(err.contains(needle), "{path}: {err}");
            assert!(err.starts_with("hisparse-check: error: "), "{err}");
        }
    }
    let (_, _, err) = run(&[
        "--engine",
        "sglang",
        "--model-path",
        dir.join("dir").to_str().unwrap(),
    ]);
    assert!(!err.contains("block"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 23, defect 11: the flags line carries the fix of a store_true flag
/// given a value, alone or beside other fixes; pasted, it passes.
#[test]
fn the_flags_line_carries_a_store_true_flag_given_a_value() {
    let m = model();
    let (code, report) = json_of(
        &[
            "--engine",
            "sglang",
            "--model",
            &m,
            "--enable-hisparse=1",
            "--disable-radix-cache",
        ]
        .map(str::to_owned),
    );
    assert_eq!(code, 1);
    assert_eq!(report["fixed_flags"], "--enable-hisparse", "{report}");
    let (_, report) =
        json_of(&["--engine", "sglang", "--model", &m, "--enable-hisparse=yes"].map(str::to_owned));
    assert_eq!(
        report["fixed_flags"], "--enable-hisparse --disable-radix-cache",
        "{report}"
    );
    // The printed flags in place of the user's: valid.
    let (code, report) = json_of(
        &[
            "--engine",
            "sglang",
            "--model",
            &m,
            "--enable-hisparse",
            "--disable-radix-cache",
        ]
        .map(str::to_owned),
    );
    assert_eq!(code, 0, "{report}");
    let (_, out, _) = run(&[
        "--gpu",
        "h200",
        "--engine",
        "sglang",
        "--model",
        &m,
        "--enable-hisparse=1",
        "--disable-radix-cache",
    ]);
    assert!(
        out.contains(
            "With every fix applied, change these sglang serve flags:\n  --enable-hisparse\n"
        ),
        "{out}"
    );
}

/// Issue 23, defect 13: `sglang serve --model-type` other than auto / llm.
#[test]
fn model_type_other_than_llm_is_not_read_silently() {
    let m = model();
    let (code, _, err) = run(&["--", "sglang", "serve", &m, "--model-type", "diffusion"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--model-type diffusion: sglang serve runs its diffusion server"),
        "{err}"
    );
    let (code, report) =
        json_of(&["--", "sglang", "serve", &m, "--model-type=video"].map(str::to_owned));
    assert_eq!(code, 1);
    let e = &report["errors"][0];
    assert_eq!(e["stage"], "argparse");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("Unknown serve backend 'video'. Available values: auto, llm, diffusion."),
        "{e}"
    );
    let (code, report) =
        json_of(&["--", "sglang", "serve", &m, "--model-type", "llm"].map(str::to_owned));
    assert_eq!(code, 0, "{report}");
}

/// `--gpus-per-node` is one of hisparse-check's own flags for SGLang too (as
/// `--gpu` is), in both forms; before, it was read as an unknown SGLang flag
/// and the node size fell back to --gpu's 8 (break-it trial).
#[test]
fn gpus_per_node_is_hisparse_check_s_own_flag_for_sglang() {
    let model = format!(
        "{}/../../tests/data/models/deepseek-v3.2",
        env!("CARGO_MANIFEST_DIR")
    );
    let engine = [
        "--engine",
        "sglang",
        &model,
        "--tp",
        "16",
        "--gpu",
        "h200",
        "--gpus-per-node",
        "16",
    ];
    let (code, out, err) = run(&engine);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("unknown_key"), "{out}");
    let serve = [
        "--gpus-per-node",
        "8",
        "--gpu",
        "h200",
        "--",
        "sglang",
        "serve",
        &model,
        "--tp",
        "16",
    ];
    let (code, out, err) = run(&serve);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("error[gpus_per_node_exceeded]"), "{out}");
    assert!(
        !out.contains("unknown_key") && !out.contains("model_config_missing"),
        "{out}"
    );
}
