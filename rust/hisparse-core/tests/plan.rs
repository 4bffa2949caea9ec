//! The capacity planner on real model configs: hand-computed figures, the
//! cases from the field (issue 3), and properties (monotone in context length
//! and host_pool_gib, HiSparse never below the baseline, no overflow at 1 M
//! tokens and 1 TiB pools).

mod common;

use hisparse_core::diagnostic::apply_fix;
use hisparse_core::engines::vllm_0_33::plan::plan;
use hisparse_core::plan::{Limit, Plan, PlanOptions, PoolMode};
use hisparse_core::{Code, FixOp, ServeArgs};
use proptest::prelude::*;
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;

fn model(dir: &str) -> Value {
    let path = format!(
        "{}/../../tests/data/models/{dir}/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn hisparse(host_pool_gib: f64) -> Value {
    json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"host_pool_gib": host_pool_gib}})
}

fn args(dir: &str, host_pool_gib: f64) -> ServeArgs {
    ServeArgs {
        hf_config: Some(model(dir)),
        kv_transfer_config: Some(hisparse(host_pool_gib)),
        kv_cache_dtype: Some("fp8_ds_mla".into()),
        ..ServeArgs::default()
    }
}

fn planned(args: &ServeArgs, options: &PlanOptions) -> Plan {
    let (report, plan) = plan(args, options).unwrap();
    assert!(report.valid, "{:#?}", report.errors);
    plan.expect("a valid HiSparse configuration has a plan")
}

/// Host memory given, so no test reads this machine's RAM.
fn opts() -> PlanOptions {
    PlanOptions {
        host_memory_gib: Some(2048.0),
        ..PlanOptions::default()
    }
}

#[test]
fn dsv32_one_million_tokens_of_host_kv_use_656_bytes() {
    // Field case: budgets that used 576 instead of 656 B for fp8_ds_mla.
    let mut a = args("deepseek-v3.2", 64.0);
    a.hf_overrides = Some(json!({"max_position_embeddings": 1_048_576}));
    a.max_model_len = Some(1_000_000);
    let p = planned(&a, &opts());
    assert_eq!(p.sizes.mla_row_bytes, 656);
    assert_eq!(p.sizes.sparse_mla_layers, 61);
    assert_eq!(p.sizes.mla_bytes_per_token, 656 * 61);
    assert_eq!(p.at_context.context_length, 1_000_000);
    assert_eq!(p.at_context.host_kv_bytes_per_request, 40_016_000_000);
    // Indexer keys are counted separately: 132 B x 61 indexer layers per token, on the GPU.
    assert_eq!(p.sizes.indexer_row_bytes, 132);
    assert_eq!(p.sizes.indexer_layers, 61);
    assert_eq!(p.at_context.indexer_bytes_per_request, 8_052_000_000);
    // The sweep doubles from 8K and ends at max_model_len.
    let contexts: Vec<u64> = p.sweep.iter().map(|x| x.context_length).collect();
    assert_eq!(
        contexts,
        [8192, 16384, 32768, 65536, 131072, 262144, 524288, 1_000_000]
    );
}

#[test]
fn gpu_blocks_never_resize_the_host_pool() {
    // Field case: host_pool_gib 32, 64-token blocks -> 2,561,024 B blocks, 13,416 of
    // them, whatever the GPU holds.
    let mut figures = Vec::new();
    for kv in [1u64 << 30, 20 << 30, 80 << 30] {
        let mut a = args("deepseek-v3.2", 32.0);
        a.block_size = Some(64);
        a.kv_cache_memory_bytes = Some(kv as i64);
        let p = planned(&a, &opts());
        assert_eq!(p.host.host_block_bytes, 2_561_024);
        assert_eq!(p.host.host_blocks, 13_416);
        figures.push(p.gpu.hisparse_blocks.unwrap());
    }
    assert!(figures[0] < figures[1] && figures[1] < figures[2]);
}

