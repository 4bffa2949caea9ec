//! vLLM's argv dialect, before clap sees it (vLLM 0.33
//! `FlexibleArgumentParser.parse_args`):
//! - `--config FILE.yaml` is expanded in place of the flag, ahead of the other
//!   flags so that flags on the command line win;
//! - underscores in flag names become dashes (`--max_model_len`);
//! - dotted flags (`--kv-transfer-config.kv_role kv_both`, `--x.y+ a,b`) are
//!   collected into one JSON object per flag, passed as if written in JSON.

use crate::vllm_flags::{negatable, VLLM_BOOLEAN_FLAGS, VLLM_FLAGS};
use hisparse_core::config::args::{flag_name, JSON_FIELDS};
use hisparse_core::files::read_regular;
use hisparse_core::limits::MAX_SERVE_CONFIG_BYTES;
use serde_json::{Map, Value};

/// Deepest dotted flag accepted (`--a.b.c` is 2 deep): the merge and the JSON
/// it builds recurse, so argv must not choose the depth. Real configs nest < 10.
const MAX_DOTTED_DEPTH: usize = 64;

/// vLLM's multi-letter single-dash aliases.
const SHORT_ALIASES: &[(&str, &str)] = &[
    ("-tp", "--tensor-parallel-size"),
    ("-pp", "--pipeline-parallel-size"),
    ("-dp", "--data-parallel-size"),
    ("-dpl", "--data-parallel-size-local"),
    ("-dcp", "--decode-context-parallel-size"),
    ("-pcp", "--prefill-context-parallel-size"),
    ("-n", "--nnodes"),
    ("-r", "--node-rank"),
    ("-dpn", "--data-parallel-rank"),
    ("-dpb", "--data-parallel-backend"),
    ("-cc", "--compilation-config"),
    ("-ep", "--enable-expert-parallel"),
];

/// Split normalized argv into what clap knows (`known` long names) and the
/// other `vllm serve` flags with their values; a flag vLLM does not have either
/// is an error, as in vLLM. A vLLM flag takes the next token as its value
/// unless it is boolean or that token is itself a flag.
pub fn set_aside_unknown(
    args: Vec<String>,
    known: &[String],
    origins: &Origins,
) -> Result<(Vec<String>, Vec<String>), String> {
    let is_value = |t: &str| !t.starts_with('-') || t.parse::<f64>().is_ok();
    let mut kept = Vec::with_capacity(args.len());
    let mut ignored = Vec::new();
    let mut it = args.into_iter().peekable();
    while let Some(arg) = it.next() {
        let (name, long) = if let Some(long) = arg.strip_prefix("--") {
            (long.split('=').next().unwrap_or_default().to_owned(), true)
        } else if arg.len() > 1 && !is_value(&arg) && arg != "-h" && arg != "-V" {
            (arg.split('=').next().unwrap_or_default().to_owned(), false)
        } else {
            kept.push(arg);
            continue;
        };
        if arg == "--" || (long && known.contains(&name)) {
            kept.push(arg);
            continue;
        }
        let optimization_level = !long && name.starts_with("-O");
        let negated = name.strip_prefix("no-").filter(|b| negatable(b));
        if !(VLLM_FLAGS.contains(&name.as_str()) || negated.is_some() || optimization_level) {
            let dashes = if long { "--" } else { "" };
            let candidates: Vec<&str> = known
                .iter()
                .map(String::as_str)
                .chain(VLLM_FLAGS.iter().copied())
                .collect();
            let opposite = name
                .strip_prefix("enable-")
                .map(|rest| format!("disable-{rest}"));
            // A HiSparse setting written as a flag: say where it goes, with the value given.
            let value = it
                .peek()
                .filter(|v| is_value(v))
                .map_or("VALUE", String::as_str)
                .to_owned();
            let hint = match hisparse_setting_flag(&name, &value) {
                Some(hint) => hint,
                None => match hisparse_core::config::schema::closest(&name, &candidates) {
                    // --enable-X where only --disable-X exists: its argparse negation is --no-disable-X.
                    _ if opposite
                        .as_ref()
                        .is_some_and(|o| candidates.contains(&o.as_str())) =>
                    {
                        format!("; vLLM spells it --no-{}", opposite.unwrap_or_default())
                    }
                    Some(best) if best.starts_with('-') => format!("; did you mean {best}?"),
                    Some(best) => format!("; did you mean --{best}?"),
                    None => String::new(),
                },
            };
            let from = origins
                .iter()
                .find(|(flag, _)| *flag == name)
                .map(|(_, at)| format!(" in {at}"))
                .unwrap_or_default();
            return Err(format!(
                "unrecognized flag {dashes}{name}{from} (vllm serve {} rejects it too){hint}",
                hisparse_core::VLLM_VERSION
            ));
        }
        let boolean = arg.contains('=')
            || negated.is_some()
            || VLLM_BOOLEAN_FLAGS.contains(&name.as_str())
            || (optimization_level && name.len() > 2);
        ignored.push(arg);
        if !boolean {
            if let Some(value) = it.next_if(|t| is_value(t)) {
                ignored.push(value);
            }
        }
    }
    Ok((kept, ignored))
}

