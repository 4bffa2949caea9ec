//! The rules on what the deployment file and `--launch` declare: a
//! launch's declared role against the role its command gives
//! (`launch_role_mismatch`), and per node shared by several launches the
//! GPUs they use within the node's (`node_gpus_exceeded`) and the pinned
//! HiSparse pools of all of them within 95 % of its RAM
//! (`node_host_memory_exceeded`: each engine checks its own pool against
//! the RAM still available when it pins, so the launch that pins last fails:
//! vLLM `v1/hisparse/runtime.py:195-203` check_hisparse_host_memory, SGLang
//! `mem_cache/pool_host/base.py:84-107, :244-257`). A launch alone on its
//! node is its own check's (`host_memory_exceeded`, rules_nodes.rs' GPUs).

use super::diag::{Edit, Pair, PairDiagnostic};
use super::facts::Checked;
use super::model::{EngineKind, Role};
use super::plan::{node_key, LaunchPlan};
use super::role::{flag_value, transfer_connector};
use hisparse_core::diagnostic::Stage;
use hisparse_core::plan::gib_text;
use hisparse_core::stage::{SglangStage, VllmStage};
use hisparse_core::Code;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn role_word(r: Role) -> &'static str {
    match r {
        Role::Prefill => "prefill",
        Role::Decode => "decode",
        Role::Both => "both",
        Role::Standalone => "standalone",
    }
}

/// The declared roles that differ from their commands' (`launch_role_mismatch`).
pub fn role_rules(all: &[Checked]) -> Vec<PairDiagnostic> {
    let mut out = Vec::new();
    for c in all {
        role(c, &mut out);
    }
    out
}

/// The role the P/D rules pair a launch by: the declared one where the
/// `launch_role_mismatch` fix gives it to the command (that fix applied
/// first, so every other mismatch is reported at once), else its command's.
pub fn paired_role(c: &Checked) -> Role {
    match c.launch.declared_role {
        Some(want) if want != c.launch.role && role_edit(c, want).is_some() => want,
        _ => c.launch.role,
    }
}

/// The rules on nodes shared by several launches.
pub fn node_rules(all: &[Checked], plans: &[LaunchPlan]) -> Vec<PairDiagnostic> {
    let mut out = Vec::new();
    let mut nodes: BTreeMap<(bool, String), Vec<usize>> = BTreeMap::new();
    for (i, c) in all.iter().enumerate() {
        nodes.entry(node_key(&c.launch)).or_default().push(i);
    }
    for ((_, node), members) in &nodes {
        if members.len() < 2 {
            continue;
        }
        gpus(node, members, all, &mut out);
        ram(node, members, all, plans, &mut out);
    }
    out
}

/// The command's edit that gives `want` (None: no edit makes it).
fn role_edit(c: &Checked, want: Role) -> Option<Edit> {
    match c.launch.engine {
        EngineKind::Sglang => {
            let mode = match want {
                Role::Prefill => "prefill",
                Role::Decode => "decode",
                Role::Standalone => "null",
                Role::Both => return None,
            };
            Some(Edit::Set {
                flag: "--disaggregation-mode".into(),
                value: mode.into(),
            })
        }
        EngineKind::Vllm => {
            let kv_role = match want {
                Role::Prefill => "kv_producer",
                Role::Decode => "kv_consumer",
                Role::Both => "kv_both",
                Role::Standalone => return None,
            };
            let ktc = match c.facts.kv_transfer_config.clone() {
                Some(ktc) if transfer_connector(&ktc).is_some() => set_transfer_role(ktc, kv_role),
                // No transfer connector: a NIXL one with that role.
                None => json!({"kv_connector": "NixlConnector", "kv_role": kv_role}),
                Some(_) => return None,
            };
            Some(Edit::Set {
                flag: "--kv-transfer-config".into(),
                value: ktc.to_string(),
            })
        }
    }
}

