//! The deployment check: every launch checked on its own (facts.rs), then
//! the rules between launches (rules_vllm.rs, rules_sglang.rs,
//! rules_nodes.rs), into one report.

use super::diag::{self, PairDiagnostic};
use super::facts::{self, Checked};
use super::model::{Deployment, NotRead, Role};
use super::plan::{self, DeployPlan, LaunchPlan};
use super::rules_declared;
use serde_json::{json, Value};

/// The whole deployment's verdict.
pub struct DeployReport {
    pub launches: Vec<Checked>,
    /// Launches that could not be checked: (launch, the usage error).
    pub launch_errors: Vec<(String, String)>,
    pub errors: Vec<PairDiagnostic>,
    pub not_read: Vec<NotRead>,
    /// The deployment's plan (plan.rs): per decode instance, per node.
    pub plan: DeployPlan,
}

impl DeployReport {
    /// Every launch valid, no launch unreadable, no rule between launches broken.
    pub fn valid(&self) -> bool {
        self.launch_errors.is_empty()
            && self.errors.is_empty()
            && self.launches.iter().all(|c| c.report.valid)
    }
}

/// Check each launch, then the rules between them.
pub fn check(dep: Deployment) -> DeployReport {
    let mut launches = Vec::new();
    let mut launch_errors = Vec::new();
    for l in dep.launches {
        match facts::check(&l) {
            Ok((report, facts)) => launches.push(Checked {
                launch: l,
                report,
                facts,
            }),
            Err(e) => launch_errors.push((l.name, e)),
        }
    }
    let mut errors = rules_declared::role_rules(&launches);
    // The P/D rules pair the launches by their declared roles where the
    // role fix makes the command so; the report keeps the commands' roles.
    let given: Vec<Role> = launches.iter().map(|c| c.launch.role).collect();
    for c in &mut launches {
        c.launch.role = rules_declared::paired_role(c);
    }
    errors.extend(super::rules_vllm::rules(&launches));
    errors.extend(super::rules_sglang::rules(&launches));
    for (c, r) in launches.iter_mut().zip(given) {
        c.launch.role = r;
    }
    errors.extend(super::rules_nodes::rules(&launches));
    // Each launch planned as `--plan` plans it: the per-node pinned RAM and
    // the deployment's plan read it.
    let plans: Vec<LaunchPlan> = launches
        .iter()
        .map(|c| {
            let decodes = !matches!(c.launch.role, Role::Prefill);
            if !c.report.valid {
                Err("the launch is not valid: its own errors above".to_owned())
            } else if c.facts.hisparse || decodes {
                plan::launch_plan(&c.launch)
            } else {
                // A prefill without HiSparse pins nothing and serves no decode.
                Err("a prefill launch without HiSparse: nothing to plan".to_owned())
            }
        })
        .collect();
    errors.extend(rules_declared::node_rules(&launches, &plans));
    let plan = plan::plan(&launches, &plans);
    DeployReport {
        launches,
        launch_errors,
        errors,
        not_read: dep.not_read,
        plan,
    }
}

fn launch_json(c: &Checked) -> Value {
    let l = &c.launch;
    let report: Value = serde_json::from_str(&c.report.to_json()).unwrap_or(Value::Null);
    json!({
        "name": l.name,
        "source": l.source,
        "engine": l.engine.as_str(),
        "role": l.role,
        "group": l.group,
        "replicas": l.replicas,
        "group_size": l.group_size,
        "machine": l.machine,
        "node": l.node,
        "declared_role": l.declared_role,
        "argv": l.argv_as_given,
        "model_read": l.model_mapped.iter().map(|(c, p)| json!({"container": c, "local": p})).collect::<Vec<_>>(),
        "report": report,
    })
}

