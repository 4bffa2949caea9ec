//! Issue 22 (vLLM side): advice that is right the first time. One paste of
//! the fixes gives a launch that passes, each fix sets a path once, and an
//! error is never folded into another's fix text.

use hisparse_core::check::check;
use hisparse_core::diagnostic::apply_fix;
use hisparse_core::plan::PlanOptions;
use hisparse_core::{resolve, Code, Diagnostic, FieldPath, FixOp, Report, ServeArgs};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A bundled model's directory (tests/data/models/NAME).
fn model_dir(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/models")
        .join(name)
        .display()
        .to_string()
}

fn args(mut doc: Value) -> ServeArgs {
    doc["model"] = json!(model_dir("deepseek-v3.2"));
    ServeArgs::from_json(doc).unwrap()
}

fn hisparse(host_pool_gib: Value) -> Value {
    json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"host_pool_gib": host_pool_gib}})
}

/// `args` with every error's fix of `r` applied in order.
fn all_fixed(args: &ServeArgs, r: &Report) -> ServeArgs {
    let mut doc = args.normalized().0.into_owned().to_json();
    for d in &r.errors {
        apply_fix(&mut doc, &d.fix).unwrap();
    }
    ServeArgs::from_json(doc).unwrap()
}

/// No fix of `r` sets one path twice.
fn sets_each_path_once(r: &Report) {
    for d in &r.errors {
        let mut seen = Vec::new();
        for op in &d.fix {
            if let FixOp::Set { path, .. } = op {
                assert!(
                    !seen.contains(path),
                    "{} sets {path} twice: {:?}",
                    d.code.as_str(),
                    d.fix
                );
                seen.push(path.clone());
            }
        }
    }
}

fn error(r: &Report, code: Code) -> &Diagnostic {
    r.errors
        .iter()
        .find(|e| e.code == code)
        .unwrap_or_else(|| panic!("no {} in {:?}", code.as_str(), r.errors))
}

/// Item 2: `--kv-cache-dtype int8`: the closest name, int8_per_token_head,
/// is one HiSparse refuses; the fix sets kv_cache_dtype once, to fp8_ds_mla,
/// and its text says that value.
#[test]
fn an_unknown_kv_cache_dtype_is_set_once_to_the_value_hisparse_takes() {
    let a = args(json!({"tensor_parallel_size": 8, "kv_cache_dtype": "int8",
                        "kv_transfer_config": hisparse(json!(64))}));
    let r = resolve(&a).unwrap();
    sets_each_path_once(&r);
    let d = error(&r, Code::InvalidValue);
    assert_eq!(
        d.fix,
        vec![FixOp::Set {
            path: FieldPath::root("kv_cache_dtype"),
            value: json!("fp8_ds_mla")
        }]
    );
    let hint = d.hint.as_deref().unwrap();
    assert!(
        hint.starts_with("set kv_cache_dtype to \"fp8_ds_mla\""),
        "{hint}"
    );
    assert!(hint.contains("int8_per_token_head"), "{hint}");
    assert!(resolve(&all_fixed(&a, &r)).unwrap().valid);
}

/// Item 5: `host_pool_gib` inside `hisparse_config` without a
/// HiSparseConnector: vLLM 0.33 refuses the key while it parses the flags
/// (HiSparseConfig forbids extra keys), so the stage is argparse and the
/// message says that refusal, not "only after the model has loaded".
#[test]
fn a_pool_in_hisparse_config_without_connector_says_argparse_once() {
    let a = args(json!({"tensor_parallel_size": 8,
        "attention_config": {"hisparse_config": {"host_pool_gib": 64}}}));
    let r = resolve(&a).unwrap();
    let d = error(&r, Code::HiSparseWithoutConnector);
    assert_eq!(d.stage.as_str(), "argparse");
    assert!(
        !d.message.contains("after the model has loaded"),
        "{}",
        d.message
    );
    assert!(
        d.message.contains("while it parses the flags"),
        "{}",
        d.message
    );
    // Without the key, vLLM finds out when it lays out the KV cache.
    let a = args(json!({"tensor_parallel_size": 8,
        "attention_config": {"hisparse_config": {}}}));
    let r = resolve(&a).unwrap();
    let d = error(&r, Code::HiSparseWithoutConnector);
    assert_eq!(d.stage.as_str(), "workers");
    assert!(
        d.message.contains("after the model has loaded"),
        "{}",
        d.message
    );
}

fn on_node(gpu: Option<&str>) -> PlanOptions {
    PlanOptions {
        host_memory_gib: Some(2048.0),
        gpu: gpu.map(str::to_owned),
        ..PlanOptions::default()
    }
}

