//! Each launch checked as `hisparse-check` checks one (the CLI's own
//! reading: `crate::vllm_cli::parse` / `build_args` and the core's `check` for vLLM,
//! `sglang_0_5_23::read` and the core's SGLang check), on its own machine
//! (the pod's GPU product and memory limit), and the facts the rules between
//! launches read, resolved as each engine resolves them.

use super::model::{EngineKind, Launch};
use super::role::{flag_value, transfer_connector};
use hisparse_core::engines::sglang_0_5_23 as core_sglang;
use hisparse_core::model::ModelInfo;
use hisparse_core::plan::PlanOptions;
use hisparse_core::{Report, ServeArgs};
use serde_json::Value;

/// One launch with its own report and the facts the rules read.
pub struct Checked {
    pub launch: Launch,
    pub report: Report,
    pub facts: Facts,
}

/// What the rules between launches read of one launch, resolved.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The model as the container names it (vLLM hashes this string).
    pub model_given: Option<String>,
    pub model: Option<ModelInfo>,
    pub hisparse: bool,
    /// KV cache dtype as the engine compares it. vLLM: the string it hashes,
    /// `str(cache_config.cache_dtype)` after the model's config hook and the
    /// sparse-MLA layer's canonicalisation ([`vllm_hashed_cache_dtype`]);
    /// SGLang: as resolved (overrides.py:532-544).
    pub kv_cache_dtype: String,
    pub tp: i64,
    pub dp: i64,
    pub nnodes: i64,
    pub node_rank: i64,
    /// vLLM `--data-parallel-address` / SGLang `--dist-init-addr`.
    pub address: Option<String>,
    /// max_model_len / context_length as resolved (given, else the model's).
    pub context_len: Option<i64>,
    /// GPUs this pod's launch uses.
    pub gpus_used: i64,
    // vLLM
    pub dtype: String,
    pub hma: bool,
    /// The block size the NIXL worker exchanges in the handshake: the kernel
    /// block size (base_worker.py:1066-1081 `_sync_block_size_with_kernel`),
    /// 64 on a DSA model on CUDA whatever `--block-size` says (the indexer's
    /// kernel takes only 64, v1/attention/backends/mla/indexer.py:285-286).
    pub block_size: i64,
    /// The transfer connector's `kv_buffer_device` is `cpu` (the NIXL host
    /// buffer, base_worker.py:806-810).
    pub host_buffer: bool,
    /// `--decode-context-parallel-size` (1 when unset).
    pub dcp: i64,
    /// The speculative factors vLLM hashes ([`vllm_speculative_factors`]);
    /// None without a hidden-state speculator.
    pub speculative: Option<Value>,
    /// `--speculative-config` as given (the fix copies it).
    pub speculative_given: Option<Value>,
    pub kv_transfer_config: Option<Value>,
    /// (kv_role, its path) of the transfer connector.
    pub kv_role: Option<(String, String)>,
    pub dp_local: i64,
    pub dp_start_rank: i64,
    // SGLang
    pub page_size: i64,
    pub transfer_backend: String,
    pub attn_tp: i64,
    pub dp_attention: bool,
    /// `--enable-kv-cache-sharding` (a P/D prefill's MLA KV sharded over its attention TP).
    pub kv_sharding: bool,
}

/// The plan options of a launch on its machine (its GPU and RAM unless
/// its own flags give them).
pub fn options(l: &Launch, mut o: PlanOptions) -> PlanOptions {
    if o.gpu.is_none() && o.gpu_memory_gib.is_none() {
        o.gpu = l.machine.gpu.clone();
    }
    if o.host_memory_gib.is_none() {
        o.host_memory_gib = l.machine.memory_gib();
    }
    o
}

/// Check one launch; Err: the usage error `hisparse-check` would print for it.
pub fn check(l: &Launch) -> Result<(Report, Facts), String> {
    match l.engine {
        EngineKind::Vllm => check_vllm(l),
        EngineKind::Sglang => check_sglang(l),
    }
}

/// A usage error's text.
pub fn usage(e: crate::usage::Usage) -> String {
    match e {
        crate::usage::Usage::Message(m) => m,
        crate::usage::Usage::Clap(e) => {
            let t = e.render().to_string();
            t.strip_prefix("error: ").unwrap_or(&t).trim().to_owned()
        }
    }
}

