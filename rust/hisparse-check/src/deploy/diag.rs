//! A diagnostic between launches: the core's [`Diagnostic`] (code, path,
//! message, stage, given, allowed, hint) on the launch its fix edits, the
//! other launch and its field, the engine's own words and source, and the
//! fix as edits of that launch's command line (applied by [`apply`]).

use hisparse_core::deploy_codes::DEPLOY_CODES;
use hisparse_core::diagnostic::Stage;
use hisparse_core::{Code, Diagnostic, FieldPath, FixOp, Severity};
use serde_json::{json, Value};

/// One edit of a launch's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// `--flag VALUE` replacing every `--flag X` / `--flag=X` given.
    Set { flag: String, value: String },
    /// A switch on, its opposite spelling taken out.
    Switch { on: String, off: String },
}

#[derive(Clone, Debug)]
pub struct PairDiagnostic {
    pub diagnostic: Diagnostic,
    /// The launch the fix edits.
    pub launch: String,
    /// The other launch and its field.
    pub other: Option<(String, String)>,
    /// What the engine says when it fails.
    pub engine_message: String,
    /// Where (the engine's file:line), from deploy_codes.rs.
    pub source: &'static str,
    pub edits: Vec<Edit>,
    /// A fix that edits the manifest rather than the command (in words).
    pub manifest_fix: Option<String>,
}

/// The flag path a rule names, as a [`FieldPath`] (fallback: the root key).
fn path(p: &str) -> FieldPath {
    FieldPath::parse(p).unwrap_or_else(|_| FieldPath::root(p))
}

pub struct Pair<'a> {
    pub code: Code,
    pub stage: Stage,
    pub launch: &'a str,
    pub field: &'a str,
    pub given: Value,
    pub other: Option<(&'a str, &'a str, Value)>,
    pub message: String,
    pub engine_message: &'a str,
}

impl Pair<'_> {
    /// The diagnostic with `edits` (and their FixOp form: Set on the field).
    pub fn build(self, edits: Vec<Edit>, fixed: Option<Value>) -> PairDiagnostic {
        let row = DEPLOY_CODES.iter().find(|d| d.code == self.code);
        let source = row
            .and_then(|d| match self.stage {
                Stage::Vllm(_) => d.vllm,
                Stage::Sglang(_) => d.sglang,
            })
            .unwrap_or("");
        let mut d = Diagnostic::new(
            self.code,
            Severity::Error,
            self.stage,
            path(self.field),
            self.message,
        );
        d.given = Some(self.given);
        if let Some((_, _, v)) = &self.other {
            d.allowed = Some(format!("the other side's value, {v}"));
        }
        let words: Vec<String> = edits
            .iter()
            .map(|e| match e {
                Edit::Set { flag, value } => format!("{flag} {}", shell_quote(value)),
                Edit::Switch { on, .. } => on.clone(),
            })
            .collect();
        if !words.is_empty() {
            d.hint = Some(format!("on {}: {}", self.launch, words.join(" ")));
        }
        if let Some(v) = fixed {
            d.fix = vec![FixOp::Set {
                path: path(self.field),
                value: v,
            }];
        }
        PairDiagnostic {
            diagnostic: d,
            launch: self.launch.to_owned(),
            other: self.other.map(|(l, f, _)| (l.to_owned(), f.to_owned())),
            engine_message: self.engine_message.to_owned(),
            source,
            edits,
            manifest_fix: None,
        }
    }
}

fn shell_quote(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@".contains(c))
    {
        v.to_owned()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

/// `args` with `edits` applied (the tests apply every fix, then check
/// again; rules_declared.rs plans a smaller pool with it).
pub fn apply(args: &[String], edits: &[Edit]) -> Vec<String> {
    let mut out: Vec<String> = args.to_vec();
    for e in edits {
        match e {
            Edit::Set { flag, value } => {
                let mut kept = Vec::with_capacity(out.len());
                let mut i = 0;
                while i < out.len() {
                    let w = &out[i];
                    if w == flag {
                        i += 2;
                        continue;
                    }
                    if w.strip_prefix(flag.as_str())
                        .is_some_and(|r| r.starts_with('='))
                    {
                        i += 1;
                        continue;
                    }
                    kept.push(w.clone());
                    i += 1;
                }
                kept.push(flag.clone());
                kept.push(value.clone());
                out = kept;
            }
            Edit::Switch { on, off } => {
                out.retain(|w| w != on && w != off);
                out.push(on.clone());
            }
        }
    }
    out
}

/// JSON of one pair diagnostic.
pub fn to_json(p: &PairDiagnostic) -> Value {
    let mut v = serde_json::to_value(&p.diagnostic).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("launch".into(), json!(p.launch));
        if let Some((l, f)) = &p.other {
            m.insert("other".into(), json!({"launch": l, "path": f}));
        }
        m.insert("engine_message".into(), json!(p.engine_message));
        m.insert("source".into(), json!(p.source));
        let edits: Vec<Value> = p
            .edits
            .iter()
            .map(|e| match e {
                Edit::Set { flag, value } => json!({"set": flag, "value": value}),
                Edit::Switch { on, off } => json!({"switch": on, "removes": off}),
            })
            .collect();
        m.insert("fix_flags".into(), json!(edits));
        if let Some(f) = &p.manifest_fix {
            m.insert("manifest_fix".into(), json!(f));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_replace_every_spelling() {
        let a: Vec<String> = [
            "m",
            "--block-size",
            "128",
            "--block-size=32",
            "--x",
            "--disable-hybrid-kv-cache-manager",
        ]
        .map(String::from)
        .to_vec();
        let out = apply(
            &a,
            &[
                Edit::Set {
                    flag: "--block-size".into(),
                    value: "64".into(),
                },
                Edit::Switch {
                    on: "--no-disable-hybrid-kv-cache-manager".into(),
                    off: "--disable-hybrid-kv-cache-manager".into(),
                },
            ],
        );
        assert_eq!(
            out,
            [
                "m",
                "--x",
                "--block-size",
                "64",
                "--no-disable-hybrid-kv-cache-manager"
            ]
        );
    }
}
