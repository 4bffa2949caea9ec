//! The shape of one `vllm serve` option as vLLM 0.33.0's argparse parser
//! holds it: how it takes values, its choices and its `type=` callable, and
//! that callable applied to one value as argparse applies it (`_get_value`,
//! then `_check_value` for the choices). The rows are
//! [`crate::vllm_flag_table::VLLM_FLAGS`] (generated from
//! tests/vllm/vllm_flags.json); the lookups on the whole table are
//! [`crate::vllm_flags`].

use hisparse_core::pytext::{
    json_loads, py_float_text, py_int, py_number_text, py_str_strip, JsonFlag,
};
use hisparse_core::pyvalue::str_repr as py_repr;
use serde_json::{json, Value};

/// How an option takes values, as argparse reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// One value (`nargs=None`): `--port 8000`, `--port=8000`.
    One,
    /// One or more values (`nargs="+"`): `--served-model-name a b`.
    OneOrMore,
    /// An optional value (`nargs="?"`): alone, or with one value.
    Optional,
    /// No value, and no `--no-` form (`action="store_true"`).
    StoreTrue,
    /// No value, with a `--no-NAME` form (`argparse.BooleanOptionalAction`,
    /// which vLLM's `EnableDisableAction` also spells `--disable-X` for
    /// `--enable-X` and the other way round: `vllm/utils/argparse_utils.py`).
    Bool,
    /// `-h` / `--help` (clap's own).
    Help,
}

/// The `type=` callable argparse applies to each value (vllm/engine/arg_utils.py,
/// vllm/utils/argparse_utils.py); tests/vllm/dump_flags.py names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// No type: the text (the booleans, `--config`, `--log-level`).
    None,
    Str,
    /// Python's `int(text)`.
    Int,
    /// Python's `float(text)`.
    Float,
    /// `json.loads`.
    Json,
    /// `parse_type(json.loads)` (arg_utils.py:161-170): its ValueError is
    /// "Value X cannot be converted to ...".
    ParseTypeJson,
    /// A config dataclass's `parse_dataclass` (arg_utils.py:369-374):
    /// `_expand_json_human_readable_numbers`, then pydantic's `validate_json`.
    Dataclass,
    /// `union_dict_and_str` (arg_utils.py:182-185): text in braces is JSON.
    UnionDictAndStr,
    /// `human_readable_int` (utils/argparse_utils.py:30-74).
    HumanReadableInt,
    /// `human_readable_int_or_auto` (utils/argparse_utils.py:77-94): `-1` and `auto` too.
    HumanReadableIntOrAuto,
    /// `parse_reasoning_parser` (arg_utils.py:188-190): any text.
    ReasoningParser,
    /// `lambda s: s.lower().replace("-", "_")` (arg_utils.py:1844-1850): the
    /// choices are compared with the lowered text.
    LowerDashes,
    /// The `--device-ids` lambda (arg_utils.py:1196): any text.
    DeviceIds,
}

/// The argparse action of an option (`action=` or the class vLLM passes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Store,
    StoreTrue,
    /// `append` (`--middleware`): each use adds a value.
    Append,
    Help,
    /// vLLM's `EnableDisableAction` (utils/argparse_utils.py), a `BooleanOptionalAction`.
    EnableDisable,
    /// vLLM's `LoRAParserAction` (entrypoints/common/cli_args.py:38-69): each
    /// value `name=path` or a JSON `LoRAModulePath`.
    LoraParser,
    /// `--log-config-file`: stores its value and warns (engine/arg_utils.py:480-485).
    DeprecatedLogConfigFile,
}

/// One `vllm serve` option.
#[derive(Debug)]
pub struct Flag {
    /// The long name without dashes.
    pub name: &'static str,
    /// Its other spellings, with their dashes (`-tp`).
    pub aliases: &'static [&'static str],
    pub takes: Takes,
    /// The values argparse accepts (empty: any), as typed on the command
    /// line; "None" stands for the `None` that vLLM's `optional_type` adds
    /// (given as `None` or an empty string).
    pub choices: &'static [&'static str],
    /// Whether the choices are ints (`int(value)` is compared, as argparse
    /// compares the converted value).
    pub int_choices: bool,
    /// The `type=` callable.
    pub ty: Ty,
    /// Wrapped in vLLM's `optional_type` (arg_utils.py:173-179): `""` and
    /// `None` are None, and the inner type's ValueError is "Value X cannot be
    /// converted to ...".
    pub optional: bool,
    pub action: Action,
}

