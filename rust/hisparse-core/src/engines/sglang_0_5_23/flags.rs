//! SGLang flags as text: a fix in words (`sglang serve: --disable-radix-cache`),
//! JSON as Python's `json.dumps` writes it, and shell quoting as `shlex.quote`.

use super::args::flag_name;
use crate::diagnostic::FixOp;
use crate::path::{FieldPath, Seg};
use serde_json::Value;

/// Words for a fix in SGLang's terms (the diagnostic's hint): `set
/// disable_radix_cache to true (sglang serve: --disable-radix-cache)`; keys of
/// `hisparse_config` are edited inside `--hisparse-config`.
pub fn describe_fix(ops: &[FixOp]) -> String {
    let flag_of = |path: &FieldPath, value: Option<&Value>| -> Option<String> {
        let [Seg::Key(k)] = path.0.as_slice() else {
            return None;
        };
        if k == "model_path" {
            return None;
        }
        let flag = flag_name(k);
        Some(match value {
            None | Some(Value::Bool(false)) | Some(Value::Null) => format!("remove {flag}"),
            Some(Value::Bool(true)) => flag,
            Some(Value::String(s)) => format!("{flag} {}", quote(s)),
            Some(v) => format!("{flag} {v}"),
        })
    };
    let parts: Vec<String> = ops
        .iter()
        .map(|op| match op {
            FixOp::Set { path, value } => match flag_of(path, Some(value)) {
                Some(f) => format!("set {path} to {value} (sglang serve: {f})"),
                None => format!("set {path} to {value} (in --hisparse-config)"),
            },
            FixOp::Remove { path } => match flag_of(path, None) {
                Some(f) => format!("remove {path} (sglang serve: {f})"),
                None => format!("remove {path} (from --hisparse-config)"),
            },
            FixOp::Move { from, to } => format!("move {from} to {to}"),
        })
        .collect();
    parts.join("; ")
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
