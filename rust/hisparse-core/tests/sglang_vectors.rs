//! The shared SGLang 0.5.23 vectors (tests/vectors/sglang/*.json, read by the
//! Python tests too): SglangArgs (model paths relative to the repo root) and
//! options -> every expected diagnostic as (code, path, stage), order-free and
//! exhaustive, the resolved values, and the fixed flags.

use hisparse_core::engines::sglang_0_5_23::{self as sg, SglangArgs};
use hisparse_core::plan::PlanOptions;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The args of a case, with `model_path` made absolute.
pub fn args_of(case: &Value) -> SglangArgs {
    let mut a = case["args"].clone();
    if let Some(Value::String(m)) = a.get("model_path") {
        a["model_path"] = Value::String(root().join(m).display().to_string());
    }
    SglangArgs::from_json(a).expect("case args")
}

fn triples(diags: &[hisparse_core::Diagnostic]) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = diags
        .iter()
        .map(|d| {
            (
                d.code.as_str().to_owned(),
                d.path.to_string(),
                d.stage.as_str().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

fn expected(list: &Value) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t[0].as_str().unwrap().to_owned(),
                t[1].as_str().unwrap().to_owned(),
                t[2].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn sglang_vectors() {
    let dir = root().join("tests/vectors/sglang");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut n = 0;
    for file in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for case in doc["cases"].as_array().unwrap() {
            n += 1;
            let name = case["name"].as_str().unwrap();
            let options: PlanOptions = serde_json::from_value(
                case.get("options")
                    .cloned()
                    .unwrap_or(Value::Object(Map::new())),
            )
            .unwrap();
            let report = sg::check(&args_of(case), &options).unwrap();
            let got = (triples(&report.errors), triples(&report.warnings));
            let want = (expected(&case["errors"]), expected(&case["warnings"]));
            assert_eq!(
                got,
                want,
                "{name}: (errors, warnings)\n{}",
                report.to_json()
            );
            assert_eq!(report.valid, case["valid"].as_bool().unwrap(), "{name}");
            assert_eq!(report.engine, "sglang");
            assert_eq!(report.engine_version, "0.5.23");
            if let Some(Value::Object(fields)) = case.get("hisparse") {
                let h = serde_json::to_value(
                    report
                        .sglang_hisparse()
                        .unwrap_or_else(|| panic!("{name}: no hisparse")),
                )
                .unwrap();
                for (k, v) in fields {
                    match k.strip_suffix("_source") {
                        Some(f) => assert_eq!(&h[f]["source"], v, "{name}: {k}"),
                        None => assert_eq!(&h[k]["value"], v, "{name}: {k}"),
                    }
                }
            }
            if let Some(flags) = case.get("fixed_flags") {
                assert_eq!(
                    report
                        .fixed_flags
                        .as_deref()
                        .map(Value::from)
                        .unwrap_or(Value::Null),
                    *flags,
                    "{name}: fixed_flags"
                );
            }
            // Every fix of the report applied together: no error that had a fix remains.
            if !report.errors.is_empty() {
                let fixed = sg::fixes_applied(&args_of(case), &report.errors).expect("fixes apply");
                let again = sg::check(&fixed, &options).unwrap();
                for e in &again.errors {
                    assert!(
                        !report
                            .errors
                            .iter()
                            .any(|x| x.code == e.code && !x.fix.is_empty()),
                        "{name}: {} remains after the fixes",
                        e.code.as_str()
                    );
                }
            }
        }
    }
    assert!(n >= 10, "{n} cases");
}
