//! What SGLang 0.5.23 resolves from a launch before its rules run (stage S1,
//! `ServerArgs.resolve_once`, srt/arg_groups/pipeline.py): the model, the
//! defaults HiSparse depends on, each with its provenance. The rules read it.

use super::args::SglangArgs;
use super::diagnostics::SglangDiagnostic;
use super::hisparse_config::{
    self as hc, DEFAULT_HOST_TO_DEVICE_RATIO, DEFAULT_SWAP_IN_BLOCK_SIZE, DEFAULT_TOP_K,
};
use super::stages::SglangStage;
use crate::diagnostic::{Code, Diagnostic};
use crate::gpu::GpuSpec;
use crate::model::ModelInfo;
use crate::path::FieldPath;
use crate::pyvalue::PyValue;
use crate::report::{Provenance, Resolved};
use serde_json::{Map, Value};

/// The machine facts a check may know (`hisparse-check --gpu`, `--host-memory-gib`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Machine<'a> {
    pub gpu: Option<&'a GpuSpec>,
    /// The node's RAM, GiB (`--host-memory-gib`).
    pub host_memory_gib: Option<f64>,
    /// One GPU's memory, GiB (`--gpu-memory-gib`; else the GPU's).
    pub gpu_memory_gib: Option<f64>,
    /// Weights on one GPU, GiB (`--weights-gib`; else estimated).
    pub weights_gib: Option<f64>,
    /// The KV pool budget of one GPU, GiB, as an engine log measured it
    /// (`--engine-log`; else GPU memory x mem_fraction_static - weights).
    pub available_kv_gib: Option<f64>,
    /// The log it was measured in, for the sources the plan prints.
    pub measured_in: Option<&'a str>,
    /// GPUs one node holds (`--gpus-per-node`, else the GPU's usual server;
    /// [`node_gpus`]).
    pub gpus_per_node: Option<u64>,
    /// That server, when `gpus_per_node` is the GPU's default.
    pub gpus_per_node_server: Option<&'a str>,
}

/// The GPUs a node holds: `given` (`--gpus-per-node`), else the GPU's usual
/// server's ([`GpuSpec::gpus_per_node`]), with that server's name.
pub fn node_gpus(gpu: Option<&GpuSpec>, given: Option<u64>) -> (Option<u64>, Option<&str>) {
    match given {
        Some(n) => (Some(n), None),
        None => (
            gpu.and_then(|g| g.gpus_per_node).map(u64::from),
            gpu.and_then(|g| g.server.as_deref()),
        ),
    }
}

/// `--max-running-requests` SGLang resolves with speculation when it is not
/// given (arg_groups/speculative_hook.py:1086-1091).
pub const SPEC_DEFAULT_MAX_RUNNING_REQUESTS: i64 = 48;

/// The architectures `is_deepseek_dsa` accepts (srt/configs/model_config.py:191-212).
pub const DSA_ARCHITECTURES: &[&str] = &[
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLMNextN",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM",
    "GlmMoeDsaForCausalLMNextN",
    "Glm5NextForConditionalGenerationNextN",
    "Glm5NextForConditionalGeneration",
    "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN",
    "Dots3NoteForCausalLM",
    "Dots3NoteForCausalLMNextN",
    "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN",
];