#[test]
fn shared_and_private_tp_pools_pin_different_physical_memory() {
    // Field case: host_pool_gib 100 at TP 4: shared pins 100 GiB per node, private 400.
    let mut shared = args("deepseek-v3.2", 100.0);
    shared.tensor_parallel_size = Some(4);
    let mut private = shared.clone();
    private.distributed_executor_backend = Some("ray".into());
    let small_node = PlanOptions {
        host_memory_gib: Some(256.0),
        ..PlanOptions::default()
    };

    let s = planned(&shared, &small_node);
    assert_eq!(s.host.mode, PoolMode::Shared);
    assert_eq!(s.host.pools_per_node, 1);
    assert!(s.host.pinned_bytes_per_node <= 100 * GIB);
    assert!(s.host.pinned_bytes_per_node > 99 * GIB);
    assert!(s.valid, "{:#?}", s.errors);

    let p = planned(&private, &small_node);
    assert_eq!(p.host.mode, PoolMode::Private);
    assert_eq!(p.host.pools_per_node, 4);
    assert!(p.host.pinned_bytes_per_node <= 400 * GIB);
    assert!(p.host.pinned_bytes_per_node > 399 * GIB);
    // The RAM check uses the physical figure: 400 GiB > 95 % of 256 GiB.
    assert!(!p.valid);
    let e = &p.errors[0];
    assert_eq!(e.code, Code::HostMemoryExceeded);
    assert_eq!(
        e.path.to_string(),
        "kv_transfer_config.kv_connector_extra_config.host_pool_gib"
    );
    for needle in ["host_pool_gib 100", "4 ranks", "243.2 GiB usable"] {
        assert!(
            e.message.contains(needle),
            "{needle:?} not in {}",
            e.message
        );
    }
    // The fix passes when applied.
    let mut doc = private.to_json();
    apply_fix(&mut doc, &e.fix).unwrap();
    let fixed = ServeArgs::from_json(doc).unwrap();
    let p = planned(&fixed, &small_node);
    assert!(p.valid, "{:#?}", p.errors);
    assert!(p.host.host_pool_gib > 60.0 && p.host.host_pool_gib < 61.0);
}

#[test]
fn each_node_pins_its_share_of_the_pools() {
    // vLLM spreads the world evenly over --nnodes (arg_utils.py:2421): with
    // DP 2 x TP 8 on 2 nodes each node holds one replica and its shared pool;
    // TP 16 over 2 nodes is private (a replica spans nodes): 8 pools a node.
    let mut a = args("deepseek-v3.2", 100.0);
    a.tensor_parallel_size = Some(8);
    a.data_parallel_size = Some(2);
    let one = planned(&a, &opts());
    assert_eq!(
        (one.host.mode, one.host.pools_per_node),
        (PoolMode::Shared, 2)
    );
    a.nnodes = Some(2);
    let two = planned(&a, &opts());
    assert_eq!(
        (two.host.mode, two.host.pools_per_node),
        (PoolMode::Shared, 1)
    );
    assert!(two
        .host
        .mode_rule
        .contains("1 DP replica on this node (2 nodes)"));
    let mut wide = args("deepseek-v3.2", 100.0);
    wide.tensor_parallel_size = Some(16);
    wide.nnodes = Some(2);
    let p = planned(&wide, &opts());
    assert_eq!((p.host.mode, p.host.pools_per_node), (PoolMode::Private, 8));
    assert_eq!(p.host.pinned_bytes_per_node, 8 * p.host.pool_bytes);
}

