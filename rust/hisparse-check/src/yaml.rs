//! A `--config` YAML file as vLLM 0.33 reads it: `yaml.safe_load`
//! (`vllm/utils/argparse_utils.py` `load_config_file`), that is PyYAML's
//! SafeLoader, which reads **YAML 1.1**, not the YAML 1.2 of serde-style
//! parsers. The differences change what a serve file says:
//! `tensor-parallel-size: 010` is TP 8 (octal), `1_000` is 1000, `1:30` is 90
//! (base 60), `on` / `off` / `yes` / `no` are booleans at any depth, `1e3` and
//! `1.0e3` are strings (a float needs a dot and a signed exponent), `<<`
//! merges mappings, a repeated key keeps its last value, `2024-01-01` is a date.
//!
//! The file is read from libyaml's event stream (the parser PyYAML itself
//! wraps): plain scalars are resolved with PyYAML's implicit resolvers
//! (`resolver.py`, in their order: bool, float, int, merge, null, timestamp,
//! value) and built with `SafeConstructor`'s rules; quoted and block scalars
//! are strings; explicit tags are taken from `safe_load`'s set. Where
//! libyaml's scanner reads differently from PyYAML's pure-Python one (which
//! `safe_load` uses), PyYAML is followed: a tab outside quoted and block
//! scalars and comments is an error, `%YAML 1.x` takes any minor version,
//! unknown directives are skipped.
//!
//! Refused, with the file named (exit 2): tags outside that set
//! (`!!python/object`, a local `!foo`: `safe_load` refuses them too);
//! `!!binary`, `!!set`, `!!omap`, `!!pairs` (vLLM passes a Python repr, or
//! `json.dumps` fails on them: no flag takes one), both once the node is
//! built, as SafeConstructor raises (a merged pair skipped for its key is
//! never built); what PyYAML itself fails on (an undefined or circular
//! alias, a duplicate anchor, an unhashable key, a merge of a non-mapping,
//! `0x_`, an invalid date, more than one document, a decimal int of more
//! than 4300 digits); and what vLLM's flattening fails on: a date inside a
//! mapping (`json.dumps` raises TypeError), an int of more than 4300 digits
//! passed on (`str()` raises ValueError: Python's `int_max_str_digits`), a
//! flag name that is not text passed on (`"--" + key` raises TypeError).
//! Explicit `!!int` / `!!float` text is read as SafeConstructor reads it,
//! through Python's `int()` / `float()` (`!!int ' 8 '` is 8, `!!int 0o17` 15).
//! Bounds: depth [`MAX_JSON_DEPTH`], and [`MAX_INPUT_BYTES`] of values once
//! aliases are expanded (PyYAML shares aliased nodes; JSON cannot, so an
//! alias bomb is refused instead of expanded).

use hisparse_core::limits::{MAX_INPUT_BYTES, MAX_JSON_DEPTH};
use serde_json::{Map, Number, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A value as PyYAML's `SafeConstructor` builds it (the types a serve file can hold).
#[derive(Clone, Debug, PartialEq)]
pub enum Py {
    None,
    Bool(bool),
    Int(PyInt),
    Float(f64),
    Str(String),
    /// `datetime.date`, kept as its `str()` (`YYYY-MM-DD`).
    Date(String),
    /// `datetime.datetime`, kept as its `str()` (`YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]`).
    DateTime(String),
    List(Vec<Py>),
    /// A dict in insertion order, keys unique by Python equality.
    Dict(Vec<(Py, Py)>),
}

/// A Python int: within i128, or its decimal digits (with the sign), or one
/// too long for Python's `str()`.
#[derive(Clone, Debug, PartialEq)]
pub enum PyInt {
    Small(i128),
    Big(String),
    /// More than [`INT_MAX_STR_DIGITS`] decimal digits: PyYAML builds it (from
    /// hex, octal, binary or base 60), but `str()` and `json.dumps` raise
    /// ValueError on it, so vLLM fails where the file passes it on.
    Huge,
}

/// CPython's `sys.int_info.default_max_str_digits` (3.11+): `int(text)` and
/// `str(int)` raise ValueError beyond this many decimal digits.
pub const INT_MAX_STR_DIGITS: usize = 4300;

fn huge_int() -> String {
    format!("an integer of more than {INT_MAX_STR_DIGITS} decimal digits: vLLM's str() / json.dumps raises ValueError on it (Python's int_max_str_digits)")
}

/// One top-level entry of the serve file: key, 1-based line, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The key's text; a key that is not text (`1:`, `~:`) as its `str()`,
    /// with `text` false.
    pub key: String,
    /// Whether the key is text. vLLM's `"--" + key` raises TypeError on any
    /// other key, but only where it runs: a false value (`f"--no-{key}"`)
    /// or an empty list passes nothing and raises nothing.
    pub text: bool,
    pub line: usize,
    pub value: Py,
}

const CORE: &str = "tag:yaml.org,2002:";
/// Bytes charged per value on top of its text (as for serve args from Python).
const NODE_BYTES: usize = 16;

/// The top-level mapping of a `--config` file, as `yaml.safe_load` builds it.
pub fn load(text: &str, file: &str) -> Result<Vec<Entry>, String> {
    let mut c = Composer {
        file,
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        documents: 0,
        tabs_ok: Vec::new(),
        merged: 0,
        many: None,
    };
    let text = universal_newlines(text);
    let text = pyyaml_directives(&text);
    events(&text, file, |e| c.event(e))?;
    tabs(&text, &c.tabs_ok).map_err(|(line, column)| {
        format!("--config {file} is not valid YAML as vLLM reads it: a tab at line {line} column {column}; PyYAML (vLLM's yaml.safe_load) reads tabs only inside quoted or block scalars and comments (found character '\\t' that cannot start any token); indent and separate with spaces")
    })?;
    let err = |what: String| format!("--config {file}: {what}");
    let Some(root) = c.root else {
        return Err(err(
            "it must be a YAML mapping of flag names to values (it is empty)".to_owned(),
        ));
    };
    let mut b = Builder {
        budget: MAX_INPUT_BYTES,
        depth: 0,
    };
    let pairs = match &*root.borrow() {
        Node::Map(pairs) => pairs.clone(),
        _ => {
            return Err(err(
                "it must be a YAML mapping of flag names to values".to_owned()
            ))
        }
    };
    let (dict, lines) = b.dict(&pairs).map_err(err)?;
    Ok(dict
        .into_iter()
        .zip(lines)
        .map(|((k, value), line)| match k {
            Py::Str(key) => Entry {
                key,
                text: true,
                line,
                value,
            },
            other => Entry {
                key: py_str(&other).unwrap_or_default(),
                text: false,
                line,
                value,
            },
        })
        .collect())
}

/// Every document of a YAML stream (`yaml.safe_load_all`, as a Kubernetes
/// manifest is read), each built as [`load`] builds a `--config` file's
/// (PyYAML's YAML 1.1 reading, the same depth and alias-expansion bounds),
/// with `bounds` on documents, aliases and string length. An empty document
/// is `Py::None`. Err: the message, naming `file` (without `--config`).
pub fn load_all(text: &str, file: &str, bounds: StreamBounds) -> Result<Vec<Py>, String> {
    let strip = |m: String| match m.strip_prefix("--config ") {
        Some(rest) => rest.to_owned(),
        None => m,
    };
    let mut c = Composer {
        file,
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        documents: 0,
        tabs_ok: Vec::new(),
        merged: 0,
        many: Some(Many {
            bounds,
            roots: Vec::new(),
            aliases: 0,
        }),
    };
    let text = universal_newlines(text);
    let text = pyyaml_directives(&text);
    events(&text, file, |e| c.event(e)).map_err(strip)?;
    tabs(&text, &c.tabs_ok).map_err(|(line, column)| {
        format!("{file} is not valid YAML: a tab at line {line} column {column} (PyYAML reads tabs only inside quoted or block scalars and comments); indent with spaces")
    })?;
    let Some(mut many) = c.many.take() else {
        return Ok(Vec::new());
    };
    many.roots.extend(c.root.take());
    let mut b = Builder {
        budget: MAX_INPUT_BYTES,
        depth: 0,
    };
    many.roots
        .iter()
        .map(|root| b.value(root).map_err(|e| format!("{file}: {e}")))
        .collect()
}