fn model_info(serve: &ServeArgs) -> Option<ModelInfo> {
    let (value, _) = serve.load_hf_config().ok()??;
    Some(hisparse_core::model::read(&value, None))
}

/// The container's name for the (mapped) model path.
fn given_model(l: &Launch, local: Option<&str>) -> Option<String> {
    let local = local?;
    Some(
        l.model_mapped
            .iter()
            .find(|(_, m)| m == local)
            .map_or_else(|| local.to_owned(), |(c, _)| c.clone()),
    )
}

fn int_flag(args: &[String], flags: &[&str]) -> Option<i64> {
    flags
        .iter()
        .find_map(|f| flag_value(args, f))
        .and_then(|v| v.trim().parse().ok())
}

fn check_vllm(l: &Launch) -> Result<(Report, Facts), String> {
    let parsed = crate::vllm_cli::parse(&l.args).map_err(usage)?;
    let opts = options(l, crate::vllm_cli::plan_options(&parsed.cli));
    let serve = crate::vllm_cli::build_args(parsed.cli, &|k: &str| l.env.get(k).cloned());
    let mut report = hisparse_core::check::check(&serve, &opts).map_err(|e| e.to_string())?;
    report.warnings.extend(parsed.warnings);
    report.ignored_flags = parsed.ignored;
    let model = model_info(&serve);
    let ktc = serve.kv_transfer_config.as_ref().and_then(|v| match v {
        Value::String(t) => serde_json::from_str::<Value>(t).ok(),
        other => Some(other.clone()),
    });
    let hisparse = report.hisparse_enabled;
    let sparse = model.as_ref().is_some_and(|m| m.index_topk.is_some());
    let architecture = model.as_ref().and_then(|m| m.architecture.clone());
    let spec = serve.speculative_config.as_ref().and_then(|v| match v {
        Value::String(t) => serde_json::from_str::<Value>(t).ok(),
        Value::Null => None,
        other => Some(other.clone()),
    });
    let kv_cache_dtype = vllm_hashed_cache_dtype(
        serve.kv_cache_dtype.as_deref(),
        architecture.as_deref(),
        sparse,
    );
    let speculative = vllm_speculative_factors(
        spec.as_ref(),
        given_model(l, serve.model.as_deref()).as_deref(),
        &kv_cache_dtype,
    );
    let dtype = match flag_value(&l.args, "--dtype").unwrap_or("auto") {
        "auto" => model
            .as_ref()
            .and_then(|m| m.torch_dtype.clone())
            .unwrap_or_else(|| "bfloat16".into()),
        "half" | "float16" => "float16".into(),
        "bfloat16" => "bfloat16".into(),
        "float" | "float32" => "float32".into(),
        other => other.to_owned(),
    };
    let tp = serve.tensor_parallel_size.unwrap_or(1);
    let dp = serve.data_parallel_size.unwrap_or(1);
    let nnodes = serve.nnodes.unwrap_or(1);
    let dp_local = serve.data_parallel_size_local.unwrap_or(if nnodes > 1 {
        (dp / nnodes).max(1)
    } else {
        dp
    });
    let context_len = serve.max_model_len.filter(|n| *n > 0).or_else(|| {
        model
            .as_ref()
            .and_then(|m| m.max_position_embeddings.as_ref())
            .map(|s| s.value as i64)
    });
    let facts = Facts {
        model_given: given_model(l, serve.model.as_deref()),
        model,
        hisparse,
        kv_cache_dtype,
        tp,
        dp,
        nnodes,
        node_rank: serve.node_rank.unwrap_or(0),
        address: flag_value(&l.args, "--data-parallel-address").map(str::to_owned),
        context_len,
        gpus_used: vllm_gpus_on_node(
            tp,
            serve.pipeline_parallel_size.unwrap_or(1),
            dp,
            dp_local,
            nnodes,
        ),
        dtype,
        // The flag as given; unset, vLLM turns it on unless a connector of
        // the tree lacks SupportsHMA (config/vllm.py:2257-2294).
        hma: serve
            .disable_hybrid_kv_cache_manager
            .map_or_else(|| ktc.as_ref().is_none_or(all_support_hma), |d| !d),
        block_size: if sparse {
            SPARSE_KERNEL_BLOCK_SIZE
        } else {
            serve.block_size.unwrap_or(VLLM_DEFAULT_BLOCK_SIZE)
        },
        host_buffer: ktc
            .as_ref()
            .and_then(transfer_leaf)
            .is_some_and(|c| c.get("kv_buffer_device").and_then(Value::as_str) == Some("cpu")),
        dcp: serve.decode_context_parallel_size.unwrap_or(1),
        speculative,
        speculative_given: spec,
        kv_role: ktc
            .as_ref()
            .and_then(transfer_connector)
            .and_then(|(_, r, p)| r.map(|r| (r, p))),
        kv_transfer_config: ktc,
        dp_local,
        dp_start_rank: int_flag(&l.args, &["--data-parallel-start-rank", "-dpr"]).unwrap_or(0),
        ..Facts::default()
    };
    Ok((report, facts))
}