/// The transfer connector's `kv_role` (a MultiConnector's own and its
/// transfer child's; HiSparseConnector keeps kv_both).
fn set_transfer_role(mut ktc: Value, role: &str) -> Value {
    ktc["kv_role"] = json!(role);
    if let Some(children) = ktc
        .pointer_mut("/kv_connector_extra_config/connectors")
        .and_then(Value::as_array_mut)
    {
        for child in children {
            if child.get("kv_connector").and_then(Value::as_str) != Some("HiSparseConnector") {
                child["kv_role"] = json!(role);
            }
        }
    }
    ktc
}

fn role(c: &Checked, out: &mut Vec<PairDiagnostic>) {
    let Some(want) = c.launch.declared_role else {
        return;
    };
    let got = c.launch.role;
    if want == got {
        return;
    }
    let (stage, field, how): (Stage, String, &str) = match c.launch.engine {
        EngineKind::Vllm => (
            VllmStage::Handshake.into(),
            c.facts
                .kv_role
                .as_ref()
                .map_or_else(|| "kv_transfer_config.kv_role".to_owned(), |(_, p)| p.clone()),
            "vLLM's role is its transfer connector's kv_role (kv_producer prefill, kv_consumer decode, kv_both both; none: standalone)",
        ),
        EngineKind::Sglang => (
            SglangStage::FirstRequest.into(),
            "disaggregation_mode".to_owned(),
            "SGLang's role is its --disaggregation-mode (prefill, decode; null: standalone)",
        ),
    };
    let edit = role_edit(c, want);
    let message = format!(
        "the launch is declared {} but its command makes it {}: {how}; the other launches are paired with it as its command says",
        role_word(want),
        role_word(got)
    );
    let mut d = Pair {
        code: Code::LaunchRoleMismatch,
        stage,
        launch: &c.launch.name,
        field: &field,
        given: json!(role_word(got)),
        other: None,
        message,
        engine_message: "the engine takes the role its flags give: the P/D pair the deployment declares is not the one that runs",
    }
    .build(edit.clone().into_iter().collect(), Some(json!(role_word(want))));
    if edit.is_none() {
        d.diagnostic.hint = Some(format!(
            "on {}: give the command the {} role, or declare role: {}",
            c.launch.name,
            role_word(want),
            role_word(got)
        ));
    }
    out.push(d);
}

fn start_stage(e: EngineKind) -> Stage {
    match e {
        EngineKind::Vllm => VllmStage::EngineStart.into(),
        EngineKind::Sglang => SglangStage::Check.into(),
    }
}

/// The GPUs of all launches on one node within the node's.
fn gpus(node: &str, members: &[usize], all: &[Checked], out: &mut Vec<PairDiagnostic>) {
    let Some(have) = all[members[0]].launch.machine.gpus_per_pod else {
        return;
    };
    let used: i64 = members.iter().map(|&i| all[i].facts.gpus_used.max(0)).sum();
    if used <= have as i64 {
        return;
    }
    let each: Vec<String> = members
        .iter()
        .map(|&i| format!("{} {}", all[i].launch.name, all[i].facts.gpus_used))
        .collect();
    // The last launch is the one that finds no GPU free; the fix moves it.
    let last = &all[*members.last().unwrap_or(&0)];
    let first = &all[members[0]];
    let mut d = Pair {
        code: Code::NodeGpusExceeded,
        stage: start_stage(last.launch.engine),
        launch: &last.launch.name,
        field: "node",
        given: json!(used),
        other: Some((&first.launch.name, "node", json!(node))),
        message: format!(
            "node {node} has {have} GPUs and its launches use {used} ({}): they cannot all run there",
            each.join(", ")
        ),
        engine_message: "the launch that starts last finds its GPUs taken (CUDA out of memory, or NCCL on a busy device) and stops",
    }
    .build(vec![], None);
    let fix = format!(
        "run {} on another node (node: a node with {} free GPUs), or give node {node} {used} GPUs (gpus_per_node: {used})",
        last.launch.name, last.facts.gpus_used
    );
    d.manifest_fix = Some(fix.clone());
    d.diagnostic.hint = Some(fix);
    out.push(d);
}

