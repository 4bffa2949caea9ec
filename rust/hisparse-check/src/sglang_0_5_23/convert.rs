//! The `type=` callables of SGLang 0.5.23's options, applied to one value as
//! argparse applies them (`_get_value`): the value as JSON, or the error text
//! argparse puts after `argument --flag: `.

use super::flags::Ty;
use hisparse_core::pytext::{
    json_loads, py_float_json, py_float_text, py_int, py_str_strip, JsonFlag,
};
use serde_json::Value;

/// Python's `repr()` of a str, as argparse quotes a refused value (the core's,
/// which escapes C1 controls as Python does).
pub use hisparse_core::pyvalue::str_repr as py_repr;

/// argparse's message for a `type` that raised ValueError or TypeError.
fn invalid(name: &str, text: &str) -> String {
    format!("invalid {name} value: {}", py_repr(text))
}

/// `text` converted by `ty`, or argparse's error text.
pub fn convert(ty: Ty, text: &str) -> Result<Value, String> {
    match ty {
        Ty::None | Ty::Str => Ok(Value::from(text)),
        Ty::Int => int_or_bound(text),
        Ty::Float => py_float_text(text)
            .map(py_float_json)
            .ok_or_else(|| invalid("float", text)),
        Ty::JsonLoads => json_loads(text, JsonFlag::Loads).map_err(|_| invalid("loads", text)),
        // orjson reads strict JSON: no NaN or Infinity (common.py:4818-4824).
        Ty::JsonList => serde_json::from_str(text)
            .map_err(|_| format!("Invalid JSON list: {text}. Please provide a valid JSON list.")),
        Ty::HumanReadableInt => human_readable_int(text),
        Ty::NullableStr if text.is_empty() || text == "None" => Ok(Value::Null),
        Ty::NullableStr => Ok(Value::from(text)),
        Ty::CudaGraphBackend if text == "tc_piecewise" => {
            Err("tc_piecewise was removed; select breakable, full, or disabled".to_owned())
        }
        Ty::CudaGraphBackend => Ok(Value::from(text)),
        // The phases and their keys are checked by SGLang too
        // (cuda_graph_config.py:262-282); the check does not read this flag, so
        // only its JSON object shape is checked here.
        Ty::CudaGraphConfig => match json_loads(text, JsonFlag::Loads) {
            Err(e) => Err(format!("--cuda-graph-config must be JSON: {e}")),
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(v) => Err(format!(
                "--cuda-graph-config must be a JSON object, got {}",
                py_type_name(&v)
            )),
        },
    }
}

/// The end of the message for an integer Python reads but the check cannot
/// hold (beyond i64): not argparse's refusal, the check's own bound.
pub const BEYOND_I64: &str = "is beyond the 64-bit integers the check reads (-2**63 ..= 2**63 - 1)";

fn int(text: &str) -> Option<Value> {
    py_int(text).and_then(|n| n.to_i64()).map(Value::from)
}

/// `int()`: argparse's error for text Python does not read, the check's bound
/// for an integer beyond i64.
fn int_or_bound(text: &str) -> Result<Value, String> {
    match py_int(text) {
        None => Err(invalid("int", text)),
        Some(n) => n
            .to_i64()
            .map(Value::from)
            .ok_or_else(|| format!("{} {BEYOND_I64}", py_repr(text))),
    }
}

fn py_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// SGLang's `human_readable_int` (srt/utils/common.py:3394-3429): an SI
/// (`k M G T`, decimals allowed, truncated) or IEC (`Ki Mi Gi Ti`, integers
/// only) suffix, case-sensitive, else Python's `int()`.
pub fn human_readable_int(text: &str) -> Result<Value, String> {
    let value = py_str_strip(text);
    const SUFFIXES: [(&str, u128, bool); 8] = [
        ("Ki", 1 << 10, true),
        ("Mi", 1 << 20, true),
        ("Gi", 1 << 30, true),
        ("Ti", 1 << 40, true),
        ("k", 1_000, false),
        ("M", 1_000_000, false),
        ("G", 1_000_000_000, false),
        ("T", 1_000_000_000_000, false),
    ];
    for (suffix, mult, iec) in SUFFIXES {
        let Some(number) = value.strip_suffix(suffix) else {
            continue;
        };
        let (whole, frac) = match number.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (number, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || frac.is_some_and(|f| !digits(f)) {
            break; // not the regex: Python's int() below
        }
        if iec && frac.is_some() {
            return Err(format!(
                "Decimals are not allowed with IEC suffixes like '{suffix}'. Use an integer IEC value such as '{whole}{suffix}', or an SI value such as '{number}{}'.",
                &suffix[..1]
            ));
        }
        let too_big = || format!("{} {BEYOND_I64}", py_repr(text));
        let w: u128 = whole.parse().map_err(|_| too_big())?;
        let mut total = w.checked_mul(mult).ok_or_else(too_big)?;
        if let Some(f) = frac {
            // int(Decimal(number) * multiplier): the fraction's share, truncated.
            let f = f.trim_end_matches('0');
            if !f.is_empty() {
                let num: u128 = f.parse().map_err(|_| too_big())?;
                let den = 10u128.checked_pow(f.len() as u32).ok_or_else(too_big)?;
                total += num.checked_mul(mult).ok_or_else(too_big)? / den;
            }
        }
        return i64::try_from(total).map(Value::from).map_err(|_| too_big());
    }
    if py_int(text).is_some() {
        return int_or_bound(text);
    }
    int(text).ok_or_else(|| {
        format!(
            "Invalid integer value: '{value}'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). Suffixes are case-sensitive."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argparse_types() {
        assert_eq!(convert(Ty::Int, " 8").unwrap(), json!(8));
        assert_eq!(
            convert(Ty::Int, "8.0").unwrap_err(),
            "invalid int value: '8.0'"
        );
        assert_eq!(convert(Ty::Float, "0_9e-1").unwrap(), json!(0.9));
        assert_eq!(convert(Ty::NullableStr, "None").unwrap(), Value::Null);
        assert_eq!(convert(Ty::JsonList, "[1, 2]").unwrap(), json!([1, 2]));
        assert!(
            convert(Ty::JsonList, "[NaN]").is_err(),
            "orjson refuses NaN"
        );
        assert!(convert(Ty::CudaGraphConfig, "[1]")
            .unwrap_err()
            .ends_with("got list"));
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert!(convert(Ty::Int, "99999999999999999999")
            .unwrap_err()
            .ends_with(BEYOND_I64));
        assert!(human_readable_int("99999999999999999999")
            .unwrap_err()
            .ends_with(BEYOND_I64));
    }

    #[test]
    fn human_readable_ints_as_sglang_reads_them() {
        assert_eq!(human_readable_int("1k").unwrap(), json!(1000));
        assert_eq!(human_readable_int("25.6k").unwrap(), json!(25600));
        assert_eq!(human_readable_int("1.0005k").unwrap(), json!(1000));
        assert_eq!(human_readable_int("1Ki").unwrap(), json!(1024));
        assert_eq!(human_readable_int(" 64 ").unwrap(), json!(64));
        assert!(human_readable_int("1.5Ki")
            .unwrap_err()
            .starts_with("Decimals"));
        assert!(human_readable_int("1K")
            .unwrap_err()
            .starts_with("Invalid integer"));
    }
}