/// Item 3: `-dp 8`, `host_pool_gib 512`, `--block-size 16` on a 2 TiB node:
/// the pools pin 4096 GiB whatever the block size, so the RAM problem is its
/// own `host_memory_exceeded` error, marked `revealed` (the RAM check runs
/// only once the block size passes), never folded into block_size's fix
/// text; its text offers the most the node's RAM pins, with and without `--gpu`.
#[test]
fn the_ram_problem_is_its_own_revealed_error() {
    let a = args(json!({"data_parallel_size": 8, "block_size": 16,
                        "kv_transfer_config": hisparse(json!(512))}));
    for gpu in [None, Some("h200")] {
        let r = check(&a, &on_node(gpu)).unwrap();
        let bs = error(&r, Code::BlockSizeUnsupported);
        assert_eq!(bs.fix.len(), 1, "{:?}", bs.fix);
        let hint = bs.hint.as_deref().unwrap();
        assert!(!hint.contains("host_pool_gib"), "{hint}");
        assert!(!bs.revealed);
        let ram = error(&r, Code::HostMemoryExceeded);
        assert!(ram.revealed, "{ram:?}");
        let hint = ram.hint.as_deref().unwrap();
        assert!(!hint.starts_with("once the other fixes"), "{hint}");
        assert!(
            hint.contains("to 243.19, the most this node's RAM pins"),
            "{hint}"
        );
        // JSON: `revealed` only where true.
        let j = serde_json::to_value(&r).unwrap();
        let errors = j["errors"].as_array().unwrap();
        assert_eq!(errors[0].get("revealed"), None);
        assert_eq!(errors[1]["revealed"], json!(true));
        sets_each_path_once(&r);
    }
    let r = check(&a, &on_node(None)).unwrap();
    assert!(check(&all_fixed(&a, &r), &on_node(None)).unwrap().valid);
}

fn h200() -> PlanOptions {
    PlanOptions {
        gpu: Some("h200".to_owned()),
        ..PlanOptions::default()
    }
}

/// Item 6: DeepSeek-V3.2 `-tp 4 -pp 2` on H200: the PP fix keeps the
/// deployment's 8 GPUs (tensor parallel 8), and the configuration it gives
/// passes the check with the GPU known.
#[test]
fn the_pipeline_fix_keeps_the_gpus() {
    let a = args(
        json!({"tensor_parallel_size": 4, "pipeline_parallel_size": 2,
                        "kv_cache_dtype": "fp8_ds_mla", "kv_transfer_config": hisparse(json!(64))}),
    );
    let r = check(&a, &h200()).unwrap();
    let d = error(&r, Code::PipelineParallelUnsupported);
    let set = |p: &str, v: i64| FixOp::Set {
        path: FieldPath::root(p),
        value: json!(v),
    };
    assert_eq!(
        d.fix,
        vec![
            set("pipeline_parallel_size", 1),
            set("tensor_parallel_size", 8)
        ]
    );
    assert!(r
        .fixed_flags
        .as_deref()
        .unwrap()
        .contains("--tensor-parallel-size 8"));
    let after = check(&all_fixed(&a, &r), &h200()).unwrap();
    assert!(after.valid, "{:?}", after.errors);
}

/// Item 6: with a GPU known, the plain check refuses weights that leave no
/// KV room (DeepSeek-V3.2 at TP 4 is about 157 GiB per 141 GiB H200), the
/// plan says the same error, and its fix is more tensor parallel ranks, not
/// "lower device_buffer_size".
#[test]
fn weights_that_leave_no_kv_room_are_refused_with_a_gpu_known() {
    let a = args(
        json!({"tensor_parallel_size": 4, "kv_cache_dtype": "fp8_ds_mla",
                        "kv_transfer_config": hisparse(json!(64))}),
    );
    assert!(resolve(&a).unwrap().valid, "without a GPU nothing is known");
    let r = check(&a, &h200()).unwrap();
    assert!(!r.valid);
    let d = error(&r, Code::NoGpuKvRoom);
    assert!(d.is_error());
    assert_eq!(d.stage.as_str(), "workers");
    assert_eq!(
        d.fix,
        vec![FixOp::Set {
            path: FieldPath::root("tensor_parallel_size"),
            value: json!(8)
        }]
    );
    assert!(!d.hint.as_deref().unwrap().contains("device_buffer_size"));
    assert!(check(&all_fixed(&a, &r), &h200()).unwrap().valid);
    let (_, plan) = hisparse_core::engines::vllm_0_33::plan::plan(&a, &h200()).unwrap();
    let plan = plan.unwrap();
    assert_eq!(plan.errors.len(), 1, "{:?}", plan.errors);
    assert_eq!(plan.errors[0], *d);
    assert!(plan.warnings.iter().all(|w| w.code != Code::NoGpuKvRoom));
}

