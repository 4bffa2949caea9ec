//! Issue 23 (SGLang 0.5.23's own verdict on any launch) and issue 22's SGLang
//! items 1, 7 and 8: each defect fixed with a test that failed before it.
//! SGLang's real verdict on the same launches is pinned in tests/sglang
//! (EXAMPLES of test_differential.py, test_oracle.py).

use hisparse_core::diagnostic::{Code, Diagnostic, Severity};
use hisparse_core::engines::sglang_0_5_23::{self as sg, SglangArgs};
use hisparse_core::plan::{PlanError, PlanOptions};
use hisparse_core::report::Report;
use serde_json::{json, Value};

fn model(name: &str) -> String {
    format!(
        "{}/../../tests/data/models/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn args(v: Value) -> SglangArgs {
    let mut a = json!({"model_path": model("deepseek-v3.2")});
    for (k, x) in v.as_object().unwrap() {
        a[k] = x.clone();
    }
    SglangArgs::from_json(a).unwrap()
}

fn options(v: Value) -> PlanOptions {
    serde_json::from_value(v).unwrap()
}

fn check(v: Value) -> Report {
    sg::check(&args(v), &options(json!({"gpu": "h200"}))).unwrap()
}

fn error(r: &Report, code: Code) -> &Diagnostic {
    r.errors
        .iter()
        .find(|d| d.code == code)
        .unwrap_or_else(|| panic!("no {code:?} in {:#?}", r.errors))
}

fn stage(d: &Diagnostic) -> String {
    serde_json::to_value(d.stage)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// Every error's fix applied at once: the report of the fixed launch.
fn fixed(a: &SglangArgs, r: &Report) -> Report {
    let f = sg::fixes_applied(a, &r.errors).expect("the fixes apply");
    sg::check(&f, &options(json!({"gpu": "h200"}))).unwrap()
}

// --- Defect 12: a config.json that is a FIFO, a directory or a device ----------

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hisparse-i23-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_config_json_that_is_not_a_regular_file_is_a_load_error() {
    let dir = scratch("notregular");
    let fifo_dir = dir.join("fifo");
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let c = std::process::Command::new("mkfifo")
        .arg(fifo_dir.join("config.json"))
        .status()
        .unwrap();
    assert!(c.success());
    let dir_dir = dir.join("dir");
    std::fs::create_dir_all(dir_dir.join("config.json")).unwrap();
    for (path, needle) in [
        (fifo_dir.to_str().unwrap(), "FIFO"),
        (dir_dir.to_str().unwrap(), "a directory"),
        ("/dev/zero", "character device"),
    ] {
        let a = args(json!({"model_path": path, "enable_hisparse": true}));
        for result in [
            sg::check(&a, &PlanOptions::default()).map(|_| ()),
            sg::plan(&a, &PlanOptions::default()).map(|_| ()),
        ] {
            match result {
                Err(PlanError::Load(e)) => {
                    assert_eq!(e.code(), "not_a_regular_file", "{path}");
                    assert!(e.to_string().contains(needle), "{path}: {e}");
                    if needle == "a directory" {
                        assert!(!e.to_string().contains("block"), "{e}");
                    }
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }
    // A model that is not there stays SGLang's own refusal at resolve.
    let r = sg::check(
        &args(json!({"model_path": dir.join("missing").to_str().unwrap()})),
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(
        error(&r, Code::ModelConfigMissing).severity,
        Severity::Error
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
