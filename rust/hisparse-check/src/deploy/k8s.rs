//! Kubernetes manifests -> [`Deployment`]: multi-document YAML (`---`) and
//! `kind: List`, read as PyYAML's `safe_load_all` reads them (`yaml.rs`);
//! Pod, Deployment, StatefulSet, Job and LeaderWorkerSet (its leader and
//! worker templates, `size`); each container's `command` + `args` after
//! Kubernetes' `$(VAR)` expansion (k8s.io/kubernetes third_party/forked/golang/expansion:
//! `$$` is `$`, an undefined `$(VAR)` stays as written), a `sh -c` string
//! split as sh would (`shell.rs`); the GPUs (`resources.limits["nvidia.com/gpu"]`),
//! the memory limit, and the GPU product from `nodeSelector` or a required
//! node affinity (`nvidia.com/gpu.product`, spaces spelt `-`) mapped to our
//! `--gpu` table (hisparse-core gpu.rs).
//!
//! Listed as not read, never dropped: other kinds, init containers,
//! containers that run no engine, a Helm template (`{{`: render it first).
//! Bounds, each its own error: file bytes, documents, aliases, string
//! length, nesting depth (yaml.rs's), launches ([`MAX_LAUNCHES`]).

use super::model::{Deployment, Launch, Machine, NotRead, MAX_LAUNCHES};
use super::own::MAX_GPUS_PER_NODE;
pub use super::words::{gpu_name, launch_of, ModelDirs};
use crate::yaml::{self, StreamBounds};
use hisparse_core::files::read_regular;
use serde_json::Value;
use std::collections::BTreeMap;

/// Largest manifest file read (bytes).
pub const MAX_MANIFEST_BYTES: u64 = 8 << 20;
/// Bounds of one manifest's YAML stream.
pub const BOUNDS: StreamBounds = StreamBounds {
    documents: 1024,
    aliases: 1024,
    string_bytes: 1 << 20,
};
/// Deepest `kind: List` nesting read.
const MAX_LIST_DEPTH: usize = 8;

/// Read one manifest file into `out`. Err: the file cannot be read, is not
/// YAML, or passes a bound (each message names the file and the bound).
pub fn read_file(path: &str, dirs: &ModelDirs, out: &mut Deployment) -> Result<(), String> {
    let bytes = read_regular(std::path::Path::new(path), MAX_MANIFEST_BYTES)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("cannot read {path}: it is not UTF-8 text ({e})"))?;
    read_text(&text, path, dirs, out)
}

