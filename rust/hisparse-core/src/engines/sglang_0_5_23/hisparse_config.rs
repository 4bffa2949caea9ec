//! `--hisparse-config`, read as SGLang 0.5.23 reads it after the weights load
//! (`_parse_sparse_config`, srt/mem_cache/sparsity/factory.py:62-117): JSON
//! text, an object; `top_k` 2048, `device_buffer_size` 2 x top_k,
//! `host_to_device_ratio` 2, `swap_in_block_size` 960 when absent; any other
//! key is kept silently.

use super::stages::SglangStage;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use serde_json::{Map, Value};

/// The keys `_parse_sparse_config` pops (factory.py:81-108).
pub const KNOWN_KEYS: &[&str] = &[
    "top_k",
    "device_buffer_size",
    "host_to_device_ratio",
    "swap_in_block_size",
    "algorithm",
    "backend",
    "min_sparse_prompt_len",
    "page_size",
];

/// Default `top_k` (factory.py:81).
pub const DEFAULT_TOP_K: i64 = 2048;
/// Default `host_to_device_ratio` (factory.py:83).
pub const DEFAULT_HOST_TO_DEVICE_RATIO: i64 = 2;
/// Default `swap_in_block_size` (factory.py:84).
pub const DEFAULT_SWAP_IN_BLOCK_SIZE: i64 = 960;
/// Largest `swap_in_block_size` (factory.py:95-98).
pub const MAX_SWAP_IN_BLOCK_SIZE: i64 = 1024;

/// The object a `hisparse_config` value stands for: `Ok(None)` when not given
/// (absent or null), `Ok(Some(map))` for JSON text of an object (or an object
/// from Python), `Err` with SGLang's failure otherwise (stage after_weights_load).
pub fn parse(value: Option<&Value>) -> Result<Option<Map<String, Value>>, Box<Diagnostic>> {
    let path = FieldPath::root("hisparse_config");
    let parsed = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(v) => v,
            Err(e) => {
                // factory.py:71-74: json.loads raises; SGLang re-raises as ValueError.
                return Err(Box::new(Diagnostic::error(
                    Code::HisparseConfigInvalidJson,
                    path,
                    format!("Failed to parse hisparse_config: {e} (SGLang reads --hisparse-config only after the weights load)"),
                )
                .stage(SglangStage::AfterWeightsLoad)
                .given(&Value::String(text.clone()))
                .allowed("a JSON object, e.g. '{\"top_k\": 2048, \"device_buffer_size\": 4096}'")
                .fix(vec![FixOp::Remove { path: FieldPath::root("hisparse_config") }])));
            }
        },
        Some(v @ Value::Object(_)) => v.clone(),
        Some(other) => other.clone(),
    };
    match parsed {
        Value::Object(map) => Ok(Some(map)),
        other => {
            // factory.py:81 `extra_config.pop("top_k", 2048)` on a list, number or
            // string: TypeError / AttributeError.
            let kind = match &other {
                Value::Array(_) => "list",
                Value::Null => "NoneType",
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                _ => "str",
            };
            Err(Box::new(Diagnostic::error(
                Code::HisparseConfigNotObject,
                path,
                format!("hisparse_config must be a JSON object; SGLang fails on a {kind} at extra_config.pop(\"top_k\", 2048) (mem_cache/sparsity/factory.py:81) after the weights load"),
            )
            .stage(SglangStage::AfterWeightsLoad)
            .given(&other)
            .allowed("a JSON object")
            .fix(vec![FixOp::Remove { path: FieldPath::root("hisparse_config") }])))
        }
    }
}

/// An integer that is not a bool (Python's `isinstance(x, int) and not isinstance(x, bool)`).
pub fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// `hisparse_config.KEY`.
pub fn key_path(key: &str) -> FieldPath {
    FieldPath::root("hisparse_config").key(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_text_objects_and_refuses_the_rest() {
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some(&Value::Null)).unwrap(), None);
        let m = parse(Some(&json!("{\"top_k\": 1024}"))).unwrap().unwrap();
        assert_eq!(m["top_k"], json!(1024));
        assert!(parse(Some(&json!({"top_k": 1}))).unwrap().is_some());
        let e = parse(Some(&json!("{top_k: 1}"))).unwrap_err();
        assert_eq!(e.code, Code::HisparseConfigInvalidJson);
        assert_eq!(e.stage, SglangStage::AfterWeightsLoad.into());
        let e = parse(Some(&json!("[1, 2]"))).unwrap_err();
        assert_eq!(e.code, Code::HisparseConfigNotObject);
        assert_eq!(as_int(&json!(true)), None);
        assert_eq!(as_int(&json!(2.0)), None);
        assert_eq!(as_int(&json!(3)), Some(3));
    }
}