#[test]
fn data_parallel_size_local_is_the_replicas_on_this_node() {
    // The trial's launch (vLLM multi-node DP without --nnodes): -dp 16 -dpl 8
    // on each node, TP 1, so this node pins 8 private pools, not 16
    // (vllm/engine/arg_utils.py:2486). 8 x 200 GiB fit in 95 % of 2048 GiB.
    let mut a = args("deepseek-v3.2", 200.0);
    a.data_parallel_size = Some(16);
    a.data_parallel_size_local = Some(8);
    a.enable_expert_parallel = Some(true);
    let p = planned(&a, &opts());
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.host.pools_per_node, 8);
    assert_eq!(p.host.pinned_bytes_per_node, 8 * p.host.pool_bytes);
    assert!(p
        .host
        .mode_rule
        .contains("8 DP replicas on this node (--data-parallel-size-local 8)"));
    // 8 x 300 GiB = 2400 GiB do not: the fix is the largest pool 8 fit.
    a.kv_transfer_config = Some(hisparse(300.0));
    let (report, p) = plan(&a, &opts()).unwrap();
    assert!(report.valid);
    let p = p.unwrap();
    assert!(!p.valid);
    let e = &p.errors[0];
    assert_eq!(e.code, Code::HostMemoryExceeded);
    assert!(e.message.contains("across 8 pools"), "{}", e.message);
    let mut doc = a.to_json();
    apply_fix(&mut doc, &e.fix).unwrap();
    let fixed = planned(&ServeArgs::from_json(doc).unwrap(), &opts());
    assert!(fixed.valid, "{:#?}", fixed.errors);
    assert!(fixed.host.host_pool_gib > 243.0 && fixed.host.host_pool_gib < 244.0);
    // The same figures from check(), with the node's RAM given.
    let node = PlanOptions {
        gpu: Some("h200".into()),
        ..opts()
    };
    a.kv_transfer_config = Some(hisparse(200.0));
    assert!(hisparse_core::check::check(&a, &node).unwrap().valid);
    a.kv_transfer_config = Some(hisparse(300.0));
    let r = hisparse_core::check::check(&a, &node).unwrap();
    assert_eq!(r.errors[0].code, Code::HostMemoryExceeded);
    // Shared pools: DP 2 x TP 8, one replica a node, also with --nnodes 2.
    let mut shared = args("deepseek-v3.2", 100.0);
    shared.tensor_parallel_size = Some(8);
    shared.data_parallel_size = Some(2);
    shared.data_parallel_size_local = Some(1);
    let one = planned(&shared, &opts());
    assert_eq!(
        (one.host.mode, one.host.pools_per_node),
        (PoolMode::Shared, 1)
    );
    shared.nnodes = Some(2);
    let two = planned(&shared, &opts());
    assert_eq!(
        (two.host.mode, two.host.pools_per_node),
        (PoolMode::Shared, 1)
    );
    // Two a node over 2 nodes is one node group: each replica spans both
    // nodes (parallel.py:811), so its TP ranks keep private pools, 8 a node.
    shared.data_parallel_size_local = Some(2);
    let spans = planned(&shared, &opts());
    assert_eq!(
        (spans.host.mode, spans.host.pools_per_node),
        (PoolMode::Private, 8)
    );
    // A node that runs no replica (the API server alone) pins no pool.
    let mut api = args("deepseek-v3.2", 1000.0);
    api.data_parallel_size = Some(16);
    api.data_parallel_size_local = Some(0);
    let none = planned(&api, &opts());
    assert!(none.valid, "{:#?}", none.errors);
    assert_eq!(
        (none.host.pools_per_node, none.host.pinned_bytes_per_node),
        (0, 0)
    );
}

#[test]
fn pools_that_fit_alone_but_not_together_name_the_deviation() {
    // vLLM 0.33 checks each pool alone as its rank allocates it
    // (check_hisparse_host_memory): 4 private pools of 100 GiB on a node with
    // 256 GiB each fit alone, so the error names host_pools_fit_alone. One
    // problem, one diagnostic: no warning repeats the error's figures.
    let mut private = args("deepseek-v3.2", 100.0);
    private.tensor_parallel_size = Some(4);
    private.distributed_executor_backend = Some("ray".into());
    let node = PlanOptions {
        host_memory_gib: Some(256.0),
        host_memory_source: Some("this node's available RAM".into()),
        ..PlanOptions::default()
    };
    let (_, p) = plan(&private, &node).unwrap();
    let p = p.unwrap();
    assert_eq!(p.errors[0].code, Code::HostMemoryExceeded);
    let m = &p.errors[0].message;
    assert!(m.contains("this node's available RAM"), "{m}");
    assert!(m.contains("across 4 pools"), "{m}");
    assert!(m.contains("each pool (100.00 GiB) fits alone"), "{m}");
    assert!(m.contains("(deviation host_pools_fit_alone)"), "{m}");
    assert!(
        p.warnings.iter().all(|w| w.code != Code::HostPoolsFitAlone),
        "{:#?}",
        p.warnings
    );
    assert!(
        hisparse_core::engines::vllm_0_33::deviations::deviation(Code::HostPoolsFitAlone).is_some()
    );
    // The check (not only the planner) says the same, in one diagnostic.
    let r = hisparse_core::check::check(&private, &node).unwrap();
    let at: Vec<(Code, String)> = r
        .errors
        .iter()
        .chain(&r.warnings)
        .filter(|d| d.path == r.errors[0].path)
        .map(|d| (d.code, d.message.clone()))
        .collect();
    assert_eq!(at.len(), 1, "{at:#?}");
    assert_eq!(at[0].0, Code::HostMemoryExceeded);
    assert!(
        at[0].1.contains("(deviation host_pools_fit_alone)"),
        "{}",
        at[0].1
    );
    // One pool too large for the node fails in vLLM too: no deviation.
    let mut shared = args("deepseek-v3.2", 300.0);
    shared.tensor_parallel_size = Some(4);
    let (_, p) = plan(&shared, &node).unwrap();
    let p = p.unwrap();
    assert_eq!(p.errors[0].code, Code::HostMemoryExceeded);
    assert!(!p.errors[0].message.contains("host_pools_fit_alone"));
    assert!(p.warnings.iter().all(|w| w.code != Code::HostPoolsFitAlone));
}

