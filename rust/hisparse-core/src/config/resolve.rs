//! Resolution and validation: from [`ServeArgs`] to a [`Report`].
//!
//! This module reads the inputs (each JSON flag, the scalars, the model) and
//! checks their shape; [`super::validate`] then checks HiSparse itself.
//! Order follows vLLM 0.33.0 `VllmConfig.__post_init__`: `hisparse_config` is
//! inferred from a HiSparseConnector (PR 57041) *before* validation, so every
//! HiSparse check fires on the inferred path too, and all run in one pass.

use crate::config::args::{LoadError, ServeArgs};
use crate::config::connectors::{self, ConnectorTree};
use crate::config::model::{self, ModelInfo};
use crate::config::report::{ModelSummary, Report};
use crate::config::schema::{
    self, check_keys, closest, lax_bool, lax_int, quoted, type_error, ATTENTION_FIELDS,
    CACHE_DTYPES, COMPILATION_FIELDS, CUDAGRAPH_MODES, HISPARSE_FIELDS, PLATFORMS,
    QUANTIZATION_METHODS, SPECULATIVE_FIELDS,
};
use crate::config::validate;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use crate::sizes::Parallel;
use serde_json::{json, Value};

/// The explicit `attention_config.hisparse_config`, as far as it parsed.
pub(crate) struct HiSparseInput {
    pub(crate) path: FieldPath,
    pub(crate) device_buffer_size: Option<u64>,
    pub(crate) eager_host_mirror: Option<bool>,
}

/// Scalars after their own checks; invalid ones fall back to vLLM's defaults
/// (their error is already recorded).
pub(crate) struct Scalars {
    pub(crate) parallel: Parallel,
    pub(crate) block_size: Option<u64>,
    pub(crate) max_model_len: Option<u64>,
    /// `--max-model-len auto` / -1: vLLM fits the context to memory.
    pub(crate) max_model_len_auto: bool,
    pub(crate) platform: String,
    pub(crate) kv_cache_dtype: Option<String>,
    pub(crate) v2_runner: Option<bool>,
}

/// Resolve and validate a serve configuration.
///
/// Returns every error and warning at once; `Err` only when the model's
/// config file cannot be read at all (an I/O problem, not a configuration one).
pub fn resolve(args: &ServeArgs) -> Result<Report, LoadError> {
    resolve_with_model(args).map(|(report, _)| report)
}

