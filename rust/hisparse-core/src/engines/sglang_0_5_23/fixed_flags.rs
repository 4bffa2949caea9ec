//! The SGLang flags after every fix of a report, as shell text to paste in
//! place of the user's own: `--hisparse-config '{...}'` whole (SGLang reads
//! one JSON string), `--disable-radix-cache`, `--page-size 64`, and
//! `(remove --flag)` for a store_true flag or value the fixes drop.

use super::args::flag_name;
use super::args::SglangArgs;
use super::fixes::{apply_all, fix_form};
use crate::diagnostic::Diagnostic;
use serde_json::Value;

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
    let mut keys: Vec<&String> = was
        .keys()
        .chain(now.keys().filter(|k| !was.contains_key(*k)))
        .filter(|k| was.get(*k) != now.get(*k))
        .collect();
    keys.sort_by_key(|k| (k.as_str() == "hisparse_config", k.as_str()));
    let parts: Vec<String> = keys
        .into_iter()
        .map(|k| {
            let flag = flag_name(k);
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

/// JSON as Python's `json.dumps` writes it (`", "`, `": "`).
pub fn python_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), python_json(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(python_json).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

/// Quoted for a POSIX shell as Python's `shlex.quote` quotes.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quotes_as_shlex_and_dumps_as_python() {
        assert_eq!(quote("mooncake"), "mooncake");
        assert_eq!(quote("{\"a\": 1}"), "'{\"a\": 1}'");
        assert_eq!(quote("it's"), "'it'\"'\"'s'");
        assert_eq!(
            python_json(&json!({"top_k": 2048, "b": [1, 2]})),
            "{\"top_k\": 2048, \"b\": [1, 2]}"
        );
    }
}