#[test]
fn host_memory_source_is_bounded_and_needs_the_figure() {
    let a = args("deepseek-v3.2", 64.0);
    let alone = PlanOptions {
        host_memory_source: Some("x".into()),
        ..PlanOptions::default()
    };
    assert!(plan(&a, &alone).is_err());
    let long = PlanOptions {
        host_memory_source: Some("x".repeat(513)),
        ..opts()
    };
    let err = plan(&a, &long).unwrap_err().to_string();
    assert!(err.contains("at most 512"), "{err}");
}

#[test]
fn a_shorter_context_when_even_the_start_up_minimum_does_not_fit() {
    // 8 pools of at least the start-up minimum at 163840 tokens on 30.4
    // usable GiB: the pool that fits (3.79 GiB) starts a shorter context; the fix says both.
    let mut a = args("deepseek-v3.2", 100.0);
    a.data_parallel_size = Some(8);
    let tiny = PlanOptions {
        host_memory_gib: Some(32.0),
        ..PlanOptions::default()
    };
    let p = planned(&a, &tiny);
    let e = &p.errors[0];
    assert_eq!(e.code, Code::HostMemoryExceeded);
    let [FixOp::Set { value: pool, .. }, FixOp::Set { path, value: len }] = e.fix.as_slice() else {
        panic!("a pool and a max_model_len: {:?}", e.fix);
    };
    assert_eq!(path.to_string(), "max_model_len");
    let len = len.as_u64().unwrap();
    assert_eq!(pool.as_f64(), Some(3.79));
    assert!(len > 0 && len < 163_840 && len % 64 == 0, "{len}");
    assert!(e
        .hint
        .as_deref()
        .unwrap()
        .contains(&format!("max_model_len to {len}")));
    let mut doc = a.normalized().0.into_owned().to_json();
    apply_fix(&mut doc, &e.fix).unwrap();
    let fixed = ServeArgs::from_json(doc).unwrap();
    assert!(planned(&fixed, &tiny)
        .errors
        .iter()
        .all(|e| e.code != Code::HostMemoryExceeded));
}

#[test]
fn no_fix_when_not_one_block_of_context_fits() {
    let mut a = args("deepseek-v3.2", 100.0);
    a.data_parallel_size = Some(8);
    let tiny = PlanOptions {
        host_memory_gib: Some(0.05),
        ..PlanOptions::default()
    };
    let p = planned(&a, &tiny);
    let e = &p.errors[0];
    assert_eq!(e.code, Code::HostMemoryExceeded);
    assert!(e.fix.is_empty());
    assert!(e
        .hint
        .as_deref()
        .unwrap()
        .contains("no host_pool_gib and max_model_len fix this"));
}

#[test]
fn glm52_calculator_case() {
    // HISPARSE.md §5's worked case, GLM-5.3 on H200 TP8 FP8, dbs 4096, 17.85 GiB of
    // KV room: 80K 4 vs 39, 1M 0 vs 5, 134 / 219 GiB host. GLM-5.3's config.json is
    // not in tests/data; GLM-5.2 (78 layers, IndexShare: 21 indexer layers, 1M
    // context) is the nearest and reproduces the baseline (4 and 0) and the 1M
    // HiSparse figure (5). At 80K vLLM 0.33's layout gives 34, not 39: its hot
    // groups follow index-group boundaries and fill at most one indexer page
    // (177,408 B), so GLM-5.2 gets 20 groups, where the calculator packs 5 layers
    // per 209,920 B block (16 groups: 91,302 / (1280 + 16 x 66) = 39), and its
    // steady state admits one request with each resident group's in-flight window
    // (4096 tokens, the GPU not given: 1 + (91,302 - 3840) / 2600 = 34). Its host
    // figures use 576 B per token per layer, not fp8_ds_mla's 656
    // (39 x 81920 x 576 x 78 B = 133.7 GiB); here 656 gives 132.8 GiB for 34.
    let mut a = args("glm-5.2", 512.0);
    a.tensor_parallel_size = Some(8);
    a.max_num_seqs = Some(1024);
    a.kv_cache_memory_bytes = Some((17.85 * GIB as f64) as i64);
    let p = planned(
        &a,
        &PlanOptions {
            context_length: Some(81920),
            ..opts()
        },
    );
    assert_eq!(p.sizes.device_buffer_size, 4096);
    assert_eq!(p.sizes.indexer_layers, 21);
    assert_eq!(p.sizes.hot_groups, 20);
    assert_eq!(p.sizes.hisparse_block_bytes, 209_920);
    assert_eq!(p.sizes.baseline_block_bytes, 64 * (656 * 78 + 132 * 21));
    assert_eq!(p.gpu.hisparse_blocks, Some(91_302));
    let at80k = &p.at_context;
    assert_eq!(at80k.baseline_requests, Some(4));
    assert_eq!(at80k.hisparse_gpu_blocks_per_request, 1280 + 20 * (64 + 2));
    assert_eq!(at80k.hisparse_requests, Some(34));
    assert_eq!(at80k.hisparse_limit, Some(Limit::Gpu));
    assert_eq!(at80k.target_requests, Some(34));
    // 34 x 1280 blocks of 3,276,800 B (64 x 656 x 78, rounded up to 4 KiB: TP 8 shares the pool).
    assert_eq!(p.host.host_block_stride, 3_276_800);
    assert_eq!(at80k.min_host_pool_gib, Some(132.82));
    let at1m = p.sweep.last().unwrap();
    assert_eq!(at1m.context_length, 1_048_576);
    assert_eq!(at1m.baseline_requests, Some(0));
    assert_eq!(at1m.hisparse_requests, Some(5));
}