/// Where a HiSparse setting goes when it was written as a flag of its own
/// (`--host-pool-gib 64`), which no closest flag name would say.
fn hisparse_setting_flag(name: &str, value: &str) -> Option<String> {
    let field = name.replace('-', "_");
    match field.as_str() {
        "host_pool_gib" => Some(format!(
            "; host_pool_gib is a setting of the HiSparseConnector: put it in its kv_connector_extra_config, e.g. --kv-transfer-config '{{\"kv_connector\": \"HiSparseConnector\", \"kv_role\": \"kv_both\", \"kv_connector_extra_config\": {{\"host_pool_gib\": {value}}}}}'"
        )),
        "device_buffer_size" | "eager_host_mirror" => Some(format!(
            "; {field} is a HiSparseConfig setting: --attention-config.hisparse_config.{field} {value}"
        )),
        _ => None,
    }
}

/// JSON flags given more than once: `(field, count)`. argparse keeps the last.
pub fn replaced_json_flags(args: &[String]) -> Vec<(String, usize)> {
    JSON_FIELDS
        .iter()
        .filter_map(|field| {
            let flag = flag_name(field);
            let count = args
                .iter()
                .filter(|a| {
                    **a == flag
                        || a.strip_prefix(flag.as_str())
                            .is_some_and(|rest| rest.starts_with('='))
                })
                .count();
            (count > 1).then(|| ((*field).to_owned(), count))
        })
        .collect()
}

/// Where flags read from a `--config` file came from: (flag name without
/// dashes, "FILE line N"), for messages.
pub type Origins = Vec<(String, String)>;

/// Expand `--config`, normalize flag names and fold dotted flags; also
/// returns where the flags from a `--config` file are in it.
pub fn preprocess(args: &[String]) -> Result<(Vec<String>, Origins), String> {
    let (args, origins) = pull_config_file(args)?;
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    let mut dicts: Vec<(String, Value)> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = normalize_name(&args[i]);
        i += 1;
        let is_dotted =
            arg.starts_with('-') && arg.split('=').next().is_some_and(|name| name.contains('.'));
        if !is_dotted {
            out.push(arg);
            continue;
        }
        let (name, value) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), value.to_owned()),
            None => {
                let value = args
                    .get(i)
                    .cloned()
                    .ok_or_else(|| format!("{arg} expects a value"))?;
                i += 1;
                (arg, value)
            }
        };
        let (name, value) = match name.strip_suffix('+') {
            Some(stripped) => (
                stripped.to_owned(),
                Value::Array(
                    value
                        .split(',')
                        .map(|s| Value::String(s.to_owned()))
                        .collect(),
                ),
            ),
            None => (name, parse_dotted_value(&value)),
        };
        let mut keys = name.split('.');
        let flag = keys.next().unwrap_or_default().to_owned();
        let keys: Vec<&str> = keys.collect();
        if keys.iter().any(|k| k.is_empty()) {
            return Err(format!("{name}: empty key in dotted flag"));
        }
        if keys.len() > MAX_DOTTED_DEPTH {
            return Err(format!(
                "{flag}: dotted flags nest at most {MAX_DOTTED_DEPTH} keys deep; pass the value as JSON instead"
            ));
        }
        let nested = keys.iter().rev().fold(value, |acc, key| {
            let mut m = Map::new();
            m.insert((*key).to_owned(), acc);
            Value::Object(m)
        });
        match dicts.iter_mut().find(|(f, _)| *f == flag) {
            Some((_, existing)) => merge(existing, nested),
            None => dicts.push((flag, nested)),
        }
    }
    for (flag, value) in dicts {
        out.push(flag);
        out.push(value.to_string());
    }
    Ok((out, origins))
}