/// Also: a fix writes a whole pool as the user wrote it, `128`, not `128.0`.
#[test]
fn a_fix_writes_a_whole_pool_as_an_integer() {
    let a = args(json!({"tensor_parallel_size": 8,
        "attention_config": {"hisparse_config": {"host_pool_gib": 128}}}));
    let r = resolve(&a).unwrap();
    let d = error(&r, Code::HiSparseWithoutConnector);
    let set = d
        .fix
        .iter()
        .find_map(|op| match op {
            FixOp::Set { path, value } if path.to_string() == "kv_transfer_config" => Some(value),
            _ => None,
        })
        .unwrap();
    let pool = &set["kv_connector_extra_config"]["host_pool_gib"];
    assert!(pool.is_u64() || pool.is_i64(), "{pool}");
    assert_eq!(pool.as_u64(), Some(128));
    let flags = r.fixed_flags.as_deref().unwrap();
    assert!(flags.contains("\"host_pool_gib\": 128}"), "{flags}");
    assert!(resolve(&all_fixed(&a, &r)).unwrap().valid);
}

/// Also: `kv_lora_rank: 0` through `--hf-overrides` is refused (no MLA
/// latent KV to offload); the fix removes the override.
#[test]
fn a_zero_kv_lora_rank_override_is_refused() {
    let a = args(
        json!({"tensor_parallel_size": 8, "hf_overrides": {"kv_lora_rank": 0},
                        "kv_transfer_config": hisparse(json!(64))}),
    );
    let r = resolve(&a).unwrap();
    assert!(!r.valid);
    let d = error(&r, Code::InvalidValue);
    assert_eq!(d.path.to_string(), "hf_overrides.kv_lora_rank");
    assert_eq!(d.stage.as_str(), "model_load");
    let after = resolve(&all_fixed(&a, &r)).unwrap();
    assert!(after.valid, "{:?}", after.errors);
    assert!(after.hisparse_enabled);
}

fn gpus(gpu: Option<&str>, per_node: Option<u64>) -> PlanOptions {
    PlanOptions {
        gpu: gpu.map(str::to_owned),
        gpus_per_node: per_node,
        host_memory_gib: Some(2048.0),
        ..PlanOptions::default()
    }
}

/// Item 9: `-tp 8 -dp 2` on one 8-GPU node is 16 GPUs: refused (vLLM's
/// workers fail on "DP adjusted local rank 8 is out of bounds for 8
/// devices", gpu_worker.py:487), with `--gpu h200` (the HGX H200's 8) or
/// `--gpus-per-node 8`; the fix keeps the 16 GPUs over 2 nodes and passes.
/// Without either, the node's GPUs are unknown and nothing is said.
#[test]
fn a_launch_over_the_nodes_gpus_is_refused_and_its_fix_keeps_them() {
    let a = args(json!({"tensor_parallel_size": 8, "data_parallel_size": 2,
                        "kv_transfer_config": hisparse(json!(64))}));
    for o in [gpus(Some("h200"), None), gpus(None, Some(8))] {
        let r = check(&a, &o).unwrap();
        let e = error(&r, Code::GpusPerNodeExceeded);
        assert_eq!(e.given, Some(json!(16)));
        assert!(e.message.contains("gpu_worker.py:487"), "{}", e.message);
        assert_eq!(
            e.fix,
            vec![FixOp::Set {
                path: FieldPath::root("nnodes"),
                value: json!(2)
            }]
        );
        let f = all_fixed(&a, &r);
        assert!(
            check(&f, &o).unwrap().valid,
            "{:?}",
            check(&f, &o).unwrap().errors
        );
    }
    // --gpu names its usual server in the message.
    let r = check(&a, &gpus(Some("h200"), None)).unwrap();
    assert!(error(&r, Code::GpusPerNodeExceeded)
        .message
        .contains("HGX H200"));
    // A node of 16 GPUs holds it; an unknown node is not checked.
    assert!(check(&a, &gpus(Some("h200"), Some(16))).unwrap().valid);
    assert!(check(&a, &gpus(Some("h200-nvl"), None)).unwrap().valid);
    assert!(check(&a, &gpus(None, None)).unwrap().valid);
    // One replica over the node's GPUs is refused while vLLM builds its
    // config (parallel.py:1068).
    let wide = args(json!({"tensor_parallel_size": 16, "kv_transfer_config": hisparse(json!(64))}));
    let r = check(&wide, &gpus(None, Some(8))).unwrap();
    let e = error(&r, Code::GpusPerNodeExceeded);
    assert!(e.message.contains("parallel.py:1068"), "{}", e.message);
    assert_eq!(serde_json::to_value(e.stage).unwrap(), json!("config"));
    // Out of range: a usage error.
    assert!(check(&a, &gpus(None, Some(0))).is_err());
}