/// Everything the rules read: the args and what SGLang resolves from them.
pub struct Resolution<'a> {
    pub args: &'a SglangArgs,
    pub model: Option<ModelInfo>,
    pub model_source: Option<String>,
    /// The context length SGLang derives from config.json ([`derived_context_length`]).
    pub context_len: Option<i64>,
    /// DSA by SGLang's test: architecture list and `index_topk` set.
    pub is_dsa: bool,
    /// DeepSeek-V4 or MiniMax-M3 (HiSparse runs there too, other rules).
    pub other_sparse: bool,
    /// Exactly `DeepseekV4ForCausalLM`: the architecture SGLang's DeepSeek-V4
    /// overrides and hook are registered for (model_overrides/deepseek_v4.py:18,
    /// arg_groups/model_hook.py:258-265, overrides.py:898).
    pub is_dsv4: bool,
    pub index_topk: Option<i64>,
    pub index_kpool: i64,
    /// ROCm (`gfx...`), from `--gpu`.
    pub hip: bool,
    pub sm_major: u32,
    pub compute_capability: Resolved<String>,
    pub kv_cache_dtype: Resolved<String>,
    pub page_size: Resolved<i64>,
    pub disable_radix_cache: Resolved<bool>,
    pub dsa_prefill_backend: Option<Resolved<String>>,
    pub dsa_decode_backend: Option<Resolved<String>>,
    pub disaggregation_mode: Resolved<String>,
    /// The parsed `hisparse_config` (empty when not given or not an object).
    pub config: Map<String, Value>,
    /// Whether it parsed as an object (false: its own error was reported).
    pub config_ok: bool,
    pub top_k: Resolved<Value>,
    pub device_buffer_size: Resolved<Value>,
    pub host_to_device_ratio: Resolved<Value>,
    pub swap_in_block_size: Resolved<Value>,
    /// The same four as Python holds them (the rules compare these, with
    /// Python's semantics; the `Resolved` JSON above is for the report).
    pub py: PyFields,
    /// (steps, eagle_topk, draft tokens) after SGLang's speculative defaults; None without speculation.
    pub speculative: Option<(i64, i64, Resolved<i64>)>,
    pub machine: Machine<'a>,
}

pub(crate) fn explicit(attr: &str) -> Provenance {
    Provenance::Explicit {
        path: attr.to_owned(),
    }
}
pub(crate) fn default(rule: &str) -> Provenance {
    Provenance::Default {
        rule: rule.to_owned(),
    }
}
pub(crate) fn derived(from: &[&str], rule: &str) -> Provenance {
    Provenance::Derived {
        from: from.iter().map(|s| (*s).to_owned()).collect(),
        rule: rule.to_owned(),
    }
}

/// `hisparse_config`'s four fields as `_parse_sparse_config` holds them
/// after its pops (factory.py:79-82).
#[derive(Clone, Debug)]
pub struct PyFields {
    pub top_k: PyValue,
    /// Err: `2 * top_k`, evaluated as `pop`'s default even when the key is
    /// given, raised this TypeError (factory.py:80).
    pub device_buffer_size: Result<PyValue, String>,
    pub host_to_device_ratio: PyValue,
    pub swap_in_block_size: PyValue,
}

