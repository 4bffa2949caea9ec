//! Stage S1 rules of speculative decoding that hold with or without HiSparse
//! (`handle_speculative_decoding`, srt/arg_groups/speculative_hook.py, and
//! `SpeculativeAlgorithm.from_string`, srt/speculative/spec_info.py). One
//! function per rule: its code, SGLang's message, the stage, file:line and fix.

use super::args::SPECULATIVE_ALGORITHMS;
use super::diagnostics::SglangDiagnostic;
use super::resolution::Resolution;
use super::stages::SglangStage::Resolve;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use serde_json::{json, Value};

fn set(attr: &str, value: Value) -> FixOp {
    FixOp::Set {
        path: FieldPath::root(attr),
        value,
    }
}

/// Every rule of this file, in SGLang's order.
pub(crate) fn check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    d.extend(unknown_algorithm(r));
    d.extend(ngram_bfs_breadth_zero(r));
    d.extend(ngram_topk_with_pages(r));
    d.extend(ngram_with_dp_attention(r));
    d.extend(adaptive_steps_not_candidate(r));
}

/// The flags whose fix can turn adaptive speculation back on
/// ([`SglangArgs::adaptive_on`]: the algorithm, topk, the attention-DP width).
///
/// [`SglangArgs::adaptive_on`]: super::args::SglangArgs
const ADAPTIVE_GATES: [&str; 5] = [
    "speculative_algorithm",
    "speculative_eagle_topk",
    "attn_dp_size",
    "dp_size",
    "enable_dp_attention",
];

/// `--speculative-adaptive` that SGLang turns off (topk 2, attention DP) is
/// turned back on by the fixes that give topk 1 or one attention-DP worker:
/// the fixed launch then meets the adaptive rules (HiSparse's
/// `speculative_adaptive_with_hisparse`, hisparse_hook.py:122-126; the
/// candidate steps, speculative_hook.py:1416-1420). Each error whose fix
/// opens that gate also drops adaptive (HiSparse) or sets the nearest
/// candidate steps, so that every fix at once passes. Runs after every rule.
pub(crate) fn adaptive_revived_by_fixes(r: &Resolution<'_>, d: &mut [Diagnostic]) {
    let a = r.args;
    if a.speculative_adaptive != Some(true) || a.adaptive_on() {
        return;
    }
    let errors: Vec<Diagnostic> = d.iter().filter(|e| e.is_error()).cloned().collect();
    let Some(fixed) = super::fixes::apply_all(a, &errors) else {
        return;
    };
    if !fixed.adaptive_on() {
        return;
    }
    let op = if fixed.hisparse_on() {
        set("speculative_adaptive", json!(false))
    } else {
        let steps = fixed.speculative_num_steps.unwrap_or(3);
        if ADAPTIVE_CANDIDATE_STEPS.contains(&steps) {
            return;
        }
        set(
            "speculative_num_steps",
            json!(nearest_candidate(steps, &ADAPTIVE_CANDIDATE_STEPS)),
        )
    };
    let gates: Vec<FieldPath> = ADAPTIVE_GATES.iter().map(|g| FieldPath::root(g)).collect();
    for e in d.iter_mut().filter(|e| e.is_error()) {
        let opens = e.fix.iter().any(|f| match f {
            FixOp::Set { path, .. } | FixOp::Remove { path } => gates.contains(path),
            FixOp::Move { .. } => false,
        });
        if opens && !e.fix.contains(&op) {
            e.fix.push(op.clone());
        }
    }
}

/// The candidate nearest `steps`, the larger on a tie.
fn nearest_candidate(steps: i64, candidates: &[i64]) -> i64 {
    candidates
        .iter()
        .copied()
        .min_by_key(|c| (c.abs_diff(steps), -c))
        .unwrap_or(3)
}

/// The candidate steps of SGLang's default adaptive config, every batch-size
/// slot's together (speculative/adaptive_spec_params.py:28-53, :142-150).
pub const ADAPTIVE_CANDIDATE_STEPS: [i64; 5] = [0, 1, 3, 5, 7];

