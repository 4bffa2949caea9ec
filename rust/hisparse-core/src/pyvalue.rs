//! Values as CPython 3.11 holds them after `json.loads` (the C scanner of
//! `Lib/json/decoder.py` / `Modules/_json.c`), with the few operations an
//! engine's Python code applies to such values: `<` and `==`, `2 * x`, `str()`
//! and `repr()`. SGLang reads `--hisparse-config` this way
//! (`mem_cache/sparsity/factory.py:70-75`) and then compares and prints its
//! values with Python's semantics (`:79-98`): NaN, Infinity and `1e400` (inf)
//! are read, integers have any size (up to the 4300 digits `int()` converts),
//! `true` is 1 in a comparison, a string compares with a string and not with an
//! int. A neutral module: no engine rule lives here.

use crate::pytext::{PyInt, PY_INT_MAX_STR_DIGITS};
use serde_json::Value;
use std::cmp::Ordering;

/// A value `json.loads` gives.
#[derive(Clone, Debug, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    Int(PyInt),
    Float(f64),
    Str(String),
    List(Vec<PyValue>),
    /// Keys in first-insertion order, the last value of a repeated key (a dict).
    Dict(Vec<(String, PyValue)>),
}

/// Why `json.loads` raised: Python's exception class and `str(exception)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadsError {
    /// `JSONDecodeError` (a ValueError), `ValueError` (an int over 4300
    /// digits) or `RecursionError` (nesting past what hisparse-check reads).
    pub exception: &'static str,
    /// Python's text, e.g. `Expecting value: line 1 column 1 (char 0)`.
    pub message: String,
    /// Whether it is a `json.JSONDecodeError` (SGLang re-raises only those
    /// as "Failed to parse hisparse_config: ...", factory.py:74-75).
    pub decode_error: bool,
}

impl PyInt {
    fn from_i64(v: i64) -> PyInt {
        PyInt {
            negative: v < 0,
            digits: v.unsigned_abs().to_string(),
        }
    }
    /// The decimal text, as `str(int)` writes it.
    pub fn text(&self) -> String {
        format!("{}{}", if self.negative { "-" } else { "" }, self.digits)
    }
    fn cmp_int(&self, other: &PyInt) -> Ordering {
        let mag = |a: &PyInt, b: &PyInt| {
            a.digits
                .len()
                .cmp(&b.digits.len())
                .then_with(|| a.digits.cmp(&b.digits))
        };
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => mag(self, other),
            (true, true) => mag(other, self),
        }
    }
    /// Exact comparison with a float (Python compares int and float exactly);
    /// None for NaN.
    fn cmp_float(&self, f: f64) -> Option<Ordering> {
        if f.is_nan() {
            return None;
        }
        if f.is_infinite() {
            return Some(if f > 0.0 {
                Ordering::Less
            } else {
                Ordering::Greater
            });
        }
        // An integral f64 prints exactly with {:.0}.
        let whole = f.trunc();
        let w = PyInt {
            negative: whole < 0.0 && whole != 0.0,
            digits: format!("{:.0}", whole.abs()),
        };
        Some(self.cmp_int(&w).then_with(|| {
            // Equal integer parts: the float's fraction decides.
            if f > whole {
                Ordering::Less
            } else if f < whole {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }))
    }
    fn doubled(&self) -> PyInt {
        let mut out = Vec::with_capacity(self.digits.len() + 1);
        let mut carry = 0u8;
        for b in self.digits.bytes().rev() {
            let d = (b - b'0') * 2 + carry;
            out.push(b'0' + d % 10);
            carry = d / 10;
        }
        if carry > 0 {
            out.push(b'0' + carry);
        }
        out.reverse();
        PyInt {
            negative: self.negative,
            digits: String::from_utf8(out).unwrap_or_default(),
        }
    }
}

