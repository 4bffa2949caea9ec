//! `sglang serve`'s argv read as SGLang 0.5.23's argparse reads it (Python
//! 3.11's `ArgumentParser._parse_known_args` on the parser of
//! `prepare_server_args`, srt/server_args.py:668-720): each word classified as
//! an option or a value, `--flag=value` and `--flag value`, the prefix
//! matching of `allow_abbrev=True` (`--tp 8` is `--tp-size 8`; a prefix of two
//! spellings is ambiguous), `nargs`, `type` and `choices`, and the required
//! `--model-path`. Where argparse stops at its first error, every error is
//! collected, so a launch gets all its refusals at once.

use super::convert::{convert, py_repr, BEYOND_I64};
use super::flags::{self, Action, Flag, Nargs};
use hisparse_core::limits::MAX_ARGV_SUGGESTIONS;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// What went wrong with the argv, in argparse's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// `unrecognized arguments: --foo`.
    Unrecognized,
    /// `ambiguous option: --enable-hi could match ...`.
    Ambiguous,
    /// `expected one argument` / `expected at least one argument`.
    MissingValue,
    /// `ignored explicit argument '1'` (`--enable-hisparse=1`).
    ValueNotTaken,
    /// A value `type` refuses (`invalid int value: 'x'`).
    InvalidValue,
    /// A value outside `choices` (`invalid choice: 'x' (choose from ...)`).
    InvalidChoice,
    /// `the following arguments are required: --model-path/--model`.
    Required,
}

/// One refusal of SGLang's argparse.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub kind: ProblemKind,
    /// The `ServerArgs` attribute, where the problem is one option's.
    pub dest: Option<&'static str>,
    /// The words as given (`--tp-size=x`, or the unrecognized flag and its values).
    pub given: Vec<String>,
    /// argparse's own message, as `sglang serve: error: ` would end.
    pub message: String,
    /// The allowed values, where there is a list.
    pub allowed: Option<String>,
    /// The closest SGLang spelling of an unrecognized or ambiguous flag.
    pub suggestion: Option<String>,
}

/// An option as given, for the report's ignored flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Given {
    pub dest: &'static str,
    /// The words as given (`--port 30000`, `--tp=8`).
    pub words: Vec<String>,
}

