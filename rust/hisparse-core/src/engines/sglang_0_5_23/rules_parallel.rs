//! The parallel layout rules SGLang 0.5.23 runs on every launch, HiSparse or
//! not: the attention-DP width (`_handle_data_parallelism`,
//! srt/arg_groups/parallel_hook.py, stage resolve) and the node and pipeline
//! checks of `check_server_args` (srt/arg_groups/validation_hook.py, stage
//! check). One function per rule: its code, SGLang's message, the stage,
//! file:line and fix.

use super::diagnostics::SglangDiagnostic;
use super::resolution::Resolution;
use super::stages::SglangStage::{Check, Resolve, SchedulerStart};
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use serde_json::{json, Value};

fn set(attr: &str, value: Value) -> FixOp {
    FixOp::Set {
        path: FieldPath::root(attr),
        value,
    }
}

/// Stage S1's layout rules, in SGLang's order.
pub(crate) fn check_resolve(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    d.extend(dcp_not_positive(r));
    d.extend(decode_dp_size_zero(r));
    d.extend(attn_dp_not_positive(r));
    d.extend(dp_replicas_with_attn_dp(r));
}

/// A decode-context-parallel size below 1 (`--dcp-size 0`): "Decode context
/// parallel size ... must be >= 1" at resolve (handle_decode_context_parallelism,
/// arg_groups/parallel_hook.py:240-247, which runs before handle_data_parallelism).
/// The fix is SGLang's default, 1 (no DCP, the same GPUs). Found by the
/// 2,000-launch differential.
fn dcp_not_positive(r: &Resolution<'_>) -> Option<Diagnostic> {
    let n = r.args.dcp_size.filter(|&n| n < 1)?;
    Some(
        Diagnostic::error(
            Code::DcpSizeNotPositive,
            FieldPath::root("dcp_size"),
            format!("Decode context parallel size (--dcp-size / --decode-context-parallel-size) must be >= 1, but got dcp_size={n}."),
        )
        .stage(Resolve)
        .given(&json!(n))
        .allowed("an integer >= 1 (1: no decode context parallelism)")
        .fix(vec![set("dcp_size", json!(1))]),
    )
}

/// A P/D decode server with `--dp-size 0`, `--max-running-requests` given and
/// no `--disaggregation-decode-extra-slots`: the extra slots' default divides
/// max_running_requests by dp_size x attn_dp_size (`num_dp_ranks_of`,
/// arg_groups/pd_disaggregation_hook.py:133-136, runtime_context.py:202-207):
/// ZeroDivisionError at resolve. Under --enable-dp-attention the 0 is the
/// attention-DP width, [`attn_dp_not_positive`]'s. The fix is SGLang's
/// default, 1. Found by break23's run of the differential.
fn decode_dp_size_zero(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    if a.disaggregation_mode.as_deref() != Some("decode")
        || a.dp_size != Some(0)
        || a.enable_dp_attention == Some(true)
        || a.max_running_requests.is_none()
        || a.disaggregation_decode_extra_slots.is_some()
    {
        return None;
    }
    Some(
        Diagnostic::error(
            Code::DecodeDpSizeZero,
            FieldPath::root("dp_size"),
            "ZeroDivisionError: integer division or modulo by zero (max_running_requests // num_dp_ranks with dp_size 0, defaulting the decode extra slots, arg_groups/pd_disaggregation_hook.py:133-136)",
        )
        .stage(Resolve)
        .given(&json!(0))
        .allowed("a data-parallel size of at least 1 (1: one replica)")
        .fix(vec![set("dp_size", json!(1))]),
    )
}

/// Stage S2's layout rules, in SGLang's order.
pub(crate) fn check_check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    d.extend(nnodes_divide_tp_pp(r));
    d.extend(pipeline_speculation_off_prefill(r));
    d.extend(dp_replicas_over_nodes(r));
    d.extend(base_gpu_id_negative(r));
    d.extend(gpu_id_step_not_positive(r));
    d.extend(moe_dense_tp_size_unsupported(r));
    d.extend(served_model_name_colon(r));
    d.extend(ep_size_zero(r));
    d.extend(gpus_per_node_exceeded(r));
}