/// Python `str(value)`: how vLLM passes a top-level scalar (or a list item) on.
/// Lists and dicts (whose `str()` is Python's repr) are refused.
pub fn py_str(value: &Py) -> Result<String, String> {
    Ok(match value {
        Py::None => "None".to_owned(),
        Py::Bool(b) => if *b { "True" } else { "False" }.to_owned(),
        Py::Int(PyInt::Small(i)) => i.to_string(),
        Py::Int(PyInt::Big(digits)) => digits.clone(),
        Py::Int(PyInt::Huge) => return Err(huge_int()),
        Py::Float(f) => py_float_repr(*f),
        Py::Str(s) | Py::Date(s) | Py::DateTime(s) => s.clone(),
        Py::List(_) | Py::Dict(_) => {
            return Err(
                "a list or mapping inside a top-level list: vLLM would pass its Python repr, which no flag reads"
                    .to_owned(),
            )
        }
    })
}

/// `json.dumps(value)` read back as JSON (what vLLM passes for a top-level
/// mapping), with hisparse_rs' spelling of what JSON lacks: NaN and
/// infinities as the strings `nan` / `inf` / `-inf` (the resolver reads them
/// with Python's `float()` rules), an int beyond 64 bits as a float (as JSON
/// text is read). A date is refused: `json.dumps` raises TypeError on it.
pub fn to_json(value: &Py) -> Result<Value, String> {
    Ok(match value {
        Py::None => Value::Null,
        Py::Bool(b) => Value::Bool(*b),
        Py::Int(PyInt::Small(i)) => {
            if let Ok(v) = i64::try_from(*i) {
                Value::from(v)
            } else if let Ok(v) = u64::try_from(*i) {
                Value::from(v)
            } else {
                float_json(*i as f64)?
            }
        }
        Py::Int(PyInt::Big(digits)) => float_json(digits.parse::<f64>().unwrap_or(f64::INFINITY))?,
        Py::Int(PyInt::Huge) => return Err(huge_int()),
        Py::Float(f) => match Number::from_f64(*f) {
            Some(n) => Value::Number(n),
            None if f.is_nan() => Value::from("nan"),
            None if *f > 0.0 => Value::from("inf"),
            None => Value::from("-inf"),
        },
        Py::Str(s) => Value::String(s.clone()),
        Py::Date(s) | Py::DateTime(s) => {
            return Err(format!(
                "the date {s} is inside a mapping, which vLLM passes through json.dumps: it raises TypeError (\"Object of type date is not JSON serializable\"); quote it"
            ))
        }
        Py::List(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Py::Dict(pairs) => {
            let mut map = Map::new();
            for (k, v) in pairs {
                // A repeated text key (1 and "1") keeps the last value, as json.loads does.
                map.insert(json_key(k)?, to_json(v)?);
            }
            Value::Object(map)
        }
    })
}

fn float_json(f: f64) -> Result<Value, String> {
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| "an integer beyond a float's range: vLLM's JSON flag parser cannot hold it (number out of range)".to_owned())
}

/// A dict key as `json.dumps` writes it.
fn json_key(k: &Py) -> Result<String, String> {
    Ok(match k {
        Py::Str(s) => s.clone(),
        Py::Int(_) => py_str(k)?,
        Py::Float(f) if f.is_nan() => "NaN".to_owned(),
        Py::Float(f) if f.is_infinite() => {
            if *f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
        }
        Py::Float(f) => py_float_repr(*f),
        Py::Bool(b) => b.to_string(),
        Py::None => "null".to_owned(),
        Py::Date(s) | Py::DateTime(s) => {
            return Err(format!(
                "the mapping key {s} is a date: vLLM's json.dumps raises TypeError on it; quote it"
            ))
        }
        Py::List(_) | Py::Dict(_) => unreachable!("unhashable keys are refused when read"),
    })
}