/// [`read_file`] on text already read.
pub fn read_text(
    text: &str,
    path: &str,
    dirs: &ModelDirs,
    out: &mut Deployment,
) -> Result<(), String> {
    if text.contains("{{") {
        out.not_read.push(NotRead {
            at: path.to_owned(),
            why: "a Helm template ({{ ... }}): hisparse-check does not render templates; render it first (helm template RELEASE CHART > rendered.yaml) and check the rendered manifest".to_owned(),
        });
        return Ok(());
    }
    let docs = yaml::load_all(text, path, BOUNDS)?;
    for (i, doc) in docs.iter().enumerate() {
        let value = yaml::to_json(doc).map_err(|e| format!("{path}: document {}: {e}", i + 1))?;
        if value.is_null() {
            continue;
        }
        let at = format!("{path}#{}", i + 1);
        let before = out.launches.len();
        object(&value, &at, dirs, out, 0)?;
        for l in &mut out.launches[before..] {
            // `{at}[.items[i]...]:Kind/name/container` -> source and name.
            // (A deployment file's launches keep the names they declare.)
            let tail = l.name.strip_prefix(at.as_str()).unwrap_or("");
            if let Some(colon) = tail.find(':') {
                l.source = format!("{at}{}", &tail[..colon]);
                l.name = tail[colon + 1..].to_owned();
            }
        }
    }
    Ok(())
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// One Kubernetes object (or a `List` of them).
fn object(
    v: &Value,
    at: &str,
    dirs: &ModelDirs,
    out: &mut Deployment,
    depth: usize,
) -> Result<(), String> {
    let kind = s(v, "kind").unwrap_or("");
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("unnamed");
    let here = format!("{at}:{kind}/{name}");
    let spec = v.get("spec").cloned().unwrap_or(Value::Null);
    let int = |key: &str| count(&spec, key, &here, 1);
    match kind {
        "List" => {
            if depth >= MAX_LIST_DEPTH {
                return Err(format!("{at}: kind: List nests deeper than {MAX_LIST_DEPTH} levels (the bound on List nesting)"));
            }
            let items = v
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                object(item, &format!("{at}.items[{i}]"), dirs, out, depth + 1)?;
            }
            Ok(())
        }
        "Pod" => pod(&spec, &here, &format!("Pod/{name}"), (1, 1), &[], dirs, out),
        "Deployment" | "StatefulSet" => {
            let pods = (int("replicas")?, 1);
            pod(
                spec.pointer("/template/spec").unwrap_or(&Value::Null),
                &here,
                &format!("{kind}/{name}"),
                pods,
                &[],
                dirs,
                out,
            )
        }
        "Job" => {
            let pods = (int("parallelism")?, 1);
            pod(
                spec.pointer("/template/spec").unwrap_or(&Value::Null),
                &here,
                &format!("Job/{name}"),
                pods,
                &[],
                dirs,
                out,
            )
        }
        super::own::KIND => super::own::read_document(v, at, dirs, out),
        "LeaderWorkerSet" => {
            leader_worker_set(&spec, &here, &format!("LeaderWorkerSet/{name}"), dirs, out)
        }
        "" => {
            out.not_read.push(NotRead {
                at: at.to_owned(),
                why: "a document without a kind".to_owned(),
            });
            Ok(())
        }
        other => {
            out.not_read.push(NotRead {
                at: here,
                why: format!("kind {other} is not read (read: Pod, Deployment, StatefulSet, Job, LeaderWorkerSet, List, and the deployment file's {})", super::own::KIND),
            });
            Ok(())
        }
    }
}

/// A workload's count (`replicas`, `parallelism`, a LeaderWorkerSet's
/// `size`): absent or null is `default`; anything but an integer in
/// 0..=2^31-1 (the API's int32) is an error, as the API server refuses the
/// manifest at apply (a value read as 1 instead would check another deployment).
fn count(spec: &Value, key: &str, here: &str, default: u64) -> Result<u64, String> {
    match spec.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| *n <= i32::MAX as u64)
            .ok_or_else(|| {
                format!("{here}: {key} {v} is not an integer in 0..=2147483647 (Kubernetes' int32: the API server refuses the manifest)")
            }),
    }
}

/// A LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): `replicas` groups of
/// `size` pods, the leader from `leaderTemplate` (else `workerTemplate`).
fn leader_worker_set(
    spec: &Value,
    here: &str,
    group: &str,
    dirs: &ModelDirs,
    out: &mut Deployment,
) -> Result<(), String> {
    let replicas = count(spec, "replicas", here, 1)?;
    let lwt = spec
        .get("leaderWorkerTemplate")
        .cloned()
        .unwrap_or(Value::Null);
    let size = count(&lwt, "size", &format!("{here}.leaderWorkerTemplate"), 1)?.max(1);
    if size > MAX_LAUNCHES as u64 {
        return Err(format!("{here}: leaderWorkerTemplate.size {size} is over the bound of {MAX_LAUNCHES} pods per group (the bound on launches)"));
    }
    let worker = lwt.pointer("/workerTemplate/spec");
    let Some(leader) = lwt.pointer("/leaderTemplate/spec").or(worker) else {
        out.not_read.push(NotRead {
            at: here.to_owned(),
            why: "a LeaderWorkerSet without leaderWorkerTemplate.workerTemplate".to_owned(),
        });
        return Ok(());
    };
    // The env LeaderWorkerSet injects into every pod of a group (LWS_LEADER_ADDRESS,
    // LWS_GROUP_SIZE, LWS_WORKER_INDEX: 0 for the leader); each pod is its own launch.
    for index in 0..size {
        let (template, at) = match (index, worker) {
            (0, _) => (leader, format!("{here}/leader")),
            (i, Some(w)) => (w, format!("{here}/worker-{i}")),
            (i, None) => (leader, format!("{here}/worker-{i}")),
        };
        let lws_env = [
            (
                "LWS_LEADER_ADDRESS",
                "valueFrom:lws-leader-address".to_owned(),
            ),
            ("LWS_GROUP_SIZE", size.to_string()),
            ("LWS_WORKER_INDEX", index.to_string()),
        ];
        pod(template, &at, group, (replicas, size), &lws_env, dirs, out)?;
    }
    Ok(())
}

