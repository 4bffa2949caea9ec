//! Text read as vLLM's Python reads it: `int(text)` for environment
//! variables (vllm/envs.py `maybe_convert_bool`: `bool(int(value))`) and
//! `json.loads` for JSON flags (vllm/engine/arg_utils.py), which reads more
//! than strict JSON.

use serde_json::Value;

use crate::limits::MAX_JSON_DEPTH;

/// CPython's limit on the digits `int(text)` converts
/// (`sys.int_info.default_max_str_digits`, Python 3.11+): more is a ValueError.
pub const PY_INT_MAX_STR_DIGITS: usize = 4300;

/// An int as Python's `int(text)` reads it: any size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyInt {
    pub negative: bool,
    /// Decimal digits without leading zeros ("0" for zero).
    pub digits: String,
}

impl PyInt {
    pub fn is_zero(&self) -> bool {
        self.digits == "0"
    }

    /// The value, when it fits an i64.
    pub fn to_i64(&self) -> Option<i64> {
        let sign = if self.negative { "-" } else { "" };
        format!("{sign}{}", self.digits).parse().ok()
    }
}

/// The code points whose Unicode decimal value is 0 in Python 3.11's
/// `unicodedata` (Unicode 14.0); each starts a run of ten digits 0..9.
const PY_DECIMAL_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// The text as CPython's `int()` and `float()` see it
/// (`_PyUnicode_TransformDecimalAndSpaceToASCII`): a non-ASCII decimal digit
/// (`٣`) becomes its ASCII digit, non-ASCII whitespace (U+00A0, U+3000, ...)
/// a space; ASCII stays as it is, so U+001C..U+001F, which `str.isspace`
/// calls space, are not stripped and make a ValueError.
pub fn py_number_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii() {
                return c;
            }
            if c.is_whitespace() {
                return ' ';
            }
            let zero = PY_DECIMAL_ZEROS.partition_point(|z| *z <= u32::from(c));
            match zero
                .checked_sub(1)
                .map(|k| u32::from(c) - PY_DECIMAL_ZEROS[k])
            {
                Some(d) if d < 10 => char::from(b'0' + d as u8),
                _ => c,
            }
        })
        .collect()
}

/// Python's `str.strip()` (`str.isspace`: Unicode White_Space and the four
/// ASCII separators U+001C..U+001F), which vLLM's `human_readable_int`
/// applies before `int()`.
pub fn py_str_strip(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// The whitespace CPython's number parsers skip after [`py_number_text`]
/// (`Py_ISSPACE`: space, \t, \n, \v, \f, \r).
fn py_ascii_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// Python `int(text)` in base 10: surrounding whitespace, one sign, decimal
/// digits (any script's, as [`py_number_text`] reads them) with single
/// underscores between them (`1_0`), leading zeros, any size up to
/// [`PY_INT_MAX_STR_DIGITS`] digits. None where Python raises ValueError
/// (`1.0`, `0x1`, `1__0`, `- 1`, "", `\x1c1`).
pub fn py_int(text: &str) -> Option<PyInt> {
    let ascii = py_number_text(text);
    let t = ascii.trim_matches(py_ascii_space);
    let (negative, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let well_formed = !body.is_empty()
        && !body.starts_with('_')
        && !body.ends_with('_')
        && !body.contains("__")
        && body.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    if !well_formed {
        return None;
    }
    let digits: String = body.chars().filter(|c| *c != '_').collect();
    if digits.len() > PY_INT_MAX_STR_DIGITS {
        return None;
    }
    let digits = match digits.trim_start_matches('0') {
        "" => "0".to_owned(),
        rest => rest.to_owned(),
    };
    Some(PyInt {
        negative: negative && digits != "0",
        digits,
    })
}

/// Python `float(text)`: surrounding whitespace, decimal digits of any
/// script ([`py_number_text`]), underscores only between two digits (`1_0.5`,
/// not `1__0` or `1_.5`), `nan` / `inf` / `infinity` in any case with a sign.
/// None where Python raises ValueError.
pub fn py_float_text(text: &str) -> Option<f64> {
    let ascii = py_number_text(text);
    let t = ascii.trim_matches(py_ascii_space);
    let b = t.as_bytes();
    let lone = b.iter().enumerate().any(|(i, c)| {
        *c == b'_'
            && !(i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit))
    });
    if lone || !t.is_ascii() {
        return None;
    }
    t.replace('_', "").parse::<f64>().ok()
}

/// A float as JSON, with NaN and infinities as the strings Python spells
/// them (`"nan"`, `"inf"`, `"-inf"`), which [`py_float_text`] reads back;
/// serde_json would make them null.
pub fn py_float_json(f: f64) -> Value {
    match serde_json::Number::from_f64(f) {
        Some(n) => Value::Number(n),
        None if f.is_nan() => Value::from("nan"),
        None if f > 0.0 => Value::from("inf"),
        None => Value::from("-inf"),
    }
}

/// A JSON text that does not parse, at its place in the text as given.
#[derive(Debug)]
pub struct JsonSyntax {
    /// serde_json's message, without its position.
    pub message: String,
    pub line: usize,
    pub column: usize,
    /// The text ends early.
    pub eof: bool,
}

impl std::fmt::Display for JsonSyntax {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at line {} column {}",
            self.message, self.line, self.column
        )
    }
}

