//! The `vllm serve` flags after every fix of a report: what a user pastes in
//! place of their own flags. `hisparse-check` prints them, its `--json` and
//! the Python `Report` carry them as `fixed_flags`, and the vLLM plugin's
//! refusal ends with them. Environment variables the fixes change are not
//! flags: they come apart, as `fixed_env` (`unset VAR`, `VAR=value`), so the
//! flags line pastes after `vllm serve` as it is.
//!
//! A JSON flag is given whole: vLLM's dotted flags replace a JSON flag of the
//! same name instead of editing it (see `describe_fix`). Values are quoted
//! for a POSIX shell as Python's `shlex.quote` quotes them, and JSON is
//! written as Python's `json.dumps` writes it (`", "`, `": "`), the form the
//! plugin has always printed.

use crate::diagnostic::Diagnostic;
use crate::engines::vllm_0_33::args::{flag_name, ServeArgs, JSON_FIELDS};
use crate::engines::vllm_0_33::fixes::{apply_all, shallow};
use serde_json::Value;
use std::io;

/// What changes `args` into `args` with every fix of `errors` applied (in
/// report order, the order they pass together in), as shell text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FixedFlags {
    /// The `vllm serve` flags: scalar flags first, then JSON flags, each by
    /// name; `(remove --flag)` for a flag the fixes remove. None when no fix
    /// changes a flag (the model and the platform are not flags).
    pub flags: Option<String>,
    /// The environment variables, by name: `unset VAR` for one the fixes
    /// remove, `VAR=value` for one they set. None when no fix changes one.
    pub env: Option<String>,
}

/// [`FixedFlags`] of a report: both None when the fixes do not apply.
pub fn fixed_flags(args: &ServeArgs, errors: &[Diagnostic]) -> FixedFlags {
    changes(args, errors).unwrap_or_default()
}

fn changes(args: &ServeArgs, errors: &[Diagnostic]) -> Option<FixedFlags> {
    if errors.iter().all(|e| e.fix.is_empty()) || !shallow(args) {
        return None;
    }
    let before = args.normalized().0.to_json();
    let mut after = before.clone();
    apply_all(&mut after, errors).ok()?;
    let (Value::Object(was), Value::Object(now)) = (&before, &after) else {
        return None;
    };
    let mut keys: Vec<&str> = was
        .keys()
        .chain(now.keys().filter(|k| !was.contains_key(*k)))
        .map(String::as_str)
        .filter(|k| !matches!(*k, "model" | "hf_config" | "platform"))
        .filter(|k| was.get(*k) != now.get(*k))
        .collect();
    let env = |k: &str| !k.chars().any(|c| c.is_ascii_lowercase());
    keys.sort_by_key(|k| (JSON_FIELDS.contains(k), *k));
    let (env_keys, flag_keys): (Vec<&str>, Vec<&str>) = keys.into_iter().partition(|k| env(k));
    let vars: Vec<String> = env_keys
        .into_iter()
        .map(|key| match now.get(key).filter(|v| !v.is_null()) {
            None => format!("unset {key}"),
            Some(Value::String(s)) => format!("{key}={}", shell_quote(s)),
            Some(v) => format!("{key}={}", shell_quote(&v.to_string())),
        })
        .collect();
    let parts: Vec<String> = flag_keys
        .into_iter()
        .map(|key| {
            let value = now.get(key).filter(|v| !v.is_null());
            let flag = flag_name(key);
            match value {
                None => format!("(remove {flag})"),
                Some(Value::Bool(true)) => flag,
                Some(Value::Bool(false)) => flag.replacen("--", "--no-", 1),
                Some(Value::String(s)) => format!("{flag} {}", shell_quote(s)),
                Some(Value::Number(n)) => format!("{flag} {n}"),
                Some(v) => format!("{flag} {}", shell_quote(&python_json(v))),
            }
        })
        .collect();
    let text = |v: Vec<String>| (!v.is_empty()).then(|| v.join(" "));
    Some(FixedFlags {
        flags: text(parts),
        env: text(vars),
    })
}

/// A word for a POSIX shell, as Python's `shlex.quote`: unchanged when it has
/// only safe characters, else in single quotes.
fn shell_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".to_owned();
    }
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

/// JSON with Python `json.dumps`' separators.
fn python_json(v: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonSeparators);
    serde::Serialize::serialize(v, &mut ser).expect("JSON values serialize");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

struct PythonSeparators;

impl serde_json::ser::Formatter for PythonSeparators {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        w.write_all(if first { b"" } else { b", " })
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.begin_array_value(w, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::{Code, FixOp};
    use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
    use crate::path::FieldPath;
    use serde_json::json;

    #[test]
    fn quoting_and_json_are_pythons() {
        assert_eq!(shell_quote("fp8_ds_mla"), "fp8_ds_mla");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
        assert_eq!(
            python_json(&json!({"a": [1, 2.5], "b": {"c": "d"}})),
            r#"{"a": [1, 2.5], "b": {"c": "d"}}"#
        );
    }

    #[test]
    fn scalars_first_then_json_flags_and_the_environment_apart() {
        let args = ServeArgs::from_json(json!({
            "model": "m",
            "block_size": 16,
            "scheduler_reserve_full_isl": false,
            "kv_transfer_config": {"kv_connector": "HiSparseConnector"},
            "compilation_config": {"cudagraph_mode": "NONE"},
            "VLLM_USE_V2_MODEL_RUNNER": "1",
        }))
        .unwrap();
        let p = |s: &str| FieldPath::parse(s).unwrap();
        let fix = vec![
            FixOp::Set {
                path: p("block_size"),
                value: json!(64),
            },
            FixOp::Remove {
                path: p("scheduler_reserve_full_isl"),
            },
            FixOp::Set {
                path: p("kv_transfer_config.kv_role"),
                value: json!("kv_both"),
            },
            FixOp::Remove {
                path: p("compilation_config"),
            },
            FixOp::Remove {
                path: p("VLLM_USE_V2_MODEL_RUNNER"),
            },
            FixOp::Set {
                path: p("model"),
                value: json!("other"),
            },
        ];
        let errors = [Diagnostic::error(Code::InvalidValue, p("block_size"), "x").fix(fix)];
        let fixed = fixed_flags(&args, &errors);
        assert_eq!(
            fixed.flags.as_deref(),
            Some(
                r#"--block-size 64 (remove --scheduler-reserve-full-isl) (remove --compilation-config) --kv-transfer-config '{"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}'"#
            )
        );
        assert_eq!(fixed.env.as_deref(), Some("unset VLLM_USE_V2_MODEL_RUNNER"));
        assert_eq!(fixed_flags(&args, &[]), FixedFlags::default());
    }
}
