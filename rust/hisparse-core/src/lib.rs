//! hisparse-core: the pure-Rust heart of hisparse_rs (no pyo3).
//!
//! Data flows one way: [`ServeArgs`] (what the user typed, in vLLM's dialect)
//! -> [`resolve`] (connector tree walk, inference, provenance, validation)
//! -> [`Report`] (resolved HiSparse settings, or every error at once, with
//! fixes that pass alone and together; [`check::check`] adds what needs the
//! machines: the GPU of [`gpu`], the node's RAM, the planner's pool)
//! -> [`HostKVPool`] (host block tables) and [`ResidencyResolver`] (hot-buffer
//! slots and the miss plan each decode step; module [`pool`]).
//!
//! Every rule cites its source: vLLM 0.33.0 (`vllm/config/*.py`,
//! `vllm/v1/hisparse/*.py`) or `shared/spec/HISPARSE.md`.

pub mod deploy_codes;
pub mod diagnostic;
pub mod engine_log;
pub mod engines;
pub mod files;
pub mod gpu;
pub mod limits;
pub mod model;
pub mod path;
pub mod plan;
pub mod pool;
pub mod pytext;
pub mod pyvalue;
pub mod report;
pub mod sizes;
pub mod stage;
pub mod words;

pub use diagnostic::{Code, Diagnostic, FixOp, Severity};
pub use engines::vllm_0_33::advise::{resolve, resolve_with_model};
pub use engines::vllm_0_33::args::ServeArgs;
/// `hisparse_core::check::check`: vLLM 0.33.0's machine check.
pub use engines::vllm_0_33::check;
pub use model::LoadError;
pub use path::{FieldPath, Seg};
pub use pool::{
    HiSparseMetrics, HostKVPool, HostPoolExhausted, MetricsSnapshot, PoolError, PoolLayout,
    PoolStats, ResidencyResolver, ResolveOutput,
};
pub use report::{Provenance, Report, Resolved, ResolvedHiSparse};

/// The vLLM release whose behaviour is the contract.
pub const VLLM_VERSION: &str = engines::vllm_0_33::VERSION;
