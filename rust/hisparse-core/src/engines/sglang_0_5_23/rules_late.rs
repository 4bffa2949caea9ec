//! Stages S3-S7: what SGLang 0.5.23 finds only after the weights have loaded
//! (`--hisparse-config` parsed, pool and allocator built, coordinator started,
//! first swap-in, requests), plus the int16 LRU bound it never checks.

use super::diagnostics::SglangDiagnostic;
use super::hisparse_config::{self as hc, key_path};
use super::resolution::Resolution;
use super::stages::SglangStage::{self, *};
use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::path::FieldPath;
use serde_json::{json, Value};

/// Largest `device_buffer_size` the int16 LRU slot list holds
/// (hisparse_coordinator.py:690-697 `torch.arange(device_buffer_size, dtype=torch.int16)`).
pub const MAX_DEVICE_BUFFER_SIZE: i64 = i16::MAX as i64;
/// Draft tokens the speculative swap supports (hisparse_coordinator.py:178-182).
pub const SPEC_DRAFT_TOKENS: std::ops::RangeInclusive<i64> = 2..=4;
/// Smallest model `index_topk` with speculation (hisparse_coordinator.py:178).
pub const SPEC_MIN_TOP_K: i64 = 1024;
/// Largest draft tokens x top_k (hisparse_coordinator.py:183-185).
pub const SPEC_MAX_OCCURRENCES: i64 = 8192;

fn set_key(key: &str, value: Value) -> FixOp {
    FixOp::Set {
        path: key_path(key),
        value,
    }
}
fn set(attr: &str, value: Value) -> FixOp {
    FixOp::Set {
        path: FieldPath::root(attr),
        value,
    }
}
fn err(code: Code, path: FieldPath, msg: impl Into<String>, stage: SglangStage) -> Diagnostic {
    Diagnostic::error(code, path, msg).stage(stage)
}

/// The `device_buffer_size` every buffer rule accepts, from the user's value:
/// at least `top_k`, the model's `index_topk` and (with speculation) the
/// request slots, a multiple of the page, at most 32767 (rounded down to the
/// page there). None when no such value exists.
pub(crate) fn good_device_buffer(r: &Resolution<'_>) -> Option<i64> {
    let page = u64::try_from(r.page()).ok()?;
    let mut low = r
        .top_k_int()
        .unwrap_or(0)
        .max(r.index_topk.unwrap_or(0))
        .max(1);
    if r.speculative.is_some() {
        low = low.max(r.request_slots().unwrap_or(0));
    }
    let round = |x: i64| {
        u64::try_from(x)
            .ok()
            .map(|x| crate::sizes::round_up(x, page))
            .and_then(|x| i64::try_from(x).ok())
    };
    let want = round(low.max(r.device_buffer().unwrap_or(0)))?;
    let cap = MAX_DEVICE_BUFFER_SIZE / r.page() * r.page();
    if want <= cap {
        Some(want)
    } else if round(low)? <= cap {
        Some(cap) // the user's buffer was over the int16 bound: the largest that fits
    } else {
        None
    }
}

fn buffer_fix(r: &Resolution<'_>) -> Vec<FixOp> {
    good_device_buffer(r).map_or_else(Vec::new, |v| vec![set_key("device_buffer_size", json!(v))])
}

pub(crate) fn check(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    // An unreadable config (r.config_ok false) has its own error, whose fix
    // removes it: the rules below then run on SGLang's defaults (the config is
    // empty), so that the errors the fixed launch would meet are reported now.
    // S3 (factory.py:79-95), with Python's semantics, is rules_config's (resolve.rs runs it first).
    let top_k = r.top_k_int().unwrap_or(hc::DEFAULT_TOP_K);
    let Some(dbs) = r.device_buffer() else {
        late_config(r, d);
        // The speculative swap's rules need no buffer: reported now, so that
        // fixing the buffer reveals nothing (2,000-launch differential).
        if let Some((steps, _, draft)) = &r.speculative {
            spec_on_xpu(r, d);
            spec_draft_tokens(r, *steps, draft.value, top_k, d);
        }
        return;
    };
    late_config(r, d);
    buffer_not_page_multiple(r, dbs, d);
    // S5: hisparse_coordinator.py:178-188 (HiSparseSpecSwapManager); top_k there is the model's index_topk.
    if let Some((steps, _, draft)) = &r.speculative {
        spec_on_xpu(r, d);
        spec_draft_tokens(r, *steps, draft.value, top_k, d);
        spec_request_slots(r, dbs, d);
    }
    buffer_below_index_topk(r, top_k, dbs, d);
    buffer_over_int16(r, dbs, d);
    draft_kv_backend(r, d);
}