/// Whether `c` with `edit` applied pins at most `target` bytes (planned again).
fn fits(c: &Checked, edit: &Edit, target: u64) -> bool {
    let mut l = c.launch.clone();
    l.args = super::diag::apply(&l.args, std::slice::from_ref(edit));
    matches!(super::plan::launch_plan(&l), Ok(p) if p.host.pinned_bytes_per_node <= target && p.valid)
}

/// A smaller pool for `c` that pins at most `target` bytes and still
/// starts: vLLM's host_pool_gib lowered by `target / pinned` (planned again
/// to confirm), SGLang's host_to_device_ratio the largest below its own that
/// fits (its pool is sized from the device slots the ratio leaves, so it is
/// not linear in the ratio: each ratio tried is planned).
fn smaller_pool(
    c: &Checked,
    plan: &hisparse_core::plan::Plan,
    target: u64,
) -> Option<(String, Edit)> {
    let pinned = plan.host.pinned_bytes_per_node.max(1);
    match c.launch.engine {
        EngineKind::Vllm => {
            let scale = target as f64 / pinned as f64;
            let gib = ((plan.host.host_pool_gib * scale) * 100.0).floor() / 100.0;
            if gib < plan.host.min_host_pool_gib || gib <= 0.0 {
                return None;
            }
            let ktc = c.facts.kv_transfer_config.clone()?;
            let edit = Edit::Set {
                flag: "--kv-transfer-config".into(),
                value: set_pool(ktc, gib)?.to_string(),
            };
            fits(c, &edit, target).then(|| (format!("host_pool_gib {gib}"), edit))
        }
        EngineKind::Sglang => {
            let r = plan.sglang.as_ref()?.host_to_device_ratio;
            let cfg: Value = flag_value(&c.launch.args, "--hisparse-config")
                .and_then(|t| serde_json::from_str(t).ok())
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}));
            let edit = |ratio: u64| {
                let mut cfg = cfg.clone();
                cfg["host_to_device_ratio"] = json!(ratio);
                Edit::Set {
                    flag: "--hisparse-config".into(),
                    value: cfg.to_string(),
                }
            };
            // The pool grows with the ratio (N_dev x R tokens, N_dev falling
            // slower than R rises): the largest ratio below r that fits, by
            // bisection (log2 r plans, whatever ratio was given).
            let (mut lo, mut hi) = (0u64, r);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if fits(c, &edit(mid), target) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            (lo >= 1).then(|| (format!("host_to_device_ratio {lo}"), edit(lo)))
        }
    }
}

/// The path of the HiSparseConnector's `host_pool_gib` in `--kv-transfer-config`.
fn pool_path(ktc: Option<&Value>) -> String {
    let is_hs =
        |v: &Value| v.get("kv_connector").and_then(Value::as_str) == Some("HiSparseConnector");
    let child = ktc
        .and_then(|k| k.pointer("/kv_connector_extra_config/connectors"))
        .and_then(Value::as_array)
        .and_then(|c| c.iter().position(is_hs));
    match child {
        Some(i) => format!("kv_transfer_config.kv_connector_extra_config.connectors[{i}].kv_connector_extra_config.host_pool_gib"),
        None => "kv_transfer_config.kv_connector_extra_config.host_pool_gib".to_owned(),
    }
}

/// `host_pool_gib` of the HiSparseConnector (top level or a MultiConnector child) set to `gib`.
fn set_pool(mut ktc: Value, gib: f64) -> Option<Value> {
    let is_hs =
        |v: &Value| v.get("kv_connector").and_then(Value::as_str) == Some("HiSparseConnector");
    if is_hs(&ktc) {
        ktc.pointer_mut("/kv_connector_extra_config")?
            .as_object_mut()?
            .insert("host_pool_gib".into(), json!(gib));
        return Some(ktc);
    }
    let children = ktc
        .pointer_mut("/kv_connector_extra_config/connectors")?
        .as_array_mut()?;
    let hs = children.iter_mut().find(|c| is_hs(c))?;
    hs.pointer_mut("/kv_connector_extra_config")?
        .as_object_mut()?
        .insert("host_pool_gib".into(), json!(gib));
    Some(ktc)
}

