//! The shape of one `sglang serve` option as SGLang 0.5.23's argparse parser
//! holds it, and the lookups argparse makes on the whole table: an exact
//! spelling, and the prefix matching of `allow_abbrev=True` (the default
//! `argparse.ArgumentParser(prog="sglang serve")` keeps, srt/server_args.py:679).
//! The rows are [`super::flag_table::FLAGS`], generated from
//! tests/sglang/sglang_flags.json.

use super::flag_table::FLAGS;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The argparse action of an option (`action=` or the class SGLang passes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `store`: the converted value(s).
    Store,
    /// `store_true`: no value; `--flag=1` is "ignored explicit argument '1'".
    StoreTrue,
    /// `argparse.BooleanOptionalAction`: `--flag` True, `--no-flag` False.
    BooleanOptional,
    /// SGLang's `DeprecatedStoreTrueAction` (arg_groups/argparse_actions.py:82-104):
    /// stores True, warns that the flag is deprecated.
    DeprecatedStoreTrue,
    /// SGLang's `DeprecatedStoreConstAction` (argparse_actions.py:107-135): stores
    /// its fixed value (here the one of `--monokernel-backend amd`) and warns.
    DeprecatedStoreConst,
    /// SGLang's `LoRAPathAction` (argparse_actions.py:8-24): paths or
    /// `{"lora_name": ..., "lora_path": ...}` objects.
    LoraPath,
    /// `-h` / `--help`.
    Help,
}

/// How many values the option takes (`nargs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nargs {
    /// `nargs=None`: exactly one.
    One,
    /// `nargs=0`: none (store_true and the deprecated booleans).
    Zero,
    /// `nargs="?"`: none (the `const`) or one.
    Optional,
    /// `nargs="*"`.
    ZeroOrMore,
    /// `nargs="+"`.
    OneOrMore,
}

/// The `type=` callable argparse applies to each value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// No type (the booleans).
    None,
    Str,
    /// Python's `int(text)`.
    Int,
    /// Python's `float(text)`.
    Float,
    /// `json.loads` (`--json-model-override-args`, ...).
    JsonLoads,
    /// SGLang's `json_list_type`: `orjson.loads` (srt/utils/common.py:4818-4824).
    JsonList,
    /// SGLang's `human_readable_int`: `1k`, `25.6k`, `1Ki` (srt/utils/common.py:3394-3429).
    HumanReadableInt,
    /// SGLang's `nullable_str`: an empty text or `None` is None (common.py:3388-3391).
    NullableStr,
    /// `parse_cuda_graph_backend_arg`: refuses `tc_piecewise`
    /// (srt/model_executor/cuda_graph_config.py:237-243).
    CudaGraphBackend,
    /// `parse_cuda_graph_config_arg`: a JSON object (cuda_graph_config.py:246-).
    CudaGraphConfig,
}

/// One `sglang serve` option.
#[derive(Debug)]
pub struct Flag {
    /// Every spelling, with its dashes, the first being argparse's display name.
    pub spellings: &'static [&'static str],
    /// The `ServerArgs` attribute it sets.
    pub dest: &'static str,
    pub action: Action,
    pub nargs: Nargs,
    pub ty: Ty,
    /// The allowed values as JSON texts (`"\"auto\""`, `"16"`), compared with
    /// the converted value as argparse compares them.
    pub choices: Option<&'static [&'static str]>,
    /// The default as JSON text (the dump's form; a non-JSON default is its
    /// repr). The core applies SGLang's defaults; this one is kept so that the
    /// table is the whole dump, field for field (`flag_table_matches_json`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub default: &'static str,
    /// `const` as JSON text (the value of `nargs="?"` given alone).
    pub const_value: &'static str,
    /// `--model-path` is required.
    pub required: bool,
}

impl Flag {
    /// argparse's name of the argument in its errors: the spellings joined by `/`.
    pub fn display(&self) -> String {
        self.spellings.join("/")
    }
}

fn by_spelling() -> &'static HashMap<&'static str, &'static Flag> {
    static MAP: OnceLock<HashMap<&'static str, &'static Flag>> = OnceLock::new();
    MAP.get_or_init(|| {
        FLAGS
            .iter()
            .flat_map(|f| f.spellings.iter().map(move |s| (*s, f)))
            .collect()
    })
}

/// The option spelled exactly `spelling` (with its dashes).
pub fn exact(spelling: &str) -> Option<&'static Flag> {
    by_spelling().get(spelling).copied()
}

/// Every spelling that starts with `prefix`, as argparse's `_get_option_tuples`
/// collects them for a `--` option (Python 3.11): one per spelling, so two
/// spellings of one option are two matches, and argparse calls that ambiguous.
pub fn prefixed(prefix: &str) -> Vec<(&'static str, &'static Flag)> {
    let mut hits: Vec<(&'static str, &'static Flag)> = FLAGS
        .iter()
        .flat_map(|f| f.spellings.iter().map(move |s| (*s, f)))
        .filter(|(s, _)| s.starts_with(prefix))
        .collect();
    hits.sort_by_key(|(s, _)| *s);
    hits
}