/// `--dp-size` replicas (the resolved dp_size, after `--dp-size N
/// --enable-dp-attention` is turned into attention DP) with `--nnodes` other
/// than 1: AssertionError "multi-node data-parallel replicas are not
/// supported; use attention DP (--attn-dp-size) across nodes"
/// (arg_groups/validation_hook.py:199-202), at check. No fix: attention DP
/// or one node is another deployment.
fn dp_replicas_over_nodes(r: &Resolution<'_>) -> Option<Diagnostic> {
    let dp = r.dp_replicas();
    let nnodes = r.args.nnodes.unwrap_or(1);
    if dp <= 1 || nnodes == 1 {
        return None;
    }
    Some(
        Diagnostic::error(
            Code::DpReplicasOverNodes,
            FieldPath::root("dp_size"),
            "multi-node data-parallel replicas are not supported; use attention DP (--attn-dp-size) across nodes",
        )
        .stage(Check)
        .given(&json!(dp))
        .allowed("--dp-size 1 with --nnodes > 1, or --nnodes 1 with --dp-size > 1")
        .hint(format!("choose one: {dp} replicas on one node (--nnodes 1), or attention DP across the {nnodes} nodes (--attn-dp-size); they are different deployments, so the check does not pick")),
    )
}

/// `--base-gpu-id` below 0: AssertionError "base_gpu_id must be
/// non-negative" (arg_groups/validation_hook.py:204), at check. The fix is
/// SGLang's default, 0. Found by break23.
fn base_gpu_id_negative(r: &Resolution<'_>) -> Option<Diagnostic> {
    let n = r.args.base_gpu_id.filter(|&n| n < 0)?;
    Some(
        Diagnostic::error(
            Code::BaseGpuIdNegative,
            FieldPath::root("base_gpu_id"),
            "base_gpu_id must be non-negative",
        )
        .stage(Check)
        .given(&json!(n))
        .allowed("an integer >= 0 (the first GPU id this server takes; default 0)")
        .fix(vec![set("base_gpu_id", json!(0))]),
    )
}

/// `--gpu-id-step` below 1: AssertionError "gpu_id_step must be positive"
/// (arg_groups/validation_hook.py:205), at check. The fix is SGLang's
/// default, 1. Found by break23.
fn gpu_id_step_not_positive(r: &Resolution<'_>) -> Option<Diagnostic> {
    let n = r.args.gpu_id_step.filter(|&n| n < 1)?;
    Some(
        Diagnostic::error(
            Code::GpuIdStepNotPositive,
            FieldPath::root("gpu_id_step"),
            "gpu_id_step must be positive",
        )
        .stage(Check)
        .given(&json!(n))
        .allowed("an integer >= 1 (the step between the GPU ids of one server's ranks; default 1)")
        .fix(vec![set("gpu_id_step", json!(1))]),
    )
}

/// `--moe-dense-tp-size` other than 1 or `--tp-size`: AssertionError
/// "moe_dense_tp_size only supports None, 1, or tp_size currently"
/// (arg_groups/validation_hook.py:207-211), at check. A `--dwdp-size` above 1
/// declares it 1 at resolve (`_handle_dwdp`, parallel_hook.py:435, 480-484),
/// so it is not refused then. The fix is 1 (dense layers in data parallel,
/// the same GPUs); tp_size is the other choice SGLang takes. Found by break23.
fn moe_dense_tp_size_unsupported(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    let n = a.moe_dense_tp_size?;
    let tp = a.tp_size.unwrap_or(1);
    let dwdp = a
        .other
        .get("dwdp_size")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if n == 1 || n == tp || dwdp > 1 {
        return None;
    }
    Some(
        Diagnostic::error(
            Code::MoeDenseTpSizeUnsupported,
            FieldPath::root("moe_dense_tp_size"),
            "moe_dense_tp_size only supports None, 1, or tp_size currently",
        )
        .stage(Check)
        .given(&json!(n))
        .allowed(format!("unset, 1, or the tp_size ({tp})"))
        .fix(vec![set("moe_dense_tp_size", json!(1))]),
    )
}

