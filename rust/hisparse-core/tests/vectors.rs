//! The shared resolution vectors (`tests/vectors/resolve.json`), also read by
//! `tests/test_vectors.py`: each case's ServeArgs must resolve to exactly the
//! expected errors and warnings (code + path), values and provenance, and
//! applying the suggested fixes must lead to the expected valid configuration.

use hisparse_core::diagnostic::apply_fix;
use hisparse_core::{resolve, Provenance, Report, ServeArgs};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cases() -> Vec<Value> {
    let text =
        std::fs::read_to_string(repo_root().join("tests/vectors/resolve.json")).expect("vectors");
    let doc: Value = serde_json::from_str(&text).expect("vectors are JSON");
    doc["cases"].as_array().expect("cases").clone()
}

fn args_of(case: &Value) -> ServeArgs {
    let mut args = case["args"].clone();
    if let Some(model) = args.get("model").and_then(Value::as_str) {
        args["model"] = Value::String(repo_root().join(model).display().to_string());
    }
    ServeArgs::from_json(args).expect("vector args are ServeArgs")
}

fn run(args: &ServeArgs) -> Report {
    resolve(args).expect("vector models load")
}

fn pairs(diags: &[hisparse_core::Diagnostic]) -> BTreeSet<(String, String)> {
    diags
        .iter()
        .map(|d| (d.code.as_str().to_owned(), d.path.to_string()))
        .collect()
}