/// The report as JSON (docs/deploy.md: its schema).
pub fn to_json(r: &DeployReport) -> String {
    let v = json!({
        "schema_version": 1,
        "kind": "deployment",
        "valid": r.valid(),
        "launches": r.launches.iter().map(launch_json).collect::<Vec<_>>(),
        "launch_errors": r.launch_errors.iter().map(|(l, e)| json!({"launch": l, "error": e})).collect::<Vec<_>>(),
        "errors": r.errors.iter().map(diag::to_json).collect::<Vec<_>>(),
        "not_read": r.not_read,
        "plan": r.plan,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

fn role_word(c: &Checked) -> String {
    let r = serde_json::to_value(c.launch.role)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let m = &c.launch.machine;
    let gpu = match (&m.gpu, m.gpus_per_pod) {
        (Some(g), Some(n)) => format!(", {n} x {g}"),
        (None, Some(n)) => format!(", {n} GPUs"),
        (Some(g), None) => format!(", {g}"),
        _ => String::new(),
    };
    let ram = m
        .memory_gib()
        .map(|g| format!(", {g:.0} GiB RAM"))
        .unwrap_or_default();
    format!(
        "{}, {r}{}{gpu}{ram}",
        c.launch.engine.as_str(),
        if c.facts.hisparse { ", HiSparse" } else { "" }
    )
}

/// The report in words, with the deployment's plan (`--plan`).
pub fn human_with_plan(r: &DeployReport) -> String {
    let text = human(r);
    format!("{text}\n{}", plan::human(&r.plan).trim_end())
}

/// The report in words.
pub fn human(r: &DeployReport) -> String {
    let mut out = String::new();
    let verdict = if r.valid() { "valid" } else { "INVALID" };
    out.push_str(&format!(
        "Deployment: {} launches, {verdict}\n",
        r.launches.len() + r.launch_errors.len()
    ));
    for c in &r.launches {
        let n = c.report.errors.len();
        let mut state = if c.report.valid {
            "valid".to_owned()
        } else {
            format!("{n} error(s)")
        };
        if !c.report.warnings.is_empty() {
            state.push_str(&format!(", {} warning(s)", c.report.warnings.len()));
        }
        out.push_str(&format!(
            "\n  {} ({}): {state}\n",
            c.launch.name,
            role_word(c)
        ));
        for (container, local) in &c.launch.model_mapped {
            out.push_str(&format!("    model {container} read from {local}\n"));
        }
        // Each in full, as the launch's own check prints it: a warning's
        // code alone says nothing a user can act on.
        let said = [("error", &c.report.errors), ("warning", &c.report.warnings)];
        for (kind, list) in said {
            for d in list {
                out.push_str(&format!(
                    "    {kind}[{}] {}: {}\n",
                    d.code.as_str(),
                    d.path,
                    d.message
                ));
                if let Some(h) = &d.hint {
                    out.push_str(&format!("      fix: {h}\n"));
                }
            }
        }
    }
    for (l, e) in &r.launch_errors {
        out.push_str(&format!("\n  {l}: not checked: {e}\n"));
    }
    if !r.errors.is_empty() {
        out.push_str(&format!(
            "\nBetween launches: {} error(s)\n",
            r.errors.len()
        ));
    }
    for p in &r.errors {
        let d = &p.diagnostic;
        let other = p
            .other
            .as_ref()
            .map(|(l, f)| format!(" vs {l} {f}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "\n  error[{}] at {}: {} {}{other}\n",
            d.code.as_str(),
            d.stage.as_str(),
            p.launch,
            d.path
        ));
        out.push_str(&format!("    {}\n", d.message));
        out.push_str(&format!("    engine: {}\n", p.engine_message));
        if !p.source.is_empty() {
            out.push_str(&format!("    source: {}\n", p.source));
        }
        if let Some(h) = &d.hint {
            out.push_str(&format!("    fix: {h}\n"));
        }
    }
    if !r.not_read.is_empty() {
        out.push_str("\nNot read:\n");
        for n in &r.not_read {
            out.push_str(&format!("  {}: {}\n", n.at, n.why));
        }
    }
    out.trim_end().to_owned()
}
