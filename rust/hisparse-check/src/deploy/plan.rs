//! The plan of a deployment: each launch planned by the single-launch
//! planner (vLLM 0.33.0's `engines::vllm_0_33::plan::plan`, SGLang 0.5.23's
//! `engines::sglang_0_5_23::plan`) on its own machine, then per decode
//! instance the requests served with and without HiSparse, and per node the
//! pinned RAM of all its launches (the figures the per-node host-memory rule,
//! rules_declared.rs, reads). `deploy --plan` prints it (one renderer,
//! [`human`], from render_plan_parts.rs' pieces); the JSON always has it.

use super::facts::{self, Checked};
use super::model::{EngineKind, Launch, Role};
use crate::dialect;
use crate::render_plan_parts::{requests, tokens};
use hisparse_core::engines::sglang_0_5_23 as core_sglang;
use hisparse_core::plan::{gib_text, Limit, Plan, PlanOptions};
use serde::Serialize;
use std::collections::BTreeMap;

/// One launch's plan, or why it has none.
pub type LaunchPlan = Result<Plan, String>;

/// Plan one launch as `hisparse-check --plan` plans it, on its machine.
pub fn launch_plan(l: &Launch) -> LaunchPlan {
    match l.engine {
        EngineKind::Vllm => {
            let parsed = crate::vllm_cli::parse(&l.args).map_err(facts::usage)?;
            let opts = facts::options(l, crate::vllm_cli::plan_options(&parsed.cli));
            let serve = crate::vllm_cli::build_args(parsed.cli, &|k: &str| l.env.get(k).cloned());
            let (report, plan) = hisparse_core::engines::vllm_0_33::plan::plan(&serve, &opts)
                .map_err(|e| e.to_string())?;
            plan.ok_or_else(|| {
                let codes: Vec<&str> = report.errors.iter().map(|e| e.code.as_str()).collect();
                format!("the launch is not valid ({}): no plan", codes.join(", "))
            })
        }
        EngineKind::Sglang => {
            let read = crate::sglang_0_5_23::read::read(&l.args, l.sglang_serve)?;
            let opts = facts::options(l, PlanOptions::default());
            core_sglang::plan(&read.args, &opts).map_err(|e| e.to_string())
        }
    }
}

/// A decode instance's capacity at its planned context (per DP replica).
#[derive(Clone, Debug, Serialize)]
pub struct InstancePlan {
    pub launch: String,
    pub engine: &'static str,
    /// HiSparse configured on the launch; false: the figures are for the
    /// HiSparseConnector it would take (`assumed`, vLLM).
    pub hisparse: bool,
    pub context_length: u64,
    /// DP replicas of the instance (the figures are per replica).
    pub data_parallel_size: u64,
    pub requests_without_hisparse: Option<u64>,
    pub requests_with_hisparse: Option<u64>,
    /// What binds with HiSparse: gpu, host, max_num_seqs (max_running_requests), baseline.
    pub limit: Option<Limit>,
    pub pinned_bytes: u64,
}

/// One node's pinned RAM: the pools of every launch on it.
#[derive(Clone, Debug, Serialize)]
pub struct NodePlan {
    pub node: String,
    /// (launch, bytes its HiSparse pools pin on this node).
    pub launches: Vec<(String, u64)>,
    pub pinned_bytes: u64,
    /// The node's RAM (the deployment file's `ram_gib`, a pod's memory limit).
    pub ram_bytes: Option<u64>,
    /// 95 % of it (vLLM `check_hisparse_host_memory`; SGLang's per-rank budget is the launch's own check).
    pub usable_bytes: Option<u64>,
    /// GPUs its launches use, and the node's.
    pub gpus_used: i64,
    pub gpus: Option<u64>,
}

/// The deployment's plan.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeployPlan {
    pub instances: Vec<InstancePlan>,
    pub nodes: Vec<NodePlan>,
    /// (launch, why it has no plan).
    pub not_planned: Vec<(String, String)>,
}

/// The node a launch runs on: its declared node, else its own (a pod).
pub fn node_of(l: &Launch) -> String {
    l.node.clone().unwrap_or_else(|| l.name.clone())
}

/// What groups launches by node: a launch's own node (no `node` given) is
/// never a declared node of the same name (a launch `solo` beside a node
/// `solo` are two nodes: break-it trial).
pub fn node_key(l: &Launch) -> (bool, String) {
    (l.node.is_some(), node_of(l))
}

/// What a launch's HiSparse pools pin on its node (0 without HiSparse: an
/// assumed plan pins nothing).
pub fn pinned(c: &Checked, plan: &LaunchPlan) -> u64 {
    match plan {
        Ok(p) if c.facts.hisparse && p.assumed.is_none() => p.host.pinned_bytes_per_node,
        _ => 0,
    }
}