impl Resolution<'_> {
    /// `device_buffer_size` as an int SGLang's later stages compute with (a
    /// bool is 0 or 1 there), when it fits an i64.
    pub fn device_buffer(&self) -> Option<i64> {
        self.py.device_buffer_size.as_ref().ok()?.as_i64()
    }
    /// `top_k` when it is an int (not a bool) that fits an i64.
    pub fn top_k_int(&self) -> Option<i64> {
        let t = &self.py.top_k;
        t.is_int().then(|| t.as_i64()).flatten()
    }
    pub fn page(&self) -> i64 {
        self.page_size.value.max(1)
    }
    pub fn draft_tokens(&self) -> Option<i64> {
        self.speculative.as_ref().map(|s| s.2.value)
    }
    /// Request slots of one attention-DP worker's req_to_token pool, which
    /// the coordinator sizes by (hisparse_coordinator.py:163, :637), when
    /// `--max-running-requests` is given: `max(1, max_running_requests //
    /// attn_dp_size)` (model_executor/pool_configurator.py:1141-1144) + 1; on
    /// P/D decode plus the in-transfer slots, `--disaggregation-decode-extra-slots`
    /// or by default 2 x per-worker for at most 32
    /// (arg_groups/pd_disaggregation_hook.py:129-143; DecodeReqToTokenPool
    /// allocates size + pre_alloc_size + 1 rows, disaggregation/decode.py:200).
    /// With speculation and no `--max-running-requests` SGLang resolves 48
    /// (arg_groups/speculative_hook.py:1086-1091; FACTS_sglang.md #7).
    /// The attention-DP width: `--attn-dp-size`, or `--dp-size N
    /// --enable-dp-attention` turned into `attn_dp_size N` when attn_dp_size
    /// is 1 (arg_groups/parallel_hook.py:39-60); at least 1 here (a width
    /// below 1 is its own error, [`Resolution::attn_dp_given`]).
    pub fn attn_dp(&self) -> i64 {
        self.attn_dp_given().0.max(1)
    }
    /// The attention-DP width as given and the attribute it comes from
    /// (`attn_dp_size`, or `dp_size` under `--enable-dp-attention`).
    pub fn attn_dp_given(&self) -> (i64, &'static str) {
        self.args.attn_dp_given()
    }
    /// Data-parallel replicas once the deprecated form is turned around
    /// (`dp_size` 1 under `--dp-size N --enable-dp-attention`, parallel_hook.py:52-57).
    pub fn dp_replicas(&self) -> i64 {
        match self.attn_dp_given() {
            (_, "dp_size") => 1,
            _ => self.args.dp_size.unwrap_or(1),
        }
    }
    /// The attention-DP width once `data_parallel_layout_invalid`'s fix is
    /// applied: the largest divisor of tp_size up to it (parallel_hook.py:326
    /// needs tp_size % attn_dp_size == 0), so fixes sized per worker hold
    /// together with that one.
    pub fn attn_dp_fixed(&self) -> i64 {
        let (tp, attn_dp) = (self.args.tp_size.unwrap_or(1), self.attn_dp());
        if attn_dp > 1 && tp % attn_dp != 0 {
            (1..=attn_dp).rev().find(|n| tp % n == 0).unwrap_or(1)
        } else {
            attn_dp
        }
    }
    pub fn request_slots(&self) -> Option<i64> {
        let m = match self.args.max_running_requests {
            Some(m) => m,
            None if self.speculative.is_some() => SPEC_DEFAULT_MAX_RUNNING_REQUESTS,
            None => return None,
        };
        // The layout the report's fixes give: a refused tp/dp layout never
        // reaches the coordinator, its fix does.
        let attn_dp = self.attn_dp_fixed();
        let per_worker = (m / attn_dp).max(1);
        // The in-transfer slots: `--disaggregation-decode-extra-slots` when
        // given, else SGLang's default (pd_disaggregation_hook.py:133-143).
        let extra = match (
            self.args.pd_mode(),
            self.args.disaggregation_decode_extra_slots,
        ) {
            ("decode", Some(e)) => e.max(0),
            ("decode", None) if per_worker <= 32 => per_worker * 2,
            _ => 0,
        };
        Some(per_worker.saturating_add(extra).saturating_add(1))
    }
}

/// The model's config when it cannot be read at all because of what the file
/// is: a FIFO, a device, a directory named config.json, or one over the size
/// bound (`LoadError::File`, codes `not_a_regular_file` / `file_too_large` /
/// `read_failed`). The check refuses these as an I/O error before any rule
/// (the CLI exits 2, Python raises `ModelLoadError`), as under vLLM
/// (engines/vllm_0_33/check.rs); a model that is not there stays the
/// diagnostic `model_config_missing` at `resolve` (SGLang's own stage).
pub(crate) fn unreadable_model(args: &SglangArgs) -> Option<crate::model::LoadError> {
    let path = args.model_path.clone()?;
    let serve = crate::ServeArgs {
        model: Some(path),
        revision: args.revision.clone(),
        ..Default::default()
    };
    match serve.load_hf_config() {
        Err(e @ crate::model::LoadError::File { .. }) if e.code() != "model_not_found" => Some(e),
        _ => None,
    }
}

/// The model's config, as vLLM's `--model` is read (local file, directory, HF cache).
pub(crate) fn load_model(
    args: &SglangArgs,
    diags: &mut Vec<Diagnostic>,
) -> Option<(ModelInfo, String)> {
    load_model_value(args, diags).map(|(m, shown, _)| (m, shown))
}

