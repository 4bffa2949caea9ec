//! Stage S1 KV-cache rules SGLang 0.5.23 applies to any launch, HiSparse or
//! not (`ServerArgs.resolve_once`, srt/arg_groups/pipeline.py:170, :255, :284):
//! one item per rule, with SGLang's message, file:line and fix. The HiSparse
//! forms of the same flags are rules_resolve's (`kv_cache_sharding_with_hisparse`,
//! `prefill_only_disable_kv_cache_with_hisparse`).

use super::diagnostics::SglangDiagnostic;
use super::resolution::Resolution;
use super::stages::SglangStage::Resolve;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use serde_json::json;

fn set_false(attr: &str) -> FixOp {
    FixOp::Set {
        path: FieldPath::root(attr),
        value: json!(false),
    }
}

pub(crate) fn check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    prefill_only_needs_embedding(r, d);
    prefill_only_preconditions(r, d);
    mxfp8_needs_blackwell(r, d);
    tilelang_fp8_backends_mixed(r, d);
    kv_cache_sharding_off_prefill(r, d);
    prefill_complete_unsupported(r, d);
}

/// `_validate_prefill_complete` (arg_groups/pd_disaggregation_hook.py:199-242,
/// run from :47-48) without HiSparse (with it, rules_resolve's
/// `prefill_complete_with_hisparse`): what the check reads of its list.
fn prefill_complete_unsupported(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    if a.hisparse_on()
        || a.disaggregation_decode_allocation_policy.as_deref() != Some("prefill_complete")
    {
        return;
    }
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
    if a.pp_size.unwrap_or(1) != 1 || a.dcp_size.unwrap_or(1) != 1 {
        unsupported.push("pipeline or attention context parallelism");
    }
    // dp_size after the deprecated form is turned around (parallel_hook.py:39-60).
    let attn_dp = if a.enable_dp_attention == Some(true) {
        r.dp_replicas()
    } else {
        1
    };
    if a.tp_size.unwrap_or(1) != attn_dp {
        unsupported.push("attention tensor parallelism greater than one");
    }
    if a.disaggregation_decode_host_receive_threshold
        .is_some_and(|t| t < 1.0)
    {
        unsupported.push("decode host KV buffering");
    }
    if a.pd_mode() == "decode"
        && (a.disaggregation_decode_enable_radix_cache == Some(true)
            || a.enable_hierarchical_cache == Some(true))
    {
        unsupported.push("decode radix cache or decode HiCache");
    }
    if unsupported.is_empty() {
        return;
    }
    d.push(
        Diagnostic::error(
            Code::PrefillCompletePolicyUnsupported,
            FieldPath::root("disaggregation_decode_allocation_policy"),
            format!("--disaggregation-decode-allocation-policy prefill_complete does not yet support {}", unsupported.join(", ")),
        )
        .stage(Resolve)
        .given(&json!("prefill_complete"))
        .allowed("early (the default) for this launch")
        .fix(vec![FixOp::Set { path: FieldPath::root("disaggregation_decode_allocation_policy"), value: json!("early") }]),
    );
}

/// `validate_prefill_only_disable_kv_cache_args`' preconditions for an embedding
/// model (arg_groups/kv_cache_hook.py:897-911): `--chunked-prefill-size -1` and
/// the radix cache off, for the FA backend's fa_skip_kv_cache path.
fn prefill_only_preconditions(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    if a.prefill_only_disable_kv_cache != Some(true)
        || a.is_embedding != Some(true)
        || a.hisparse_on()
    {
        return;
    }
    // handle_prefill_only_disable_kv_cache (kv_cache_hook.py:321-345): the FA
    // prefill backend (fa3/fa4); a DSA model's is `dsa`. Ported for DSA models
    // only (a non-DSA model's default backend depends on the GPU).
    if r.is_dsa || r.is_dsv4 {
        let backend = if r.is_dsv4 { "dsv4" } else { "dsa" };
        d.push(
            Diagnostic::error(Code::PrefillOnlyDisableKvCachePreconditions, FieldPath::root("prefill_only_disable_kv_cache"), format!("--prefill-only-disable-kv-cache currently requires the FA prefill backend (fa3/fa4), but got prefill backend '{backend}'. Other prefill-only workloads and backends may be supported in a future change."))
                .stage(Resolve)
                .given(&json!(true))
                .allowed(format!("off for this model (its prefill backend is {backend})"))
                .fix(vec![set_false("prefill_only_disable_kv_cache")]),
        );
        return;
    }
    if a.chunked_prefill_size != Some(-1) {
        d.push(
            Diagnostic::error(Code::PrefillOnlyDisableKvCachePreconditions, FieldPath::root("chunked_prefill_size"), "--prefill-only-disable-kv-cache requires --chunked-prefill-size=-1 so the FA backend takes the fa_skip_kv_cache path; otherwise the pool would be touched between prefill chunks.")
                .stage(Resolve)
                .given(&a.chunked_prefill_size.map_or(serde_json::Value::Null, |c| json!(c)))
                .allowed("-1 with --prefill-only-disable-kv-cache")
                .fix(vec![FixOp::Set { path: FieldPath::root("chunked_prefill_size"), value: json!(-1) }]),
        );
    }
    if !r.disable_radix_cache.value {
        // HiCache needs the radix cache (hierarchical_cache_without_radix_cache):
        // with no KV cache kept it has nothing to hold, so the fix drops it too.
        let mut fix = vec![FixOp::Set {
            path: FieldPath::root("disable_radix_cache"),
            value: json!(true),
        }];
        if a.enable_hierarchical_cache == Some(true) {
            fix.push(set_false("enable_hierarchical_cache"));
        }
        d.push(
            Diagnostic::error(Code::PrefillOnlyDisableKvCachePreconditions, FieldPath::root("disable_radix_cache"), "--prefill-only-disable-kv-cache requires --disable-radix-cache because the radix cache indexes KV pool slots that no longer hold real data.")
                .stage(Resolve)
                .given(&json!(false))
                .allowed("true with --prefill-only-disable-kv-cache")
                .fix(fix),
        );
    }
}

