//! [`ServeArgs`]: a vLLM serve configuration as data, named exactly like
//! vLLM's `EngineArgs` fields. The CLI fills it from flags, Python from
//! keyword arguments, and test vectors from JSON; fixes edit its JSON form.

use crate::diagnostic::{Code, Diagnostic};
use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use crate::path::FieldPath;
use crate::pytext::{json_loads, JsonFlag, JsonSyntax};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The serve configuration to check. `None` means "not given": vLLM's default applies.
///
/// JSON-valued fields (`kv_transfer_config`, ...) hold what the user wrote,
/// unvalidated: either the parsed JSON or the raw flag text (a JSON string),
/// which [`ServeArgs::normalized`] parses. The resolver reports every problem.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeArgs {
    /// `--model`: a local `config.json`, a model directory containing one, or
    /// a Hugging Face model id read from the local cache (never downloaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `--revision`: the branch, tag or commit of a model id (default `main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// `--hf-config-path`: where the model's config is read from instead of
    /// `model` (a local config.json, a directory containing one, or a model id
    /// in the local cache, at `revision`), as vLLM 0.33 reads it
    /// (`ModelConfig.__post_init__`: `get_config(self.hf_config_path or self.model, ...)`,
    /// vllm/config/model.py:680-682; the revision resolved for that repo, :647-652).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_config_path: Option<String>,
    /// The model's HF `config.json` already parsed (instead of `model`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub hf_config: Option<Value>,
    /// `--hf-overrides` JSON, deep-merged over `config.json` (vLLM semantics).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub hf_overrides: Option<Value>,
    /// `--kv-transfer-config` JSON (vLLM `KVTransferConfig`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub kv_transfer_config: Option<Value>,
    /// `--attention-config` JSON (vLLM `AttentionConfig`; holds `hisparse_config`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub attention_config: Option<Value>,
    /// `--speculative-config` JSON (vLLM `SpeculativeConfig`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub speculative_config: Option<Value>,
    /// `--compilation-config` JSON (vLLM `CompilationConfig`; `cudagraph_mode`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub compilation_config: Option<Value>,
    /// `--tensor-parallel-size` / `-tp` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_parallel_size: Option<i64>,
    /// `--pipeline-parallel-size` / `-pp` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_parallel_size: Option<i64>,
    /// `--data-parallel-size` / `-dp` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel_size: Option<i64>,
    /// `--data-parallel-size-local` / `-dpl`: the DP replicas this node runs
    /// (vLLM 0.33 `EngineArgs.data_parallel_size_local`, vllm/engine/arg_utils.py:558,
    /// flag at :1258). 0 ..= `data_parallel_size` (`ParallelConfig`,
    /// vllm/config/parallel.py:150 and :545). Unset: every replica on this node,
    /// or with `--nnodes` an even share (inferred at arg_utils.py:2442). The
    /// host-pool check counts this node's pools from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel_size_local: Option<i64>,
    /// `--decode-context-parallel-size` / `-dcp` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_context_parallel_size: Option<i64>,
    /// `--prefill-context-parallel-size` / `-pcp` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_context_parallel_size: Option<i64>,
    /// `--nnodes` / `-n`: the nodes of the deployment (default 1); TP ranks
    /// share one HiSparse host pool only when their replica is on one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nnodes: Option<i64>,
    /// `--node-rank` / `-r`: this node's index, 0 ..= nnodes - 1 (default 0;
    /// vLLM 0.33 `ParallelConfig.node_rank`, vllm/config/parallel.py:323,
    /// checked against `--nnodes` at vllm/engine/arg_utils.py:2414).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rank: Option<i64>,
    /// `vllm serve --headless`: this node runs engines and workers without an
    /// API server (vllm/entrypoints/cli/serve.py:181 `run_headless`), which
    /// needs at least one local DP replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headless: Option<bool>,
    /// `--data-parallel-rank` / `-dpn`: this process is one external-LB DP rank
    /// (vLLM 0.33 arg_utils.py:2447): it runs one DP replica on this node
    /// (`data_parallel_size_local` 1, arg_utils.py:2476-2484), so the host-pool
    /// check counts that replica's pools; other external-LB processes on the
    /// node pin their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel_rank: Option<i64>,
    /// `--kv-cache-dtype` (default "auto").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtype: Option<String>,
    /// `--block-size` in tokens (default: the backend's, 64 for sparse MLA on CUDA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<i64>,
    /// `--max-model-len` in tokens; -1 means auto (default: the model's `max_position_embeddings`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<i64>,
    /// `--max-num-seqs` (default: vLLM's: 1024 on GPUs with >= 70 GiB, else 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<i64>,
    /// `--gpu-memory-utilization`: fraction of each GPU's memory vLLM may use,
    /// in (0, 1] (default 0.92, vLLM 0.33 `CacheConfig`). Read by the planner.
    /// NaN and infinities are held as the Python binding passes them
    /// (`"nan"`, `"inf"`, `"-inf"`), so they reach the range check.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "py_f64")]
    pub gpu_memory_utilization: Option<f64>,
    /// `--kv-cache-memory-bytes`: KV cache size per GPU in bytes; when set,
    /// vLLM ignores `gpu_memory_utilization`. Read by the planner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_memory_bytes: Option<i64>,
    /// `--distributed-executor-backend` ("mp", "ray", ...; default "mp" on one
    /// node): TP ranks share one HiSparse host pool only under "mp".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed_executor_backend: Option<String>,
    /// `--data-parallel-backend` / `-dpb` ("mp", the default, or "ray"): over
    /// `--nnodes` > 1 vLLM 0.33 takes only mp (vllm/engine/arg_utils.py:2390).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel_backend: Option<String>,
    /// `--enable-expert-parallel` / `-ep` (default false): MoE experts are split
    /// across all TP x DP ranks instead of by TP. Read by the weight estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_expert_parallel: Option<bool>,
    /// `--[no-]scheduler-reserve-full-isl` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_reserve_full_isl: Option<bool>,
    /// `--disable-hybrid-kv-cache-manager` (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_hybrid_kv_cache_manager: Option<bool>,
    /// The `VLLM_USE_V2_MODEL_RUNNER` environment variable as a string (unset: None).
    #[serde(
        default,
        rename = "VLLM_USE_V2_MODEL_RUNNER",
        skip_serializing_if = "Option::is_none"
    )]
    pub vllm_use_v2_model_runner: Option<String>,
    /// The `VLLM_ALLOW_LONG_MAX_MODEL_LEN` environment variable as a string
    /// (unset: None); `1` or `true` (stripped, any case: vllm/envs.py:1115-1118)
    /// lets max_model_len exceed the model's length with a warning
    /// (config/model.py:2676).
    #[serde(
        default,
        rename = "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
        skip_serializing_if = "Option::is_none"
    )]
    pub vllm_allow_long_max_model_len: Option<String>,
    /// Target platform: "cuda" (default), "rocm" or "cpu".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

