//! `--context-length` against the length SGLang derives from the model's
//! config (`ModelConfig._derive_context_length`, srt/configs/model_config.py,
//! stage resolve), with or without HiSparse.

use super::diagnostics::SglangDiagnostic;
use super::resolution::Resolution;
use super::stages::SglangStage::Resolve;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use serde_json::json;

/// The environment variable that lets a longer `--context-length` through
/// (srt/environ.py:320, an EnvBool: true/1/yes/y, any case).
pub const ALLOW_LONGER_CONTEXT_ENV: &str = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN";

/// Whether `value` of [`ALLOW_LONGER_CONTEXT_ENV`] is true as SGLang's
/// EnvBool reads it (srt/environ.py:143-150).
pub fn env_true(value: Option<&str>) -> bool {
    value.is_some_and(|v| matches!(v.to_lowercase().as_str(), "true" | "1" | "yes" | "y"))
}

/// `--context-length` above the derived length: ValueError at resolve unless
/// SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set (model_config.py:1296-1316;
/// read here from the process environment). The fix is the derived length,
/// the longest SGLang serves without the override.
pub(crate) fn check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let (Some(given), Some(derived)) = (r.args.context_length, r.context_len) else {
        return;
    };
    if given <= derived || env_true(std::env::var(ALLOW_LONGER_CONTEXT_ENV).ok().as_deref()) {
        return;
    }
    let msg = format!(
        "Warning: User-specified context_length ({given}) is greater than the derived context_length ({derived}). This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ from max_position_embeddings in the model's config. To allow overriding this maximum, set the env var {ALLOW_LONGER_CONTEXT_ENV}=1"
    );
    d.push(
        Diagnostic::error(
            Code::ContextLengthOverDerived,
            FieldPath::root("context_length"),
            msg,
        )
        .stage(Resolve)
        .given(&json!(given))
        .allowed(format!(
            "at most {derived}, the model's derived context length, unless {ALLOW_LONGER_CONTEXT_ENV}=1"
        ))
        .fix(vec![FixOp::Set {
            path: FieldPath::root("context_length"),
            value: json!(derived),
        }]),
    );
}
