//! Serve-configuration resolution: parse (`args`, `schema`), walk the connector
//! tree (`connectors`), read the model (`model`), resolve and validate
//! (`resolve`), and report (`report`).

pub mod args;
pub mod connectors;
pub(crate) mod fixes;
pub mod hub;
pub(crate) mod misplaced;
pub mod model;
pub mod model_file;
pub mod report;
pub mod resolve;
pub mod schema;
pub mod validate;
