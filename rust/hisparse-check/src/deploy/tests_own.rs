//! The deployment file of our own and `--launch` (own.rs), the rules on
//! what they declare (rules_declared.rs: a declared role, a node's GPUs and
//! pinned RAM across its launches, every fix applied at once passing) and
//! the deployment's plan (plan.rs).

use super::check::{check, to_json, DeployReport};
use super::cli;
use super::diag::apply;
use super::k8s::{read_text, ModelDirs};
use super::model::{Deployment, Role};
use super::own::{LaunchArg, MachineArg};
use serde_json::Value;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dirs() -> ModelDirs {
    ModelDirs(vec![(
        "/models".into(),
        root().join("tests/data/models").display().to_string(),
    )])
}

fn read(text: &str) -> Result<Deployment, String> {
    let mut d = Deployment::default();
    read_text(text, "d.yaml", &dirs(), &mut d)?;
    Ok(d)
}

fn codes(r: &DeployReport) -> Vec<&'static str> {
    r.errors
        .iter()
        .map(|e| e.diagnostic.code.as_str())
        .collect()
}

fn fixed(mut dep: Deployment, r: &DeployReport) -> Deployment {
    for l in &mut dep.launches {
        let edits: Vec<_> = r
            .errors
            .iter()
            .filter(|e| e.launch == l.name)
            .flat_map(|e| e.edits.clone())
            .collect();
        l.args = apply(&l.args, &edits);
        l.role = super::role::role(l.engine, &l.args, l.sglang_serve);
    }
    dep
}

const NIXL_P: &str =
    r#"--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'"#;

fn decode_vllm(pool: u32) -> String {
    format!(
        r#"vllm serve /models/deepseek-v3.2 -tp 8 --kv-cache-dtype fp8_ds_mla --kv-transfer-config '{{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{{"connectors":[{{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}},{{"kv_connector":"HiSparseConnector","kv_role":"kv_both","kv_connector_extra_config":{{"host_pool_gib":{pool}}}}}]}}}}'"#
    )
}

fn prefill_vllm() -> String {
    format!("vllm serve /models/deepseek-v3.2 -tp 8 --kv-cache-dtype fp8_ds_mla --no-disable-hybrid-kv-cache-manager {NIXL_P}")
}

const DECODE_SGLANG: &str = r#"sglang serve /models/deepseek-v3.2 --tp 8 --disaggregation-mode decode --disaggregation-transfer-backend nixl --enable-hisparse --hisparse-config '{"device_buffer_size": 4096}'"#;
const PREFILL_SGLANG: &str = "sglang serve /models/deepseek-v3.2 --tp 8 --disaggregation-mode prefill --disaggregation-transfer-backend nixl";

fn launch(command: &str, role: Option<&str>, node: Option<&str>) -> LaunchArg {
    LaunchArg {
        command: command.to_owned(),
        role: role.map(str::to_owned),
        node: node.map(str::to_owned),
    }
}

fn machine(gpus: u64, ram: f64) -> MachineArg {
    MachineArg {
        gpu: Some("h200".into()),
        gpus_per_node: Some(gpus),
        ram_gib: Some(ram),
    }
}

fn launches(l: &[LaunchArg], m: &MachineArg) -> Result<Deployment, String> {
    cli::read(&[], l, m, &dirs())
}