/// A served model name (`--served-model-name`, default the model path,
/// serving_hook.py:642-647) with a ':' and not an s3://, gs:// or az:// URI
/// (utils/runai_utils.py:14, 48-50): AssertionError "served_model_name
/// cannot contain a colon (':') character. ..." (arg_groups/validation_hook.py:213-219),
/// at check. The fix names the server with '-' for each ':'. Found by break23.
fn served_model_name_colon(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    let (name, given) = match (&a.served_model_name, &a.model_path) {
        (Some(n), _) => (n.as_str(), "--served-model-name"),
        (None, Some(p)) => (p.as_str(), "--model-path (the served name's default)"),
        (None, None) => return None,
    };
    let lower = name.to_lowercase();
    if !name.contains(':')
        || ["s3://", "gs://", "az://"]
            .iter()
            .any(|s| lower.starts_with(s))
    {
        return None;
    }
    Some(
        Diagnostic::error(
            Code::ServedModelNameColon,
            FieldPath::root("served_model_name"),
            format!("served_model_name cannot contain a colon (':') character. The colon is reserved for the 'model:adapter' syntax used in LoRA adapter specification. Invalid value: '{name}'"),
        )
        .stage(Check)
        .given(&json!(name))
        .allowed(format!("a name without ':' (from {given}), or an s3://, gs:// or az:// URI"))
        .fix(vec![set("served_model_name", json!(name.replace(':', "-")))]),
    )
}

/// `--ep-size 0`: the launcher publishes the resolved arguments right after
/// check_server_args (entrypoints/engine.py:1165-1175), and the MoE TP width
/// `tp_size // moe_ep_size // moe_dp_size` divides by zero
/// (`derive_parallel_widths`, srt/runtime_context.py:154): ZeroDivisionError
/// before any process starts, the check stage here. The fix is SGLang's
/// default, 1 (no expert parallelism, the same GPUs).
fn ep_size_zero(r: &Resolution<'_>) -> Option<Diagnostic> {
    r.args.ep_size.filter(|&n| n == 0)?;
    Some(
        Diagnostic::error(
            Code::EpSizeZero,
            FieldPath::root("ep_size"),
            "ZeroDivisionError: integer division or modulo by zero (moe_tp_size = tp_size // ep_size // moe_dp_size with ep_size 0, srt/runtime_context.py:154, when the launcher publishes the arguments after check_server_args, entrypoints/engine.py:1165-1175)",
        )
        .stage(Check)
        .given(&json!(0))
        .allowed("an expert-parallel width of at least 1 (1: no expert parallelism)")
        .fix(vec![set("ep_size", json!(1))]),
    )
}

/// Most node counts [`gpus_per_node_exceeded`]'s fix tries.
const MAX_NODE_TRIALS: i64 = 1024;

/// A launch that takes more GPUs on one node than it holds (issue 22): the
/// highest GPU id a node's schedulers take is each DP replica's tp x pp
/// (`base_gpu_id += tp_size * pp_size`, managers/data_parallel_controller.py:445-449)
/// plus this node's share of one world, tp x pp / nnodes
/// (:695-711, gpu_id at :747-751; `--gpu-id-step` and `--base-gpu-id` 0 and
/// 1 as SGLang defaults them). A scheduler past the node's GPUs fails in
/// `torch.cuda.set_device(gpu_id)` (srt/model_executor/model_runner.py:455)
/// as it starts, before the weights load (stage scheduler_start). With one
/// world (no --dp-size replicas) the fix keeps the GPUs over more nodes;
/// replicas over one node's GPUs have none (each is its own launch then).
fn gpus_per_node_exceeded(r: &Resolution<'_>) -> Option<Diagnostic> {
    let n = i64::try_from(r.machine.gpus_per_node?).ok()?;
    let a = r.args;
    let nnodes = a.nnodes.unwrap_or(1);
    let world = a
        .tp_size
        .unwrap_or(1)
        .max(1)
        .saturating_mul(a.pp_size.unwrap_or(1).max(1));
    if nnodes < 1 || world % nnodes != 0 {
        return None; // nnodes_divide_tp_pp refuses it first
    }
    let replicas = r.dp_replicas().max(1);
    let need = (replicas - 1)
        .saturating_mul(world)
        .saturating_add(world / nnodes);
    if need <= n {
        return None;
    }
    let holds = match r.machine.gpus_per_node_server {
        Some(s) => format!("{n} GPUs (--gpus-per-node, default: {s}, the --gpu's usual server)"),
        None => format!("{n} GPUs (--gpus-per-node)"),
    };
    let (tp, pp) = (a.tp_size.unwrap_or(1), a.pp_size.unwrap_or(1));
    let spread = if replicas > 1 {
        format!("{replicas} DP replicas of tp {tp} x pp {pp} take GPU ids up to {} here (each replica starts {world} GPUs after the last, data_parallel_controller.py:445)", need - 1)
    } else {
        format!(
            "tp {tp} x pp {pp} over {nnodes} node{} takes {need} GPUs here",
            if nnodes == 1 { "" } else { "s" }
        )
    };
    let mut e = Diagnostic::error(
        Code::GpusPerNodeExceeded,
        FieldPath::root("nnodes"),
        format!("{spread}, and a node holds {holds}; the scheduler of GPU id {n} fails in torch.cuda.set_device (\"CUDA error: invalid device ordinal\", srt/model_executor/model_runner.py:455) as it starts, before the weights load"),
    )
    .stage(SchedulerStart)
    .given(&json!(need))
    .allowed(format!("at most {n} GPUs on one node"));
    let fit = (replicas == 1)
        .then(|| {
            (nnodes.max(1)
                ..nnodes
                    .saturating_add(MAX_NODE_TRIALS)
                    .min(world.saturating_add(1)))
                .find(|m| world % m == 0 && world / m <= n)
        })
        .flatten();
    e = match fit {
        Some(m) => e
            .hint(format!("keep the {world} GPUs and run them over {m} nodes, {} a node: --nnodes {m} (start it on each node with --node-rank 0 ..= {} and one --dist-init-addr); or lower --tp-size / --pp-size to fit one node", world / m, m - 1))
            .fix(vec![set("nnodes", json!(m))]),
        None if replicas > 1 => e.hint(format!("SGLang puts every --dp-size replica on this node's GPUs: serve each replica of tp {tp} x pp {pp} as its own launch (--dp-size 1, one per node, behind a router), or attention DP (--enable-dp-attention) inside the node's GPUs")),
        None => e.hint(format!("no node count runs tp {tp} x pp {pp} with at most {n} GPUs a node: lower --tp-size or --pp-size")),
    };
    Some(e)
}