#[test]
fn glm5_hand_computed_layout() {
    // 78 layers, each with an indexer: indexer page 64 x 132 x 78 = 658,944 B; 15 MLA
    // pages (41,984 B) fit, so 6 hot groups; a pool block is 16 MLA pages.
    let mut a = args("glm-5", 256.0);
    a.kv_cache_memory_bytes = Some(40 * GIB as i64);
    a.max_model_len = Some(131_072);
    let p = planned(
        &a,
        &PlanOptions {
            context_length: Some(32768),
            ..opts()
        },
    );
    assert_eq!(p.sizes.indexer_layers, 78);
    assert_eq!(p.sizes.hot_groups, 6);
    assert_eq!(p.sizes.hisparse_block_bytes, 671_744);
    assert_eq!(p.sizes.baseline_block_bytes, 64 * 788 * 78);
    // 40 GiB / 3,933,696 B = 10,918 baseline blocks; 512 per 32K request: 21.
    assert_eq!(p.gpu.baseline_blocks, Some(10_918));
    assert_eq!(p.at_context.baseline_requests, Some(21));
    // 40 GiB / 671,744 B = 63,937 blocks; 512 + 6 x 66 = 908 per request: 70.
    assert_eq!(p.gpu.hisparse_blocks, Some(63_937));
    assert_eq!(p.at_context.hisparse_requests, Some(70));
    // Host: 256 GiB / 3,274,752 B (TP 1: packed) = 83,940 blocks; 163 requests of 512.
    assert_eq!(p.at_context.host_limit, 163);
    assert_eq!(p.at_context.hisparse_gpu_bytes_per_request, 908 * 671_744);
    assert_eq!(p.sizes.hot_buffer_bytes, 4096 * 656 * 78);
}

#[test]
fn dsv32_hot_buffer_matches_the_spec() {
    // HISPARSE.md §5: 4096 x 656 x 61 = 163,905,536 B per request.
    let p = planned(&args("deepseek-v3.2", 64.0), &opts());
    assert_eq!(p.sizes.hot_buffer_bytes, 163_905_536);
    assert_eq!(p.sizes.hot_groups, 6);
    assert_eq!(p.sizes.hisparse_block_bytes, 545_792);
    // No GPU memory given: no GPU figures, host figures still there.
    assert_eq!(p.gpu.kv_bytes_per_gpu, None);
    assert_eq!(p.at_context.hisparse_requests, None);
    assert_eq!(p.at_context.host_limit, 64 * GIB / 2_561_024 / 2560);
}

