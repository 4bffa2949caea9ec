//! A `--config` YAML file as vLLM 0.33 reads it: `yaml.safe_load`
//! (`vllm/utils/argparse_utils.py` `load_config_file`), converted to JSON.
//!
//! - `safe_load` refuses every tag outside YAML's standard ones
//!   (`!!python/object`, a local `!foo`): so do we, naming the tag. serde_yaml_ng
//!   drops unknown `!!` tags silently, so the tags are read first from
//!   libyaml's event stream (the parser serde_yaml_ng itself runs).
//! - `.inf` / `.nan` stay what they are: the strings `inf`, `-inf`, `nan`
//!   (Python's `str()`, what vLLM passes on for a top-level value; inside a
//!   mapping the resolver reads them with Python's `float()` rules), never null.

use serde_json::{Map, Value};
use serde_yaml_ng::Value as Yaml;

/// PyYAML SafeConstructor's tags (`tag:yaml.org,2002:` + these).
const SAFE_TAGS: &[&str] = &[
    "null",
    "bool",
    "int",
    "float",
    "binary",
    "timestamp",
    "omap",
    "pairs",
    "set",
    "str",
    "seq",
    "map",
];
const CORE_PREFIX: &str = "tag:yaml.org,2002:";

/// The tags written in `text`, in document order. A parse error returns what
/// was read so far: serde_yaml_ng then reports the error itself.
fn tags(text: &str) -> Vec<String> {
    use std::mem::MaybeUninit;
    use unsafe_libyaml as unsafe_y;
    let mut out = Vec::new();
    // SAFETY: the parser and event are initialised by libyaml before use and
    // deleted on every path; the input outlives the parser; tag pointers are
    // NUL-terminated strings owned by the event until yaml_event_delete.
    unsafe {
        let mut parser = MaybeUninit::<unsafe_y::yaml_parser_t>::uninit();
        if unsafe_y::yaml_parser_initialize(parser.as_mut_ptr()).fail {
            return out;
        }
        let parser = parser.as_mut_ptr();
        unsafe_y::yaml_parser_set_input_string(parser, text.as_ptr(), text.len() as u64);
        loop {
            let mut event = MaybeUninit::<unsafe_y::yaml_event_t>::uninit();
            if unsafe_y::yaml_parser_parse(parser, event.as_mut_ptr()).fail {
                break;
            }
            let event = event.as_mut_ptr();
            let tag = match (*event).type_ {
                unsafe_y::YAML_SCALAR_EVENT => (*event).data.scalar.tag,
                unsafe_y::YAML_SEQUENCE_START_EVENT => (*event).data.sequence_start.tag,
                unsafe_y::YAML_MAPPING_START_EVENT => (*event).data.mapping_start.tag,
                _ => std::ptr::null_mut(),
            };
            if !tag.is_null() {
                let c = std::ffi::CStr::from_ptr(tag.cast());
                out.push(c.to_string_lossy().into_owned());
            }
            let end = (*event).type_ == unsafe_y::YAML_STREAM_END_EVENT;
            unsafe_y::yaml_event_delete(event);
            if end {
                break;
            }
        }
        unsafe_y::yaml_parser_delete(parser);
    }
    out
}

fn shown(tag: &str) -> String {
    match tag.strip_prefix(CORE_PREFIX) {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_owned(),
    }
}

fn refused(file: &str, tag: &str) -> String {
    format!(
        "--config {file}: the YAML tag {} is refused: vLLM reads --config with yaml.safe_load, \
         which accepts only YAML's standard tags (!!str, !!int, !!float, !!bool, !!null, !!map, \
         !!seq, ...); remove the tag and write the plain value",
        shown(tag)
    )
}

/// Parse a `--config` file's text to JSON, as `yaml.safe_load` would read it.
pub fn to_json(text: &str, file: &str) -> Result<Value, String> {
    for tag in tags(text) {
        let safe = tag
            .strip_prefix(CORE_PREFIX)
            .is_some_and(|t| SAFE_TAGS.contains(&t))
            || tag == "!";
        if !safe {
            return Err(refused(file, &tag));
        }
    }
    let doc: Yaml = serde_yaml_ng::from_str(text)
        .map_err(|e| format!("--config {file} is not valid YAML: {e}"))?;
    convert(doc, file)
}

/// YAML -> JSON; depth is bounded by serde_yaml_ng's own recursion limit.
fn convert(v: Yaml, file: &str) -> Result<Value, String> {
    Ok(match v {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                match serde_json::Number::from_f64(f) {
                    Some(num) => Value::Number(num),
                    // Python's str(): "inf", "-inf", "nan".
                    None if f.is_nan() => Value::from("nan"),
                    None if f > 0.0 => Value::from("inf"),
                    None => Value::from("-inf"),
                }
            }
        }
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(|x| convert(x, file))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) => s,
                    // json.dumps writes these keys as text (vLLM dumps nested mappings).
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    Yaml::Null => "null".to_owned(),
                    _ => {
                        return Err(format!(
                            "--config {file}: a mapping key must be a plain value, not a list or mapping"
                        ))
                    }
                };
                out.insert(key, convert(v, file)?);
            }
            Value::Object(out)
        }
        Yaml::Tagged(t) => return Err(refused(file, &t.tag.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn non_standard_tags_are_refused() {
        for text in [
            "a: !!python/object:os.system x\n",
            "a: !!python/object/apply:os.system [ls]\n",
            "a: !foo 1\n",
            "a: {b: !<tag:example.com,2000:x> 1}\n",
        ] {
            let e = to_json(text, "f.yaml").unwrap_err();
            assert!(
                e.contains("is refused") && e.contains("f.yaml"),
                "{text}: {e}"
            );
        }
        assert!(to_json("a: !!python/object:os.system x\n", "f.yaml")
            .unwrap_err()
            .contains("!!python/object:os.system"));
        assert_eq!(
            to_json("a: !!str 123\nb: !!int '7'\nc: !!float 1\n", "f").unwrap(),
            json!({"a": "123", "b": 7, "c": 1.0})
        );
    }

    #[test]
    fn inf_and_nan_are_not_null() {
        let v = to_json(
            "a: .inf\nb: -.inf\nc: .nan\nd: {host_pool_gib: .inf}\n",
            "f",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"a": "inf", "b": "-inf", "c": "nan", "d": {"host_pool_gib": "inf"}})
        );
    }
}
