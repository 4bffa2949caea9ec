//! vLLM's argv dialect, before clap sees it (vLLM 0.33
//! `FlexibleArgumentParser.parse_args`):
//! - `--config FILE.yaml` is expanded in place of the flag, ahead of the other
//!   flags so that flags on the command line win;
//! - underscores in flag names become dashes (`--max_model_len`);
//! - dotted flags (`--kv-transfer-config.kv_role kv_both`, `--x.y+ a,b`) are
//!   collected into one JSON object per flag, passed as if written in JSON;
//! - then each word is read as argparse reads it ([`set_aside_unknown`]),
//!   with the table of `vllm serve` options in `vllm_flags`.

use crate::vllm_flags::{self, negatable, Flag, Takes, VLLM_FLAGS};
use hisparse_core::engines::vllm_0_33::args::{flag_name, JSON_FIELDS};
use hisparse_core::files::read_regular;
use hisparse_core::limits::MAX_SERVE_CONFIG_BYTES;
use hisparse_core::pytext::{
    human_readable, json_loads, py_int, py_number_text, py_str_strip, JsonFlag,
};
use serde_json::{Map, Value};

/// Deepest dotted flag accepted (`--a.b.c` is 2 deep): the merge and the JSON
/// it builds recurse, so argv must not choose the depth. Real configs nest < 10.
const MAX_DOTTED_DEPTH: usize = 64;

/// What argparse makes of one argv word (Python 3.11 `_parse_optional`).
enum Word {
    /// A value or a positional argument ('A').
    Value,
    /// An option of `flag`, as `spelled` (its full spelling, after an
    /// abbreviation), with the value after `=` or glued to a short option.
    Option {
        flag: Option<&'static Flag>,
        spelled: String,
        off: bool,
        explicit: Option<String>,
    },
    /// An option nobody has.
    Unknown(String),
}