#[test]
fn the_example_file_is_valid_with_its_plan() {
    let text = std::fs::read_to_string(root().join("examples/deploy/vllm-1p1d-file.yaml")).unwrap();
    let dep = read(&text).unwrap();
    assert_eq!(dep.launches.len(), 2);
    let d = &dep.launches[1];
    assert_eq!(
        (d.name.as_str(), d.node.as_deref()),
        ("decode", Some("node-d"))
    );
    assert_eq!(d.declared_role, Some(Role::Decode));
    assert_eq!(d.machine.gpu.as_deref(), Some("h200"));
    assert_eq!(d.machine.gpus_per_pod, Some(8));
    assert_eq!(d.machine.memory_limit_bytes, Some(1800 << 30));
    assert_eq!(d.source, "d.yaml#1.launches[1]");
    let r = check(dep);
    assert!(r.valid(), "{:?} {:?}", codes(&r), r.launch_errors);
    // The plan: the decode instance with and without HiSparse, each node's pinned RAM.
    assert_eq!(r.plan.instances.len(), 1);
    let i = &r.plan.instances[0];
    assert_eq!(i.launch, "decode");
    assert!(i.hisparse);
    let (without, with) = (
        i.requests_without_hisparse.unwrap(),
        i.requests_with_hisparse.unwrap(),
    );
    assert!(with > without, "{with} {without}");
    assert_eq!(r.plan.nodes.len(), 2);
    assert_eq!(r.plan.nodes[0].node, "node-p");
    assert_eq!(r.plan.nodes[0].pinned_bytes, 0);
    assert!(r.plan.nodes[1].pinned_bytes > 127 << 30);
    let json: Value = serde_json::from_str(&to_json(&r)).unwrap();
    assert_eq!(json["plan"]["instances"][0]["requests_with_hisparse"], with);
    assert_eq!(json["launches"][1]["node"], "node-d");
    assert_eq!(json["launches"][1]["declared_role"], "decode");
    let text = super::check::human_with_plan(&r);
    assert!(
        text.contains(&format!("without HiSparse {without}, with HiSparse {with}")),
        "{text}"
    );
    assert!(text.contains("node-d: pinned 128"), "{text}");
}