/// The transfer block size of a DSA model on CUDA: the indexer's only kernel
/// block size (v1/attention/backends/mla/indexer.py:285-286), which
/// `select_common_block_size` picks for any multiple of it
/// (v1/worker/utils.py:515-553).
const SPARSE_KERNEL_BLOCK_SIZE: i64 = 64;
/// vLLM 0.33 `CacheConfig.DEFAULT_BLOCK_SIZE` (config/cache.py:185).
const VLLM_DEFAULT_BLOCK_SIZE: i64 = 16;

/// The cache dtype string vLLM 0.33 hashes into the NIXL compatibility hash
/// (`str(cache_config.cache_dtype)`, nixl/metadata.py:198), on an SM90 GPU:
/// unset is `auto`; DeepSeek-V3.2's config hook reads `bfloat16` as `auto`
/// (model_executor/models/config.py:73-86), GLM-5's keeps it; on a sparse-MLA
/// model `fp8` and `fp8_ds_mla` select FLASHMLA_SPARSE, whose layer stores
/// `fp8_ds_mla` and writes it back (model_executor/layers/attention/
/// mla_attention.py:359-376, 522-529), while `fp8_e4m3` selects FlashInfer's
/// SM90 kernel and stays `fp8_e4m3`.
pub fn vllm_hashed_cache_dtype(
    given: Option<&str>,
    architecture: Option<&str>,
    sparse: bool,
) -> String {
    match given.unwrap_or("auto") {
        "bfloat16" if architecture == Some("DeepseekV32ForCausalLM") => "auto",
        "fp8" | "fp8_ds_mla" if sparse => "fp8_ds_mla",
        other => other,
    }
    .to_owned()
}

/// What vLLM 0.33 hashes of the speculative config
/// (`_get_speculative_compatibility_factors`, nixl/metadata.py:103-143):
/// nothing unless `use_eagle()` (eagle, eagle3, mtp, dflash, dspark;
/// config/speculative.py:2116-2120; every `*_mtp` method is read as `mtp`,
/// :1246-1250), else the method, the draft model (an MTP draft is the
/// target's own model string), its revision, `parallel_drafting` and the
/// draft's KV cache dtype (the target's when unset). `num_speculative_tokens`
/// is not hashed.
pub fn vllm_speculative_factors(
    spec: Option<&Value>,
    target_model: Option<&str>,
    cache_dtype: &str,
) -> Option<Value> {
    let spec = spec?;
    let method = spec.get("method").and_then(Value::as_str)?;
    let method = if method.ends_with("_mtp") {
        "mtp"
    } else {
        method
    };
    if !["eagle", "eagle3", "mtp", "dflash", "dspark"].contains(&method) {
        return None;
    }
    let model = spec
        .get("model")
        .and_then(Value::as_str)
        .or(if method == "mtp" { target_model } else { None });
    Some(serde_json::json!({
        "method": method,
        "model": model,
        "revision": spec.get("revision"),
        "parallel_drafting": spec.get("parallel_drafting").and_then(Value::as_bool).unwrap_or(false),
        "kv_cache_dtype": spec.get("kv_cache_dtype").and_then(Value::as_str).unwrap_or(cache_dtype),
    }))
}

/// The transfer connector's own config (a MultiConnector's first child that is not HiSparseConnector).
fn transfer_leaf(ktc: &Value) -> Option<&Value> {
    if ktc.get("kv_connector").and_then(Value::as_str) == Some("MultiConnector") {
        return ktc
            .pointer("/kv_connector_extra_config/connectors")?
            .as_array()?
            .iter()
            .find(|c| c.get("kv_connector").and_then(Value::as_str) != Some("HiSparseConnector"));
    }
    Some(ktc)
}