/// argparse's negative-number pattern (`^-\d+$|^-\d*\.\d+$`): such a word is
/// a value, as `vllm serve` has no option that looks like a number.
fn negative_number(word: &str) -> bool {
    let Some(rest) = word.strip_prefix('-') else {
        return false;
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    digits(rest)
        || rest
            .split_once('.')
            .is_some_and(|(a, b)| (a.is_empty() || digits(a)) && digits(b))
}

/// Classify `word` as argparse does: an exact option spelling, `--opt=value`,
/// a unique prefix of one (`--max-model 4096`, argparse's `allow_abbrev`), a
/// short option with its value glued on (`-qfp8`), a negative number or a
/// word with a space (values), or an unknown option. `ours` are the
/// spellings only hisparse-check has (`--json`, `--plan`, ...).
fn classify(word: &str, ours: &[String]) -> Result<Word, String> {
    if word.len() < 2 || !word.starts_with('-') || word == "--" {
        return Ok(Word::Value);
    }
    let option = |spelled: &str, explicit: Option<String>| -> Option<Word> {
        if ours.iter().any(|o| o == spelled) {
            return Some(Word::Option {
                flag: None,
                spelled: spelled.to_owned(),
                off: false,
                explicit,
            });
        }
        vllm_flags::lookup(spelled).map(|(flag, off)| Word::Option {
            flag: Some(flag),
            spelled: spelled.to_owned(),
            off,
            explicit,
        })
    };
    if let Some(w) = option(word, None) {
        return Ok(w);
    }
    if let Some((name, value)) = word.split_once('=') {
        if let Some(w) = option(name, Some(value.to_owned())) {
            return Ok(w);
        }
    }
    // argparse `_get_option_tuples`: every spelling the word is a prefix of.
    #[allow(clippy::map_identity)] // shortens the 'static spellings to ours'
    let every: Vec<&str> = vllm_flags::option_strings()
        .map(|s| s)
        .chain(ours.iter().map(String::as_str))
        .collect();
    let mut matches: Vec<(String, Option<String>)> = Vec::new();
    if word.starts_with("--") {
        let (prefix, explicit) = match word.split_once('=') {
            Some((p, v)) => (p, Some(v.to_owned())),
            None => (word, None),
        };
        matches.extend(
            every
                .iter()
                .filter(|s| s.starts_with(prefix))
                .map(|s| ((*s).to_owned(), explicit.clone())),
        );
    } else {
        let short = &word[..word.char_indices().nth(2).map_or(word.len(), |(i, _)| i)];
        let glued = &word[short.len()..];
        for s in every {
            if s == short {
                matches.push((s.to_owned(), Some(glued.to_owned())));
            } else if s.starts_with(word) {
                matches.push((s.to_owned(), None));
            }
        }
    }
    matches.sort();
    match matches.len() {
        0 => {}
        1 => {
            let (spelled, explicit) = matches.remove(0);
            return Ok(option(&spelled, explicit).unwrap_or(Word::Unknown(word.to_owned())));
        }
        _ => {
            let names: Vec<&str> = matches.iter().map(|(s, _)| s.as_str()).collect();
            return Err(format!(
                "ambiguous option: {word} could match {} (vllm serve {} refuses it too)",
                names.join(", "),
                hisparse_core::VLLM_VERSION
            ));
        }
    }
    if negative_number(word) || word.contains(' ') {
        return Ok(Word::Value);
    }
    Ok(Word::Unknown(word.to_owned()))
}

/// Split normalized argv into what clap reads (its own flags, spelled as
/// clap spells them, and every value or positional word) and the other
/// `vllm serve` flags with their values; a flag vLLM does not have either is
/// an error, as in vLLM. Each vLLM flag takes values as its row of
/// [`VLLM_FLAGS`] says: one, one or more (`--served-model-name a b`), an
/// optional one, or none (store_true, `--no-` forms), and only its choices.
/// `known` are clap's long names without dashes; those that are vLLM flags
/// too are checked, the others (`json`, `plan`, ...) are hisparse-check's.
pub fn set_aside_unknown(
    args: Vec<String>,
    known: &[String],
    origins: &Origins,
) -> Result<(Vec<String>, Vec<String>), String> {
    let ours: Vec<String> = known
        .iter()
        .filter(|k| vllm_flags::lookup(&format!("--{k}")).is_none())
        .map(|k| format!("--{k}"))
        .chain(["-V".to_owned()])
        .collect();
    let is_value = |w: &str| matches!(classify(w, &ours), Ok(Word::Value));
    let mut kept = Vec::with_capacity(args.len());
    let mut ignored = Vec::new();
    // Optional flags the check reads: (name, where in `kept`, words; 0 for a None value).
    let mut read_at: Vec<(&'static str, usize, usize)> = Vec::new();
    let mut it = args.into_iter().peekable();
    while let Some(arg) = it.next() {
        if arg == "--" {
            // argparse: everything after `--` is positional.
            kept.push(arg);
            kept.extend(it);
            break;
        }
        let (flag, spelled, off, explicit) = match classify(&arg, &ours)? {
            Word::Value => {
                kept.push(arg);
                continue;
            }
            Word::Unknown(name) => return Err(unknown_flag(&name, known, origins, it.peek())),
            Word::Option {
                flag: None,
                spelled,
                explicit,
                ..
            } => {
                kept.push(with_value(&spelled, explicit));
                continue;
            }
            Word::Option {
                flag: Some(flag),
                spelled,
                off,
                explicit,
            } => (flag, spelled, off, explicit),
        };
        if let (Takes::StoreTrue | Takes::Bool | Takes::Help, Some(v)) = (flag.takes, &explicit) {
            // argparse refuses a value on a flag that takes none, whether
            // or not the check reads the flag (`--headless=1`).
            return Err(vllm_refuses(
                &spelled,
                &format!("ignored explicit argument {v:?}"),
            ));
        }
        if known.iter().any(|k| k == flag.name) {
            // A flag the check reads, in clap's spelling (clap takes its values).
            let name = if off {
                format!("--no-{}", flag.name)
            } else {
                format!("--{}", flag.name)
            };
            let next = it.peek().filter(|w| *w != "--" && is_value(w)).cloned();
            let value = explicit.clone().or_else(|| next.clone());
            if flag.optional && flag.takes == Takes::One {
                if value
                    .as_deref()
                    .is_some_and(|v| v.is_empty() || v == "None")
                {
                    // vLLM's optional_type: `--kv-transfer-config None` (or "") is
                    // None, the default, as if the flag were not given.
                    if explicit.is_none() {
                        it.next();
                    }
                    read_at.push((flag.name, kept.len(), 0));
                    continue;
                }
                let words = 1 + usize::from(explicit.is_none() && next.is_some());
                read_at.push((flag.name, kept.len(), words));
            }
            kept.push(with_value(&name, explicit));
            continue;
        }
        let mut values = Vec::new();
        let glued = explicit.is_some();
        match (flag.takes, explicit) {
            (Takes::StoreTrue | Takes::Bool | Takes::Help, _) => {}
            (_, Some(v)) => values.push(v),
            (Takes::One, None) => match it.next_if(|w| w != "--" && is_value(w)) {
                Some(v) => values.push(v),
                None => return Err(vllm_refuses(&spelled, "expected one argument")),
            },
            (Takes::OneOrMore, None) => {
                while let Some(v) = it.next_if(|w| w != "--" && is_value(w)) {
                    values.push(v);
                }
                if values.is_empty() {
                    return Err(vllm_refuses(&spelled, "expected at least one argument"));
                }
            }
            (Takes::Optional, None) => values.extend(it.next_if(|w| w != "--" && is_value(w))),
        }
        // argparse's type, then its choices, on each value (`_get_values`).
        if let Some(Err(why)) = values.iter().map(|v| flag.check(v)).find(Result::is_err) {
            return Err(vllm_refuses(&spelled, &why));
        }
        ignored.push(arg);
        // A value after `=` or glued on is in `arg` already.
        ignored.extend(values.into_iter().skip(usize::from(glued)));
    }
    drop_reset_flags(&mut kept, &read_at);
    Ok((kept, ignored))
}

/// An optional flag whose last value was None (`--speculative-config None`)
/// is its default: argparse keeps the last value, so its earlier values go too.
fn drop_reset_flags(kept: &mut Vec<String>, read_at: &[(&'static str, usize, usize)]) {
    let reset: Vec<&str> = read_at
        .iter()
        .filter(|(name, _, words)| {
            *words == 0
                && read_at
                    .iter()
                    .rev()
                    .find(|(n, _, _)| n == name)
                    .map(|r| r.2)
                    == Some(0)
        })
        .map(|(name, _, _)| *name)
        .collect();
    for (name, at, words) in read_at.iter().rev() {
        if *words > 0 && reset.contains(name) {
            kept.drain(*at..*at + *words);
        }
    }
}

fn with_value(spelled: &str, explicit: Option<String>) -> String {
    match explicit {
        Some(v) => format!("{spelled}={v}"),
        None => spelled.to_owned(),
    }
}

/// `enable-X` where vLLM has only a store_true `--disable-X` (`--disable-log-stats`).
fn store_true_inverse(name: &str) -> bool {
    name.strip_prefix("enable-").is_some_and(|rest| {
        vllm_flags::lookup(&format!("--disable-{rest}"))
            .is_some_and(|(f, _)| f.takes == Takes::StoreTrue)
    })
}

/// argparse's refusal of an option's values, as `vllm serve` prints it.
fn vllm_refuses(spelled: &str, what: &str) -> String {
    format!(
        "argument {spelled}: {what} (vllm serve {} refuses it too)",
        hisparse_core::VLLM_VERSION
    )
}

/// The error for a flag neither vLLM nor hisparse-check has, with the
/// closest flag or where a HiSparse setting goes.
fn unknown_flag(arg: &str, known: &[String], origins: &Origins, next: Option<&String>) -> String {
    let (name, dashes) = match arg.strip_prefix("--") {
        Some(long) => (long.split('=').next().unwrap_or_default(), "--"),
        None => (arg.split('=').next().unwrap_or_default(), ""),
    };
    let vllm_names: Vec<String> = VLLM_FLAGS
        .iter()
        .map(|f| f.name.to_owned())
        .chain(
            VLLM_FLAGS
                .iter()
                .flat_map(|f| f.aliases.iter().map(|a| (*a).to_owned())),
        )
        .collect();
    let candidates: Vec<&str> = known
        .iter()
        .map(String::as_str)
        .chain(vllm_names.iter().map(String::as_str))
        .collect();
    // A HiSparse setting written as a flag: say where it goes, with the value given.
    let value = next
        .filter(|v| !v.starts_with('-') || negative_number(v))
        .map_or("VALUE", String::as_str);
    let hint = match hisparse_setting_flag(name, value) {
        Some(hint) => hint,
        // (--enable-X for a boolean --disable-X is a spelling vLLM has: EnableDisableAction.)
        None if store_true_inverse(name) => format!(
            "; vLLM has only --{} (store_true): leave the flag out for vLLM's default",
            name.replacen("enable-", "disable-", 1)
        ),
        None => match hisparse_core::engines::vllm_0_33::schema::closest(name, &candidates) {
            Some(best) if best.starts_with('-') => format!("; did you mean {best}?"),
            Some(best) => format!("; did you mean --{best}?"),
            None => String::new(),
        },
    };
    let from = origins
        .iter()
        .find(|(flag, _)| flag == name)
        .map(|(_, at)| format!(" in {at}"))
        .unwrap_or_default();
    format!(
        "unrecognized flag {dashes}{name}{from} (vllm serve {} rejects it too){hint}",
        hisparse_core::VLLM_VERSION
    )
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
    // vLLM: `-O <n>` is `--optimization-level <n>` for n in 0..=3.
    let mut words: Vec<String> = Vec::with_capacity(args.len());
    for (j, a) in args.iter().enumerate() {
        if a == "-O"
            && args
                .get(j + 1)
                .is_some_and(|n| ["0", "1", "2", "3"].contains(&n.as_str()))
        {
            words.push("--optimization-level".to_owned());
        } else {
            words.extend(normalize_name(a));
        }
    }
    let args = words;
    while i < args.len() {
        let arg = args[i].clone();
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

/// vLLM's spelling fixes before argparse (`FlexibleArgumentParser.parse_args`):
/// `--max_model_len=4` -> `--max-model-len=4` (dashes in the name up to the
/// first '.'), `--help=WORD` -> `--help`, `-O3` / `-O=3` -> `--optimization-level 3`;
/// and a short alias in its long spelling (`-tp.x` -> `--tensor-parallel-size.x`,
/// so that dotted flags of an alias fold with its long form).
fn normalize_name(arg: &str) -> Vec<String> {
    if arg.starts_with("--help=") {
        return vec!["--help".to_owned()];
    }
    if let Some(level) = arg.strip_prefix("-O").filter(|l| !l.is_empty()) {
        let level = level.strip_prefix('=').unwrap_or(level);
        return vec!["--optimization-level".to_owned(), level.to_owned()];
    }
    if !arg.starts_with("--") {
        let short = VLLM_FLAGS.iter().find_map(|f| {
            f.aliases
                .iter()
                .filter(|a| !a.starts_with("--"))
                .find_map(|a| {
                    arg.strip_prefix(a)
                        .filter(|rest| rest.is_empty() || rest.starts_with(['=', '.']))
                        .map(|rest| format!("--{}{rest}", f.name))
                })
        });
        return vec![short.unwrap_or_else(|| arg.to_owned())];
    }
    let body = &arg[2..];
    let end = body.find(['.', '=']).unwrap_or(body.len());
    vec![format!(
        "--{}{}",
        body[..end].replace('_', "-"),
        &body[end..]
    )]
}

/// vLLM's dotted value: `json.loads` if it parses (NaN included), else a
/// human-readable int (`80g`), else the string.
fn parse_dotted_value(text: &str) -> Value {
    json_loads(text, JsonFlag::Loads).unwrap_or_else(|_| match human_readable_int(text) {
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

/// vLLM `human_readable_int` (vllm/utils/argparse_utils.py): `1k` = 1000,
/// `1K` = 1024, `25.6k` = 25600 (decimals are refused with binary
/// suffixes), else Python's `int(value)` (`1_000`, ` 128 `).
pub fn human_readable_int(text: &str) -> Option<i64> {
    // `value.strip()`, then `\d` matches any script's decimal digits.
    let stripped = py_str_strip(text);
    if let Some(n) = py_int(stripped) {
        return n.to_i64();
    }
    let t = py_number_text(stripped);
    // vLLM's pattern: (\d+(?:\.\d+)?) then one suffix letter.
    let number = t.get(..t.len().checked_sub(1)?)?;
    let mut parts = number.splitn(2, '.');
    let whole = parts.next().unwrap_or_default();
    let frac = parts.next();
    let digits = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    if !digits(whole) || frac.is_some_and(|f| !digits(f)) {
        return None;
    }
    human_readable(&t)
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
    // vLLM `_pull_args_from_config`: a model given first on the command line
    // stays first (`vllm serve MODEL --config f.yaml`), so a list-valued flag
    // from the file (`served-model-name: [a, b]`) does not take it.
    let model_first = index > 0 && !args[0].starts_with('-');
    let mut out: Vec<String> = args[..usize::from(model_first)].to_vec();
    out.extend(config_args);
    out.extend_from_slice(&args[usize::from(model_first)..index]);
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

    /// preprocess then set_aside_unknown, as `parse` runs them.
    fn split(args: &[&str], known: &[&str]) -> Result<(Vec<String>, Vec<String>), String> {
        let known: Vec<String> = known.iter().map(|k| (*k).to_owned()).collect();
        let (args, origins) = preprocess(&s(args))?;
        set_aside_unknown(args, &known, &origins)
    }

    #[test]
    fn unknown_vllm_flags_are_set_aside_with_their_values() {
        let (kept, ignored) = split(
            &[
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
            ],
            &["model", "block-size"],
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
                "--quantization",
                "fp8",
                "--optimization-level",
                "3",
                "--served-model-name=x",
                "--seed",
                "-1"
            ])
        );
    }

    #[test]
    fn every_argparse_form_takes_its_values() {
        let known = [
            "model",
            "tensor-parallel-size",
            "enable-expert-parallel",
            "json",
        ];
        let ok = |args: &[&str]| split(args, &known).unwrap();
        // nargs="+": every value up to the next option.
        let (kept, ignored) = ok(&["m", "--served-model-name", "a", "b", "-tp", "8"]);
        assert_eq!(kept, s(&["m", "--tensor-parallel-size", "8"]));
        assert_eq!(ignored, s(&["--served-model-name", "a", "b"]));
        // ... and a model after them is one of them, as in argparse.
        assert_eq!(
            ok(&["--served-model-name", "a", "m"]).0,
            Vec::<String>::new()
        );
        // store_true and BooleanOptionalAction take none; the EnableDisableAction inverse.
        let (kept, ignored) = ok(&[
            "--headless",
            "m",
            "--disable-prefix-caching",
            "--disable-expert-parallel",
        ]);
        assert_eq!(kept, s(&["m", "--no-enable-expert-parallel"]));
        assert_eq!(ignored, s(&["--headless", "--disable-prefix-caching"]));
        // Abbreviations and glued short values (argparse allow_abbrev).
        let (kept, ignored) = ok(&[
            "m",
            "--tensor-parallel",
            "2",
            "--served-model",
            "x",
            "-qfp8",
            "--js",
        ]);
        assert_eq!(kept, s(&["m", "--tensor-parallel-size", "2", "--json"]));
        assert_eq!(ignored, s(&["--served-model", "x", "-qfp8"]));
        // nargs="?": alone or with one value.
        assert_eq!(
            ok(&["m", "--hf-token", "--port", "1"]).1,
            s(&["--hf-token", "--port", "1"])
        );
        assert_eq!(ok(&["m", "--hf-token", "t"]).1, s(&["--hf-token", "t"]));
        // Choices: the given one, or None where vLLM's optional_type adds it.
        assert_eq!(ok(&["m", "--dtype", "half"]).1, s(&["--dtype", "half"]));
        assert_eq!(
            ok(&["m", "--spec-method", "None"]).1,
            s(&["--spec-method", "None"])
        );
        // `--`: the rest is positional.
        assert_eq!(ok(&["--", "m"]).0, s(&["--", "m"]));
        for (args, want) in [
            (
                &["m", "--served-model-name"][..],
                "expected at least one argument",
            ),
            (&["m", "--port"], "expected one argument"),
            (&["m", "--port", "--", "1"], "expected one argument"),
            (&["m", "--port", "--seed", "1"], "expected one argument"),
            (&["m", "--seed", "-1e5"], "expected one argument"),
            (&["m", "--headless=1"], "ignored explicit argument"),
            (&["m", "--no-headless"], "unrecognized flag --no-headless"),
            (
                &["m", "--enable-log-stats"],
                "vLLM has only --disable-log-stats",
            ),
            (&["m", "--dtype", "float7"], "invalid choice: 'float7'"),
            (
                &["m", "--max-lora-rank", "7"],
                "invalid choice: 7 (choose from 1, 128",
            ),
            // Values argparse's type= refuses, whether or not the check reads the flag.
            (
                &["m", "--port", "abc"],
                "argument --port: invalid int value: 'abc'",
            ),
            (
                &["m", "--port=1.5"],
                "argument --port: invalid int value: '1.5'",
            ),
            (
                &["m", "--seed", "x"],
                "argument --seed: invalid int value: 'x'",
            ),
            (
                &["m", "--cudagraph-capture-sizes", "1", "2.5"],
                "invalid int value: '2.5'",
            ),
            (
                &["m", "--max-log-len", "abc"],
                "Value abc cannot be converted to <class 'int'>.",
            ),
            (
                &["m", "--kv-offloading-size", "x"],
                "Value x cannot be converted to <class 'float'>.",
            ),
            (
                &["m", "--max-num-batched-tokens", "1.5K"],
                "Decimals are not allowed",
            ),
            (
                &["m", "--hf-overrides", "{rope}"],
                "Value {rope} cannot be converted",
            ),
            (
                &["m", "--default-chat-template-kwargs", "x"],
                "invalid loads value: 'x'",
            ),
            (
                &["m", "--moe-backend", "tritonn"],
                "invalid choice: 'tritonn'",
            ),
            (&["m", "--max"], "ambiguous option: --max could match"),
            (&["m", "-d", "1"], "ambiguous option: -d could match"),
        ] {
            let err = split(args, &known).unwrap_err();
            assert!(err.contains(want), "{args:?}: {err}");
            assert!(err.contains("vllm serve 0.33.0"), "{err}");
        }
        assert_eq!(
            ok(&["m", "--max-lora-rank", "0_8"]).1,
            s(&["--max-lora-rank", "0_8"])
        );
        // An optional flag the check reads, given None: its default, so the
        // value before it goes too (argparse keeps the last).
        let known2 = ["model", "speculative-config"];
        let (kept, _) = split(
            &[
                "m",
                "--speculative-config",
                "{}",
                "--speculative-config=None",
            ],
            &known2,
        )
        .unwrap();
        assert_eq!(kept, s(&["m"]));
        let (kept, _) = split(
            &[
                "m",
                "--speculative-config",
                "",
                "--speculative-config",
                "{}",
            ],
            &known2,
        )
        .unwrap();
        assert_eq!(kept, s(&["m", "--speculative-config", "{}"]));
        // What argparse's types read passes: -1 for an int, None for an
        // optional one, a suffixed int, an upper-case backend it lowers.
        for args in [
            &["m", "--port", "-1"][..],
            &["m", "--max-log-len", "None"],
            &["m", "--max-num-batched-tokens", "16k"],
            &["m", "--moe-backend", "DEEP-GEMM"],
            &["m", "--hf-overrides", "cpu"],
            &["m", "--cpu-offload-gb", "1e1"],
        ] {
            assert_eq!(ok(args).1.len(), args.len() - 1, "{args:?}");
        }
    }

    #[test]
    fn yaml_lists_fill_nargs_flags() {
        let dir = std::env::temp_dir().join(format!("hisparse-flags-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("serve.yaml");
        std::fs::write(
            &file,
            "headless: true\ntrust-remote-code: false\nserved-model-name: [a, b]\n",
        )
        .unwrap();
        let (kept, ignored) =
            split(&["m", "--config", file.to_str().unwrap()], &["model"]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(kept, s(&["m"]));
        assert_eq!(
            ignored,
            s(&[
                "--headless",
                "--no-trust-remote-code",
                "--served-model-name",
                "a",
                "b"
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
        let n = |a: &str| normalize_name(a).join(" ");
        assert_eq!(n("--max_model_len=4"), "--max-model-len=4");
        assert_eq!(
            n("--kv_transfer_config.kv_role"),
            "--kv-transfer-config.kv_role"
        );
        assert_eq!(n("-tp"), "--tensor-parallel-size");
        assert_eq!(
            n("-cc.cudagraph_mode"),
            "--compilation-config.cudagraph_mode"
        );
        assert_eq!(n("-tpx"), "-tpx");
        assert_eq!(n("-O3"), "--optimization-level 3");
        assert_eq!(n("-O=3"), "--optimization-level 3");
        assert_eq!(n("--help=cache"), "--help");
    }
}