/// Advice for a JSON flag that does not parse, by the most likely cause.
fn json_hint(flag: &str, text: &str, e: &JsonSyntax) -> String {
    let at = format!("line {} column {}", e.line, e.column);
    // A Python dict's repr (`{'kv_role': 'kv_both'}`): the same text with
    // double quotes, when that is JSON, is what was meant.
    if text.contains('\'') && !text.contains('"') {
        let swapped = text.replace('\'', "\"");
        if serde_json::from_str::<serde_json::Value>(&swapped).is_ok() {
            return format!("JSON keys and strings take double quotes, not Python's single ones: {flag} '{swapped}'");
        }
    }
    if text.contains('{') && !text.contains('"') {
        format!("the double quotes are gone, so the shell probably removed them: put the whole JSON in single quotes, {flag} '{{\"key\": \"value\"}}', or use dotted flags such as {flag}.key value")
    } else if e.eof {
        "the JSON ends early (a missing } or ], or the shell split it at a space: quote the whole value in single quotes)".to_owned()
    } else if e.message.contains("levels deep") {
        format!("nest the JSON less deeply (the bracket at {at} is one level too deep)")
    } else if e.message.contains("trailing comma") {
        format!("remove the trailing comma at {at}")
    } else {
        format!("fix the JSON at {at}; keys and strings need double quotes")
    }
}

/// An optional float that JSON may hold as Python spells a float JSON has
/// no number for (`"nan"`, `"inf"`, `"-inf"`, as the Python binding writes
/// `float("nan")`): serde_json alone refuses those strings and writes the
/// floats as null.
mod py_f64 {
    use serde::de::{Error, Unexpected};
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(f) => match crate::pytext::py_float_json(*f) {
                Value::String(name) => s.serialize_str(&name),
                _ => s.serialize_f64(*f),
            },
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        match Option::<Value>::deserialize(d)? {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_f64()
                .map(Some)
                .ok_or_else(|| D::Error::custom("a number beyond f64")),
            Some(Value::String(t)) => match t.as_str() {
                "nan" => Ok(Some(f64::NAN)),
                "inf" => Ok(Some(f64::INFINITY)),
                "-inf" => Ok(Some(f64::NEG_INFINITY)),
                _ => Err(D::Error::invalid_value(Unexpected::Str(&t), &"f64")),
            },
            Some(other) => Err(D::Error::invalid_type(
                match &other {
                    Value::Bool(b) => Unexpected::Bool(*b),
                    Value::Array(_) => Unexpected::Seq,
                    _ => Unexpected::Map,
                },
                &"f64",
            )),
        }
    }
}

