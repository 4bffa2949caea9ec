//! Stage S1 rules (`ServerArgs.resolve_once`, srt/arg_groups/pipeline.py), in
//! pipeline order; SGLang stops at the first, we report every one. Each
//! message is SGLang's own exception text.

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
fn remove(attr: &str) -> FixOp {
    FixOp::Remove {
        path: FieldPath::root(attr),
    }
}
fn err(code: Code, attr: &str, msg: &str) -> Diagnostic {
    Diagnostic::error(code, FieldPath::root(attr), msg).stage(Resolve)
}

/// Every S1 rule of this file, in SGLang's pipeline order (one function per
/// rule, each with its code, SGLang's message, file:line and fix).
pub(crate) fn check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    d.extend(host_receive_threshold_out_of_range(r));
    host_receive_with_hisparse(r, d);
    d.extend(host_receive_off_decode(r));
    d.extend(host_receive_with_dcp(r));
    decode_radix_cache_with_hisparse(r, d);
    prefill_complete_with_hisparse(r, d);
    prefill_only_disable_kv_cache(r, d);
    dsa_dcp_and_kv_dtype(r, d);
    data_parallel_layout(r, d);
    deepseek_v4(r, d);
    dsa_backends(r, d);
    hierarchical_cache_without_radix(r, d);
    kv_cache_sharding(r, d);
    eagle_parameters(r, d);
    eagle_topk_tree_backend(r, d);
}

/// The fix of every decode host receive rule: threshold 1, host receive off
/// (SGLang's default).
fn host_receive_off() -> Vec<FixOp> {
    vec![set(
        "disaggregation_decode_host_receive_threshold",
        json!(1.0),
    )]
}

/// `--disaggregation-decode-host-receive-threshold` outside [0, 1]:
/// ValueError "... must be between 0 and 1" (pd_disaggregation_hook.py:64-67).
fn host_receive_threshold_out_of_range(r: &Resolution<'_>) -> Option<Diagnostic> {
    let t = r
        .args
        .disaggregation_decode_host_receive_threshold
        .filter(|t| !(0.0..=1.0).contains(t))?;
    Some(
        err(
            Code::HostReceiveThresholdOutOfRange,
            "disaggregation_decode_host_receive_threshold",
            "--disaggregation-decode-host-receive-threshold must be between 0 and 1",
        )
        .given(&json!(t))
        .allowed("a number in [0, 1] (1: decode host receive off)")
        .fix(host_receive_off()),
    )
}

/// A threshold below 1 turns on decode host KV buffering, which declares
/// `disaggregation_decode_retraction_backup=host_pool`
/// (pd_disaggregation_hook.py:68-80); off a P/D decode server
/// handle_cache_compatibility refuses that backup (kv_cache_hook.py:351-359).
fn host_receive_off_decode(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    let t = a
        .disaggregation_decode_host_receive_threshold
        .filter(|t| (0.0..1.0).contains(t))?;
    if a.pd_mode() == "decode" || a.hisparse_on() {
        return None; // host_receive_with_hisparse refuses it first
    }
    Some(
        err(
            Code::HostReceiveOffDecode,
            "disaggregation_decode_host_receive_threshold",
            "--disaggregation-decode-retraction-backup=host_pool is only supported on a PD decode server.",
        )
        .given(&json!(t))
        .allowed("1 off a P/D decode server (decode host receive, below 1, declares the host_pool retraction backup, decode only)")
        .fix(host_receive_off()),
    )
}

/// The same host_pool backup with `--dcp-size` > 1 on a decode server:
/// "... does not support --dcp-size > 1." (kv_cache_hook.py:360-364).
fn host_receive_with_dcp(r: &Resolution<'_>) -> Option<Diagnostic> {
    let a = r.args;
    let t = a
        .disaggregation_decode_host_receive_threshold
        .filter(|t| (0.0..1.0).contains(t))?;
    if a.pd_mode() != "decode" || a.hisparse_on() || a.dcp_size.unwrap_or(1) <= 1 {
        return None;
    }
    Some(
        err(
            Code::HostReceiveWithDcp,
            "disaggregation_decode_host_receive_threshold",
            "--disaggregation-decode-retraction-backup=host_pool does not support --dcp-size > 1.",
        )
        .given(&json!(t))
        .allowed(
            "1 with --dcp-size > 1 (decode host receive declares the host_pool retraction backup)",
        )
        .fix(host_receive_off()),
    )
}