#[test]
fn launch_flags_are_checked_exactly_as_file_launches() {
    let file = format!(
        "{{\"kind\": \"HisparseDeployment\", \"nodes\": {{\"n\": {{\"gpu\": \"h200\", \"gpus_per_node\": 16, \"ram_gib\": 1000}}}},
          \"launches\": [{{\"name\": \"launch-1\", \"node\": \"n\", \"role\": \"prefill\", \"command\": {p:?}}},
                         {{\"name\": \"launch-2\", \"node\": \"n\", \"command\": {d:?}}}]}}",
        p = prefill_vllm(),
        d = decode_vllm(128)
    );
    // JSON is read by the same reader.
    let from_file = check(read(&file).unwrap());
    let from_flags = check(
        launches(
            &[
                launch(&prefill_vllm(), Some("prefill"), Some("n")),
                launch(&decode_vllm(128), None, Some("n")),
            ],
            &machine(16, 1000.0),
        )
        .unwrap(),
    );
    let strip = |r: &DeployReport| {
        let mut v: Value = serde_json::from_str(&to_json(r)).unwrap();
        for l in v["launches"].as_array_mut().unwrap() {
            l.as_object_mut().unwrap().remove("source");
        }
        v
    };
    assert_eq!(strip(&from_file), strip(&from_flags));
    assert!(from_flags.valid(), "{:?}", codes(&from_flags));
}

#[test]
fn bad_fields_are_all_reported_with_codes_and_paths() {
    let text = r#"
kind: HisparseDeployment
extra: 1
nodes:
  n1: {gpu: t4000, gpus_per_node: 0, ram_gib: -1, cpus: 8}
  n2: [1]
launches:
- {name: a, command: "vllm serve /models/deepseek-v3.2", node: n9}
- {name: a, command: 7, role: decoder}
- {command: "echo hi", machine: {gpus_per_node: 8}, node: n1}
- {name: c, command: "vllm serve m && echo done", env: {A: [1]}}
- 5
"#;
    let err = read(text).unwrap_err();
    let want = [
        "error[unknown_key] at extra:",
        "error[invalid_value] at nodes.n1.gpu:",
        "error[invalid_value] at nodes.n1.gpus_per_node:",
        "error[invalid_value] at nodes.n1.ram_gib:",
        "error[unknown_key] at nodes.n1.cpus:",
        "error[invalid_type] at nodes.n2:",
        "error[invalid_type] at launches[1].command:",
        "error[invalid_value] at launches[1].role:",
        "error[invalid_value] at launches[2].name:",
        "error[invalid_type] at launches[3].env.A:",
        "error[invalid_type] at launches[4]:",
        "error[invalid_value] at launches[0].node:",
        "error[invalid_value] at launches[1].name:",
        "error[invalid_value] at launches[2].machine:",
        "error[invalid_value] at launches[2].command:",
        "error[invalid_value] at launches[3].command:",
    ];
    for w in want {
        assert!(err.contains(w), "{w} not in:\n{err}");
    }
    assert_eq!(err.lines().count(), want.len(), "{err}");
    assert!(
        err.lines()
            .all(|l| l.starts_with("d.yaml#1: error[") && l.contains("; fix: ")),
        "{err}"
    );
    assert!(err.contains("&&"), "{err}");
    // No launches at all; a JSON document that is not a mapping.
    assert!(read("kind: HisparseDeployment\nlaunches: []\n")
        .unwrap_err()
        .contains("error[invalid_value] at launches: the deployment has no launches"));
    // The bound on launches.
    let many = format!(
        "kind: HisparseDeployment\nlaunches:\n{}",
        "- {name: x, command: vllm serve m}\n".repeat(super::model::MAX_LAUNCHES + 1)
    );
    assert!(read(&many).unwrap_err().contains("bound on launches"));
}

#[test]
fn launch_flags_refuse_what_they_cannot_place() {
    let m = MachineArg::default();
    let err = launches(&[launch("vllm serve m", Some("prefil"), Some(""))], &m).unwrap_err();
    assert!(
        err.contains("--launch: error[invalid_value] at launch[0].role"),
        "{err}"
    );
    assert!(err.contains("at launch[0].node"), "{err}");
    let err = launches(&[launch("python train.py", None, None)], &m).unwrap_err();
    assert!(
        err.contains("at launch[0].command") && err.contains("runs no vllm serve"),
        "{err}"
    );
    let err = launches(
        &[launch("vllm serve m", None, None)],
        &MachineArg {
            gpu: Some("nope".into()),
            ..m.clone()
        },
    )
    .unwrap_err();
    assert!(err.contains("at machine.gpu"), "{err}");
    assert!(cli::read(&[], &[], &m, &dirs())
        .unwrap_err()
        .contains("nothing to check"));
    let err = cli::read(&["x.yaml".into()], &[], &machine(8, 1.0), &dirs()).unwrap_err();
    assert!(err.contains("machine of the --launch launches"), "{err}");
    // --role / --node belong to the --launch before them.
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let rc = cli::run(&args, &mut out, &mut err);
        (
            rc,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    };
    let (rc, _, err) = run(&["--role", "decode", "--launch", "vllm serve m"]);
    assert_eq!(rc, 2);
    assert!(err.contains("before any --launch"), "{err}");
    let (rc, _, err) = run(&["--launch", "vllm serve m", "--node", "a", "--node=b"]);
    assert_eq!(rc, 2);
    assert!(
        err.contains("--node is given twice for --launch 1"),
        "{err}"
    );
}

#[test]
fn a_declared_role_is_checked_against_the_command_and_its_fix_passes() {
    for (p, d) in [
        (prefill_vllm(), decode_vllm(128)),
        (PREFILL_SGLANG.to_owned(), DECODE_SGLANG.to_owned()),
    ] {
        // The prefill declared decode and the decode declared prefill: both
        // commands are turned to what the deployment declares.
        let l = [
            launch(&p, Some("decode"), Some("a")),
            launch(&d, Some("prefill"), Some("b")),
        ];
        let dep = launches(&l, &machine(8, 1800.0)).unwrap();
        let r = check(dep);
        let got = codes(&r);
        assert_eq!(
            got.iter().filter(|c| **c == "launch_role_mismatch").count(),
            2,
            "{got:?}"
        );
        assert!(r.errors.iter().all(|e| !e.edits.is_empty()), "{got:?}");
        let mut again = fixed(launches(&l, &machine(8, 1800.0)).unwrap(), &r);
        // The declared roles now hold.
        assert_eq!(again.launches[0].role, Role::Decode);
        assert_eq!(again.launches[1].role, Role::Prefill);
        for l in &mut again.launches {
            l.declared_role = None;
        }
        let again = check(again);
        assert!(!codes(&again).contains(&"launch_role_mismatch"));
    }
}

#[test]
fn a_nodes_launches_share_its_gpus() {
    let l = [
        launch(&prefill_vllm(), None, Some("n")),
        launch(&decode_vllm(128), None, Some("n")),
    ];
    let r = check(launches(&l, &machine(8, 1800.0)).unwrap());
    assert_eq!(codes(&r), ["node_gpus_exceeded"], "{:?}", r.launch_errors);
    let e = &r.errors[0];
    assert_eq!(e.launch, "launch-2");
    assert!(
        e.diagnostic.message.contains("launch-1 8, launch-2 8"),
        "{}",
        e.diagnostic.message
    );
    assert!(e
        .manifest_fix
        .as_deref()
        .unwrap()
        .contains("gpus_per_node: 16"));
    // Applied: the node with 16 GPUs holds both.
    let r = check(launches(&l, &machine(16, 1800.0)).unwrap());
    assert!(r.errors.is_empty(), "{:?}", codes(&r));
}

#[test]
fn a_nodes_pinned_pools_together_within_95_percent_of_its_ram() {
    for (p, d) in [
        (prefill_vllm(), decode_vllm(600)),
        (PREFILL_SGLANG.to_owned(), DECODE_SGLANG.to_owned()),
    ] {
        let l = [
            launch(&p, None, Some("p")),
            launch(&d, None, Some("d")),
            launch(&d, None, Some("d")),
        ];
        let dep = || launches(&l, &machine(16, 1000.0)).unwrap();
        let r = check(dep());
        // Each launch alone fits its node (its own check passes).
        assert!(r.launches.iter().all(|c| c.report.valid), "{p}");
        assert_eq!(
            codes(&r),
            ["node_host_memory_exceeded", "node_host_memory_exceeded"],
            "{p}"
        );
        let node = &r.plan.nodes[1];
        assert_eq!(node.node, "d");
        assert!(node.pinned_bytes > node.usable_bytes.unwrap());
        let e = &r.errors[0];
        assert_eq!(e.launch, "launch-2");
        assert_eq!(e.other.as_ref().unwrap().0, "launch-3");
        assert!(e.diagnostic.message.contains("each alone fits"));
        assert!(!e.source.is_empty());
        // Every fix at once: the two pools fit together, and the launches are still valid.
        let again = check(fixed(dep(), &r));
        assert!(
            again.valid(),
            "{p}: {:?} {:?}",
            codes(&again),
            again.launch_errors
        );
        assert!(again.plan.nodes[1].pinned_bytes <= again.plan.nodes[1].usable_bytes.unwrap());
        // One decode on the node: nothing between launches.
        let one = check(launches(&l[..2], &machine(16, 1000.0)).unwrap());
        assert!(one.errors.is_empty(), "{:?}", codes(&one));
    }
}

#[test]
fn a_multi_node_instance_is_planned_once() {
    // vLLM DP 16 over two pods of 8 (a LeaderWorkerSet): one instance, led by rank 0.
    let text = r#"
kind: LeaderWorkerSet
metadata: {name: dp}
spec:
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
        containers: [{name: v, command: [sh, -c, 'vllm serve /models/deepseek-v3.2 --kv-cache-dtype fp8_ds_mla --data-parallel-size 16 --data-parallel-size-local 8 --data-parallel-address $LWS_LEADER_ADDRESS --data-parallel-rpc-port 13345 --data-parallel-start-rank $((LWS_WORKER_INDEX * 8))'], resources: {limits: {nvidia.com/gpu: 8, memory: 2000Gi}}}]
"#;
    let r = check(read(text).unwrap());
    assert!(r.valid(), "{:?} {:?}", codes(&r), r.launch_errors);
    assert_eq!(r.plan.instances.len(), 1, "{:?}", r.plan.instances);
    let i = &r.plan.instances[0];
    assert_eq!(i.launch, "LeaderWorkerSet/dp/leader/v");
    assert_eq!(i.data_parallel_size, 16);
    // No HiSparse: the figures are the HiSparseConnector's it would take, and nothing is pinned.
    assert!(!i.hisparse);
    assert_eq!(r.plan.nodes.len(), 2);
    assert!(r.plan.nodes.iter().all(|n| n.pinned_bytes == 0));
    assert!(super::plan::human(&r.plan).contains("HiSparse is not configured: what it would give"));
}