/// A JSON field that is present deserializes to `Some`, even when it is null,
/// so the JSON form round-trips exactly.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

pub use crate::model::LoadError;

/// The JSON-valued fields, in the order vLLM's `--help` lists them.
pub const JSON_FIELDS: [&str; 5] = [
    "kv_transfer_config",
    "attention_config",
    "speculative_config",
    "compilation_config",
    "hf_overrides",
];

/// How vLLM 0.33 reads each JSON flag's text (vllm/engine/arg_utils.py
/// `_compute_kwargs`: a config dataclass goes through `parse_dataclass`;
/// `--speculative-config` is `optional_type(json.loads)` (line 1864) and
/// `--hf-overrides` `union_dict_and_str`, both `json.loads`).
fn json_flag(field: &str) -> JsonFlag {
    match field {
        "kv_transfer_config" | "attention_config" | "compilation_config" => JsonFlag::Dataclass,
        _ => JsonFlag::Loads,
    }
}

/// The `vllm serve` flag of a field: `kv_transfer_config` -> `--kv-transfer-config`.
pub fn flag_name(field: &str) -> String {
    format!("--{}", field.replace('_', "-"))
}

impl ServeArgs {
    /// The JSON-valued fields and their names ([`JSON_FIELDS`] order).
    pub fn json_fields(&self) -> [(&'static str, &Option<Value>); 5] {
        [
            (JSON_FIELDS[0], &self.kv_transfer_config),
            (JSON_FIELDS[1], &self.attention_config),
            (JSON_FIELDS[2], &self.speculative_config),
            (JSON_FIELDS[3], &self.compilation_config),
            (JSON_FIELDS[4], &self.hf_overrides),
        ]
    }

    fn json_fields_mut(&mut self) -> [(&'static str, &mut Option<Value>); 5] {
        [
            (JSON_FIELDS[0], &mut self.kv_transfer_config),
            (JSON_FIELDS[1], &mut self.attention_config),
            (JSON_FIELDS[2], &mut self.speculative_config),
            (JSON_FIELDS[3], &mut self.compilation_config),
            (JSON_FIELDS[4], &mut self.hf_overrides),
        ]
    }

    /// A copy whose JSON-valued fields given as text are parsed as vLLM
    /// parses them ([`json_loads`]: `NaN`, `Infinity`, `1e400`, and `80g` in
    /// a config dataclass). Text that does not parse becomes an
    /// `invalid_json` error and the field is dropped.
    pub fn normalized(&self) -> (Cow<'_, ServeArgs>, Vec<Diagnostic>) {
        let has_text = self
            .json_fields()
            .iter()
            .any(|(_, v)| matches!(v, Some(Value::String(_))));
        if !has_text {
            return (Cow::Borrowed(self), Vec::new());
        }
        let mut out = self.clone();
        let mut errors = Vec::new();
        for (field, slot) in out.json_fields_mut() {
            let Some(Value::String(text)) = slot.as_ref() else {
                continue;
            };
            match json_loads(text, json_flag(field)) {
                Ok(v) => *slot = Some(v),
                Err(e) => {
                    errors.push(
                        Diagnostic::error(
                            Code::InvalidJson,
                            FieldPath::root(field),
                            format!("{} is not valid JSON: {e}", flag_name(field)),
                        )
                        .given(&Value::String(text.clone()))
                        .allowed("a JSON object")
                        .hint(json_hint(&flag_name(field), text, &e)),
                    );
                    *slot = None;
                }
            }
        }
        (Cow::Owned(out), errors)
    }

    /// The JSON form that fixes edit and test vectors store.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("ServeArgs always serializes")
    }

    /// Read back the JSON form (unknown top-level keys are rejected).
    pub fn from_json(value: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(value)
    }

    /// [`ServeArgs::from_json`], except that a number the field cannot hold
    /// (`tensor_parallel_size` 10**30, 2.5) is an `invalid_value` error, and
    /// the field is dropped, instead of failing the whole parse: it is a bad
    /// value, which a report should show. Wrong kinds (a string for an int)
    /// and unknown keys still fail, the error naming the key first.
    pub fn from_json_reporting(
        value: &Value,
    ) -> Result<(Self, Vec<Diagnostic>), serde_json::Error> {
        let first = match ServeArgs::deserialize(value) {
            Ok(args) => return Ok((args, Vec::new())),
            Err(e) => e,
        };
        let Value::Object(map) = value else {
            return Err(first);
        };
        let mut kept = serde_json::Map::new();
        let mut errors = Vec::new();
        let alone = |v: &Value, key: &str| {
            ServeArgs::deserialize(&Value::Object(serde_json::Map::from_iter([(
                key.to_owned(),
                v.clone(),
            )])))
        };
        for (key, v) in map {
            match alone(v, key) {
                Ok(_) => {
                    kept.insert(key.clone(), v.clone());
                }
                // A known field (null is valid for every field) given a number it cannot hold.
                Err(e) if v.is_number() && alone(&Value::Null, key).is_ok() => errors.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        FieldPath::root(key),
                        format!("{key} {v} is not a value it can take: {e}"),
                    )
                    .given(v)
                    .allowed("an integer in the signed 64-bit range (vLLM: a Python int)"),
                ),
                // Named: `tensor_parallel_size="8"` says which argument (issue 22).
                Err(e) => {
                    return Err(<serde_json::Error as serde::de::Error>::custom(format!(
                        "{key}: {e}"
                    )))
                }
            }
        }
        Ok((ServeArgs::deserialize(&Value::Object(kept))?, errors))
    }

    /// The model's HF config: `hf_config` if given, else the config.json of
    /// `hf_config_path` or, without it, of `model` (as vLLM 0.33, see
    /// `hf_config_path`). Returns `Ok(None)` when none is given. Files are read whole (at most
    /// [`crate::limits::MAX_MODEL_CONFIG_BYTES`], regular files only) and parsed
    /// once per content ([`crate::model::file`]), so repeated checks stay cheap.
    pub fn load_hf_config(&self) -> Result<Option<(Arc<Value>, String)>, LoadError> {
        if let Some(cfg) = self.hf_config.as_ref().filter(|v| !v.is_null()) {
            return Ok(Some((Arc::new(cfg.clone()), "hf_config".to_owned())));
        }
        let Some(model) = self.hf_config_path.as_ref().or(self.model.as_ref()) else {
            return Ok(None);
        };
        // A local path first, as vLLM; else a model id in the Hugging Face cache.
        let (file, meta) = match config_file(Path::new(model)) {
            Some(found) => found,
            None => (
                crate::model::hub::locate(
                    model,
                    self.revision.as_deref(),
                    &crate::model::hub::HubCache::from_env(|k| std::env::var(k).ok()),
                )?,
                None,
            ),
        };
        let shown = file.display().to_string();
        let value = match meta {
            Some(meta) => crate::model::file::load_stat(&file, &shown, meta)?,
            None => crate::model::file::load(&file, &shown)?,
        };
        Ok(Some((value, shown)))
    }
}