/// The GPU product a pod is pinned to: `nodeSelector`, else the first
/// required node-affinity term's `In` with one value.
fn gpu_product(spec: &Value) -> Option<String> {
    const LABEL: &str = "nvidia.com/gpu.product";
    if let Some(p) = spec.pointer("/nodeSelector").and_then(|n| s(n, LABEL)) {
        return Some(p.to_owned());
    }
    let terms = spec.pointer(
        "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    )?;
    terms.as_array()?.iter().find_map(|t| {
        t.get("matchExpressions")?.as_array()?.iter().find_map(|e| {
            let values = e.get("values")?.as_array()?;
            (s(e, "key") == Some(LABEL) && s(e, "operator") == Some("In") && values.len() == 1)
                .then(|| values[0].as_str().map(str::to_owned))
                .flatten()
        })
    })
}

/// A Kubernetes quantity in bytes (`2Ti`, `512Gi`, `500G`, `1.5Ti`, `1e12`, `129M`).
pub fn quantity_bytes(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let t = v.as_str()?.trim();
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (num, mult) = SUFFIXES
        .iter()
        .find_map(|(sfx, m)| t.strip_suffix(sfx).map(|n| (n, *m)))
        .unwrap_or((t, 1.0));
    let n: f64 = num
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let bytes = n * mult;
    (bytes < u64::MAX as f64).then_some(bytes.ceil() as u64)
}

/// A container's `resources.limits["nvidia.com/gpu"]`: an extended
/// resource, so a whole number (the API server refuses `1.5` or `abc`), at
/// most [`MAX_GPUS_PER_NODE`] (one pod runs on one node).
fn gpu_limit(limits: Option<&Value>, at: &str) -> Result<Option<u64>, String> {
    let Some(g) = limits.and_then(|l| l.get("nvidia.com/gpu")) else {
        return Ok(None);
    };
    let n = g
        .as_u64()
        .or_else(|| g.as_str().and_then(|t| t.trim().parse::<u64>().ok()));
    match n {
        Some(n) if n <= MAX_GPUS_PER_NODE => Ok(Some(n)),
        _ => Err(format!("{at}: resources.limits[\"nvidia.com/gpu\"] {g} is not a whole number of GPUs in 0..={MAX_GPUS_PER_NODE} (one pod's node)")),
    }
}

/// A container's `resources.limits.memory`, a Kubernetes quantity (`2Ti`,
/// `1800Gi`, `2e12`); one the API server would refuse is an error.
fn memory_limit(limits: Option<&Value>, at: &str) -> Result<Option<u64>, String> {
    let Some(m) = limits.and_then(|l| l.get("memory")) else {
        return Ok(None);
    };
    quantity_bytes(m).map(Some).ok_or_else(|| {
        format!("{at}: resources.limits.memory {m} is not a Kubernetes quantity of bytes (2Ti, 1800Gi, 2e12)")
    })
}

/// One pod template: its containers, each a launch or listed as not read.
fn pod(
    spec: &Value,
    here: &str,
    group: &str,
    pods: (u64, u64),
    injected: &[(&str, String)],
    dirs: &ModelDirs,
    out: &mut Deployment,
) -> Result<(), String> {
    for (i, c) in spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = s(c, "name").unwrap_or("?");
        out.not_read.push(NotRead {
            at: format!("{here}/initContainers[{i}]:{name}"),
            why: "an init container is not read (it runs before the engine)".to_owned(),
        });
    }
    let product = gpu_product(spec);
    for (i, c) in spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let cname = s(c, "name").unwrap_or("?");
        let at = format!("{here}/{cname}");
        let limits = c.pointer("/resources/limits");
        let machine = Machine {
            gpu: product.as_deref().and_then(gpu_name),
            gpu_product: product.clone(),
            gpus_per_pod: gpu_limit(limits, &at)?,
            memory_limit_bytes: memory_limit(limits, &at)?,
        };
        match container(c, injected, dirs) {
            Ok(Some(mut launch)) => {
                if out.launches.len() >= MAX_LAUNCHES {
                    return Err(format!("{at}: the manifests hold more than {MAX_LAUNCHES} engine launches (the bound on launches)"));
                }
                launch.name = at;
                launch.group = group.to_owned();
                (launch.replicas, launch.group_size) = pods;
                launch.machine = machine;
                out.launches.push(launch);
            }
            Ok(None) => out.not_read.push(NotRead {
                at: format!("{here}/containers[{i}]:{cname}"),
                why: "runs no vllm serve / sglang serve launch".to_owned(),
            }),
            Err(why) => return Err(format!("{at}: {why}")),
        }
    }
    Ok(())
}

