//! SGLang 0.5.23's `ServerArgs` as hisparse_rs reads it: the attributes the
//! HiSparse rules read, by SGLang's own names (srt/arg_groups/fields/*.py),
//! with values as SGLang's argparse produces them. `None` (or absent) means not
//! given: SGLang's default applies. Every other attribute is kept in `other`
//! and listed as not read.
//!
//! The CLI converts an argv into this JSON object; Python passes a dict.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// SGLang `ServerArgs` attributes (see the module docs). Field docs give the
/// flag and SGLang's default (file in `srt/arg_groups/fields/`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SglangArgs {
    /// `--model-path`: a local config.json, a model directory, or a Hugging
    /// Face id read from the local cache (as vLLM's `--model`, model/hub.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_path: Option<String>,
    /// `--revision` of a model id (model.py:122; default `main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// `--tp-size` / `--tp` (parallel.py:45; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp_size: Option<i64>,
    /// `--dp-size` / `--dp` (parallel.py:73; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_size: Option<i64>,
    /// `--ep-size` / `--ep` (parallel.py:281; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep_size: Option<i64>,
    /// `--pp-size` (parallel.py:59; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp_size: Option<i64>,
    /// `--dcp-size` (parallel.py:52; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcp_size: Option<i64>,
    /// `--moe-dense-tp-size` (parallel.py; default None): None, 1 or tp_size
    /// (arg_groups/validation_hook.py:207-211).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_dense_tp_size: Option<i64>,
    /// `--base-gpu-id` (default 0; must be >= 0, validation_hook.py:204). Not
    /// yet in the node GPU count (`gpus_per_node_exceeded` takes 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_gpu_id: Option<i64>,
    /// `--gpu-id-step` (default 1; must be >= 1, validation_hook.py:205). Not
    /// yet in the node GPU count (`gpus_per_node_exceeded` takes 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_id_step: Option<i64>,
    /// `--served-model-name` (default the model path, serving_hook.py:642-647;
    /// no ':' unless an s3/gs/az URI, validation_hook.py:213-219).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_model_name: Option<String>,
    /// Attention data parallelism (parallel.py:194; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_dp_attention: Option<bool>,
    /// `--nnodes` (parallel.py:43; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nnodes: Option<i64>,
    /// `--enable-hisparse` (memory.py:244; store_true, default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_hisparse: Option<bool>,
    /// `--hisparse-config` / `--hierarchical-sparse-attention-extra-config`
    /// (memory.py:245): the JSON text as given (SGLang stores it unparsed), or
    /// an already parsed object from Python.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hisparse_config: Option<Value>,
    /// `--page-size` (schedule.py:143; resolved: 64 x index_kpool for DSA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i64>,
    /// `--kv-cache-dtype` (model.py:197; default `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtype: Option<String>,
    /// `--dsa-prefill-backend` (exec_.py:299; resolved per dtype).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsa_prefill_backend: Option<String>,
    /// `--dsa-decode-backend` (exec_.py:341; resolved per dtype).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsa_decode_backend: Option<String>,
    /// `--attention-backend` (exec_.py:207; `dsa` for DSA models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_backend: Option<String>,
    /// `--disable-radix-cache` (memory.py:64; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_radix_cache: Option<bool>,
    /// `--disaggregation-mode`: `null`, `prefill` or `decode` (disagg.py:55).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation_mode: Option<String>,
    /// `--disaggregation-transfer-backend` (disagg.py:65; default `mooncake`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation_transfer_backend: Option<String>,
    /// `--disaggregation-decode-enable-radix-cache` (disagg.py:88; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation_decode_enable_radix_cache: Option<bool>,
    /// `--disaggregation-decode-allocation-policy`: `early` or `prefill_complete` (disagg.py:59).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation_decode_allocation_policy: Option<String>,
    /// `--disaggregation-decode-host-receive-threshold`, 0..1 (disagg.py:182; default 1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation_decode_host_receive_threshold: Option<f64>,
    /// `--disaggregation-decode-extra-slots`: request slots a P/D decode
    /// server reserves for in-transfer requests (default resolved by
    /// arg_groups/pd_disaggregation_hook.py:129-143).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation_decode_extra_slots: Option<i64>,
    /// `--enable-hierarchical-cache` (memory.py:98; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_hierarchical_cache: Option<bool>,
    /// `--enable-kv-cache-sharding` (parallel.py:184; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_kv_cache_sharding: Option<bool>,
    /// `--prefill-only-disable-kv-cache` (schedule.py:185; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_only_disable_kv_cache: Option<bool>,
    /// `--is-embedding` (store_true, default false): what
    /// `--prefill-only-disable-kv-cache` needs (arg_groups/kv_cache_hook.py:880).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_embedding: Option<bool>,
    /// `--enable-mixed-chunk` (schedule.py:208; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_mixed_chunk: Option<bool>,
    /// `--chunked-prefill-size` (schedule.py:52; resolved from the GPU; <= 0 disables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunked_prefill_size: Option<i64>,
    /// `--max-running-requests` (schedule.py:31; resolved from memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running_requests: Option<i64>,
    /// `--mem-fraction-static` (schedule.py:27; resolved from the GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fraction_static: Option<f64>,
    /// `--max-total-tokens` (schedule.py; caps the device KV slots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_tokens: Option<i64>,
    /// `--context-length` (model.py:110; default the model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<i64>,
    /// `--speculative-algorithm` (spec.py:31; default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_algorithm: Option<String>,
    /// `--speculative-num-draft-tokens` (spec.py:66).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_num_draft_tokens: Option<i64>,
    /// `--speculative-eagle-topk` (spec.py:62).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_eagle_topk: Option<i64>,
    /// `--speculative-num-steps` (spec.py:58).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_num_steps: Option<i64>,
    /// `--speculative-adaptive` (spec.py:237; default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_adaptive: Option<bool>,
    /// `--device` (device.py:24; default: detected, `cuda` here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// `--attn-dp-size` / `--attention-data-parallel-size`: the attention-DP
    /// width (parallel.py; default 1; `--dp-size N --enable-dp-attention` is
    /// turned into it, arg_groups/parallel_hook.py:39-60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_dp_size: Option<i64>,
    /// `--speculative-ngram-max-bfs-breadth` (spec.py:256; default 10): NGRAM's
    /// `speculative_eagle_topk` (arg_groups/speculative_hook.py:1310-1314).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_ngram_max_bfs_breadth: Option<i64>,
    /// Every other `ServerArgs` attribute given: accepted, not read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl SglangArgs {
    /// From a JSON object of `ServerArgs` attributes. Errors: not an object,
    /// or a read attribute of the wrong JSON type (`"tp_size": "8"`).
    pub fn from_json(value: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(value)
    }

    /// [`SglangArgs::from_json`] with an error that names the attribute, what
    /// it takes and what was given, for users: `Err(ArgsError::Type)` for a
    /// wrong JSON type (`tp_size: "8"`), `Err(ArgsError::Bound)` for a number
    /// the check cannot hold (a float NaN or infinity, spelled `"nan"`/`"inf"`
    /// as [`crate::pytext::py_float_json`] does, or an integer beyond i64).
    pub fn from_json_explained(value: Value) -> Result<Self, ArgsError> {
        let err = match Self::from_json(value.clone()) {
            Ok(a) => return Ok(a),
            Err(e) => e,
        };
        let Value::Object(map) = value else {
            return Err(ArgsError::Type(format!(
                "SGLang server arguments must be an object of ServerArgs attributes, got {}",
                crate::words::kind(&value)
            )));
        };
        // The first attribute that fails alone is the one to name.
        for (key, v) in &map {
            let alone = Value::Object(Map::from_iter([(key.clone(), v.clone())]));
            if Self::from_json(alone).is_ok() {
                continue;
            }
            let takes = |probe: Value| {
                Self::from_json(Value::Object(Map::from_iter([(key.clone(), probe)]))).is_ok()
            };
            let (kind, sample) = if takes(Value::from(1.5)) {
                ("a float", "0.85")
            } else if takes(Value::from(1)) {
                ("an int", "8")
            } else if takes(Value::from(true)) {
                ("a bool", "True")
            } else {
                ("a str", "'decode'")
            };
            let non_finite = matches!(v.as_str(), Some("nan" | "inf" | "-inf"));
            let beyond_i64 = v.as_u64().is_some()
                || v.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() >= 9.2e18);
            return Err(if kind == "a float" && non_finite {
                ArgsError::Bound(format!(
                    "{key} is {v_}: the check reads {key} only as a finite float (e.g. {sample})",
                    v_ = v.as_str().unwrap_or_default()
                ))
            } else if kind == "an int" && beyond_i64 {
                ArgsError::Bound(format!(
                    "{key} is {v}: beyond the 64-bit integers the check reads (-2**63 ..= 2**63 - 1)"
                ))
            } else {
                ArgsError::Type(format!(
                    "{key} must be {kind} (as SGLang's argparse gives it, e.g. {sample}), got {}",
                    py_typed(v)
                ))
            });
        }
        Err(ArgsError::Type(format!(
            "invalid SGLang server arguments: {err}"
        )))
    }

    /// The JSON object form (what fixes edit).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("SglangArgs always serializes")
    }

    /// The attributes given that hisparse_rs does not read, sorted by name.
    pub fn not_read(&self) -> Vec<String> {
        self.other
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub(crate) fn hisparse_on(&self) -> bool {
        self.enable_hisparse == Some(true)
    }

    /// The attention-DP width as given and the attribute it comes from:
    /// `attn_dp_size`, or `dp_size` under `--enable-dp-attention` while
    /// attn_dp_size is 1 (arg_groups/parallel_hook.py:39-60).
    pub(crate) fn attn_dp_given(&self) -> (i64, &'static str) {
        let attn = self.attn_dp_size.unwrap_or(1);
        if self.enable_dp_attention == Some(true) && attn == 1 {
            (self.dp_size.unwrap_or(1), "dp_size")
        } else {
            (attn, "attn_dp_size")
        }
    }

    /// `disaggregation_mode`, `null` when not given.
    pub(crate) fn pd_mode(&self) -> &str {
        self.disaggregation_mode.as_deref().unwrap_or("null")
    }

    /// Speculation on: an algorithm SGLang knows other than `NONE`
    /// (hisparse_hook.py:114-117); an unknown name is refused at resolve
    /// (`speculative_algorithm_unknown`) and no speculative rule reads it.
    pub(crate) fn speculation_on(&self) -> bool {
        self.speculative_algorithm().is_some_and(|a| a != "NONE")
    }

    /// `--speculative-adaptive` as SGLang keeps it: on only for EAGLE / EAGLE3
    /// with `speculative_eagle_topk` unset or 1 and no attention DP;
    /// `_maybe_disable_adaptive` turns it off otherwise, with a warning
    /// (arg_groups/speculative_hook.py:1374-1389,
    /// speculative/adaptive_spec_params.py:56-100).
    pub(crate) fn adaptive_on(&self) -> bool {
        self.speculative_adaptive == Some(true)
            && matches!(self.speculative_algorithm(), Some("EAGLE" | "EAGLE3"))
            && matches!(self.speculative_eagle_topk, None | Some(1))
            && self.attn_dp_given().0 <= 1
    }

    /// `--speculative-algorithm` as SGLang resolves it: upper-cased, `NEXTN`
    /// as `EAGLE` (arg_groups/speculative_hook.py:136-160, :81-118); None when
    /// not given or not a name `SpeculativeAlgorithm.from_string` knows
    /// (speculative/spec_info.py:36-65).
    pub(crate) fn speculative_algorithm(&self) -> Option<&'static str> {
        let name = self.speculative_algorithm.as_deref()?.to_uppercase();
        match name.as_str() {
            "NEXTN" => Some("EAGLE"),
            n => SPECULATIVE_ALGORITHMS.iter().find(|a| **a == n).copied(),
        }
    }
}

