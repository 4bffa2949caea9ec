//! Serve-configuration resolution: parse (`args`, `schema`, `pytext` for
//! text read as vLLM's Python reads it), walk the connector
//! tree (`connectors`), read the model (`model`, `model_file`, `hub` for
//! Hugging Face cache ids), resolve and validate (`resolve`, `validate` for
//! HiSparse, `misplaced` for its settings in the wrong place, `startup` for
//! vLLM's other start-up rules), settle a report's fixes jointly (`fixes`),
//! write them as `vllm serve` flags (`fixed_flags`), and report (`report`);
//! `deviations` lists where the verdict knowingly differs from vLLM 0.33.0's;
//! `vllm_stages` says at which start-up stage vLLM 0.33.0 refuses each code.

pub mod args;
pub mod connectors;
pub mod deviations;
pub mod fixed_flags;
pub(crate) mod fixes;
pub mod hub;
pub(crate) mod misplaced;
pub mod model;
pub mod model_file;
pub mod pytext;
pub mod report;
pub mod resolve;
pub mod schema;
pub mod startup;
pub mod validate;
pub mod vllm_stages;
