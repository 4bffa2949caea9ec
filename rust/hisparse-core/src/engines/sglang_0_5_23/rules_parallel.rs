//! The parallel layout rules SGLang 0.5.23 runs on every launch, HiSparse or
//! not: the attention-DP width (`_handle_data_parallelism`,
//! srt/arg_groups/parallel_hook.py, stage resolve) and the node and pipeline
//! checks of `check_server_args` (srt/arg_groups/validation_hook.py, stage
//! check). One function per rule: its code, SGLang's message, the stage,
//! file:line and fix.

use super::diagnostics::SglangDiagnostic;
use super::resolution::Resolution;
use super::stages::SglangStage::{Check, Resolve};
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
    d.extend(attn_dp_not_positive(r));
    d.extend(dp_replicas_with_attn_dp(r));
}

/// Stage S2's layout rules, in SGLang's order.
pub(crate) fn check_check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    d.extend(nnodes_divide_tp_pp(r));
    d.extend(pipeline_speculation_off_prefill(r));
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
    // divide tp_size (parallel_hook.py:326); else no fix of this one alone.
    let a = r.args;
    let revived = (attr == "attn_dp_size" && a.enable_dp_attention == Some(true))
        .then(|| a.dp_size.unwrap_or(1))
        .filter(|&w| w > 1);
    Some(match revived {
        Some(w) if a.tp_size.unwrap_or(1) % w != 0 => e,
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
    if a.pp_size.unwrap_or(1) <= 1 || !a.speculation_on() || a.pd_mode() == "prefill" {
        return None;
    }
    if !matches!(a.speculative_algorithm(), Some("EAGLE")) {
        return None; // another algorithm fails the assert before (:131-137), not ported
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