/// [`load_model`], also the context length SGLang derives from the config.
fn load_model_value(
    args: &SglangArgs,
    diags: &mut Vec<Diagnostic>,
) -> Option<(ModelInfo, String, i64)> {
    let Some(path) = args.model_path.clone() else {
        diags.push(
            Diagnostic::error(Code::ModelConfigMissing, FieldPath::root("model_path"), "the following arguments are required: --model-path (SGLang's argparse; hisparse_rs needs its config.json)")
                .stage(SglangStage::Argparse)
                .allowed("a config.json, a model directory, or a model id in the Hugging Face cache"),
        );
        return None;
    };
    let serve = crate::ServeArgs {
        model: Some(path.clone()),
        revision: args.revision.clone(),
        ..Default::default()
    };
    match serve.load_hf_config() {
        Ok(Some((value, shown))) => Some((
            crate::model::read(&value, None),
            shown,
            derived_context_length(&value),
        )),
        Ok(None) => None,
        Err(e) => {
            diags.push(
                Diagnostic::error(
                    Code::ModelConfigMissing,
                    FieldPath::root("model_path"),
                    format!("{e} ({})", e.code()),
                )
                .stage(SglangStage::Resolve)
                .given(&Value::String(path)),
            );
            None
        }
    }
}

/// The context length SGLang derives from a model's config
/// (`get_context_length`, srt/utils/hf_transformers/common.py:668-694): the
/// first of max_sequence_length, seq_length, max_seq_len, model_max_length,
/// max_position_embeddings, times the rope_scaling factor unless it has
/// original_max_position_embeddings or is llama3; 2048 without any. The text
/// config of a multimodal model (`text_config`) when there is one.
pub fn derived_context_length(config: &Value) -> i64 {
    let text = config
        .get("text_config")
        .filter(|t| t.is_object())
        .unwrap_or(config);
    let factor = match text.get("rope_scaling").filter(|r| r.is_object()) {
        Some(rs)
            if rs.get("original_max_position_embeddings").is_none()
                && rs.get("rope_type").and_then(Value::as_str) != Some("llama3") =>
        {
            rs.get("factor").and_then(Value::as_f64).unwrap_or(1.0)
        }
        _ => 1.0,
    };
    const KEYS: [&str; 5] = [
        "max_sequence_length",
        "seq_length",
        "max_seq_len",
        "model_max_length",
        "max_position_embeddings",
    ];
    KEYS.iter()
        .find_map(|k| {
            text.get(*k)
                .filter(|v| !v.is_null())
                .and_then(Value::as_f64)
        })
        // int(factor * val): truncated toward zero, saturating in i64.
        .map_or(2048, |v| (factor * v).trunc() as i64)
}

/// The compute capability: `--gpu`'s, else H200's SM 9.0 (SGLang asks
/// torch.cuda.get_device_capability(), model_hook.py:341). (hip, SM major, shown).
fn compute_capability(machine: &Machine<'_>) -> (bool, u32, Resolved<String>) {
    match machine.gpu {
        Some(g) if g.platform == "rocm" => {
            (true, 0, Resolved::new(g.arch.clone(), explicit("--gpu")))
        }
        Some(g) => {
            let digits: String = g.arch.chars().filter(char::is_ascii_digit).collect();
            let major = digits
                .get(..digits.len().saturating_sub(1))
                .and_then(|d| d.parse().ok())
                .unwrap_or(9);
            let minor = digits.chars().last().unwrap_or('0');
            (
                false,
                major,
                Resolved::new(format!("{major}.{minor}"), explicit("--gpu")),
            )
        }
        None => (
            false,
            9,
            Resolved::new(
                "9.0".to_owned(),
                default("no --gpu: an H200 (SM 9.0) is assumed"),
            ),
        ),
    }
}

