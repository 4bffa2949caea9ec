//! An SGLang launch's words -> the core's [`SglangArgs`] plus the refusals of
//! SGLang's argparse as diagnostics at stage `argparse`, and the flags given
//! that the check does not read. One reading for the CLI and the Python
//! binding (`hisparse_rs.check_sglang_argv`).

use super::argv::{self, Problem, ProblemKind};
use hisparse_core::engines::sglang_0_5_23::args::flag_name;
use hisparse_core::engines::sglang_0_5_23::diagnostics::SglangDiagnostic as _;
use hisparse_core::engines::sglang_0_5_23::stages::SglangStage;
use hisparse_core::engines::sglang_0_5_23::SglangArgs;
use hisparse_core::limits::{MAX_ARGV_WORDS, MAX_INPUT_BYTES};
use hisparse_core::{Code, Diagnostic, FieldPath, FixOp, Report};
use serde_json::Value;

/// A launch read as SGLang 0.5.23 reads it.
#[derive(Debug)]
pub struct Read {
    pub args: SglangArgs,
    /// argparse's refusals, each an error at stage `argparse`.
    pub errors: Vec<Diagnostic>,
    /// Flags given that the check does not read, as given (`--port 30000`).
    pub ignored: Vec<String>,
    /// `-h` / `--help` was among the words.
    pub help: bool,
}

/// `sglang serve`'s own handling before `prepare_server_args`: the
/// `--model-type` selector is taken out (cli/serve.py:30-59) and a first word
/// that is not a flag is the model (cli/serve.py:62-66).
fn serve_front_end(words: &[String]) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::with_capacity(words.len() + 1);
    let mut front = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w == "--model-type" {
            front.extend(words[i..(i + 2).min(words.len())].iter().cloned());
            i += 2;
            continue;
        }
        if w.starts_with("--model-type=") {
            front.push(w.clone());
            i += 1;
            continue;
        }
        out.push(w.clone());
        i += 1;
    }
    if out.first().is_some_and(|w| !w.starts_with('-')) {
        out.insert(0, "--model-path".to_owned());
    }
    (out, front)
}