/// pd_disaggregation_hook.py:68-72.
fn host_receive_with_hisparse(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let on = a.hisparse_on();
    if let Some(t) = a.disaggregation_decode_host_receive_threshold {
        if on && t < 1.0 {
            d.push(
                err(
                    Code::HostReceiveWithHisparse,
                    "disaggregation_decode_host_receive_threshold",
                    "Decode host receive does not yet support HiSparse or role switching",
                )
                .given(&json!(t))
                .allowed("1 (host receive off) with --enable-hisparse")
                .fix(vec![set(
                    "disaggregation_decode_host_receive_threshold",
                    json!(1.0),
                )]),
            );
        }
    }
}

/// pd_disaggregation_hook.py:98-104.
fn decode_radix_cache_with_hisparse(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let on = a.hisparse_on();
    if on && a.pd_mode() == "decode" && a.disaggregation_decode_enable_radix_cache == Some(true) {
        d.push(
            err(
                Code::DecodeRadixCacheWithHisparse,
                "disaggregation_decode_enable_radix_cache",
                "--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse",
            )
            .given(&json!(true))
            .allowed("off with --enable-hisparse")
            .fix(vec![set(
                "disaggregation_decode_enable_radix_cache",
                json!(false),
            )]),
        );
    }
}

/// pd_disaggregation_hook.py:47-48 -> :199-242: SGLang lists every unsupported feature.
fn prefill_complete_with_hisparse(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let on = a.hisparse_on();
    if on && a.disaggregation_decode_allocation_policy.as_deref() == Some("prefill_complete") {
        let mut unsupported = Vec::new();
        if !matches!(a.pd_mode(), "prefill" | "decode") {
            unsupported.push("aggregated serving");
        }
        if !matches!(
            a.disaggregation_transfer_backend
                .as_deref()
                .unwrap_or("mooncake"),
            "mooncake" | "mooncake_tcp"
        ) {
            unsupported.push("transfer backends other than Mooncake");
        }
        unsupported.push("HiSparse");
        let msg = format!(
            "--disaggregation-decode-allocation-policy prefill_complete does not yet support {}",
            unsupported.join(", ")
        );
        d.push(
            err(
                Code::PrefillCompleteWithHisparse,
                "disaggregation_decode_allocation_policy",
                &msg,
            )
            .given(&json!("prefill_complete"))
            .allowed("early with --enable-hisparse")
            .fix(vec![set(
                "disaggregation_decode_allocation_policy",
                json!("early"),
            )]),
        );
    }
}

/// kv_cache_hook.py:932-938.
fn prefill_only_disable_kv_cache(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let on = a.hisparse_on();
    if on && a.prefill_only_disable_kv_cache == Some(true) {
        d.push(
            err(Code::PrefillOnlyDisableKvCacheWithHisparse, "prefill_only_disable_kv_cache", "--prefill-only-disable-kv-cache is incompatible with --enable-hisparse: HiSparse uses a dedicated pool family that is not the no-op MHA pool.")
                .given(&json!(true))
                .fix(vec![set("prefill_only_disable_kv_cache", json!(false))]),
        );
    }
}

