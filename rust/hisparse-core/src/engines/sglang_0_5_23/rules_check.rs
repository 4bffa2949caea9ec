//! Stage S2 rules (`check_server_args` -> srt/arg_groups/validation_hook.py ->
//! hisparse_hook.py:87-165): `check` only with `--enable-hisparse`,
//! `check_always` (the chunked-prefill page rule) for every launch.

use super::diagnostics::SglangDiagnostic;
use super::dsa_dtype::{allowed_backends, dsa_dtype_fix};
use super::resolution::Resolution;
use super::stages::SglangStage::Check;
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use serde_json::{json, Value};

fn set(attr: &str, value: Value) -> FixOp {
    FixOp::Set {
        path: FieldPath::root(attr),
        value,
    }
}
fn err(code: Code, attr: &str, msg: &str) -> Diagnostic {
    Diagnostic::error(code, FieldPath::root(attr), msg).stage(Check)
}

/// The radix-cache fix: P/D decode decides it from its own flag
/// (pd_disaggregation_hook.py:98-127); HiCache must go with it (kv_cache_hook.py:393-397).
pub(crate) fn radix_off(r: &Resolution<'_>) -> Vec<FixOp> {
    let mut ops = if r.args.pd_mode() == "decode" {
        vec![set(
            "disaggregation_decode_enable_radix_cache",
            json!(false),
        )]
    } else {
        vec![set("disable_radix_cache", json!(true))]
    };
    if r.args.enable_hierarchical_cache == Some(true) {
        ops.push(set("enable_hierarchical_cache", json!(false)));
    }
    ops
}