impl PyValue {
    /// Python's `type(x).__name__`.
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::List(_) => "list",
            PyValue::Dict(_) => "dict",
        }
    }

    /// An `int` that is not a `bool` (`isinstance(x, int) and not isinstance(x, bool)`).
    pub fn is_int(&self) -> bool {
        matches!(self, PyValue::Int(_))
    }

    /// The value of an int or a bool (Python's bool is an int), when it fits an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            PyValue::Int(i) => i.to_i64(),
            PyValue::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// A number in Python's numeric tower (bool, int, float).
    fn number(&self) -> Option<Num> {
        match self {
            PyValue::Bool(b) => Some(Num::Int(PyInt::from_i64(i64::from(*b)))),
            PyValue::Int(i) => Some(Num::Int(i.clone())),
            PyValue::Float(f) => Some(Num::Float(*f)),
            _ => None,
        }
    }

    /// Python's `self < other`; Err with the TypeError's text where Python raises.
    pub fn lt(&self, other: &PyValue) -> Result<bool, String> {
        Ok(self.partial(other)? == Some(Ordering::Less))
    }

    /// The order `<` sees: None where every comparison is False (NaN).
    fn partial(&self, other: &PyValue) -> Result<Option<Ordering>, String> {
        if let (Some(a), Some(b)) = (self.number(), other.number()) {
            return Ok(a.cmp(&b));
        }
        match (self, other) {
            (PyValue::Str(a), PyValue::Str(b)) => Ok(Some(a.cmp(b))),
            (PyValue::List(a), PyValue::List(b)) => {
                // list.__lt__: the first pair that is not == decides, else the lengths.
                for (x, y) in a.iter().zip(b) {
                    if !x.py_eq(y) {
                        return x.partial(y);
                    }
                }
                Ok(Some(a.len().cmp(&b.len())))
            }
            _ => Err(format!(
                "'<' not supported between instances of '{}' and '{}'",
                self.type_name(),
                other.type_name()
            )),
        }
    }

    /// Python's `==` (never raises). NaN equals NaN here: the elements of
    /// `2 * [nan]` are one object, and list comparison tests identity first.
    pub fn py_eq(&self, other: &PyValue) -> bool {
        if let (Some(a), Some(b)) = (self.number(), other.number()) {
            return match (&a, &b) {
                (Num::Float(x), Num::Float(y)) if x.is_nan() && y.is_nan() => true,
                _ => a.cmp(&b) == Some(Ordering::Equal),
            };
        }
        match (self, other) {
            (PyValue::None, PyValue::None) => true,
            (PyValue::Str(a), PyValue::Str(b)) => a == b,
            (PyValue::List(a), PyValue::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.py_eq(y))
            }
            (PyValue::Dict(a), PyValue::Dict(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, v)| b.iter().any(|(k2, v2)| k == k2 && v.py_eq(v2)))
            }
            _ => false,
        }
    }

    /// Python's `2 * self`; Err with the TypeError's text for None and dict.
    pub fn times_two(&self) -> Result<PyValue, String> {
        Ok(match self {
            PyValue::Bool(b) => PyValue::Int(PyInt::from_i64(2 * i64::from(*b))),
            PyValue::Int(i) => PyValue::Int(i.doubled()),
            PyValue::Float(f) => PyValue::Float(2.0 * f),
            PyValue::Str(s) => PyValue::Str(s.repeat(2)),
            PyValue::List(l) => PyValue::List([l.as_slice(), l.as_slice()].concat()),
            other => {
                return Err(format!(
                    "unsupported operand type(s) for *: 'int' and '{}'",
                    other.type_name()
                ))
            }
        })
    }

    /// Python's `str(self)` (what an f-string's `{x}` writes).
    pub fn py_str(&self) -> String {
        match self {
            PyValue::Str(s) => s.clone(),
            other => other.repr(),
        }
    }

    /// Python's `repr(self)`.
    pub fn repr(&self) -> String {
        match self {
            PyValue::None => "None".to_owned(),
            PyValue::Bool(true) => "True".to_owned(),
            PyValue::Bool(false) => "False".to_owned(),
            PyValue::Int(i) => i.text(),
            PyValue::Float(f) => float_repr(*f),
            PyValue::Str(s) => str_repr(s),
            PyValue::List(l) => {
                let items: Vec<String> = l.iter().map(PyValue::repr).collect();
                format!("[{}]", items.join(", "))
            }
            PyValue::Dict(d) => {
                let items: Vec<String> = d
                    .iter()
                    .map(|(k, v)| format!("{}: {}", str_repr(k), v.repr()))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
        }
    }

    /// As JSON for a report's `given`: numbers serde_json cannot hold are
    /// written as Python writes them, as strings (`"nan"`, `"inf"`, `"-inf"`,
    /// the digits of an integer beyond 64 bits).
    pub fn to_json(&self) -> Value {
        match self {
            PyValue::None => Value::Null,
            PyValue::Bool(b) => Value::Bool(*b),
            PyValue::Int(i) => i
                .to_i64()
                .map(Value::from)
                .or_else(|| {
                    i.digits
                        .parse::<u64>()
                        .ok()
                        .filter(|_| !i.negative)
                        .map(Value::from)
                })
                .unwrap_or_else(|| Value::String(i.text())),
            PyValue::Float(f) => crate::pytext::py_float_json(*f),
            PyValue::Str(s) => Value::String(s.clone()),
            PyValue::List(l) => Value::Array(l.iter().map(PyValue::to_json).collect()),
            PyValue::Dict(d) => {
                Value::Object(d.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
    }

    /// From a JSON value (a mapping given from Python, already JSON): what
    /// `json.loads(json.dumps(value))` gives. A float whose JSON form is a
    /// string stays a string (serde_json holds no NaN).
    pub fn from_json(v: &Value) -> PyValue {
        match v {
            Value::Null => PyValue::None,
            Value::Bool(b) => PyValue::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => PyValue::Int(PyInt::from_i64(i)),
                (None, Some(u), _) => PyValue::Int(PyInt {
                    negative: false,
                    digits: u.to_string(),
                }),
                (_, _, f) => PyValue::Float(f.unwrap_or(f64::NAN)),
            },
            Value::String(s) => PyValue::Str(s.clone()),
            Value::Array(a) => PyValue::List(a.iter().map(PyValue::from_json).collect()),
            Value::Object(m) => PyValue::Dict(
                m.iter()
                    .map(|(k, v)| (k.clone(), PyValue::from_json(v)))
                    .collect(),
            ),
        }
    }
}

#[derive(Clone)]
enum Num {
    Int(PyInt),
    Float(f64),
}

impl Num {
    fn cmp(&self, other: &Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp_int(b)),
            (Num::Int(a), Num::Float(f)) => a.cmp_float(*f),
            (Num::Float(f), Num::Int(b)) => b.cmp_float(*f).map(Ordering::reverse),
            (Num::Float(x), Num::Float(y)) => x.partial_cmp(y),
        }
    }
}

