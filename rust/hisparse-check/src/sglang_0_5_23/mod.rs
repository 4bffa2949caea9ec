//! SGLang 0.5.23's flag dialect: its `sglang serve` options ([`flag_table`],
//! generated from the dump of its real parser), their shape ([`flag`]), the lookups on them ([`flags`]),
//! argparse's `type` callables ([`convert`]) and the argv read as its argparse
//! reads it ([`argv`]); a fix applied to the argv ([`fixed_argv`]). The result is the JSON object of `ServerArgs`
//! attributes the core's `SglangArgs` reads, and the argparse-stage refusals.

pub mod argv;
pub mod convert;
pub mod fixed_argv;
pub mod flag;
mod flag_table;
pub mod flags;
pub mod read;

pub use flag_table::ENGINE_VERSION;