/// Python's `repr(float)`: the shortest round-trip digits, positional for
/// exponents -4..16, else `d.ddde+XX`.
pub fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let shortest = format!("{:e}", f.abs()); // "1.5e-5", "1e16", "0e0"
    let (mantissa, exp) = shortest.split_once('e').unwrap_or((&shortest, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exp) {
        let (int, frac) = if exp >= 0 {
            let n = exp as usize + 1;
            if digits.len() <= n {
                (
                    format!("{digits}{}", "0".repeat(n - digits.len())),
                    "0".to_owned(),
                )
            } else {
                (digits[..n].to_owned(), digits[n..].to_owned())
            }
        } else {
            (
                "0".to_owned(),
                format!("{}{digits}", "0".repeat((-exp - 1) as usize)),
            )
        };
        format!("{sign}{int}.{frac}")
    } else {
        let m = if digits.len() == 1 {
            digits
        } else {
            format!("{}.{}", &digits[..1], &digits[1..])
        };
        format!(
            "{sign}{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}

// ---------------------------------------------------------------------------
// Where PyYAML's scanner (pure Python; vLLM's safe_load does not use
// libyaml) reads differently from libyaml.

/// The text as vLLM's `open(file_path)` gives it to PyYAML
/// (`argparse_utils.py:644`, text mode): `\r\n` and `\r` read as `\n`.
fn universal_newlines(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\r') {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// YAML's line breaks (PyYAML's and libyaml's alike).
fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// The directive lines before the document, made what libyaml reads as
/// PyYAML reads them (same length, so marks stay put): `%YAML 1.x` with
/// any minor version (PyYAML's `process_directives` refuses only a major
/// other than 1; libyaml also refuses minors other than 1 and 2) becomes
/// `%YAML 1.1`; a directive of another name than YAML or TAG (PyYAML skips
/// its line; libyaml refuses it) becomes a comment. Only where a `---`
/// follows, as both require.
fn pyyaml_directives(text: &str) -> std::borrow::Cow<'_, str> {
    let mut out: Option<String> = None;
    let mut started = false;
    let mut at = 0;
    for line in text.split_inclusive(is_break) {
        let body = if at == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let offset = at + (line.len() - body.len());
        at += line.len();
        let content = body.trim_start_matches(' ');
        if content.trim_end().is_empty() || content.starts_with('#') {
            continue;
        }
        let Some(directive) = body.strip_prefix('%') else {
            // Directives need a `---` after them (PyYAML: expected
            // '<document start>'); without one the text stays as it is,
            // and libyaml refuses it too.
            let start = body.strip_prefix("---").is_some_and(|rest| {
                rest.is_empty() || rest.starts_with(|c| c == ' ' || c == '\t' || is_break(c))
            });
            started = start;
            break;
        };
        let name_len = directive
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(directive.len());
        let (name, rest) = directive.split_at(name_len);
        let mut fix = |from: usize, with: &str| {
            let o = out.get_or_insert_with(|| text.to_owned());
            o.replace_range(from..from + with.len(), with);
        };
        match name {
            "TAG" => {}
            "YAML" => {
                let version = rest.trim_start_matches(' ');
                let start = offset + 1 + name_len + (rest.len() - version.len());
                let len = version
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(version.len());
                let v = &version[..len];
                if let Some((major, minor)) = v.split_once('.') {
                    let digits = |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit());
                    if digits(major)
                        && digits(minor)
                        && major.trim_start_matches('0') == "1"
                        && v.len() >= 3
                    {
                        fix(start, &format!("1.1{}", " ".repeat(v.len() - 3)));
                    }
                }
            }
            "" => {}
            _ if rest.is_empty() || rest.starts_with(|c| c == ' ' || is_break(c)) => {
                fix(offset, "#")
            }
            _ => {}
        }
    }
    match out {
        Some(o) if started => std::borrow::Cow::Owned(o),
        _ => std::borrow::Cow::Borrowed(text),
    }
}

/// A (line, column) position from 0, as libyaml's marks give it.
type Mark = (usize, usize);
/// Where a scalar's text starts and ends.
type Span = (Mark, Mark);

/// The first tab PyYAML refuses, as 1-based (line, column): one outside
/// quoted and block scalars (`ok`, from libyaml's marks) and comments.
/// PyYAML's scanner skips only spaces between tokens and ends plain scalars
/// at a tab (`scan_to_next_token`, `scan_plain_spaces`), where libyaml
/// takes tabs as separation.
fn tabs(text: &str, ok: &[Span]) -> Result<(), Mark> {
    if !text.contains('\t') {
        return Ok(());
    }
    // Positions only grow: one pass over the spans, in order (linear time;
    // asking every span for every character was quadratic).
    let mut spans = ok.to_vec();
    spans.sort_unstable();
    let mut next = 0;
    let mut inside = |p: Mark| {
        while spans.get(next).is_some_and(|(_, end)| *end <= p) {
            next += 1;
        }
        spans.get(next).is_some_and(|(start, _)| *start <= p)
    };
    let (mut line, mut col) = (0, 0);
    let mut comment = false;
    let mut prev_blank = true;
    let mut chars = text.trim_start_matches('\u{feff}').chars().peekable();
    while let Some(c) = chars.next() {
        if is_break(c) {
            if c == '\r' {
                chars.next_if_eq(&'\n');
            }
            (line, col, comment, prev_blank) = (line + 1, 0, false, true);
            continue;
        }
        if !comment && !inside((line, col)) {
            if c == '\t' {
                return Err((line + 1, col + 1));
            }
            comment = c == '#' && prev_blank;
        }
        prev_blank = c == ' ' || c == '\t';
        col += 1;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// libyaml's events.

/// One parser event, copied out of libyaml's structures.
enum Event {
    DocumentStart,
    Alias(String),
    Scalar {
        value: String,
        tag: Option<String>,
        anchor: Option<String>,
        plain: bool,
        line: usize,
        /// Where a quoted or block scalar's text is, as (line, column) from
        /// 0 (a block scalar's from the line after its header): the only
        /// places besides comments where PyYAML reads a tab.
        tabs_ok: Option<Span>,
        /// A plain scalar inside `[ ]` or `{ }`.
        flow_plain: bool,
    },
    SequenceStart {
        tag: Option<String>,
        anchor: Option<String>,
    },
    MappingStart {
        tag: Option<String>,
        anchor: Option<String>,
    },
    End,
}

/// Feed `text`'s events to `on` until the stream ends, the parser fails or `on` does.
fn events(
    text: &str,
    file: &str,
    mut on: impl FnMut(Event) -> Result<(), String>,
) -> Result<(), String> {
    use std::mem::MaybeUninit;
    use unsafe_libyaml as unsafe_y;
    // SAFETY: the parser and each event are initialised by libyaml before
    // use and deleted on every path; the input outlives the parser; every
    // pointer read (tag, anchor, scalar value, problem) is owned by the event
    // or parser and copied out before yaml_event_delete / yaml_parser_delete.
    unsafe {
        let cstr = |p: *const u8| -> Option<String> {
            (!p.is_null()).then(|| {
                std::ffi::CStr::from_ptr(p.cast())
                    .to_string_lossy()
                    .into_owned()
            })
        };
        let mut parser = MaybeUninit::<unsafe_y::yaml_parser_t>::uninit();
        if unsafe_y::yaml_parser_initialize(parser.as_mut_ptr()).fail {
            return Err(format!("--config {file}: the YAML parser could not start"));
        }
        let parser = parser.as_mut_ptr();
        unsafe_y::yaml_parser_set_input_string(parser, text.as_ptr(), text.len() as u64);
        // Whether each open collection is a flow one (`[ ]`, `{ }`).
        let mut flow: Vec<bool> = Vec::new();
        let result = loop {
            let mut event = MaybeUninit::<unsafe_y::yaml_event_t>::uninit();
            if unsafe_y::yaml_parser_parse(parser, event.as_mut_ptr()).fail {
                let p = &*parser;
                let problem = cstr(p.problem.cast()).unwrap_or_else(|| "a syntax error".into());
                break Err(format!(
                    "--config {file} is not valid YAML: {problem} at line {} column {}",
                    p.problem_mark.line + 1,
                    p.problem_mark.column + 1
                ));
            }
            let ev = event.as_mut_ptr();
            let e = &*ev;
            let (ours, end) = match e.type_ {
                unsafe_y::YAML_STREAM_END_EVENT => (None, true),
                unsafe_y::YAML_DOCUMENT_START_EVENT => (Some(Event::DocumentStart), false),
                unsafe_y::YAML_ALIAS_EVENT => (
                    Some(Event::Alias(cstr(e.data.alias.anchor).unwrap_or_default())),
                    false,
                ),
                unsafe_y::YAML_SCALAR_EVENT => {
                    let s = &e.data.scalar;
                    let bytes = std::slice::from_raw_parts(s.value, s.length as usize);
                    let (start, end) = (
                        (e.start_mark.line as usize, e.start_mark.column as usize),
                        (e.end_mark.line as usize, e.end_mark.column as usize),
                    );
                    let tabs_ok = match s.style {
                        unsafe_y::YAML_SINGLE_QUOTED_SCALAR_STYLE
                        | unsafe_y::YAML_DOUBLE_QUOTED_SCALAR_STYLE => Some((start, end)),
                        unsafe_y::YAML_LITERAL_SCALAR_STYLE
                        | unsafe_y::YAML_FOLDED_SCALAR_STYLE => Some(((start.0 + 1, 0), end)),
                        _ => None,
                    };
                    (
                        Some(Event::Scalar {
                            value: String::from_utf8_lossy(bytes).into_owned(),
                            tag: cstr(s.tag),
                            anchor: cstr(s.anchor),
                            plain: s.plain_implicit,
                            line: e.start_mark.line as usize + 1,
                            tabs_ok,
                            flow_plain: s.style == unsafe_y::YAML_PLAIN_SCALAR_STYLE
                                && flow.last() == Some(&true),
                        }),
                        false,
                    )
                }
                unsafe_y::YAML_SEQUENCE_START_EVENT => (
                    {
                        flow.push(
                            e.data.sequence_start.style == unsafe_y::YAML_FLOW_SEQUENCE_STYLE,
                        );
                        Some(Event::SequenceStart {
                            tag: cstr(e.data.sequence_start.tag),
                            anchor: cstr(e.data.sequence_start.anchor),
                        })
                    },
                    false,
                ),
                unsafe_y::YAML_MAPPING_START_EVENT => (
                    {
                        flow.push(e.data.mapping_start.style == unsafe_y::YAML_FLOW_MAPPING_STYLE);
                        Some(Event::MappingStart {
                            tag: cstr(e.data.mapping_start.tag),
                            anchor: cstr(e.data.mapping_start.anchor),
                        })
                    },
                    false,
                ),
                unsafe_y::YAML_SEQUENCE_END_EVENT | unsafe_y::YAML_MAPPING_END_EVENT => {
                    flow.pop();
                    (Some(Event::End), false)
                }
                _ => (None, false), // stream start, document end
            };
            unsafe_y::yaml_event_delete(ev);
            if let Some(ours) = ours {
                if let Err(err) = on(ours) {
                    break Err(err);
                }
            }
            if end {
                break Ok(());
            }
        };
        unsafe_y::yaml_parser_delete(parser);
        result
    }
}

// ---------------------------------------------------------------------------
// PyYAML's composer (a node graph: an alias shares its anchor's node),
// flatten_mapping and SafeConstructor.

type NodeRef = Rc<RefCell<Node>>;

/// A node as PyYAML's composer builds it: scalars carry their resolved tag.
#[derive(Debug)]
enum Node {
    Scalar {
        tag: &'static str,
        value: String,
    },
    Seq(Vec<NodeRef>),
    /// Key, value and the key's line.
    Map(Vec<(NodeRef, NodeRef, usize)>),
    /// A node whose tag SafeConstructor cannot build (or that no flag
    /// takes): an error once it is built, as in PyYAML, and only then (a
    /// merged pair skipped for its key is never built).
    Refused(String),
    /// A mapping with such a tag: still merged by `<<` (PyYAML's
    /// `flatten_mapping` takes any mapping node, whatever its tag), an
    /// error once built itself.
    RefusedMap(String, Vec<(NodeRef, NodeRef, usize)>),
}

/// Dropped without recursion: aliases can chain nodes far deeper than the
/// file nests (each 100-deep list holding an alias of the last), and a
/// recursive drop of that chain overflowed the stack.
impl Drop for Node {
    fn drop(&mut self) {
        let mut stack = Vec::new();
        let take = |node: &mut Node, stack: &mut Vec<NodeRef>| match node {
            Node::Seq(items) => stack.append(items),
            Node::Map(pairs) | Node::RefusedMap(_, pairs) => {
                for (k, v, _) in pairs.drain(..) {
                    stack.push(k);
                    stack.push(v);
                }
            }
            _ => {}
        };
        take(self, &mut stack);
        while let Some(n) = stack.pop() {
            if let Ok(cell) = Rc::try_unwrap(n) {
                take(&mut cell.into_inner(), &mut stack);
            }
        }
    }
}

enum Frame {
    Seq {
        items: Vec<NodeRef>,
        anchor: Option<String>,
        refused: Option<String>,
    },
    Map {
        pairs: Vec<(NodeRef, NodeRef, usize)>,
        key: Option<(NodeRef, usize)>,
        anchor: Option<String>,
        refused: Option<String>,
    },
}

struct Composer<'a> {
    file: &'a str,
    stack: Vec<Frame>,
    anchors: HashMap<String, NodeRef>,
    root: Option<NodeRef>,
    documents: usize,
    tabs_ok: Vec<Span>,
    /// Pairs copied by `<<` merges so far.
    merged: usize,
    /// Reading a stream of documents (`load_all`), with its bounds; `None`
    /// for a `--config` file (exactly one document).
    many: Option<Many>,
}

/// The bounds of a multi-document read ([`load_all`]), each with its own error.
#[derive(Clone, Copy, Debug)]
pub struct StreamBounds {
    pub documents: usize,
    pub aliases: usize,
    pub string_bytes: usize,
}

struct Many {
    bounds: StreamBounds,
    roots: Vec<NodeRef>,
    aliases: usize,
}

/// Most pairs `<<` merges may copy, all merges together: one per
/// [`NODE_BYTES`] of the values bound.
const MAX_MERGED_PAIRS: usize = MAX_INPUT_BYTES / NODE_BYTES;

impl Composer<'_> {
    fn err(&self, what: impl std::fmt::Display) -> String {
        format!("--config {}: {what}", self.file)
    }

    fn event(&mut self, e: Event) -> Result<(), String> {
        match e {
            Event::DocumentStart => {
                self.documents += 1;
                if let Some(many) = &mut self.many {
                    // PyYAML's compose_document: anchors are the document's own.
                    self.anchors.clear();
                    many.roots.extend(self.root.take());
                    if self.documents > many.bounds.documents {
                        let n = many.bounds.documents;
                        return Err(self.err(format!(
                            "it holds more than {n} YAML documents (the bound on documents)"
                        )));
                    }
                    return Ok(());
                }
                if self.documents > 1 {
                    return Err(self.err(
                        "it holds more than one YAML document; vLLM's yaml.safe_load reads exactly one",
                    ));
                }
                Ok(())
            }
            Event::Alias(name) => {
                if let Some(many) = &mut self.many {
                    many.aliases += 1;
                    if many.aliases > many.bounds.aliases {
                        let n = many.bounds.aliases;
                        return Err(self.err(format!(
                            "it uses more than {n} YAML aliases (*name; the bound on aliases)"
                        )));
                    }
                }
                let Some(node) = self.anchors.get(&name).cloned() else {
                    let open = self.stack.iter().any(|f| match f {
                        Frame::Seq { anchor, .. } | Frame::Map { anchor, .. } => {
                            anchor.as_deref() == Some(name.as_str())
                        }
                    });
                    return Err(self.err(if open {
                        format!("the alias *{name} refers to a node that contains it (a circular reference, which no JSON value can hold)")
                    } else {
                        format!("the alias *{name} has no anchor &{name} before it")
                    }));
                };
                self.add(node, 0)
            }
            Event::Scalar {
                value,
                tag,
                anchor,
                plain,
                line,
                tabs_ok,
                flow_plain,
            } => {
                self.tabs_ok.extend(tabs_ok);
                if let Some(many) = &self.many {
                    let n = many.bounds.string_bytes;
                    if value.len() > n {
                        return Err(self.err(format!(
                            "line {line}: a value of {} bytes, over the bound of {n} bytes per string",
                            value.len()
                        )));
                    }
                }
                if flow_plain && value.contains('?') {
                    // PyYAML's scan_plain ends a plain scalar at '?' inside
                    // [ ] or { }, and its parser then fails; libyaml reads on.
                    return Err(self.err(format!(
                        "line {line}: {value:?} inside [ ] or {{ }}: vLLM's yaml.safe_load (PyYAML) ends a plain scalar at '?' there and fails (expected ',' or ']'); quote it"
                    )));
                }
                let node = match self.scalar_tag(&value, tag.as_deref(), plain) {
                    Ok(tag) => Node::Scalar { tag, value },
                    Err(refused) => Node::Refused(refused),
                };
                let node = Rc::new(RefCell::new(node));
                self.anchor(anchor, &node)?;
                self.add(node, line)
            }
            Event::SequenceStart { tag, anchor } => {
                let refused = self.collection_tag(tag.as_deref(), "seq").err();
                self.open(Frame::Seq {
                    items: Vec::new(),
                    anchor,
                    refused,
                })
            }
            Event::MappingStart { tag, anchor } => {
                let refused = self.collection_tag(tag.as_deref(), "map").err();
                self.open(Frame::Map {
                    pairs: Vec::new(),
                    key: None,
                    anchor,
                    refused,
                })
            }
            Event::End => {
                let (node, anchor) = match self.stack.pop().expect("libyaml pairs starts and ends")
                {
                    Frame::Seq {
                        refused: Some(refused),
                        anchor,
                        ..
                    } => (Node::Refused(refused), anchor),
                    Frame::Map {
                        refused: Some(refused),
                        pairs,
                        anchor,
                        ..
                    } => (Node::RefusedMap(refused, self.flatten(pairs)?), anchor),
                    Frame::Seq { items, anchor, .. } => (Node::Seq(items), anchor),
                    Frame::Map { pairs, anchor, .. } => (Node::Map(self.flatten(pairs)?), anchor),
                };
                let node = Rc::new(RefCell::new(node));
                self.anchor(anchor, &node)?;
                self.add(node, 0)
            }
        }
    }

    fn open(&mut self, frame: Frame) -> Result<(), String> {
        if self.stack.len() >= MAX_JSON_DEPTH {
            return Err(self.err(format!(
                "it nests deeper than {MAX_JSON_DEPTH} levels (README \"Limits\")"
            )));
        }
        self.stack.push(frame);
        Ok(())
    }

    fn anchor(&mut self, name: Option<String>, node: &NodeRef) -> Result<(), String> {
        if let Some(name) = name {
            if self.anchors.insert(name.clone(), node.clone()).is_some() {
                return Err(self.err(format!(
                    "the anchor &{name} is defined twice (PyYAML: found duplicate anchor)"
                )));
            }
        }
        Ok(())
    }

    /// Put a finished node into the open collection, or make it the document.
    fn add(&mut self, node: NodeRef, line: usize) -> Result<(), String> {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { pairs, key, .. }) => match key.take() {
                None => *key = Some((node, line)),
                Some((k, at)) => pairs.push((k, node, at)),
            },
        }
        Ok(())
    }

    /// PyYAML 6.0 `flatten_mapping`, run when the mapping is complete (its
    /// merge sources are complete, and flattened, by then): each `<<` pair
    /// is replaced by the pairs of the mapping (or of each mapping of the
    /// list, in order) it names, all before the mapping's own pairs; a merged
    /// pair whose key is the same object as an earlier merged one is skipped
    /// (CPython shares the one-character strings, so `a` from two mappings
    /// is one object, `ab` is two); `=` keys become text.
    fn flatten(
        &mut self,
        pairs: Vec<(NodeRef, NodeRef, usize)>,
    ) -> Result<Vec<(NodeRef, NodeRef, usize)>, String> {
        let file = self.file;
        let merged = &mut self.merged;
        let mut merge: Vec<(NodeRef, NodeRef, usize)> = Vec::new();
        let mut seen: std::collections::HashSet<KeyObject> = std::collections::HashSet::new();
        let mut own = Vec::new();
        let mut take = |from: &NodeRef, line: usize| -> Result<(), String> {
            let (Node::Map(sub) | Node::RefusedMap(_, sub)) = &*from.borrow() else {
                return Err(format!(
                    "--config {file}: line {line}: << merges a mapping or a list of mappings, not anything else"
                ));
            };
            // Each merge copies the pairs it names: a chain of merges copies
            // quadratically many (PyYAML too), so the copies are bounded.
            *merged += sub.len();
            if *merged > MAX_MERGED_PAIRS {
                return Err(format!("--config {file}: its << merges copy more than {MAX_MERGED_PAIRS} pairs (README \"Limits\": {MAX_INPUT_BYTES} bytes of values); a serve file merges a few"));
            }
            for (k, v, l) in sub {
                if seen.insert(KeyObject::of(k)) {
                    merge.push((k.clone(), v.clone(), *l));
                }
            }
            Ok(())
        };
        for (k, v, line) in pairs {
            let key_tag = match &*k.borrow() {
                Node::Scalar { tag, .. } => Some(*tag),
                _ => None,
            };
            match key_tag {
                Some("merge") => {
                    let list = match &*v.borrow() {
                        Node::Seq(items) => Some(items.clone()),
                        _ => None,
                    };
                    match list {
                        Some(items) => {
                            for item in &items {
                                take(item, line)?;
                            }
                        }
                        None => take(&v, line)?,
                    }
                }
                Some("value") => {
                    if let Node::Scalar { tag, .. } = &mut *k.borrow_mut() {
                        *tag = "str";
                    }
                    own.push((k, v, line));
                }
                _ => own.push((k, v, line)),
            }
        }
        merge.extend(own);
        Ok(merge)
    }

    fn collection_tag(&self, tag: Option<&str>, kind: &str) -> Result<(), String> {
        match tag {
            None | Some("!") => Ok(()),
            Some(t) if t.strip_prefix(CORE) == Some(kind) => Ok(()),
            Some(t) => Err(refused(t)),
        }
    }

    /// The tag PyYAML gives a scalar: implicit resolution for a plain scalar
    /// or the non-specific `!` (its parser marks both implicit), else the
    /// explicit tag, which must be one SafeConstructor builds.
    fn scalar_tag(
        &self,
        value: &str,
        tag: Option<&str>,
        plain: bool,
    ) -> Result<&'static str, String> {
        let tag = match tag {
            Some("!") => return Ok(resolve_nonspecific(value)),
            None if plain => return Ok(resolve(value)),
            None => return Ok("str"),
            Some(t) => t,
        };
        const BUILT: &[&str] = &[
            "str",
            "null",
            "bool",
            "int",
            "float",
            "timestamp",
            "merge",
            "value",
        ];
        match tag
            .strip_prefix(CORE)
            .and_then(|t| BUILT.iter().find(|b| **b == t))
        {
            Some(t) => Ok(t),
            None => Err(refused(tag)),
        }
    }
}