/// `--speculative-adaptive` (when SGLang keeps it on, [`SglangArgs::adaptive_on`])
/// with `--speculative-num-steps` outside the candidate steps: ValueError at
/// resolve (`_init_adaptive_speculative_params`, speculative_hook.py:1392-1420;
/// unset steps resolve to 3). The fix is the nearest candidate (the larger on a
/// tie); with HiSparse one of 1 and 3, whose 2-4 draft tokens
/// (hisparse_coordinator.py:178-181) are steps + 1.
///
/// [`SglangArgs::adaptive_on`]: super::args::SglangArgs
fn adaptive_steps_not_candidate(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    let steps = a.speculative_num_steps?;
    if !a.adaptive_on() || ADAPTIVE_CANDIDATE_STEPS.contains(&steps) {
        return None;
    }
    let candidates: &[i64] = if a.hisparse_on() {
        &[1, 3]
    } else {
        &ADAPTIVE_CANDIDATE_STEPS
    };
    let nearest = nearest_candidate(steps, candidates);
    Some(
        Diagnostic::error(
            Code::SpeculativeAdaptiveStepsNotCandidate,
            FieldPath::root("speculative_num_steps"),
            format!(
                "--speculative-num-steps={steps} is not in the adaptive config candidate_steps {ADAPTIVE_CANDIDATE_STEPS:?}. Pass one of those values."
            ),
        )
        .stage(Resolve)
        .given(&json!(steps))
        .allowed(format!("one of {ADAPTIVE_CANDIDATE_STEPS:?} with --speculative-adaptive (SGLang's default adaptive config, speculative/adaptive_spec_params.py:28-53)"))
        .fix(vec![set("speculative_num_steps", json!(nearest))]),
    )
}

/// `--speculative-algorithm` that is no builtin name nor alias: ValueError
/// "Unknown speculative algorithm name: {name}" (speculative/spec_info.py:55-65)
/// on the upper-cased name (speculative_hook.py:136-142), at resolve
/// (speculative_hook.py:242). No speculative rule reads the launch then (the
/// name is no EAGLE); the fix removes the flag and the speculative parameters
/// given with it (serving without speculation),
/// and the hint names SGLang's algorithms.
fn unknown_algorithm(r: &Resolution<'_>) -> Option<Diagnostic> {
    let given = r.args.speculative_algorithm.as_deref()?;
    if r.args.speculative_algorithm().is_some() {
        return None;
    }
    let upper = given.to_uppercase();
    let names = [
        &SPECULATIVE_ALGORITHMS[..SPECULATIVE_ALGORITHMS.len() - 1],
        &["NEXTN"],
    ]
    .concat();
    let names = names.join(", ");
    let mtp = if upper == "MTP" {
        " (DeepSeek's MTP draft layers are SGLang's NEXTN, an alias of EAGLE)"
    } else {
        ""
    };
    Some(
        Diagnostic::error(
            Code::SpeculativeAlgorithmUnknown,
            FieldPath::root("speculative_algorithm"),
            format!("Unknown speculative algorithm name: {upper}"),
        )
        .stage(Resolve)
        .given(&json!(given))
        .allowed(format!("one of {names}, any case (speculative/spec_info.py:36-45)"))
        .fix(without_speculation(r))
        .hint(format!(
            "remove --speculative-algorithm to serve without speculation, or give one of SGLang {}'s names: {names}{mtp}",
            super::version::VERSION
        )),
    )
}

/// Serving without speculation: `--speculative-algorithm` removed, and the
/// speculative parameters given with it (which nothing reads then).
fn without_speculation(r: &Resolution<'_>) -> Vec<FixOp> {
    let a = r.args;
    [
        ("speculative_algorithm", true),
        ("speculative_num_steps", a.speculative_num_steps.is_some()),
        ("speculative_eagle_topk", a.speculative_eagle_topk.is_some()),
        (
            "speculative_num_draft_tokens",
            a.speculative_num_draft_tokens.is_some(),
        ),
    ]
    .into_iter()
    .filter(|(_, given)| *given)
    .map(|(attr, _)| FixOp::Remove {
        path: FieldPath::root(attr),
    })
    .collect()
}

/// NGRAM with `--speculative-ngram-max-bfs-breadth 0` and no
/// `--speculative-num-steps`: SGLang sets topk to the breadth, then the steps
/// to draft tokens // topk (speculative_hook.py:1310-1326): ZeroDivisionError
/// at resolve. The fix asks for breadth 1 (a linear chain, which the page
/// rule below also takes). Found by break23.
fn ngram_bfs_breadth_zero(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    if a.speculative_algorithm() != Some("NGRAM")
        || a.speculative_ngram_max_bfs_breadth != Some(0)
        || a.speculative_num_steps.is_some()
    {
        return None;
    }
    Some(
        Diagnostic::error(
            Code::NgramBfsBreadthZero,
            FieldPath::root("speculative_ngram_max_bfs_breadth"),
            "ZeroDivisionError: integer division or modulo by zero (speculative_num_steps = speculative_num_draft_tokens // speculative_eagle_topk, with NGRAM's topk the --speculative-ngram-max-bfs-breadth 0, arg_groups/speculative_hook.py:1310-1326)",
        )
        .stage(Resolve)
        .given(&json!(0))
        .allowed("a breadth of at least 1 (or --speculative-num-steps given)")
        .fix(vec![set("speculative_ngram_max_bfs_breadth", json!(1))]),
    )
}