/// The config.json a model path names, with its `stat` when that was made.
/// Anything that exists and is not a directory counts, so a FIFO or device
/// is refused as such when read. `path/config.json` exists only when `path`
/// is a directory, so it is looked at first: one `stat` for a model
/// directory, the usual case, and the one the file cache's key needs.
fn config_file(path: &Path) -> Option<(PathBuf, Option<std::fs::Metadata>)> {
    let inner = path.join("config.json");
    if let Ok(meta) = std::fs::metadata(&inner) {
        return Some((inner, Some(meta)));
    }
    (path.exists() && !path.is_dir()).then(|| (path.to_owned(), None))
}

/// vLLM's parallel sizes from its flags (the arithmetic on them is
/// engine-neutral, in [`crate::sizes`]).
impl crate::sizes::Parallel {
    /// The sizes as given, vLLM's defaults (1) for the rest.
    pub fn of(args: &ServeArgs) -> Self {
        Self {
            tp: args.tensor_parallel_size.unwrap_or(1),
            pp: args.pipeline_parallel_size.unwrap_or(1),
            dcp: args.decode_context_parallel_size.unwrap_or(1),
            pcp: args.prefill_context_parallel_size.unwrap_or(1),
            dp: args.data_parallel_size.unwrap_or(1),
            nnodes: args.nnodes.unwrap_or(1),
            // An external-LB DP rank runs one replica (arg_utils.py:2476-2484).
            dp_local: match args.data_parallel_rank {
                Some(_) => Some(1),
                None => args.data_parallel_size_local,
            },
        }
    }
}