/// `ServerArgs` attributes given as values (the Python API's keywords, not
/// argv words) that argparse would refuse as an invalid choice
/// (`disaggregation_mode="decoder"`): each an error at stage `argparse`,
/// argparse's own message, as the CLI reports `--disaggregation-mode decoder`
/// (issue 23, defect 13). A null is the default and passes.
pub fn attribute_choices(args: &SglangArgs) -> Vec<Diagnostic> {
    let Value::Object(attrs) = args.to_json() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for flag in super::flags::all().filter(|f| f.choices.is_some()) {
        let Some(v) = attrs.get(flag.dest).filter(|v| !v.is_null()) else {
            continue;
        };
        let values: Vec<&Value> = match v {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        let words: Vec<String> = values
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let mut argv_words = vec![flag.spellings[0].to_owned()];
        argv_words.extend(words);
        let parsed = argv::parse(&argv_words);
        if let Some(p) = parsed
            .problems
            .iter()
            .find(|p| p.kind == ProblemKind::InvalidChoice)
        {
            out.push(diagnostic(p));
        }
    }
    out
}

/// Put [`attribute_choices`]' errors first in a report of attributes.
pub fn refuse_choices(report: &mut Report, errors: Vec<Diagnostic>) {
    if errors.is_empty() {
        return;
    }
    report.valid = false;
    report.hisparse = None;
    let mut all = errors;
    all.append(&mut report.errors);
    report.errors = all;
}

/// `sglang serve`'s backend selector (cli/serve.py:30-59, the last
/// `--model-type` wins; cli/serve_backends.py:119-130): `auto` and `llm` are
/// the LLM server this check reads; `diffusion` is SGLang's diffusion server,
/// which it does not read (Err: a usage error); any other name is SGLang's
/// "Unknown serve backend" (an error at stage argparse, before the parser).
fn serve_backend(front: &[String]) -> Result<Option<Diagnostic>, String> {
    let mut name: Option<&str> = None;
    let mut i = 0;
    while i < front.len() {
        if let Some(v) = front[i].strip_prefix("--model-type=") {
            name = Some(v);
            i += 1;
        } else {
            let Some(v) = front.get(i + 1) else {
                return Ok(Some(serve_error(
                    &front[i],
                    "Error: --model-type requires a value.",
                )));
            };
            name = Some(v);
            i += 2;
        }
    }
    match name {
        None | Some("auto" | "llm") => Ok(None),
        Some("") => Ok(Some(serve_error("--model-type=", "Error: --model-type requires a non-empty value."))),
        Some("diffusion") => Err("--model-type diffusion: sglang serve runs its diffusion server (cli/serve.py:151-156), whose arguments hisparse-check does not read; it checks the LLM server (--model-type llm or auto, the default)".to_owned()),
        Some(other) => Ok(Some(serve_error(
            &format!("--model-type {other}"),
            &format!("Unknown serve backend '{other}'. Available values: auto, llm, diffusion."),
        ))),
    }
}

fn serve_error(given: &str, message: &str) -> Diagnostic {
    Diagnostic::error(
        Code::InvalidValue,
        FieldPath::root("model_type"),
        format!("{message} (sglang serve {} stops here, before its argument parser: cli/serve.py:30-59, cli/serve_backends.py:119-130)", super::ENGINE_VERSION),
    )
    .stage(SglangStage::Argparse)
    .given(&Value::from(given))
    .allowed("auto (the default), llm")
    // No fix op: model_type is sglang serve's word, not a ServerArgs attribute.
    .hint("drop --model-type, or give --model-type llm")
}

/// Read `words` (after `sglang serve` when `serve` is true, else after
/// `python -m sglang.launch_server`). Err: the attributes do not make an
/// `SglangArgs` (a number beyond what the check reads, such as `inf`).
pub fn read(words: &[String], serve: bool) -> Result<Read, String> {
    let bytes: usize = words.iter().map(String::len).sum();
    if words.len() > MAX_ARGV_WORDS || bytes > MAX_INPUT_BYTES {
        return Err(format!(
            "the SGLang command line has {} words ({bytes} bytes); hisparse-check reads at most {MAX_ARGV_WORDS} words and {MAX_INPUT_BYTES} bytes (see README \"Limits\")",
            words.len()
        ));
    }
    let (words, front) = if serve {
        serve_front_end(words)
    } else {
        (words.to_vec(), Vec::new())
    };
    let backend = serve_backend(&front)?;
    let parsed = argv::parse(&words);
    // Only where the check reads the attribute: any other is kept as given.
    let read_by_check = |dest: &str| {
        SglangArgs::from_json(serde_json::json!({ dest: null }))
            .is_ok_and(|a| !a.other.contains_key(dest))
    };
    if let Some((_, why)) = parsed.beyond.iter().find(|(dest, _)| read_by_check(dest)) {
        return Err(why.clone());
    }
    if parsed.values.contains_key("config") {
        // SGLang merges a YAML file's options into the argv before parsing
        // (ConfigArgumentMerger, server_args.py:683-690); checking without them
        // would check another launch.
        return Err(
            "--config FILE: hisparse-check does not read SGLang config files yet; give the file's options as flags on the command line"
                .to_owned(),
        );
    }
    // The rest of the check reads the launch as meant: `--enable-hisparse=1`
    // is refused by argparse (an error below) and read as `--enable-hisparse`,
    // so the later stages' errors come in the same report.
    let mut values = parsed.values.clone();
    for p in &parsed.problems {
        if let (ProblemKind::ValueNotTaken, Some(dest)) = (p.kind, p.dest) {
            if truthy(p) {
                values.insert(dest.to_owned(), Value::Bool(true));
            }
        }
    }
    // argparse has typed every value, so what fails here is a bound
    // (`--mem-fraction-static nan`): named by the flag as given.
    let args = SglangArgs::from_json_explained(Value::Object(values)).map_err(|e| {
        let words = parsed
            .given
            .iter()
            .rev()
            .find(|g| e.to_string().starts_with(&format!("{} ", g.dest)))
            .map(|g| g.words.join(" "));
        match words {
            // "mem_fraction_static is nan: why" -> "--mem-fraction-static nan: why"
            Some(w) => {
                let e = e.to_string();
                format!(
                    "{w}: {}",
                    e.split_once(": ").map_or(e.as_str(), |(_, why)| why)
                )
            }
            None => e.to_string(),
        }
    })?;
    let not_read = args.not_read();
    let mut ignored: Vec<String> = parsed
        .given
        .iter()
        .filter(|g| not_read.iter().any(|n| n == g.dest))
        .map(|g| g.words.join(" "))
        .collect();
    if !front.is_empty() {
        ignored.insert(0, front.join(" "));
    }
    let mut errors: Vec<Diagnostic> = backend.into_iter().collect();
    errors.extend(parsed.problems.iter().map(diagnostic));
    Ok(Read {
        args,
        errors,
        ignored,
        help: parsed.help,
    })
}

/// Put the reading's refusals and ignored flags into the core's report of its
/// arguments: argparse comes first (it is SGLang's first stage), and a launch
/// argparse refuses is invalid, with no settings resolved.
pub fn finish(report: &mut Report, read: Read) {
    if !read.errors.is_empty() {
        report.valid = false;
        report.hisparse = None;
    }
    let mut errors = read.errors;
    // The core's own "no model" is argparse's required --model-path again.
    let core_errors = std::mem::take(&mut report.errors);
    let kept: Vec<Diagnostic> = core_errors
        .into_iter()
        .filter(|d| !errors.iter().any(|a| a.code == d.code && a.path == d.path))
        .collect();
    errors.extend(kept);
    // A store_true flag given a value (`--enable-hisparse=1`) is read as meant,
    // so its fix changes no attribute and the core's fixed_flags leaves it out:
    // the printed flags must carry it, spelled alone, or pasting them repeats
    // the error (issue 23, defect 11).
    let alone: Vec<String> = errors
        .iter()
        .filter(|d| d.stage == SglangStage::Argparse.into() && d.code == Code::InvalidValue)
        .filter_map(|d| match d.fix.as_slice() {
            [FixOp::Set {
                path,
                value: Value::Bool(true),
            }] => Some(flag_name(&path.to_string())),
            _ => None,
        })
        .collect();
    // One the other fixes name already (`(remove --flag)`) is theirs to print.
    let named = |flag: &String| {
        report
            .fixed_flags
            .as_deref()
            .is_some_and(|f| f.split([' ', '(', ')']).any(|w| w == flag))
    };
    let alone: Vec<String> = alone.into_iter().filter(|f| !named(f)).collect();
    if !alone.is_empty() {
        let mut parts = alone;
        parts.extend(report.fixed_flags.take());
        report.fixed_flags = Some(parts.join(" "));
    }
    report.errors = errors;
    report.ignored_flags = read.ignored;
}

fn diagnostic(p: &Problem) -> Diagnostic {
    let v = super::ENGINE_VERSION;
    let message = format!(
        "{} (sglang serve {v} stops here: \"sglang serve: error: {}\")",
        sentence(p),
        p.message
    );
    let given = (!p.given.is_empty()).then(|| Value::from(p.given.join(" ")));
    let (code, path) = match (p.kind, p.dest) {
        (ProblemKind::Unrecognized | ProblemKind::Ambiguous, _) | (_, None) => {
            let word = p
                .given
                .first()
                .map_or("", |w| w.split('=').next().unwrap_or(w));
            (Code::UnknownKey, FieldPath::root(word))
        }
        (ProblemKind::Required, Some(dest)) => (Code::ModelConfigMissing, FieldPath::root(dest)),
        (_, Some(dest)) => (Code::InvalidValue, FieldPath::root(dest)),
    };
    let mut d = Diagnostic::error(code, path, message).stage(SglangStage::Argparse);
    if let Some(g) = &given {
        d = d.given(g);
    }
    if let Some(allowed) = &p.allowed {
        d = d.allowed(allowed.clone());
    }
    match (p.kind, p.dest) {
        (ProblemKind::Unrecognized, _) => match &p.suggestion {
            Some(s) => d.hint(format!("did you mean {s}? (a flag of sglang serve {v})")),
            None => d.hint(format!("remove it: sglang serve {v} has no such flag")),
        },
        (ProblemKind::Ambiguous, _) => d.hint(
            "spell the flag out: argparse takes a prefix only when it names one spelling",
        ),
        (ProblemKind::ValueNotTaken, Some(dest)) => {
            let on = truthy(p);
            let spelled = p.suggestion.clone().unwrap_or_default();
            if on {
                d.hint(format!("write {spelled} alone: it takes no value (store_true)"))
                    .fix(vec![FixOp::Set {
                        path: FieldPath::root(dest),
                        value: Value::Bool(true),
                    }])
            } else {
                d.hint(format!(
                    "{spelled} takes no value (store_true): write it alone to turn it on, leave it out to keep it off"
                ))
            }
        }
        (ProblemKind::MissingValue, _) => d.hint("give the flag its value"),
        (ProblemKind::InvalidValue, _) => {
            d.hint("give the flag a value its type reads (SGLang's message says which type)")
        }
        (ProblemKind::InvalidChoice, _) => d.hint("give the flag one of the allowed values"),
        (ProblemKind::Required, _) => {
            d.hint("give the model: --model-path DIR (a config.json, its directory, or a cached Hugging Face id)")
        }
        _ => d,
    }
}

/// `--flag=1` / `=true` / `=yes` / `=on`: the flag meant on.
fn truthy(p: &Problem) -> bool {
    p.given
        .first()
        .and_then(|w| w.split_once('='))
        .is_some_and(|(_, v)| {
            matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
        })
}

/// The problem in words, before argparse's own text.
fn sentence(p: &Problem) -> String {
    match p.kind {
        ProblemKind::Unrecognized => format!("{} is not a flag of sglang serve", p.given.join(" ")),
        ProblemKind::Ambiguous => format!(
            "{} is a prefix of several sglang serve flags",
            p.given.join(" ")
        ),
        ProblemKind::MissingValue => format!("{} needs a value", p.given.join(" ")),
        ProblemKind::ValueNotTaken => format!("{} takes no value", p.given.join(" ")),
        ProblemKind::InvalidValue => {
            format!("{} is not a value this flag takes", p.given.join(" "))
        }
        ProblemKind::InvalidChoice => {
            format!("{} is not one of the flag's choices", p.given.join(" "))
        }
        ProblemKind::Required => "no model: sglang serve needs --model-path".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any words read without a panic, and every refusal is an error at
    /// stage argparse (a fixed-seed generator: deterministic runs).
    #[test]
    fn any_words_read_without_panic() {
        const PIECES: &[&str] = &[
            "--tp",
            "--tp=",
            "-",
            "--",
            "---",
            "-h",
            "-hx",
            "--enable-hisparse=1",
            "--enable-hi",
            "--hisparse-config",
            "{",
            "}",
            "[NaN]",
            "1e400",
            "-5",
            "-.5",
            "1.5Ki",
            "25.6k",
            "99999999999999999999999999k",
            "ä",
            "٨",
            "\u{0}",
            " ",
            "=",
            "--model",
            "m",
            "--cuda-graph-bs-decode",
            "--lora-paths",
            "{\"lora_name\": 1}",
            "--page-size",
            "--max-lora-chunk-size",
            "16",
            "None",
            "",
            "--config",
            "--mem-fraction-static",
            "inf",
            "nan",
            "--disaggregation-decode-host-receive-threshold",
        ];
        let mut state: u64 = 0x5347_4c61_6e67;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize % n
        };
        for _ in 0..400 {
            let len = next(8);
            let words: Vec<String> = (0..len)
                .map(|_| {
                    let a = PIECES[next(PIECES.len())];
                    if next(4) == 0 {
                        format!("{a}{}", PIECES[next(PIECES.len())])
                    } else {
                        a.to_owned()
                    }
                })
                .collect();
            if let Ok(r) = read(&words, next(2) == 0) {
                assert!(r
                    .errors
                    .iter()
                    .all(|d| d.is_error() && d.stage == SglangStage::Argparse.into()));
            }
        }
    }
}