/// [`resolve`], also returning the model facts it read (after `--hf-overrides`),
/// for the capacity planner.
pub fn resolve_with_model(args: &ServeArgs) -> Result<(Report, Option<ModelInfo>), LoadError> {
    let (normalized, mut d) = args.normalized();
    if !d.is_empty() {
        // Flags that are not JSON: report them alone rather than guess around them.
        return Ok((Report::from_diagnostics(d), None));
    }
    let args: &ServeArgs = &normalized;
    scan_shell_variables(args, &mut d);

    let tree = match &args.kv_transfer_config {
        None | Some(Value::Null) => ConnectorTree::default(),
        Some(v) => connectors::walk(v, &mut d),
    };
    let explicit = parse_attention(args.attention_config.as_ref(), &mut d);
    let num_speculative_tokens = parse_speculative(args.speculative_config.as_ref(), &mut d);
    let cudagraph_mode = parse_compilation(args.compilation_config.as_ref(), &mut d);
    let scalars = check_scalars(args, &mut d);

    let loaded = args.load_hf_config()?;
    let overrides = match &args.hf_overrides {
        None | Some(Value::Null) => None,
        Some(o @ Value::Object(_)) => Some(o),
        Some(other) => {
            d.push(
                type_error(&FieldPath::root("hf_overrides"), "an object", other).fix(vec![
                    FixOp::Remove {
                        path: FieldPath::root("hf_overrides"),
                    },
                ]),
            );
            None
        }
    };
    let model = loaded.as_ref().map(|(cfg, source)| {
        let info = match overrides {
            Some(o) => {
                let mut merged = Value::clone(cfg);
                model::deep_merge(&mut merged, o);
                model::read(&merged, Some(o))
            }
            None => model::read(cfg, None),
        };
        (info, source.clone())
    });
    if let (Some((info, _)), Some(len)) = (&model, scalars.max_model_len) {
        check_max_model_len(info, len, &mut d);
    }

    let enabled = explicit.is_some() || !tree.sites.is_empty();
    check_context_parallel(
        &scalars.parallel,
        args.kv_transfer_config.as_ref(),
        model.as_ref().map(|(m, _)| m),
        enabled,
        &mut d,
    );
    if let Some((info, _)) = &model {
        check_quantization(info, &mut d);
        check_heads_split(info, scalars.parallel.tp, &mut d);
        check_mtp_layers(args, info, &mut d);
    }
    check_launch(args, &scalars, enabled, &mut d);
    if num_speculative_tokens == Some(None) {
        speculative_tokens_missing(args, model.as_ref().map(|(m, _)| m), &mut d);
    }
    let hisparse = if enabled {
        let ctx = validate::Ctx {
            args,
            tree: &tree,
            explicit: explicit.as_ref(),
            model: model.as_ref().map(|(m, _)| m),
            num_speculative_tokens,
            cudagraph_mode: cudagraph_mode.as_deref(),
            scalars: &scalars,
        };
        ctx.validate(&mut d)
    } else {
        None
    };

    let mut report = Report::from_diagnostics(d);
    report.hisparse_enabled = enabled;
    report.model = model.as_ref().map(|(info, source)| ModelSummary {
        source: source.clone(),
        architecture: info.architecture.clone(),
        model_type: info.model_type.clone(),
    });
    report.hisparse = if report.valid { hisparse } else { None };
    Ok((report, model.map(|(info, _)| info)))
}

fn scan_shell_variables(args: &ServeArgs, d: &mut Vec<Diagnostic>) {
    for (name, value) in args.json_fields() {
        if let Some(v) = value {
            schema::find_shell_variables(v, &FieldPath::root(name), d);
        }
    }
    for (name, value) in [
        ("model", &args.model),
        ("kv_cache_dtype", &args.kv_cache_dtype),
        ("platform", &args.platform),
    ] {
        if let Some(text) = value {
            schema::find_shell_variables(&Value::String(text.clone()), &FieldPath::root(name), d);
        }
    }
}

fn parse_attention(value: Option<&Value>, d: &mut Vec<Diagnostic>) -> Option<HiSparseInput> {
    let root = FieldPath::root("attention_config");
    let obj = match value? {
        Value::Null => return None,
        Value::Object(obj) => obj,
        other => {
            d.push(
                type_error(&root, "an object", other)
                    .fix(vec![FixOp::Remove { path: root.clone() }]),
            );
            return None;
        }
    };
    check_keys(obj, ATTENTION_FIELDS, &[], "AttentionConfig", &root, d);
    let path = root.key("hisparse_config");
    let hs = match obj.get("hisparse_config")? {
        Value::Null => return None,
        Value::Object(hs) => hs,
        other => {
            d.push(
                type_error(&path, "an object (HiSparseConfig) or null", other)
                    .hint(format!(
                        "write {path} as an object, e.g. {{}} for the defaults"
                    ))
                    .fix(vec![FixOp::Set {
                        path: path.clone(),
                        value: json!({}),
                    }]),
            );
            return Some(HiSparseInput {
                path,
                device_buffer_size: None,
                eager_host_mirror: None,
            });
        }
    };
    check_keys(hs, HISPARSE_FIELDS, &[], "HiSparseConfig", &path, d);
    let dbs_path = path.key("device_buffer_size");
    let device_buffer_size = match hs.get("device_buffer_size") {
        None | Some(Value::Null) => None,
        Some(v) => match lax_int(v) {
            Some(n) if n > 0 => Some(n as u64),
            Some(_) => {
                d.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        dbs_path.clone(),
                        format!("{dbs_path} must be greater than 0"),
                    )
                    .given(v)
                    .allowed("an integer > 0, or null for the default")
                    .hint(format!("remove {dbs_path} to use the default"))
                    .fix(vec![FixOp::Remove {
                        path: dbs_path.clone(),
                    }]),
                );
                None
            }
            None => {
                d.push(
                    type_error(&dbs_path, "an integer", v)
                        .hint(format!("remove {dbs_path} to use the default"))
                        .fix(vec![FixOp::Remove {
                            path: dbs_path.clone(),
                        }]),
                );
                None
            }
        },
    };
    let mirror_path = path.key("eager_host_mirror");
    let eager_host_mirror = match hs.get("eager_host_mirror") {
        None => None,
        Some(v) => match lax_bool(v) {
            Some(b) => Some(b),
            None => {
                d.push(
                    type_error(&mirror_path, "a boolean", v).fix(vec![FixOp::Remove {
                        path: mirror_path.clone(),
                    }]),
                );
                None
            }
        },
    };
    Some(HiSparseInput {
        path,
        device_buffer_size,
        eager_host_mirror,
    })
}

