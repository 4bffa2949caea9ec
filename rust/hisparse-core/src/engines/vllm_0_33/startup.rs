//! vLLM 0.33.0's start-up rules outside HiSparse that decide whether a
//! configuration starts at all: the parallel layout (decode context
//! parallelism, nodes, executor, tensor parallelism over the heads), the
//! checkpoint's quantization, speculative decoding. They run with or without
//! HiSparse (`hisparse` only makes their fixes agree with HiSparse's own).
//! Each found by the differential test against vLLM's config code
//! (tests/vllm/test_differential.py); each cites the vLLM source it follows.

use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::engines::vllm_0_33::args::ServeArgs;
use crate::engines::vllm_0_33::connectors;
use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use crate::engines::vllm_0_33::input::Scalars;
use crate::engines::vllm_0_33::schema::{quoted, QUANTIZATION_METHODS};
use crate::engines::vllm_0_33::stages::VllmStage;
use crate::limits::MAX_DIVISOR_TRIALS;
use crate::model::ModelInfo;
use crate::path::FieldPath;
use crate::sizes::Parallel;
use serde_json::{json, Value};

/// Every start-up rule; `num_speculative_tokens` as `resolve` parsed it
/// (`Some(None)`: speculative decoding without a count).
pub(crate) fn check(
    args: &ServeArgs,
    scalars: &Scalars,
    model: Option<&ModelInfo>,
    num_speculative_tokens: Option<Option<u64>>,
    hisparse: bool,
    d: &mut Vec<Diagnostic>,
) {
    check_context_parallel(
        &scalars.parallel,
        args.kv_transfer_config.as_ref(),
        model,
        hisparse,
        d,
    );
    // MTP on a model without MTP layers: the fix removes speculative_config,
    // which settles a missing count too (a fix setting it would bring back a
    // speculative_config without a method, which vLLM refuses).
    let mut spec_removed = false;
    if let Some(info) = model {
        check_quantization(info, d);
        check_heads_split(info, scalars.parallel.tp, d);
        spec_removed = check_mtp_layers(args, info, d);
    }
    check_launch(args, scalars, model, hisparse, d);
    if num_speculative_tokens.is_some_and(|n| n.is_some()) && !spec_removed {
        check_draft_model(args, d);
    }
    if num_speculative_tokens == Some(None) && !spec_removed {
        speculative_tokens_missing(args, model, d);
    }
}

/// Why vLLM 0.33 refuses a decode-context-parallel size.
#[derive(Clone, Copy, Debug, PartialEq)]
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
    let (tp, pcp, dcp, v) = (p.tp, p.pcp, p.dcp, crate::engines::vllm_0_33::VERSION);
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
        check_quant_algo(model, method, d);
        return;
    }
    d.push(
        Diagnostic::error(
            Code::UnknownQuantizationMethod,
            FieldPath::root("model"),
            format!(
                "{}'s quantization_config.quant_method is \"{method}\", which vLLM {} does not know: it refuses the model while building its config",
                model.name(),
                crate::engines::vllm_0_33::VERSION
            ),
        )
        .given(&json!(method))
        .allowed(format!("one of {}", quoted(QUANTIZATION_METHODS)))
        .hint("serve a checkpoint in a quantization format vLLM loads"),
    );
}

/// ModelOpt checkpoints name their algorithm in `quant_algo` (top level, or
/// under `quantization`): without it, vLLM 0.33 refuses the model while
/// building its config ("Missing 'quant_algo' in quantization config",
/// vllm/model_executor/layers/quantization/modelopt.py:363, from
/// `VllmConfig._get_quantization_config`, vllm/config/vllm.py:1608).
/// `modelopt_mxfp8` fills in MXFP8 itself (modelopt.py:1249) and passes.
fn check_quant_algo(model: &ModelInfo, method: &str, d: &mut Vec<Diagnostic>) {
    let algo = |c: &Value| {
        c.get("quant_algo")
            .is_some_and(|a| !a.is_null() && a.as_str() != Some(""))
    };
    let Some(q) = model.quantization_config.as_ref() else {
        return;
    };
    let given = match q.get("quantization") {
        Some(inner) => algo(inner),
        None => algo(q),
    };
    if !matches!(method, "modelopt" | "modelopt_fp4") || given {
        return;
    }
    let example = if method == "modelopt_fp4" {
        "NVFP4"
    } else {
        "FP8"
    };
    d.push(
        Diagnostic::error(
            Code::QuantAlgoMissing,
            FieldPath::root("model"),
            format!(
                "{}'s quantization_config has quant_method \"{method}\" but no quant_algo: vLLM {} refuses the model while building its config (\"Missing 'quant_algo' in quantization config\")",
                model.name(),
                crate::engines::vllm_0_33::VERSION
            ),
        )
        .given(q)
        .allowed(format!("a quantization_config with quant_algo (\"{example}\" for {method})"))
        .hint(format!("the checkpoint's quantization_config is incomplete: add \"quant_algo\": \"{example}\" to it (as ModelOpt exports it), or serve a complete checkpoint")),
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
            format!("speculative_config has no num_speculative_tokens: vLLM {} requires it (it does not take the checkpoint's MTP depth)", crate::engines::vllm_0_33::VERSION),
        )
        .allowed("an integer > 0")
        .fix(vec![FixOp::Set {
            path,
            value: json!(depth),
        }]),
    );
}