/// The pinned pools of all launches on one node within 95 % of its RAM.
fn ram(
    node: &str,
    members: &[usize],
    all: &[Checked],
    plans: &[LaunchPlan],
    out: &mut Vec<PairDiagnostic>,
) {
    let Some(ram) = all[members[0]].launch.machine.memory_limit_bytes else {
        return;
    };
    let usable = ram / 100 * 95 + ram % 100 * 95 / 100;
    let pinned: Vec<(usize, u64)> = members
        .iter()
        .map(|&i| (i, super::plan::pinned(&all[i], &plans[i])))
        .filter(|(_, b)| *b > 0)
        .collect();
    let total: u64 = pinned.iter().map(|(_, b)| *b).fold(0, u64::saturating_add);
    if total <= usable || pinned.len() < 2 {
        return;
    }
    let each: Vec<String> = pinned
        .iter()
        .map(|&(i, b)| format!("{} {}", all[i].launch.name, gib_text(b)))
        .collect();
    // Each pool lowered to its share of the usable RAM (in proportion to what it pins).
    let fixes: Vec<Option<(String, Edit)>> = pinned
        .iter()
        .map(|&(i, b)| {
            let target = (usable as u128 * b as u128 / total.max(1) as u128) as u64;
            plans[i]
                .as_ref()
                .ok()
                .and_then(|p| smaller_pool(&all[i], p, target))
        })
        .collect();
    let all_fixed = fixes.iter().all(Option::is_some);
    for (k, &(i, bytes)) in pinned.iter().enumerate() {
        let c = &all[i];
        let other = &all[pinned[(k + 1) % pinned.len()].0];
        let (field, stage): (String, Stage) = match c.launch.engine {
            EngineKind::Vllm => (
                pool_path(c.facts.kv_transfer_config.as_ref()),
                VllmStage::Workers.into(),
            ),
            EngineKind::Sglang => (
                "hisparse_config.host_to_device_ratio".to_owned(),
                SglangStage::CoordinatorInit.into(),
            ),
        };
        let field = field.as_str();
        let other_field = match other.launch.engine {
            EngineKind::Vllm => pool_path(other.facts.kv_transfer_config.as_ref()),
            EngineKind::Sglang => "hisparse_config.host_to_device_ratio".to_owned(),
        };
        let (edits, words) = match (&fixes[k], all_fixed) {
            (Some((w, e)), true) => (vec![e.clone()], Some(w.clone())),
            _ => (vec![], None),
        };
        let mut d = Pair {
            code: Code::NodeHostMemoryExceeded,
            stage,
            launch: &c.launch.name,
            field,
            given: json!(bytes),
            other: Some((&other.launch.name, &other_field, json!(super::plan::pinned(other, &plans[pinned[(k + 1) % pinned.len()].0])))),
            message: format!(
                "node {node}'s launches pin {} of HiSparse host pools ({}), more than the {} usable (95 % of {} RAM): each alone fits, together they do not",
                gib_text(total),
                each.join(", "),
                gib_text(usable),
                gib_text(ram)
            ),
            engine_message: "the launch that pins its pool last finds too little RAM available: vLLM \"HiSparse pinned host pool needs ~N GiB but only M GiB of RAM is available\", SGLang \"Not enough host memory available\"",
        }
        .build(edits, None);
        if let Some(w) = words {
            d.diagnostic.hint = Some(format!(
                "{} (every pool on node {node} lowered by the same share, to fit together)",
                d.diagnostic
                    .hint
                    .clone()
                    .unwrap_or_else(|| format!("on {}: {w}", c.launch.name))
            ));
        } else {
            let fix = format!(
                "run {} on another node: the pools on node {node} cannot shrink to fit together and still start",
                c.launch.name
            );
            d.manifest_fix = Some(fix.clone());
            d.diagnostic.hint = Some(fix);
        }
        out.push(d);
    }
}