/// The builtin `SpeculativeAlgorithm` members (speculative/spec_info.py:36-45);
/// `NEXTN` is an alias of `EAGLE` (spec_registry.py:183).
pub const SPECULATIVE_ALGORITHMS: &[&str] = &[
    "DFLASH",
    "UNO",
    "DSPARK",
    "EAGLE",
    "EAGLE3",
    "FROZEN_KV_MTP",
    "STANDALONE",
    "NGRAM",
    "NONE",
];

/// A value as a Python user reads it in a TypeError: `str '8'`, `float 8.0`, `bool True`.
fn py_typed(v: &Value) -> String {
    match v {
        Value::Null => "None".to_owned(),
        Value::Bool(b) => format!("bool {}", if *b { "True" } else { "False" }),
        Value::Number(n) if n.is_f64() => format!("float {n}"),
        Value::Number(n) => format!("int {n}"),
        Value::String(s) => format!("str {s:?}"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a dict".to_owned(),
    }
}

/// Why a JSON object is not an [`SglangArgs`] (see [`SglangArgs::from_json_explained`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgsError {
    /// An attribute of the wrong type (Python: TypeError).
    Type(String),
    /// A number beyond what the check reads (Python: ValueError; CLI: exit 2).
    Bound(String),
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgsError::Type(m) | ArgsError::Bound(m) => f.write_str(m),
        }
    }
}