/// kv_cache_dtype for DSA (arg_groups/overrides.py:532-544) and DeepSeek-V4.
fn kv_cache_dtype(
    args: &SglangArgs,
    is_dsa: bool,
    is_dsv4: bool,
    sm_major: u32,
    hip: bool,
) -> Resolved<String> {
    let given_dtype = args.kv_cache_dtype.clone();
    match given_dtype.as_deref() {
        None | Some("auto") if is_dsa => {
            let d = if sm_major >= 10 && !hip {
                "fp8_e4m3"
            } else {
                "bfloat16"
            };
            let from: &[&str] = if given_dtype.is_some() {
                &["kv_cache_dtype", "compute_capability"]
            } else {
                &["compute_capability"]
            };
            Resolved::new(
                d.to_owned(),
                derived(
                    from,
                    "auto: fp8_e4m3 on SM >= 10, bfloat16 below (arg_groups/overrides.py:532-540)",
                ),
            )
        }
        // DeepSeek-V4 (CUDA): auto is fp8_e4m3 whatever the GPU (overrides.py:892-904,
        // run from deepseek_v4_hook.py:79); bf16 is not normalised there (:907-910).
        None | Some("auto") if is_dsv4 => Resolved::new(
            "fp8_e4m3".to_owned(),
            derived(
                &["model_path"],
                "auto: fp8_e4m3 for DeepseekV4ForCausalLM (arg_groups/overrides.py:892-904)",
            ),
        ),
        Some("bf16") if !is_dsv4 => Resolved::new(
            "bfloat16".to_owned(),
            derived(
                &["kv_cache_dtype"],
                "bf16 is bfloat16 (overrides.py:539-540)",
            ),
        ),
        Some(d) => Resolved::new(d.to_owned(), explicit("kv_cache_dtype")),
        None => Resolved::new("auto".to_owned(), default("the model's dtype")),
    }
}

/// page_size: forced to 64 x index_kpool for DSA (model_overrides/deepseek_v2.py:161-173);
/// on ROCm too, unless aiter's preshuffle paged-MQA path is unavailable
/// (Triton < 3.5, :151-159: page 1), which is not assumed here.
fn page_size(
    args: &SglangArgs,
    is_dsa: bool,
    is_dsv4: bool,
    hip: bool,
    index_kpool: i64,
) -> Resolved<i64> {
    if is_dsa {
        let rule = if hip {
            "64 x index_kpool for DSA, overriding --page-size (model_overrides/deepseek_v2.py:169-171); ROCm with aiter's preshuffle path assumed (else page 1, :151-159)"
        } else {
            "64 x index_kpool for DSA, overriding --page-size (model_overrides/deepseek_v2.py:169-171)"
        };
        Resolved::new(64 * index_kpool, derived(&["index_kpool"], rule))
    } else if is_dsv4 {
        // CUDA/ROCm; NPU's 128 is not modelled (model_overrides/deepseek_v4.py:51-60).
        Resolved::new(256, derived(&["model_path"], "256 for DeepseekV4ForCausalLM, overriding --page-size (model_overrides/deepseek_v4.py:51-60)"))
    } else {
        match args.page_size {
            Some(p) => Resolved::new(p, explicit("page_size")),
            None => Resolved::new(1, default("page size 1")),
        }
    }
}

/// P/D decode sets the radix cache itself (pd_disaggregation_hook.py:98-127).
fn disable_radix_cache(args: &SglangArgs) -> Resolved<bool> {
    if args.pd_mode() == "decode" {
        let on = args.disaggregation_decode_enable_radix_cache == Some(true);
        Resolved::new(!on, derived(&["disaggregation_mode", "disaggregation_decode_enable_radix_cache"], "P/D decode turns the radix cache off unless --disaggregation-decode-enable-radix-cache (pd_disaggregation_hook.py:98-127)"))
    } else {
        match args.disable_radix_cache {
            Some(b) => Resolved::new(b, explicit("disable_radix_cache")),
            None => Resolved::new(false, default("radix cache on (fields/memory.py:64)")),
        }
    }
}

/// A DSA backend: given, or HiSparse's default where unset (overrides.py:677-684).
fn dsa_backend(
    args: &SglangArgs,
    given: &Option<String>,
    attr: &str,
    is_dsa: bool,
    hip: bool,
    dtype: &str,
) -> Option<Resolved<String>> {
    match given {
        Some(b) => Some(Resolved::new(b.clone(), explicit(attr))),
        None if args.hisparse_on() && is_dsa => {
            let b = if hip {
                "tilelang"
            } else if dtype == "fp8_e4m3" {
                "flashmla_kv"
            } else {
                "flashmla_sparse"
            };
            Some(Resolved::new(b.to_owned(), derived(&["kv_cache_dtype"], "HiSparse: flashmla_kv for fp8_e4m3, flashmla_sparse otherwise, tilelang on ROCm (arg_groups/hisparse_hook.py:27-30, overrides.py:677-684)")))
        }
        None => None,
    }
}