/// Returns `num_speculative_tokens` when speculative decoding is configured.
fn parse_speculative(value: Option<&Value>, d: &mut Vec<Diagnostic>) -> Option<Option<u64>> {
    let root = FieldPath::root("speculative_config");
    let obj = match value? {
        Value::Null => return None,
        Value::Object(obj) => obj,
        other => {
            d.push(
                type_error(&root, "an object", other)
                    .fix(vec![FixOp::Remove { path: root.clone() }]),
            );
            return None;
        }
    };
    check_keys(obj, SPECULATIVE_FIELDS, &[], "SpeculativeConfig", &root, d);
    let path = root.key("num_speculative_tokens");
    match obj.get("num_speculative_tokens") {
        None | Some(Value::Null) => Some(None),
        Some(v) => match lax_int(v) {
            Some(n) if n > 0 => Some(Some(n as u64)),
            _ => {
                d.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        path.clone(),
                        format!("{path} must be an integer greater than 0"),
                    )
                    .given(v)
                    .allowed("an integer > 0")
                    .fix(vec![FixOp::Set {
                        path,
                        value: json!(1),
                    }]),
                );
                Some(Some(1))
            }
        },
    }
}

/// Returns the normalized `cudagraph_mode` name when one is given.
fn parse_compilation(value: Option<&Value>, d: &mut Vec<Diagnostic>) -> Option<String> {
    let root = FieldPath::root("compilation_config");
    let obj = match value? {
        Value::Null => return None,
        Value::Object(obj) => obj,
        other => {
            d.push(
                type_error(&root, "an object", other)
                    .fix(vec![FixOp::Remove { path: root.clone() }]),
            );
            return None;
        }
    };
    check_keys(obj, COMPILATION_FIELDS, &[], "CompilationConfig", &root, d);
    let path = root.key("cudagraph_mode");
    let v = obj.get("cudagraph_mode")?;
    // pydantic takes enum values (0, 1, 2 are NONE, PIECEWISE, FULL); vLLM upper-cases names.
    let name = match v {
        Value::Null => return None,
        Value::String(s) => CUDAGRAPH_MODES
            .iter()
            .find(|m| m.eq_ignore_ascii_case(s))
            .copied(),
        Value::Number(n) => n
            .as_u64()
            .and_then(|i| ["NONE", "PIECEWISE", "FULL"].get(i as usize).copied()),
        _ => None,
    };
    if name.is_none() {
        let mut diag = Diagnostic::error(
            Code::InvalidValue,
            path.clone(),
            format!("{path} is not a CUDAGraphMode"),
        )
        .given(v)
        .allowed(format!("one of {}", quoted(CUDAGRAPH_MODES)));
        let best = v
            .as_str()
            .and_then(|s| closest(&s.to_ascii_uppercase(), CUDAGRAPH_MODES))
            .unwrap_or("FULL_AND_PIECEWISE");
        diag = diag.fix(vec![FixOp::Set {
            path,
            value: json!(best),
        }]);
        d.push(diag);
    }
    name.map(str::to_owned)
}