#[test]
fn limits_are_named() {
    let mut a = args("deepseek-v3.2", 16.0);
    a.kv_cache_memory_bytes = Some(60 * GIB as i64);
    a.max_num_seqs = Some(8);
    let p = planned(
        &a,
        &PlanOptions {
            context_length: Some(8192),
            ..opts()
        },
    );
    // 8 seqs cap both at 8K.
    assert_eq!(p.at_context.baseline_limit, Some(Limit::MaxNumSeqs));
    assert_eq!(p.at_context.hisparse_requests, Some(8));
    // At 128K the 16 GiB host pool binds HiSparse (6,708 blocks / 2,048 = 3), but the
    // baseline holds more (60 GiB / 3,076,352 B = 20,942 blocks / 2048 = 10 -> 8 seqs).
    let at128k = p
        .sweep
        .iter()
        .find(|x| x.context_length == 131_072)
        .unwrap();
    assert_eq!(at128k.host_limit, 3);
    assert_eq!(at128k.hisparse_limit, Some(Limit::Baseline));
    assert_eq!(at128k.hisparse_requests, at128k.baseline_requests);
}

#[test]
fn gpu_room_from_gpu_memory_and_estimated_weights() {
    let mut a = args("deepseek-v3.2", 128.0);
    a.tensor_parallel_size = Some(8);
    let p = planned(
        &a,
        &PlanOptions {
            gpu_memory_gib: Some(140.0),
            ..opts()
        },
    );
    assert!(p.gpu.weights_estimated);
    assert_eq!(p.gpu.gpu_memory_utilization, 0.92);
    assert_eq!(p.gpu.max_num_seqs, 1024);
    let w = p.gpu.weights_bytes_per_gpu.unwrap();
    assert!((75 * GIB..82 * GIB).contains(&w), "{w}");
    assert_eq!(
        p.gpu.kv_bytes_per_gpu,
        Some((140.0 * GIB as f64 * 0.92) as u64 - w)
    );
    // Given weights replace the estimate.
    let p = planned(
        &a,
        &PlanOptions {
            gpu_memory_gib: Some(140.0),
            weights_gib: Some(80.0),
            ..opts()
        },
    );
    assert!(!p.gpu.weights_estimated);
    assert_eq!(p.gpu.weights_bytes_per_gpu, Some(80 * GIB));
    // GLM-5 in bf16 does not fit 8 x 80 GiB: no KV room, an error (issue 22:
    // the plain check's, with its fix), not plan_serves_no_requests.
    let mut glm = args("glm-5", 64.0);
    glm.tensor_parallel_size = Some(8);
    glm.max_model_len = Some(65536);
    let p = planned(
        &glm,
        &PlanOptions {
            gpu_memory_gib: Some(80.0),
            ..opts()
        },
    );
    assert_eq!(p.gpu.kv_bytes_per_gpu, Some(0));
    assert!(p
        .errors
        .iter()
        .any(|e| e.code == Code::NoGpuKvRoom && e.is_error()));
    assert!(p
        .errors
        .iter()
        .all(|e| e.code != Code::PlanServesNoRequests));
}

#[test]
fn mtp_adds_draft_layers_with_their_own_indexer() {
    let mut a = args("glm-5.2", 256.0);
    a.speculative_config = Some(json!({"method": "mtp", "num_speculative_tokens": 1}));
    a.max_model_len = Some(131_072);
    let p = planned(&a, &opts());
    assert_eq!(p.sizes.sparse_mla_layers, 79);
    assert_eq!(p.sizes.draft_layers, 1);
    assert_eq!(p.sizes.indexer_layers, 22);
    assert_eq!(p.host.draft_model, None);
    // A separate draft model gets no HiSparse pool, and the plan says so.
    let mut eagle = args("deepseek-v3.2", 64.0);
    eagle.speculative_config =
        Some(json!({"method": "eagle", "model": "x", "num_speculative_tokens": 2}));
    let p = planned(&eagle, &opts());
    assert_eq!(p.sizes.draft_layers, 0);
    assert!(p.host.draft_model.unwrap().contains("eagle"));
}