/// The `hisparse_config` fields (factory.py:62-117; SGLang reads them only
/// after the weights load): top_k, device_buffer_size, host_to_device_ratio,
/// swap_in_block_size, each given or SGLang's default.
fn hisparse_fields(config: &hc::PyDict) -> ([Resolved<Value>; 4], PyFields) {
    let int = |v: i64| PyValue::from_json(&Value::from(v));
    let get = |key: &str, dflt: i64| hc::get(config, key).cloned().unwrap_or_else(|| int(dflt));
    let py_top_k = get("top_k", DEFAULT_TOP_K);
    let doubled = py_top_k.times_two();
    let py = PyFields {
        device_buffer_size: match hc::get(config, "device_buffer_size") {
            Some(v) => doubled.clone().map(|_| v.clone()),
            None => doubled.clone(),
        },
        top_k: py_top_k,
        host_to_device_ratio: get("host_to_device_ratio", DEFAULT_HOST_TO_DEVICE_RATIO),
        swap_in_block_size: get("swap_in_block_size", DEFAULT_SWAP_IN_BLOCK_SIZE),
    };
    let field = |key: &str, v: &PyValue, rule: &str| match hc::get(config, key) {
        Some(_) => Resolved::new(v.to_json(), explicit(&format!("hisparse_config.{key}"))),
        None => Resolved::new(v.to_json(), default(rule)),
    };
    let top_k = field(
        "top_k",
        &py.top_k,
        "2048 (mem_cache/sparsity/factory.py:79)",
    );
    let dbs_json = match (hc::get(config, "device_buffer_size"), &doubled) {
        (Some(v), _) => v.to_json(),
        (None, Ok(d)) => d.to_json(),
        (None, Err(_)) => Value::Null,
    };
    let device_buffer_size = match hc::get(config, "device_buffer_size") {
        Some(_) => Resolved::new(dbs_json, explicit("hisparse_config.device_buffer_size")),
        None => Resolved::new(
            dbs_json,
            derived(&["hisparse_config.top_k"], "2 x top_k (factory.py:80)"),
        ),
    };
    let host_to_device_ratio = field(
        "host_to_device_ratio",
        &py.host_to_device_ratio,
        "2 (factory.py:81)",
    );
    let swap_in_block_size = field(
        "swap_in_block_size",
        &py.swap_in_block_size,
        "960 (factory.py:82)",
    );
    (
        [
            top_k,
            device_buffer_size,
            host_to_device_ratio,
            swap_in_block_size,
        ],
        py,
    )
}

