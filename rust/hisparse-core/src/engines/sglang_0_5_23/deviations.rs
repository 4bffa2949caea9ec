//! Where hisparse_rs knowingly differs from SGLang 0.5.23: what SGLang does
//! not check and we do. Each is a named code: a warning where SGLang starts
//! and works, an error where it fails later or silently corrupts. The
//! differential test against SGLang's own code accepts a disagreement only
//! when the report carries one of these codes.
//!
//! Besides these, every rule is reported at once where SGLang stops at the
//! first (not a deviation of the verdict: valid or not is the same).

use super::diagnostics::SglangDiagnostic;
use super::resolution::Resolution;
use super::stages::SglangStage::Never;
use crate::diagnostic::{Code, Diagnostic, FixOp, Severity};
use crate::path::FieldPath;
use serde_json::json;

/// One knowing difference from SGLang 0.5.23.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deviation {
    /// The diagnostic our report carries when it applies.
    pub code: Code,
    pub severity: Severity,
    /// What SGLang 0.5.23 does instead, in one sentence, with its source.
    pub sglang: &'static str,
}

const fn dev(code: Code, severity: Severity, sglang: &'static str) -> Deviation {
    Deviation {
        code,
        severity,
        sglang,
    }
}

/// Every knowing difference, by code.
pub const SGLANG_DEVIATIONS: &[Deviation] = &[
    dev(Code::HisparseOutsidePdDecode, Severity::Warning, "starts HiSparse outside P/D decode mode with no warning, though its docs require decode mode (sglang#22970)"),
    dev(Code::DeviceBufferSizeOverInt16, Severity::Error, "never checks the bound: the per-request LRU slot list is int16 and wraps silently (managers/hisparse_coordinator.py:690-697)"),
    dev(Code::DeviceBufferSizeBelowIndexTopk, Severity::Error, "with speculation, starts with device_buffer_size below the model's index_topk: the spec swap-in kernel has no hot_buffer_size >= num_top_k assert (managers/hisparse_coordinator.py:1491-1498 -> kernels/ops/kvcache/hisparse.py:71-168); without speculation this is SGLang's own first_decode assert (:301-303), no deviation"),
    dev(Code::TopKDiffersFromIndexTopk, Severity::Warning, "uses the JSON top_k only for the default buffer and the device_buffer_size >= top_k check, then runs with the model's index_topk (model_executor/model_runner.py:1039-1041)"),
    dev(Code::HostToDeviceRatioNotInt, Severity::Error, "accepts a float ratio in the config and fails in a tensor constructor when it builds the host pool, after the weights load"),
    dev(Code::HostToDeviceRatioZero, Severity::Error, "accepts ratio 0: the host pool has zero capacity and no error is raised (a negative ratio fails at the pool build)"),
    dev(Code::HisparseConfigUnknownKey, Severity::Warning, "keeps any other key silently in sparse_extra_config (mem_cache/sparsity/factory.py:104-115): a misspelt device_buffer_size is a default one"),
    dev(Code::PageSizeOverridden, Severity::Warning, "replaces --page-size by 64 x index_kpool for DSA models (model_overrides/deepseek_v2.py:169-171), by 256 for DeepSeek-V4 (model_overrides/deepseek_v4.py:51-60), with only a log line"),
    dev(Code::HostPoolOverRamBudget, Severity::Error, "finds it when each rank pins its host pool, after the weights load: \"Not enough host memory available\" (mem_cache/pool_host/base.py:248-257)"),
    dev(Code::CoordinatorMemoryUnreserved, Severity::Warning, "allocates the coordinator's GPU bookkeeping after sizing the KV pool from --mem-fraction-static, which does not reserve it (managers/hisparse_coordinator.py:637-700): it can run out of GPU memory at start-up"),
    dev(Code::HisparseConfigIgnored, Severity::Warning, "never reads --hisparse-config without --enable-hisparse"),
];

/// The deviation for `code`, if it is one.
pub fn deviation(code: Code) -> Option<&'static Deviation> {
    SGLANG_DEVIATIONS.iter().find(|d| d.code == code)
}

fn warn(code: Code, path: FieldPath, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::warning(code, path, msg).stage(Never)
}

/// Bytes of the coordinator's GPU bookkeeping (its warning, sized with the
/// GPU's memory, is `plan::coordinator_room`) (managers/hisparse_coordinator.py:637-724):
/// `req_to_device_buffer` S x (D + P) x 8, `req_to_host_pool` S x (ctx + P) x 8,
/// token ids and locations 2 x L x S x (D + P) x 4, the int16 LRU L x S x D x 2,
/// raw top-k indices S x top_k x 4. S request slots, D device_buffer_size, P page size.
pub fn coordinator_bytes(
    layers: u64,
    slots: u64,
    d: u64,
    page: u64,
    context: u64,
    top_k: u64,
) -> u64 {
    let padded = d.saturating_add(page);
    let per_layer = slots
        .saturating_mul(padded)
        .saturating_mul(8)
        .saturating_add(slots.saturating_mul(d).saturating_mul(2));
    layers
        .saturating_mul(per_layer)
        .saturating_add(slots.saturating_mul(padded).saturating_mul(8))
        .saturating_add(
            slots
                .saturating_mul(context.saturating_add(page))
                .saturating_mul(8),
        )
        .saturating_add(slots.saturating_mul(top_k).saturating_mul(4))
}

