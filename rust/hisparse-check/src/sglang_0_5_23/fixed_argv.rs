//! A fix applied to an SGLang command line: the words of the launch the fix
//! gives (`hisparse_rs.apply_fix(argv, fix, engine="sglang")`). Every word of
//! an attribute the fix sets or removes (each spelling, abbreviation and
//! `--flag=value` form, cut as argparse cuts them: [`super::argv::Parsed::groups`])
//! is dropped and the attribute's new words appended, as `Report.fixed_flags`
//! prints them; every other word stays as given, in its place.

use super::{argv, read};
use crate::launch;
use hisparse_core::diagnostic::FixOp;
use hisparse_core::engines::sglang_0_5_23::fixed_flags::{changed_keys, flag_words};
use hisparse_core::engines::sglang_0_5_23::fixes::{apply_fix, fix_form};
use hisparse_core::path::Seg;
use serde_json::{Map, Value};

/// The attributes `ops` name (the first key of each path).
fn touched(ops: &[FixOp]) -> Vec<String> {
    ops.iter()
        .flat_map(|op| match op {
            FixOp::Set { path, .. } | FixOp::Remove { path } => vec![path],
            FixOp::Move { from, to } => vec![from, to],
        })
        .filter_map(|p| match p.0.first() {
            Some(Seg::Key(k)) => Some(k.clone()),
            _ => None,
        })
        .collect()
}

/// `words` (the launch after its program) cut into groups of words, each
/// with the attribute it sets; `sglang serve`'s positional model is
/// `model_path` (cli/serve.py:62-66).
fn groups(words: &[String], serve: bool) -> Vec<(std::ops::Range<usize>, Option<&'static str>)> {
    let positional = serve && words.first().is_some_and(|w| !w.starts_with('-'));
    let skip = usize::from(positional);
    let parsed = argv::parse(&words[skip..]);
    let mut out = Vec::with_capacity(parsed.groups.len() + 1);
    if positional {
        out.push((0..1, Some("model_path")));
    }
    let starts = &parsed.groups;
    for (n, (start, dest)) in starts.iter().enumerate() {
        let end = starts.get(n + 1).map_or(words.len() - skip, |g| g.0);
        out.push((start + skip..end + skip, *dest));
    }
    out
}

/// `argv` (as `check_sglang_argv` takes it: a leading `sglang serve` or
/// `python -m sglang.launch_server` is kept as given) with `ops` applied.
/// Err: the words cannot be read (the CLI's usage error), or the fix does
/// not apply to the launch they give.
pub fn fixed_argv(argv: &[String], ops: &[FixOp]) -> Result<Vec<String>, String> {
    let mut words = vec!["--engine".to_owned(), "sglang".to_owned()];
    words.extend(argv.iter().cloned());
    let split = launch::split(&words)?;
    let body = &split.args;
    let program = &argv[..argv.len().saturating_sub(body.len())];
    let read = read::read(body, split.sglang_serve)?;
    let fixed = apply_fix(&read.args, ops)?;
    let object = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let (was, now) = (object(fix_form(&read.args)), object(fix_form(&fixed)));
    let keys = changed_keys(&was, &now, &touched(ops));
    let mut out = program.to_vec();
    for (range, dest) in groups(body, split.sglang_serve) {
        if dest.is_none_or(|d| !keys.iter().any(|k| k == d)) {
            out.extend(body[range].iter().cloned());
        }
    }
    for k in &keys {
        out.extend(flag_words(k, now.get(k)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hisparse_core::path::FieldPath;
    use serde_json::json;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    fn set(path: &str, value: Value) -> FixOp {
        FixOp::Set {
            path: FieldPath::parse(path).unwrap(),
            value,
        }
    }

    #[test]
    fn drops_every_spelling_of_a_fixed_attribute_and_appends_its_words() {
        let argv = words(
            "sglang serve m --tp 8 --page-size=16 --enable-hisparse=1 --hisp {\"top_k\":2048}",
        );
        let fixed = fixed_argv(
            &argv,
            &[
                set("page_size", json!(64)),
                set("enable_hisparse", json!(true)),
                set("hisparse_config.device_buffer_size", json!(4096)),
            ],
        )
        .unwrap();
        assert_eq!(
            fixed,
            [
                "sglang",
                "serve",
                "m",
                "--tp",
                "8",
                "--enable-hisparse",
                "--page-size",
                "64",
                "--hisparse-config",
                "{\"top_k\": 2048, \"device_buffer_size\": 4096}",
            ]
        );
        // The fixed words read as the fixed attributes.
        let again = read::read(&fixed[2..], true).unwrap();
        assert!(again.errors.is_empty(), "{:?}", again.errors);
        assert_eq!(again.args.page_size, Some(64));
        let removed = fixed_argv(
            &words("--model-path m --disable-radix-cache --tp-size=2"),
            &[FixOp::Remove {
                path: FieldPath::parse("disable_radix_cache").unwrap(),
            }],
        )
        .unwrap();
        assert_eq!(removed, words("--model-path m --tp-size=2"));
    }

    #[test]
    fn a_fix_that_does_not_apply_is_an_error() {
        let err = fixed_argv(&words("--model-path m"), &[set("tp_size", json!("8"))]).unwrap_err();
        assert!(err.contains("tp_size must be an int"), "{err}");
    }
}