fn check_scalars(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> Scalars {
    let at_least_one = |name: &str, v: Option<i64>, d: &mut Vec<Diagnostic>| -> i64 {
        match v {
            Some(n) if n < 1 => {
                let path = FieldPath::root(name);
                d.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        path.clone(),
                        format!("{name} must be at least 1"),
                    )
                    .given(&json!(n))
                    .allowed("an integer >= 1")
                    .fix(vec![FixOp::Set {
                        path,
                        value: json!(1),
                    }]),
                );
                1
            }
            Some(n) => n,
            None => 1,
        }
    };
    if let Some(u) = args.gpu_memory_utilization {
        if !(u > 0.0 && u <= 1.0) {
            let path = FieldPath::root("gpu_memory_utilization");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    "gpu_memory_utilization must be greater than 0 and at most 1 (a fraction of each GPU's memory)",
                )
                .given(&json!(u))
                .allowed("0 < gpu_memory_utilization <= 1 (vLLM 0.33 CacheConfig; default 0.92)")
                .fix(vec![FixOp::Remove { path }]),
            );
        }
    }
    if let Some(b) = args.kv_cache_memory_bytes.filter(|b| *b < 0) {
        let path = FieldPath::root("kv_cache_memory_bytes");
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                path.clone(),
                "kv_cache_memory_bytes must not be negative",
            )
            .given(&json!(b))
            .allowed("a number of bytes per GPU (20G = 20 x 2^30), or unset to use gpu_memory_utilization")
            .fix(vec![FixOp::Remove { path }]),
        );
    }
    at_least_one("max_num_seqs", args.max_num_seqs, d);
    let parallel = Parallel {
        tp: at_least_one("tensor_parallel_size", args.tensor_parallel_size, d),
        pp: at_least_one("pipeline_parallel_size", args.pipeline_parallel_size, d),
        dcp: at_least_one(
            "decode_context_parallel_size",
            args.decode_context_parallel_size,
            d,
        ),
        pcp: at_least_one(
            "prefill_context_parallel_size",
            args.prefill_context_parallel_size,
            d,
        ),
        dp: at_least_one("data_parallel_size", args.data_parallel_size, d),
        nnodes: at_least_one("nnodes", args.nnodes, d),
    };

    let block_size = match args.block_size {
        Some(b) if b <= 0 => {
            let path = FieldPath::root("block_size");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    "block_size must be greater than 0",
                )
                .given(&json!(b))
                .allowed("an integer > 0")
                .fix(vec![FixOp::Remove { path }]),
            );
            None
        }
        other => other.map(|b| b as u64),
    };
    let max_model_len = match args.max_model_len {
        None | Some(-1) => None,
        Some(n) if n <= 0 => {
            let path = FieldPath::root("max_model_len");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    "max_model_len must be a positive number of tokens, or -1 for auto",
                )
                .given(&json!(n))
                .allowed("an integer > 0, or -1 / \"auto\"")
                .fix(vec![FixOp::Remove { path }]),
            );
            None
        }
        Some(n) => Some(n as u64),
    };
    let platform = match args.platform.as_deref() {
        None => "cuda".to_owned(),
        Some(p) if PLATFORMS.contains(&p) => p.to_owned(),
        Some(p) => {
            let path = FieldPath::root("platform");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    format!("unknown platform \"{p}\""),
                )
                .given(&json!(p))
                .allowed(format!("one of {}", quoted(PLATFORMS)))
                .fix(vec![FixOp::Set {
                    path,
                    value: json!(closest(p, PLATFORMS).unwrap_or("cuda")),
                }]),
            );
            "cuda".to_owned()
        }
    };
    let kv_cache_dtype = match args.kv_cache_dtype.as_deref() {
        Some(t) if !CACHE_DTYPES.contains(&t) => {
            let path = FieldPath::root("kv_cache_dtype");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    format!(
                        "\"{t}\" is not a kv_cache_dtype vLLM {} accepts",
                        crate::VLLM_VERSION
                    ),
                )
                .given(&json!(t))
                .allowed(format!("one of {}", quoted(CACHE_DTYPES)))
                .fix(vec![FixOp::Set {
                    path,
                    value: json!(closest(t, CACHE_DTYPES).unwrap_or("auto")),
                }]),
            );
            None
        }
        other => other.map(str::to_owned),
    };
    // vLLM envs: maybe_convert_bool = bool(int(value)).
    let v2_runner = match args.vllm_use_v2_model_runner.as_deref() {
        None => None,
        Some(s) => match s.trim().parse::<i64>() {
            Ok(n) => Some(n != 0),
            Err(_) => {
                let path = FieldPath::root("VLLM_USE_V2_MODEL_RUNNER");
                d.push(
                    Diagnostic::error(Code::InvalidValue, path.clone(), format!("VLLM_USE_V2_MODEL_RUNNER={s:?} is not an integer; vLLM {} fails to start on it", crate::VLLM_VERSION))
                        .given(&json!(s))
                        .allowed("\"1\", \"0\", or unset")
                        .hint("unset VLLM_USE_V2_MODEL_RUNNER")
                        .fix(vec![FixOp::Remove { path }]),
                );
                None
            }
        },
    };
    Scalars {
        parallel,
        max_model_len_auto: args.max_model_len == Some(-1),
        block_size,
        max_model_len,
        platform,
        kv_cache_dtype,
        v2_runner,
    }
}

