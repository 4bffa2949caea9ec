//! The SGLang flags after every fix of a report, as shell text to paste in
//! place of the user's own: `--hisparse-config '{...}'` whole (SGLang reads
//! one JSON string), `--disable-radix-cache`, `--page-size 64`, and
//! `(remove --flag)` for a store_true flag or value the fixes drop.

use super::args::flag_name;
use super::args::SglangArgs;
use super::fixes::{apply_all, fix_form};
use super::flags::{python_json, quote};
use crate::diagnostic::Diagnostic;
use serde_json::{Map, Value};

/// The flags that change `args` into `args` with every fix of `errors`
/// applied; None when no fix changes a flag (or the fixes do not apply).
pub fn fixed_flags(args: &SglangArgs, errors: &[Diagnostic]) -> Option<String> {
    if errors.iter().all(|e| e.fix.is_empty()) {
        return None;
    }
    let fixed = apply_all(args, errors)?;
    let (Value::Object(was), Value::Object(now)) = (fix_form(args), fix_form(&fixed)) else {
        return None;
    };
    let parts: Vec<String> = changed_keys(&was, &now, &[])
        .into_iter()
        .map(|k| {
            let flag = flag_name(&k);
            match now.get(k.as_str()).filter(|v| !v.is_null()) {
                None | Some(Value::Bool(false)) => format!("(remove {flag})"),
                Some(Value::Bool(true)) => flag,
                Some(Value::String(s)) => format!("{flag} {}", quote(s)),
                Some(v @ Value::Object(_)) => format!("{flag} {}", quote(&python_json(v))),
                Some(v) => format!("{flag} {v}"),
            }
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The attributes whose flags change between the fix forms `was` and `now`,
/// and those in `touched` (a fix's paths: `--enable-hisparse=1`, fixed to
/// `--enable-hisparse`, reads the same either way but must be spelled anew),
/// in the order the flags are printed: by name, `hisparse_config` last.
pub fn changed_keys(
    was: &Map<String, Value>,
    now: &Map<String, Value>,
    touched: &[String],
) -> Vec<String> {
    let mut keys: Vec<String> = was
        .keys()
        .chain(now.keys().filter(|k| !was.contains_key(*k)))
        .filter(|k| was.get(*k) != now.get(*k))
        .chain(touched.iter().filter(|k| was.get(*k) == now.get(*k)))
        .cloned()
        .collect();
    keys.sort_by(|a, b| {
        (a == "hisparse_config", a.as_str()).cmp(&(b == "hisparse_config", b.as_str()))
    });
    keys.dedup();
    keys
}

/// The argv words that give attribute `key` the value `now` (the fix form):
/// `["--page-size", "64"]`, `["--disable-radix-cache"]`, `["--hisparse-config",
/// "{...}"]` (the JSON as Python's `json.dumps` writes it), each list item a
/// word; empty when the flag is left out (null, or a store_true now false).
pub fn flag_words(key: &str, now: Option<&Value>) -> Vec<String> {
    let flag = flag_name(key);
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        v @ Value::Object(_) => python_json(v),
        v => v.to_string(),
    };
    match now.filter(|v| !v.is_null()) {
        None | Some(Value::Bool(false)) => Vec::new(),
        Some(Value::Bool(true)) => vec![flag],
        Some(Value::Array(items)) => std::iter::once(flag)
            .chain(items.iter().map(text))
            .collect(),
        Some(v) => vec![flag, text(v)],
    }
}