/// The flag of an attribute: `tp_size` -> `--tp-size`.
pub fn flag_name(attr: &str) -> String {
    format!("--{}", attr.replace('_', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_known_and_keeps_other_attributes() {
        let a = SglangArgs::from_json(json!({
            "model_path": "m", "tp_size": 8, "enable_hisparse": true,
            "hisparse_config": "{\"top_k\": 2048}", "port": 30000, "host": null
        }))
        .unwrap();
        assert_eq!(a.tp_size, Some(8));
        assert_eq!(a.hisparse_config, Some(json!("{\"top_k\": 2048}")));
        assert_eq!(a.not_read(), ["port"]);
        assert_eq!(SglangArgs::from_json(a.to_json()).unwrap(), a);
        assert!(SglangArgs::from_json(json!({"tp_size": "8"})).is_err());
        assert_eq!(flag_name("disable_radix_cache"), "--disable-radix-cache");
        let e = SglangArgs::from_json_explained(json!({"port": 1, "tp_size": "8"})).unwrap_err();
        assert_eq!(
            e,
            ArgsError::Type(
                "tp_size must be an int (as SGLang's argparse gives it, e.g. 8), got str \"8\""
                    .to_owned()
            )
        );
        let e = SglangArgs::from_json_explained(json!({"mem_fraction_static": "nan"})).unwrap_err();
        assert!(
            matches!(&e, ArgsError::Bound(m) if m.starts_with("mem_fraction_static is nan: ")),
            "{e}"
        );
        let e = SglangArgs::from_json_explained(json!({"tp_size": 9223372036854775808u64}))
            .unwrap_err();
        assert!(
            matches!(&e, ArgsError::Bound(m) if m.contains("beyond the 64-bit")),
            "{e}"
        );
        let e = SglangArgs::from_json_explained(json!({"enable_hisparse": 1})).unwrap_err();
        assert!(
            matches!(&e, ArgsError::Type(m) if m.starts_with("enable_hisparse must be a bool")),
            "{e}"
        );
    }
}
