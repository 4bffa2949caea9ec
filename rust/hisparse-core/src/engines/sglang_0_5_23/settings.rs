//! HiSparse settings as SGLang 0.5.23 would run them: the report's `hisparse`
//! object for an SGLang launch. The type lives with the report (engine-neutral
//! modules name no engine); this tree fills it (`resolve`).

pub use crate::report::SglangHiSparse;