/// S5 (allocator/hisparse.py:82-91, configure_spec_scratch), with or without
/// speculation: device_buffer_size a non-negative multiple of the page.
fn buffer_not_page_multiple(r: &Resolution<'_>, dbs: i64, d: &mut Vec<Diagnostic>) {
    let page = r.page();
    if dbs % page != 0 || dbs < 0 {
        d.push(
            err(Code::DeviceBufferSizeNotPageMultiple, key_path("device_buffer_size"), format!("HiSparse spec scratch and device buffer sizes must be non-negative multiples of page_size={page}."), CoordinatorInit)
                .given(&json!(dbs))
                .allowed(format!("a multiple of page_size {page} (64 x index_kpool for DSA)"))
                .fix(buffer_fix(r)),
        );
    }
}

/// S5 (managers/hisparse_coordinator.py:174-175): no speculative swap on XPU.
fn spec_on_xpu(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    if r.args.device.as_deref() == Some("xpu") {
        d.push(
            err(
                Code::SpeculativeSwapOnXpu,
                FieldPath::root("device"),
                "HiSparse speculative swap is unsupported on XPU.",
                CoordinatorInit,
            )
            .given(&json!("xpu"))
            .allowed("cuda (or no speculation)")
            .hint("run HiSparse with speculative decoding on CUDA GPUs, or drop --speculative-algorithm on XPU"),
        );
    }
}

/// S5 (managers/hisparse_coordinator.py:178-184): 2-4 draft tokens, a model
/// index_topk >= 1024, draft tokens x index_topk <= 8192.
fn spec_draft_tokens(r: &Resolution<'_>, steps: i64, n: i64, top_k: i64, d: &mut Vec<Diagnostic>) {
    let model_top_k = r.index_topk.unwrap_or(top_k);
    let draft_fix = |n: i64| {
        vec![
            set("speculative_num_steps", json!(n - 1)),
            set("speculative_num_draft_tokens", json!(n)),
        ]
    };
    if !SPEC_DRAFT_TOKENS.contains(&n) || model_top_k < SPEC_MIN_TOP_K {
        let mut e = err(
            Code::SpeculativeDraftTokensOutOfRange,
            FieldPath::root("speculative_num_draft_tokens"),
            "HiSparse spec swap requires 2-4 draft tokens and top_k >= 1024.",
            CoordinatorInit,
        )
        .given(&json!(n))
        .allowed(format!(
            "2 to 4 draft tokens (speculative_num_steps {steps} + 1 with eagle_topk 1)"
        ));
        if model_top_k < SPEC_MIN_TOP_K {
            e.code = Code::SpeculativeIndexTopkTooSmall;
            e.path = FieldPath::root("speculative_algorithm");
            e.given = Some(json!(model_top_k));
            e.allowed = Some("a model with index_topk >= 1024, or no speculation".to_owned());
            e.hint = Some(format!("drop --speculative-algorithm: HiSparse speculation needs index_topk >= 1024 and this model's is {model_top_k}"));
        } else {
            let fixed = n.clamp(2, (SPEC_MAX_OCCURRENCES / model_top_k.max(1)).clamp(2, 4));
            e = e.fix(draft_fix(fixed));
        }
        d.push(e);
    } else if n.saturating_mul(model_top_k) > SPEC_MAX_OCCURRENCES {
        let fixed = SPEC_MAX_OCCURRENCES / model_top_k.max(1);
        let mut e = err(
            Code::SpeculativeWorkspaceTooLarge,
            FieldPath::root("speculative_num_draft_tokens"),
            "HiSparse spec swap supports at most 8192 occurrences.",
            CoordinatorInit,
        )
        .given(&json!(n))
        .allowed(format!("draft tokens x index_topk {model_top_k} <= 8192"));
        if fixed >= 2 {
            e = e.fix(draft_fix(fixed));
        }
        d.push(e);
    }
}

/// S5 (managers/hisparse_coordinator.py:185-188): the request slots fit the device buffer.
fn spec_request_slots(r: &Resolution<'_>, dbs: i64, d: &mut Vec<Diagnostic>) {
    if let Some(slots) = r.request_slots() {
        if slots > dbs {
            let e = err(
                    Code::RequestSlotsOverDeviceBuffer,
                    FieldPath::root("max_running_requests"),
                    "HiSparse spec request capacity must not exceed device_buffer_size.",
                    CoordinatorInit,
                )
                .given(&json!(r.args.max_running_requests.unwrap_or(super::resolution::SPEC_DEFAULT_MAX_RUNNING_REQUESTS)))
                .allowed(format!(
                    "request slots {slots} (per attention-DP worker + 1, plus P/D decode's in-transfer slots) <= device_buffer_size {dbs}"
                ));
            let fix = match (r.args.pd_mode(), r.args.disaggregation_decode_extra_slots) {
                // An explicit --disaggregation-decode-extra-slots: keep the
                // requests given and lower the in-transfer slots to what fits
                // (slots = per worker + extra + 1).
                ("decode", Some(extra)) => {
                    let fits = extra.saturating_sub(slots.saturating_sub(dbs));
                    (fits >= 0).then(|| vec![set("disaggregation_decode_extra_slots", json!(fits))])
                }
                _ => most_running_requests(r, dbs)
                    .map(|m| vec![set("max_running_requests", json!(m))]),
            };
            d.push(match fix {
                Some(ops) => e.fix(ops),
                None => e,
            });
        }
    }
}