fn check_max_model_len(info: &ModelInfo, len: u64, d: &mut Vec<Diagnostic>) {
    let Some(limit) = &info.max_position_embeddings else {
        return;
    };
    if len > limit.value {
        let path = FieldPath::root("max_model_len");
        d.push(
            Diagnostic::error(
                Code::MaxModelLenTooLarge,
                path.clone(),
                format!(
                    "max_model_len {len} is longer than the model's {} ({})",
                    limit.value, limit.source
                ),
            )
            .given(&json!(len))
            .allowed(format!("at most {}", limit.value))
            .fix(vec![FixOp::Set {
                path,
                value: json!(limit.value),
            }]),
        );
    }
}

/// Why vLLM 0.33 refuses a decode-context-parallel size.
#[derive(Clone, Copy, PartialEq)]
enum DcpRule {
    /// DCP reuses the TP ranks: TP % DCP == 0 (vllm/config/parallel.py:597).
    DividesTp,
    /// With PCP: DCP off, over the PCP axis, or over TP x PCP (parallel.py:601).
    PcpAxis,
    /// A NixlConnector side is fully replicated or fully DCP-sharded
    /// (vllm/config/vllm.py:1581, an AssertionError).
    NixlTransferSize,
    /// ... and DCP-sharded only for MLA models (vllm.py:1587).
    NixlMlaOnly,
    /// GQA/MQA: the TP ranks must outnumber the KV heads (vllm/config/model.py:1579).
    KvHeads(u64),
}

/// The rule `dcp` breaks, if any. `kv_heads`: the KV heads of a model without
/// MLA (None for an MLA model or no model).
fn dcp_broken(p: &Parallel, dcp: i64, nixl: bool, kv_heads: Option<u64>) -> Option<DcpRule> {
    if p.pcp == 1 && p.tp % dcp != 0 {
        return Some(DcpRule::DividesTp);
    }
    if p.pcp > 1 && ![1, p.pcp, p.tp.saturating_mul(p.pcp)].contains(&dcp) {
        return Some(DcpRule::PcpAxis);
    }
    if dcp == 1 {
        return None;
    }
    if nixl && dcp != p.tp.max(p.pcp) {
        return Some(DcpRule::NixlTransferSize);
    }
    if nixl && kv_heads.is_some() {
        return Some(DcpRule::NixlMlaOnly);
    }
    match kv_heads {
        Some(h) if !u64::try_from(p.tp).is_ok_and(|tp| tp > h) => Some(DcpRule::KvHeads(h)),
        _ => None,
    }
}