/// Speculative methods that draft without a separate model (vLLM 0.33
/// `SpeculativeConfig.__post_init__`, vllm/config/speculative.py:1252-1291;
/// MTP and its model-named variants, `*_mtp`, are matched apart).
const DRAFTS_WITHOUT_MODEL: &[&str] = &[
    "dspark",
    "ngram",
    "[ngram]",
    "ngram_gpu",
    "suffix",
    "extract_hidden_states",
];

/// vLLM 0.33 refuses `num_speculative_tokens` without a draft model when the
/// method needs one: no method means `draft_model` ("num_speculative_tokens
/// was provided but without speculative model",
/// vllm/config/speculative.py:1294). The fix removes speculative_config
/// (which method or draft model was meant cannot be told).
fn check_draft_model(args: &ServeArgs, d: &mut Vec<Diagnostic>) {
    let Some(spec) = args.speculative_config.as_ref() else {
        return;
    };
    if spec.get("model").is_some_and(|m| !m.is_null()) {
        return;
    }
    let method = spec.get("method").and_then(Value::as_str);
    if matches!(method, Some(m) if m == "mtp" || m.ends_with("_mtp") || DRAFTS_WITHOUT_MODEL.contains(&m))
    {
        return;
    }
    let path = FieldPath::root("speculative_config");
    d.push(
        Diagnostic::error(
            Code::InvalidValue,
            path.clone(),
            format!(
                "speculative_config sets num_speculative_tokens but no draft model, and method {} needs one: vLLM {} refuses it (\"num_speculative_tokens was provided but without speculative model\")",
                method.unwrap_or("(none: draft_model)"),
                crate::engines::vllm_0_33::VERSION
            ),
        )
        .given(spec)
        .allowed(format!(
            "speculative_config.model, or a method that drafts without one: mtp, {}",
            DRAFTS_WITHOUT_MODEL.join(", ")
        ))
        .hint("name the draft model (speculative_config.model) or the method, e.g. {\"method\": \"mtp\"} on a checkpoint with MTP layers; or remove speculative_config")
        .fix(vec![FixOp::Remove { path }]),
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
    let fixed = largest_divisor_at_most(heads, tp_u);
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
/// `_get_v1_model_runner_unsupported_features`). Over nodes (issue 17): the
/// node rank, the executor, external-LB DP ranks, the node groups and each
/// replica's span (read when the engine starts), `--headless`.
fn check_launch(
    args: &ServeArgs,
    s: &Scalars,
    model: Option<&ModelInfo>,
    hisparse: bool,
    d: &mut Vec<Diagnostic>,
) {
    let p = &s.parallel;
    let world = [p.dp, p.pp, p.tp, p.pcp]
        .iter()
        .fold(1i64, |w, n| w.saturating_mul(*n));
    // The nnodes the other rules see: the fix's, when it is refused, so the
    // fixes pass together.
    let mut nnodes = p.nnodes;
    if p.nnodes > 1 && world % p.nnodes != 0 {
        // world and nnodes are >= 1 here (at_least_one), so both convert.
        let fixed = largest_divisor_at_most(world.unsigned_abs(), p.nnodes.unsigned_abs());
        nnodes = i64::try_from(fixed).unwrap_or(1);
        let path = FieldPath::root("nnodes");
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                path.clone(),
                format!("nnodes {} does not divide the world size {world} (data x pipeline x tensor x prefill context parallel sizes); vLLM {} refuses it", p.nnodes, crate::engines::vllm_0_33::VERSION),
            )
            .given(&json!(p.nnodes))
            .allowed(format!("a divisor of {world}"))
            .fix(vec![FixOp::Set { path, value: json!(fixed) }]),
        );
    }
    // The layout the node rules see, with the nnodes fix.
    let layout = Parallel { nnodes, ..*p };
    let headless = args.headless == Some(true);
    check_node_rank(args, nnodes, d);
    check_multi_node_backend(args, nnodes, d);
    check_external_lb(args, p, model, d);
    // External LB: vLLM skips the node-group rule (parallel.py:825-826).
    let gpn = s
        .gpus_per_node
        .map(|n| (n, s.gpus_per_node_server.as_deref()));
    let grouped = args.data_parallel_rank.is_none() && check_node_groups(&layout, args, gpn, d);
    let headless_none = headless && p.dp_local == Some(0);
    if !(grouped || headless_none) {
        check_node_gpus(&layout, args, gpn, d);
    }
    if headless && p.dp_local == Some(0) {
        headless_without_replicas(&layout, args, d);
    }
    let backend = args.distributed_executor_backend.as_deref();
    if p.pp > 1 && !matches!(backend, None | Some("mp" | "ray" | "external_launcher")) {
        let path = FieldPath::root("distributed_executor_backend");
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                path.clone(),
                format!("pipeline parallelism needs the mp, ray or external_launcher executor; vLLM {} does not run it on {}", crate::engines::vllm_0_33::VERSION, backend.unwrap_or_default()),
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

/// GPUs of one DP replica (PP x TP x PCP).
fn world_within_dp(p: &Parallel) -> i64 {
    [p.pp, p.tp, p.pcp]
        .iter()
        .fold(1i64, |w, n| w.saturating_mul((*n).max(1)))
}

/// Whether vLLM 0.33 starts the engine with `local` DP replicas a node: the
/// DP / local node groups divide nnodes (`ParallelConfig.nnodes_within_dp`,
/// vllm/config/parallel.py:827), and, under the multiprocessing executor,
/// each replica's GPUs divide over the nodes it spans
/// (v1/executor/multiproc_executor.py:305).
fn layout_starts(p: &Parallel, local: i64, mp: bool) -> Result<(), LayoutRule> {
    if local <= 0 {
        return Err(LayoutRule::NoLocalReplica);
    }
    let groups = (p.dp / local).max(1);
    if p.nnodes % groups != 0 {
        return Err(LayoutRule::GroupsDivideNodes(groups));
    }
    let spans = p.nnodes / groups;
    if mp && world_within_dp(p) % spans != 0 {
        return Err(LayoutRule::ReplicaDividesNodes(spans));
    }
    Ok(())
}

/// Why a node layout does not start.
#[derive(Clone, Copy, Debug, PartialEq)]
enum LayoutRule {
    /// dp_local 0 (ZeroDivisionError in nnodes_within_dp).
    NoLocalReplica,
    /// This many node groups do not divide nnodes (parallel.py:827).
    GroupsDivideNodes(i64),
    /// A replica spans this many nodes, which its world does not divide
    /// (multiproc_executor.py:305).
    ReplicaDividesNodes(i64),
}

/// The DP replicas a node runs that vLLM starts with, nearest `want` (ties:
/// more replicas a node): `data_parallel_size / g` for the node groups `g`
/// that divide both nnodes and the DP size (bounded by the divisors of nnodes).
fn starting_dp_local(p: &Parallel, want: i64, mp: bool, gpn: Option<u64>) -> Option<i64> {
    let nnodes = p.nnodes.unsigned_abs();
    let mut best: Option<i64> = None;
    let mut g = 1u64;
    while g <= MAX_DIVISOR_TRIALS && g.saturating_mul(g) <= nnodes {
        if nnodes % g == 0 {
            for groups in [g, nnodes / g] {
                let Ok(groups) = i64::try_from(groups) else {
                    continue;
                };
                if p.dp % groups != 0 {
                    continue;
                }
                let local = p.dp / groups;
                if layout_starts(p, local, mp).is_err() || !fits_node(p, local, gpn) {
                    continue;
                }
                let closer = best.is_none_or(|b| {
                    let (db, dl) = (b.abs_diff(want), local.abs_diff(want));
                    dl < db || (dl == db && local > b)
                });
                if closer {
                    best = Some(local);
                }
            }
        }
        g += 1;
    }
    best
}

/// With `--nnodes`, the DP replicas form DP / dp_local node groups, which
/// must divide nnodes (vLLM 0.33 `ParallelConfig.nnodes_within_dp`,
/// vllm/config/parallel.py:820-835; dp_local 0 divides by zero there), and
/// under the multiprocessing executor each replica's GPUs must divide over
/// the nodes it spans (v1/executor/multiproc_executor.py:305). An unset
/// dp_local is vLLM's inference (arg_utils.py:2442). vLLM first reads these
/// when its engine starts (stage `engine_start`). The fix is the local size
/// nearest the given (or inferred) one that starts, reusing the DP size and
/// the nodes. External-LB DP ranks skip the rule (the caller does).
///
/// With the GPUs a node holds known (`gpn`), the fix is a local size whose
/// node runs no more (`fits_node`), else a node count that does
/// ([`node_layout`]): `-tp 8 -dp 3 --nnodes 2` on 8-GPU nodes is 3 nodes of
/// one replica, not `--data-parallel-size-local 3` (12 GPUs a node). True
/// when it reports.
fn check_node_groups(
    p: &Parallel,
    args: &ServeArgs,
    gpn: Option<(u64, Option<&str>)>,
    d: &mut Vec<Diagnostic>,
) -> bool {
    if p.nnodes <= 1 {
        return false;
    }
    let inferred = Parallel {
        dp_local: None,
        ..*p
    }
    .dp_local();
    let given = p.dp_local;
    let local = given.unwrap_or(inferred);
    let headless = args.headless == Some(true);
    if local == 0 && headless {
        return false; // vllm serve --headless refuses it first (headless_without_replicas)
    }
    let mp = matches!(
        args.distributed_executor_backend.as_deref(),
        None | Some("mp")
    );
    let Err(rule) = layout_starts(p, local, mp) else {
        return false;
    };
    let want = if local > 0 { local } else { inferred };
    let cap = gpn.map(|(n, _)| n);
    let fixed = starting_dp_local(p, want, mp, cap);
    // No local size fits the node's GPUs at these nodes: more nodes.
    let moved = match (fixed, gpn) {
        (None, Some((n, server))) => node_layout(p, n, mp).map(|l| (l, n, server)),
        _ => None,
    };
    let path = FieldPath::root("data_parallel_size_local");
    let v = crate::engines::vllm_0_33::VERSION;
    let (tp, pp, pcp, dp, nnodes) = (p.tp, p.pp, p.pcp, p.dp, p.nnodes);
    let which = match given {
        Some(n) => format!("data_parallel_size_local {n}"),
        None => format!("data_parallel_size_local, unset, which vLLM infers as {inferred} (this node's share of the world in whole replicas, arg_utils.py:2442)"),
    };
    let (code, why) = match rule {
        LayoutRule::NoLocalReplica => (
            Code::InvalidValue,
            format!("with nnodes {nnodes}, {which} makes no node group (0 replicas a node), which does not divide the {nnodes} nodes; vLLM {v} refuses it (ParallelConfig.nnodes_within_dp) when its engine starts"),
        ),
        LayoutRule::GroupsDivideNodes(groups) => (
            if given.is_some() { Code::InvalidValue } else { Code::DataParallelLayoutInvalid },
            format!("with nnodes {nnodes}, {which} makes {groups} node groups (data_parallel_size {dp} / {local}), which do not divide the {nnodes} nodes; vLLM {v} refuses it when its engine starts (ParallelConfig.nnodes_within_dp, vllm/config/parallel.py:827)"),
        ),
        LayoutRule::ReplicaDividesNodes(spans) => (
            Code::DataParallelLayoutInvalid,
            format!("with nnodes {nnodes} and {which}, each DP replica spans {spans} nodes, which its {} GPUs (pipeline {pp} x tensor {tp} x prefill context {pcp}) do not divide; vLLM {v}'s multiprocessing executor refuses it when it starts (world_size % nnodes_within_dp, vllm/v1/executor/multiproc_executor.py:305)", world_within_dp(p)),
        ),
    };
    let mut diag = Diagnostic::error(code, path.clone(), why)
        .stage(VllmStage::EngineStart)
        .allowed(format!("a data_parallel_size_local whose node groups (data_parallel_size / it) divide nnodes {nnodes}, each replica's GPUs dividing over the nodes it spans"));
    if let Some(n) = given {
        diag = diag.given(&json!(n));
    }
    diag = match (fixed, moved) {
        (Some(fixed), _) => {
            let on_node = gpn.map_or(String::new(), |(n, server)| {
                let used = Parallel { dp_local: Some(fixed), ..*p }.gpus_on_this_node();
                format!(" ({used} of the node's {})", node_gpus(n, server))
            });
            diag
                .hint(format!("with --nnodes {nnodes}, run {fixed} DP replica{} a node{on_node}: --data-parallel-size-local {fixed}", if fixed == 1 { "" } else { "s" }))
                .fix(vec![FixOp::Set { path: path.clone(), value: json!(fixed) }])
        }
        (None, Some(((n2, l2), n, server))) => {
            let used = Parallel { nnodes: n2, dp_local: Some(l2), ..*p }.gpus_on_this_node();
            diag
                .hint(format!("no data_parallel_size_local starts this layout over {nnodes} nodes of {}: the same {} GPUs run over {n2} nodes, {l2} DP replica{} ({used} GPUs) a node: --nnodes {n2} --data-parallel-size-local {l2} (--node-rank 0 ..= {} on each node)", node_gpus(n, server), p.dp.saturating_mul(world_within_dp(p)), if l2 == 1 { "" } else { "s" }, n2 - 1))
                .fix(vec![
                    FixOp::Set { path: FieldPath::root("nnodes"), value: json!(n2) },
                    FixOp::Set { path: path.clone(), value: json!(l2) },
                ])
        }
        (None, None) => diag.hint(format!("no data_parallel_size_local starts this layout over {nnodes} nodes: change --nnodes, --data-parallel-size or the replica's parallel sizes")),
    };
    d.push(diag);
    if local == 0 {
        // parallel.py:821-822: data_parallel_size // data_parallel_size_local.
        d.push(Diagnostic::warning(
            Code::Vllm033Crash,
            path,
            format!("vLLM {v} does not report this: it raises ZeroDivisionError (ParallelConfig.nnodes_within_dp divides data_parallel_size by data_parallel_size_local) at start-up"),
        ).stage(VllmStage::EngineStart));
    }
    true
}

/// "8 GPUs (the HGX H200 / DGX H200 (8 SXM GPUs a node) of --gpu)" or
/// "8 GPUs (--gpus-per-node)": the node's GPUs and where the figure is from.
fn node_gpus(n: u64, server: Option<&str>) -> String {
    match server {
        Some(s) => format!("{n} GPUs (--gpus-per-node, default: {s}, the --gpu's usual server)"),
        None => format!("{n} GPUs (--gpus-per-node)"),
    }
}

/// Whether this node runs no more GPUs than it holds with `local` replicas
/// (any count when unknown).
fn fits_node(p: &Parallel, local: i64, gpn: Option<u64>) -> bool {
    gpn.is_none_or(|n| {
        Parallel {
            dp_local: Some(local),
            ..*p
        }
        .gpus_on_this_node()
            <= n
    })
}

/// Most node counts [`node_layout`] tries.
const MAX_NODE_TRIALS: i64 = 1024;

/// The fewest nodes (at least the given ones, and enough for the GPUs) that
/// run this deployment's GPUs (DP x PP x TP x PCP, kept) with no node over
/// `gpn`, and the DP replicas a node then runs: `(nnodes, dp_local)`.
fn node_layout(p: &Parallel, gpn: u64, mp: bool) -> Option<(i64, i64)> {
    let dp = p.dp.max(1);
    let total = dp.saturating_mul(world_within_dp(p));
    let gpn = i64::try_from(gpn).ok()?;
    let first = p.nnodes.max(1).max(total.saturating_add(gpn - 1) / gpn);
    for n in first
        ..first
            .saturating_add(MAX_NODE_TRIALS)
            .min(total.saturating_add(1))
    {
        // nnodes divides the world (DP x PP x TP x PCP), as check_launch asks.
        if total % n != 0 {
            continue;
        }
        let q = Parallel { nnodes: n, ..*p };
        // Replicas that span the fewest nodes (tensor parallelism stays on a
        // node's links), then the most replicas a node.
        let best = (1..=dp.min(MAX_DIVISOR_TRIALS as i64))
            .filter(|l| dp % l == 0 && (n > 1 || *l == dp))
            .filter(|l| layout_starts(&q, *l, mp).is_ok() && fits_node(&q, *l, Some(gpn as u64)))
            .min_by_key(|l| {
                (
                    Parallel {
                        dp_local: Some(*l),
                        ..q
                    }
                    .nnodes_within_dp(),
                    -l,
                )
            });
        if let Some(l) = best {
            return Some((n, l));
        }
    }
    None
}

/// A launch that runs more GPUs on one node than it holds (`gpn`, issue 22):
/// vLLM 0.33 refuses a replica's world over the node's GPUs on one node under
/// the default executor while building its config ("World size (N) is larger
/// than the number of available GPUs (M) in this node",
/// vllm/config/parallel.py:1068-1077), and a DP replica past them as its
/// workers start ("DP adjusted local rank N is out of bounds for M devices",
/// v1/worker/gpu_worker.py:487-490; the replica's GPUs start at
/// `local_rank + dp_local_rank x world_size`, config/parallel.py:855). Ray and
/// external launchers place the workers themselves: not checked. The fix
/// keeps the GPUs: more nodes ([`node_layout`]).
fn check_node_gpus(
    p: &Parallel,
    args: &ServeArgs,
    gpn: Option<(u64, Option<&str>)>,
    d: &mut Vec<Diagnostic>,
) {
    let Some((n, server)) = gpn else { return };
    let backend = args.distributed_executor_backend.as_deref();
    if matches!(backend, Some("ray" | "external_launcher"))
        || args.data_parallel_backend.as_deref() == Some("ray")
    {
        return;
    }
    let need = p.gpus_on_this_node();
    if need <= n {
        return;
    }
    let v = crate::engines::vllm_0_33::VERSION;
    let world = world_within_dp(p);
    let local = p.dp_local();
    let (pp, tp, pcp) = (p.pp, p.tp, p.pcp);
    let per_replica = world / p.nnodes_within_dp().max(1);
    let config_stage = p.nnodes <= 1 && backend.is_none() && world as u64 > n;
    let why = if config_stage {
        format!("this node runs a replica of {world} GPUs (pipeline {pp} x tensor {tp} x prefill context {pcp}) and holds {}; vLLM {v} refuses it while building its config (\"World size ({world}) is larger than the number of available GPUs ({n}) in this node\", vllm/config/parallel.py:1068)", node_gpus(n, server))
    } else {
        format!("this node runs {local} DP replica{} of {per_replica} GPUs each here (pipeline {pp} x tensor {tp} x prefill context {pcp}{}), {need} GPUs, and holds {}; vLLM {v} refuses it as the workers start (\"DP adjusted local rank {} is out of bounds for {n} devices\", vllm/v1/worker/gpu_worker.py:487)", if local == 1 { "" } else { "s" }, if p.nnodes_within_dp() > 1 { format!(" over {} nodes", p.nnodes_within_dp()) } else { String::new() }, node_gpus(n, server), n)
    };
    let path = FieldPath::root("nnodes");
    let mp = matches!(backend, None | Some("mp"));
    let mut diag = Diagnostic::error(Code::GpusPerNodeExceeded, path.clone(), why)
        .given(&json!(need))
        .allowed(format!("at most {n} GPUs on one node (data_parallel_size_local x the replica's GPUs on this node)"));
    if config_stage {
        diag = diag.stage(VllmStage::Config);
    }
    diag = match node_layout(p, n, mp) {
        Some((nodes, l)) => {
            let total = p.dp.max(1).saturating_mul(world);
            let mut ops = vec![FixOp::Set { path: path.clone(), value: json!(nodes) }];
            let dp_path = FieldPath::root("data_parallel_size_local");
            let set_local = p.dp > 1 && (p.dp_local.is_some() || Parallel { nnodes: nodes, dp_local: None, ..*p }.dp_local() != l);
            let mut flags = format!("--nnodes {nodes}");
            if set_local {
                ops.push(FixOp::Set { path: dp_path, value: json!(l) });
                flags.push_str(&format!(" --data-parallel-size-local {l}"));
            }
            let used = Parallel { nnodes: nodes, dp_local: Some(l), ..*p }.gpus_on_this_node();
            diag.hint(format!("keep the {total} GPUs and run them over {nodes} nodes, {used} a node: {flags} (start it on each node with --node-rank 0 ..= {}); or lower the parallel sizes to fit one node", nodes - 1))
                .fix(ops)
        }
        None => diag.hint(format!("no node count runs these parallel sizes with at most {n} GPUs a node: lower --tensor-parallel-size, --pipeline-parallel-size or --data-parallel-size")),
    };
    d.push(diag);
}

/// `vllm serve --headless` runs this node's DP engines without an API server
/// and refuses to run none: "data_parallel_size_local must be > 0 in headless
/// mode" (vllm/entrypoints/cli/serve.py:203, after the config is built, as the
/// engines start). The fix is vLLM's own inference for an unset size, or the
/// nearest size that starts over the nodes.
fn headless_without_replicas(p: &Parallel, args: &ServeArgs, d: &mut Vec<Diagnostic>) {
    let inferred = Parallel {
        dp_local: None,
        ..*p
    }
    .dp_local();
    let mp = matches!(
        args.distributed_executor_backend.as_deref(),
        None | Some("mp")
    );
    let fixed = if p.nnodes <= 1 || layout_starts(p, inferred, mp).is_ok() {
        inferred
    } else {
        starting_dp_local(p, inferred, mp, None).unwrap_or(inferred)
    };
    let path = FieldPath::root("data_parallel_size_local");
    d.push(
        Diagnostic::error(
            Code::HeadlessWithoutLocalReplicas,
            path.clone(),
            format!("vllm serve --headless runs this node's DP engines and needs at least one: data_parallel_size_local 0 gives none; vLLM {} refuses it (\"data_parallel_size_local must be > 0 in headless mode\", entrypoints/cli/serve.py:203)", crate::engines::vllm_0_33::VERSION),
        )
        .given(&json!(0))
        .allowed(format!("1 ..= data_parallel_size ({})", p.dp))
        .hint(format!("run {fixed} DP replica{} on this headless node: --data-parallel-size-local {fixed}", if fixed == 1 { "" } else { "s" }))
        .fix(vec![FixOp::Set { path, value: json!(fixed) }]),
    );
}

/// vLLM 0.33 `EngineArgs.create_engine_config` refuses a `--node-rank`
/// outside 0 ..= nnodes - 1 with `--nnodes` > 1 (vllm/engine/arg_utils.py:2414),
/// and a negative one always (`ParallelConfig.node_rank`, ge=0,
/// vllm/config/parallel.py:323). Node ranks are zero-based: the fix is the
/// last node for one past the end, 0 for a negative rank.
fn check_node_rank(args: &ServeArgs, nnodes: i64, d: &mut Vec<Diagnostic>) {
    let Some(rank) = args.node_rank else { return };
    if rank >= 0 && (nnodes <= 1 || rank < nnodes) {
        return;
    }
    let fixed = if rank < 0 { 0 } else { nnodes - 1 };
    let path = FieldPath::root("node_rank");
    d.push(
        Diagnostic::error(
            Code::NodeRankOutOfRange,
            path.clone(),
            format!("node_rank {rank} is not one of the {nnodes} nodes' zero-based indices; vLLM {} refuses it while building its config (arg_utils.py:2414)", crate::engines::vllm_0_33::VERSION),
        )
        .given(&json!(rank))
        .allowed(format!("0 ..= {}", (nnodes - 1).max(0)))
        .hint(format!("node ranks are zero-based: the last of {nnodes} nodes is --node-rank {}; set it to this node's index", (nnodes - 1).max(0)))
        .fix(vec![FixOp::Set { path, value: json!(fixed) }]),
    );
}

/// vLLM 0.33 `ParallelConfig.__post_init__` runs `--nnodes` > 1 only under
/// the mp, uni or external_launcher executor ("nnodes > 1 can only be set when
/// distributed executor backend is mp, uni or external_launcher",
/// vllm/config/parallel.py:1108-1114): Ray places its own nodes. The fix is mp,
/// vLLM's default over nodes (parallel.py:1064).
fn check_multi_node_backend(args: &ServeArgs, nnodes: i64, d: &mut Vec<Diagnostic>) {
    // `--data-parallel-backend ray` over nodes: refused first, by
    // create_engine_config (arg_utils.py:2390), before ParallelConfig.
    let dp_backend = args.data_parallel_backend.as_deref();
    if nnodes > 1 && dp_backend.is_some_and(|b| b != "mp") {
        let path = FieldPath::root("data_parallel_backend");
        d.push(
            Diagnostic::error(
                Code::MultiNodeBackendUnsupported,
                path.clone(),
                format!("with nnodes {nnodes}, vLLM {} needs --data-parallel-backend mp, not {}: it refuses it while building its config (arg_utils.py:2390)", crate::engines::vllm_0_33::VERSION, dp_backend.unwrap_or_default()),
            )
            .given(&json!(dp_backend))
            .allowed("\"mp\" with --nnodes > 1 (for Ray, drop --nnodes: Ray places the DP ranks)")
            .fix(vec![FixOp::Set { path, value: json!("mp") }]),
        );
    }
    let backend = args.distributed_executor_backend.as_deref();
    if nnodes <= 1 || matches!(backend, None | Some("mp" | "uni" | "external_launcher")) {
        return;
    }
    let path = FieldPath::root("distributed_executor_backend");
    d.push(
        Diagnostic::error(
            Code::MultiNodeBackendUnsupported,
            path.clone(),
            format!("with nnodes {nnodes}, vLLM {} needs the mp, uni or external_launcher executor, not {}: it refuses it while building its config (ParallelConfig, vllm/config/parallel.py:1108)", crate::engines::vllm_0_33::VERSION, backend.unwrap_or_default()),
        )
        .given(&json!(backend))
        .allowed("\"mp\", \"uni\" or \"external_launcher\" with --nnodes > 1 (for Ray, drop --nnodes: Ray places the nodes)")
        .fix(vec![FixOp::Set { path, value: json!("mp") }]),
    );
}

/// `--data-parallel-rank` makes this process one external-LB DP rank (vLLM
/// 0.33 arg_utils.py:2447): it must be in 0 ..= DP - 1 when DP > 1
/// (`ParallelConfig`, vllm/config/parallel.py:1017), and the process runs one
/// replica, so a `--data-parallel-size-local` other than 1 is refused
/// (arg_utils.py:2476-2483).
fn check_external_lb(
    args: &ServeArgs,
    p: &Parallel,
    model: Option<&ModelInfo>,
    d: &mut Vec<Diagnostic>,
) {
    let Some(rank) = args.data_parallel_rank else {
        return;
    };
    let rank_path = FieldPath::root("data_parallel_rank");
    if p.dp <= 1 {
        // vllm/config/parallel.py:551.
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                rank_path,
                format!("data_parallel_rank {rank} makes this process an external-LB DP rank, which needs data_parallel_size > 1; vLLM {} refuses it while building its config (\"data_parallel_external_lb can only be set when data_parallel_size > 1\")", crate::engines::vllm_0_33::VERSION),
            )
            .given(&json!(rank))
            .allowed("unset with data_parallel_size 1 (one replica needs no external load balancer)")
            .fix(vec![FixOp::Remove { path: FieldPath::root("data_parallel_rank") }]),
        );
        return;
    }
    if let Some(info) = model.filter(|m| m.num_experts.is_none_or(|n| n == 0)) {
        // arg_utils.py:2455-2464: external DP is for MoE models only.
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                rank_path.clone(),
                format!("{} is not a MoE model, and vLLM {} runs external-LB data parallelism (data_parallel_rank) only for MoE models: it refuses it while building its config", info.name(), crate::engines::vllm_0_33::VERSION),
            )
            .given(&json!(rank))
            .allowed("unset for a dense model (launch independent vLLM instances instead)")
            .fix(vec![FixOp::Remove { path: rank_path.clone() }]),
        );
        return; // its fix removes the rank, and with it the rules below
    }
    if let Some(local) = args.data_parallel_size_local.filter(|n| *n != 1) {
        let path = FieldPath::root("data_parallel_size_local");
        d.push(
            Diagnostic::error(
                Code::ExternalLbLocalSizeInvalid,
                path.clone(),
                format!("data_parallel_rank {rank} makes this process one external-LB DP rank, which runs one replica: vLLM {} refuses data_parallel_size_local {local} with it (arg_utils.py:2476, \"Set it to 1 or omit it\")", crate::engines::vllm_0_33::VERSION),
            )
            .given(&json!(local))
            .allowed("1, or unset, with --data-parallel-rank")
            .fix(vec![FixOp::Set { path, value: json!(1) }]),
        );
    }
    if !(0..p.dp).contains(&rank) {
        let path = rank_path;
        let fixed = if rank < 0 { 0 } else { p.dp - 1 };
        d.push(
            Diagnostic::error(
                Code::InvalidValue,
                path.clone(),
                format!("data_parallel_rank {rank} is not one of the {} DP ranks; vLLM {} refuses it while building its config (ParallelConfig, vllm/config/parallel.py:1017)", p.dp, crate::engines::vllm_0_33::VERSION),
            )
            .given(&json!(rank))
            .allowed(format!("0 ..= {}", p.dp - 1))
            .hint(format!("DP ranks are zero-based: the last of {} is --data-parallel-rank {}", p.dp, p.dp - 1))
            .fix(vec![FixOp::Set { path, value: json!(fixed) }]),
        );
    }
}

