//! Resolution and validation: from [`ServeArgs`] to a [`Report`].
//!
//! This module reads the inputs (each JSON flag, the scalars, the model) and
//! checks their shape; [`super::validate`] then checks HiSparse itself, and
//! `super::fixes::settle` makes the report's fixes work together. The
//! public entry points ([`super::advise::resolve`]) run this once per
//! configuration the fixes give.
//! Order follows vLLM 0.33.0 `VllmConfig.__post_init__`: `hisparse_config` is
//! inferred from a HiSparseConnector (PR 57041) *before* validation, so every
//! HiSparse check fires on the inferred path too, and all run in one pass.

use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::engines::vllm_0_33::args::{LoadError, ServeArgs};
use crate::engines::vllm_0_33::connectors::{self, ConnectorTree};
use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use crate::engines::vllm_0_33::input::{HiSparseInput, Hw, Scalars};
use crate::engines::vllm_0_33::schema::{
    self, check_keys, closest, lax_bool, lax_int, quoted, type_error, ATTENTION_FIELDS,
    CACHE_DTYPES, COMPILATION_FIELDS, CUDAGRAPH_MODES, HISPARSE_FIELDS, PLATFORMS,
    SPECULATIVE_FIELDS,
};
use crate::engines::vllm_0_33::stages;
use crate::engines::vllm_0_33::validate::{self, PoolAdvice, StartupNeed};
use crate::engines::vllm_0_33::{fixes, misplaced, startup};
use crate::model::{self, ModelInfo};
use crate::path::FieldPath;
use crate::report::{ModelSummary, Report};
use crate::sizes::Parallel;
use serde_json::{json, Value};

/// One resolution: the report (errors settled, see [`super::fixes`]), the
/// model facts and what start-up needs of the host pool when the sizes are known.
pub(crate) fn resolve_once(
    args: &ServeArgs,
    hw: Hw<'_>,
    advice: Option<&PoolAdvice>,
) -> Result<(Report, Option<ModelInfo>, Option<StartupNeed>), LoadError> {
    let gpu = hw.gpu;
    let (normalized, mut d) = args.normalized();
    if !d.is_empty() {
        // Flags that are not JSON: report them alone rather than guess around
        // them, under the model they were given with when it reads.
        let mut report = Report::from_diagnostics(crate::report::ENGINE_VLLM, super::VERSION, d);
        report.model = args
            .load_hf_config()
            .ok()
            .flatten()
            .map(|(cfg, source)| summary(&model::read(&cfg, None), source));
        return Ok((report, None, None));
    }
    let args: &ServeArgs = &normalized;
    scan_shell_variables(args, &mut d);

    let walked = d.len();
    let tree = match &args.kv_transfer_config {
        None | Some(Value::Null) => ConnectorTree::default(),
        Some(v) => connectors::walk(v, &mut d),
    };
    let walk_end = d.len();
    let explicit = parse_attention(args.attention_config.as_ref(), &mut d);
    let num_speculative_tokens = parse_speculative(args.speculative_config.as_ref(), &mut d);
    let cudagraph_mode = parse_compilation(args.compilation_config.as_ref(), &mut d);
    // The children's configs are built while the config is, unless the HMA
    // flag is given (no supports_hma_config) and no full CUDA graph asks
    // whether a connector needs piecewise ones (config/vllm.py:1977-1990,
    // multi_connector.py:149; FULL_AND_PIECEWISE is the default on CUDA).
    let full_graphs = !matches!(cudagraph_mode.as_deref(), Some("NONE" | "PIECEWISE"));
    let children_late = args.disable_hybrid_kv_cache_manager.is_some() && !full_graphs;
    stages::set_connector_stages(&mut d[walked..walk_end], children_late);
    let mut scalars = check_scalars(args, &mut d);
    scalars.gpus_per_node = hw.gpus_per_node;
    scalars.gpus_per_node_server = hw.server.map(str::to_owned);

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
            None => model::file::read_shared(cfg),
        };
        (info, source.clone())
    });
    if let (Some((info, _)), Some(len)) = (&model, scalars.max_model_len) {
        check_max_model_len(
            info,
            len,
            args.vllm_allow_long_max_model_len.as_deref(),
            &mut d,
        );
    }

    let enabled = explicit.is_some() || !tree.sites.is_empty();
    startup::check(
        args,
        &scalars,
        model.as_ref().map(|(m, _)| m),
        num_speculative_tokens,
        enabled,
        &mut d,
    );
    let mut needed = None;
    let hisparse = if enabled {
        let misplaced = misplaced::find(args, &tree);
        let ctx = validate::Ctx {
            args,
            tree: &tree,
            explicit: explicit.as_ref(),
            model: model.as_ref().map(|(m, _)| m),
            num_speculative_tokens,
            cudagraph_mode: cudagraph_mode.as_deref(),
            scalars: &scalars,
            gpu,
            advice,
            misplaced: &misplaced,
        };
        ctx.validate(&mut d, &mut needed)
    } else {
        None
    };

    let mut report = Report::from_diagnostics(crate::report::ENGINE_VLLM, super::VERSION, d);
    fixes::settle(&mut report.errors, args);
    report.hisparse_enabled = enabled;
    report.model = model
        .as_ref()
        .map(|(info, source)| summary(info, source.clone()));
    report.gpu = gpu.cloned();
    report.hisparse = if report.valid {
        hisparse.map(crate::report::HiSparseSettings::Vllm)
    } else {
        None
    };
    Ok((report, model.map(|(info, _)| info), needed))
}