/// Item 9, docs/cli.md: `-tp 8 -dp 3 --nnodes 2` on 8-GPU nodes: the
/// node-group fix was `--data-parallel-size-local 3`, 12 GPUs a node; with
/// the node's GPUs known it is 3 nodes of one replica, and the fixes pass.
#[test]
fn the_node_group_fix_fits_the_nodes_gpus() {
    let a = args(
        json!({"tensor_parallel_size": 8, "data_parallel_size": 3, "nnodes": 2,
                        "node_rank": 2, "kv_transfer_config": hisparse(json!(64))}),
    );
    let o = gpus(Some("h200"), None);
    let r = check(&a, &o).unwrap();
    sets_each_path_once(&r);
    let e = error(&r, Code::DataParallelLayoutInvalid);
    assert_eq!(
        e.fix,
        vec![
            FixOp::Set {
                path: FieldPath::root("nnodes"),
                value: json!(3)
            },
            FixOp::Set {
                path: FieldPath::root("data_parallel_size_local"),
                value: json!(1)
            },
        ]
    );
    let f = all_fixed(&a, &r);
    let after = check(&f, &o).unwrap();
    assert!(after.valid, "{:?}", after.errors);
    assert!(after
        .errors
        .iter()
        .all(|e| e.code != Code::GpusPerNodeExceeded));
}

/// Item 6 with DP: the weights-room fix raises TP and keeps the GPUs
/// (`-tp 4 -dp 2` on H200 becomes `-tp 8 -dp 1`, not 16 GPUs over 2 nodes).
#[test]
fn the_weights_room_fix_keeps_the_gpus_with_dp() {
    let a = args(json!({"tensor_parallel_size": 4, "data_parallel_size": 2,
                        "kv_transfer_config": hisparse(json!(64))}));
    let o = gpus(Some("h200"), None);
    let r = check(&a, &o).unwrap();
    let e = error(&r, Code::NoGpuKvRoom);
    assert_eq!(
        e.fix,
        vec![
            FixOp::Set {
                path: FieldPath::root("tensor_parallel_size"),
                value: json!(8)
            },
            FixOp::Set {
                path: FieldPath::root("data_parallel_size"),
                value: json!(1)
            },
        ]
    );
    assert!(check(&all_fixed(&a, &r), &o).unwrap().valid);
}

/// Item 9, SGLang: `--tp 16` on an 8-GPU node takes GPU ids past the node's
/// (model_runner.py:455, stage scheduler_start); the fix keeps the 16 GPUs
/// over 2 nodes and passes. `--tp 8 --dp-size 2` (replicas) is refused with
/// no fix that would change the deployment; attention DP inside the 8 GPUs
/// is one world and passes.
#[test]
fn sglang_launches_over_the_nodes_gpus_are_refused() {
    use hisparse_core::engines::sglang_0_5_23::{self as sg, SglangArgs};
    let sargs = |v: Value| {
        let mut a = json!({"model_path": model_dir("deepseek-v3.2"), "enable_hisparse": true,
                           "disable_radix_cache": true});
        for (k, x) in v.as_object().unwrap() {
            a[k] = x.clone();
        }
        SglangArgs::from_json(a).unwrap()
    };
    let o = gpus(Some("h200"), None);
    let a = sargs(json!({"tp_size": 16}));
    let r = sg::check(&a, &o).unwrap();
    let e = error(&r, Code::GpusPerNodeExceeded);
    assert_eq!(
        serde_json::to_value(e.stage).unwrap(),
        json!("scheduler_start")
    );
    assert!(e.message.contains("model_runner.py:455"), "{}", e.message);
    assert_eq!(
        e.fix,
        vec![FixOp::Set {
            path: FieldPath::root("nnodes"),
            value: json!(2)
        }]
    );
    let f = sg::fixes_applied(&a, &r.errors).unwrap();
    let after = sg::check(&f, &o).unwrap();
    assert!(
        after
            .errors
            .iter()
            .all(|e| e.code != Code::GpusPerNodeExceeded),
        "{:?}",
        after.errors
    );
    let r = sg::check(&sargs(json!({"tp_size": 8, "dp_size": 2})), &o).unwrap();
    let e = error(&r, Code::GpusPerNodeExceeded);
    assert!(e.fix.is_empty() && e.hint.as_deref().unwrap().contains("own launch"));
    let r = sg::check(
        &sargs(json!({"tp_size": 8, "dp_size": 2, "enable_dp_attention": true})),
        &o,
    )
    .unwrap();
    assert!(r.errors.iter().all(|e| e.code != Code::GpusPerNodeExceeded));
    // Unknown node: not checked.
    let r = sg::check(&a, &gpus(None, None)).unwrap();
    assert!(r.errors.iter().all(|e| e.code != Code::GpusPerNodeExceeded));
}

