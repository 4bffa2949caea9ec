//! SGLang 0.5.23's diagnostics: [`SglangDiagnostic::error`] and
//! [`SglangDiagnostic::warning`] build a diagnostic whose stage each rule then
//! sets explicitly with `.stage(...)` (SGLang's stage depends on where the rule
//! fires, so there is no code-to-stage table; `never` until set);
//! [`SglangDiagnostic::fix`] words a fix with the `sglang serve` flag that does
//! it ([`super::flags::describe_fix`]). Import the trait and write
//! `Diagnostic::error(code, path, message).stage(stage)`.

use super::stages::SglangStage;
use crate::diagnostic::{Code, Diagnostic, FixOp, Severity};
use crate::path::FieldPath;

/// The constructors and the fix of an SGLang 0.5.23 rule.
pub trait SglangDiagnostic: Sized {
    /// An error (its stage set by the rule).
    fn error(code: Code, path: FieldPath, message: impl Into<String>) -> Self;
    /// A warning (its stage set by the rule; `never` for what SGLang takes).
    fn warning(code: Code, path: FieldPath, message: impl Into<String>) -> Self;
    /// Attach a fix; when no hint was written, the hint says what the fix does
    /// in SGLang flags.
    fn fix(self, ops: Vec<FixOp>) -> Self;
}

impl SglangDiagnostic for Diagnostic {
    fn error(code: Code, path: FieldPath, message: impl Into<String>) -> Self {
        Diagnostic::new(code, Severity::Error, SglangStage::Never, path, message)
    }

    fn warning(code: Code, path: FieldPath, message: impl Into<String>) -> Self {
        Diagnostic::new(code, Severity::Warning, SglangStage::Never, path, message)
    }

    fn fix(self, ops: Vec<FixOp>) -> Self {
        self.fix_described(ops, super::flags::describe_fix)
    }
}