/// MTP speculation drafts with the checkpoint's own MTP layers; vLLM 0.33
/// refuses it for a model without them (`NotImplementedError: Unsupported
/// speculative method: 'mtp'`, vllm/config/speculative.py).
/// Returns whether it reported (and its fix removes `speculative_config`).
fn check_mtp_layers(args: &ServeArgs, model: &ModelInfo, d: &mut Vec<Diagnostic>) -> bool {
    let spec = args.speculative_config.as_ref();
    let method = spec.and_then(|s| s.get("method")).and_then(Value::as_str);
    let mtp = matches!(method, Some(m) if m == "mtp" || m.ends_with("_mtp"));
    let separate_draft = spec
        .and_then(|s| s.get("model"))
        .is_some_and(|m| !m.is_null());
    if !mtp || separate_draft || model.num_nextn_predict_layers.is_some_and(|n| n > 0) {
        return false;
    }
    let path = FieldPath::root("speculative_config").key("method");
    // DeepSeek-V3/V3.2 and GLM-5 checkpoints become a deepseek_mtp draft config
    // whatever their MTP depth (vllm/config/speculative.py:749-760): vLLM builds
    // the config and fails loading the draft model. Other models have no MTP
    // draft at all: NotImplementedError while the config is built (:1498).
    let mtp_draft_type = matches!(
        model.model_type.as_deref(),
        Some("deepseek_v3" | "deepseek_v32" | "glm_moe_dsa" | "deepseek_mtp")
    );
    let (stage, when) = if mtp_draft_type {
        (
            VllmStage::ModelLoad,
            "it builds the config and fails when it loads the draft model",
        )
    } else {
        (
            VllmStage::Config,
            "it refuses it while building its config (\"Unsupported speculative method\")",
        )
    };
    d.push(
        Diagnostic::error(
            Code::InvalidValue,
            path,
            format!("{} has no MTP layers (num_nextn_predict_layers), so vLLM {} cannot speculate with method {}: {when}", model.name(), crate::engines::vllm_0_33::VERSION, method.unwrap_or_default()),
        )
        .stage(stage)
        .given(&json!(method))
        .allowed("MTP on a checkpoint with MTP layers (DeepSeek-V3/V3.2, GLM-5), or another speculative method")
        .fix(vec![FixOp::Remove {
            path: FieldPath::root("speculative_config"),
        }]),
    );
    true
}