/// S6: the swap-in kernel asserts device_buffer_size >= the model's index_topk
/// (kernels/ops/kvcache/hisparse.py:301-303; the JSON top_k is not what runs).
/// With speculation the spec kernel runs instead, with no such assert
/// (kernels/ops/kvcache/hisparse.py:71-168, FACTS_sglang.md #16): SGLang starts.
fn buffer_below_index_topk(r: &Resolution<'_>, top_k: i64, dbs: i64, d: &mut Vec<Diagnostic>) {
    if let Some(k) = r.index_topk {
        if dbs < k {
            let (stage, what) = if r.speculative.is_some() {
                (SglangStage::Never, format!("with speculation SGLang's spec swap-in kernel does not check it and starts, with a hot buffer smaller than the {k} rows the indexer selects"))
            } else {
                (FirstDecode, format!("SGLang's swap-in kernel asserts hot_buffer_size ({dbs}) must be >= num_top_k ({k}) at the first decode (kernels/ops/kvcache/hisparse.py:301-303)"))
            };
            d.push(
                err(Code::DeviceBufferSizeBelowIndexTopk, key_path("device_buffer_size"), format!("device_buffer_size ({dbs}) is smaller than the model's index_topk ({k}): {what}; the JSON top_k ({top_k}) is replaced by index_topk at run time (model_runner.py:1036-1040)"), stage)
                    .given(&json!(dbs))
                    .allowed(format!(">= index_topk {k}"))
                    .fix(buffer_fix(r)),
            );
        }
    }
}

/// Never checked: the LRU slot list is int16 and wraps (hisparse_coordinator.py:690-697).
fn buffer_over_int16(r: &Resolution<'_>, dbs: i64, d: &mut Vec<Diagnostic>) {
    if dbs > MAX_DEVICE_BUFFER_SIZE {
        // With speculation the spec kernel's JIT build static_asserts
        // hot_buffer_size <= 32768 (kernels/jit/csrc/kvcacheio/hisparse_spec.cuh:73-74).
        let (stage, tail) = if r.speculative.is_some() && dbs > 32768 {
            (FirstDecode, "; with speculation the first swap-in fails to compile: \"speculative CLOCK cursor requires hot_buffer_size <= 32768.\" (kernels/jit/csrc/kvcacheio/hisparse_spec.cuh:73-74)")
        } else {
            (
                SglangStage::Never,
                ": SGLang starts and the slot ids wrap silently",
            )
        };
        d.push(
            err(Code::DeviceBufferSizeOverInt16, key_path("device_buffer_size"), format!("device_buffer_size {dbs} does not fit the coordinator's int16 LRU slot list (torch.arange(device_buffer_size, dtype=torch.int16), managers/hisparse_coordinator.py:690-697){tail}"), stage)
                .given(&json!(dbs))
                .allowed(format!("at most {MAX_DEVICE_BUFFER_SIZE}"))
                .fix(buffer_fix(r)),
        );
    }
}

/// S7: P/D decode with a draft KV pool needs Mooncake (disaggregation/decode.py:1787-1813).
fn draft_kv_backend(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    if r.speculative.is_some() && r.args.pd_mode() == "decode" {
        let backend = r
            .args
            .disaggregation_transfer_backend
            .as_deref()
            .unwrap_or("mooncake");
        // mooncake_tcp is rewritten to mooncake (pd_disaggregation_hook.py:30-36); fake moves no KV.
        if !matches!(backend, "mooncake" | "mooncake_tcp" | "fake") {
            d.push(
                err(
                    Code::DraftKvTransferBackendUnsupported,
                    FieldPath::root("disaggregation_transfer_backend"),
                    "HiSparse device-only PD transfer currently requires the Mooncake backend",
                    Request,
                )
                .given(&json!(backend))
                .allowed("mooncake with HiSparse and a speculative draft model on P/D decode")
                .fix(vec![set(
                    "disaggregation_transfer_backend",
                    json!("mooncake"),
                )]),
            );
        }
    }
}

/// The largest `--max-running-requests` whose request slots fit `dbs`
/// (see [`Resolution::request_slots`]), or None.
fn most_running_requests(r: &Resolution<'_>, dbs: i64) -> Option<i64> {
    // Per worker of the layout the report's fixes give.
    let attn_dp = r.attn_dp_fixed();
    let room = dbs.checked_sub(1)?;
    // Per worker p: p + 1 slots, or 3p + 1 on P/D decode for p <= 32.
    let p = if room > 32 || r.args.pd_mode() != "decode" {
        room
    } else {
        room / 3
    };
    (p >= 1).then(|| p.saturating_mul(attn_dp))
}