/// DSA models: DCP with HiSparse, HiCache or P/D (model_overrides/deepseek_v2.py:18-26,
/// `dsa_dcp_unsupported`) and a KV dtype other than bfloat16 / fp8_e4m3
/// (arg_groups/overrides.py:541-544, `dsa_kv_cache_dtype_unsupported`; its fix
/// in `dsa_dtype`).
fn dsa_dcp_and_kv_dtype(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let on = a.hisparse_on();
    if r.is_dsa {
        // model_overrides/deepseek_v2.py:18-26 (_dsa_dcp_overrides): refused with
        // HiSparse or HiCache, with P/D, or eagle_topk other than 1; else DCP resolves.
        if let Some(dcp) = a.dcp_size.filter(|&n| n > 1) {
            let msg = if on || a.enable_hierarchical_cache == Some(true) {
                Some("DSA DCP does not support HiSparse or HiCache.")
            } else if a.pd_mode() != "null" {
                Some("DSA DCP does not support PD disaggregation.")
            } else {
                None
            };
            if let Some(msg) = msg {
                d.push(
                    err(Code::DsaDcpUnsupported, "dcp_size", msg)
                        .given(&json!(dcp))
                        .allowed("1 with --enable-hisparse")
                        .fix(vec![set("dcp_size", json!(1))]),
                );
            }
        }
        // arg_groups/overrides.py:541-544 (AssertionError).
        let dtype = r.kv_cache_dtype.value.as_str();
        if !matches!(dtype, "bfloat16" | "fp8_e4m3") {
            d.push(
                err(
                    Code::DsaKvCacheDtypeUnsupported,
                    "kv_cache_dtype",
                    "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype",
                )
                .given(&json!(a.kv_cache_dtype))
                .allowed("auto, bf16, bfloat16 or fp8_e4m3")
                .fix(super::dsa_dtype::dsa_dtype_fix(r).0),
            );
        }
    }
}

/// parallel_hook.py:326 (AssertionError, no message), with attention DP on.
fn data_parallel_layout(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let (tp, attn_dp) = (a.tp_size.unwrap_or(1), r.attn_dp());
    let (_, attr) = r.attn_dp_given();
    if attn_dp > 1 && tp % attn_dp != 0 {
        let fit = r.attn_dp_fixed();
        let from = if attr == "dp_size" {
            "--dp-size with --enable-dp-attention"
        } else {
            "--attn-dp-size"
        };
        let e = err(Code::DataParallelLayoutInvalid, attr, &format!("AssertionError (no message): tp_size % attn_dp_size == 0 fails, tp_size {tp}, attn_dp_size {attn_dp} ({from}; arg_groups/parallel_hook.py:326)"))
            .given(&json!(attn_dp))
            .allowed(format!("a divisor of tp_size {tp}"));
        // --attn-dp-size 1 beside --dp-size N --enable-dp-attention turns the
        // deprecated form back on (parallel_hook.py:39-60), width N again: no
        // fix of this one alone (dp_replicas_with_attn_dp says why; N below 1
        // is attn_dp_size_not_positive's refusal then).
        let revives = attr == "attn_dp_size"
            && fit == 1
            && a.enable_dp_attention == Some(true)
            && a.dp_size.unwrap_or(1) != 1;
        d.push(if revives {
            e
        } else {
            e.fix(vec![set(attr, json!(fit))])
        });
    }
}

/// DeepSeek-V4's own resolve rules ([`dsv4`]).
fn deepseek_v4(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    if r.is_dsv4 {
        dsv4(r, d);
    }
}

/// DSA backends at resolve: triton is ROCm-only (overrides.py:561-567,
/// `triton_dsa_backend_on_cuda`), TileLang with fp8_e4m3 refuses HiSparse
/// (overrides.py:687-692, `tilelang_fp8_with_hisparse`).
fn dsa_backends(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let on = a.hisparse_on();
    let backends = [
        ("dsa_prefill_backend", &r.dsa_prefill_backend),
        ("dsa_decode_backend", &r.dsa_decode_backend),
    ];
    // overrides.py:561-567: the triton DSA backend is ROCm-only; checked only
    // for DSA models (_dsa_split_backend_resolution returns first, :601-612).
    if !r.hip && r.is_dsa {
        for (attr, b) in backends {
            if b.as_ref().is_some_and(|b| b.value == "triton") {
                d.push(
                    err(Code::TritonDsaBackendOnCuda, attr, "The triton DSA backend is only supported on ROCm/HIP. Pick an alternative DSA backend for CUDA (flashmla_kv on Hopper, trtllm on Blackwell).")
                        .given(&json!("triton"))
                        .fix(vec![remove(attr)]),
                );
            }
        }
    }
    // overrides.py:687-692 (HiSparse arm of the DSA backend resolution).
    if on && r.is_dsa && !r.hip && r.kv_cache_dtype.value == "fp8_e4m3" {
        for (attr, b) in backends {
            if b.as_ref().is_some_and(|b| b.value == "tilelang") {
                d.push(
                    err(
                        Code::TilelangFp8WithHisparse,
                        attr,
                        "CUDA TileLang FP8 KV does not support HiSparse.",
                    )
                    .given(&json!("tilelang"))
                    .fix(vec![remove(attr)]),
                );
            }
        }
    }
}