fn refused(tag: &str) -> String {
    let shown = match tag.strip_prefix(CORE) {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_owned(),
    };
    let standard = tag
        .strip_prefix(CORE)
        .is_some_and(|t| ["binary", "set", "omap", "pairs"].contains(&t));
    if standard {
        format!(
            "the YAML tag {shown} is not read: vLLM passes its Python repr, or json.dumps raises on it, and no flag takes one; write the plain value"
        )
    } else {
        format!(
            "the YAML tag {shown} is refused: vLLM reads --config with yaml.safe_load, which accepts only YAML's standard tags (!!str, !!int, !!float, !!bool, !!null, !!map, !!seq, ...); remove the tag and write the plain value"
        )
    }
}

/// `id(key_node.value)` in PyYAML's `flatten_mapping`: the node's own text
/// object, which CPython shares for one-character (latin-1) and empty strings.
#[derive(Hash, PartialEq, Eq)]
enum KeyObject {
    Shared(String),
    Node(usize),
}

impl KeyObject {
    fn of(k: &NodeRef) -> KeyObject {
        if let Node::Scalar { value, .. } = &*k.borrow() {
            let mut chars = value.chars();
            let shared = match (chars.next(), chars.next()) {
                (None, _) => true,
                (Some(c), None) => (c as u32) < 256,
                _ => false,
            };
            if shared {
                return KeyObject::Shared(value.clone());
            }
        }
        KeyObject::Node(Rc::as_ptr(k) as usize)
    }
}

