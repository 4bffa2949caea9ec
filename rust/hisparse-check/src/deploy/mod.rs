//! `hisparse-check deploy FILE...`: a whole deployment (P/D pairs,
//! multi-node instances) read from the Kubernetes manifests users deploy
//! with, each launch checked as `hisparse-check` checks one, then the rules
//! between launches (docs/deploy.md). One concern per file: model.rs (the
//! deployment), k8s.rs (the manifest reader), own.rs (the deployment file
//! of our own and `--launch`), words.rs (a launch from its words), shell.rs (`sh -c` strings,
//! arith.rs their `$((...))`),
//! role.rs (engine and P/D role of an argv), facts.rs (each launch's check
//! and the facts the rules read), rules_vllm.rs / rules_sglang.rs /
//! rules_nodes.rs (the rules between launches), diag.rs (their
//! diagnostics and fixes), check.rs (the report), cli.rs (the command).

pub mod arith;
pub mod check;
pub mod cli;
pub mod diag;
pub mod facts;
pub mod k8s;
pub mod model;
pub mod own;
pub mod plan;
pub mod role;
pub mod rules_declared;
pub mod rules_nodes;
pub mod rules_sglang;
pub mod rules_vllm;
pub mod shell;
pub mod words;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_own;