pub(crate) fn check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    let a = r.args;
    if !a.hisparse_on() {
        if a.hisparse_config.as_ref().is_some_and(|v| !v.is_null()) {
            d.push(
                warn(Code::HisparseConfigIgnored, FieldPath::root("hisparse_config"), "--hisparse-config is given without --enable-hisparse: SGLang never reads it and runs without HiSparse")
                    .hint("add --enable-hisparse to use it, or drop --hisparse-config"),
            );
        }
        return;
    }
    if a.pd_mode() != "decode" {
        d.push(
            warn(Code::HisparseOutsidePdDecode, FieldPath::root("disaggregation_mode"), format!("HiSparse runs here in disaggregation_mode {:?}; SGLang's docs require a P/D decode server (--disaggregation-mode decode), and SGLang starts without a warning (sglang#22970)", a.pd_mode()))
                .given(&json!(a.pd_mode()))
                .allowed("decode")
                .hint("run HiSparse on the decode server of a P/D deployment: --disaggregation-mode decode"),
        );
    }
    if r.config_ok {
        for key in r
            .config
            .keys()
            .filter(|k| !super::hisparse_config::KNOWN_KEYS.contains(&k.as_str()))
        {
            let near = super::hisparse_config::KNOWN_KEYS
                .iter()
                .copied()
                .max_by(|x, y| {
                    strsim::jaro_winkler(key, x).total_cmp(&strsim::jaro_winkler(key, y))
                })
                .filter(|k| strsim::jaro_winkler(key, k) > 0.8);
            let mut w = warn(Code::HisparseConfigUnknownKey, super::hisparse_config::key_path(key), format!("hisparse_config key {key:?} is not one SGLang reads; it is kept silently and has no effect (mem_cache/sparsity/factory.py:104-115){}", near.map_or(String::new(), |n| format!(": did you mean {n:?}?"))))
                .allowed(super::hisparse_config::KNOWN_KEYS.join(", "));
            w = w.fix(vec![FixOp::Remove {
                path: super::hisparse_config::key_path(key),
            }]);
            if let Some(n) = near {
                w.hint = Some(format!("did you mean {n:?}? Otherwise remove it"));
            }
            d.push(w);
        }
        if let (Some(t), Some(k)) = (r.top_k_int(), r.index_topk) {
            if r.config.contains_key("top_k") && t != k {
                d.push(
                    warn(Code::TopKDiffersFromIndexTopk, super::hisparse_config::key_path("top_k"), format!("hisparse_config.top_k {t} is not the model's index_topk {k}: SGLang runs with index_topk (model_executor/model_runner.py:1039-1041) and uses top_k only for the default buffer and the device_buffer_size >= top_k check"))
                        .given(&json!(t))
                        .allowed(format!("{k} (the model's index_topk)"))
                        .fix(vec![FixOp::Set { path: super::hisparse_config::key_path("top_k"), value: json!(k) }]),
                );
            }
        }
    }
    if r.is_dsa || r.is_dsv4 {
        if let Some(p) = a.page_size.filter(|&p| p != r.page_size.value) {
            let why = if r.is_dsv4 {
                "for DeepseekV4ForCausalLM (model_overrides/deepseek_v4.py:51-60)".to_owned()
            } else {
                format!("(64 x index_kpool {}) for this DSA model (model_overrides/deepseek_v2.py:169-171)", r.index_kpool)
            };
            d.push(
                warn(
                    Code::PageSizeOverridden,
                    FieldPath::root("page_size"),
                    format!("--page-size {p} is replaced by {} {why}", r.page_size.value),
                )
                .given(&json!(p))
                .allowed(format!("{} or not given", r.page_size.value))
                .fix(vec![FixOp::Remove {
                    path: FieldPath::root("page_size"),
                }]),
            );
        }
    }
    if a.kv_cache_dtype.as_deref().is_none_or(|d| d == "auto")
        && r.machine.gpu.is_none()
        && r.is_dsa
    {
        d.push(
            warn(Code::ComputeCapabilityAssumed, FieldPath::root("kv_cache_dtype"), format!("kv_cache_dtype auto resolves by the GPU: fp8_e4m3 on SM >= 10, bfloat16 below (arg_groups/overrides.py:532-540); without --gpu an H200 (SM 9.0) is assumed, so {}", r.kv_cache_dtype.value))
                .hint("name the GPU with --gpu (e.g. --gpu b200), or set --kv-cache-dtype"),
        );
    }
}
