//! The deployment file of our own (`kind: HisparseDeployment`, YAML or
//! JSON, read by the same bounded reader as a Kubernetes manifest) and the
//! repeated `--launch` of the command line: launches as command lines, each
//! with its name, role, node and machine (docs/deploy.md: the schema).
//!
//! Every field is validated before a launch is made; each bad field is its
//! own error with a code (`unknown_key`, `invalid_type`, `invalid_value`),
//! its path (`launches[1].machine.ram_gib`), what was given, what is allowed
//! and a fix, all reported at once.

use super::model::{Deployment, Launch, Machine, Role, MAX_LAUNCHES};
use super::words::{self, ModelDirs};
use hisparse_core::{Code, FieldPath};
use serde_json::Value;
use std::collections::BTreeMap;

/// The `kind` that marks a document as a deployment file.
pub const KIND: &str = "HisparseDeployment";
/// Most GPUs one node may declare (its own error beyond).
pub const MAX_GPUS_PER_NODE: u64 = 1024;
/// Most RAM one node may declare, GiB (64 TiB).
pub const MAX_RAM_GIB: f64 = 65536.0;

const TOP_KEYS: &[&str] = &["kind", "apiVersion", "nodes", "launches"];
const LAUNCH_KEYS: &[&str] = &["name", "command", "node", "machine", "role", "env"];
const MACHINE_KEYS: &[&str] = &["gpu", "gpus_per_node", "ram_gib"];
const ROLES: &[&str] = &["prefill", "decode", "both", "standalone"];

/// One bad field of a deployment file (or of `--launch`).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub code: Code,
    pub path: FieldPath,
    pub message: String,
    pub fix: String,
}

impl FieldError {
    fn new(code: Code, path: &FieldPath, message: String, fix: impl Into<String>) -> Self {
        FieldError {
            code,
            path: path.clone(),
            message,
            fix: fix.into(),
        }
    }
}

/// The errors as the usage message (one line each, `at` naming the file).
pub fn message(at: &str, errors: &[FieldError]) -> String {
    let lines: Vec<String> = errors
        .iter()
        .map(|e| {
            format!(
                "{at}: error[{}] at {}: {}; fix: {}",
                e.code.as_str(),
                e.path,
                e.message,
                e.fix
            )
        })
        .collect();
    lines.join("\n")
}

/// A role word (`prefill`, `decode`, `both`, `standalone`).
pub fn parse_role(word: &str) -> Option<Role> {
    match word {
        "prefill" => Some(Role::Prefill),
        "decode" => Some(Role::Decode),
        "both" => Some(Role::Both),
        "standalone" => Some(Role::Standalone),
        _ => None,
    }
}

/// One launch as declared, before it is made.
#[derive(Clone, Debug, Default)]
pub struct Spec {
    pub name: String,
    /// The command's words (a string is `sh -c STRING`).
    pub argv: Vec<String>,
    pub node: Option<String>,
    pub machine: Option<Machine>,
    pub role: Option<Role>,
    pub env: BTreeMap<String, String>,
    /// Where it was declared (`file#1.launches[0]`, `--launch 2`).
    pub source: String,
    pub path: FieldPath,
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn unknown(
    obj: &serde_json::Map<String, Value>,
    allowed: &[&str],
    at: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    for k in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
        errs.push(FieldError::new(
            Code::UnknownKey,
            &at.key(k),
            format!("unknown field {k:?} (allowed here: {})", allowed.join(", ")),
            format!("remove {k:?} or spell it as one of {}", allowed.join(", ")),
        ));
    }
}

fn wrong_type(path: &FieldPath, v: &Value, want: &str, errs: &mut Vec<FieldError>) {
    errs.push(FieldError::new(
        Code::InvalidType,
        path,
        format!("{} given ({v}), {want} expected", kind_of(v)),
        format!("give {want}"),
    ));
}