fn expected_pairs(v: &Value) -> BTreeSet<(String, String)> {
    v.as_array()
        .map(|list| {
            list.iter()
                .map(|e| {
                    (
                        e["code"].as_str().unwrap().to_owned(),
                        e["path"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn source(p: &Provenance) -> &'static str {
    match p {
        Provenance::Explicit { .. } => "explicit",
        Provenance::Inferred { .. } => "inferred",
        Provenance::Default { .. } => "default",
        Provenance::Derived { .. } => "derived",
    }
}

/// Check `expect` (valid / hisparse_enabled / errors / warnings / hisparse) against `report`.
fn check(name: &str, report: &Report, expect: &Map<String, Value>, exhaustive: bool) {
    if let Some(valid) = expect.get("valid") {
        assert_eq!(
            report.valid,
            valid.as_bool().unwrap(),
            "{name}: valid; errors: {:?}",
            pairs(&report.errors)
        );
    }
    if let Some(enabled) = expect.get("hisparse_enabled") {
        assert_eq!(
            report.hisparse_enabled,
            enabled.as_bool().unwrap(),
            "{name}: hisparse_enabled"
        );
    }
    if exhaustive {
        assert_eq!(
            pairs(&report.errors),
            expected_pairs(&expect["errors"]),
            "{name}: errors"
        );
        assert_eq!(
            pairs(&report.warnings),
            expected_pairs(&expect["warnings"]),
            "{name}: warnings"
        );
    }
    // A vector's diagnostic may name the stage vLLM 0.33.0 refuses it at.
    for want in ["errors", "warnings"]
        .iter()
        .filter_map(|k| expect.get(*k).and_then(Value::as_array))
        .flatten()
        .filter(|e| e.get("stage").is_some())
    {
        let found = report
            .errors
            .iter()
            .chain(&report.warnings)
            .find(|d| d.code.as_str() == want["code"] && d.path.to_string() == want["path"])
            .unwrap_or_else(|| panic!("{name}: no {want}"));
        assert_eq!(
            found.stage.as_str(),
            want["stage"].as_str().unwrap(),
            "{name}: stage of {want}"
        );
    }
    let Some(Value::Object(fields)) = expect.get("hisparse") else {
        return;
    };
    let hs = report
        .vllm_hisparse()
        .unwrap_or_else(|| panic!("{name}: no resolved hisparse"));
    let resolved = serde_json::to_value(hs).unwrap();
    for (key, want) in fields {
        let got = if key == "enabled_source" {
            Value::from(source(&hs.enabled.provenance))
        } else if key == "connector" {
            Value::from(hs.connector.clone())
        } else if let Some(field) = key.strip_suffix("_source") {
            resolved[field]["source"].clone()
        } else {
            resolved[key.as_str()]["value"].clone()
        };
        let same = match (got.as_f64(), want.as_f64()) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-9,
            _ => got == *want,
        };
        assert!(same, "{name}: hisparse.{key} = {got}, expected {want}");
    }
}

#[test]
fn every_vector_resolves_as_expected() {
    let cases = cases();
    assert!(cases.len() >= 40, "vectors went missing");
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let report = run(&args_of(case));
        check(name, &report, case["expect"].as_object().unwrap(), true);
        // The report is serializable and reads back unchanged (the --json schema).
        let back: Report = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(back, report, "{name}: JSON round trip");
        // No partial config: settings only on valid reports.
        assert!(
            report.valid || report.hisparse.is_none(),
            "{name}: partial config"
        );
    }
}

#[test]
fn same_settings_cases_match() {
    let cases = cases();
    for case in cases.iter().filter(|c| c.get("same_settings_as").is_some()) {
        let other_name = case["same_settings_as"].as_str().unwrap();
        let other = cases.iter().find(|c| c["name"] == other_name).unwrap();
        let mut a =
            serde_json::to_value(run(&args_of(case)).vllm_hisparse().cloned().unwrap()).unwrap();
        let mut b =
            serde_json::to_value(run(&args_of(other)).vllm_hisparse().cloned().unwrap()).unwrap();
        // Only how HiSparse was switched on may differ (explicit vs inferred).
        a.as_object_mut().unwrap().remove("enabled");
        b.as_object_mut().unwrap().remove("enabled");
        assert_eq!(a, b, "{} vs {other_name}", case["name"]);
    }
}

/// Each fix, applied alone, removes the diagnostic it belongs to.
#[test]
fn each_fix_removes_its_error() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let args = args_of(&case);
        let report = run(&args);
        for d in report.errors.iter().filter(|d| !d.fix.is_empty()) {
            let mut doc = args.normalized().0.into_owned().to_json();
            apply_fix(&mut doc, &d.fix)
                .unwrap_or_else(|e| panic!("{name}: fix for {:?} does not apply: {e}", d.code));
            let fixed = run(&ServeArgs::from_json(doc).unwrap());
            let still = fixed
                .errors
                .iter()
                .any(|e| e.code == d.code && e.path == d.path);
            assert!(
                !still,
                "{name}: applying the fix for {} at {} leaves it in place",
                d.code.as_str(),
                d.path
            );
        }
    }
}

/// Applying the suggested fixes, one error at a time, reaches a valid configuration
/// with the expected settings (the hint's advice is itself accepted).
#[test]
fn applying_fixes_resolves_cleanly() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let Some(after) = case.get("after_fixes").and_then(Value::as_object) else {
            continue;
        };
        let mut args = args_of(&case);
        let mut report = run(&args);
        for _ in 0..30 {
            let Some(first) = report.errors.first() else {
                break;
            };
            assert!(
                !first.fix.is_empty(),
                "{name}: error {} at {} has no fix",
                first.code.as_str(),
                first.path
            );
            let mut doc = args.normalized().0.into_owned().to_json();
            apply_fix(&mut doc, &first.fix).unwrap();
            args = ServeArgs::from_json(doc).unwrap();
            report = run(&args);
        }
        check(&format!("{name} (after fixes)"), &report, after, false);
        assert!(
            report.valid,
            "{name}: still invalid after fixes: {:?}",
            pairs(&report.errors)
        );
    }
}

/// The fixes of one report work together: every error's fix applied at once,
/// in report order, reaches a valid configuration with the expected settings
/// (the same ones fixing one error at a time reaches).
#[test]
fn every_fix_at_once_resolves_cleanly() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let Some(after) = case.get("after_fixes").and_then(Value::as_object) else {
            continue;
        };
        let args = args_of(&case);
        let report = run(&args);
        let mut doc = args.normalized().0.into_owned().to_json();
        for d in &report.errors {
            apply_fix(&mut doc, &d.fix).unwrap_or_else(|e| {
                panic!(
                    "{name}: the fix for {} does not apply after the others: {e}",
                    d.code.as_str()
                )
            });
        }
        let fixed = run(&ServeArgs::from_json(doc).unwrap());
        assert!(
            fixed.valid,
            "{name}: every fix at once leaves {:?}",
            pairs(&fixed.errors)
        );
        check(&format!("{name} (every fix at once)"), &fixed, after, false);
    }
}
