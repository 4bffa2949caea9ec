//! Stage S3 with Python's semantics: `_parse_sparse_config`'s own checks
//! (srt/mem_cache/sparsity/factory.py:79-95, the 0.5.23 wheel) on the values
//! as `json.loads` gave them ([`crate::pyvalue`]), and what a value that
//! passes them does at the first later use. Each rule is one item: code,
//! SGLang's message, stage, file:line, fix.
//!
//! - `2 * top_k` (`pop`'s default for device_buffer_size, evaluated even when
//!   the key is given, factory.py:80): None or an object is a TypeError.
//! - `device_buffer_size < top_k` (factory.py:84-87): Python's `<` (`true` is
//!   1, `1e3` is 1000.0 and is refused with SGLang's own "device_buffer_size
//!   (1000.0) must be no smaller than top_k (2048)", a string against an int is
//!   a TypeError, NaN passes, integers of any size compare exactly).
//! - `swap_in_block_size` an int, not a bool, in [1, 1024] (factory.py:88-95),
//!   printed with Python's repr.
//! - A top_k that passes is not used again: SGLang runs with the model's
//!   `index_topk` (model_executor/model_runner.py:1038-1041).
//! - A device_buffer_size that passes but is no int (a float, NaN, a string, a
//!   list) or is beyond 64 bits fails when the coordinator sizes its tensors
//!   by it (`device_buffer_size + page_size`, torch.zeros,
//!   managers/hisparse_coordinator.py:644-696).
//! - A host_to_device_ratio that is NaN or infinite fails in the indexer cell
//!   size `int(... * indexer_ratio)` (model_executor/pool_configurator.py:584-586,
//!   :633-635), still after the weights load; one beyond 64 bits where the
//!   allocator sizes its pool by it (mem_cache/allocator/hisparse.py:22-72).

use super::diagnostics::SglangDiagnostic;
use super::hisparse_config::{key_path, DEFAULT_TOP_K, MAX_SWAP_IN_BLOCK_SIZE};
use super::resolution::Resolution;
use super::rules_late::good_device_buffer;
use super::stages::SglangStage::{self, AfterWeightsLoad, CoordinatorInit, PoolBuild};
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::pyvalue::PyValue;
use serde_json::{json, Value};

fn set_key(key: &str, value: Value) -> FixOp {
    FixOp::Set {
        path: key_path(key),
        value,
    }
}

fn err(code: Code, key: &str, msg: String, stage: SglangStage, given: &PyValue) -> Diagnostic {
    Diagnostic::error(code, key_path(key), msg)
        .stage(stage)
        .given(&given.to_json())
}

/// The top_k a fix writes: the model's index_topk (what SGLang runs with), else 2048.
fn good_top_k(r: &Resolution<'_>) -> i64 {
    r.index_topk.unwrap_or(DEFAULT_TOP_K)
}

/// A bool, an int or a float: what Python's `<` compares with an int.
fn numeric(v: &PyValue) -> bool {
    matches!(v, PyValue::Bool(_) | PyValue::Int(_) | PyValue::Float(_))
}

/// The fix of a device_buffer_size: a good buffer, and top_k set to what runs
/// when top_k is not an int (the comparison uses it).
fn buffer_fix(r: &Resolution<'_>) -> Vec<FixOp> {
    let mut ops = Vec::new();
    if r.top_k_int().is_none() {
        ops.push(set_key("top_k", json!(good_top_k(r))));
    }
    if let Some(good) = good_device_buffer(r) {
        ops.push(set_key("device_buffer_size", json!(good)));
    }
    ops
}

/// [`buffer_fix`], keeping the user's value when it is an integral float
/// every buffer rule accepts (`4096.0` -> 4096).
fn float_buffer_fix(r: &Resolution<'_>, dbs: &PyValue) -> Vec<FixOp> {
    let mut ops = buffer_fix(r);
    if let (PyValue::Float(f), Some(good)) = (dbs, good_device_buffer(r)) {
        let page = r.page();
        let max = super::rules_late::MAX_DEVICE_BUFFER_SIZE;
        if f.fract() == 0.0 && *f >= good as f64 && *f <= max as f64 && (*f as i64) % page == 0 {
            if let Some(FixOp::Set { value, .. }) = ops.last_mut() {
                *value = json!(*f as i64);
            }
        }
    }
    ops
}