/// SafeConstructor over the node graph, charging every value it builds (an
/// alias's node is built again each time it is used: JSON cannot share it).
struct Builder {
    budget: usize,
    /// Collections open: aliases can nest deeper than the file's own
    /// nesting (an alias of a 100-deep list inside a 100-deep list), so the
    /// depth bound is checked here too (the building recurses).
    depth: usize,
}

impl Builder {
    fn charge(&mut self, bytes: usize) -> Result<(), String> {
        self.budget = self.budget.checked_sub(NODE_BYTES + bytes).ok_or_else(|| {
            format!("its values, with every alias expanded, exceed {MAX_INPUT_BYTES} bytes (README \"Limits\"); a serve file is a few hundred bytes")
        })?;
        Ok(())
    }

    fn value(&mut self, node: &NodeRef) -> Result<Py, String> {
        let node = node.borrow();
        let collection = matches!(&*node, Node::Seq(_) | Node::Map(_));
        if collection {
            self.depth += 1;
            if self.depth > MAX_JSON_DEPTH {
                return Err(format!("its values, with every alias expanded, nest deeper than {MAX_JSON_DEPTH} levels (README \"Limits\")"));
            }
        }
        let built = self.build(&node);
        if collection {
            self.depth -= 1;
        }
        built
    }

    fn build(&mut self, node: &Node) -> Result<Py, String> {
        match node {
            Node::Scalar { tag, value } => {
                self.charge(value.len())?;
                construct_scalar(tag, value)
            }
            Node::Seq(items) => {
                self.charge(0)?;
                Ok(Py::List(
                    items
                        .iter()
                        .map(|n| self.value(n))
                        .collect::<Result<_, _>>()?,
                ))
            }
            Node::Map(pairs) => {
                self.charge(0)?;
                Ok(Py::Dict(self.dict(pairs)?.0))
            }
            Node::Refused(why) | Node::RefusedMap(why, _) => Err(why.clone()),
        }
    }

    /// `construct_mapping`: every key hashable; a repeated key (by Python
    /// equality: True == 1 == 1.0) keeps its first place and its last value.
    #[allow(clippy::type_complexity)]
    fn dict(
        &mut self,
        pairs: &[(NodeRef, NodeRef, usize)],
    ) -> Result<(Vec<(Py, Py)>, Vec<usize>), String> {
        let mut out: Vec<(Py, Py)> = Vec::new();
        let mut lines = Vec::new();
        let mut index: HashMap<KeyId, usize> = HashMap::new();
        for (n, (k, v, line)) in pairs.iter().enumerate() {
            let key = self.value(k)?;
            if matches!(key, Py::List(_) | Py::Dict(_)) {
                return Err(format!("line {line}: a mapping key must be a plain value, not a list or mapping (PyYAML: found unhashable key)"));
            }
            let value = self.value(v)?;
            match index.entry(KeyId::of(&key, n)) {
                std::collections::hash_map::Entry::Occupied(at) => out[*at.get()].1 = value,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(out.len());
                    out.push((key, value));
                    lines.push(*line);
                }
            }
        }
        Ok((out, lines))
    }
}

/// A scalar with its resolved tag, as SafeConstructor builds it.
fn construct_scalar(tag: &str, value: &str) -> Result<Py, String> {
    let bad = |kind: &str| format!("{value:?} is not a YAML 1.1 {kind} (PyYAML cannot build it)");
    Ok(match tag {
        "str" => Py::Str(value.to_owned()),
        "null" => Py::None,
        "bool" => Py::Bool(match value.to_ascii_lowercase().as_str() {
            "yes" | "true" | "on" => true,
            "no" | "false" | "off" => false,
            _ => return Err(bad("bool")),
        }),
        "int" => Py::Int(construct_int(value).ok_or_else(|| bad("int"))?),
        "float" => Py::Float(construct_float(value).ok_or_else(|| bad("float"))?),
        "timestamp" => construct_timestamp(value).ok_or_else(|| bad("timestamp"))?,
        // merge / value outside a mapping key (PyYAML: could not determine a constructor).
        other => {
            return Err(format!(
                "{value} (tag:yaml.org,2002:{other}) is only a mapping key in YAML 1.1 (PyYAML: could not determine a constructor); quote it"
            ))
        }
    })
}

/// Python equality of dict keys, hashable: True == 1 == 1.0, every NaN distinct.
#[derive(Hash, PartialEq, Eq)]
enum KeyId {
    None,
    Num(i128),
    Big(String),
    Float(u64),
    NaN(usize),
    Str(String),
    Date(String),
    DateTime(String),
}

