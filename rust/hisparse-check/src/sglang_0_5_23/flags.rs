//! The lookups argparse makes on SGLang 0.5.23's whole option table: an exact
//! spelling, and the prefix matching of `allow_abbrev=True` (the default
//! `argparse.ArgumentParser(prog="sglang serve")` keeps, srt/server_args.py:679).
//! The rows are [`super::flag_table::FLAGS`], generated from
//! tests/sglang/sglang_flags.json; their shape is [`super::flag`].

pub use super::flag::{Action, Flag, Nargs, Ty};
use super::flag_table::FLAGS;
use std::collections::HashMap;
use std::sync::OnceLock;

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

/// Every option, in the parser's order.
pub fn all() -> impl Iterator<Item = &'static Flag> {
    FLAGS.iter()
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
