//! The rules between launches: every fix applied at once passes (on the
//! mismatched examples and on hand-made pairs), and the rules the examples
//! do not reach (TP ratio, context length, model string, a non-DSA page
//! size, multi-node sizes and ranks, pod GPUs).

use super::check::{check, DeployReport};
use super::diag::apply;
use super::k8s::{read_text, ModelDirs};
use super::model::Deployment;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dirs() -> ModelDirs {
    let models = root().join("tests/data/models");
    ModelDirs(vec![
        ("/models".into(), models.display().to_string()),
        (
            "/weights/dsv32".into(),
            models.join("deepseek-v3.2").display().to_string(),
        ),
    ])
}

fn read(text: &str) -> Deployment {
    let mut d = Deployment::default();
    read_text(text, "t.yaml", &dirs(), &mut d).unwrap();
    d
}

fn example(name: &str) -> Deployment {
    let text = std::fs::read_to_string(root().join("examples/deploy").join(name)).unwrap();
    read(&text)
}

fn codes(r: &DeployReport) -> Vec<&'static str> {
    r.errors
        .iter()
        .map(|e| e.diagnostic.code.as_str())
        .collect()
}

/// Every fix of `r` applied to `dep`'s launches at once.
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

#[test]
fn every_fix_at_once_passes_on_the_mismatched_examples() {
    for name in ["vllm-1p1d-mismatched.yaml", "sglang-1p1d-mismatched.yaml"] {
        let r = check(example(name));
        assert_eq!(r.errors.len(), 3, "{name}: {:?}", codes(&r));
        assert!(r.errors.iter().all(|e| !e.edits.is_empty()), "{name}");
        let again = check(fixed(example(name), &r));
        assert!(
            again.valid(),
            "{name}: {:?} {:?}",
            codes(&again),
            again.launch_errors
        );
    }
}

#[test]
fn every_launch_diagnostic_is_printed_in_full() {
    // A warning used to be printed by its code alone; every example's
    // launches' errors and warnings are now in the text with message and fix.
    let mut seen = 0;
    for name in [
        "vllm-1p1d.yaml",
        "sglang-1p1d.yaml",
        "sglang-1p1d-mismatched.yaml",
    ] {
        let r = check(example(name));
        let text = super::check::human(&r);
        for c in &r.launches {
            for d in c.report.errors.iter().chain(&c.report.warnings) {
                seen += 1;
                assert!(
                    text.contains(&d.message),
                    "{name}: {} not in\n{text}",
                    d.code.as_str()
                );
                if let Some(h) = &d.hint {
                    assert!(text.contains(&format!("fix: {h}")), "{name}: {h}");
                }
            }
        }
    }
    assert!(seen > 0, "the examples have launch diagnostics to print");
}

fn pod(name: &str, cmd: &str) -> String {
    format!("---\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeSelector: {{nvidia.com/gpu.product: NVIDIA-H200}}\n  containers:\n  - name: c\n    command: [sh, -c, '{cmd}']\n    resources: {{limits: {{nvidia.com/gpu: 8, memory: 1800Gi}}}}\n")
}

const NIXL_P: &str =
    r#"--kv-transfer-config "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}""#;
const NIXL_D: &str =
    r#"--kv-transfer-config "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}""#;

#[test]
fn vllm_tp_ratio_and_context_length() {
    // A prefill TP above the decode's is vLLM's negative tp_ratio, allowed for
    // MLA (kv_connector/utils.py:522-539): 8 against 4 connects.
    let ok = pod(
        "p",
        &format!("vllm serve /models/deepseek-v3.2 -tp 8 {NIXL_P}"),
    ) + &pod(
        "d",
        &format!("vllm serve /models/deepseek-v3.2 -tp 4 {NIXL_D}"),
    );
    let r = check(read(&ok));
    assert!(r.errors.is_empty(), "{:?}", codes(&r));
    // 4 and 6: neither divides the other.
    let text = pod(
        "p",
        &format!("vllm serve /models/deepseek-v3.2 -tp 4 --max-model-len 131072 {NIXL_P}"),
    ) + &pod(
        "d",
        &format!("vllm serve /models/deepseek-v3.2 -tp 6 --max-model-len 65536 {NIXL_D}"),
    );
    let r = check(read(&text));
    assert_eq!(
        codes(&r),
        [
            "pd_tensor_parallel_unsupported",
            "pd_context_length_exceeds_decode"
        ],
        "{:?}",
        r.launch_errors
    );
    assert!(r.errors.iter().all(|e| e.launch == "Pod/p/c"));
    assert_eq!(
        r.errors[0].engine_message,
        "Local tensor parallel size 6 is not divisible by remote tensor parallel size 4."
    );
    // The fix: TP 2, the largest power of two within 4 that divides 6.
    assert_eq!(
        r.errors[0].diagnostic.fix[0],
        hisparse_core::FixOp::Set {
            path: hisparse_core::FieldPath::root("tensor_parallel_size"),
            value: serde_json::json!(2)
        }
    );
    let again = check(fixed(read(&text), &r));
    assert!(again.errors.is_empty(), "{:?}", codes(&again));
}