/// `_check_dsa_backend_constraints` (arg_groups/overrides.py:550-575): on CUDA
/// with fp8_e4m3, tilelang for one DSA backend needs it for both. With
/// HiSparse, rules_resolve's `tilelang_fp8_with_hisparse` refuses tilelang at all.
fn tilelang_fp8_backends_mixed(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    if !r.is_dsa || r.hip || r.args.hisparse_on() || r.kv_cache_dtype.value != "fp8_e4m3" {
        return;
    }
    let name = |b: &Option<crate::report::Resolved<String>>| b.as_ref().map(|b| b.value.clone());
    let (pre, dec) = (name(&r.dsa_prefill_backend), name(&r.dsa_decode_backend));
    let tile = |b: &Option<String>| b.as_deref() == Some("tilelang");
    if !(tile(&pre) ^ tile(&dec)) {
        return;
    }
    let (attr, other) = if tile(&pre) {
        ("dsa_prefill_backend", "dsa_decode_backend")
    } else {
        ("dsa_decode_backend", "dsa_prefill_backend")
    };
    d.push(
        Diagnostic::error(Code::TilelangFp8BackendsMixed, FieldPath::root(attr), "CUDA TileLang FP8 KV requires both DSA backends to be tilelang; raw and scaled FP8 KV layouts cannot be mixed.")
            .stage(Resolve)
            .given(&json!("tilelang"))
            .allowed(format!("tilelang for {other} too, or another backend"))
            .fix(vec![FixOp::Remove { path: FieldPath::root(attr) }]),
    );
}

/// `handle_mxfp8_kv_cache_compatibility` (arg_groups/kv_cache_hook.py:100-109,
/// pipeline.py:255): `is_blackwell` is SM 10, 11 or 12 (utils/common.py:297-303).
/// A DSA model refuses mxfp8 anyway (`dsa_kv_cache_dtype_unsupported`).
fn mxfp8_needs_blackwell(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    if r.args.kv_cache_dtype.as_deref() != Some("mxfp8") || r.is_dsa || r.is_dsv4 {
        return;
    }
    if (10..=12).contains(&r.sm_major) && !r.hip {
        return;
    }
    d.push(
        Diagnostic::error(Code::KvCacheDtypeNeedsBlackwell, FieldPath::root("kv_cache_dtype"), "--kv-cache-dtype mxfp8 requires an SM100+ (Blackwell) GPU for the block-scaled operands used by the FA4 MXFP8 attention path.")
            .stage(Resolve)
            .given(&json!("mxfp8"))
            .allowed(format!("on SM {}.x: auto, bfloat16, fp8_e4m3 (mxfp8 on SM 10-12)", r.sm_major))
            .fix(vec![FixOp::Set { path: FieldPath::root("kv_cache_dtype"), value: json!("fp8_e4m3") }]),
    );
}

/// `validate_prefill_only_disable_kv_cache_args` (arg_groups/kv_cache_hook.py:865-884,
/// pipeline.py:170): only for embedding models. With HiSparse it is refused
/// too (rules_resolve's, :932-938); the fix drops the flag either way.
fn prefill_only_needs_embedding(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    if a.prefill_only_disable_kv_cache != Some(true) || a.is_embedding == Some(true) {
        return;
    }
    if a.hisparse_on() {
        return; // prefill_only_disable_kv_cache_with_hisparse, same stage and fix
    }
    d.push(
        Diagnostic::error(Code::PrefillOnlyDisableKvCacheNeedsEmbedding, FieldPath::root("prefill_only_disable_kv_cache"), "--prefill-only-disable-kv-cache currently requires --is-embedding. Other prefill-only workloads may be supported in a future change once their attention paths stop reading or writing the paged KV cache.")
            .stage(Resolve)
            .given(&json!(true))
            .allowed("with --is-embedding only")
            .fix(vec![set_false("prefill_only_disable_kv_cache")]),
    );
}

/// `handle_kv_cache_sharding` (arg_groups/kv_shard_hook.py:87-104,
/// pipeline.py:284): only on a P/D prefill worker. With HiSparse it is
/// rules_resolve's `kv_cache_sharding_with_hisparse`.
fn kv_cache_sharding_off_prefill(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    if a.enable_kv_cache_sharding != Some(true) || a.pd_mode() == "prefill" || a.hisparse_on() {
        return;
    }
    d.push(
        Diagnostic::error(Code::KvCacheShardingOffPrefill, FieldPath::root("enable_kv_cache_sharding"), "--enable-kv-cache-sharding is only supported on PD prefill workers: a rank's pool holds only its stripe of every cached page, which is incompatible with local decode.")
            .stage(Resolve)
            .given(&json!(a.pd_mode()))
            .allowed("--disaggregation-mode prefill")
            .fix(vec![set_false("enable_kv_cache_sharding")]),
    );
}