/// S3 (factory.py:79-95) and the first use of what passes it.
pub(crate) fn check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let py = &r.py;
    let top_k_given = r.config.contains_key("top_k");
    let dbs_given = r.config.contains_key("device_buffer_size");
    let dbs = match &py.device_buffer_size {
        // factory.py:80.
        Err(type_error) => {
            d.push(
                err(Code::HisparseConfigInvalidType, "top_k", format!("TypeError: {type_error} (hisparse_config.top_k {} is doubled for device_buffer_size's default, 2 * top_k, even when device_buffer_size is given: mem_cache/sparsity/factory.py:80, after the weights load)", py.top_k.repr()), AfterWeightsLoad, &py.top_k)
                    .allowed("an integer")
                    .fix(vec![set_key("top_k", json!(good_top_k(r)))]),
            );
            None
        }
        Ok(v) => Some(v),
    };
    if let Some(dbs) = dbs {
        match dbs.lt(&py.top_k) {
            // factory.py:84: a comparison Python refuses.
            Err(type_error) => {
                let (key, value, fix) = if !numeric(&py.top_k) {
                    (
                        "top_k",
                        &py.top_k,
                        vec![set_key("top_k", json!(good_top_k(r)))],
                    )
                } else {
                    ("device_buffer_size", dbs, buffer_fix(r))
                };
                d.push(
                    err(Code::HisparseConfigInvalidType, key, format!("TypeError: {type_error} (device_buffer_size < top_k, mem_cache/sparsity/factory.py:84, after the weights load: hisparse_config.{key} {} must be an integer)", value.repr()), AfterWeightsLoad, value)
                        .allowed("an integer")
                        .fix(fix),
                );
            }
            // factory.py:84-87, SGLang's message with Python's str() of each.
            Ok(true) => d.push(
                err(
                    Code::DeviceBufferSizeBelowTopK,
                    "device_buffer_size",
                    format!(
                        "device_buffer_size ({}) must be no smaller than top_k ({})",
                        dbs.py_str(),
                        py.top_k.py_str()
                    ),
                    AfterWeightsLoad,
                    dbs,
                )
                .allowed(format!(">= top_k {}", py.top_k.py_str()))
                .fix(buffer_fix(r)),
            ),
            Ok(false) => after_s3(r, dbs, dbs_given, d),
        }
    }
    swap_in_block_size(r, d);
    ratio_first_use(r, d);
    // A top_k that passes and is no int: SGLang runs with index_topk
    // (model_runner.py:1038-1041) and nothing else reads it.
    if top_k_given && r.top_k_int().is_none() && dbs.is_some_and(|v| v.lt(&py.top_k) == Ok(false)) {
        if let Some(k) = r.index_topk {
            d.push(
                Diagnostic::warning(Code::TopKDiffersFromIndexTopk, key_path("top_k"), format!("hisparse_config.top_k {} is not an integer; SGLang compares device_buffer_size with it (factory.py:84) and then runs with the model's index_topk {k} (model_executor/model_runner.py:1038-1041)", py.top_k.repr()))
                    .stage(SglangStage::Never)
                    .given(&py.top_k.to_json())
                    .allowed(format!("{k} (the model's index_topk)"))
                    .fix(vec![set_key("top_k", json!(k))]),
            );
        }
    }
}