#[test]
fn vllm_block_sizes_and_hybrid_manager_as_the_workers_see_them() {
    // DSA: both workers transfer at the indexer's kernel block size (64),
    // whatever --block-size says; a plain NixlConnector leaves the hybrid
    // KV cache manager on (it implements SupportsHMA), as HiSparse has it.
    let text = pod(
        "p",
        &format!("vllm serve /models/deepseek-v3.2 -tp 8 --block-size 128 {NIXL_P}"),
    ) + &pod(
        "d",
        &format!("vllm serve /models/deepseek-v3.2 -tp 8 --block-size 64 {NIXL_D}"),
    );
    let r = check(read(&text));
    assert!(r.errors.is_empty(), "{:?}", codes(&r));
    // A connector without SupportsHMA turns it off unless the flag is given.
    let lm = r#"--kv-transfer-config "{\"kv_connector\":\"MultiConnector\",\"kv_role\":\"kv_producer\",\"kv_connector_extra_config\":{\"connectors\":[{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"},{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}]}}""#;
    let text = pod("p", &format!("vllm serve /models/deepseek-v3.2 -tp 8 {lm}"))
        + &pod(
            "d",
            &format!("vllm serve /models/deepseek-v3.2 -tp 8 {NIXL_D}"),
        );
    let r = check(read(&text));
    assert_eq!(
        codes(&r),
        ["pd_hybrid_kv_cache_manager_mismatch"],
        "{:?}",
        r.launch_errors
    );
}

#[test]
fn vllm_model_string_is_hashed() {
    let text = pod(
        "p",
        &format!("vllm serve /models/deepseek-v3.2 -tp 8 {NIXL_P}"),
    ) + &pod("d", &format!("vllm serve /weights/dsv32 -tp 8 {NIXL_D}"));
    // The same config.json, named differently in each container.
    let r = check(read(&text));
    assert_eq!(codes(&r), ["pd_model_mismatch"], "{:?}", r.launch_errors);
    let e = &r.errors[0];
    assert_eq!(
        e.diagnostic.given,
        Some(serde_json::json!("/models/deepseek-v3.2"))
    );
    assert_eq!(
        e.diagnostic.fix[0],
        hisparse_core::FixOp::Set {
            path: hisparse_core::FieldPath::root("model"),
            value: serde_json::json!("/weights/dsv32")
        }
    );
}

#[test]
fn sglang_page_size_of_a_model_without_dsa() {
    let text = pod(
        "p",
        "sglang serve /models/qwen3-8b --page-size 16 --disaggregation-mode prefill",
    ) + &pod(
        "d",
        "sglang serve /models/qwen3-8b --page-size 32 --disaggregation-mode decode",
    );
    let r = check(read(&text));
    assert_eq!(
        codes(&r),
        ["pd_page_size_mismatch"],
        "{:?}",
        r.launch_errors
    );
    assert_eq!(r.errors[0].diagnostic.stage.as_str(), "first_request");
    let again = check(fixed(read(&text), &r));
    assert!(again.errors.is_empty(), "{:?}", codes(&again));
}