/// Speculative (steps, eagle_topk, draft tokens) as SGLang resolves them;
/// None without speculation (or with a name SGLang does not know).
/// EAGLE and the others: (3, 1, 4) for DSA models when not given
/// (speculative_hook.py:1430-1461); with eagle_topk 1 the draft tokens are
/// steps + 1, whatever was given (speculative_hook.py:1255-1266). NGRAM:
/// eagle_topk is --speculative-ngram-max-bfs-breadth (default 10), draft
/// tokens 12 by default, steps draft // topk (speculative_hook.py:1305-1328).
fn speculative(args: &SglangArgs, arch: Option<&str>) -> Option<(i64, i64, Resolved<i64>)> {
    if !args.speculation_on() {
        return None;
    }
    // _auto_choose_speculative_params (speculative_hook.py:1430-1461): (5, 4, 8)
    // for Llama and Grok when none of the three is given (STANDALONE: 3, 1, 4).
    let none_given = args.speculative_num_steps.is_none()
        && args.speculative_eagle_topk.is_none()
        && args.speculative_num_draft_tokens.is_none();
    // Adaptive speculation sets topk 1 and steps 3 before (speculative_hook.py:262-264, :1402-1414).
    if none_given
        && !args.adaptive_on()
        && args.speculative_algorithm() != Some("STANDALONE")
        && args.speculative_algorithm() != Some("NGRAM")
        && matches!(
            arch,
            Some("LlamaForCausalLM" | "Grok1ForCausalLM" | "Grok1VForCausalLM")
        )
    {
        let rule = "(5, 4, 8) for Llama and Grok (speculative_hook.py:1430-1461)";
        return Some((5, 4, Resolved::new(8, default(rule))));
    }
    if args.speculative_algorithm() == Some("NGRAM") {
        let topk = args.speculative_ngram_max_bfs_breadth.unwrap_or(10);
        let draft = match args.speculative_num_draft_tokens {
            Some(d) => Resolved::new(d, explicit("speculative_num_draft_tokens")),
            None => Resolved::new(12, default("12 for NGRAM (speculative_hook.py:1315-1320)")),
        };
        let steps = args.speculative_num_steps.unwrap_or(if topk > 0 {
            draft.value.div_euclid(topk)
        } else {
            0
        });
        return Some((steps, topk, draft));
    }
    let steps = args.speculative_num_steps.unwrap_or(3);
    let topk = args.speculative_eagle_topk.unwrap_or(1);
    let draft = if topk == 1 {
        let rule = "speculative_num_steps + 1 with speculative_eagle_topk 1 (speculative_hook.py:1255-1266)";
        Resolved::new(
            steps.saturating_add(1),
            derived(&["speculative_num_steps", "speculative_eagle_topk"], rule),
        )
    } else {
        match args.speculative_num_draft_tokens {
            Some(d) => Resolved::new(d, explicit("speculative_num_draft_tokens")),
            None => Resolved::new(4, default("4 (speculative_hook.py:1430-1461)")),
        }
    };
    Some((steps, topk, draft))
}

/// The model's architecture tests: (is_dsa, other_sparse, is_dsv4).
fn architecture(model: Option<&ModelInfo>) -> (bool, bool, bool) {
    let arch = model.and_then(|m| m.architecture.clone());
    let has_index_topk = model.is_some_and(|m| m.index_topk.is_some());
    let is_dsa = arch
        .as_deref()
        .is_some_and(|a| DSA_ARCHITECTURES.contains(&a))
        && has_index_topk;
    // is_deepseek_v4 / is_minimax_sparse (srt/configs/model_config.py:395-400, :426-431).
    let other_sparse = arch.as_deref().is_some_and(|a| {
        matches!(
            a,
            "DeepseekV4ForCausalLM"
                | "DeepseekV4ForCausalLMNextN"
                | "DeepseekV4ForCausalLMDSpark"
                | "MiniMaxM3SparseForCausalLM"
                | "MiniMaxM3SparseForConditionalGeneration"
        )
    });
    let is_dsv4 = arch.as_deref() == Some("DeepseekV4ForCausalLM");
    (is_dsa, other_sparse, is_dsv4)
}