#[test]
fn invalid_configurations_have_no_plan() {
    let mut a = args("deepseek-v3.2", 64.0);
    a.block_size = Some(16);
    let (report, p) = plan(&a, &opts()).unwrap();
    assert!(!report.valid);
    assert!(p.is_none());
    let (report, p) = plan(
        &ServeArgs {
            hf_config: Some(model("deepseek-v3.2")),
            ..ServeArgs::default()
        },
        &opts(),
    )
    .unwrap();
    // Without HiSparse: the plan of the HiSparseConnector it would take, said so.
    let p = p.expect("an assumed plan");
    assert!(report.valid && !report.hisparse_enabled);
    let assumed = p.assumed.expect("labelled as assumed");
    assert_eq!(
        assumed.kv_transfer_config["kv_connector"],
        "HiSparseConnector"
    );
    // A prefill instance (kv_producer) never decodes: no assumed plan for it
    // (a pool there is pinned and unused), said so; its decode peer plans.
    for (role, plannable) in [("kv_producer", false), ("kv_consumer", true)] {
        let prefill = ServeArgs {
            hf_config: Some(model("deepseek-v3.2")),
            kv_transfer_config: Some(
                serde_json::json!({"kv_connector": "NixlConnector", "kv_role": role}),
            ),
            ..ServeArgs::default()
        };
        match plan(&prefill, &opts()) {
            Ok((_, Some(p))) => assert!(plannable && p.assumed.is_some(), "{role}"),
            Err(e) => assert!(
                !plannable && e.to_string().contains("prefill instance"),
                "{role}: {e}"
            ),
            Ok((_, None)) => panic!("{role}: neither a plan nor an error"),
        }
    }
    // Options out of range are usage errors.
    for bad in [
        PlanOptions {
            context_length: Some(200_000),
            ..opts()
        },
        PlanOptions {
            context_length: Some(0),
            ..opts()
        },
        PlanOptions {
            host_memory_gib: Some(-1.0),
            ..opts()
        },
        PlanOptions {
            gpu_memory_gib: Some(f64::NAN),
            ..opts()
        },
    ] {
        assert!(plan(&args("deepseek-v3.2", 64.0), &bad).is_err(), "{bad:?}");
    }
}

// ---------------------------------------------------------------------------
// Properties.

/// A DSA config at up to 2 M tokens, any dtype/block/TP/pool/KV room.
fn arb_case() -> impl Strategy<Value = (ServeArgs, PlanOptions)> {
    (
        prop::sample::select(vec!["deepseek-v3.2", "glm-5", "glm-5.2"]),
        prop::sample::select(vec!["fp8_ds_mla", "bfloat16"]),
        prop::sample::select(vec![64i64, 128, 256]),
        1i64..=8,
        1i64..=4,
        prop::sample::select(vec![16.0f64, 100.0, 500.0, 1024.0]),
        (1u64..=2048).prop_map(|g| g * GIB),
        prop::sample::select(vec![65_536u64, 1_000_000, 2_097_152]),
        prop::option::of(1i64..=2048),
    )
        .prop_map(|(dir, dtype, block, tp, dp, pool, kv, len, seqs)| {
            let a = ServeArgs {
                hf_config: Some(model(dir)),
                hf_overrides: Some(json!({"max_position_embeddings": 2_097_152})),
                kv_transfer_config: Some(hisparse(pool)),
                kv_cache_dtype: Some(dtype.into()),
                block_size: Some(block),
                tensor_parallel_size: Some(tp),
                data_parallel_size: Some(dp),
                max_model_len: Some(len as i64),
                kv_cache_memory_bytes: Some(kv as i64),
                max_num_seqs: seqs,
                ..ServeArgs::default()
            };
            (a, opts())
        })
}

/// The plan, or None when the host pool is too small for the context (an invalid config).
fn maybe_plan(a: &ServeArgs, o: &PlanOptions) -> Option<Plan> {
    plan(a, o).unwrap().1
}

proptest! {
    #![proptest_config(common::config(64))]

    #[test]
    fn monotone_in_context_and_never_below_baseline(common::Brief((a, o)) in common::brief(arb_case())) {
        let Some(p) = maybe_plan(&a, &o) else { return Ok(()) };
        for w in p.sweep.windows(2) {
            let (x, y) = (&w[0], &w[1]);
            prop_assert!(x.context_length < y.context_length);
            prop_assert!(y.baseline_requests <= x.baseline_requests);
            prop_assert!(y.hisparse_requests <= x.hisparse_requests);
            prop_assert!(y.host_limit <= x.host_limit);
            prop_assert!(y.hisparse_gpu_bytes_per_request >= x.hisparse_gpu_bytes_per_request);
        }
        for x in &p.sweep {
            prop_assert!(x.hisparse_requests >= x.baseline_requests);
            prop_assert!(x.hisparse_requests.unwrap() <= p.gpu.max_num_seqs);
            // The suggested pool really holds what it says: its target, or
            // fewer only when the node's RAM caps it (and then it fits).
            if let (Some(n), Some(gib)) = (x.target_requests, x.min_host_pool_gib) {
                let stride = p.host.host_block_stride;
                let blocks = hisparse_core::sizes::pool_blocks(gib, stride);
                let held = x.min_host_pool_requests.unwrap();
                prop_assert!(blocks / x.host_blocks_per_request >= held);
                prop_assert!(blocks >= p.host.min_host_blocks);
                if held < n {
                    let pinned = (blocks * stride).div_ceil(4096) * 4096 * p.host.pools_per_node;
                    prop_assert!(p.host.host_memory_given);
                    prop_assert!(pinned <= p.host.usable_host_memory_bytes.unwrap());
                }
            }
        }
    }

    #[test]
    fn monotone_in_host_pool(common::Brief((a, o)) in common::brief(arb_case()), extra in 1.0f64..512.0) {
        let Some(small) = maybe_plan(&a, &o) else { return Ok(()) };
        let mut bigger = a.clone();
        bigger.kv_transfer_config = Some(hisparse(small.host.host_pool_gib + extra));
        let big = maybe_plan(&bigger, &o).expect("a bigger pool still starts");
        prop_assert!(big.host.host_blocks >= small.host.host_blocks);
        prop_assert!(big.host.pinned_bytes_per_node >= small.host.pinned_bytes_per_node);
        for (x, y) in small.sweep.iter().zip(&big.sweep) {
            prop_assert!(y.host_limit >= x.host_limit);
            prop_assert!(y.hisparse_requests >= x.hisparse_requests);
        }
    }
}