/// The largest divisor of `n` not above `cap` (1 if none larger), from the
/// divisor pairs `(d, n / d)` with `d <= sqrt(n)`: work bounded by the head
/// count's square root (and by [`MAX_DIVISOR_TRIALS`]), never by `cap`.
fn largest_divisor_at_most(n: u64, cap: u64) -> u64 {
    let mut best = 1;
    let mut d = 1u64;
    while d <= MAX_DIVISOR_TRIALS && d.saturating_mul(d) <= n {
        if n % d == 0 {
            for x in [d, n / d] {
                if x <= cap && x > best {
                    best = x;
                }
            }
        }
        d += 1;
    }
    best
}

#[cfg(test)]
mod divisor_tests {
    use super::largest_divisor_at_most;

    #[test]
    fn largest_divisor_is_found_from_the_small_side() {
        assert_eq!(largest_divisor_at_most(128, 6), 4);
        assert_eq!(largest_divisor_at_most(128, 128), 128);
        assert_eq!(largest_divisor_at_most(96, 1_000_000_000), 96);
        assert_eq!(largest_divisor_at_most(7, 3), 1);
        assert_eq!(largest_divisor_at_most(1, 5), 1);
        // A huge tensor_parallel_size costs nothing: the search is over the heads.
        assert_eq!(
            largest_divisor_at_most(2_305_843_009_213_693_951 * 2, u64::MAX - 1),
            2_305_843_009_213_693_951 * 2
        );
        assert_eq!(largest_divisor_at_most(1_000_000_007, 200_000_001), 1); // a prime
        for n in 1..200u64 {
            for cap in 1..210u64 {
                let brute = (1..=cap.min(n)).rev().find(|t| n % t == 0).unwrap_or(1);
                assert_eq!(largest_divisor_at_most(n, cap), brute, "{n} {cap}");
            }
        }
        // Beyond 2^32 heads the answer is still a divisor (the fix passes).
        let n = (1u64 << 40) * 3;
        let d = largest_divisor_at_most(n, 1 << 41);
        assert!(n % d == 0 && d <= 1 << 41);
    }
}