/// The argv as SGLang's argparse reads it.
#[derive(Debug, Default)]
pub struct Parsed {
    /// `ServerArgs` attribute -> value, as argparse stores it, for the options
    /// given (the last occurrence wins); defaults are the core's to apply.
    pub values: Map<String, Value>,
    /// Each option given, in order.
    pub given: Vec<Given>,
    pub problems: Vec<Problem>,
    /// Deprecated spellings used, with SGLang's replacement (it warns and goes on).
    pub deprecated: Vec<(String, &'static str)>,
    /// `-h` / `--help` was given.
    pub help: bool,
    /// Values Python reads that the check cannot hold (an int beyond i64):
    /// the attribute and `--tp 99999999999999999999: why`.
    pub beyond: Vec<(&'static str, String)>,
    /// The argv cut as argparse cuts it: where each group of words starts
    /// (an option with its values, or words of no option) and the attribute
    /// it sets (None: no option SGLang has); a group runs to the next start.
    pub groups: Vec<(usize, Option<&'static str>)>,
}

/// A word of the argv, classified as argparse classifies it.
enum Word {
    /// An option SGLang has: its row, the spelling matched, the `=value`.
    Option(&'static Flag, &'static str, Option<String>),
    /// A word that looks like an option SGLang does not have.
    Unknown,
    /// A prefix of several spellings (argparse's error is reported at classification).
    Ambiguous,
    /// A value (argparse's 'A').
    Value,
    /// `--`: every word after it is a value.
    DoubleDash,
}

/// argparse's `_negative_number_matcher` (Python 3.11): `-5`, `-.5`, `-1.5`
/// are values, since no SGLang option looks like a negative number.
fn negative_number(word: &str) -> bool {
    let Some(rest) = word.strip_prefix('-') else {
        return false;
    };
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    match rest.split_once('.') {
        None => !rest.is_empty() && digits(rest),
        Some((a, b)) => digits(a) && !b.is_empty() && digits(b),
    }
}

fn candidates() -> Vec<&'static str> {
    flags::spellings()
        .map(|s| s.trim_start_matches('-'))
        .collect()
}

/// The closest SGLang spelling to `name` (given without its dashes).
fn closest(name: &str) -> Option<String> {
    hisparse_core::engines::vllm_0_33::schema::closest(name, &candidates()).map(|best| {
        if best == "h" {
            "-h".to_owned()
        } else {
            format!("--{best}")
        }
    })
}

/// `_parse_optional` and `_get_option_tuples` of Python 3.11's argparse.
fn classify(word: &str, problems: &mut Vec<Problem>) -> Word {
    if word == "--" {
        return Word::DoubleDash;
    }
    if !word.starts_with('-') || word.len() == 1 {
        return Word::Value;
    }
    if let Some(flag) = flags::exact(word) {
        let spelling = spelling_of(flag, word);
        return Word::Option(flag, spelling, None);
    }
    if let Some((name, value)) = word.split_once('=') {
        if let Some(flag) = flags::exact(name) {
            let spelling = spelling_of(flag, name);
            return Word::Option(flag, spelling, Some(value.to_owned()));
        }
    }
    let matches: Vec<(&'static str, &'static Flag, Option<String>)> = if word.starts_with("--") {
        let (prefix, explicit) = match word.split_once('=') {
            Some((p, v)) => (p, Some(v.to_owned())),
            None => (word, None),
        };
        flags::prefixed(prefix)
            .into_iter()
            .map(|(s, f)| (s, f, explicit.clone()))
            .collect()
    } else {
        // A single dash: `-h` with its value attached (`-hx`), or a prefix.
        let short: String = word.chars().take(2).collect();
        let rest = word[short.len()..].to_owned();
        flags::spellings()
            .filter_map(|s| {
                let flag = flags::exact(s)?;
                if s == short {
                    Some((s, flag, Some(rest.clone())))
                } else if s.starts_with(word) {
                    Some((s, flag, None))
                } else {
                    None
                }
            })
            .collect()
    };
    match matches.len() {
        1 => {
            let (spelling, flag, explicit) = matches.into_iter().next().expect("one match");
            return Word::Option(flag, spelling, explicit);
        }
        0 => {}
        _ => {
            let names: Vec<&str> = matches.iter().map(|(s, _, _)| *s).collect();
            problems.push(Problem {
                kind: ProblemKind::Ambiguous,
                dest: None,
                given: vec![word.to_owned()],
                message: format!(
                    "ambiguous option: {} could match {}",
                    word.split('=').next().unwrap_or(word),
                    names.join(", ")
                ),
                allowed: Some(names.join(", ")),
                suggestion: None,
            });
            return Word::Ambiguous;
        }
    }
    if negative_number(word) || word.contains(' ') {
        return Word::Value;
    }
    Word::Unknown
}

/// The row's own `'static` spelling that `word` is.
fn spelling_of(flag: &'static Flag, word: &str) -> &'static str {
    flag.spellings
        .iter()
        .copied()
        .find(|s| *s == word)
        .unwrap_or(flag.spellings[0])
}

/// Read `argv` (the words after `sglang serve`, or after
/// `python -m sglang.launch_server`) as SGLang 0.5.23's argparse reads them.
pub fn parse(argv: &[String]) -> Parsed {
    let mut out = Parsed::default();
    let mut after_dd = false;
    let words: Vec<Word> = argv
        .iter()
        .map(|w| {
            if after_dd {
                return Word::Value;
            }
            let word = classify(w, &mut out.problems);
            if matches!(word, Word::DoubleDash) {
                after_dd = true;
            }
            word
        })
        .collect();
    let is_value = |i: usize| matches!(words.get(i), Some(Word::Value));
    let mut suggested: HashMap<&str, Option<String>> = HashMap::new();
    let mut i = 0;
    while i < argv.len() {
        let dest = match &words[i] {
            Word::Option(flag, _, _) => Some(flag.dest),
            _ => None,
        };
        out.groups.push((i, dest));
        match &words[i] {
            Word::Value | Word::DoubleDash => {
                // No SGLang option is positional: a stray value or everything
                // after `--` is unrecognized (with the option before it, if any).
                let start = i;
                i += 1;
                while is_value(i) {
                    i += 1;
                }
                unrecognized(&mut out, &argv[start..i], None);
            }
            Word::Ambiguous => {
                // Its values go with it (reported once, as ambiguous).
                i += 1;
                while is_value(i) {
                    i += 1;
                }
            }
            Word::Unknown => {
                let start = i;
                i += 1;
                while is_value(i) {
                    i += 1;
                }
                let name = argv[start].split('=').next().unwrap_or_default();
                // Bounded: each suggestion compares the name with every flag.
                let suggestion = match suggested.get(name) {
                    Some(s) => s.clone(),
                    None if suggested.len() < MAX_ARGV_SUGGESTIONS => {
                        let s = closest(name.trim_start_matches('-'));
                        suggested.insert(name, s.clone());
                        s
                    }
                    None => None,
                };
                unrecognized(&mut out, &argv[start..i], suggestion);
            }
            Word::Option(flag, spelling, explicit) => {
                let (flag, spelling) = (*flag, *spelling);
                let start = i;
                i += 1;
                let values: Vec<String> = match explicit {
                    Some(value) if flag.nargs == Nargs::Zero => {
                        out.problems.push(Problem {
                            kind: ProblemKind::ValueNotTaken,
                            dest: Some(flag.dest),
                            given: vec![argv[start].clone()],
                            message: format!(
                                "argument {}: ignored explicit argument {}",
                                flag.display(),
                                py_repr(value)
                            ),
                            allowed: None,
                            suggestion: Some(spelling.to_owned()),
                        });
                        continue;
                    }
                    Some(value) => vec![value.clone()],
                    None => {
                        let mut end = i;
                        while is_value(end) {
                            end += 1;
                        }
                        let available = end - i;
                        let take = match flag.nargs {
                            Nargs::Zero => 0,
                            Nargs::One | Nargs::Optional => available.min(1),
                            Nargs::ZeroOrMore | Nargs::OneOrMore => available,
                        };
                        let needed = match flag.nargs {
                            Nargs::One => Some("expected one argument"),
                            Nargs::OneOrMore => Some("expected at least one argument"),
                            _ => None,
                        };
                        if let (0, Some(what)) = (take, needed) {
                            out.problems.push(Problem {
                                kind: ProblemKind::MissingValue,
                                dest: Some(flag.dest),
                                given: vec![argv[start].clone()],
                                message: format!("argument {}: {what}", flag.display()),
                                allowed: None,
                                suggestion: None,
                            });
                            continue;
                        }
                        let taken = argv[i..i + take].to_vec();
                        i += take;
                        taken
                    }
                };
                store(&mut out, flag, spelling, argv[start..i].to_vec(), &values);
            }
        }
    }
    for flag in super::flag_table::FLAGS.iter().filter(|f| f.required) {
        // An ambiguous prefix of the option (`--mod m`) is reported as that.
        let given = out.given.iter().any(|g| g.dest == flag.dest)
            || out.problems.iter().any(|p| {
                p.dest == Some(flag.dest)
                    || (p.kind == ProblemKind::Ambiguous
                        && flag.spellings.iter().any(|s| {
                            s.starts_with(p.given[0].split('=').next().unwrap_or_default())
                        }))
            });
        if !given && !out.help {
            out.problems.push(Problem {
                kind: ProblemKind::Required,
                dest: Some(flag.dest),
                given: Vec::new(),
                message: format!("the following arguments are required: {}", flag.display()),
                allowed: None,
                suggestion: None,
            });
        }
    }
    out
}

fn unrecognized(out: &mut Parsed, words: &[String], suggestion: Option<String>) {
    out.problems.push(Problem {
        kind: ProblemKind::Unrecognized,
        dest: None,
        given: words.to_vec(),
        message: format!("unrecognized arguments: {}", words.join(" ")),
        allowed: None,
        suggestion,
    });
}

/// Convert and check the values of one occurrence, then store them as
/// argparse's action does.
fn store(
    out: &mut Parsed,
    flag: &'static Flag,
    spelling: &str,
    words: Vec<String>,
    values: &[String],
) {
    let mut converted = Vec::with_capacity(values.len());
    for text in values {
        match convert(flag.ty, text) {
            Ok(v) => converted.push(v),
            Err(message) if message.ends_with(BEYOND_I64) => {
                // Python reads it; the check cannot hold it. Kept as its text
                // (a flag the check does not read takes it as SGLang does);
                // read() refuses it where the check reads the flag.
                out.beyond
                    .push((flag.dest, format!("{}: {message}", words.join(" "))));
                converted.push(Value::from(text.as_str()));
            }
            Err(message) => {
                out.problems.push(Problem {
                    kind: ProblemKind::InvalidValue,
                    dest: Some(flag.dest),
                    given: words,
                    message: format!("argument {}: {message}", flag.display()),
                    allowed: None,
                    suggestion: None,
                });
                return;
            }
        }
    }
    if let Some(choices) = flag.choices {
        let allowed: Vec<Value> = choices
            .iter()
            .filter_map(|c| serde_json::from_str(c).ok())
            .collect();
        for (v, text) in converted.iter().zip(values) {
            if !allowed.contains(v) {
                let listed: Vec<String> = allowed
                    .iter()
                    .map(|c| match c {
                        Value::String(s) => py_repr(s),
                        other => other.to_string(),
                    })
                    .collect();
                let shown = match v {
                    Value::String(_) => py_repr(text),
                    other => other.to_string(),
                };
                out.problems.push(Problem {
                    kind: ProblemKind::InvalidChoice,
                    dest: Some(flag.dest),
                    given: words,
                    message: format!(
                        "argument {}: invalid choice: {shown} (choose from {})",
                        flag.display(),
                        listed.join(", ")
                    ),
                    allowed: Some(listed.join(", ")),
                    suggestion: None,
                });
                return;
            }
        }
    }
    let value = match (flag.action, flag.nargs) {
        (Action::Help, _) => {
            out.help = true;
            return;
        }
        (Action::StoreTrue, _) => Value::Bool(true),
        (Action::BooleanOptional, _) => Value::Bool(!spelling.starts_with("--no-")),
        (Action::DeprecatedStoreTrue, _) => {
            out.deprecated
                .push((spelling.to_owned(), deprecated_replacement(flag.dest)));
            Value::Bool(true)
        }
        // `--monokernel-backend amd` stores `const_value=True` on
        // enable_amd_monokernel (server_args.py:421-431).
        (Action::DeprecatedStoreConst, _) => {
            out.deprecated
                .push((spelling.to_owned(), "--enable-amd-monokernel"));
            Value::Bool(true)
        }
        (Action::LoraPath, _) => match lora_paths(&converted) {
            Ok(v) => v,
            Err(message) => {
                out.problems.push(Problem {
                    kind: ProblemKind::InvalidValue,
                    dest: Some(flag.dest),
                    given: words,
                    message: format!("argument {}: {message}", flag.display()),
                    allowed: None,
                    suggestion: None,
                });
                return;
            }
        },
        (_, Nargs::ZeroOrMore | Nargs::OneOrMore) => Value::Array(converted),
        (_, Nargs::Optional) if converted.is_empty() => {
            serde_json::from_str(flag.const_value).unwrap_or(Value::Null)
        }
        _ => converted.into_iter().next().unwrap_or(Value::Null),
    };
    out.values.insert(flag.dest.to_owned(), value);
    out.given.push(Given {
        dest: flag.dest,
        words,
    });
}

fn deprecated_replacement(dest: &str) -> &'static str {
    match dest {
        "disable_cuda_graph" => "--cuda-graph-backend-{decode,prefill}=disabled",
        "enable_dp_attention" => "--attn-dp-size <dp-size>",
        _ => "",
    }
}

/// `LoRAPathAction` (arg_groups/argparse_actions.py:8-24): each value
/// stripped; one that looks like a JSON object must be one with `lora_name`
/// and `lora_path` (an AssertionError in SGLang while it parses the flags).
fn lora_paths(values: &[Value]) -> Result<Value, String> {
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        let text = hisparse_core::pytext::py_str_strip(v.as_str().unwrap_or_default());
        if text.starts_with('{') && text.ends_with('}') {
            let obj: Value = serde_json::from_str(text)
                .map_err(|e| format!("{} is not JSON: {e}", py_repr(text)))?;
            if obj.get("lora_path").is_none() || obj.get("lora_name").is_none() {
                return Err(format!(
                    "{} looks like a JSON str, but it does not contain 'lora_name' and 'lora_path' keys.",
                    py_repr(text)
                ));
            }
            out.push(obj);
        } else {
            out.push(Value::from(text));
        }
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn forms_and_aliases() {
        let p = parse(&args(&[
            "--model",
            "m",
            "--tp=8",
            "--dp-size",
            "2",
            "--ep",
            "8",
            "--enable-hisparse",
            "--hierarchical-sparse-attention-extra-config",
            "{\"top_k\": 2048}",
            "--no-enable-tf32-matmul",
            "--cuda-graph-bs-decode",
            "1",
            "2",
            "4",
        ]));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        assert_eq!(p.values["model_path"], json!("m"));
        assert_eq!(p.values["tp_size"], json!(8));
        assert_eq!(p.values["dp_size"], json!(2));
        assert_eq!(p.values["ep_size"], json!(8));
        assert_eq!(p.values["enable_hisparse"], json!(true));
        assert_eq!(p.values["hisparse_config"], json!("{\"top_k\": 2048}"));
        assert_eq!(p.values["enable_tf32_matmul"], json!(false));
        assert_eq!(p.values["cuda_graph_bs_decode"], json!([1, 2, 4]));
    }

    #[test]
    fn argparse_errors_all_at_once() {
        let p = parse(&args(&[
            "--enable-hisparse=1",
            "--tp-size",
            "x",
            "--kv-cache-dtype",
            "fp9",
            "--pagesize",
            "64",
            "--page-size",
        ]));
        let kinds: Vec<ProblemKind> = p.problems.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [
                ProblemKind::ValueNotTaken,
                ProblemKind::InvalidValue,
                ProblemKind::InvalidChoice,
                ProblemKind::Unrecognized,
                ProblemKind::MissingValue,
                ProblemKind::Required,
            ]
        );
        assert_eq!(
            p.problems[0].message,
            "argument --enable-hisparse: ignored explicit argument '1'"
        );
        assert_eq!(
            p.problems[1].message,
            "argument --tp-size/--tensor-parallel-size: invalid int value: 'x'"
        );
        assert_eq!(p.problems[3].suggestion.as_deref(), Some("--page-size"));
        assert_eq!(p.problems[3].given, ["--pagesize", "64"]);
    }

    #[test]
    fn negative_numbers_are_values() {
        let p = parse(&args(&[
            "--model-path",
            "m",
            "--mem-fraction-static",
            "-.5",
        ]));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        assert_eq!(p.values["mem_fraction_static"], json!(-0.5));
    }
}