fn summary(info: &ModelInfo, source: String) -> ModelSummary {
    ModelSummary {
        source,
        architecture: info.architecture.clone(),
        model_type: info.model_type.clone(),
    }
}

fn scan_shell_variables(args: &ServeArgs, d: &mut Vec<Diagnostic>) {
    for (name, value) in args.json_fields() {
        if let Some(v) = value {
            schema::find_shell_variables(v, &FieldPath::root(name), d);
        }
    }
    for (name, value) in [
        ("model", &args.model),
        ("revision", &args.revision),
        ("hf_config_path", &args.hf_config_path),
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
        .stage(stages::VllmStage::Argparse)
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

/// `data_parallel_size_local` in the range vLLM 0.33 `ParallelConfig` takes:
/// 0 ..= `data_parallel_size` (`Field(ge=0)`, vllm/config/parallel.py:150;
/// "must be <= data_parallel_size", :545). `dp` is the DP size after its own
/// fix, so the two fixes pass together. Returns the value the other rules read.
fn check_dp_local(given: Option<i64>, dp: i64, d: &mut Vec<Diagnostic>) -> Option<i64> {
    let n = given?;
    if (0..=dp).contains(&n) {
        return Some(n);
    }
    let path = FieldPath::root("data_parallel_size_local");
    let allowed = format!("0 ..= data_parallel_size ({dp}): the DP replicas this node runs");
    let (message, hint, fixed) = if n < 0 {
        (
            format!("data_parallel_size_local must be at least 0, not {n}"),
            "omit --data-parallel-size-local to run every replica on this node, or give the replicas this node runs".to_owned(),
            None,
        )
    } else {
        (
            format!("data_parallel_size_local {n} is more than data_parallel_size {dp}: a node cannot run more DP replicas than the deployment has; vLLM {} ParallelConfig refuses it", crate::engines::vllm_0_33::VERSION),
            format!("run at most the {dp} replicas on this node (--data-parallel-size-local {dp}), or raise --data-parallel-size to the whole deployment's replicas"),
            Some(dp),
        )
    };
    d.push(
        Diagnostic::error(Code::InvalidValue, path.clone(), message)
            .given(&json!(n))
            .allowed(allowed)
            .hint(hint)
            .fix(vec![match fixed {
                Some(v) => FixOp::Set {
                    path,
                    value: json!(v),
                },
                None => FixOp::Remove { path },
            }]),
    );
    fixed
}

fn check_scalars(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> Scalars {
    check_memory(args, d);
    at_least_one("max_num_seqs", args.max_num_seqs, d);
    let parallel = parallel(args, d);

    let block_size = block_size(args, d);
    let max_model_len = max_model_len(args, d);
    let platform = platform(args, d);
    let kv_cache_dtype = kv_cache_dtype(args, d);
    let v2_runner = v2_runner(args, d);
    Scalars {
        parallel,
        max_model_len_auto: args.max_model_len == Some(-1),
        block_size,
        max_model_len,
        platform,
        kv_cache_dtype,
        v2_runner,
        gpus_per_node: None,
        gpus_per_node_server: None,
    }
}

/// A count that must be at least 1 (the fix sets 1); unset is 1.
fn at_least_one(name: &str, v: Option<i64>, d: &mut Vec<Diagnostic>) -> i64 {
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
}

/// gpu_memory_utilization in (0, 1], kv_cache_memory_bytes not negative.
fn check_memory(args: &ServeArgs, d: &mut Vec<Diagnostic>) {
    if let Some(u) = args.gpu_memory_utilization {
        if !(u > 0.0 && u <= 1.0) {
            let path = FieldPath::root("gpu_memory_utilization");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    "gpu_memory_utilization must be greater than 0 and at most 1 (a fraction of each GPU's memory)",
                )
                .given(&crate::pytext::py_float_json(u))
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
}

/// The parallel sizes, each at least 1.
fn parallel(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> Parallel {
    let dp = at_least_one("data_parallel_size", args.data_parallel_size, d);
    Parallel {
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
        dp,
        nnodes: at_least_one("nnodes", args.nnodes, d),
        dp_local: check_dp_local(args.data_parallel_size_local, dp, d)
            // An external-LB DP rank runs one replica (arg_utils.py:2476-2484);
            // startup::check_launch reports another given size.
            .map(|n| {
                if args.data_parallel_rank.is_some() {
                    1
                } else {
                    n
                }
            })
            .or(args.data_parallel_rank.map(|_| 1)),
    }
}

/// block_size, when given and positive.
fn block_size(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> Option<u64> {
    match args.block_size {
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
    }
}

/// max_model_len, when given and not auto (-1).
fn max_model_len(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> Option<u64> {
    match args.max_model_len {
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
    }
}

/// The platform (default cuda; an unknown one is read as cuda).
fn platform(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> String {
    match args.platform.as_deref() {
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
    }
}

/// kv_cache_dtype, when given and one vLLM accepts.
fn kv_cache_dtype(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> Option<String> {
    match args.kv_cache_dtype.as_deref() {
        Some(t) if !CACHE_DTYPES.contains(&t) => {
            let path = FieldPath::root("kv_cache_dtype");
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    format!(
                        "\"{t}\" is not a kv_cache_dtype vLLM {} accepts",
                        crate::engines::vllm_0_33::VERSION
                    ),
                )
                .stage(stages::VllmStage::Argparse)
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
    }
}

/// VLLM_USE_V2_MODEL_RUNNER, as vLLM reads it.
fn v2_runner(args: &ServeArgs, d: &mut Vec<Diagnostic>) -> Option<bool> {
    // vllm/envs.py:363 maybe_convert_bool: bool(int(value)), Python's int()
    // (`1_0`, ` 1 `, `+1`, 23 digits; not `1.0`).
    match args.vllm_use_v2_model_runner.as_deref() {
        None => None,
        Some(s) => match crate::pytext::py_int(s) {
            Some(n) => Some(!n.is_zero()),
            None => {
                let path = FieldPath::root("VLLM_USE_V2_MODEL_RUNNER");
                d.push(
                    Diagnostic::error(Code::InvalidValue, path.clone(), format!("VLLM_USE_V2_MODEL_RUNNER={s:?} is not an integer; vLLM {} fails to start on it", crate::engines::vllm_0_33::VERSION))
                        .given(&json!(s))
                        .allowed("\"1\", \"0\", or unset")
                        .hint("unset VLLM_USE_V2_MODEL_RUNNER")
                        .fix(vec![FixOp::Remove { path }]),
                );
                None
            }
        },
    }
}

/// A max_model_len over the model's: vLLM 0.33 refuses it while building
/// its config ("User-specified max_model_len (N) is greater than the derived
/// max_model_len", vllm/config/model.py:2660-2684), unless
/// `VLLM_ALLOW_LONG_MAX_MODEL_LEN` is `1` or `true` (vllm/envs.py:1115-1118):
/// then it only warns (:2676), and so does this check.
fn check_max_model_len(
    info: &ModelInfo,
    len: u64,
    allow_long: Option<&str>,
    d: &mut Vec<Diagnostic>,
) {
    let Some(limit) = &info.max_position_embeddings else {
        return;
    };
    let allowed =
        allow_long.is_some_and(|v| matches!(v.trim().to_lowercase().as_str(), "1" | "true"));
    if len > limit.value && allowed {
        d.push(
            Diagnostic::warning(
                Code::MaxModelLenTooLarge,
                FieldPath::root("max_model_len"),
                format!(
                    "max_model_len {len} is longer than the model's {} ({}); VLLM_ALLOW_LONG_MAX_MODEL_LEN lets vLLM 0.33 start with it and warn (config/model.py:2676): positions past {} give NaN with RoPE",
                    limit.value, limit.source, limit.value
                ),
            )
            .stage(stages::VllmStage::Never)
            .given(&json!(len))
            .allowed(format!("at most {} (longer only with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which is set)", limit.value)),
        );
    } else if len > limit.value {
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