#[cfg(test)]
mod tests {
    use super::{dcp_broken, DcpRule};
    use crate::sizes::Parallel;

    fn layout(tp: i64, pcp: i64) -> Parallel {
        Parallel {
            tp,
            pp: 1,
            dcp: 1,
            pcp,
            dp: 1,
            nnodes: 1,
            dp_local: None,
        }
    }

    #[test]
    fn decode_context_parallel_rules_follow_vllm() {
        assert_eq!(
            dcp_broken(&layout(4, 1), 3, false, None),
            Some(DcpRule::DividesTp)
        );
        assert_eq!(dcp_broken(&layout(4, 1), 2, false, None), None);
        // With PCP: 1, PCP or TP x PCP.
        assert_eq!(
            dcp_broken(&layout(4, 2), 4, false, None),
            Some(DcpRule::PcpAxis)
        );
        assert_eq!(dcp_broken(&layout(4, 2), 8, false, None), None);
        // NIXL: 1 or max(TP, PCP), MLA only.
        assert_eq!(
            dcp_broken(&layout(4, 1), 2, true, None),
            Some(DcpRule::NixlTransferSize)
        );
        assert_eq!(dcp_broken(&layout(4, 1), 4, true, None), None);
        assert_eq!(
            dcp_broken(&layout(4, 1), 4, true, Some(8)),
            Some(DcpRule::NixlMlaOnly)
        );
        // GQA: more TP ranks than KV heads.
        assert_eq!(
            dcp_broken(&layout(4, 1), 2, false, Some(8)),
            Some(DcpRule::KvHeads(8))
        );
        assert_eq!(dcp_broken(&layout(16, 1), 2, false, Some(8)), None);
        assert_eq!(dcp_broken(&layout(4, 1), 1, true, Some(8)), None);
    }
}