/// An attention-DP width below 1 (`--attn-dp-size 0`, `--dp 0
/// --enable-dp-attention`): 0 divides the attention-TP width first,
/// ZeroDivisionError (`derive_attn_tp_size`, srt/runtime_context.py:73-76); a
/// negative one is "--attn-dp-size must be positive" (parallel_hook.py:285-286).
/// Both at resolve; the fix is width 1 (no attention DP, the same GPUs).
fn attn_dp_not_positive(r: &Resolution<'_>) -> Option<Diagnostic> {
    let (n, attr) = r.attn_dp_given();
    if n >= 1 {
        return None;
    }
    let msg = if n == 0 {
        format!("ZeroDivisionError: integer division or modulo by zero (attn_tp_size = tp_size // attn_dp_size with attn_dp_size 0 from --{}, srt/runtime_context.py:73-76)", attr.replace('_', "-"))
    } else {
        format!("--attn-dp-size must be positive (got {n}).")
    };
    let e = Diagnostic::error(Code::AttnDpSizeNotPositive, FieldPath::root(attr), msg)
        .stage(Resolve)
        .given(&json!(n))
        .allowed("an attention-DP width of at least 1 (a divisor of tp_size)");
    // --attn-dp-size 1 beside --dp-size N --enable-dp-attention turns the
    // deprecated form back on (parallel_hook.py:39-60): width N, which must
    // divide tp_size (parallel_hook.py:326) and be at least 1; else no fix of
    // this one alone.
    let a = r.args;
    let revived = (attr == "attn_dp_size" && a.enable_dp_attention == Some(true))
        .then(|| a.dp_size.unwrap_or(1))
        .filter(|&w| w != 1);
    Some(match revived {
        Some(w) if w < 1 || a.tp_size.unwrap_or(1) % w != 0 => e,
        _ => e.fix(vec![set(attr, json!(1))]),
    })
}