/// The "Also" list: a config.json without max_position_embeddings is vLLM's
/// 2048 tokens (config/model.py:2589-2595), not an error; and
/// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 makes a max_model_len over the model's a
/// warning, as vLLM only warns (config/model.py:2676; envs.py:1115 reads
/// "1" or "true", stripped, any case).
#[test]
fn vllms_default_length_and_its_long_length_variable() {
    let mut cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{}/config.json", model_dir("deepseek-v3.2"))).unwrap(),
    )
    .unwrap();
    cfg.as_object_mut()
        .unwrap()
        .remove("max_position_embeddings");
    let a = ServeArgs::from_json(json!({"hf_config": cfg, "tensor_parallel_size": 8,
                                        "kv_transfer_config": hisparse(json!(64))}))
    .unwrap();
    let r = resolve(&a).unwrap();
    assert!(r.valid, "{:?}", r.errors);
    assert_eq!(r.vllm_hisparse().unwrap().max_model_len.value, 2048);
    let long = |env: Option<&str>| {
        let mut doc = json!({"tensor_parallel_size": 8, "max_model_len": 200_000,
                             "kv_transfer_config": hisparse(json!(64))});
        if let Some(v) = env {
            doc["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = json!(v);
        }
        resolve(&args(doc)).unwrap()
    };
    assert_eq!(
        error(&long(None), Code::MaxModelLenTooLarge).given,
        Some(json!(200_000))
    );
    assert!(error(&long(Some("0")), Code::MaxModelLenTooLarge).fix.len() == 1);
    for on in ["1", " TRUE "] {
        let r = long(Some(on));
        assert!(
            r.errors.iter().all(|e| e.code != Code::MaxModelLenTooLarge),
            "{:?}",
            r.errors
        );
        assert!(r
            .warnings
            .iter()
            .any(|w| w.code == Code::MaxModelLenTooLarge));
    }
}

/// "A valid check does not say the RAM headroom it checked": with the node's
/// RAM given, a valid report says what the pools pin of the 95 % vLLM allows
/// and what is left (JSON `host_memory`); without it, or invalid, nothing.
#[test]
fn a_valid_check_says_the_ram_headroom_it_checked() {
    let a = args(json!({"tensor_parallel_size": 8, "kv_transfer_config": hisparse(json!(128))}));
    let r = check(&a, &on_node(None)).unwrap();
    assert!(r.valid, "{:?}", r.errors);
    let m = r.host_memory.as_ref().expect("the RAM it checked");
    let gib = 1u64 << 30;
    assert_eq!(m.host_memory_gib, 2048.0);
    assert_eq!(m.source, "given with --host-memory-gib");
    assert_eq!(m.pools_per_node, 1);
    assert!(
        m.pool_bytes <= 128 * gib && m.pool_bytes > 127 * gib,
        "{}",
        m.pool_bytes
    );
    assert_eq!(m.pinned_bytes, m.pool_bytes);
    assert_eq!(m.usable_bytes, (2048.0 * gib as f64 * 0.95) as u64);
    assert_eq!(m.left_bytes, m.usable_bytes - m.pinned_bytes);
    assert!(m.rule.contains("check_hisparse_host_memory"), "{}", m.rule);
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["host_memory"]["left_bytes"], json!(m.left_bytes));
    // Without the node's RAM: the warning that it was not checked, no figures.
    let r = check(&a, &PlanOptions::default()).unwrap();
    assert!(r.valid && r.host_memory.is_none());
    assert!(r
        .warnings
        .iter()
        .any(|w| w.code == Code::HostMemoryNotGiven));
    assert!(serde_json::to_value(&r)
        .unwrap()
        .get("host_memory")
        .is_none());
    // Over the RAM: the error, no headroom.
    let over =
        args(json!({"tensor_parallel_size": 8, "kv_transfer_config": hisparse(json!(4000))}));
    let r = check(&over, &on_node(None)).unwrap();
    assert!(!r.valid && r.host_memory.is_none());
}