impl KeyId {
    fn of(k: &Py, position: usize) -> KeyId {
        match k {
            Py::None => KeyId::None,
            Py::Bool(b) => KeyId::Num(i128::from(*b)),
            Py::Int(PyInt::Small(i)) => KeyId::Num(*i),
            Py::Int(PyInt::Big(d)) => KeyId::Big(d.clone()),
            Py::Int(PyInt::Huge) => KeyId::NaN(position), // never passed on: str() raises
            Py::Float(f) if f.is_nan() => KeyId::NaN(position),
            Py::Float(f) if f.fract() == 0.0 && f.abs() < 1.7e38 => KeyId::Num(*f as i128),
            Py::Float(f) => KeyId::Float(f.to_bits()),
            Py::Str(s) => KeyId::Str(s.clone()),
            Py::Date(s) => KeyId::Date(s.clone()),
            Py::DateTime(s) => KeyId::DateTime(s.clone()),
            Py::List(_) | Py::Dict(_) => unreachable!("unhashable keys are refused first"),
        }
    }
}

// ---------------------------------------------------------------------------
// PyYAML's implicit resolvers (resolver.py), as matchers over the text.

/// The tag PyYAML's resolver gives a plain scalar (the first that matches, in
/// registration order), without the `tag:yaml.org,2002:` prefix.
fn resolve(v: &str) -> &'static str {
    if is_bool(v) {
        "bool"
    } else if is_float(v) {
        "float"
    } else if is_int(v) {
        "int"
    } else if v == "<<" {
        "merge"
    } else if matches!(v, "~" | "null" | "Null" | "NULL" | "") {
        "null"
    } else if timestamp(v).is_some_and(|t| t.implicit) {
        "timestamp"
    } else if v == "=" {
        "value"
    } else {
        "str"
    }
}

/// The tag a `!`-tagged scalar of any style gets: the implicit resolvers,
/// whose regexps end in `$`, which Python's `re` also matches before one
/// final line break (`! |` block scalars end in one: `! |\n  010\n` is 8);
/// the resolvers are picked by the first character, and a lone `\n` has none.
fn resolve_nonspecific(value: &str) -> &'static str {
    match value.strip_suffix('\n') {
        Some("") => "str",
        Some(v) => resolve(v),
        None => resolve(value),
    }
}

fn is_bool(v: &str) -> bool {
    matches!(
        v,
        "yes"
            | "Yes"
            | "YES"
            | "no"
            | "No"
            | "NO"
            | "true"
            | "True"
            | "TRUE"
            | "false"
            | "False"
            | "FALSE"
            | "on"
            | "On"
            | "ON"
            | "off"
            | "Off"
            | "OFF"
    )
}

/// A cursor over ASCII text for the matchers.
struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    fn new(s: &'a str) -> Self {
        Cur {
            b: s.as_bytes(),
            i: 0,
        }
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn eat_any(&mut self, set: &[u8]) -> bool {
        match self.peek() {
            Some(c) if set.contains(&c) => {
                self.i += 1;
                true
            }
            _ => false,
        }
    }
    /// Characters while `f` holds; how many.
    fn many(&mut self, f: impl Fn(u8) -> bool) -> usize {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
        self.i - start
    }
    fn done(&self) -> bool {
        self.i == self.b.len()
    }
    fn sign(&mut self) {
        self.eat_any(b"+-");
    }
    /// `(?::[0-5]?[0-9])+`
    fn sexagesimal_tail(&mut self) -> bool {
        let mut any = false;
        loop {
            let at = self.i;
            if !self.eat(b':') {
                break;
            }
            let first = self.peek();
            let n = self.many(|c| c.is_ascii_digit());
            let ok = n == 1 || (n == 2 && first.is_some_and(|c| c <= b'5'));
            if !ok {
                self.i = at;
                break;
            }
            any = true;
        }
        any
    }
}

fn digit_(c: u8) -> bool {
    c.is_ascii_digit() || c == b'_'
}

/// `[eE][-+][0-9]+`, optional.
fn exponent(c: &mut Cur<'_>) -> bool {
    let at = c.i;
    if c.eat_any(b"eE") && c.eat_any(b"+-") && c.many(|x| x.is_ascii_digit()) > 0 {
        return true;
    }
    c.i = at;
    false
}

/// PyYAML's float resolver:
/// `[-+]?([0-9][0-9_]*)\.[0-9_]*([eE][-+][0-9]+)?` | `\.[0-9][0-9_]*([eE][-+][0-9]+)?`
/// | `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*` | `[-+]?\.(inf|Inf|INF)` | `\.(nan|NaN|NAN)`.
fn is_float(v: &str) -> bool {
    let full = |f: &dyn Fn(&mut Cur<'_>) -> bool| {
        let mut c = Cur::new(v);
        f(&mut c) && c.done()
    };
    full(&|c| {
        c.sign();
        c.peek().is_some_and(|x| x.is_ascii_digit()) && c.many(digit_) > 0 && c.eat(b'.') && {
            c.many(digit_);
            exponent(c);
            true
        }
    }) || full(&|c| {
        c.eat(b'.') && c.peek().is_some_and(|x| x.is_ascii_digit()) && {
            c.many(digit_);
            exponent(c);
            true
        }
    }) || full(&|c| {
        c.sign();
        c.peek().is_some_and(|x| x.is_ascii_digit())
            && c.many(digit_) > 0
            && c.sexagesimal_tail()
            && c.eat(b'.')
            && {
                c.many(digit_);
                true
            }
    }) || {
        let body = v.strip_prefix(['+', '-']).unwrap_or(v);
        matches!(body, ".inf" | ".Inf" | ".INF")
    } || matches!(v, ".nan" | ".NaN" | ".NAN")
}

/// PyYAML's int resolver: `[-+]?0b[0-1_]+` | `[-+]?0[0-7_]+` | `[-+]?(0|[1-9][0-9_]*)`
/// | `[-+]?0x[0-9a-fA-F_]+` | `[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+`.
fn is_int(v: &str) -> bool {
    let body = v.strip_prefix(['+', '-']).unwrap_or(v);
    let all = |s: &str, f: fn(u8) -> bool| !s.is_empty() && s.bytes().all(f);
    if let Some(rest) = body.strip_prefix("0b") {
        return all(rest, |c| matches!(c, b'0' | b'1' | b'_'));
    }
    if let Some(rest) = body.strip_prefix("0x") {
        return all(rest, |c| c.is_ascii_hexdigit() || c == b'_');
    }
    if let Some(rest) = body.strip_prefix('0') {
        return rest.is_empty() || all(rest, |c| matches!(c, b'0'..=b'7' | b'_'));
    }
    let mut c = Cur::new(body);
    if !c.peek().is_some_and(|x| (b'1'..=b'9').contains(&x)) {
        return false;
    }
    c.many(digit_);
    c.done() || (c.sexagesimal_tail() && c.done())
}

/// SafeConstructor `construct_yaml_int` on text the resolver (or a tag)
/// gave it, step by step: underscores removed, one sign read off, then
/// `0`, `0b` (`int(rest, 2)`), `0x` (`int(rest, 16)`), a leading `0`
/// (`int(text, 8)`), base 60 (`int()` of each part), else `int(text)`.
/// None where Python raises.
fn construct_int(v: &str) -> Option<PyInt> {
    let s = v.replace('_', "");
    let first = s.chars().next()?; // value[0]: IndexError on ""
    let neg = first == '-';
    let body = if first == '-' || first == '+' {
        &s[1..]
    } else {
        &s[..]
    };
    let mag = if body == "0" {
        Int::Small(0)
    } else if let Some(d) = body.strip_prefix("0b") {
        python_int(d, 2)?
    } else if let Some(d) = body.strip_prefix("0x") {
        python_int(d, 16)?
    } else if body.starts_with('0') {
        python_int(body, 8)?
    } else if body.contains(':') {
        // sum(int(part) * 60**k), the last part k = 0.
        let mut total = Int::Small(0);
        for part in body.split(':') {
            total = total.mul_add(60, python_int(part, 10)?)?;
        }
        total
    } else {
        python_int(body, 10)?
    };
    Some(mag.signed(neg).into_py())
}

