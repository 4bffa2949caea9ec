//! Serve-configuration resolution: parse (`args`, `schema`), walk the connector
//! tree (`connectors`), read the model (`model`), resolve and validate
//! (`resolve`, `validate` for HiSparse, `startup` for vLLM's other start-up
//! rules), and report (`report`); `deviations` lists where the verdict
//! knowingly differs from vLLM 0.33.0's.

pub mod args;
pub mod connectors;
pub mod deviations;
pub mod model;
pub mod report;
pub mod resolve;
pub mod schema;
pub mod startup;
pub mod validate;