/// Kubernetes' `$(VAR)` expansion of one command/args word.
pub fn expand_k8s(word: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(j) => {
                    let name = &inner[..j];
                    match env.get(name) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[j + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The container's env: `value`s, and a placeholder for `valueFrom` (known
/// only at run time), in order (a later entry may use an earlier one: `$(A)`).
fn container_env(c: &Value, injected: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = injected.clone();
    for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = s(e, "name") else { continue };
        let value = match (e.get("value"), e.get("valueFrom")) {
            (Some(v), _) => expand_k8s(v.as_str().unwrap_or(""), &env),
            (None, Some(from)) => {
                let field = from
                    .pointer("/fieldRef/fieldPath")
                    .and_then(Value::as_str)
                    .unwrap_or("runtime");
                format!("valueFrom:{field}")
            }
            (None, None) => String::new(),
        };
        env.insert(name.to_owned(), value);
    }
    env
}

fn words(c: &Value, key: &str) -> Vec<String> {
    c.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|w| w.as_str().map_or_else(|| w.to_string(), str::to_owned))
        .collect()
}

/// A container -> a launch (`None`: it runs no engine). Err: a `sh -c`
/// string we cannot read.
fn container(
    c: &Value,
    injected: &[(&str, String)],
    dirs: &ModelDirs,
) -> Result<Option<Launch>, String> {
    let mut env: BTreeMap<String, String> = injected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    env.extend(container_env(c, &env));
    let mut argv: Vec<String> = words(c, "command")
        .iter()
        .chain(&words(c, "args"))
        .map(|w| expand_k8s(w, &env))
        .collect();
    if words(c, "command").is_empty() {
        // vllm/vllm-openai's ENTRYPOINT is `vllm serve`; other images' are unknown here.
        if !s(c, "image").is_some_and(|i| i.contains("vllm-openai")) {
            return Ok(None);
        }
        argv.splice(0..0, ["vllm".to_owned(), "serve".to_owned()]);
    }
    launch_of(argv, env, dirs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::model::{EngineKind, Role};

    fn read(text: &str) -> Result<Deployment, String> {
        let mut d = Deployment::default();
        read_text(
            text,
            "m.yaml",
            &ModelDirs(vec![("/models".into(), "tests/data/models".into())]),
            &mut d,
        )?;
        Ok(d)
    }

    #[test]
    fn quantities_and_gpu_labels() {
        let q = |t: &str| quantity_bytes(&Value::String(t.into()));
        assert_eq!(q("2Ti"), Some(2 << 40));
        assert_eq!(q("500G"), Some(500_000_000_000));
        assert_eq!(q("1.5Gi"), Some(3 << 29));
        assert_eq!(q("1e3"), Some(1000));
        assert_eq!(q("x"), None);
        assert_eq!(gpu_name("NVIDIA-H200").as_deref(), Some("h200"));
        assert_eq!(gpu_name("NVIDIA-H100-80GB-HBM3").as_deref(), Some("h100"));
        assert_eq!(gpu_name("Tesla-T4"), None);
    }

    #[test]
    fn k8s_expansion() {
        let env: BTreeMap<String, String> = [("TP".to_owned(), "8".to_owned())].into();
        assert_eq!(expand_k8s("--tp=$(TP)", &env), "--tp=8");
        assert_eq!(expand_k8s("$$(TP) $(NO) $x $(", &env), "$(TP) $(NO) $x $(");
    }

    const STS: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: decode}
  spec:
    replicas: 2
    template:
      spec:
        nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
        initContainers: [{name: fetch, image: busybox}]
        containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          env: [{name: TP, value: "8"}, {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]
          command: ["sh", "-c"]
          args:
          - |
            exec vllm serve /models/deepseek-v3.2 \
              --tensor-parallel-size $TP --host $IP \
              --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
          resources: {limits: {nvidia.com/gpu: 8, memory: 2Ti}}
        - {name: sidecar, image: envoy, command: [envoy]}
---
kind: Service
metadata: {name: svc}
"#;

    #[test]
    fn values_the_api_server_refuses_are_errors_not_defaults() {
        // Each was read as 1 replica, no GPU limit or no memory limit, so the
        // check judged another deployment than the one applied.
        for (from, to, said) in [
            (
                "replicas: 2",
                "replicas: two",
                "replicas \"two\" is not an integer",
            ),
            (
                "replicas: 2",
                "replicas: -1",
                "replicas -1 is not an integer",
            ),
            (
                "replicas: 2",
                "replicas: 1.5",
                "replicas 1.5 is not an integer",
            ),
            (
                "replicas: 2",
                "replicas: 4294967296",
                "replicas 4294967296 is not an integer",
            ),
            (
                "nvidia.com/gpu: 8,",
                "nvidia.com/gpu: 1.5,",
                "nvidia.com/gpu\"] 1.5 is not a whole number",
            ),
            (
                "nvidia.com/gpu: 8,",
                "nvidia.com/gpu: eight,",
                "\"eight\" is not a whole number",
            ),
            (
                "nvidia.com/gpu: 8,",
                "nvidia.com/gpu: 1000000000000,",
                "in 0..=1024",
            ),
            (
                "memory: 2Ti",
                "memory: 2TB",
                "memory \"2TB\" is not a Kubernetes quantity",
            ),
            (
                "memory: 2Ti",
                "memory: -2Ti",
                "memory \"-2Ti\" is not a Kubernetes quantity",
            ),
        ] {
            let err = read(&STS.replace(from, to)).unwrap_err();
            assert!(err.contains(said), "{to}: {err}");
            assert!(err.starts_with("m.yaml"), "{err}");
        }
        // What the API server takes is read: quoted counts of GPUs, exa, null replicas.
        let d = read(&STS.replace("nvidia.com/gpu: 8,", "nvidia.com/gpu: \"4\",")).unwrap();
        assert_eq!(d.launches[0].machine.gpus_per_pod, Some(4));
        let d = read(&STS.replace("memory: 2Ti", "memory: 1Ei")).unwrap();
        assert_eq!(d.launches[0].machine.memory_limit_bytes, Some(1 << 60));
        let d = read(&STS.replace("replicas: 2", "replicas: null")).unwrap();
        assert_eq!(d.launches[0].replicas, 1);
    }

    #[test]
    fn reads_a_list_with_a_shell_string() {
        let d = read(STS).unwrap();
        assert_eq!(d.launches.len(), 1);
        let l = &d.launches[0];
        assert_eq!(l.engine, EngineKind::Vllm);
        assert_eq!(l.role, Role::Decode);
        assert_eq!(l.args[0], "tests/data/models/deepseek-v3.2");
        assert_eq!(
            l.args[1..5],
            [
                "--tensor-parallel-size",
                "8",
                "--host",
                "valueFrom:status.podIP"
            ]
        );
        assert_eq!((l.replicas, l.group_size), (2, 1));
        assert_eq!(l.machine.gpu.as_deref(), Some("h200"));
        assert_eq!(l.machine.gpus_per_pod, Some(8));
        assert_eq!(l.machine.memory_limit_bytes, Some(2 << 40));
        assert_eq!(
            l.model_mapped,
            [(
                "/models/deepseek-v3.2".to_owned(),
                "tests/data/models/deepseek-v3.2".to_owned()
            )]
        );
        let why: Vec<&str> = d.not_read.iter().map(|n| n.at.as_str()).collect();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(why[0].contains("initContainers[0]:fetch"));
        assert!(why[1].contains("containers[1]:sidecar"));
        assert!(why[2].contains("Service/svc"));
    }

    #[test]
    fn leader_worker_set_pods() {
        let text = r#"
kind: LeaderWorkerSet
metadata: {name: pd}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 3
    leaderTemplate:
      spec:
        containers: [{name: l, command: [python3, -m, sglang.launch_server, --model-path, /models/m, --disaggregation-mode, prefill, --nnodes, "3", --node-rank, "0"]}]
    workerTemplate:
      spec:
        containers: [{name: w, command: [sglang, serve, /models/m, --disaggregation-mode=prefill]}]
"#;
        let d = read(text).unwrap();
        assert_eq!(d.launches.len(), 3);
        assert_eq!((d.launches[0].replicas, d.launches[0].group_size), (2, 3));
        assert_eq!((d.launches[2].replicas, d.launches[2].group_size), (2, 3));
        assert_eq!(d.launches[2].env["LWS_WORKER_INDEX"], "2");
        assert!(d.launches[2].name.ends_with("/worker-2/w"));
        assert!(d
            .launches
            .iter()
            .all(|l| l.engine == EngineKind::Sglang && l.role == Role::Prefill));
        assert_eq!(d.launches[0].group, "LeaderWorkerSet/pd");
        assert_eq!(d.launches[1].args[0], "tests/data/models/m");
    }

    #[test]
    fn bounds_and_unreadable_input() {
        let d = read("kind: Deployment\nspec: {template: {spec: {containers: [{name: a, image: x, args: [\"{{ .Values.x }}\"]}]}}}").unwrap();
        assert!(d.not_read[0].why.contains("Helm"));
        let docs = "---\nkind: Service\n".repeat(BOUNDS.documents + 1);
        assert!(read(&docs).unwrap_err().contains("bound on documents"));
        let aliases = format!(
            "a: &x 1\nb: [{}]\n",
            vec!["*x"; BOUNDS.aliases + 1].join(", ")
        );
        assert!(read(&aliases).unwrap_err().contains("bound on aliases"));
        let long = format!(
            "kind: Pod\nmetadata: {{name: {}}}\n",
            "x".repeat(BOUNDS.string_bytes + 1)
        );
        assert!(read(&long).unwrap_err().contains("per string"));
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(read(&deep).unwrap_err().contains("deeper"));
        let pod = "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, command: [vllm, serve, m]}]}\n";
        let many = format!(
            "kind: List\nitems:\n{}",
            format!(
                "- {}\n",
                "{kind: Pod, spec: {containers: [{name: c, command: [vllm, serve, m]}]}}"
            )
            .repeat(MAX_LAUNCHES + 1)
        );
        assert!(read(&many).unwrap_err().contains("bound on launches"));
        assert_eq!(read(pod).unwrap().launches.len(), 1);
        let bad = "kind: Pod\nspec: {containers: [{name: c, command: [sh, -c, 'vllm serve m && echo done']}]}\n";
        assert!(read(bad).unwrap_err().contains("&&"));
    }
}