/// A machine mapping (`gpu`, `gpus_per_node`, `ram_gib`), validated.
pub fn machine(v: &Value, at: &FieldPath, errs: &mut Vec<FieldError>) -> Option<Machine> {
    let Some(obj) = v.as_object() else {
        wrong_type(at, v, "a mapping of gpu, gpus_per_node, ram_gib", errs);
        return None;
    };
    let before = errs.len();
    unknown(obj, MACHINE_KEYS, at, errs);
    let mut m = Machine::default();
    if let Some(g) = obj.get("gpu") {
        let p = at.key("gpu");
        match g.as_str() {
            Some(name) => match words::gpu_name(name) {
                Some(n) => m.gpu = Some(n),
                None => errs.push(FieldError::new(
                    Code::InvalidValue,
                    &p,
                    format!("GPU {name:?} is not in the --gpu table (docs/cli.md)"),
                    "give a --gpu name (h200, h100, b200, mi300x, ...) or the nvidia.com/gpu.product label",
                )),
            },
            None => wrong_type(&p, g, "a GPU name (h200)", errs),
        }
    }
    if let Some(n) = obj.get("gpus_per_node") {
        let p = at.key("gpus_per_node");
        match n.as_u64() {
            Some(k) if (1..=MAX_GPUS_PER_NODE).contains(&k) => m.gpus_per_pod = Some(k),
            Some(k) => errs.push(FieldError::new(
                Code::InvalidValue,
                &p,
                format!("gpus_per_node {k} is outside 1..={MAX_GPUS_PER_NODE}"),
                "give the node's GPU count (8 on an 8x H200 node)",
            )),
            None => wrong_type(&p, n, "a positive integer", errs),
        }
    }
    if let Some(r) = obj.get("ram_gib") {
        let p = at.key("ram_gib");
        match r.as_f64().filter(|_| r.is_number()) {
            Some(g) if g > 0.0 && g.is_finite() && g <= MAX_RAM_GIB => {
                m.memory_limit_bytes = Some((g * (1u64 << 30) as f64).round() as u64);
            }
            Some(g) => errs.push(FieldError::new(
                Code::InvalidValue,
                &p,
                format!("ram_gib {g} is outside (0, {MAX_RAM_GIB}]"),
                "give the node's host RAM in GiB (2048 for 2 TiB)",
            )),
            None => wrong_type(&p, r, "a number of GiB", errs),
        }
    }
    (errs.len() == before).then_some(m)
}

fn string_map(v: &Value, at: &FieldPath, errs: &mut Vec<FieldError>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(obj) = v.as_object() else {
        wrong_type(at, v, "a mapping of NAME: value", errs);
        return out;
    };
    for (k, val) in obj {
        let text = match val {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => {
                wrong_type(&at.key(k), other, "a string", errs);
                continue;
            }
        };
        out.insert(k.clone(), text);
    }
    out
}

fn command(v: &Value, at: &FieldPath, errs: &mut Vec<FieldError>) -> Vec<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => {
            vec!["sh".to_owned(), "-c".to_owned(), s.clone()]
        }
        Value::Array(items) if !items.is_empty() => {
            let before = errs.len();
            let mut words = Vec::new();
            for (i, w) in items.iter().enumerate() {
                match w.as_str() {
                    Some(s) => words.push(s.to_owned()),
                    None => wrong_type(&at.index(i), w, "a string", errs),
                }
            }
            // A command with a bad word is not read further (no second error for it).
            if errs.len() > before {
                words.clear();
            }
            words
        }
        Value::String(_) | Value::Array(_) => {
            errs.push(FieldError::new(
                Code::InvalidValue,
                at,
                "the command is empty".to_owned(),
                "give the launch's command line (vllm serve MODEL ... or sglang serve MODEL ...)",
            ));
            Vec::new()
        }
        other => {
            wrong_type(
                at,
                other,
                "a command line (a string) or its words (a list)",
                errs,
            );
            Vec::new()
        }
    }
}

fn role_field(v: &Value, at: &FieldPath, errs: &mut Vec<FieldError>) -> Option<Role> {
    let r = v.as_str().and_then(parse_role);
    if r.is_none() {
        errs.push(FieldError::new(
            Code::InvalidValue,
            at,
            format!("role {v} is not one of {}", ROLES.join(", ")),
            format!("give one of {}", ROLES.join(", ")),
        ));
    }
    r
}