#[test]
fn multi_node_ranks_sizes_and_gpus() {
    // A LeaderWorkerSet of 3 nodes whose worker template pins --node-rank 1:
    // worker-2 repeats it, and rank 2 is never taken.
    let lws = r#"
kind: LeaderWorkerSet
metadata: {name: big}
spec:
  leaderWorkerTemplate:
    size: 3
    leaderTemplate:
      spec:
        containers: [{name: s, command: [sh, -c, 'sglang serve /models/deepseek-v3.2 --tp 24 --nnodes 3 --node-rank $LWS_WORKER_INDEX --dist-init-addr $LWS_LEADER_ADDRESS:5000'], resources: {limits: {nvidia.com/gpu: 8}}}]
    workerTemplate:
      spec:
        containers: [{name: s, command: [sh, -c, 'sglang serve /models/deepseek-v3.2 --tp 16 --nnodes 3 --node-rank 1 --dist-init-addr $LWS_LEADER_ADDRESS:5000'], resources: {limits: {nvidia.com/gpu: 4}}}]
"#;
    let r = check(read(lws));
    let mut got = codes(&r);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "multinode_ranks_invalid",
            "multinode_sizes_mismatch",
            "multinode_sizes_mismatch",
            "node_gpus_exceeded",
            "node_gpus_exceeded"
        ],
        "{:?}",
        r.launch_errors
    );
    let rank = r
        .errors
        .iter()
        .find(|e| e.diagnostic.code.as_str() == "multinode_ranks_invalid")
        .unwrap();
    assert_eq!(rank.launch, "LeaderWorkerSet/big/worker-2/s");
    assert!(rank
        .diagnostic
        .hint
        .as_deref()
        .unwrap()
        .contains("LWS_WORKER_INDEX"));
    let again = check(fixed(read(lws), &r));
    let left = codes(&again);
    // The pods' GPU limits are the manifest's to raise (a manifest fix, in words).
    assert_eq!(
        left,
        ["node_gpus_exceeded", "node_gpus_exceeded"],
        "{left:?}"
    );
}

/// Hostile input never panics: shell strings from a small alphabet, and
/// launches with sizes vLLM and SGLang refuse (0, negative, huge).
#[test]
fn hostile_input_never_panics() {
    let alphabet: Vec<char> = "ab $'\"\\\n\t{}()|&;<>*?[~#=-`".chars().collect();
    let env = [("A".to_owned(), "x y".to_owned())].into();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..3000 {
        let len = (seed % 24) as usize;
        let s: String = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                alphabet[(seed % alphabet.len() as u64) as usize]
            })
            .collect();
        let _ = super::shell::split(&s, &env);
    }
    for v in ["0", "-3", "9223372036854775807", "x"] {
        let text = pod("p", &format!("vllm serve /models/deepseek-v3.2 -tp {v} --nnodes {v} -dpl {v} --data-parallel-size {v} --node-rank {v} {NIXL_P}"))
            + &pod("d", &format!("vllm serve /models/deepseek-v3.2 -tp 8 {NIXL_D}"))
            + &pod("sp", &format!("sglang serve /models/deepseek-v3.2 --tp {v} --dp {v} --nnodes {v} --node-rank {v} --dist-init-addr a:1 --enable-dp-attention --disaggregation-mode prefill"))
            + &pod("sd", "sglang serve /models/deepseek-v3.2 --tp 8 --nnodes 2 --node-rank 0 --dist-init-addr a:1 --disaggregation-mode decode");
        let r = check(read(&text));
        let _ = super::check::to_json(&r);
        let _ = super::check::human(&r);
    }
}

fn dp_lws(rank: &str) -> String {
    let cmd = format!("vllm serve /models/deepseek-v3.2 --data-parallel-size 16 --data-parallel-size-local 8 --data-parallel-address $LWS_LEADER_ADDRESS --data-parallel-rpc-port 13345 --data-parallel-start-rank {rank}");
    format!(
        "kind: LeaderWorkerSet\nmetadata: {{name: dp}}\nspec:\n  leaderWorkerTemplate:\n    size: 2\n    workerTemplate:\n      spec:\n        containers: [{{name: v, command: [sh, -c, '{cmd}'], resources: {{limits: {{nvidia.com/gpu: 8}}}}}}]\n"
    )
}