/// Python `int(text, base)` (text without underscores): surrounding
/// whitespace and one sign allowed, the base's `0b` / `0o` / `0x` prefix
/// allowed, ASCII digits; base 10 refuses more than [`INT_MAX_STR_DIGITS`]
/// digits (ValueError).
fn python_int(text: &str, base: u32) -> Option<Int> {
    let t = text.trim_matches(char::is_whitespace);
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let prefix = match base {
        2 => Some("0b"),
        8 => Some("0o"),
        16 => Some("0x"),
        _ => None,
    };
    let t = match prefix {
        Some(p) if t.len() > 2 && t.get(..2).is_some_and(|h| h.eq_ignore_ascii_case(p)) => &t[2..],
        _ => t,
    };
    if t.is_empty() || !t.chars().all(|c| c.is_digit(base)) {
        return None;
    }
    if base == 10 && t.len() > INT_MAX_STR_DIGITS {
        return None;
    }
    Some(Int::parse(t, base).signed(neg))
}

/// An int as PyYAML computes it: i128, or a magnitude in base 10^9 limbs
/// (least significant first) with a sign. Values beyond
/// [`INT_MAX_STR_DIGITS`] decimal digits stop growing (Python's `str()` of
/// them raises): the work is bounded by that, not by the input.
#[derive(Clone, Debug)]
enum Int {
    Small(i128),
    Big { neg: bool, limbs: Vec<u32> },
    Huge,
}

const LIMB: u64 = 1_000_000_000;
const MAX_LIMBS: usize = INT_MAX_STR_DIGITS / 9 + 2;

impl Int {
    fn parse(digits: &str, base: u32) -> Int {
        let mut v = Int::Small(0);
        for c in digits.chars() {
            // Leading zeros add nothing; the bound counts significant digits.
            v = match v.mul_add(base, Int::Small(i128::from(c.to_digit(base).unwrap_or(0)))) {
                Some(v) => v,
                None => return Int::Huge,
            };
        }
        v
    }

    fn signed(self, neg: bool) -> Int {
        match self {
            Int::Small(x) if neg => Int::Small(-x),
            Int::Big { neg: n, limbs } => Int::Big {
                neg: n != neg,
                limbs,
            },
            other => other,
        }
    }

    /// `self * m + add`; None where a big value would meet a negative one
    /// (only an explicit `!!int` with signed base-60 parts asks for that).
    fn mul_add(self, m: u32, add: Int) -> Option<Int> {
        if let (Int::Small(x), Int::Small(a)) = (&self, &add) {
            if let Some(r) = x.checked_mul(i128::from(m)).and_then(|y| y.checked_add(*a)) {
                return Some(Int::Small(r));
            }
        }
        let magnitude = |v: Int| match v {
            Int::Small(x) if x >= 0 => Some(Some(Int::limbs_of(x as u128))),
            Int::Big { neg: false, limbs } => Some(Some(limbs)),
            Int::Huge => Some(None),
            _ => None,
        };
        let (Some(mut limbs), Some(add)) = (magnitude(self)?, magnitude(add)?) else {
            return Some(Int::Huge);
        };
        let mut carry: u128 = 0;
        for limb in limbs.iter_mut() {
            let v = u128::from(*limb) * u128::from(m) + carry;
            *limb = (v % u128::from(LIMB)) as u32;
            carry = v / u128::from(LIMB);
        }
        while carry > 0 {
            limbs.push((carry % u128::from(LIMB)) as u32);
            carry /= u128::from(LIMB);
        }
        let mut carry = 0u64;
        for i in 0..limbs.len().max(add.len()) {
            if i == limbs.len() {
                limbs.push(0);
            }
            let v = u64::from(limbs[i]) + u64::from(add.get(i).copied().unwrap_or(0)) + carry;
            limbs[i] = (v % LIMB) as u32;
            carry = v / LIMB;
        }
        if carry > 0 {
            limbs.push(carry as u32);
        }
        if limbs.len() > MAX_LIMBS {
            return Some(Int::Huge);
        }
        Some(Int::Big { neg: false, limbs })
    }

    fn limbs_of(mut x: u128) -> Vec<u32> {
        let mut limbs = Vec::new();
        while x > 0 {
            limbs.push((x % u128::from(LIMB)) as u32);
            x /= u128::from(LIMB);
        }
        limbs
    }

    fn into_py(self) -> PyInt {
        match self {
            Int::Small(x) => PyInt::Small(x),
            Int::Huge => PyInt::Huge,
            Int::Big { neg, limbs } => {
                let mut digits = String::new();
                for (i, limb) in limbs.iter().rev().enumerate() {
                    if i == 0 {
                        digits.push_str(&limb.to_string());
                    } else {
                        digits.push_str(&format!("{limb:09}"));
                    }
                }
                if let Ok(x) = digits.parse::<i128>() {
                    return PyInt::Small(if neg { -x } else { x });
                }
                if digits.len() > INT_MAX_STR_DIGITS {
                    return PyInt::Huge;
                }
                PyInt::Big(format!("{}{digits}", if neg { "-" } else { "" }))
            }
        }
    }
}

/// SafeConstructor `construct_yaml_float`: underscores removed, lower
/// case, one sign read off; `.inf`, `.nan`, base 60 (summed from the last
/// part up, as PyYAML does, each part `float()`), else `float()`.
fn construct_float(v: &str) -> Option<f64> {
    let s = v.replace('_', "").to_lowercase();
    let first = s.chars().next()?;
    let sign = if first == '-' { -1.0 } else { 1.0 };
    let body = if first == '-' || first == '+' {
        &s[1..]
    } else {
        &s[..]
    };
    if body == ".inf" {
        return Some(sign * f64::INFINITY);
    }
    if body == ".nan" {
        return Some(f64::NAN);
    }
    if body.contains(':') {
        let parts = body
            .split(':')
            .map(python_float)
            .collect::<Option<Vec<f64>>>()?;
        let mut total = 0.0;
        let mut base = Int::Small(1);
        for part in parts.iter().rev() {
            // float * int: the int correctly rounded to a float first.
            let b = match &base {
                Int::Small(b) => *b as f64,
                big => match big.clone().into_py() {
                    PyInt::Big(d) => d.parse().unwrap_or(f64::INFINITY),
                    _ => f64::INFINITY,
                },
            };
            total += part * b;
            base = base.mul_add(60, Int::Small(0))?;
        }
        return Some(sign * total);
    }
    python_float(body).map(|f| sign * f)
}

/// Python `float(text)` on what the float resolver or a tag passes
/// (underscores removed, lower case): surrounding whitespace, a sign,
/// `inf` / `infinity` / `nan`, decimal notation. Rust's parser reads the
/// same ASCII forms.
fn python_float(t: &str) -> Option<f64> {
    let t = t.trim_matches(char::is_whitespace);
    let ascii = t
        .bytes()
        .all(|c| c.is_ascii_digit() || b".e+-infatyINFATY".contains(&c));
    if !ascii {
        return None;
    }
    t.parse().ok()
}

/// A timestamp as PyYAML's `timestamp_regexp` reads it.
struct Timestamp {
    year: u32,
    month: u32,
    day: u32,
    /// hour, minute, second, microsecond
    time: Option<(u32, u32, u32, u32)>,
    /// UTC offset in minutes (`Z` is 0).
    tz: Option<i32>,
    /// The resolver's form: `YYYY-MM-DD`, or the time part present.
    implicit: bool,
}