/// `--max_model_len=4` -> `--max-model-len=4`: dashes in the name up to the first '.'.
fn normalize_name(arg: &str) -> String {
    for (short, long) in SHORT_ALIASES {
        if let Some(rest) = arg.strip_prefix(short) {
            if rest.is_empty() || rest.starts_with(['=', '.']) {
                return format!("{long}{rest}");
            }
        }
    }
    let Some(body) = arg.strip_prefix("--") else {
        return arg.to_owned();
    };
    let end = body.find(['.', '=']).unwrap_or(body.len());
    format!("--{}{}", body[..end].replace('_', "-"), &body[end..])
}

/// JSON if it parses, else a human-readable int (`80g`), else the string.
fn parse_dotted_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| match human_readable_int(text) {
        Some(n) => Value::from(n),
        None => Value::String(text.to_owned()),
    })
}

/// vLLM `recursive_dict_update`: objects merge, lists concatenate, the rest is replaced.
fn merge(original: &mut Value, update: Value) {
    match (original, update) {
        (Value::Object(o), Value::Object(u)) => {
            for (k, v) in u {
                match o.get_mut(&k) {
                    Some(existing)
                        if (existing.is_object() && v.is_object())
                            || (existing.is_array() && v.is_array()) =>
                    {
                        merge(existing, v)
                    }
                    _ => {
                        o.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(o), Value::Array(u)) => o.extend(u),
        (o, u) => *o = u,
    }
}

/// vLLM `human_readable_int`: `1k` = 1000, `1K` = 1024, `25.6k` = 25600;
/// decimals are refused with binary suffixes.
pub fn human_readable_int(text: &str) -> Option<i64> {
    let t = text.trim();
    if let Some(n) = python_int(t) {
        return Some(n);
    }
    let suffix = t.chars().last()?;
    let number = &t[..t.len() - suffix.len_utf8()];
    // vLLM's pattern: (\d+(?:\.\d+)?) then one suffix letter.
    let mut parts = number.splitn(2, '.');
    let whole = parts.next().unwrap_or_default();
    let frac = parts.next();
    let digits = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    if !digits(whole) || frac.is_some_and(|f| !digits(f)) {
        return None;
    }
    let decimal = match suffix {
        'k' => Some(1e3),
        'm' => Some(1e6),
        'g' => Some(1e9),
        't' => Some(1e12),
        _ => None,
    };
    if let Some(mult) = decimal {
        return Some((number.parse::<f64>().ok()? * mult) as i64);
    }
    let shift = match suffix {
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => return None,
    };
    number.parse::<i64>().ok()?.checked_mul(1i64 << shift)
}

/// Python `int(text)` for base-10 text: an optional sign, digits, single
/// underscores between digits (`1_000`).
fn python_int(t: &str) -> Option<i64> {
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    let valid = !body.is_empty()
        && !body.starts_with('_')
        && !body.ends_with('_')
        && !body.contains("__")
        && body.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !valid {
        return None;
    }
    t.replace('_', "").parse().ok()
}

fn pull_config_file(args: &[String]) -> Result<(Vec<String>, Origins), String> {
    if args.iter().any(|a| a.starts_with("--config=")) {
        // vLLM looks for the word "--config" only, so vllm serve would ignore this file.
        return Err(
            "write --config FILE as two words: vllm serve ignores --config=FILE".to_owned(),
        );
    }
    let positions: Vec<usize> = args
        .iter()
        .enumerate()
        .filter(|(_, a)| *a == "--config")
        .map(|(i, _)| i)
        .collect();
    let Some(&index) = positions.first() else {
        return Ok((args.to_vec(), Vec::new()));
    };
    if positions.len() > 1 {
        return Err("more than one --config file given".to_owned());
    }
    let file = args
        .get(index + 1)
        .cloned()
        .ok_or("--config expects a YAML file path")?;
    let consumed = 2;
    let (config_args, origins) = load_config_file(&file)?;
    let mut out = config_args;
    out.extend_from_slice(&args[..index]);
    out.extend_from_slice(&args[index + consumed..]);
    Ok((out, origins))
}

/// vLLM `load_config_file`: a YAML mapping of flag names to values (read as
/// `yaml.safe_load` reads it: [`crate::yaml`]), flattened to argv, and where
/// each key is in the file.
pub fn load_config_file(file: &str) -> Result<(Vec<String>, Origins), String> {
    if !(file.ends_with(".yaml") || file.ends_with(".yml")) {
        return Err(format!(
            "--config {file}: the config file must be .yaml or .yml"
        ));
    }
    let bytes = read_regular(std::path::Path::new(file), MAX_SERVE_CONFIG_BYTES)
        .map_err(|e| format!("cannot read --config {file}: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("cannot read --config {file}: it is not UTF-8 text ({e})"))?;
    let entries = crate::yaml::load(&text, file)?;
    config_argv(&entries, file)
}

/// vLLM's loop over the file's top-level mapping: `True` gives `--key`,
/// `False` gives `--no-key` where argparse has that option (only the
/// dashed spelling: `scheduler_reserve_full_isl: false` is dropped by
/// vLLM), a non-empty list `--key str(item)...`, a mapping `--key
/// json.dumps(value)`, anything else `--key str(value)`.
fn config_argv(
    entries: &[crate::yaml::Entry],
    file: &str,
) -> Result<(Vec<String>, Origins), String> {
    use crate::yaml::{py_str, to_json, Py};
    let mut out = Vec::new();
    let mut origins = Vec::new();
    for e in entries {
        let at = format!("{file} line {}", e.line);
        let located = |msg: String| format!("--config {at}: {}: {msg}", e.key);
        origins.push((e.key.replace('_', "-"), at.clone()));
        let key = &e.key;
        // "--" + key on a key that is not text: TypeError, where it runs.
        let passed = match &e.value {
            Py::Bool(false) => false,
            Py::List(items) => !items.is_empty(),
            _ => true,
        };
        if passed && !e.text {
            return Err(format!(
                "--config {at}: the flag name {key} is not text (vLLM's \"--\" + key raises TypeError); quote it"
            ));
        }
        match &e.value {
            Py::Bool(true) => out.push(format!("--{key}")),
            Py::Bool(false) => {
                if e.text && negatable(key) {
                    out.push(format!("--no-{key}"));
                }
            }
            Py::List(items) => {
                if !items.is_empty() {
                    out.push(format!("--{key}"));
                    for item in items {
                        out.push(py_str(item).map_err(located)?);
                    }
                }
            }
            value @ Py::Dict(_) => {
                out.push(format!("--{key}"));
                out.push(to_json(value).map_err(located)?.to_string());
            }
            other => {
                out.push(format!("--{key}"));
                out.push(py_str(other).map_err(located)?);
            }
        }
    }
    Ok((out, origins))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn dotted_flags_fold_into_json() {
        let (out, _) = preprocess(&s(&[
            "--kv-transfer-config.kv_connector",
            "HiSparseConnector",
            "--kv_transfer_config.kv_role=kv_both",
            "--kv-transfer-config.kv_connector_extra_config.host_pool_gib",
            "64",
        ]))
        .unwrap();
        assert_eq!(out[0], "--kv-transfer-config");
        let v: Value = serde_json::from_str(&out[1]).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
                "kv_connector_extra_config": {"host_pool_gib": 64}})
        );
    }

    #[test]
    fn unknown_vllm_flags_are_set_aside_with_their_values() {
        let known = vec!["model".to_owned(), "block-size".to_owned()];
        let (kept, ignored) = set_aside_unknown(
            s(&[
                "m",
                "--port",
                "8000",
                "--trust-remote-code",
                "--block-size",
                "64",
                "--enable-prefix-caching",
                "-q",
                "fp8",
                "-O3",
                "--served-model-name=x",
                "--seed",
                "-1",
            ]),
            &known,
            &Vec::new(),
        )
        .unwrap();
        assert_eq!(kept, s(&["m", "--block-size", "64"]));
        assert_eq!(
            ignored,
            s(&[
                "--port",
                "8000",
                "--trust-remote-code",
                "--enable-prefix-caching",
                "-q",
                "fp8",
                "-O3",
                "--served-model-name=x",
                "--seed",
                "-1"
            ])
        );
    }

    #[test]
    fn flags_vllm_does_not_have_are_errors_with_a_suggestion() {
        let known = vec!["kv-transfer-config".to_owned()];
        let err =
            set_aside_unknown(s(&["--kv-transfer-confg", "{}"]), &known, &Vec::new()).unwrap_err();
        assert!(err.contains("did you mean --kv-transfer-config?"), "{err}");
        assert!(
            set_aside_unknown(s(&["--prot", "8000"]), &known, &Vec::new())
                .unwrap_err()
                .contains("--port")
        );
        let err =
            set_aside_unknown(s(&["--host_pool_gib", "64"]), &known, &Vec::new()).unwrap_err();
        assert!(err.contains("\"host_pool_gib\": 64"), "{err}");
        // A flag from a --config file says where it is.
        let origins = vec![(
            "kv-transfer-confg".to_owned(),
            "serve.yaml line 3".to_owned(),
        )];
        let err =
            set_aside_unknown(s(&["--kv-transfer-confg", "{}"]), &known, &origins).unwrap_err();
        assert!(
            err.contains("--kv-transfer-confg in serve.yaml line 3"),
            "{err}"
        );
    }

    #[test]
    fn repeated_json_flags_are_counted() {
        let args = s(&[
            "--kv-transfer-config",
            "{}",
            "--kv-transfer-config={}",
            "--attention-config",
            "{}",
        ]);
        assert_eq!(
            replaced_json_flags(&args),
            vec![("kv_transfer_config".to_owned(), 2)]
        );
    }

    #[test]
    fn human_readable_ints() {
        assert_eq!(human_readable_int("1k"), Some(1000));
        assert_eq!(human_readable_int("1K"), Some(1024));
        assert_eq!(human_readable_int("25.6k"), Some(25600));
        assert_eq!(human_readable_int("1.5K"), None);
        assert_eq!(human_readable_int("128"), Some(128));
        assert_eq!(human_readable_int("abc"), None);
        assert_eq!(human_readable_int("1_000"), Some(1000));
        assert_eq!(human_readable_int(".5k"), None);
        assert_eq!(human_readable_int("5.k"), None);
        assert_eq!(human_readable_int("1__0"), None);
    }

    /// Numbers compare as f64 (JSON flag text holds an int beyond 64 bits as a float).
    fn same_json(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((ka, va), (kb, vb))| ka == kb && same_json(va, vb))
            }
            _ => a == b,
        }
    }

    /// tests/vectors/serve_config_yaml.json: what vLLM 0.33.0 makes of each
    /// file (tests/vllm/test_yaml_vectors.py checks the vectors against it).
    #[test]
    fn config_files_read_as_vllm_reads_them() {
        // HISPARSE_YAML_VECTORS: another file of cases in this form (to
        // triage many generated files at once against this reader).
        let path = std::env::var("HISPARSE_YAML_VECTORS").unwrap_or_else(|_| {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/vectors/serve_config_yaml.json"
            )
            .to_owned()
        });
        let vectors: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut wrong = Vec::new();
        for case in vectors["cases"].as_array().unwrap() {
            let text = case["yaml"].as_str().unwrap();
            let got =
                crate::yaml::load(text, "serve.yaml").and_then(|e| config_argv(&e, "serve.yaml"));
            match (got, case.get("argv")) {
                (Ok((argv, _)), Some(Value::Array(want))) => {
                    let same = argv.len() == want.len()
                        && argv.iter().zip(want).all(|(a, w)| match w {
                            Value::String(w) => a == w,
                            w => serde_json::from_str::<Value>(a).is_ok_and(|a| same_json(&a, w)),
                        });
                    if !same {
                        wrong.push(format!("{text:?}: got {argv:?}, vLLM {want:?}"));
                    }
                }
                (Err(e), None) => {
                    if !e.contains("serve.yaml") {
                        wrong.push(format!("{text:?}: the error does not name the file: {e}"));
                    }
                }
                (got, _) => wrong.push(format!("{text:?}: got {got:?}, want {case}")),
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn underscores_become_dashes() {
        assert_eq!(normalize_name("--max_model_len=4"), "--max-model-len=4");
        assert_eq!(
            normalize_name("--kv_transfer_config.kv_role"),
            "--kv-transfer-config.kv_role"
        );
        assert_eq!(normalize_name("-tp"), "--tensor-parallel-size");
        assert_eq!(
            normalize_name("-cc.cudagraph_mode"),
            "--compilation-config.cudagraph_mode"
        );
        assert_eq!(normalize_name("-tpx"), "-tpx");
    }
}