/// `host_to_device_ratio` (S3-S4; `swap_in_block_size` is rules_config's).
fn late_config(r: &Resolution<'_>, d: &mut Vec<Diagnostic>) {
    // NaN, infinite or beyond 64 bits: rules_config's (their first use is elsewhere).
    match &r.py.host_to_device_ratio {
        crate::pyvalue::PyValue::Float(f) if !f.is_finite() => return,
        crate::pyvalue::PyValue::Int(i) if i.to_i64().is_none() => return,
        _ => {}
    }
    let ratio = &r.host_to_device_ratio.value;
    match hc::as_int(ratio) {
        // `true` is 1 in Python and starts (FACTS_sglang.md #3): a warning.
        None if ratio == &Value::Bool(true) => d.push(
            Diagnostic::warning(Code::HostToDeviceRatioNotInt, key_path("host_to_device_ratio"), "host_to_device_ratio true is read as 1 by SGLang (Python's bool is an int): a host pool as large as the device pool")
                .stage(SglangStage::Never)
                .given(ratio)
                .allowed("an integer >= 1")
                .fix(vec![set_key("host_to_device_ratio", json!(1))]),
        ),
        // null or a string: first used at S3, in the indexer cell size
        // (model_executor/pool_configurator.py:633-635, FACTS_sglang.md #3).
        None if ratio.is_null() || ratio.is_string() || ratio.is_array() || ratio.is_object() => d.push(
            err(Code::HisparseConfigInvalidType, key_path("host_to_device_ratio"), format!("host_to_device_ratio must be an integer; SGLang fails on {} when it sizes the indexer cells after the weights load (int(... * indexer_ratio), model_executor/pool_configurator.py:633-635)", r.py.host_to_device_ratio.repr()), AfterWeightsLoad)
                .given(ratio)
                .allowed("an integer >= 1")
                .fix(vec![set_key("host_to_device_ratio", json!(hc::DEFAULT_HOST_TO_DEVICE_RATIO))]),
        ),
        // A float passes S3 and fails in torch.zeros when the allocator is built
        // (mem_cache/allocator/hisparse.py:63-72); `false` is 0 (the zero rule's).
        None if ratio == &Value::Bool(false) => d.push(
            err(Code::HostToDeviceRatioZero, key_path("host_to_device_ratio"), "host_to_device_ratio false is 0 to SGLang: the host pool has zero capacity; SGLang starts with no error and cannot hold a request's KV", SglangStage::Never)
                .given(ratio)
                .allowed("an integer >= 1 (default 2)")
                .fix(vec![set_key("host_to_device_ratio", json!(hc::DEFAULT_HOST_TO_DEVICE_RATIO))]),
        ),
        None => {
            let fixed = ratio
                .as_f64()
                .filter(|_| !ratio.is_boolean())
                // Rounded, within the ratios the planner searches (1 to 256):
                // 1e300 rounds to no pool SGLang can size (OverflowError).
                .map_or(hc::DEFAULT_HOST_TO_DEVICE_RATIO, |f| {
                    (f.round() as i64).clamp(1, 256)
                });
            d.push(
                err(Code::HostToDeviceRatioNotInt, key_path("host_to_device_ratio"), format!("host_to_device_ratio must be an integer: SGLang passes {} into torch.zeros when it builds the HiSparse allocator and fails there (zeros(): argument 'size' (position 1) must be tuple of ints, not float; mem_cache/allocator/hisparse.py:63-72), after the weights load", r.py.host_to_device_ratio.repr()), PoolBuild)
                    .given(ratio)
                    .allowed("an integer >= 1")
                    .fix(vec![set_key("host_to_device_ratio", json!(fixed))]),
            );
        }
        Some(n) if n < 1 => {
            let (msg, stage) = if n == 0 {
                ("host_to_device_ratio 0 gives the host pool zero capacity; SGLang starts with no error and cannot hold a request's KV".to_owned(), SglangStage::Never)
            } else {
                (format!("host_to_device_ratio {n} gives the host pool a negative size; SGLang fails when it builds the pool"), PoolBuild)
            };
            d.push(
                err(
                    Code::HostToDeviceRatioZero,
                    key_path("host_to_device_ratio"),
                    msg,
                    stage,
                )
                .given(ratio)
                .allowed("an integer >= 1 (default 2)")
                .fix(vec![set_key(
                    "host_to_device_ratio",
                    json!(hc::DEFAULT_HOST_TO_DEVICE_RATIO),
                )]),
            );
        }
        Some(_) => {}
    }
}