pub(crate) fn check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    // hisparse_hook.py:104-107 (AssertionError); model_config.py:191-212.
    if r.model.is_some() && !r.is_dsa && !r.other_sparse {
        d.push(
            err(Code::HisparseModelNotDsa, "model_path", "--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention) models (e.g., DeepSeek V3.2, GLM-5), DeepSeek V4, and MiniMax M3 now. ")
                .given(&json!(r.model.as_ref().and_then(|m| m.architecture.clone())))
                .allowed(format!("a DSA architecture with index_topk set ({})", super::resolution::DSA_ARCHITECTURES.join(", ")))
                .hint("serve a DSA model (DeepSeek-V3.2, GLM-5) for HiSparse, or drop --enable-hisparse for this one"),
        );
    }
    // hisparse_hook.py:109-111 (AssertionError).
    if !r.disable_radix_cache.value {
        d.push(
            err(Code::RadixCacheEnabled, "disable_radix_cache", "Hierarchical sparse attention currently requires --disable-radix-cache.")
                .given(&json!(false))
                .allowed("the radix cache off (--disable-radix-cache, or P/D decode without --disaggregation-decode-enable-radix-cache)")
                .fix(radix_off(r)),
        );
    }
    // hisparse_hook.py:82-84 (validate_hisparse_feature_combos).
    if a.enable_mixed_chunk == Some(true) {
        d.push(
            err(
                Code::MixedChunkWithHisparse,
                "enable_mixed_chunk",
                "--enable-hisparse does not support --enable-mixed-chunk yet.",
            )
            .given(&json!(true))
            .fix(vec![set("enable_mixed_chunk", json!(false))]),
        );
    }
    if let Some((steps, topk, _)) = r.speculative {
        speculative(r, steps, topk, d);
    }
    // hisparse_hook.py:157-161 -> validate_hisparse_dsa_backend (:44-61), DSA and
    // DeepSeek-V4 on CUDA (only ROCm returns early for V4, :128-149).
    if r.is_dsa || (r.is_dsv4 && !r.hip) {
        // A kv dtype S1 refuses is checked as its fix gives it (auto, or bfloat16
        // for DeepSeek-V4's bf16), so that every fix at once passes.
        let (dtype, replaced) = match r.kv_cache_dtype.value.as_str() {
            d @ ("bfloat16" | "fp8_e4m3") => (d, false),
            "bf16" if r.is_dsv4 => ("bfloat16", true),
            _ if r.is_dsv4 => ("fp8_e4m3", true),
            _ => (dsa_dtype_fix(r).1, true),
        };
        let allowed = allowed_backends(r.hip, dtype);
        for (attr, label, b, given) in [
            (
                "dsa_prefill_backend",
                "prefill",
                &r.dsa_prefill_backend,
                r.args.dsa_prefill_backend.is_some(),
            ),
            (
                "dsa_decode_backend",
                "decode",
                &r.dsa_decode_backend,
                r.args.dsa_decode_backend.is_some(),
            ),
        ] {
            let Some(b) = b else { continue };
            // With the dtype replaced by its fix, SGLang picks the default
            // backends for the fixed dtype (overrides.py:677-684): only a
            // backend given can be refused.
            if replaced && !given {
                continue;
            }
            if !allowed.contains(&b.value.as_str()) {
                let list = format!(
                    "[{}]",
                    allowed
                        .iter()
                        .map(|x| format!("'{x}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                d.push(
                    err(Code::DsaBackendNotAllowed, attr, &format!("HiSparse supports DSA {label} backend(s) {list} on this platform with --kv-cache-dtype={dtype}, but got --dsa-{label}-backend={}. Please use one of {list}, or omit the option to let SGLang pick a backend for this platform.", b.value))
                        .given(&json!(b.value))
                        .allowed(format!("one of {list}"))
                        .fix(vec![FixOp::Remove { path: FieldPath::root(attr) }]),
                );
            }
        }
    }
}

/// HiSparse's rules on speculative decoding (hisparse_hook.py:117-126), for
/// a launch that speculates with `steps` steps and `topk`.
fn speculative(r: &Resolution<'_>, steps: i64, topk: i64, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    // hisparse_hook.py:117-121: `(speculative_eagle_topk or 1) != 1`, so
    // Python reads 0 as 1 and SGLang passes it (2,000-launch differential).
    if topk != 1 && topk != 0 {
        // With topk 1 the draft tokens become steps + 1 (speculative_hook.py:1255-1266),
        // and HiSparse takes 2-4 (hisparse_coordinator.py:178-181): at most 3 steps.
        // NGRAM's topk is --speculative-ngram-max-bfs-breadth, whatever
        // --speculative-eagle-topk says (speculative_hook.py:1309-1313).
        let ngram = a.speculative_algorithm() == Some("NGRAM");
        let topk_flag = if ngram {
            "speculative_ngram_max_bfs_breadth"
        } else {
            "speculative_eagle_topk"
        };
        let mut ops = vec![set(topk_flag, json!(1))];
        if steps > 3 && !ngram {
            ops.push(set("speculative_num_steps", json!(3)));
        }
        d.push(
            err(Code::SpeculativeEagleTopkNotOne, "speculative_eagle_topk", "The minimal HiSparse spec integration supports linear speculation only; use --speculative-eagle-topk 1.")
                .given(&json!(topk))
                .allowed("1")
                .fix(ops),
        );
    }
    // hisparse_hook.py:122-126.
    // It reads the resolved flag: SGLang turns adaptive off where it cannot run.
    if a.adaptive_on() {
        // Without adaptive, none of steps / topk / draft tokens given is
        // (5, 4, 8) on Llama and Grok (speculative_hook.py:1430-1461): the
        // fix gives HiSparse's linear (3, 1, 4) with it.
        let mut ops = vec![set("speculative_adaptive", json!(false))];
        if a.speculative_num_steps.is_none()
            && a.speculative_eagle_topk.is_none()
            && a.speculative_num_draft_tokens.is_none()
        {
            ops.extend([
                set("speculative_num_steps", json!(3)),
                set("speculative_eagle_topk", json!(1)),
                set("speculative_num_draft_tokens", json!(4)),
            ]);
        }
        d.push(err(Code::SpeculativeAdaptiveWithHisparse, "speculative_adaptive", "HiSparse speculative decoding uses statically sized swap state; --speculative-adaptive is not supported.").given(&json!(true)).fix(ops));
    }
}

/// S2 rules that hold with or without HiSparse.
pub(crate) fn check_always(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    // validation_hook.py:240-246 (AssertionError), with or without HiSparse; hit
    // because the DSA page is 64 (DeepSeek-V4's 256).
    // Attention DP divides it first (parallel_hook.py:327-332).
    // SGLang's default, by GPU memory (memory_hook.py:88-184), is divided too
    // (issue 23 defect 5): only under attention DP can it miss the page.
    let (page, dp) = (r.page(), r.attn_dp_fixed()); // the layout its fix gives
    let chunked = a
        .chunked_prefill_size
        .or_else(|| (dp > 1).then(|| default_chunked_prefill_size(r)));
    if let Some(given) = chunked {
        let c = if given > 0 { given / dp } else { given };
        if c > 0 && a.pd_mode() != "decode" && c % page != 0 {
            let fixed = (c / page).max(1).saturating_mul(page).saturating_mul(dp);
            let default = if a.chunked_prefill_size.is_none() {
                format!(" (not given: SGLang's default for this GPU, {given}, is divided by attn_dp_size {dp} to {c})")
            } else {
                String::new()
            };
            let e = err(
                Code::ChunkedPrefillNotPageMultiple,
                "chunked_prefill_size",
                "chunked_prefill_size must be divisible by page_size",
            );
            let e = if default.is_empty() {
                e.given(&json!(given))
            } else {
                e
            };
            d.push(
                e.allowed(if dp > 1 {
                    format!("a multiple of page_size {page} x attn_dp_size {dp}, or -1 to disable chunked prefill{default}")
                } else {
                    format!("a multiple of page_size {page}, or -1 to disable chunked prefill")
                })
                .fix(vec![set("chunked_prefill_size", json!(fixed))]),
            );
        }
    }
}

/// SGLang's default `chunked_prefill_size` for the GPU's memory
/// (`_handle_gpu_memory_settings`, arg_groups/memory_hook.py:88-184): 2048
/// below 20 GiB, 4096 below 60, 8192 below 160 (H100, H200), 16384 above
/// (B200); an H200 when the GPU is not known.
pub(crate) fn default_chunked_prefill_size(r: &Resolution<'_>) -> i64 {
    let gib = r
        .machine
        .gpu_memory_gib
        .or(r.machine.gpu.map(|g| g.memory_gib))
        .unwrap_or(141.0);
    match gib * 1024.0 {
        m if m < 20.0 * 1024.0 => 2048,
        m if m < 60.0 * 1024.0 => 4096,
        m if m < 160.0 * 1024.0 => 8192,
        _ => 16384,
    }
}