impl Action {
    /// The dump's name (argparse's registry name, or vLLM's class name).
    pub fn name(self) -> &'static str {
        match self {
            Action::Store => "store",
            Action::StoreTrue => "store_true",
            Action::Append => "append",
            Action::Help => "help",
            Action::EnableDisable => "EnableDisableAction",
            Action::LoraParser => "LoRAParserAction",
            Action::DeprecatedLogConfigFile => "DeprecatedLogConfigFileAction",
        }
    }
}

impl Ty {
    /// The dump's name of the callable (tests/vllm/dump_flags.py).
    pub fn name(self) -> &'static str {
        match self {
            Ty::None => "none",
            Ty::Str => "str",
            Ty::Int => "int",
            Ty::Float => "float",
            Ty::Json => "json",
            Ty::ParseTypeJson => "parse_type(json)",
            Ty::Dataclass => "dataclass",
            Ty::UnionDictAndStr => "union_dict_and_str",
            Ty::HumanReadableInt => "human_readable_int",
            Ty::HumanReadableIntOrAuto => "human_readable_int_or_auto",
            Ty::ReasoningParser => "parse_reasoning_parser",
            Ty::LowerDashes => "lower_dashes",
            Ty::DeviceIds => "device_ids",
        }
    }

    /// The callable's `repr()` in `parse_type`'s message, as far as it does
    /// not depend on the run (a function's address is left out).
    fn py_callable(self) -> &'static str {
        match self {
            Ty::Int => "<class 'int'>",
            Ty::Float => "<class 'float'>",
            Ty::Str | Ty::None => "<class 'str'>",
            Ty::Json => "<function loads>",
            Ty::ParseTypeJson => "<function parse_type.<locals>._parse_type>",
            Ty::HumanReadableInt => "<function human_readable_int>",
            _ => "<function>",
        }
    }
}

/// Why a callable refused a value: argparse's two cases (`_get_value`).
enum Refusal {
    /// ValueError or TypeError: "invalid NAME value: 'X'" (NAME the
    /// callable's `__name__`), or `parse_type`'s own message around it.
    Value(&'static str),
    /// `argparse.ArgumentTypeError(message)`: the message as it is.
    Type(String),
}

/// `human_readable_int` (utils/argparse_utils.py:30-74) on `text`.
fn human_readable_int(text: &str) -> Result<(), Refusal> {
    let value = py_str_strip(text);
    let t = py_number_text(value);
    if let Some(suffix) = t.chars().last().filter(|c| "kKmMgGtT".contains(*c)) {
        let number = &t[..t.len() - 1];
        let (whole, frac) = match number.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (number, None),
        };
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if digits(whole) && frac.is_none_or(digits) {
            if suffix.is_ascii_uppercase() && frac.is_some() {
                return Err(Refusal::Type(format!(
                    "Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use {number}{} instead?",
                    suffix.to_ascii_lowercase()
                )));
            }
            // int(float(n) * mult) or int(n) * mult: Python's ints hold any size.
            return Ok(());
        }
    }
    py_int(value)
        .map(|_| ())
        .ok_or(Refusal::Value("human_readable_int"))
}