/// kv_cache_hook.py:393-397.
fn hierarchical_cache_without_radix(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    if a.enable_hierarchical_cache == Some(true) && r.disable_radix_cache.value {
        d.push(
            err(Code::HierarchicalCacheWithoutRadixCache, "enable_hierarchical_cache", "The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive and cannot be used at the same time. Please use only one of them.")
                .given(&json!(true))
                .allowed("off: HiSparse needs the radix cache off, and HiCache needs it on")
                .fix(vec![set("enable_hierarchical_cache", json!(false))]),
        );
    }
}

/// kv_shard_hook.py:96-101 and :198-203.
fn kv_cache_sharding(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let on = a.hisparse_on();
    if on && a.enable_kv_cache_sharding == Some(true) {
        let msg = if a.pd_mode() != "prefill" {
            "--enable-kv-cache-sharding is only supported on PD prefill workers (kv_shard_hook.py:96-101); it never runs with HiSparse"
        } else {
            "--enable-kv-cache-sharding does not support --enable-hisparse: HiSparse selects a non-sharded allocator and assumes each rank owns complete KV pages."
        };
        d.push(
            err(
                Code::KvCacheShardingWithHisparse,
                "enable_kv_cache_sharding",
                msg,
            )
            .given(&json!(true))
            .fix(vec![set("enable_kv_cache_sharding", json!(false))]),
        );
    }
}

/// speculative_hook.py:1159-1174: EAGLE picks (3, 1, 4) only when none of
/// steps / topk / draft tokens is given; topk or draft tokens without steps
/// is a bare AssertionError, steps without topk a TypeError (FACTS_sglang.md #6).
/// Adaptive speculation fills topk (1) and steps (3) before these run
/// (speculative_hook.py:262-264, :1402-1414): neither fires then.
fn eagle_parameters(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    if a.speculation_on() && a.speculative_algorithm() != Some("NGRAM") && !a.adaptive_on() {
        let (steps, topk, draft) = (
            a.speculative_num_steps,
            a.speculative_eagle_topk,
            a.speculative_num_draft_tokens,
        );
        if steps.is_none() && (topk.is_some() || draft.is_some()) {
            let n = draft.unwrap_or(4).clamp(2, 4);
            d.push(
                err(Code::SpeculativeNumStepsMissing, "speculative_num_steps", "AssertionError (no message): --speculative-eagle-topk or --speculative-num-draft-tokens without --speculative-num-steps (arg_groups/speculative_hook.py:1159-1163)")
                    .allowed("all three of --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens, or none")
                    // Without topk, steps alone is the TypeError below: set both.
                    .fix(if topk.is_none() {
                        vec![set("speculative_num_steps", json!(n - 1)), set("speculative_eagle_topk", json!(1))]
                    } else {
                        vec![set("speculative_num_steps", json!(n - 1))]
                    }),
            );
        } else if steps.is_some() && topk.is_none() {
            d.push(
                err(Code::SpeculativeEagleTopkMissing, "speculative_eagle_topk", "TypeError: '>' not supported between instances of 'NoneType' and 'int' (--speculative-num-steps without --speculative-eagle-topk, arg_groups/speculative_hook.py:1159-1174)")
                    .allowed("--speculative-eagle-topk 1 with --speculative-num-steps")
                    .fix(vec![set("speculative_eagle_topk", json!(1))]),
            );
        }
    }
}