/// vLLM 0.33 refuses these decode-context-parallel sizes while building its
/// config. The fix is the largest size below the given one that vLLM takes
/// (1 with HiSparse, which needs 1).
fn check_context_parallel(
    p: &Parallel,
    kv_transfer_config: Option<&Value>,
    model: Option<&ModelInfo>,
    hisparse: bool,
    d: &mut Vec<Diagnostic>,
) {
    let nixl =
        kv_transfer_config.is_some_and(|kv| connectors::vllm_has_connector(kv, "NixlConnector"));
    let kv_heads = model
        .filter(|m| m.kv_lora_rank.is_none())
        .and_then(|m| m.dims.num_key_value_heads.or(m.dims.num_attention_heads));
    let Some(rule) = dcp_broken(p, p.dcp, nixl, kv_heads) else {
        return;
    };
    let fixed = if hisparse {
        1
    } else {
        // The sizes vLLM could take: 1, the PCP / TP x PCP / NIXL sizes, and
        // TP's small divisors and cofactors (a bounded set, whatever the sizes).
        let small = (1..=64).filter(|k| p.tp % k == 0);
        [1, p.pcp, p.tp.saturating_mul(p.pcp), p.tp.max(p.pcp)]
            .into_iter()
            .chain(small.clone())
            .chain(small.map(|k| p.tp / k))
            .filter(|&c| c >= 1 && c < p.dcp && dcp_broken(p, c, nixl, kv_heads).is_none())
            .max()
            .unwrap_or(1)
    };
    let (tp, pcp, dcp, v) = (p.tp, p.pcp, p.dcp, crate::VLLM_VERSION);
    let (why, allowed) = match rule {
        DcpRule::DividesTp => (
            format!("decode context parallelism reuses the TP ranks, so tensor_parallel_size {tp} must be divisible by decode_context_parallel_size {dcp} (vLLM {v} ParallelConfig)"),
            format!("a divisor of tensor_parallel_size {tp}"),
        ),
        DcpRule::PcpAxis => (
            format!("with prefill context parallelism, decode_context_parallel_size must be 1, prefill_context_parallel_size ({pcp}) or tensor x prefill context parallel size ({}), not {dcp} (vLLM {v} ParallelConfig)", tp.saturating_mul(pcp)),
            format!("1, {pcp} or {}", tp.saturating_mul(pcp)),
        ),
        DcpRule::NixlTransferSize => (
            format!("with a NixlConnector, vLLM {v} needs decode_context_parallel_size 1 or the NIXL transfer size max(tensor_parallel_size, prefill_context_parallel_size) = {}, and fails an assertion on {dcp}", tp.max(pcp)),
            format!("1 or {}", tp.max(pcp)),
        ),
        DcpRule::NixlMlaOnly => (
            format!("with a NixlConnector, vLLM {v} supports decode_context_parallel_size > 1 only for MLA models, and fails an assertion on {dcp}"),
            "1".to_owned(),
        ),
        DcpRule::KvHeads(h) => (
            format!("decode context parallelism on a model without MLA (GQA/MQA) needs tensor_parallel_size ({tp}) above its {h} KV heads (vLLM {v} ModelConfig.verify_with_parallel_config)"),
            "1 for this tensor_parallel_size".to_owned(),
        ),
    };
    let path = FieldPath::root("decode_context_parallel_size");
    d.push(
        Diagnostic::error(Code::DecodeContextParallelInvalid, path.clone(), why)
            .given(&json!(dcp))
            .allowed(allowed)
            .fix(vec![FixOp::Set {
                path,
                value: json!(fixed),
            }]),
    );
}