/// `ty` applied to `text` (not wrapped in `optional_type`).
fn apply(ty: Ty, text: &str) -> Result<(), Refusal> {
    match ty {
        Ty::None | Ty::Str | Ty::ReasoningParser | Ty::LowerDashes | Ty::DeviceIds => Ok(()),
        Ty::Int => py_int(text).map(|_| ()).ok_or(Refusal::Value("int")),
        Ty::Float => py_float_text(text)
            .map(|_| ())
            .ok_or(Refusal::Value("float")),
        Ty::Json => json_loads(text, JsonFlag::Loads)
            .map(|_| ())
            .map_err(|_| Refusal::Value("loads")),
        Ty::ParseTypeJson => apply(Ty::Json, text).map_err(|_| parse_type(Ty::Json, text)),
        Ty::UnionDictAndStr => {
            // re.match(r"(?s)^\s*{.*}\s*$"): then optional_type(json.loads).
            let t = text.trim_matches(|c: char| c.is_whitespace());
            if !(t.starts_with('{') && t.ends_with('}')) || text.is_empty() || text == "None" {
                return Ok(());
            }
            apply(Ty::Json, text).map_err(|_| parse_type(Ty::Json, text))
        }
        Ty::Dataclass => dataclass(text),
        Ty::HumanReadableInt => human_readable_int(text),
        Ty::HumanReadableIntOrAuto => {
            let value = py_str_strip(text);
            if value == "-1" || value.to_lowercase() == "auto" {
                return Ok(());
            }
            human_readable_int(text).map_err(|e| match e {
                Refusal::Value(_) => Refusal::Value("human_readable_int_or_auto"),
                other => other,
            })
        }
    }
}

/// `parse_type(ty)`'s message for the ValueError of `ty` (arg_utils.py:166-168).
fn parse_type(ty: Ty, text: &str) -> Refusal {
    Refusal::Type(format!(
        "Value {text} cannot be converted to {}.",
        ty.py_callable()
    ))
}

/// A config dataclass's value: pydantic validates a JSON object into the
/// dataclass (vLLM's message is the `repr` of pydantic's ValidationError;
/// this one says the same in a line). Refused here only where no config object can come of it: text
/// that is not JSON (after vLLM's k/m/g/t expansion) or JSON that is not an
/// object or array; the fields are the check's to read where it reads the
/// flag (`--kv-transfer-config`, ...), and are not checked for the others.
fn dataclass(text: &str) -> Result<(), Refusal> {
    match json_loads(text, JsonFlag::Dataclass) {
        Ok(Value::Object(_) | Value::Array(_)) => Ok(()),
        Ok(v) => Err(Refusal::Type(format!(
            "not a config object but {} (pydantic's validate_json refuses {})",
            json_kind(&v),
            py_repr(text)
        ))),
        Err(e) => Err(Refusal::Type(format!(
            "not JSON: {e} (pydantic's validate_json refuses {})",
            py_repr(text)
        ))),
    }
}