/// A `kind: HisparseDeployment` document -> its launches in `out`.
/// Err: every bad field (the usage message).
pub fn read_document(
    v: &Value,
    at: &str,
    dirs: &ModelDirs,
    out: &mut Deployment,
) -> Result<(), String> {
    let mut errs = Vec::new();
    let root = FieldPath::root("launches");
    let Some(obj) = v.as_object() else {
        return Err(format!("{at}: a {KIND} document is a mapping"));
    };
    unknown(obj, TOP_KEYS, &FieldPath::default(), &mut errs);
    let mut nodes: BTreeMap<String, Machine> = BTreeMap::new();
    match obj.get("nodes") {
        None => {}
        Some(Value::Object(m)) => {
            for (name, mv) in m {
                // A node whose machine is bad is still declared: its launches
                // are not reported again for naming it.
                let m = machine(mv, &FieldPath::root("nodes").key(name), &mut errs);
                nodes.insert(name.clone(), m.unwrap_or_default());
            }
        }
        Some(other) => wrong_type(
            &FieldPath::root("nodes"),
            other,
            "a mapping of node name: machine",
            &mut errs,
        ),
    }
    let mut specs = Vec::new();
    match obj.get("launches") {
        Some(Value::Array(items)) if !items.is_empty() => {
            if items.len() > MAX_LAUNCHES {
                return Err(format!("{at}: launches: {} launches, over the bound of {MAX_LAUNCHES} (the bound on launches)", items.len()));
            }
            for (i, item) in items.iter().enumerate() {
                let p = root.index(i);
                let Some(l) = item.as_object() else {
                    wrong_type(
                        &p,
                        item,
                        "a mapping (name, command, node, machine, role, env)",
                        &mut errs,
                    );
                    continue;
                };
                unknown(l, LAUNCH_KEYS, &p, &mut errs);
                let mut spec = Spec {
                    source: format!("{at}.launches[{i}]"),
                    path: p.clone(),
                    ..Spec::default()
                };
                match l.get("name") {
                    Some(Value::String(n)) if !n.is_empty() => spec.name = n.clone(),
                    Some(other) => {
                        wrong_type(&p.key("name"), other, "a non-empty string", &mut errs)
                    }
                    None => errs.push(FieldError::new(
                        Code::InvalidValue,
                        &p.key("name"),
                        "the launch has no name".to_owned(),
                        format!("add name: launch-{}", i + 1),
                    )),
                }
                match l.get("command") {
                    Some(c) => spec.argv = command(c, &p.key("command"), &mut errs),
                    None => errs.push(FieldError::new(
                        Code::InvalidValue,
                        &p.key("command"),
                        "the launch has no command".to_owned(),
                        "add command: vllm serve MODEL ... (or sglang serve MODEL ...)",
                    )),
                }
                if let Some(e) = l.get("env") {
                    spec.env = string_map(e, &p.key("env"), &mut errs);
                }
                if let Some(r) = l.get("role") {
                    spec.role = role_field(r, &p.key("role"), &mut errs);
                }
                match l.get("node") {
                    None => {}
                    Some(Value::String(n)) => spec.node = Some(n.clone()),
                    Some(other) => wrong_type(&p.key("node"), other, "a node name", &mut errs),
                }
                if let Some(m) = l.get("machine") {
                    spec.machine = machine(m, &p.key("machine"), &mut errs);
                }
                specs.push(spec);
            }
        }
        Some(Value::Array(_)) | None => errs.push(FieldError::new(
            Code::InvalidValue,
            &root,
            "the deployment has no launches".to_owned(),
            "add launches: a list of {name, command, node} mappings",
        )),
        Some(other) => wrong_type(&root, other, "a list of launches", &mut errs),
    }
    let made = make(specs, &nodes, dirs, out, &mut errs);
    if errs.is_empty() {
        made
    } else {
        Err(message(at, &errs))
    }
}

/// The launches of `specs` (nodes from `nodes`) into `out`; bad references
/// and commands that run no engine into `errs`.
pub fn make(
    specs: Vec<Spec>,
    nodes: &BTreeMap<String, Machine>,
    dirs: &ModelDirs,
    out: &mut Deployment,
    errs: &mut Vec<FieldError>,
) -> Result<(), String> {
    let mut seen: BTreeMap<String, FieldPath> = BTreeMap::new();
    for spec in specs {
        if let Some(first) = seen.get(&spec.name) {
            errs.push(FieldError::new(
                Code::InvalidValue,
                &spec.path.key("name"),
                format!("the name {:?} is already the name of {first}", spec.name),
                format!("give each launch its own name ({}-2)", spec.name),
            ));
        } else if !spec.name.is_empty() {
            seen.insert(spec.name.clone(), spec.path.clone());
        }
        let machine = match (&spec.node, &spec.machine) {
            (Some(n), None) => match nodes.get(n) {
                Some(m) => m.clone(),
                None => {
                    let known: Vec<&str> = nodes.keys().map(String::as_str).collect();
                    errs.push(FieldError::new(
                        Code::InvalidValue,
                        &spec.path.key("node"),
                        format!(
                            "node {n:?} is not declared (nodes: {})",
                            if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                        ),
                        format!("declare it under nodes ({n}: {{gpu: h200, gpus_per_node: 8, ram_gib: 2048}}) or name a declared node"),
                    ));
                    Machine::default()
                }
            },
            (Some(_), Some(_)) => {
                errs.push(FieldError::new(
                    Code::InvalidValue,
                    &spec.path.key("machine"),
                    "a launch on a declared node takes that node's machine: machine and node are both given".to_owned(),
                    "remove machine (the node's is used), or remove node",
                ));
                Machine::default()
            }
            (None, m) => m.clone().unwrap_or_default(),
        };
        if spec.argv.is_empty() {
            continue;
        }
        let launch = match words::launch_of(spec.argv.clone(), spec.env.clone(), dirs) {
            Ok(Some(l)) => l,
            Ok(None) => {
                errs.push(FieldError::new(
                    Code::InvalidValue,
                    &spec.path.key("command"),
                    format!("{:?} runs no vllm serve / sglang serve launch", spec.argv.join(" ")),
                    "give the engine's command line: vllm serve MODEL ... or sglang serve MODEL ...",
                ));
                continue;
            }
            Err(why) => {
                errs.push(FieldError::new(
                    Code::InvalidValue,
                    &spec.path.key("command"),
                    why,
                    "write the command as one simple command (the engine's words), or as a list of words",
                ));
                continue;
            }
        };
        if out.launches.len() >= MAX_LAUNCHES {
            return Err(format!(
                "{}: more than {MAX_LAUNCHES} engine launches (the bound on launches)",
                spec.source
            ));
        }
        out.launches.push(Launch {
            name: spec.name.clone(),
            source: spec.source,
            group: format!("{KIND}/{}", spec.name),
            machine,
            node: spec.node,
            declared_role: spec.role,
            ..launch
        });
    }
    Ok(())
}

