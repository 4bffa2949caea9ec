//! vLLM 0.33.0's diagnostics: [`VllmDiagnostic::error`] and
//! [`VllmDiagnostic::warning`] take the stage from vLLM 0.33.0's table
//! ([`super::stages`]); [`VllmDiagnostic::fix`] words a fix with the
//! `vllm serve` flag that does it. Import the trait and write
//! `Diagnostic::error(code, path, message)`.

use super::stages;
use crate::diagnostic::{Code, Diagnostic, FixOp, Severity};
use crate::path::{FieldPath, Seg};
use serde_json::Value;

/// The constructors and the fix of a vLLM 0.33.0 rule.
pub trait VllmDiagnostic: Sized {
    /// An error at the code's stage in vLLM 0.33.0's table.
    fn error(code: Code, path: FieldPath, message: impl Into<String>) -> Self;
    /// A warning at the code's stage in vLLM 0.33.0's table.
    fn warning(code: Code, path: FieldPath, message: impl Into<String>) -> Self;
    /// Attach a fix; when no hint was written, the hint says what the fix
    /// does ([`describe_fix`]).
    fn fix(self, ops: Vec<FixOp>) -> Self;
}

impl VllmDiagnostic for Diagnostic {
    fn error(code: Code, path: FieldPath, message: impl Into<String>) -> Self {
        Diagnostic::new(code, Severity::Error, stages::stage_of(code), path, message)
    }

    fn warning(code: Code, path: FieldPath, message: impl Into<String>) -> Self {
        Diagnostic::new(
            code,
            Severity::Warning,
            stages::stage_of(code),
            path,
            message,
        )
    }

    fn fix(self, ops: Vec<FixOp>) -> Self {
        self.fix_described(ops, describe_fix)
    }
}

/// Words for a fix, with the `vllm serve` flag that does it where there is one.
pub fn describe_fix(ops: &[FixOp]) -> String {
    let parts: Vec<String> = ops
        .iter()
        .map(|op| match op {
            FixOp::Set { path, value } => match serve_flag(path, value) {
                Some(flag) => format!("set {path} to {value} (vllm serve: {flag})"),
                None => format!("set {path} to {value}"),
            },
            // Upper-case top-level fields are environment variables.
            FixOp::Remove { path } if matches!(path.0.as_slice(), [Seg::Key(k)] if k.chars().all(|c| !c.is_ascii_lowercase())) => {
                format!("unset {path}")
            }
            FixOp::Remove { path } => format!("remove {path}"),
            FixOp::Move { from, to } => format!("move {from} to {to}"),
        })
        .collect();
    parts.join("; ")
}

/// The flag form of setting a top-level field: `--block-size 64`. Nested JSON
/// paths get none: vLLM's dotted flags replace a JSON flag given on the same
/// command line instead of editing it, so suggesting one could drop settings.
fn serve_flag(path: &FieldPath, value: &Value) -> Option<String> {
    let [Seg::Key(first)] = path.0.as_slice() else {
        return None;
    };
    if first.chars().any(|c| c.is_ascii_uppercase()) || first == "model" || first == "hf_config" {
        return None; // environment variables and the model are not flags
    }
    let name = format!("--{}", first.replace('_', "-"));
    Some(match value {
        Value::Bool(true) => name,
        Value::Bool(false) => name.replacen("--", "--no-", 1),
        Value::String(s)
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) =>
        {
            format!("{name} {s}")
        }
        Value::Number(n) => format!("{name} {n}"),
        other => format!("{name} '{other}'"),
    })
}