/// `LoRAParserAction` on one value (cli_args.py:52-68): `name=path` (without
/// a comma), or JSON that builds `LoRAModulePath(**value)` (name and path,
/// optional base_model_name and is_3d_lora_weight;
/// entrypoints/openai/models/protocol.py:15-19). vLLM's message is
/// `parser.error`'s own, without the `argument` prefix.
fn lora_module(item: &str) -> Result<(), String> {
    if item.is_empty() || item == "None" || (item.contains('=') && !item.contains(',')) {
        return Ok(());
    }
    let Ok(v) = json_loads(item, JsonFlag::Loads) else {
        return Err(format!("Invalid JSON format for --lora-modules: {item}"));
    };
    const FIELDS: [&str; 4] = ["name", "path", "base_model_name", "is_3d_lora_weight"];
    let fits = v.as_object().is_some_and(|o| {
        o.keys().all(|k| FIELDS.contains(&k.as_str()))
            && o.contains_key("name")
            && o.contains_key("path")
    });
    if fits {
        Ok(())
    } else {
        Err(format!(
            "Invalid fields for --lora-modules: {item} - LoRAModulePath takes name, path, base_model_name and is_3d_lora_weight (name and path required)"
        ))
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Flag {
    /// Every spelling argparse registers for this option, with dashes, and
    /// whether it turns the option off (`--no-X`; `--disable-X` for an
    /// `--enable-X` row and the other way round).
    pub fn option_strings(&self) -> Vec<(String, bool)> {
        let long = format!("--{}", self.name);
        let given: Vec<String> = std::iter::once(long)
            .chain(self.aliases.iter().map(|a| (*a).to_owned()))
            .collect();
        let mut out = Vec::new();
        for option in &given {
            out.push((option.clone(), false));
            // argparse.BooleanOptionalAction: --no- for every long spelling.
            if self.takes == Takes::Bool {
                if let Some(rest) = option.strip_prefix("--") {
                    out.push((format!("--no-{rest}"), true));
                }
            }
        }
        if self.takes == Takes::Bool {
            // EnableDisableAction: the inverse of each --enable-/--disable- spelling.
            for option in &given {
                if let Some(rest) = option.strip_prefix("--enable-") {
                    out.push((format!("--disable-{rest}"), true));
                } else if let Some(rest) = option.strip_prefix("--disable-") {
                    out.push((format!("--enable-{rest}"), true));
                }
            }
        }
        out
    }

    /// argparse's `nargs` for this option (JSON: null, "+", "?" or 0).
    pub fn nargs(&self) -> Value {
        match self.takes {
            Takes::One => Value::Null,
            Takes::OneOrMore => json!("+"),
            Takes::Optional => json!("?"),
            Takes::StoreTrue | Takes::Bool | Takes::Help => json!(0),
        }
    }

    /// The dump's name of the option's type (`optional(int)`).
    pub fn type_name(&self) -> String {
        if self.optional {
            format!("optional({})", self.ty.name())
        } else {
            self.ty.name().to_owned()
        }
    }

    /// Whether argparse accepts `value` for this option (its choices).
    pub fn accepts(&self, value: &str) -> bool {
        if self.choices.is_empty() {
            return true;
        }
        // vLLM's optional_type: "" and "None" are None, which it adds to the choices.
        if (value.is_empty() || value == "None") && self.choices.contains(&"None") {
            return true;
        }
        if self.int_choices {
            let given = py_int(value).and_then(|n| n.to_i64());
            return given.is_some_and(|n| {
                self.choices
                    .iter()
                    .any(|c| c.parse::<i64>().ok() == Some(n))
            });
        }
        if self.ty == Ty::LowerDashes {
            // argparse compares the converted value with the choices.
            let converted = value.to_lowercase().replace('-', "_");
            return self.choices.contains(&converted.as_str());
        }
        self.choices.contains(&value)
    }

    /// `value` as argparse reads it for this option: its type, then its
    /// choices; the error is argparse's text after `argument --flag: `.
    pub fn check(&self, value: &str) -> Result<(), String> {
        let none = self.optional && (value.is_empty() || value == "None");
        if !none {
            let applied = apply(self.ty, value).map_err(|e| match e {
                // optional_type wraps the type in parse_type (arg_utils.py:179).
                Refusal::Value(_) if self.optional => parse_type(self.ty, value),
                other => other,
            });
            match applied {
                Ok(()) => {}
                Err(Refusal::Value(name)) => {
                    return Err(format!("invalid {name} value: {}", py_repr(value)))
                }
                Err(Refusal::Type(message)) => return Err(message),
            }
        }
        if self.action == Action::LoraParser {
            lora_module(value)?;
        }
        if self.accepts(value) {
            return Ok(());
        }
        let choices: Vec<String> = self
            .choices
            .iter()
            .map(|c| {
                if self.int_choices || *c == "None" {
                    (*c).to_owned()
                } else {
                    py_repr(c)
                }
            })
            .collect();
        let given = if self.int_choices {
            py_int(value).map_or_else(
                || py_repr(value),
                |n| format!("{}{}", if n.negative { "-" } else { "" }, n.digits),
            )
        } else if self.ty == Ty::LowerDashes {
            py_repr(&value.to_lowercase().replace('-', "_"))
        } else {
            py_repr(value)
        };
        Err(format!(
            "invalid choice: {given} (choose from {})",
            choices.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn row(ty: Ty, optional: bool, choices: &'static [&'static str]) -> Flag {
        Flag {
            name: "x",
            aliases: &[],
            takes: Takes::One,
            choices,
            int_choices: false,
            ty,
            optional,
            action: Action::Store,
        }
    }

    #[test]
    fn types_refuse_as_argparse_does() {
        let int = row(Ty::Int, false, &[]);
        assert_eq!(int.check("abc").unwrap_err(), "invalid int value: 'abc'");
        assert_eq!(int.check("1.5").unwrap_err(), "invalid int value: '1.5'");
        assert!(int.check("-1").is_ok() && int.check(" 8 ").is_ok() && int.check("1_000").is_ok());
        assert!(
            int.check("99999999999999999999999").is_ok(),
            "Python's ints have no bound"
        );
        let float = row(Ty::Float, false, &[]);
        assert!(float.check("1e-3").is_ok() && float.check("nan").is_ok());
        assert_eq!(float.check("x").unwrap_err(), "invalid float value: 'x'");
        let opt_int = row(Ty::Int, true, &[]);
        assert!(opt_int.check("None").is_ok() && opt_int.check("").is_ok());
        assert_eq!(
            opt_int.check("abc").unwrap_err(),
            "Value abc cannot be converted to <class 'int'>."
        );
        let json = row(Ty::Json, false, &[]);
        assert!(json.check("{\"a\": NaN}").is_ok());
        assert_eq!(json.check("{a}").unwrap_err(), "invalid loads value: '{a}'");
        let union = row(Ty::UnionDictAndStr, false, &[]);
        assert!(union.check("cpu").is_ok() && union.check("{\"a\": 1}").is_ok());
        assert!(union
            .check("{a}")
            .unwrap_err()
            .starts_with("Value {a} cannot"));
        let dc = row(Ty::Dataclass, false, &[]);
        assert!(dc.check("{\"x\": 80g}").is_ok());
        assert!(dc.check("abc").unwrap_err().starts_with("not JSON: "));
        assert_eq!(
            dc.check("5").unwrap_err(),
            "not a config object but a number (pydantic's validate_json refuses '5')"
        );
    }

    #[test]
    fn human_readable_ints_as_vllm_reads_them() {
        let hri = row(Ty::HumanReadableInt, false, &[]);
        for ok in ["1k", "25.6k", "1K", " 128 ", "1_000", "-5"] {
            assert!(hri.check(ok).is_ok(), "{ok}");
        }
        assert_eq!(
            hri.check("1.5K").unwrap_err(),
            "Decimals are not allowed with binary suffixes like K. Did you mean to use 1.5k instead?"
        );
        assert_eq!(
            hri.check("abc").unwrap_err(),
            "invalid human_readable_int value: 'abc'"
        );
        let auto = row(Ty::HumanReadableIntOrAuto, false, &[]);
        assert!(
            auto.check("AUTO").is_ok() && auto.check("-1").is_ok() && auto.check("128k").is_ok()
        );
        assert_eq!(
            auto.check("x").unwrap_err(),
            "invalid human_readable_int_or_auto value: 'x'"
        );
        let opt = row(Ty::HumanReadableInt, true, &[]);
        assert!(opt
            .check("x")
            .unwrap_err()
            .starts_with("Value x cannot be converted"));
    }

    #[test]
    fn choices_follow_the_type() {
        let lower = row(Ty::LowerDashes, false, &["deep_gemm", "triton"]);
        assert!(lower.check("Deep-GEMM").is_ok());
        assert_eq!(
            lower.check("trito").unwrap_err(),
            "invalid choice: 'trito' (choose from 'deep_gemm', 'triton')"
        );
        let opt = row(Ty::Str, true, &["None", "a"]);
        assert!(opt.check("None").is_ok() && opt.check("").is_ok());
        assert!(opt.check("b").is_err());
    }

    #[test]
    fn lora_modules_as_vllms_action_reads_them() {
        let lora = Flag {
            action: Action::LoraParser,
            ..row(Ty::Str, true, &[])
        };
        assert!(lora.check("a=/p").is_ok() && lora.check("None").is_ok());
        assert!(lora.check(r#"{"name": "a", "path": "/p"}"#).is_ok());
        assert!(lora
            .check("text")
            .unwrap_err()
            .starts_with("Invalid JSON format"));
        assert!(lora
            .check(r#"{"name": "a"}"#)
            .unwrap_err()
            .starts_with("Invalid fields"));
        assert!(lora.check("[1]").is_err() && lora.check("a=b,c").is_err());
    }
}