pub fn resolution<'a>(
    args: &'a SglangArgs,
    machine: &Machine<'a>,
    diags: &mut Vec<Diagnostic>,
) -> Resolution<'a> {
    let (model, model_source, context_len) = match load_model_value(args, diags) {
        Some((m, s, c)) => (Some(m), Some(s), Some(c)),
        None => (None, None, None),
    };
    let index_topk = model
        .as_ref()
        .and_then(|m| m.index_topk.as_ref())
        .and_then(|s| s.value.as_ref().ok().copied())
        .map(i64::from);
    let (is_dsa, other_sparse, is_dsv4) = architecture(model.as_ref());
    let arch = model.as_ref().and_then(|m| m.architecture.clone());
    let index_kpool = model
        .as_ref()
        .and_then(|m| m.index_kpool.as_ref())
        .map_or(1, |s| i64::from(s.value.max(1)));
    let (hip, sm_major, compute_capability) = compute_capability(machine);
    let kv_cache_dtype = kv_cache_dtype(args, is_dsa, is_dsv4, sm_major, hip);
    let page_size = page_size(args, is_dsa, is_dsv4, hip, index_kpool);
    let disaggregation_mode = match &args.disaggregation_mode {
        Some(m) => Resolved::new(m.clone(), explicit("disaggregation_mode")),
        None => Resolved::new(
            args.pd_mode().to_owned(),
            default("null: not P/D disaggregated (fields/disagg.py:55)"),
        ),
    };
    let dtype = kv_cache_dtype.value.clone();
    let backend =
        |given: &Option<String>, attr: &str| dsa_backend(args, given, attr, is_dsa, hip, &dtype);
    let dsa_prefill_backend = backend(&args.dsa_prefill_backend, "dsa_prefill_backend");
    let dsa_decode_backend = backend(&args.dsa_decode_backend, "dsa_decode_backend");
    let (dict, config_ok) = if args.hisparse_on() {
        match hc::parse(args.hisparse_config.as_ref()) {
            Ok(m) => (m.unwrap_or_default(), true),
            Err(d) => {
                diags.push(*d);
                (Vec::new(), false)
            }
        }
    } else {
        (Vec::new(), true)
    };
    let ([top_k, device_buffer_size, host_to_device_ratio, swap_in_block_size], py) =
        hisparse_fields(&dict);
    let config: Map<String, Value> = dict.iter().map(|(k, v)| (k.clone(), v.to_json())).collect();
    Resolution {
        args,
        model,
        model_source,
        context_len,
        is_dsa,
        other_sparse,
        is_dsv4,
        index_topk,
        index_kpool,
        hip,
        sm_major,
        compute_capability,
        kv_cache_dtype,
        page_size,
        disable_radix_cache: disable_radix_cache(args),
        dsa_prefill_backend,
        dsa_decode_backend,
        disaggregation_mode,
        config,
        config_ok,
        top_k,
        device_buffer_size,
        host_to_device_ratio,
        swap_in_block_size,
        py,
        speculative: speculative(args, arch.as_deref()),
        machine: *machine,
    }
}

/// Bytes of one token's MLA latent in one layer as SGLang stores it
/// (`calculate_mla_kv_cache_dim`, mem_cache/kv_cache_configurator.py:3412-3475):
/// bfloat16 `(kv_lora_rank + qk_rope_head_dim) x 2`; fp8_e4m3
/// `kv_lora_rank + kv_lora_rank / 128 x 4 + qk_rope_head_dim x 2` (656), or the
/// raw `kv_lora_rank + qk_rope_head_dim` for the raw layout (`raw_layout`: a
/// trtllm backend, ROCm's tilelang/triton/aiter, or tilelang for both).
pub fn kv_row_bytes(dtype: &str, model: &ModelInfo, raw_layout: bool) -> Option<u64> {
    let rank = u64::from(model.kv_lora_rank?);
    let rope = u64::from(model.qk_rope_head_dim?);
    match dtype {
        // u32 inputs: these sums and products cannot overflow u64.
        "bfloat16" => Some((rank + rope) * 2),
        "fp8_e4m3" if raw_layout => Some(rank + rope),
        "fp8_e4m3" => Some(rank + rank / 128 * 4 + rope * 2),
        _ => None,
    }
}

/// Whether the DSA KV rows use the raw layout (kv_cache_configurator.py:3425-3455).
pub(crate) fn raw_layout(r: &Resolution<'_>) -> bool {
    fn name(x: &Option<Resolved<String>>) -> &str {
        x.as_ref().map_or("", |v| v.value.as_str())
    }
    let (pre, dec) = (name(&r.dsa_prefill_backend), name(&r.dsa_decode_backend));
    let trtllm = match r.args.pd_mode() {
        "decode" => dec == "trtllm",
        "prefill" => pre == "trtllm",
        _ => pre == "trtllm" || dec == "trtllm",
    };
    let hip_raw = r.hip
        && [pre, dec]
            .iter()
            .any(|x| matches!(*x, "tilelang" | "triton" | "aiter"));
    trtllm || hip_raw || (pre == "tilelang" && dec == "tilelang")
}