/// How a JSON flag's text is read before its value is built
/// (vllm/engine/arg_utils.py `_compute_kwargs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonFlag {
    /// `json.loads` (`--speculative-config`, `--hf-overrides`).
    Loads,
    /// A config dataclass (`--kv-transfer-config`, `--attention-config`,
    /// `--compilation-config`): `_expand_json_human_readable_numbers` first
    /// (a bare `80g` outside strings is 80000000000, `1K` is 1024), then
    /// pydantic's `validate_json`, which reads the same constants.
    Dataclass,
}

/// A JSON flag's text as vLLM reads it, as a serde_json value. Beyond what
/// serde_json reads: the constants `NaN`, `Infinity` and `-Infinity`, and a
/// float literal beyond f64 (`1e400`), which Python reads as infinity; for
/// [`JsonFlag::Dataclass`], numbers with a k/m/g/t or K/M/G/T suffix outside
/// strings. serde_json's values hold no NaN or infinity, so such a number is
/// the string that Python's `float()` reads back as it, spelled as Python
/// spells the float (`"nan"`, `"inf"`, `"-inf"`, as the Python binding
/// passes a float NaN): the check reads it as `float()` does where
/// it reads numbers (`schema::py_float`), and refuses it where an int, bool
/// or choice is read, as vLLM's pydantic fields do. An integer literal beyond
/// f64 (309 digits or more, an exact int in Python) stays an error.
pub fn json_loads(text: &str, flag: JsonFlag) -> Result<Value, JsonSyntax> {
    too_deep(text, flag)?;
    let first = match parse(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let (rewritten, edits) = rewrite(text, flag);
    if edits.is_empty() {
        return Err(syntax(&first, &[]));
    }
    parse(&rewritten).map_err(|e| syntax(&e, &edits))
}

/// serde_json with its own recursion limit (127 levels) off: [`too_deep`]
/// has bounded the depth, and so the stack, at [`MAX_JSON_DEPTH`] first.
fn parse(text: &str) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let v = serde::Deserialize::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// How deep vLLM itself reads a JSON flag, for the message past [`JSON_MAX_DEPTH`].
fn vllm_depth(flag: JsonFlag) -> &'static str {
    match flag {
        JsonFlag::Dataclass => "200 levels (pydantic-core's JSON parser)",
        JsonFlag::Loads => "about 990 levels (Python's recursion limit)",
    }
}

