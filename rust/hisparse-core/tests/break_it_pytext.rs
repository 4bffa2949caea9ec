//! Break-it regressions: `int()` / `float()` text read as CPython 3.11 reads
//! it. Each expected value was printed by `python3.11 -c 'int(s)'` / `float(s)`
//! (vLLM 0.33.0's interpreter); None is a ValueError there.

use hisparse_core::pytext::{py_float_text, py_int};

#[test]
fn int_text_matches_cpython() {
    let cases: &[(&str, Option<i64>)] = &[
        ("1__0", None),
        ("_1", None),
        ("1_", None),
        (" 1 ", Some(1)),
        // str.isspace calls U+001C..U+001F space, but int() does not strip them.
        ("\u{1c}1", None),
        ("1\u{1f}", None),
        ("\u{663}", Some(3)),
        ("-\u{661}_\u{662}", Some(-12)),
        ("\u{a0}2\u{3000}", Some(2)),
        ("\u{b}3\u{c}", Some(3)),
        ("+8", Some(8)),
        ("0_8", Some(8)),
        (" +6_4 ", Some(64)),
        ("-0", Some(0)),
        ("007", Some(7)),
        ("\u{b2}", None),
        ("\u{2167}", None),
        ("1.0", None),
        ("", None),
        ("\u{85}\u{85}", None),
        ("\u{1d7ce}\u{1d7d9}", Some(1)),
        ("8\u{200b}", None),
    ];
    for (text, want) in cases {
        assert_eq!(
            py_int(text).and_then(|n| n.to_i64()),
            *want,
            "int({text:?})"
        );
    }
}

#[test]
fn float_text_matches_cpython() {
    let cases: &[(&str, Option<f64>)] = &[
        ("1__0", None),
        ("_1", None),
        ("1_", None),
        ("1_.5", None),
        (" 1 ", Some(1.0)),
        ("\u{1c}1", None),
        ("1\u{1f}", None),
        ("\u{663}", Some(3.0)),
        ("-\u{663}.\u{665}", Some(-3.5)),
        ("1e1_0", Some(1e10)),
        ("+inf", Some(f64::INFINITY)),
        ("infinity", Some(f64::INFINITY)),
        ("1_e5", None),
        ("\u{a0}2.5\u{3000}", Some(2.5)),
        ("\u{b}3\u{c}", Some(3.0)),
        ("1.e5", Some(1e5)),
        (".5", Some(0.5)),
        ("1_0.2_5", Some(10.25)),
        ("inf_", None),
        ("0x10", None),
        ("1,5", None),
        ("", None),
        ("  ", None),
        ("\u{b2}", None),
        ("\u{2167}", None),
        ("1e400", Some(f64::INFINITY)),
        ("-0", Some(-0.0)),
    ];
    for (text, want) in cases {
        assert_eq!(py_float_text(text), *want, "float({text:?})");
    }
    for nan in ["nan", "-NaN"] {
        assert!(py_float_text(nan).is_some_and(f64::is_nan), "{nan}");
    }
}

/// The deepest JSON flag the check reads parses within 512 KiB of stack (a
/// macOS secondary thread's, where a Python thread may call the binding).
#[test]
fn the_deepest_json_read_fits_a_small_thread_stack() {
    use hisparse_core::pytext::{json_loads, JsonFlag};
    let depth = hisparse_core::limits::MAX_JSON_DEPTH;
    let text = format!(
        "{}{}1{}{}",
        "[".repeat(depth / 2),
        "{\"a\":".repeat(depth / 2),
        "}".repeat(depth / 2),
        "]".repeat(depth / 2)
    );
    let worker = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || {
            let v = json_loads(&text, JsonFlag::Loads).expect("reads");
            serde_json::to_string(&v).expect("writes").len()
        })
        .expect("spawn");
    assert!(worker.join().expect("no stack overflow") > 0);
}