/// One `--launch 'vllm serve ...'` with the `--role` / `--node` after it
/// (Python: `check_deployment(launches=[...])`).
#[derive(Clone, Debug, Default)]
pub struct LaunchArg {
    pub command: String,
    pub role: Option<String>,
    pub node: Option<String>,
}

/// The machine of every node of the `--launch` launches: `--gpu`,
/// `--gpus-per-node`, `--host-memory-gib` (a node's RAM).
#[derive(Clone, Debug, Default)]
pub struct MachineArg {
    pub gpu: Option<String>,
    pub gpus_per_node: Option<u64>,
    pub ram_gib: Option<f64>,
}

/// The `--launch` launches into `out`, checked exactly as a deployment
/// file's (its fields at `launch[i].command`, `.role`, `.node`; the machine
/// at `--gpu` ...). Err: every bad field (the usage message).
pub fn read_launches(
    launches: &[LaunchArg],
    m: &MachineArg,
    dirs: &ModelDirs,
    out: &mut Deployment,
) -> Result<(), String> {
    if launches.is_empty() {
        return Ok(());
    }
    if launches.len() > MAX_LAUNCHES {
        return Err(format!(
            "--launch: {} launches, over the bound of {MAX_LAUNCHES} (the bound on launches)",
            launches.len()
        ));
    }
    let mut errs = Vec::new();
    let mut fields = serde_json::Map::new();
    if let Some(g) = &m.gpu {
        fields.insert("gpu".into(), Value::String(g.clone()));
    }
    if let Some(n) = m.gpus_per_node {
        fields.insert("gpus_per_node".into(), Value::from(n));
    }
    if let Some(r) = m.ram_gib {
        fields.insert(
            "ram_gib".into(),
            serde_json::Number::from_f64(r).map_or(Value::Null, Value::Number),
        );
    }
    let machine = machine(
        &Value::Object(fields),
        &FieldPath::root("machine"),
        &mut errs,
    )
    .unwrap_or_default();
    let root = FieldPath::root("launch");
    let mut specs = Vec::new();
    let mut nodes = BTreeMap::new();
    for (i, a) in launches.iter().enumerate() {
        let p = root.index(i);
        let mut spec = Spec {
            name: format!("launch-{}", i + 1),
            argv: command(
                &Value::String(a.command.clone()),
                &p.key("command"),
                &mut errs,
            ),
            source: format!("--launch {}", i + 1),
            path: p.clone(),
            node: a.node.clone(),
            ..Spec::default()
        };
        if let Some(r) = &a.role {
            spec.role = role_field(&Value::String(r.clone()), &p.key("role"), &mut errs);
        }
        if spec.node.as_deref() == Some("") {
            errs.push(FieldError::new(
                Code::InvalidValue,
                &p.key("node"),
                "the node name is empty".to_owned(),
                "give the node a name (--node node-1)",
            ));
        }
        match &spec.node {
            Some(n) => {
                nodes.insert(n.clone(), machine.clone());
            }
            None => spec.machine = Some(machine.clone()),
        }
        specs.push(spec);
    }
    let made = make(specs, &nodes, dirs, out, &mut errs);
    if errs.is_empty() {
        made
    } else {
        Err(message("--launch", &errs))
    }
}