/// `--dp-size` replicas with `--attn-dp-size` > 1 (parallel_hook.py:287-292):
/// "data-parallel replicas combined with attention data parallelism are not
/// supported". The fix keeps the GPUs: attention DP over the replicas' width
/// is not the same deployment, so the replicas go (dp_size 1) only when that
/// is what attention DP already spans; otherwise no fix.
fn dp_replicas_with_attn_dp(r: &Resolution<'_>) -> Option<Diagnostic> {
    let (attn, attr) = r.attn_dp_given();
    let dp = r.dp_replicas();
    if attr != "attn_dp_size" || attn <= 1 || dp <= 1 {
        return None;
    }
    Some(
        Diagnostic::error(
            Code::DpReplicasWithAttnDp,
            FieldPath::root("dp_size"),
            format!("--dp-size {dp} with --attn-dp-size {attn}: data-parallel replicas combined with attention data parallelism are not supported."),
        )
        .stage(Resolve)
        .given(&json!(dp))
        .allowed("--dp-size 1 with --attn-dp-size > 1, or --attn-dp-size 1 with --dp-size > 1")
        .hint(format!("choose one: --dp-size {dp} replicas of tp {tp}, or attention DP {attn} inside tp {tp} (--dp-size 1); they serve on different GPU counts, so the check does not pick", tp = r.args.tp_size.unwrap_or(1))),
    )
}

/// `(tp_size * pp_size) % nnodes == 0`, AssertionError "tp_size must be
/// divisible by number of nodes" (validation_hook.py:177-180); `--nnodes 0`
/// is a ZeroDivisionError there. Both at check. The fix: the most nodes up to
/// the given that divide tp x pp (the same GPUs over fewer nodes).
fn nnodes_divide_tp_pp(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    let nnodes = a.nnodes.unwrap_or(1);
    let gpus = a
        .tp_size
        .unwrap_or(1)
        .saturating_mul(a.pp_size.unwrap_or(1));
    let msg = match nnodes {
        0 => "ZeroDivisionError: integer modulo by zero ((tp_size * pp_size) % nnodes with --nnodes 0, arg_groups/validation_hook.py:177-180)".to_owned(),
        n if gpus.checked_rem(n).is_some_and(|m| m != 0) => {
            "AssertionError: tp_size must be divisible by number of nodes".to_owned()
        }
        _ => return None,
    };
    let fit = (1..=nnodes.clamp(1, 1 << 16))
        .rev()
        .find(|n| gpus % n == 0)
        .unwrap_or(1);
    Some(
        Diagnostic::error(
            Code::TpPpNotDivisibleByNnodes,
            FieldPath::root("nnodes"),
            msg,
        )
        .stage(Check)
        .given(&json!(nnodes))
        .allowed(format!("a divisor of tp_size x pp_size ({gpus})"))
        .fix(vec![set("nnodes", json!(fit))]),
    )
}

/// Pipeline parallelism with speculation runs only on a P/D prefill server
/// (SGLANG_ENABLE_PP_SPEC unset): AssertionError "PP + speculative decoding
/// (MTP) is only supported on prefill nodes (disaggregation-mode=prefill)"
/// (validation_hook.py:160-163, from check_pipeline_parallel_compat at :196-197).
/// No fix: dropping the pipeline or the speculation changes the deployment.
fn pipeline_speculation_off_prefill(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    if a.pp_size.unwrap_or(1) <= 1 || !a.speculation_on() {
        return None;
    }
    match a.speculative_algorithm() {
        Some("EAGLE") => {}
        Some("DSPARK") => return None, // its own prefill-only assert (:124-130), not ported
        // Any other algorithm, P/D prefill or not (validation_hook.py:131-137);
        // found by the 2,000-launch differential. No fix: another algorithm
        // or no pipeline parallelism is another deployment.
        _ => {
            return Some(
                Diagnostic::error(
                    Code::PipelineSpeculationNotEagle,
                    FieldPath::root("speculative_algorithm"),
                    "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative decoding",
                )
                .stage(Check)
                .given(&json!(a.speculative_algorithm))
                .allowed("EAGLE (or NEXTN) with --pp-size > 1")
                .hint("serve without pipeline parallelism (--pp-size 1, the same GPUs as --tp-size), or with --speculative-algorithm EAGLE"),
            );
        }
    }
    if a.pd_mode() == "prefill" {
        return None;
    }
    Some(
        Diagnostic::error(
            Code::PipelineSpeculationOffPrefill,
            FieldPath::root("pp_size"),
            "PP + speculative decoding (MTP) is only supported on prefill nodes (disaggregation-mode=prefill)",
        )
        .stage(Check)
        .given(&json!(a.pp_size))
        .allowed("--pp-size 1 with --speculative-algorithm off P/D prefill")
        .hint("serve without pipeline parallelism (--pp-size 1, the same GPUs as --tp-size), or without speculation, or as a P/D prefill server"),
    )
}
