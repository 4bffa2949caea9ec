//! `hisparse-check deploy FILE...`: a whole deployment (P/D pairs,
//! multi-node instances) read from the Kubernetes manifests users deploy
//! with, each launch checked as `hisparse-check` checks one, then the rules
//! between launches. One concern per file: model.rs (the deployment),
//! k8s.rs (the manifest reader), shell.rs (`sh -c` strings), role.rs
//! (engine and P/D role of an argv).

pub mod k8s;
pub mod model;
pub mod role;
pub mod shell;