fn timestamp(v: &str) -> Option<Timestamp> {
    let mut c = Cur::new(v);
    let num = |c: &mut Cur<'_>, min: usize, max: usize| -> Option<(u32, usize)> {
        let start = c.i;
        let n = c.many(|x| x.is_ascii_digit());
        if n < min || n > max {
            return None;
        }
        Some((v[start..start + n].parse().ok()?, n))
    };
    let (year, _) = num(&mut c, 4, 4)?;
    c.eat(b'-').then_some(())?;
    let (month, mn) = num(&mut c, 1, 2)?;
    c.eat(b'-').then_some(())?;
    let (day, dn) = num(&mut c, 1, 2)?;
    if c.done() {
        return Some(Timestamp {
            year,
            month,
            day,
            time: None,
            tz: None,
            implicit: mn == 2 && dn == 2,
        });
    }
    if !(c.eat_any(b"Tt") || c.many(|x| x == b' ' || x == b'\t') > 0) {
        return None;
    }
    let (hour, _) = num(&mut c, 1, 2)?;
    c.eat(b':').then_some(())?;
    let (minute, _) = num(&mut c, 2, 2)?;
    c.eat(b':').then_some(())?;
    let (second, _) = num(&mut c, 2, 2)?;
    let mut micro = 0;
    if c.eat(b'.') {
        let start = c.i;
        let n = c.many(|x| x.is_ascii_digit());
        let mut frac: String = v[start..start + n].chars().take(6).collect();
        while !frac.is_empty() && frac.len() < 6 {
            frac.push('0');
        }
        micro = if frac.is_empty() {
            0
        } else {
            frac.parse().ok()?
        };
    }
    c.many(|x| x == b' ' || x == b'\t');
    let mut tz = None;
    if c.eat(b'Z') {
        tz = Some(0);
    } else if let Some(sign) = c.peek().filter(|x| *x == b'+' || *x == b'-') {
        c.i += 1;
        let (h, _) = num(&mut c, 1, 2)?;
        let m = if c.eat(b':') { num(&mut c, 2, 2)?.0 } else { 0 };
        let total = (h * 60 + m) as i32;
        tz = Some(if sign == b'-' { -total } else { total });
    }
    c.done().then_some(Timestamp {
        year,
        month,
        day,
        time: Some((hour, minute, second, micro)),
        tz,
        implicit: true,
    })
}

/// SafeConstructor `construct_yaml_timestamp`: a `date` or a `datetime`,
/// as their `str()`; None where Python's constructors raise.
fn construct_timestamp(v: &str) -> Option<Py> {
    // timestamp_regexp ends in `$`: one final line break is allowed.
    let t = timestamp(v.strip_suffix('\n').unwrap_or(v))?;
    let leap = t.year % 4 == 0 && (t.year % 100 != 0 || t.year % 400 == 0);
    let days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let valid_day =
        (1..=12).contains(&t.month) && t.day >= 1 && t.day <= days[t.month as usize - 1];
    if t.year < 1 || !valid_day {
        return None;
    }
    let date = format!("{:04}-{:02}-{:02}", t.year, t.month, t.day);
    let Some((h, m, s, us)) = t.time else {
        return Some(Py::Date(date));
    };
    if h > 23 || m > 59 || s > 59 {
        return None;
    }
    let mut out = format!("{date} {h:02}:{m:02}:{s:02}");
    if us > 0 {
        out.push_str(&format!(".{us:06}"));
    }
    if let Some(off) = t.tz {
        if off.abs() >= 24 * 60 {
            return None; // datetime.timezone: the offset must be within a day
        }
        let sign = if off < 0 { '-' } else { '+' };
        out.push_str(&format!(
            "{sign}{:02}:{:02}",
            off.abs() / 60,
            off.abs() % 60
        ));
    }
    Some(Py::DateTime(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Result<Py, String> {
        load(&format!("k: {text}\n"), "f.yaml").map(|mut e| e.remove(0).value)
    }

    #[test]
    fn plain_scalars_resolve_as_pyyaml_does() {
        let int = |i: i128| Ok(Py::Int(PyInt::Small(i)));
        assert_eq!(one("010"), int(8));
        assert_eq!(one("0x1F"), int(31));
        assert_eq!(one("0b101"), int(5));
        assert_eq!(one("1_000"), int(1000));
        assert_eq!(one("1:30"), int(90));
        assert_eq!(one("-1:30"), int(-90));
        assert_eq!(one("00"), int(0));
        assert_eq!(one("09"), Ok(Py::Str("09".into())));
        assert_eq!(one("0o10"), Ok(Py::Str("0o10".into())));
        assert_eq!(one("1e3"), Ok(Py::Str("1e3".into())));
        assert_eq!(one("1.0e3"), Ok(Py::Str("1.0e3".into())));
        assert_eq!(one("1.0e+3"), Ok(Py::Float(1000.0)));
        assert_eq!(one("+.5"), Ok(Py::Str("+.5".into())));
        assert_eq!(one(".5"), Ok(Py::Float(0.5)));
        assert_eq!(one("190:20:30.15"), Ok(Py::Float(685230.15)));
        assert_eq!(one("on"), Ok(Py::Bool(true)));
        assert_eq!(one("No"), Ok(Py::Bool(false)));
        assert_eq!(one("y"), Ok(Py::Str("y".into())));
        assert_eq!(one("~"), Ok(Py::None));
        assert_eq!(one(""), Ok(Py::None));
        assert_eq!(one("'010'"), Ok(Py::Str("010".into())));
        assert_eq!(one("!!int 010"), int(8));
        assert_eq!(one("!!str 010"), Ok(Py::Str("010".into())));
        assert_eq!(one("2001-12-14"), Ok(Py::Date("2001-12-14".into())));
        assert_eq!(
            one("2001-12-14 21:59:43.10 -5"),
            Ok(Py::DateTime("2001-12-14 21:59:43.100000-05:00".into()))
        );
        assert_eq!(one("2001-1-1"), Ok(Py::Str("2001-1-1".into())));
        for refused in ["0x_", "2001-13-01", "!!binary aGk=", "!foo x", "<<", "="] {
            assert!(one(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn merges_duplicates_and_aliases() {
        let doc = "a: &base {x: 1, y: 2}\nb:\n  <<: *base\n  y: 3\nb2: {<<: [{p: 1}, {p: 2, q: 2}]}\nc: 1\nc: 2\n";
        let e = load(doc, "f").unwrap();
        assert_eq!(
            e.iter()
                .map(|e| (e.key.as_str(), e.line))
                .collect::<Vec<_>>(),
            [("a", 1), ("b", 2), ("b2", 5), ("c", 6)]
        );
        assert_eq!(
            to_json(&e[1].value).unwrap(),
            serde_json::json!({"x": 1, "y": 3})
        );
        assert_eq!(
            to_json(&e[2].value).unwrap(),
            serde_json::json!({"p": 1, "q": 2})
        );
        assert_eq!(e[3].value, Py::Int(PyInt::Small(2)));
        // 1, 1.0 and True are one key (the first key object, the last value).
        let e = load("k: {1: a, 1.0: b, true: c}\n", "f").unwrap();
        assert_eq!(to_json(&e[0].value).unwrap(), serde_json::json!({"1": "c"}));
        for bad in [
            "a: &x [*x]\n",
            "a: *nope\n",
            "a: &x 1\nb: &x 2\n",
            "a: {<<: 1}\n",
            "? [a]\n: 1\n",
            "a: 1\n---\nb: 2\n",
        ] {
            assert!(load(bad, "f").is_err(), "{bad}");
        }
    }

    #[test]
    fn alias_bombs_are_bounded() {
        let mut doc =
            "a: &a [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n"
                .to_owned();
        let mut prev = 'a';
        for c in 'b'..='j' {
            doc.push_str(&format!(
                "{c}: &{c} [{}]\n",
                vec![format!("*{prev}"); 8].join(", ")
            ));
            prev = c;
        }
        let err = load(&doc, "f").unwrap_err();
        assert!(err.contains("alias expanded"), "{err}");
        // A chain of merges, each copying the last mapping's pairs: quadratic
        // copies from a linear file, refused at the bound (within a second).
        let mut doc = "m0: &m0 {a: 1}\n".to_owned();
        for i in 1..2000 {
            doc.push_str(&format!("m{i}: &m{i} {{<<: *m{}, k{i}: 1}}\n", i - 1));
        }
        let err = load(&doc, "f").unwrap_err();
        assert!(err.contains("merges copy more than"), "{err}");
        // Aliases nesting deeper than the file does: the depth bound, not the stack.
        let nest = |inner: &str| format!("{}{inner}{}", "[".repeat(100), "]".repeat(100));
        let mut doc = format!("a0: &a0 {}\n", nest("x"));
        for i in 1..50 {
            doc.push_str(&format!("a{i}: &a{i} {}\n", nest(&format!("*a{}", i - 1))));
        }
        let err = load(&doc, "f").unwrap_err();
        assert!(err.contains("nest deeper than"), "{err}");
    }

    #[test]
    fn python_str_of_floats() {
        for (f, s) in [
            (1000.0, "1000.0"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (1e15, "1000000000000000.0"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(py_float_repr(f), s);
        }
    }
}