/// Whether a launch is an instance's first (its node rank / DP start rank 0).
fn leads(c: &Checked) -> bool {
    c.facts.node_rank == 0 && c.facts.dp_start_rank == 0
}

/// The deployment's plan from each launch's.
pub fn plan(launches: &[Checked], plans: &[LaunchPlan]) -> DeployPlan {
    let mut out = DeployPlan::default();
    // Nodes in the order their first launch is given.
    let mut index: BTreeMap<(bool, String), usize> = BTreeMap::new();
    let mut nodes: Vec<NodePlan> = Vec::new();
    for (c, p) in launches.iter().zip(plans) {
        let l = &c.launch;
        let at = *index.entry(node_key(l)).or_insert_with(|| {
            nodes.push(NodePlan {
                node: node_of(l),
                launches: Vec::new(),
                pinned_bytes: 0,
                ram_bytes: l.machine.memory_limit_bytes,
                usable_bytes: l
                    .machine
                    .memory_limit_bytes
                    .map(|b| b / 100 * 95 + b % 100 * 95 / 100),
                gpus_used: 0,
                gpus: l.machine.gpus_per_pod,
            });
            nodes.len() - 1
        });
        let node = &mut nodes[at];
        let bytes = pinned(c, p);
        node.launches.push((l.name.clone(), bytes));
        node.pinned_bytes = node.pinned_bytes.saturating_add(bytes);
        node.gpus_used = node.gpus_used.saturating_add(c.facts.gpus_used);
        let decodes = matches!(l.role, Role::Decode | Role::Both | Role::Standalone);
        match p {
            Ok(plan) if decodes && leads(c) => out.instances.push(InstancePlan {
                launch: l.name.clone(),
                engine: l.engine.as_str(),
                hisparse: c.facts.hisparse,
                context_length: plan.at_context.context_length,
                data_parallel_size: plan.gpu.data_parallel_size,
                requests_without_hisparse: plan.at_context.baseline_requests,
                requests_with_hisparse: plan.at_context.hisparse_requests,
                limit: plan.at_context.hisparse_limit,
                pinned_bytes: bytes,
            }),
            Ok(_) => {}
            Err(why) if decodes && leads(c) => out.not_planned.push((l.name.clone(), why.clone())),
            Err(_) => {}
        }
    }
    out.nodes = nodes;
    out
}

/// The plan in words (`deploy --plan`).
pub fn human(p: &DeployPlan) -> String {
    let mut out = String::from("\nPlan of the deployment\n");
    if !p.instances.is_empty() || !p.not_planned.is_empty() {
        out.push_str("\n  Decode instances (requests at once, per DP replica):\n");
    }
    for i in &p.instances {
        let d = dialect::of(i.engine);
        out.push_str(&format!(
            "    {} ({}, {} tokens, {} DP replica{}): without HiSparse {}, with HiSparse {}{}\n",
            i.launch,
            d.name,
            tokens(i.context_length),
            i.data_parallel_size,
            if i.data_parallel_size == 1 { "" } else { "s" },
            requests(d, i.requests_without_hisparse, None),
            requests(d, i.requests_with_hisparse, i.limit),
            if i.hisparse {
                String::new()
            } else {
                " (HiSparse is not configured: what it would give)".to_owned()
            }
        ));
    }
    for (l, why) in &p.not_planned {
        out.push_str(&format!("    {l}: not planned: {why}\n"));
    }
    if !p.nodes.is_empty() {
        out.push_str("\n  Nodes (pinned host RAM of all their launches):\n");
    }
    for node in &p.nodes {
        let ram = match (node.ram_bytes, node.usable_bytes) {
            (Some(r), Some(u)) => format!(" of {} usable (95 % of {})", gib_text(u), gib_text(r)),
            _ => " (RAM not given)".to_owned(),
        };
        let gpus = match node.gpus {
            Some(g) => format!(", GPUs {} of {g}", node.gpus_used),
            None => format!(", GPUs {}", node.gpus_used),
        };
        let parts: Vec<String> = node
            .launches
            .iter()
            .filter(|(_, b)| *b > 0)
            .map(|(l, b)| format!("{l} {}", gib_text(*b)))
            .collect();
        out.push_str(&format!(
            "    {}: pinned {}{ram}{gpus}{}\n",
            node.node,
            gib_text(node.pinned_bytes),
            if parts.is_empty() {
                String::new()
            } else {
                format!(" ({})", parts.join(", "))
            }
        ));
    }
    out
}