/// Python's `repr(float)`: the shortest digits that read back, in positional
/// form for exponents -4 ..= 15 (`1000.0`, `0.0001`), else `1e+16`, `1.5e-05`;
/// `nan`, `inf`, `-inf`.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's {:e} gives the shortest round-trip digits: "1.5e-5", "-1e16".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            let zeros = "0".repeat(point.unsigned_abs() as usize);
            format!("{sign}0.{zeros}{digits}")
        } else {
            let p = point as usize;
            if digits.len() <= p {
                format!("{sign}{digits}{}.0", "0".repeat(p - digits.len()))
            } else {
                format!("{sign}{}.{}", &digits[..p], &digits[p..])
            }
        }
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.unsigned_abs())
    }
}

/// Python's `repr(str)`: single quotes unless the text has a single quote and
/// no double quote; `\\`, `\n`, `\r`, `\t` and unprintable characters escaped.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if (0x80..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// `json.loads(text)` as CPython 3.11 reads a str, with its exception text on
/// failure. Nesting deeper than `max_depth` is a `RecursionError` (Python's
/// limit is about 990 levels; hisparse-check stops sooner to bound its stack).
pub fn loads(text: &str, max_depth: usize) -> Result<PyValue, LoadsError> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = Parser {
        s: &chars,
        depth: 0,
        max_depth,
    };
    if chars.first() == Some(&'\u{feff}') {
        return Err(p.decode("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0));
    }
    let start = p.ws(0);
    let (v, end) = match p.value(start) {
        Ok(x) => x,
        Err(Stop::At(i)) => return Err(p.decode("Expecting value", i)),
        Err(Stop::Raised(e)) => return Err(e),
    };
    let end = p.ws(end);
    if end != chars.len() {
        return Err(p.decode("Extra data", end));
    }
    Ok(v)
}

enum Stop {
    /// StopIteration(idx): no value starts here ("Expecting value").
    At(usize),
    Raised(LoadsError),
}

struct Parser<'a> {
    s: &'a [char],
    depth: usize,
    max_depth: usize,
}

