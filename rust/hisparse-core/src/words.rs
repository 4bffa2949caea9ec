//! Words for messages, the same for every engine: a JSON value's kind, a
//! quoted list of names, and the closest name to a typo (did-you-mean).

use crate::limits::{MAX_SUGGEST_CANDIDATES, MAX_SUGGEST_LEN};
use serde_json::Value;

/// JSON type name as users know it.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Quote a list of names for messages: `"a", "b", "c"`.
pub fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The closest candidate to `given`, if one is close enough to be a typo.
pub fn closest<'a>(given: &str, candidates: &[&'a str]) -> Option<&'a str> {
    // Bounded by the names, not the input: a name longer than any real one
    // gets no suggestion, and only so many candidates are compared.
    if given.len() > MAX_SUGGEST_LEN {
        return None;
    }
    let g = given.to_ascii_lowercase();
    candidates
        .iter()
        .take(MAX_SUGGEST_CANDIDATES)
        .filter(|c| c.len() <= MAX_SUGGEST_LEN)
        .map(|c| {
            let cl = c.to_ascii_lowercase();
            let score = strsim::jaro_winkler(&g, &cl).max(strsim::normalized_levenshtein(&g, &cl));
            (score, *c)
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