#[test]
fn vllm_data_parallel_start_ranks_over_a_leader_worker_set() {
    // Each pod takes 8 DP ranks: $((LWS_WORKER_INDEX * 8)) covers 0..16 once.
    let r = check(read(&dp_lws("$((LWS_WORKER_INDEX * 8))")));
    assert!(
        r.errors.is_empty() && r.launch_errors.is_empty(),
        "{:?} {:?}",
        codes(&r),
        r.launch_errors
    );
    assert_eq!(
        r.launches[1].launch.args.last().map(String::as_str),
        Some("8")
    );
    // * 4 gives the second pod rank 4, inside the first pod's 0..8.
    let r = check(read(&dp_lws("$((LWS_WORKER_INDEX * 4))")));
    assert_eq!(
        codes(&r),
        ["multinode_ranks_invalid"],
        "{:?}",
        r.launch_errors
    );
    assert_eq!(r.errors[0].launch, "LeaderWorkerSet/dp/worker-1/v");
    let again = check(fixed(read(&dp_lws("$((LWS_WORKER_INDEX * 4))")), &r));
    assert!(again.errors.is_empty(), "{:?}", codes(&again));
}

#[test]
fn sglang_attention_tp_as_the_decode_maps_its_ranks() {
    let sg = |name: &str, mode: &str, extra: &str| {
        pod(
            name,
            &format!("sglang serve /models/deepseek-v3.2 --disaggregation-mode {mode} {extra}"),
        )
    };
    // A decode attention TP below the prefill's reads from its first prefill rank (MLA).
    let text =
        sg("p", "prefill", "--tp 8") + &sg("d", "decode", "--tp 8 --enable-dp-attention --dp 2");
    let r = check(read(&text));
    assert!(r.errors.is_empty(), "{:?}", codes(&r));
    // With the prefill's MLA KV sharded over its attention TP, equal sizes are needed.
    let text = sg("p", "prefill", "--tp 8 --enable-kv-cache-sharding")
        + &sg("d", "decode", "--tp 8 --enable-dp-attention --dp 2");
    let r = check(read(&text));
    assert_eq!(
        codes(&r),
        ["pd_attention_tp_mismatch"],
        "{:?}",
        r.launch_errors
    );
    assert!(r.errors[0]
        .engine_message
        .starts_with("MLA KV cache sharding requires equal"));
    let again = check(fixed(read(&text), &r));
    assert!(again.errors.is_empty(), "{:?}", codes(&again));
    // A larger decode attention TP that the prefill's does not divide: 8 over 3.
    let text =
        sg("p", "prefill", "--tp 6 --enable-dp-attention --dp 2") + &sg("d", "decode", "--tp 8");
    let r = check(read(&text));
    assert_eq!(
        codes(&r),
        ["pd_attention_tp_mismatch"],
        "{:?}",
        r.launch_errors
    );
    assert!(
        r.errors[0]
            .engine_message
            .contains("prefill attention-TP rank 3"),
        "{}",
        r.errors[0].engine_message
    );
}

#[test]
fn vllm_speculative_factors_are_hashed() {
    let mtp = |n: u32| {
        format!(
            r#"--speculative-config "{{\"method\":\"deepseek_mtp\",\"num_speculative_tokens\":{n}}}""#
        )
    };
    // MTP on the decode only: the hash differs (the prefill's fix copies it).
    let text = pod(
        "p",
        &format!("vllm serve /models/deepseek-v3.2 -tp 8 {NIXL_P}"),
    ) + &pod(
        "d",
        &format!("vllm serve /models/deepseek-v3.2 -tp 8 {} {NIXL_D}", mtp(2)),
    );
    let r = check(read(&text));
    assert_eq!(
        codes(&r),
        ["pd_speculative_mismatch"],
        "{:?}",
        r.launch_errors
    );
    assert_eq!(r.errors[0].launch, "Pod/p/c");
    let again = check(fixed(read(&text), &r));
    assert!(again.errors.is_empty(), "{:?}", codes(&again));
    // num_speculative_tokens is not hashed; deepseek_mtp is read as mtp.
    let text = pod(
        "p",
        &format!(
            r#"vllm serve /models/deepseek-v3.2 -tp 8 --speculative-config "{{\"method\":\"mtp\",\"num_speculative_tokens\":1}}" {NIXL_P}"#
        ),
    ) + &pod(
        "d",
        &format!("vllm serve /models/deepseek-v3.2 -tp 8 {} {NIXL_D}", mtp(3)),
    );
    let r = check(read(&text));
    assert!(r.errors.is_empty(), "{:?}", codes(&r));
}