/// An error where `text` nests deeper than [`MAX_JSON_DEPTH`] (the bound of
/// the Python binding's mappings too, `input_too_deep`), at the bracket that
/// goes one level too deep (a linear scan, strings skipped). vLLM reads
/// deeper, but a deeper read needs more stack than a caller's thread may have.
fn too_deep(text: &str, flag: JsonFlag) -> Result<(), JsonSyntax> {
    let max = MAX_JSON_DEPTH;
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let (mut line, mut column) = (1usize, 0usize);
    for c in text.chars() {
        column += 1;
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else {
            match c {
                '"' => in_string = true,
                '[' | '{' => depth += 1,
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if c == '\n' {
            (line, column) = (line + 1, 0);
        }
        if depth > max {
            return Err(JsonSyntax {
                message: format!(
                    "nested more than {max} levels deep, the most hisparse-check reads (vLLM reads {})",
                    vllm_depth(flag)
                ),
                line,
                column,
                eof: false,
            });
        }
    }
    Ok(())
}

/// One replacement of the rewrite: on `line`, at rewritten `column` (1-based)
/// the text grew by `grew` bytes (may be negative).
struct Edit {
    line: usize,
    column: usize,
    grew: isize,
}

fn syntax(e: &serde_json::Error, edits: &[Edit]) -> JsonSyntax {
    let text = e.to_string();
    let message = match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    };
    let shift: isize = edits
        .iter()
        .filter(|d| d.line == e.line() && d.column < e.column())
        .map(|d| d.grew)
        .sum();
    JsonSyntax {
        message,
        line: e.line(),
        column: e.column().saturating_add_signed(-shift).max(1),
        eof: e.is_eof(),
    }
}

/// The text with Python's extra number forms replaced outside strings.
fn rewrite(text: &str, flag: JsonFlag) -> (String, Vec<Edit>) {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 16);
    let mut edits = Vec::new();
    // Where the current line starts in `out`, and its number.
    let (mut line, mut line_start) = (1usize, 0usize);
    let copy = |out: &mut String, piece: &str, line: &mut usize, line_start: &mut usize| {
        for (k, c) in piece.bytes().enumerate() {
            if c == b'\n' {
                *line += 1;
                *line_start = out.len() + k + 1;
            }
        }
        out.push_str(piece);
    };
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            // A string, copied as it is (escapes included).
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(bytes.len());
            copy(&mut out, &text[i..end], &mut line, &mut line_start);
            i = end;
            continue;
        }
        let word_start = i == 0 || !is_word(bytes[i - 1]);
        let token = if word_start {
            token_at(&text[i..], flag)
        } else {
            None
        };
        match token {
            Some((len, replacement)) => {
                edits.push(Edit {
                    line,
                    column: out.len() - line_start + 1,
                    grew: replacement.len() as isize - len as isize,
                });
                out.push_str(&replacement);
                i += len;
            }
            None => {
                // One character (the text is UTF-8: stay on boundaries).
                let len = text[i..].chars().next().map_or(1, char::len_utf8);
                copy(&mut out, &text[i..i + len], &mut line, &mut line_start);
                i += len;
            }
        }
    }
    (out, edits)
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// The extra form starting `rest`, if one does: its length and its replacement.
fn token_at(rest: &str, flag: JsonFlag) -> Option<(usize, String)> {
    for (word, value) in [
        ("-Infinity", "\"-inf\""),
        ("Infinity", "\"inf\""),
        ("NaN", "\"nan\""),
    ] {
        if rest.starts_with(word) && !rest[word.len()..].bytes().next().is_some_and(is_word) {
            return Some((word.len(), value.to_owned()));
        }
    }
    let number = number_len(rest)?;
    let literal = &rest[..number];
    let after = rest[number..].bytes().next();
    if flag == JsonFlag::Dataclass {
        // vLLM's pattern: \b\d+(?:\.\d+)?[kKmMgGtT]\b, outside strings.
        if let Some(suffix) = after.filter(|c| b"kKmMgGtT".contains(c)) {
            let unsigned = literal.strip_prefix('-').unwrap_or(literal);
            let end_ok = !rest[number + 1..].bytes().next().is_some_and(is_word);
            let plain = !unsigned.contains(['e', 'E']);
            if end_ok && plain {
                let text = format!("{unsigned}{}", suffix as char);
                let sign = if literal.starts_with('-') { "-" } else { "" };
                // An expansion vLLM refuses (1.5K) is left for serde_json to refuse.
                return human_readable(&text).map(|n| (number + 1, format!("{sign}{n}")));
            }
        }
    }
    let float = literal.contains(['.', 'e', 'E']);
    if float {
        let v: f64 = literal.parse().ok()?;
        if v.is_infinite() {
            let name = if v < 0.0 { "\"-inf\"" } else { "\"inf\"" };
            return Some((number, name.to_owned()));
        }
    }
    None
}