#[test]
fn no_overflow_at_one_million_tokens_and_one_tib_pools() {
    let mut a = args("glm-5.2", 1024.0);
    a.kv_cache_dtype = Some("bfloat16".into());
    a.tensor_parallel_size = Some(8);
    a.data_parallel_size = Some(8);
    a.kv_cache_memory_bytes = Some(i64::MAX);
    let p = planned(
        &a,
        &PlanOptions {
            host_memory_gib: Some(1e9),
            ..PlanOptions::default()
        },
    );
    let last = p.sweep.last().unwrap();
    assert_eq!(last.context_length, 1_048_576);
    assert_eq!(last.host_kv_bytes_per_request, 1_048_576 * 1152 * 78);
    assert!(p.host.pinned_bytes_per_node > 8 * 1023 * GIB);
    assert!(last.hisparse_requests.unwrap() >= last.baseline_requests.unwrap());
    // Saturating, not wrapping, at absurd sizes.
    let huge = json!({"architectures": ["DeepseekV32ForCausalLM"], "index_topk": 2048,
        "kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_hidden_layers": u32::MAX,
        "max_position_embeddings": u64::MAX / 2, "index_head_dim": u32::MAX});
    let b = ServeArgs {
        hf_config: Some(huge),
        kv_transfer_config: Some(hisparse(1e300)),
        kv_cache_dtype: Some("fp8_ds_mla".into()),
        max_model_len: Some(i64::MAX / 4),
        kv_cache_memory_bytes: Some(i64::MAX),
        ..ServeArgs::default()
    };
    let _ = plan(&b, &opts()); // must not panic
}

#[test]
fn steady_state_gpu_limit_is_vllms() {
    // vLLM 0.33 get_hisparse_steady_state_concurrency (hisparse/layout.py:384-420):
    // 1 + (num_blocks - admission) / steady, where admitting a request takes each
    // resident group's in-flight window (min(max_in_flight_tokens, max_model_len):
    // 2 x 8192 tokens on an H200) and a running one its 2 tail pages. Figures from
    // vLLM's own functions (tests/vllm/test_capacity_differential.py); the planner
    // gave blocks / steady: 111 here, and 1 below where vLLM gives 0.89.
    let h200 = PlanOptions {
        gpu_memory_gib: Some(141.0),
        ..opts()
    };
    let mut a = args("glm-5.2", 16.0);
    a.tensor_parallel_size = Some(8);
    a.max_model_len = Some(32768);
    a.kv_cache_memory_bytes = Some(40 * GIB as i64);
    let p = planned(&a, &h200);
    assert_eq!(p.gpu.hisparse_blocks, Some(204_600));
    assert_eq!(p.host.host_blocks, 5242);
    assert_eq!(p.at_context.gpu_limit, Some(108)); // vLLM: 108.908
    assert_eq!(p.at_context.host_limit, 10); // vLLM: 10.238

    // One admission (512 + 6 x (64 + 64) = 1280 blocks) does not fit in 747.
    let mut a = args("deepseek-v3.2", 1.0);
    a.max_model_len = Some(4096);
    a.max_num_seqs = Some(8);
    a.kv_cache_memory_bytes = Some(407_715_840);
    let p = planned(&a, &h200);
    assert_eq!(p.gpu.hisparse_blocks, Some(747));
    assert_eq!(p.at_context.gpu_limit, Some(0)); // vLLM: 0.898
}
