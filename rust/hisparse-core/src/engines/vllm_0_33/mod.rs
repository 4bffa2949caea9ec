//! vLLM 0.33.0's reading of HiSparse, in layers that import only downwards
//! (tests/module_graph.rs holds it):
//!
//! 1. read: the serve arguments (`args`), its config classes' fields
//!    (`schema`), the code-to-stage table (`stages`) and the diagnostics that
//!    use it (`diagnostics`);
//! 2. resolve: the connector tree walk (`connectors`), settings in the wrong
//!    place (`misplaced`), vLLM's other start-up rules (`startup`),
//!    HiSparse's rules (`validate`), the settling of one report's fixes
//!    (`fixes`), one resolution (`resolve`);
//! 3. advise: the fixes as `vllm serve` flags (`fixed_flags`), the joint pass
//!    that re-runs resolution on the configuration the fixes give and the
//!    public `resolve` (`advise`);
//! 4. the machines: the capacity model's figures (`planner`), weights that
//!    leave no GPU KV room (`kv_room`), the machine check (`check`), the
//!    planner's entry point (`plan`);
//!
//! and where the verdict knowingly differs from vLLM's (`deviations`).

pub mod advise;
pub mod args;
pub mod check;
pub mod connectors;
pub mod deviations;
pub mod diagnostics;
pub mod engine_log;
pub mod fixed_flags;
pub(crate) mod fixes;
pub(crate) mod input;
pub(crate) mod kv_room;
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