/// vLLM 0.33 refuses a checkpoint quantization method it does not know while
/// building `ModelConfig` (`_verify_quantization`, vllm/config/model.py:1466).
/// A config without `quant_method` is left alone: vLLM derives one for
/// ModelOpt and compressed-tensors checkpoints.
fn check_quantization(model: &ModelInfo, d: &mut Vec<Diagnostic>) {
    let Some(method) = model
        .quantization_config
        .as_ref()
        .and_then(|q| q.get("quant_method"))
        .and_then(Value::as_str)
    else {
        return;
    };
    if QUANTIZATION_METHODS.contains(&method) {
        return;
    }
    d.push(
        Diagnostic::error(
            Code::UnknownQuantizationMethod,
            FieldPath::root("model"),
            format!(
                "{}'s quantization_config.quant_method is \"{method}\", which vLLM {} does not know: it refuses the model while building its config",
                model.name(),
                crate::VLLM_VERSION
            ),
        )
        .given(&json!(method))
        .allowed(format!("one of {}", quoted(QUANTIZATION_METHODS)))
        .hint("serve a checkpoint in a quantization format vLLM loads"),
    );
}

/// vLLM 0.33 `SpeculativeConfig` refuses a configuration without
/// `num_speculative_tokens` (vllm/config/speculative.py:1946): for MTP it does
/// not fall back to the checkpoint's `num_nextn_predict_layers`, and a
/// separate draft model's `n_predict` cannot be read here. The fix takes the
/// checkpoint's MTP depth for MTP, else 1.
fn speculative_tokens_missing(
    args: &ServeArgs,
    model: Option<&ModelInfo>,
    d: &mut Vec<Diagnostic>,
) {
    let spec = args.speculative_config.as_ref();
    let method = spec.and_then(|s| s.get("method")).and_then(Value::as_str);
    let mtp = matches!(method, Some(m) if m == "mtp" || m.ends_with("_mtp"));
    let depth = model
        .and_then(|m| m.num_nextn_predict_layers)
        .filter(|n| mtp && *n > 0)
        .unwrap_or(1);
    let path = FieldPath::root("speculative_config").key("num_speculative_tokens");
    d.push(
        Diagnostic::error(
            Code::SpeculativeTokensMissing,
            path.clone(),
            format!("speculative_config has no num_speculative_tokens: vLLM {} requires it (it does not take the checkpoint's MTP depth)", crate::VLLM_VERSION),
        )
        .allowed("an integer > 0")
        .fix(vec![FixOp::Set {
            path,
            value: json!(depth),
        }]),
    );
}

/// vLLM 0.33 `ModelConfig.verify_with_parallel_config` refuses a tensor
/// parallel size that does not divide the attention heads, at start-up.
fn check_heads_split(model: &ModelInfo, tp: i64, d: &mut Vec<Diagnostic>) {
    let Some(heads) = model.dims.num_attention_heads.filter(|h| *h > 0) else {
        return;
    };
    let Ok(tp_u) = u64::try_from(tp) else { return };
    if tp_u <= 1 || heads % tp_u == 0 {
        return;
    }
    // The largest size that divides the heads and does not exceed the given one.
    // Bounded by what real models have; beyond it, 1 always divides.
    let fixed = (1..=tp_u.min(heads).min(1 << 16))
        .rev()
        .find(|t| heads % t == 0)
        .unwrap_or(1);
    d.push(
        Diagnostic::error(
            Code::TensorParallelHeadsMismatch,
            FieldPath::root("tensor_parallel_size"),
            format!("{} has {heads} attention heads, which tensor_parallel_size {tp} does not divide (vLLM 0.33 ModelConfig.verify_with_parallel_config)", model.name()),
        )
        .given(&json!(tp))
        .allowed(format!("a divisor of {heads}"))
        .hint(format!("use tensor_parallel_size {fixed}, or scale out with data parallelism"))
        .fix(vec![FixOp::Set {
            path: FieldPath::root("tensor_parallel_size"),
            value: json!(fixed),
        }]),
    );
}