/// A device_buffer_size that passed S3 but that the coordinator cannot size
/// its tensors by: not an int (a bool is one), or beyond 64 bits.
fn after_s3(r: &Resolution<'_>, dbs: &PyValue, given: bool, d: &mut Vec<Diagnostic>) {
    if r.device_buffer().is_some() {
        return;
    }
    let why = if matches!(dbs, PyValue::Int(_)) {
        "is beyond what torch sizes a tensor by (64 bits)"
    } else {
        "is not an integer"
    };
    // Defaulted from a top_k that is no int (2 * '64' is '6464'): top_k is the user's error.
    let (key, value, fix) = if given {
        ("device_buffer_size", dbs, float_buffer_fix(r, dbs))
    } else {
        (
            "top_k",
            &r.py.top_k,
            vec![set_key("top_k", json!(good_top_k(r)))],
        )
    };
    d.push(
        err(Code::HisparseConfigInvalidType, key, format!("hisparse_config.{key} must be an integer: device_buffer_size {} passes SGLang's parse (factory.py:84) but {why}; SGLang fails when the coordinator sizes its tensors by it (device_buffer_size + page_size, torch.zeros, managers/hisparse_coordinator.py:644-696)", dbs.repr()), CoordinatorInit, value)
            .allowed("an integer")
            .fix(fix),
    );
}

/// factory.py:88-95, with Python's repr and integers of any size.
fn swap_in_block_size(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let swap = &r.py.swap_in_block_size;
    if !swap.is_int() {
        let fixed = match swap {
            PyValue::Float(f) if f.is_finite() => {
                (f.round().clamp(1.0, MAX_SWAP_IN_BLOCK_SIZE as f64)) as i64
            }
            _ => super::hisparse_config::DEFAULT_SWAP_IN_BLOCK_SIZE,
        };
        d.push(
            err(
                Code::SwapInBlockSizeNotInt,
                "swap_in_block_size",
                format!("swap_in_block_size must be an integer, got {}", swap.repr()),
                AfterWeightsLoad,
                swap,
            )
            .allowed("an integer in [1, 1024]")
            .fix(vec![set_key("swap_in_block_size", json!(fixed))]),
        );
        return;
    }
    let low = PyValue::from_json(&json!(0));
    let high = PyValue::from_json(&json!(MAX_SWAP_IN_BLOCK_SIZE));
    let too_low = !low.lt(swap).unwrap_or(true);
    if too_low || high.lt(swap).unwrap_or(false) {
        let fixed = if too_low { 1 } else { MAX_SWAP_IN_BLOCK_SIZE };
        d.push(
            err(
                Code::SwapInBlockSizeOutOfRange,
                "swap_in_block_size",
                format!(
                    "swap_in_block_size ({}) must be in the range [1, 1024]",
                    swap.py_str()
                ),
                AfterWeightsLoad,
                swap,
            )
            .allowed("1 to 1024")
            .fix(vec![set_key("swap_in_block_size", json!(fixed))]),
        );
    }
}

/// A host_to_device_ratio NaN, infinite or beyond 64 bits (the other forms
/// are rules_late's): where SGLang first computes with it.
fn ratio_first_use(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let ratio = &r.py.host_to_device_ratio;
    let fix = vec![set_key(
        "host_to_device_ratio",
        json!(super::hisparse_config::DEFAULT_HOST_TO_DEVICE_RATIO),
    )];
    let (msg, stage) = match ratio {
        PyValue::Float(f) if f.is_nan() => (
            "ValueError: cannot convert float NaN to integer".to_owned(),
            AfterWeightsLoad,
        ),
        PyValue::Float(f) if f.is_infinite() => (
            "OverflowError: cannot convert float infinity to integer".to_owned(),
            AfterWeightsLoad,
        ),
        PyValue::Int(i) if i.to_i64().is_none() => (
            format!(
                "host_to_device_ratio {} is beyond what torch sizes the HiSparse pool by (64 bits)",
                i.text()
            ),
            PoolBuild,
        ),
        _ => return,
    };
    let at = if stage == AfterWeightsLoad {
        "when SGLang sizes the indexer cells after the weights load (int(... * indexer_ratio), model_executor/pool_configurator.py:584-586, :633-635)"
    } else {
        "when SGLang builds the HiSparse allocator (mem_cache/allocator/hisparse.py:22-72)"
    };
    d.push(
        err(
            Code::HisparseConfigInvalidType,
            "host_to_device_ratio",
            format!("{msg}: host_to_device_ratio {} fails {at}", ratio.repr()),
            stage,
            ratio,
        )
        .allowed("an integer >= 1")
        .fix(fix),
    );
}