/// Every `ServerArgs` attribute an option sets, sorted, once each (not `help`).
pub fn dests() -> Vec<&'static str> {
    let mut d: Vec<&'static str> = FLAGS
        .iter()
        .filter(|f| f.action != Action::Help)
        .map(|f| f.dest)
        .collect();
    d.sort_unstable();
    d.dedup();
    d
}

/// Every spelling, for did-you-mean.
pub fn spellings() -> impl Iterator<Item = &'static str> {
    FLAGS.iter().flat_map(|f| f.spellings.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const JSON: &str = include_str!("../../../../tests/sglang/sglang_flags.json");

    fn action_name(a: Action) -> &'static str {
        match a {
            Action::Store => "store",
            Action::StoreTrue => "store_true",
            Action::BooleanOptional => "BooleanOptionalAction",
            Action::DeprecatedStoreTrue => "DeprecatedStoreTrueAction",
            Action::DeprecatedStoreConst => "DeprecatedStoreConstAction",
            Action::LoraPath => "LoRAPathAction",
            Action::Help => "help",
        }
    }

    fn nargs_json(n: Nargs) -> Value {
        match n {
            Nargs::One => Value::Null,
            Nargs::Zero => Value::from(0),
            Nargs::Optional => Value::from("?"),
            Nargs::ZeroOrMore => Value::from("*"),
            Nargs::OneOrMore => Value::from("+"),
        }
    }

    fn ty_json(t: Ty) -> Value {
        let name = match t {
            Ty::None => return Value::Null,
            Ty::Str => "str",
            Ty::Int => "int",
            Ty::Float => "float",
            Ty::JsonLoads => "json",
            Ty::JsonList => "json_list_type",
            Ty::HumanReadableInt => "human_readable_int",
            Ty::NullableStr => "nullable_str",
            Ty::CudaGraphBackend => "parse_cuda_graph_backend_arg",
            Ty::CudaGraphConfig => "parse_cuda_graph_config_arg",
        };
        Value::from(name)
    }

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    /// The generated table is the JSON dump of SGLang's parser, row for row and
    /// field for field (regenerate with scripts/gen_sglang_flags.py).
    #[test]
    fn flag_table_matches_json() {
        let table: Value = parse(JSON);
        assert_eq!(
            table["engine_version"],
            super::super::flag_table::ENGINE_VERSION
        );
        // The prefix matching of `prefixed` and `argv::classify` is argparse's with these.
        assert_eq!(table["allow_abbrev"], true);
        assert_eq!(table["prefix_chars"], "-");
        let options = table["options"].as_object().unwrap();
        assert_eq!(options.len(), FLAGS.len(), "one row per option");
        for flag in FLAGS {
            let opt = &options[flag.spellings[0]];
            let spellings: Vec<Value> = flag.spellings.iter().map(|s| Value::from(*s)).collect();
            assert_eq!(
                opt["option_strings"],
                Value::Array(spellings),
                "{}",
                flag.spellings[0]
            );
            assert_eq!(opt["dest"], flag.dest);
            assert_eq!(opt["action"], action_name(flag.action), "{}", flag.dest);
            assert_eq!(opt["nargs"], nargs_json(flag.nargs), "{}", flag.dest);
            assert_eq!(opt["type"], ty_json(flag.ty), "{}", flag.dest);
            let choices = flag
                .choices
                .map(|c| Value::Array(c.iter().map(|t| parse(t)).collect()))
                .unwrap_or(Value::Null);
            assert_eq!(opt["choices"], choices, "{}", flag.dest);
            assert_eq!(opt["default"], parse(flag.default), "{}", flag.dest);
            assert_eq!(opt["const"], parse(flag.const_value), "{}", flag.dest);
            assert_eq!(opt["required"], flag.required, "{}", flag.dest);
        }
    }

    #[test]
    fn spellings_and_prefixes_are_argparse_s() {
        assert_eq!(exact("--tensor-parallel-size").unwrap().dest, "tp_size");
        assert_eq!(exact("--ep").unwrap().dest, "ep_size");
        assert_eq!(
            exact("--hierarchical-sparse-attention-extra-config")
                .unwrap()
                .dest,
            "hisparse_config"
        );
        assert!(exact("--tp").is_none(), "--tp is a prefix, not a spelling");
        let tp = prefixed("--tp");
        assert_eq!(tp.len(), 1, "{tp:?}");
        assert_eq!(tp[0].1.dest, "tp_size");
        assert!(prefixed("--enable-hi").len() > 1, "ambiguous");
    }
}
