//! `--hisparse-config`, read as SGLang 0.5.23 reads it after the weights load
//! (`_parse_sparse_config`, srt/mem_cache/sparsity/factory.py:62-117): JSON
//! text, an object; `top_k` 2048, `device_buffer_size` 2 x top_k,
//! `host_to_device_ratio` 2, `swap_in_block_size` 960 when absent; any other
//! key is kept silently.

use super::diagnostics::SglangDiagnostic;
use super::stages::SglangStage;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use crate::pyvalue::PyValue;
use serde_json::Value;

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

/// The object a `hisparse_config` value stands for, as Python's `json.loads`
/// reads it (factory.py:70-75: NaN, Infinity, `1e400` as inf, integers of any
/// size, a repeated key's last value; [`crate::pyvalue::loads`]): `Ok(None)`
/// when not given (absent or null), `Ok(Some(dict))` for JSON text of an
/// object (or an object from Python, read as `json.loads(json.dumps(obj))`),
/// `Err` with SGLang's failure otherwise (stage after_weights_load).
pub fn parse(value: Option<&Value>) -> Result<Option<PyDict>, Box<Diagnostic>> {
    let path = FieldPath::root("hisparse_config");
    let parsed = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => {
            match crate::pyvalue::loads(text, crate::limits::MAX_JSON_DEPTH) {
                Ok(v) => v,
                Err(e) => {
                    // factory.py:73-75: a JSONDecodeError is re-raised as
                    // ValueError("Failed to parse hisparse_config: ..."); json.loads'
                    // other errors (an int over 4300 digits) propagate as they are.
                    let msg = if e.decode_error {
                        format!("ValueError: Failed to parse hisparse_config: {}", e.message)
                    } else {
                        format!("{}: {}", e.exception, e.message)
                    };
                    return Err(Box::new(Diagnostic::error(
                    Code::HisparseConfigInvalidJson,
                    path,
                    format!("{msg} (SGLang reads --hisparse-config with json.loads only after the weights load, mem_cache/sparsity/factory.py:70-75)"),
                )
                .stage(SglangStage::AfterWeightsLoad)
                .given(&Value::String(text.clone()))
                .allowed("a JSON object, e.g. '{\"top_k\": 2048, \"device_buffer_size\": 4096}'")
                .fix(vec![FixOp::Remove { path: FieldPath::root("hisparse_config") }])));
                }
            }
        }
        Some(other) => PyValue::from_json(other),
    };
    match parsed {
        PyValue::Dict(pairs) => Ok(Some(pairs)),
        other => {
            // factory.py:79 `extra_config.pop("top_k", 2048)`: a list raises
            // TypeError, anything else AttributeError (FACTS_sglang.md #1).
            let exception = match &other {
                PyValue::List(_) => "TypeError: pop expected at most 1 argument, got 2".to_owned(),
                v => format!(
                    "AttributeError: '{}' object has no attribute 'pop'",
                    v.type_name()
                ),
            };
            Err(Box::new(Diagnostic::error(
                Code::HisparseConfigNotObject,
                path,
                format!("{exception} (hisparse_config must be a JSON object; SGLang fails at extra_config.pop(\"top_k\", 2048), mem_cache/sparsity/factory.py:79, after the weights load)"),
            )
            .stage(SglangStage::AfterWeightsLoad)
            .given(&other.to_json())
            .allowed("a JSON object")
            .fix(vec![FixOp::Remove { path: FieldPath::root("hisparse_config") }])))
        }
    }
}

/// A dict as `json.loads` gives it: keys in order, each once.
pub type PyDict = Vec<(String, PyValue)>;

/// The value of `key` in a dict.
pub fn get<'a>(dict: &'a PyDict, key: &str) -> Option<&'a PyValue> {
    dict.iter().find(|(k, _)| k == key).map(|(_, v)| v)
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
        assert_eq!(get(&m, "top_k").unwrap().as_i64(), Some(1024));
        // Python's json.loads reads NaN, Infinity and 1e400 (inf): no JSON error.
        let m = parse(Some(&json!(
            "{\"top_k\": NaN, \"device_buffer_size\": 1e400}"
        )))
        .unwrap()
        .unwrap();
        assert_eq!(get(&m, "device_buffer_size").unwrap().repr(), "inf");
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