/// The length of the JSON number literal starting `rest` (`-?digits(.digits)?([eE][+-]?digits)?`).
fn number_len(rest: &str) -> Option<usize> {
    let b = rest.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return None;
    }
    if b.get(i) == Some(&b'.') {
        let mut j = i + 1;
        if digits(&mut j) {
            i = j;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digits(&mut j) {
            i = j;
        }
    }
    Some(i)
}

/// vLLM `human_readable_int` on a `\d+(\.\d+)?[kKmMgGtT]` token: decimal
/// suffixes (k = 10^3 ... t = 10^12) take decimals (`int(float(n) * mult)`),
/// binary ones (K = 2^10 ... T = 2^40) do not.
pub fn human_readable(token: &str) -> Option<i64> {
    let suffix = token.chars().last()?;
    let number = &token[..token.len() - 1];
    let decimal = match suffix {
        'k' => Some(1e3),
        'm' => Some(1e6),
        'g' => Some(1e9),
        't' => Some(1e12),
        _ => None,
    };
    if let Some(mult) = decimal {
        let v = number.parse::<f64>().ok()? * mult;
        return (v.is_finite() && v.abs() < 9.2e18).then_some(v as i64);
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

/// `gib` as vLLM's human-readable expansion of `n` with a size suffix
/// (`_expand_json_human_readable_numbers`, vllm/engine/arg_utils.py: `T`/`G`/`M`
/// are powers of 2^10, `t`/`g`/`m` of 10^3): the largest suffix that gives a
/// whole `n` of at least 1.
pub fn suffixed_size(gib: f64) -> Option<(u64, &'static str, &'static str)> {
    const SUFFIXES: [(f64, &str, &str); 6] = [
        (1_099_511_627_776.0, "T", "2^40"),
        (1e12, "t", "10^12"),
        (1_073_741_824.0, "G", "2^30"),
        (1e9, "g", "10^9"),
        (1_048_576.0, "M", "2^20"),
        (1e6, "m", "10^6"),
    ];
    SUFFIXES.iter().find_map(|&(f, suffix, factor)| {
        let n = gib / f;
        (n >= 1.0 && n.fract() == 0.0 && n < 1e15).then_some((n as u64, suffix, factor))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ints_read_as_python_reads_them() {
        let n = |t: &str| py_int(t).map(|n| (n.negative, n.digits));
        assert_eq!(n("1_0"), Some((false, "10".into())));
        assert_eq!(n(" 1 "), Some((false, "1".into())));
        assert_eq!(n("+1"), Some((false, "1".into())));
        assert_eq!(n("-0"), Some((false, "0".into())));
        assert_eq!(n("007"), Some((false, "7".into())));
        assert_eq!(n("\u{a0}1\n\u{3000}"), Some((false, "1".into())));
        assert_eq!(n("\u{b}\u{c}1"), Some((false, "1".into())));
        // Any script's decimal digits, as CPython transforms them first.
        assert_eq!(n("٣"), Some((false, "3".into())));
        assert_eq!(n("-١_٢"), Some((true, "12".into())));
        assert_eq!(n("\u{1d7ce}\u{1d7d9}"), Some((false, "1".into())));
        let big = "12345678901234567890123";
        assert_eq!(n(big), Some((false, big.into())));
        assert!(py_int(big).unwrap().to_i64().is_none());
        for refused in [
            "",
            " ",
            "1.0",
            "0x1",
            "1__0",
            "_1",
            "1_",
            "- 1",
            "+-1",
            "1e3",
            "\u{1c}1",
            "1\u{1f}",
            "\u{85}\u{85}",
            "²",
            "Ⅷ",
        ] {
            assert_eq!(py_int(refused), None, "{refused:?}");
        }
        assert!(py_int(&"1".repeat(PY_INT_MAX_STR_DIGITS)).is_some());
        assert!(py_int(&"1".repeat(PY_INT_MAX_STR_DIGITS + 1)).is_none());
    }

    #[test]
    fn json_reads_pythons_constants_and_overflow() {
        let v = json_loads(
            r#"{"a": NaN, "b": [Infinity, -Infinity], "c": 1e400, "d": -1E+999, "e": "NaN x", "f": 1e-400}"#,
            JsonFlag::Loads,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"a": "nan", "b": ["inf", "-inf"], "c": "inf", "d": "-inf", "e": "NaN x", "f": 0.0})
        );
        // Inside strings nothing changes; other bare words stay errors.
        assert_eq!(
            json_loads(r#"["Infinity"]"#, JsonFlag::Loads).unwrap(),
            json!(["Infinity"])
        );
        for refused in [
            "[nan]",
            "[inf]",
            "[NaNa]",
            "[-NaN]",
            "[Infinityx]",
            "{'a': 1}",
            "[1,]",
        ] {
            assert!(json_loads(refused, JsonFlag::Loads).is_err(), "{refused}");
        }
    }

    #[test]
    fn dataclass_flags_expand_human_readable_numbers() {
        let text = r#"{"a": 80g, "b": 1K, "c": "1K", "d": 25.6k, "e": -2M}"#;
        assert_eq!(
            json_loads(text, JsonFlag::Dataclass).unwrap(),
            json!({"a": 80_000_000_000i64, "b": 1024, "c": "1K", "d": 25600, "e": -2097152})
        );
        assert!(json_loads(text, JsonFlag::Loads).is_err());
        assert!(json_loads(r#"{"a": 1.5K}"#, JsonFlag::Dataclass).is_err());
    }

    #[test]
    fn nesting_past_the_bound_is_its_own_error() {
        let nest = |d: usize| format!("{}1{}", "[".repeat(d), "]".repeat(d));
        for flag in [JsonFlag::Loads, JsonFlag::Dataclass] {
            let max = MAX_JSON_DEPTH;
            assert!(json_loads(&nest(max), flag).is_ok(), "{flag:?}");
            let e = json_loads(&nest(max + 1), flag).unwrap_err();
            assert_eq!((e.line, e.column), (1, max + 1), "{flag:?}");
            assert!(e.message.contains("levels deep"), "{e}");
        }
        // Brackets inside strings do not nest.
        let text = format!("[\"{}\\\"\"]", "[".repeat(5000));
        assert!(json_loads(&text, JsonFlag::Dataclass).is_ok());
        assert!(json_loads(&"[".repeat(1_000_000), JsonFlag::Loads).is_err());
    }

    #[test]
    fn errors_point_into_the_text_as_given() {
        let e = json_loads("{\"a\": NaN, \"b\": NaN, \"c\": }", JsonFlag::Loads).unwrap_err();
        let plain = serde_json::from_str::<Value>("{\"a\": 1.0, \"b\": 1.0, \"c\": }").unwrap_err();
        assert_eq!((e.line, e.column), (plain.line(), plain.column()));
        assert!(
            e.to_string().starts_with("expected value at line 1 column"),
            "{e}"
        );
    }
}