impl Parser<'_> {
    fn decode(&self, msg: &str, pos: usize) -> LoadsError {
        let before = &self.s[..pos.min(self.s.len())];
        let line = before.iter().filter(|c| **c == '\n').count() + 1;
        let col = match before.iter().rposition(|c| *c == '\n') {
            Some(nl) => pos - nl,
            None => pos + 1,
        };
        LoadsError {
            exception: "JSONDecodeError",
            message: format!("{msg}: line {line} column {col} (char {pos})"),
            decode_error: true,
        }
    }
    fn raise(&self, msg: &str, pos: usize) -> Stop {
        Stop::Raised(self.decode(msg, pos))
    }
    fn ws(&self, mut i: usize) -> usize {
        while i < self.s.len() && matches!(self.s[i], ' ' | '\t' | '\n' | '\r') {
            i += 1;
        }
        i
    }
    fn at(&self, i: usize, word: &str) -> bool {
        let w: Vec<char> = word.chars().collect();
        self.s.get(i..i + w.len()) == Some(&w[..])
    }
    fn value(&mut self, i: usize) -> Result<(PyValue, usize), Stop> {
        let Some(&c) = self.s.get(i) else {
            return Err(Stop::At(i));
        };
        match c {
            '"' => self.string(i + 1).map(|(s, e)| (PyValue::Str(s), e)),
            '{' | '[' => {
                if self.depth >= self.max_depth {
                    return Err(Stop::Raised(LoadsError {
                        exception: "RecursionError",
                        message: format!(
                            "nested more than {} levels deep, the most hisparse-check reads (Python's json.loads reads about 990)",
                            self.max_depth
                        ),
                        decode_error: false,
                    }));
                }
                self.depth += 1;
                let r = if c == '{' {
                    self.object(i + 1)
                } else {
                    self.array(i + 1)
                };
                self.depth -= 1;
                r
            }
            'n' if self.at(i, "null") => Ok((PyValue::None, i + 4)),
            't' if self.at(i, "true") => Ok((PyValue::Bool(true), i + 4)),
            'f' if self.at(i, "false") => Ok((PyValue::Bool(false), i + 5)),
            'N' if self.at(i, "NaN") => Ok((PyValue::Float(f64::NAN), i + 3)),
            'I' if self.at(i, "Infinity") => Ok((PyValue::Float(f64::INFINITY), i + 8)),
            '-' if self.at(i, "-Infinity") => Ok((PyValue::Float(f64::NEG_INFINITY), i + 9)),
            _ => self.number(i),
        }
    }
    fn digits(&self, mut i: usize) -> usize {
        while i < self.s.len() && self.s[i].is_ascii_digit() {
            i += 1;
        }
        i
    }
    /// `_match_number_unicode`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`, ASCII digits.
    fn number(&self, start: usize) -> Result<(PyValue, usize), Stop> {
        let s = self.s;
        let mut i = start;
        if s.get(i) == Some(&'-') {
            i += 1;
        }
        match s.get(i) {
            Some('1'..='9') => i = self.digits(i + 1),
            Some('0') => i += 1,
            _ => return Err(Stop::At(start)),
        }
        let mut float = false;
        if s.get(i) == Some(&'.') && s.get(i + 1).is_some_and(char::is_ascii_digit) {
            float = true;
            i = self.digits(i + 1);
        }
        if matches!(s.get(i), Some('e' | 'E')) {
            let mut j = i + 1;
            if matches!(s.get(j), Some('+' | '-')) {
                j += 1;
            }
            let end = self.digits(j);
            if end > j {
                float = true;
                i = end;
            }
        }
        let text: String = s[start..i].iter().collect();
        if float {
            // float() of a JSON literal: beyond f64 it is inf (1e400), never an error.
            let f = text.parse::<f64>().unwrap_or(f64::NAN);
            return Ok((PyValue::Float(f), i));
        }
        let (negative, body) = match text.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, text.as_str()),
        };
        if body.len() > PY_INT_MAX_STR_DIGITS {
            return Err(Stop::Raised(LoadsError {
                exception: "ValueError",
                message: format!("Exceeds the limit ({PY_INT_MAX_STR_DIGITS} digits) for integer string conversion: value has {} digits; use sys.set_int_max_str_digits() to increase the limit", body.len()),
                decode_error: false,
            }));
        }
        Ok((
            PyValue::Int(PyInt {
                negative: negative && body != "0",
                digits: body.to_owned(),
            }),
            i,
        ))
    }
    /// `scanstring_unicode(s, begin)`, `begin` just past the opening quote.
    fn string(&self, begin: usize) -> Result<(String, usize), Stop> {
        let s = self.s;
        let mut out = String::new();
        let mut i = begin;
        loop {
            let Some(&c) = s.get(i) else {
                return Err(self.raise("Unterminated string starting at", begin - 1));
            };
            match c {
                '"' => return Ok((out, i + 1)),
                '\\' => {
                    let Some(&e) = s.get(i + 1) else {
                        return Err(self.raise("Unterminated string starting at", begin - 1));
                    };
                    if e != 'u' {
                        out.push(match e {
                            '"' => '"',
                            '\\' => '\\',
                            '/' => '/',
                            'b' => '\u{8}',
                            'f' => '\u{c}',
                            'n' => '\n',
                            'r' => '\r',
                            't' => '\t',
                            _ => return Err(self.raise("Invalid \\escape", i)),
                        });
                        i += 2;
                        continue;
                    }
                    let hex = |at: usize| -> Option<u32> {
                        let h: String = s.get(at..at + 4)?.iter().collect();
                        if h.chars().all(|c| c.is_ascii_hexdigit()) {
                            u32::from_str_radix(&h, 16).ok()
                        } else {
                            None
                        }
                    };
                    let Some(mut u) = hex(i + 2) else {
                        return Err(self.raise("Invalid \\uXXXX escape", i + 1));
                    };
                    i += 6;
                    if (0xd800..0xdc00).contains(&u)
                        && s.get(i) == Some(&'\\')
                        && s.get(i + 1) == Some(&'u')
                    {
                        if let Some(lo) = hex(i + 2).filter(|lo| (0xdc00..0xe000).contains(lo)) {
                            u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                            i += 6;
                        }
                    }
                    // A lone surrogate (Python keeps it) cannot be a Rust char: U+FFFD.
                    out.push(char::from_u32(u).unwrap_or('\u{fffd}'));
                }
                c if (c as u32) < 0x20 => {
                    return Err(self.raise("Invalid control character at", i));
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
    }
    fn object(&mut self, start: usize) -> Result<(PyValue, usize), Stop> {
        let mut pairs: Vec<(String, PyValue)> = Vec::new();
        let mut i = self.ws(start);
        if self.s.get(i) == Some(&'}') {
            return Ok((PyValue::Dict(pairs), i + 1));
        }
        loop {
            if self.s.get(i) != Some(&'"') {
                return Err(self.raise("Expecting property name enclosed in double quotes", i));
            }
            let (key, next) = self.string(i + 1)?;
            i = self.ws(next);
            if self.s.get(i) != Some(&':') {
                return Err(self.raise("Expecting ':' delimiter", i));
            }
            i = self.ws(i + 1);
            let (v, next) = self.value(i)?;
            match pairs.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = v,
                None => pairs.push((key, v)),
            }
            i = self.ws(next);
            match self.s.get(i) {
                Some('}') => return Ok((PyValue::Dict(pairs), i + 1)),
                Some(',') => i = self.ws(i + 1),
                _ => return Err(self.raise("Expecting ',' delimiter", i)),
            }
        }
    }
    fn array(&mut self, start: usize) -> Result<(PyValue, usize), Stop> {
        let mut items = Vec::new();
        let mut i = self.ws(start);
        if self.s.get(i) == Some(&']') {
            return Ok((PyValue::List(items), i + 1));
        }
        loop {
            let (v, next) = self.value(i)?;
            items.push(v);
            i = self.ws(next);
            match self.s.get(i) {
                Some(']') => return Ok((PyValue::List(items), i + 1)),
                Some(',') => i = self.ws(i + 1),
                _ => return Err(self.raise("Expecting ',' delimiter", i)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(t: &str) -> PyValue {
        loads(t, 128).unwrap()
    }
    fn err(t: &str) -> String {
        loads(t, 128).unwrap_err().message
    }

    /// Each pair is CPython 3.11.7's `repr(json.loads(t))` or `str(exception)`.
    #[test]
    fn reads_as_cpython_does() {
        for (t, want) in [
            ("1e400", "inf"),
            ("-0", "0"),
            ("1.5e3", "1500.0"),
            ("-Infinity", "-inf"),
            (" {\"a\":[1,{\"b\":NaN}]} ", "{'a': [1, {'b': nan}]}"),
            ("9223372036854775808", "9223372036854775808"),
            ("-9223372036854775809", "-9223372036854775809"),
            ("1e16", "1e+16"),
            ("1e-5", "1e-05"),
            ("0.0001", "0.0001"),
            ("123456789012345678", "123456789012345678"),
            ("1e15", "1000000000000000.0"),
            ("{\"a\": 1, \"a\": 2, \"b\": 3}", "{'a': 2, 'b': 3}"),
            ("\"it's\"", "\"it's\""),
            ("[true, false, null]", "[True, False, None]"),
        ] {
            assert_eq!(ok(t).repr(), want, "{t}");
        }
        for (t, want) in [
            (
                "{\"a\":1,}",
                "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)",
            ),
            ("[1,]", "Expecting value: line 1 column 4 (char 3)"),
            ("{\"a\": }", "Expecting value: line 1 column 7 (char 6)"),
            ("", "Expecting value: line 1 column 1 (char 0)"),
            (
                "{",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            ("[", "Expecting value: line 1 column 2 (char 1)"),
            (
                "\"abc",
                "Unterminated string starting at: line 1 column 1 (char 0)",
            ),
            ("\"a\\x\"", "Invalid \\escape: line 1 column 3 (char 2)"),
            (
                "\"\\u12\"",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            ("{\"a\":1}x", "Extra data: line 1 column 8 (char 7)"),
            (
                "\u{feff}{}",
                "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)",
            ),
            (
                "\"a\nb\"",
                "Invalid control character at: line 1 column 3 (char 2)",
            ),
            (
                "{\"a\" 1}",
                "Expecting ':' delimiter: line 1 column 6 (char 5)",
            ),
            (
                "{1:2}",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            ("[1 2]", "Expecting ',' delimiter: line 1 column 4 (char 3)"),
            ("nan", "Expecting value: line 1 column 1 (char 0)"),
            ("01", "Extra data: line 1 column 2 (char 1)"),
            ("1.", "Extra data: line 1 column 2 (char 1)"),
            ("1e", "Extra data: line 1 column 2 (char 1)"),
            ("-", "Expecting value: line 1 column 1 (char 0)"),
            (
                "{\"a\":1",
                "Expecting ',' delimiter: line 1 column 7 (char 6)",
            ),
            (
                "{\"a\"",
                "Expecting ':' delimiter: line 1 column 5 (char 4)",
            ),
            ("\t", "Expecting value: line 1 column 2 (char 1)"),
            (
                "{top_k:2048}",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
        ] {
            assert_eq!(err(t), want, "{t:?}");
        }
        let e = loads(&"1".repeat(5000), 128).unwrap_err();
        assert_eq!((e.exception, e.decode_error), ("ValueError", false));
        assert!(e.message.starts_with("Exceeds the limit (4300 digits)"));
        assert!(loads(&"1".repeat(4300), 128).is_ok());
        assert_eq!(
            loads(&"[".repeat(200), 128).unwrap_err().exception,
            "RecursionError"
        );
    }

    #[test]
    fn compares_and_doubles_as_python() {
        let v = |t: &str| ok(t);
        // True is 1; 1000.0 < 2048; NaN compares False; big ints exactly.
        assert!(v("true").lt(&v("2")).unwrap());
        assert!(v("1e3").lt(&v("2048")).unwrap());
        assert!(!v("NaN").lt(&v("2048")).unwrap());
        assert!(!v("2048").lt(&v("NaN")).unwrap());
        assert!(v("-9223372036854775809").lt(&v("2048")).unwrap());
        assert!(!v("9223372036854775808").lt(&v("2048")).unwrap());
        assert!(v("9007199254740992").lt(&v("9007199254740993")).unwrap());
        assert!(!v("9007199254740993").lt(&v("9007199254740992.0")).unwrap());
        assert!(v("2048").lt(&v("2048.5")).unwrap());
        assert!(!v("Infinity").lt(&v("99999999999999999999999")).unwrap());
        assert!(v("\"a\"").lt(&v("\"b\"")).unwrap());
        assert!(v("[1, 2]").lt(&v("[1, 3]")).unwrap());
        assert!(!v("[1, 1]").lt(&v("[1]")).unwrap());
        assert_eq!(
            v("\"a\"").lt(&v("1")).unwrap_err(),
            "'<' not supported between instances of 'str' and 'int'"
        );
        assert_eq!(
            v("{}").lt(&v("{}")).unwrap_err(),
            "'<' not supported between instances of 'dict' and 'dict'"
        );
        assert_eq!(
            v("null").lt(&v("2048")).unwrap_err(),
            "'<' not supported between instances of 'NoneType' and 'int'"
        );
        assert_eq!(v("true").times_two().unwrap().repr(), "2");
        assert_eq!(
            v("99999999999999999999").times_two().unwrap().repr(),
            "199999999999999999998"
        );
        assert_eq!(v("\"ab\"").times_two().unwrap().repr(), "'abab'");
        assert_eq!(v("1e308").times_two().unwrap().repr(), "inf");
        assert_eq!(
            v("null").times_two().unwrap_err(),
            "unsupported operand type(s) for *: 'int' and 'NoneType'"
        );
        assert_eq!(v("\"x\"").py_str(), "x");
        assert_eq!(v("1000.0").py_str(), "1000.0");
    }
}