/// Launch rules vLLM 0.33 `EngineArgs.create_engine_config` applies to the
/// parallel layout (vllm/engine/arg_utils.py): `--nnodes` must divide the world
/// size (DP x PP x TP x PCP); pipeline parallelism needs the mp, ray or
/// external_launcher executor; Model Runner V1 (`VLLM_USE_V2_MODEL_RUNNER=0`)
/// does not run prefill context parallelism (vllm/config/vllm.py
/// `_get_v1_model_runner_unsupported_features`).
fn check_launch(args: &ServeArgs, s: &Scalars, hisparse: bool, d: &mut Vec<Diagnostic>) {
    let p = &s.parallel;
    let world = [p.dp, p.pp, p.tp, p.pcp]
        .iter()
        .fold(1i64, |w, n| w.saturating_mul(*n));
    if p.nnodes > 1 && world % p.nnodes != 0 {
        let fixed = (1..=p.nnodes.min(1 << 16))
            .rev()
            .find(|n| world % n == 0)
            .unwrap_or(1);
        let path = FieldPath::root("nnodes");
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                path.clone(),
                format!("nnodes {} does not divide the world size {world} (data x pipeline x tensor x prefill context parallel sizes); vLLM {} refuses it", p.nnodes, crate::VLLM_VERSION),
            )
            .given(&json!(p.nnodes))
            .allowed(format!("a divisor of {world}"))
            .fix(vec![FixOp::Set { path, value: json!(fixed) }]),
        );
    }
    let backend = args.distributed_executor_backend.as_deref();
    if p.pp > 1 && !matches!(backend, None | Some("mp" | "ray" | "external_launcher")) {
        let path = FieldPath::root("distributed_executor_backend");
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                path.clone(),
                format!("pipeline parallelism needs the mp, ray or external_launcher executor; vLLM {} does not run it on {}", crate::VLLM_VERSION, backend.unwrap_or_default()),
            )
            .given(&json!(backend))
            .allowed("\"mp\", \"ray\" or \"external_launcher\"")
            .fix(vec![FixOp::Set { path, value: json!("mp") }]),
        );
    }
    // With HiSparse, which needs Model Runner V2, validate reports V1 whatever else is on.
    if s.v2_runner == Some(false) && !hisparse && p.pcp > 1 {
        let path = FieldPath::root("VLLM_USE_V2_MODEL_RUNNER");
        d.push(
            Diagnostic::error(
                Code::ModelRunnerV2Disabled,
                path.clone(),
                "VLLM_USE_V2_MODEL_RUNNER=0 selects Model Runner V1, which does not run prefill context parallelism",
            )
            .given(&json!(args.vllm_use_v2_model_runner))
            .allowed("unset, or a non-zero integer")
            .hint("unset VLLM_USE_V2_MODEL_RUNNER (remove VLLM_USE_V2_MODEL_RUNNER=0)")
            .fix(vec![FixOp::Remove { path }]),
        );
    }
}

/// MTP speculation drafts with the checkpoint's own MTP layers; vLLM 0.33
/// refuses it for a model without them (`NotImplementedError: Unsupported
/// speculative method: 'mtp'`, vllm/config/speculative.py).
fn check_mtp_layers(args: &ServeArgs, model: &ModelInfo, d: &mut Vec<Diagnostic>) {
    let spec = args.speculative_config.as_ref();
    let method = spec.and_then(|s| s.get("method")).and_then(Value::as_str);
    let mtp = matches!(method, Some(m) if m == "mtp" || m.ends_with("_mtp"));
    let separate_draft = spec
        .and_then(|s| s.get("model"))
        .is_some_and(|m| !m.is_null());
    if !mtp || separate_draft || model.num_nextn_predict_layers.is_some_and(|n| n > 0) {
        return;
    }
    let path = FieldPath::root("speculative_config").key("method");
    d.push(
        Diagnostic::error(
            Code::InvalidValue,
            path,
            format!("{} has no MTP layers (num_nextn_predict_layers), so vLLM {} cannot speculate with method {}", model.name(), crate::VLLM_VERSION, method.unwrap_or_default()),
        )
        .given(&json!(method))
        .allowed("MTP on a checkpoint with MTP layers (DeepSeek-V3/V3.2, GLM-5), or another speculative method")
        .fix(vec![FixOp::Remove {
            path: FieldPath::root("speculative_config"),
        }]),
    );
}