/// NGRAM's `speculative_eagle_topk` is `--speculative-ngram-max-bfs-breadth`
/// (default 10, speculative_hook.py:1310-1314), refused with pages > 1 off the
/// flashinfer backend (speculative_hook.py:1352-1365): every DSA launch (page
/// 64, attention backend dsa). The fix asks for breadth 1 (a linear chain).
fn ngram_topk_with_pages(r: &Resolution<'_>) -> Option<Diagnostic> {
    if r.args.speculative_algorithm() != Some("NGRAM") {
        return None;
    }
    let (_, topk, _) = r.speculative.as_ref()?;
    let page = r.page_size.value;
    let backend = attention_backend(r);
    if *topk <= 1 || page <= 1 || backend == "flashinfer" {
        return None;
    }
    Some(
        Diagnostic::error(
            Code::NgramTopkWithPages,
            FieldPath::root("speculative_ngram_max_bfs_breadth"),
            format!("speculative_eagle_topk({topk}) > 1 with page_size({page}) > 1 is unstable and produces incorrect results for paged attention backends. This combination is only supported for the 'flashinfer' backend."),
        )
        .stage(Resolve)
        .given(&json!(topk))
        .allowed(format!("1 with page_size {page} and attention backend {backend} (NGRAM's speculative_eagle_topk is --speculative-ngram-max-bfs-breadth)"))
        .fix(vec![set("speculative_ngram_max_bfs_breadth", json!(1))]),
    )
}

/// NGRAM with attention DP: ValueError "Currently ngram speculative decoding
/// does not support dp attention." (speculative_hook.py:1366-1370).
fn ngram_with_dp_attention(r: &Resolution<'_>) -> Option<Diagnostic> {
    if r.args.speculative_algorithm() != Some("NGRAM") || r.attn_dp() <= 1 {
        return None;
    }
    let path = if r.args.attn_dp_size.is_some_and(|n| n > 1) {
        "attn_dp_size"
    } else {
        "enable_dp_attention"
    };
    Some(
        Diagnostic::error(
            Code::NgramWithDpAttention,
            FieldPath::root(path),
            "Currently ngram speculative decoding does not support dp attention.",
        )
        .stage(Resolve)
        .given(&json!(r.attn_dp()))
        .allowed("attention DP off (attn_dp_size 1) with --speculative-algorithm NGRAM")
        // No fix: either one changes the deployment (its GPUs or its speculation).
        .hint("run NGRAM without attention DP, or another --speculative-algorithm (EAGLE) with it"),
    )
}

/// The attention backend a DSA launch resolves to when none is given (`dsa`).
pub(crate) fn attention_backend<'a>(r: &'a Resolution<'_>) -> &'a str {
    match r.args.attention_backend.as_deref() {
        Some(b) => b,
        None if r.is_dsa => "dsa",
        None => default_attention_backend(r),
    }
}

/// SGLang 0.5.23's attention backend for a launch that names none
/// (`_attention_backend_default`, arg_groups/overrides.py:1127-1140 ->
/// `get_default_attn_backend`, arg_groups/model_override_base.py:277-350):
/// MHA models take fa3 on Hopper and trtllm_mha on SM100 only without
/// speculation or with topk 1, aiter on ROCm, else flashinfer (CUDA has it);
/// MLA models fa3 on Hopper, flashinfer on SM100, triton on ROCm (aiter there
/// with 16 or 128 KV heads per rank, which is not modelled),
/// else triton. (`--prefill-attention-backend` equal to the decode one, which
/// SGLang takes first, is not read.)
fn default_attention_backend(r: &Resolution<'_>) -> &'static str {
    let mla = r.model.as_ref().is_some_and(|m| m.kv_lora_rank.is_some());
    let topk_one = r.speculative.as_ref().is_none_or(|&(_, topk, _)| topk == 1);
    match (mla, r.hip, r.sm_major) {
        (true, true, _) => "triton",
        (true, false, 9) => "fa3",
        (true, false, 10) => "flashinfer",
        (true, false, _) => "triton",
        (false, true, _) => "aiter",
        (false, false, 9) if topk_one => "fa3",
        (false, false, 10) if topk_one => "trtllm_mha",
        (false, false, _) => "flashinfer",
    }
}
