//! The shape of one `sglang serve` option as SGLang 0.5.23's argparse parser
//! holds it: its action, `nargs`, `type=` and the rest of the row. The rows
//! are [`super::flag_table::FLAGS`] (generated, naming this module); the
//! lookups on the whole table are [`super::flags`].

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
