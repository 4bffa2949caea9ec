//! vLLM 0.33.0's reading of HiSparse: its serve arguments (`args`, `schema`),
//! the connector tree walk (`connectors`), resolution and validation
//! (`resolve`, `validate` for HiSparse, `misplaced` for its settings in the
//! wrong place, `startup` for vLLM's other start-up rules), joint fixes
//! (`fixes`) written as `vllm serve` flags (`fixed_flags`), where the verdict
//! knowingly differs from vLLM's (`deviations`), and at which start-up stage
//! vLLM 0.33.0 refuses each code (`stages`).

pub mod advise;
pub mod args;
pub mod check;
pub mod connectors;
pub mod deviations;
pub mod diagnostics;
pub mod fixed_flags;
pub(crate) mod fixes;
pub(crate) mod input;
pub(crate) mod misplaced;
pub mod plan;
pub(crate) mod planner;
pub mod resolve;
pub mod schema;
pub mod stages;
pub mod startup;
pub mod validate;

/// The vLLM release whose behaviour this module follows.
pub const VERSION: &str = "0.33.0";
