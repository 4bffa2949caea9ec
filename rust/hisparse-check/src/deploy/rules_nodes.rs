//! Multi-node instances and each pod's GPUs: the launches of one instance
//! (the pods of a LeaderWorkerSet group, or launches sharing a
//! `--data-parallel-address` / `--dist-init-addr` over `--nnodes` > 1) must
//! agree on every size and address, their node ranks (or vLLM's DP start
//! ranks) must cover the instance exactly once, and each pod's launch must
//! use no more GPUs than the pod asks for (`resources.limits["nvidia.com/gpu"]`).
//! The pinned host pools of each pod are the per-launch check's, with the
//! pod's memory limit as the node's RAM.

use super::diag::{Edit, Pair, PairDiagnostic};
use super::facts::Checked;
use super::model::EngineKind;
use hisparse_core::diagnostic::Stage;
use hisparse_core::stage::{SglangStage, VllmStage};
use hisparse_core::Code;
use serde_json::json;
use std::collections::BTreeMap;

fn start_stage(e: EngineKind) -> Stage {
    match e {
        EngineKind::Vllm => VllmStage::EngineStart.into(),
        // Before the weights load: torch.distributed's init waits for every node.
        EngineKind::Sglang => SglangStage::Check.into(),
    }
}

/// Every rule on instances and pods.
pub fn rules(all: &[Checked]) -> Vec<PairDiagnostic> {
    let mut out = Vec::new();
    let mut groups: BTreeMap<String, Vec<&Checked>> = BTreeMap::new();
    for c in all {
        let key = if c.launch.group_size > 1 {
            Some(c.launch.group.clone())
        } else if c.facts.nnodes > 1
            || c.facts.dp > c.facts.dp_local.max(1) && c.launch.engine == EngineKind::Vllm
        {
            c.facts
                .address
                .clone()
                .map(|a| format!("{}@{a}", c.launch.engine.as_str()))
        } else {
            None
        };
        if let Some(k) = key {
            groups.entry(k).or_default().push(c);
        }
        gpus(c, &mut out);
    }
    for members in groups.values() {
        sizes(members, &mut out);
        ranks(members, &mut out);
    }
    out
}

fn gpus(c: &Checked, out: &mut Vec<PairDiagnostic>) {
    let Some(limit) = c.launch.machine.gpus_per_pod else {
        return;
    };
    let used = c.facts.gpus_used;
    if used <= limit as i64 {
        return;
    }
    let mut d = Pair {
        code: Code::NodeGpusExceeded,
        stage: start_stage(c.launch.engine),
        launch: &c.launch.name,
        field: "tensor_parallel_size",
        given: json!(used),
        other: None,
        message: format!("the launch uses {used} GPUs on its node (TP x local DP) but its pod asks for {limit} (resources.limits[\"nvidia.com/gpu\"]): the engine sees only {limit}"),
        engine_message: "the engine finds fewer GPUs than its parallel layout needs (CUDA device count) and stops",
    }
    .build(vec![], None);
    d.manifest_fix = Some(format!(
        "set {}'s resources.limits[\"nvidia.com/gpu\"] to {used}",
        c.launch.name
    ));
    d.diagnostic.hint = d.manifest_fix.clone();
    out.push(d);
}

/// The sizes every launch of one instance gives: (field, flag, value).
fn sized(c: &Checked) -> Vec<(&'static str, &'static str, String)> {
    let f = &c.facts;
    let addr = f.address.clone().unwrap_or_default();
    match c.launch.engine {
        EngineKind::Vllm => vec![
            (
                "tensor_parallel_size",
                "--tensor-parallel-size",
                f.tp.to_string(),
            ),
            (
                "data_parallel_size",
                "--data-parallel-size",
                f.dp.to_string(),
            ),
            ("nnodes", "--nnodes", f.nnodes.to_string()),
            ("data_parallel_address", "--data-parallel-address", addr),
        ],
        EngineKind::Sglang => vec![
            ("tp_size", "--tp-size", f.tp.to_string()),
            ("dp_size", "--dp-size", f.dp.to_string()),
            ("nnodes", "--nnodes", f.nnodes.to_string()),
            ("dist_init_addr", "--dist-init-addr", addr),
        ],
    }
}

