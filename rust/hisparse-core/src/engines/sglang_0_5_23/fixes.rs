//! Fixes on the JSON form of [`SglangArgs`]: every error's [`FixOp`]s, applied
//! in report order, re-checked. The fix form has `hisparse_config` as an
//! object (its JSON text parsed), so fixes of its keys (`hisparse_config.device_buffer_size`)
//! compose with each other and keep the user's other keys.

use super::args::SglangArgs;
use super::flags::python_json;
use crate::diagnostic::{apply_fix as apply_ops, Diagnostic, FixOp};
use serde_json::Value;

/// `args` as JSON, with `hisparse_config` parsed into an object when its
/// text is a JSON object (else as given).
pub fn fix_form(args: &SglangArgs) -> Value {
    let mut v = args.to_json();
    if let Some(Value::String(text)) = v.get("hisparse_config") {
        if let Ok(obj @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
            v["hisparse_config"] = obj;
        }
    }
    v
}

/// `args` with the fixes of every diagnostic in `diags` applied, or None when
/// one does not apply or the result is not `SglangArgs`.
pub fn apply_all(args: &SglangArgs, diags: &[Diagnostic]) -> Option<SglangArgs> {
    let mut doc = fix_form(args);
    for d in diags {
        apply_ops(&mut doc, &d.fix).ok()?;
    }
    SglangArgs::from_json(doc).ok()
}

/// `args` with one diagnostic's fix `ops` applied (all or nothing), in the
/// form the user gave them: a `hisparse_config` given as JSON text stays text
/// (written as Python's `json.dumps` writes it, as `--hisparse-config` takes
/// it), one given as an object stays an object. Err: an op that does not
/// apply ([`crate::diagnostic::apply_fix`]'s message), or a result that is no
/// `ServerArgs` the check reads (an attribute of the wrong type).
pub fn apply_fix(args: &SglangArgs, ops: &[FixOp]) -> Result<SglangArgs, String> {
    let mut doc = fix_form(args);
    apply_ops(&mut doc, ops)?;
    if matches!(args.hisparse_config, Some(Value::String(_))) {
        if let Some(obj @ Value::Object(_)) = doc.get("hisparse_config") {
            doc["hisparse_config"] = Value::String(python_json(obj));
        }
    }
    SglangArgs::from_json_explained(doc)
        .map_err(|e| format!("the fix leaves invalid SGLang server args: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::FieldPath;
    use serde_json::json;

    fn set(path: &str, value: Value) -> FixOp {
        FixOp::Set {
            path: FieldPath::parse(path).unwrap(),
            value,
        }
    }

    #[test]
    fn a_fix_keeps_the_form_the_user_gave() {
        let text = SglangArgs::from_json(json!({
            "tp_size": 8,
            "hisparse_config": "{\"top_k\": 2048, \"device_buffer_size\": 4000}"
        }))
        .unwrap();
        let fixed = apply_fix(
            &text,
            &[set("hisparse_config.device_buffer_size", json!(4032))],
        )
        .unwrap();
        assert_eq!(
            fixed.hisparse_config,
            Some(json!("{\"top_k\": 2048, \"device_buffer_size\": 4032}"))
        );
        assert_eq!(fixed.tp_size, Some(8));
        let object = SglangArgs::from_json(json!({"hisparse_config": {"top_k": 2048}})).unwrap();
        let fixed = apply_fix(
            &object,
            &[set("hisparse_config.host_to_device_ratio", json!(4))],
        )
        .unwrap();
        assert_eq!(
            fixed.hisparse_config,
            Some(json!({"top_k": 2048, "host_to_device_ratio": 4}))
        );
        let err = apply_fix(&object, &[set("tp_size", json!("8"))]).unwrap_err();
        assert!(err.contains("tp_size must be an int"), "{err}");
    }
}