/// speculative_hook.py:1272-1282: for DSA (attention backend dsa) this fires before S2's rule.
fn eagle_topk_tree_backend(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    let eagle_like = r
        .speculative
        .as_ref()
        .filter(|_| a.speculative_algorithm() != Some("NGRAM"));
    if let Some(&(_, topk, _)) = eagle_like {
        let backend = super::rules_spec::attention_backend(r);
        if topk > 1 && r.page_size.value > 1 && !matches!(backend, "flashinfer" | "fa3" | "triton")
        {
            d.push(
                err(Code::EagleTopkNeedsTreeBackend, "speculative_eagle_topk", &format!("speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', 'fa3', 'triton'); got attention_backend={backend:?}. Use page_size == 1 or one of those backends."))
                    .given(&json!(topk))
                    .allowed("1 with --enable-hisparse")
                    .fix(if a.speculative_num_steps.is_none() {
                        // SGLang's own defaults (Llama's 5, 4, 8) given none: steps and
                        // draft tokens too, or topk alone is refused (:1159-1163).
                        let steps = r.speculative.as_ref().map_or(3, |s| s.0).min(3);
                        vec![
                            set("speculative_num_steps", json!(steps)),
                            set("speculative_eagle_topk", json!(1)),
                            set("speculative_num_draft_tokens", json!(steps + 1)),
                        ]
                    } else {
                        vec![set("speculative_eagle_topk", json!(1))]
                    }),
            );
        }
    }
}

/// DeepSeek-V4's own resolution rules (arg_groups/deepseek_v4_hook.py:63-158,
/// run from model_hook.py:258-265 before the speculative defaults are chosen).
fn dsv4(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    // overrides.py:907-910 (AssertionError): bf16 is not normalised here.
    let dtype = r.kv_cache_dtype.value.as_str();
    if !matches!(dtype, "bfloat16" | "fp8_e4m3") {
        let to = if dtype == "bf16" { "bfloat16" } else { "auto" };
        d.push(
            err(
                Code::DsaKvCacheDtypeUnsupported,
                "kv_cache_dtype",
                &format!("{dtype} is not supported for DeepseekV4ForCausalLM"),
            )
            .given(&json!(a.kv_cache_dtype))
            .allowed("auto (fp8_e4m3), fp8_e4m3 or bfloat16")
            .fix(vec![set("kv_cache_dtype", json!(to))]),
        );
    }
    // deepseek_v4_hook.py:148-153 (AssertionError): the name as given, before
    // SGLang upper-cases it (speculative_hook.py:136-142), so `eagle` and
    // `NEXTN` fail too; an unknown name is speculative_algorithm_unknown's.
    if let Some(given) = a.speculative_algorithm.as_deref() {
        if !matches!(given, "EAGLE" | "DSPARK") && a.speculative_algorithm().is_some() {
            let steps = a.speculative_num_steps.unwrap_or(3);
            let fix = if a.speculative_algorithm() == Some("EAGLE") {
                vec![
                    set("speculative_algorithm", json!("EAGLE")),
                    set("speculative_num_steps", json!(steps)),
                    set("speculative_eagle_topk", json!(1)),
                    set(
                        "speculative_num_draft_tokens",
                        json!(steps.saturating_add(1)),
                    ),
                ]
            } else {
                vec![remove("speculative_algorithm")]
            };
            d.push(
                err(
                    Code::SpeculativeAlgorithmNotForModel,
                    "speculative_algorithm",
                    "Only EAGLE and DSPARK speculative algorithms are supported for DeepseekV4ForCausalLM",
                )
                .given(&json!(given))
                .allowed("EAGLE or DSPARK, spelled in capitals (DeepSeek-V4's hook reads the name as given)")
                .fix(fix),
            );
        }
    }
    // deepseek_v4_hook.py:154-158 (AssertionError): the hook runs before
    // SGLang picks the speculative defaults, so an unset topk fails too.
    if a.speculative_algorithm.as_deref() == Some("EAGLE") && a.speculative_eagle_topk != Some(1) {
        let steps = a.speculative_num_steps.unwrap_or(3);
        d.push(
            err(
                Code::SpeculativeEagleTopkNotOne,
                "speculative_eagle_topk",
                "Only EAGLE speculative algorithm with topk == 1 is supported for DeepseekV4ForCausalLM",
            )
            .given(&json!(a.speculative_eagle_topk))
            .allowed("1, given (DeepSeek-V4's hook reads it before SGLang's speculative defaults)")
            .fix(vec![
                set("speculative_num_steps", json!(steps)),
                set("speculative_eagle_topk", json!(1)),
                set("speculative_num_draft_tokens", json!(steps.saturating_add(1))),
            ]),
        );
    }
}
