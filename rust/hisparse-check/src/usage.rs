//! Reading hisparse-check's own command line, for both engines' fronts: the
//! value parsers of its flags (Python's `int()`/`float()`, token and byte
//! counts as vLLM's `human_readable_int` reads them) and the usage error that
//! exits 2. Its own module so that `lib.rs` and `sglang_cli.rs` both import it
//! and neither imports the other.

use crate::argv::human_readable_int;

/// A command line hisparse-check cannot read: its own message, or clap's.
pub(crate) enum Usage {
    Message(String),
    Clap(clap::Error),
}

/// vLLM's `type=int` flags (vllm/engine/arg_utils.py `_compute_kwargs`):
/// Python's `int(text)`, so ` 8`, `+8`, `0_8` and `٨` are 8.
pub(crate) fn parse_py_int(text: &str) -> Result<i64, String> {
    match hisparse_core::pytext::py_int(text) {
        Some(n) => n
            .to_i64()
            .ok_or_else(|| format!("{text:?} is beyond the 64-bit integers the check reads")),
        None => Err(format!(
            "invalid int value: {text:?} (Python's int() refuses it, so vllm serve refuses it too)"
        )),
    }
}

/// vLLM's `type=float` flags: Python's `float(text)` (` 0.9`, `0_9e-1`).
pub(crate) fn parse_py_float(text: &str) -> Result<f64, String> {
    hisparse_core::pytext::py_float_text(text).ok_or_else(|| {
        format!(
            "invalid float value: {text:?} (Python's float() refuses it, so vllm serve refuses it too)"
        )
    })
}

pub(crate) fn parse_max_model_len(text: &str) -> Result<i64, String> {
    let stripped = hisparse_core::pytext::py_str_strip(text);
    if stripped.eq_ignore_ascii_case("auto") || stripped == "-1" {
        return Ok(-1);
    }
    human_readable_int(text).ok_or_else(|| {
        format!("{text:?} is not a token count (examples: 131072, 128k, 128K, auto)")
    })
}

pub(crate) fn parse_bytes(text: &str) -> Result<i64, String> {
    human_readable_int(text).ok_or_else(|| {
        format!("{text:?} is not a number of bytes (examples: 21474836480, 20G, 20g)")
    })
}

pub(crate) fn parse_tokens(text: &str) -> Result<u64, String> {
    human_readable_int(text)
        .and_then(|n| u64::try_from(n).ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{text:?} is not a token count (examples: 131072, 128k, 128K)"))
}