/// Whether every connector of the tree implements SupportsHMA
/// (`KVConnectorFactory.supports_hma_config`, kv_connector/factory.py:132-146;
/// a MultiConnector when all its children do). Bounded by the tree's size:
/// the launch's own check bounds its depth.
fn all_support_hma(ktc: &Value) -> bool {
    let mut stack = vec![ktc];
    while let Some(v) = stack.pop() {
        match v.get("kv_connector").and_then(Value::as_str) {
            Some("MultiConnector") => {
                if let Some(children) = v
                    .pointer("/kv_connector_extra_config/connectors")
                    .and_then(Value::as_array)
                {
                    stack.extend(children);
                }
            }
            Some(name)
                if hisparse_core::engines::vllm_0_33::connectors::CONNECTORS_WITHOUT_HMA
                    .contains(&name) =>
            {
                return false
            }
            _ => {}
        }
    }
    true
}

fn check_sglang(l: &Launch) -> Result<(Report, Facts), String> {
    let read = crate::sglang_0_5_23::read::read(&l.args, l.sglang_serve)?;
    let args = read.args.clone();
    let opts = options(l, PlanOptions::default());
    let mut report = core_sglang::check(&args, &opts).map_err(|e| e.to_string())?;
    crate::sglang_0_5_23::read::finish(&mut report, read);
    let gpu = opts
        .gpu
        .as_deref()
        .and_then(|g| hisparse_core::gpu::lookup(g).ok());
    let machine = core_sglang::resolution::Machine {
        gpu: gpu.as_ref(),
        host_memory_gib: opts.host_memory_gib,
        gpu_memory_gib: None,
        weights_gib: None,
        available_kv_gib: None,
        measured_in: None,
        gpus_per_node: None,
        gpus_per_node_server: None,
    };
    let r = core_sglang::resolution::resolution(&args, &machine, &mut Vec::new());
    let tp = args.tp_size.unwrap_or(1);
    let dp = args.dp_size.unwrap_or(1);
    let nnodes = args.nnodes.unwrap_or(1);
    let other = |k: &str| args.other.get(k);
    let context_len = args.context_length.or_else(|| {
        r.model
            .as_ref()
            .and_then(|m| m.max_position_embeddings.as_ref())
            .map(|s| s.value as i64)
    });
    let facts = Facts {
        model_given: given_model(l, args.model_path.as_deref()),
        model: r.model.clone(),
        hisparse: report.hisparse_enabled,
        kv_cache_dtype: r.kv_cache_dtype.value.clone(),
        tp,
        dp,
        nnodes,
        node_rank: other("node_rank").and_then(Value::as_i64).unwrap_or(0),
        address: other("dist_init_addr")
            .and_then(Value::as_str)
            .map(str::to_owned),
        context_len,
        gpus_used: (tp / nnodes.max(1)).max(1),
        page_size: r.page(),
        transfer_backend: args
            .disaggregation_transfer_backend
            .clone()
            .unwrap_or_else(|| "mooncake".into()),
        dp_attention: args.enable_dp_attention == Some(true),
        kv_sharding: args.enable_kv_cache_sharding == Some(true),
        attn_tp: if args.enable_dp_attention == Some(true) {
            (tp / dp.max(1)).max(1)
        } else {
            tp
        },
        ..Facts::default()
    };
    Ok((report, facts))
}

/// The GPUs one vLLM launch uses on its node: each local DP replica's
/// TP x PP ranks; without data parallelism a TP x PP world over `--nnodes`
/// nodes puts world / nnodes on each (vLLM 0.33 config/parallel.py:1064-1076:
/// with --nnodes the mp executor spreads the world over the nodes, so
/// `-tp 16 --nnodes 2` is 8 a node).
fn vllm_gpus_on_node(tp: i64, pp: i64, dp: i64, dp_local: i64, nnodes: i64) -> i64 {
    let world = tp.max(1).saturating_mul(pp.max(1));
    if dp <= 1 && nnodes > 1 {
        (world / nnodes).max(1)
    } else {
        world.saturating_mul(dp_local.max(1))
    }
}
