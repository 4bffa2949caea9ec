//! Parse -> serialize -> parse is stable for `FieldPath`, `ServeArgs` and
//! `Report`. Seeds are fixed (see `common::config`).

mod common;

use common::*;
use hisparse_core::{resolve, FieldPath, Report, Seg, ServeArgs};
use proptest::prelude::*;
use serde_json::{json, Value};

fn seg() -> impl Strategy<Value = Seg> {
    prop_oneof![
        4 => arb_key().prop_map(Seg::Key),
        2 => "[a-z_][a-z0-9_-]{0,8}".prop_map(Seg::Key),
        1 => any::<usize>().prop_map(Seg::Index),
        2 => (0usize..5).prop_map(Seg::Index),
    ]
}

/// `ServeArgs` with any JSON (or no value) in `hf_config` as well.
fn any_serve_args() -> impl Strategy<Value = ServeArgs> {
    arb_args_with(
        arb_json_field().boxed(),
        prop::option::weighted(0.7, arb_json()).boxed(),
    )
}

fn report_round_trips(report: &Report) -> Result<(), TestCaseError> {
    for (form, text) in [
        ("to_json", report.to_json()),
        ("to_json_compact", report.to_json_compact()),
    ] {
        let back: Report = serde_json::from_str(&text).map_err(|e| {
            TestCaseError::fail(format!(
                "{form} output does not parse back as a Report: {e}\n{text}"
            ))
        })?;
        prop_assert_eq!(
            &back,
            report,
            "{} changed the report; JSON:\n{}",
            form,
            text
        );
    }
    Ok(())
}

fn resolved(args: &ServeArgs) -> Result<Report, TestCaseError> {
    resolve(args)
        .map_err(|e| TestCaseError::fail(format!("resolve failed with hf_config given: {e}")))
}

proptest! {
    #![proptest_config(config(2048))]

    /// Any segment list (keys with dots, brackets, quotes, unicode, empty;
    /// indices; either kind first) prints to text that parses back to it,
    /// and likewise through serde (the form diagnostics and fixes use).
    #[test]
    fn field_path_round_trips(segs in prop::collection::vec(seg(), 0..6)) {
        let path = FieldPath(segs);
        let text = path.to_string();
        prop_assert_eq!(FieldPath::parse(&text), Ok(path.clone()), "printed as {:?}", text);
        let json = serde_json::to_string(&path).expect("serializes");
        let back: FieldPath = serde_json::from_str(&json)
            .map_err(|e| TestCaseError::fail(format!("{json} does not deserialize: {e}")))?;
        prop_assert_eq!(back, path);
    }
}

proptest! {
    #![proptest_config(config(2048))]

    /// `FieldPath::parse` never panics on any text, and whatever it accepts
    /// prints to a canonical form that parses back to the same path.
    #[test]
    fn field_path_parse_never_panics(text in prop_oneof![
        any::<String>(),
        "[a-z_.\\[\\]\"0-9\\\\]{0,16}",
        prop::collection::vec(seg(), 0..4).prop_map(|s| FieldPath(s).to_string() + "]"),
    ]) {
        if let Ok(path) = FieldPath::parse(&text) {
            prop_assert_eq!(FieldPath::parse(&path.to_string()), Ok(path));
        }
    }
}

/// The corners by hand: a first segment that is an index or a key printed in
/// bracket form, empty keys, keys that look like indices or quoted keys.
#[test]
fn field_path_corner_cases_round_trip() {
    use Seg::{Index, Key};
    let k = |s: &str| Key(s.to_owned());
    for segs in [
        vec![],
        vec![Index(0)],
        vec![Index(usize::MAX), k("a")],
        vec![k("")],
        vec![k(""), k("")],
        vec![k("a.b")],
        vec![k("[0]"), Index(1)],
        vec![k("x"), k("[\"q\"]")],
        vec![k("0"), k("1")],
        vec![k("\""), k("\\"), k("]"), k("[")],
        vec![k("a"), Index(0), Index(1), k("b-c_d")],
        vec![k("é"), k("🦀"), k("\u{0}"), k("\u{200b}")],
    ] {
        let path = FieldPath(segs);
        let text = path.to_string();
        assert_eq!(
            FieldPath::parse(&text),
            Ok(path.clone()),
            "printed as {text:?}"
        );
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// `ServeArgs::from_json(args.to_json()) == Ok(args)`.
    #[test]
    fn serve_args_json_round_trips(Brief(args) in brief(any_serve_args())) {
        let json = args.to_json();
        let back = ServeArgs::from_json(json.clone())
            .map_err(|e| TestCaseError::fail(format!("to_json output rejected: {e}\n{json}")))?;
        prop_assert_eq!(back, args, "JSON form: {}", json);
    }

    /// The report of a realistic configuration survives `to_json` and
    /// `to_json_compact` followed by `serde_json::from_str::<Report>`.
    #[test]
    fn realistic_report_json_round_trips(Brief(args) in brief(realistic_args(false))) {
        report_round_trips(&resolved(&args)?)?;
    }
}

proptest! {
    // Arbitrary inputs can hit resolve's known hangs: run guarded and forked.
    #![proptest_config(forked_config(512))]

    /// The same for arbitrary inputs (diagnostics echo arbitrary `given` values).
    #[test]
    fn arbitrary_report_json_round_trips(Brief(args) in brief(arb_args())) {
        guarded(&args, |args| report_round_trips(&resolved(args)?))?;
    }
}

// ---------------------------------------------------------------------------
// Minimal reproductions of what the properties above found.

/// A given JSON `null` stays `Some(Value::Null)` through the JSON form (it
/// used to come back as `None`; fixed by `diagnostic::present`).
#[test]
fn regression_report_with_null_given_round_trips() {
    let args = ServeArgs {
        hf_config: Some(dsv32()),
        attention_config: Some(json!({"foo": null})),
        ..Default::default()
    };
    let report = resolve(&args).expect("no I/O");
    assert_eq!(report.errors[0].given, Some(Value::Null));
    let back: Report = serde_json::from_str(&report.to_json()).expect("parses");
    assert_eq!(back, report);
}

/// `ServeArgs`' JSON-valued fields are `Option<Value>`: `Some(Value::Null)`
/// serializes as `null` and deserializes as `None`. For `hf_config` this
/// changes behaviour: `Some(Null)` is used as an (empty) model config, `None`
/// falls back to `model`.
#[test]
fn regression_serve_args_with_null_json_field_round_trips() {
    let args = ServeArgs {
        hf_config: Some(Value::Null),
        ..Default::default()
    };
    assert_eq!(ServeArgs::from_json(args.to_json()).expect("parses"), args);
}

/// serde_json parses floats approximately unless its `float_roundtrip`
/// feature is on: `919158879.6160507` (printed by serde_json itself, shortest
/// round-trip form) parses back one ULP off, so a report echoing that value in
/// `given` is not equal to itself after `to_json` -> `from_str`. About 30% of
/// random finite f64 values are affected; enabling
/// `serde_json = { features = ["float_roundtrip"] }` fixes all of them.
#[test]
fn regression_report_floats_round_trip() {
    let x = 919158879.6160507_f64;
    let args = ServeArgs {
        hf_config: Some(dsv32()),
        hf_overrides: Some(json!([x])),
        ..Default::default()
    };
    let report = resolve(&args).expect("no I/O");
    assert_eq!(report.errors[0].given, Some(json!([x])));
    let back: Report = serde_json::from_str(&report.to_json()).expect("parses");
    assert_eq!(back, report);
}