fn sizes(members: &[&Checked], out: &mut Vec<PairDiagnostic>) {
    let lead = members[0];
    let want = sized(lead);
    for c in &members[1..] {
        for ((field, flag, mine), (_, _, theirs)) in sized(c).into_iter().zip(&want) {
            if mine == *theirs {
                continue;
            }
            out.push(
                Pair {
                    code: Code::MultinodeSizesMismatch,
                    stage: start_stage(c.launch.engine),
                    launch: &c.launch.name,
                    field,
                    given: json!(mine),
                    other: Some((&lead.launch.name, field, json!(theirs))),
                    message: format!("{flag} is {mine:?} here and {theirs:?} on {}, a launch of the same instance: its nodes do not agree on the instance's shape", lead.launch.name),
                    engine_message: "the nodes wait for each other at the distributed start-up (a hang until the timeout) or the DP coordinator refuses the engine",
                }
                .build(vec![Edit::Set { flag: flag.into(), value: theirs.clone() }], Some(json!(theirs))),
            );
        }
    }
}

/// Node ranks 0..nnodes (or DP start ranks over -dpl) each exactly once.
fn ranks(members: &[&Checked], out: &mut Vec<PairDiagnostic>) {
    let lead = &members[0].facts;
    let vllm_dp = members[0].launch.engine == EngineKind::Vllm && lead.nnodes <= 1;
    let (n, step) = if vllm_dp {
        (lead.dp, lead.dp_local.max(1))
    } else {
        (lead.nnodes.max(1), 1)
    };
    let rank = |c: &Checked| {
        if vllm_dp {
            c.facts.dp_start_rank
        } else {
            c.facts.node_rank
        }
    };
    let mut seen: BTreeMap<i64, &str> = BTreeMap::new();
    let mut bad = Vec::new();
    for c in members {
        let r = rank(c);
        if r < 0 || r >= n || r % step != 0 || seen.insert(r, &c.launch.name).is_some() {
            bad.push(*c);
        }
    }
    let mut missing = (0..n)
        .step_by(step as usize)
        .filter(|r| !seen.contains_key(r));
    let (field, flag) = match (members[0].launch.engine, vllm_dp) {
        (EngineKind::Vllm, true) => ("data_parallel_start_rank", "--data-parallel-start-rank"),
        (EngineKind::Vllm, false) => ("node_rank", "--node-rank"),
        (EngineKind::Sglang, _) => ("node_rank", "--node-rank"),
    };
    let pods = (members.len() as i64).saturating_mul(step);
    if bad.is_empty() && pods == n {
        return;
    }
    for c in &bad {
        let free = missing.next();
        let edits = free
            .map(|m| {
                vec![Edit::Set {
                    flag: flag.into(),
                    value: m.to_string(),
                }]
            })
            .unwrap_or_default();
        let mut d = Pair {
            code: Code::MultinodeRanksInvalid,
            stage: start_stage(c.launch.engine),
            launch: &c.launch.name,
            field,
            given: json!(rank(c)),
            other: None,
            message: format!("{flag} {} repeats or falls outside the instance's 0..{n} (step {step}): each node of the instance must take its own rank once", rank(c)),
            engine_message: "two nodes claim one rank (or one is never taken): the distributed start-up hangs until its timeout",
        }
        .build(edits, free.map(|m| json!(m)));
        if c.launch.group_size > 1 {
            d.diagnostic.hint = Some(format!("{}; in a LeaderWorkerSet, give {flag} $(LWS_WORKER_INDEX) so each pod takes its own", d.diagnostic.hint.clone().unwrap_or_default()));
        }
        out.push(d);
    }
    if bad.is_empty() && pods != n {
        let c = members[0];
        out.push(
            Pair {
                code: Code::MultinodeRanksInvalid,
                stage: start_stage(c.launch.engine),
                launch: &c.launch.name,
                field,
                given: json!(members.len()),
                other: None,
                message: format!("the instance has {} launches (pods) for {n} ranks (step {step}): a rank is never taken", members.len()),
                engine_message: "the distributed start-up waits for a node that never comes",
            }
            .build(vec![], None),
        );
    }
}
