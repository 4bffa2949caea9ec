//! What hisparse_rs needs from a model's HF `config.json` after
//! `--hf-overrides` is deep-merged over it: DSA-ness (`index_topk`), the
//! number of sparse-MLA layers and the context limit. Keys are looked up
//! where vLLM reads them (see [`read`]): the text model's under `text_config`
//! for composite models, a few at the top level.

pub mod error;
pub mod file;
pub mod hub;

pub use error::LoadError;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Every config.json key [`read`] looks up (top level and in `text_config`).
/// [`parse_config`] builds only these, so a large config.json costs about
/// its size in memory, not a full JSON tree (about 35x the text).
pub const MODEL_KEYS: &[&str] = &[
    "architectures",
    "model_type",
    "index_topk",
    "layer_types",
    "num_hidden_layers",
    "max_position_embeddings",
    "torch_dtype",
    "dtype",
    "num_nextn_predict_layers",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "index_kpool",
    "index_head_dim",
    "index_topk_pattern",
    "index_topk_freq",
    "index_skip_topk_offset",
    "indexer_types",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "q_lora_rank",
    "qk_nope_head_dim",
    "v_head_dim",
    "index_n_heads",
    "intermediate_size",
    "moe_intermediate_size",
    "n_routed_experts",
    "num_experts",
    "moe_num_experts",
    "num_local_experts",
    "n_shared_experts",
    "first_k_dense_replace",
    "vocab_size",
    "tie_word_embeddings",
    "quantization_config",
];

/// Parse a config.json, keeping the [`MODEL_KEYS`] of the top-level object
/// and of its `text_config`; everything else is skipped unbuilt. A document
/// that is not an object parses to a value of the same kind (for the error).
pub fn parse_config(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Kept { text_config: true }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A config object keeping [`MODEL_KEYS`] (and, at the top, `text_config`).
struct Kept {
    text_config: bool,
}

impl<'de> DeserializeSeed<'de> for Kept {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Kept {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.text_config && key == "text_config" {
                out.insert(key, map.next_value_seed(Kept { text_config: false })?);
            } else if MODEL_KEYS.contains(&key.as_str()) {
                out.insert(key, map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Value::Object(out))
    }
    // Not an object: only the kind matters (the caller reports it).
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(Vec::new()))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// A value read from the model config, with where it came from
/// (`config.json:text_config.index_topk` or `hf_overrides.index_topk`).
#[derive(Clone, Debug, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
    /// True when `--hf-overrides` supplied it.
    pub overridden: bool,
}

/// Layer counts above this are not listed layer by layer (real models have < 200).
pub const MAX_LISTED_LAYERS: u32 = 1 << 16;

/// The model facts HiSparse resolution uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelInfo {
    /// `architectures[0]`, e.g. `DeepseekV32ForCausalLM`.
    pub architecture: Option<String>,
    pub model_type: Option<String>,
    /// The indexer's top-k (DSA models only); `Err(raw)` when present but not a positive int.
    pub index_topk: Option<Sourced<Result<u32, Value>>>,
    /// `index_topk` is only under `text_config`: vLLM 0.33 reads it from the
    /// top-level HF config object alone, which for composite models
    /// (transformers 5.20 `Glm5NextConfig`) does not expose it.
    pub index_topk_nested: bool,
    /// Layers holding sparse-MLA KV: `layer_types` entries equal to
    /// `deepseek_sparse_attention` when the model mixes layer kinds, else `num_hidden_layers`.
    pub sparse_mla_layers: Option<Sourced<u32>>,
    pub max_position_embeddings: Option<Sourced<u64>>,
    /// `max_position_embeddings` present but not a positive number of tokens
    /// (`"abc"`, NaN, 0, a list): the raw value, for the error that names it.
    pub max_position_embeddings_invalid: Option<Sourced<Value>>,
    /// `torch_dtype` (or `dtype` in newer transformers).
    pub torch_dtype: Option<String>,
    /// MTP depth shipped with the checkpoint (`num_nextn_predict_layers`).
    pub num_nextn_predict_layers: Option<u32>,
    /// Routed experts as vLLM 0.33 counts them (`ModelConfig.is_moe`: the first
    /// of num_experts, moe_num_experts, n_routed_experts, num_local_experts,
    /// vllm/transformers_utils/config.py:64); None or 0: a dense model.
    pub num_experts: Option<u64>,
    /// MLA latent width (`kv_lora_rank`, 512 on DeepSeek-V3.2 and GLM-5).
    pub kv_lora_rank: Option<u32>,
    /// Decoupled RoPE width (`qk_rope_head_dim`: 64, or 0 on NoPE models such as GLM-5.3-Flash).
    pub qk_rope_head_dim: Option<u32>,
    /// Pooled indexer width (`index_kpool`, GLM-5.3-Flash): widens the top-k buffer.
    pub index_kpool: Option<Sourced<u32>>,
    /// Indexer key width (`index_head_dim`, 128 on DeepSeek-V3.2 and GLM-5).
    pub index_head_dim: Option<u32>,
    /// One entry per sparse-MLA layer: true when the layer runs its own indexer
    /// (and so holds indexer keys), false when it reuses the previous indexer
    /// layer's top-k (IndexShare, GLM-5.2). See [`indexer_leaders`]. None for
    /// more than [`MAX_LISTED_LAYERS`] layers.
    pub indexer_leaders: Option<Sourced<Vec<bool>>>,
    /// Dimensions the weight-size estimate reads (DeepSeek-V3-style MLA MoE models).
    pub dims: ModelDims,
    /// `quantization_config`, as written (top level or `text_config`).
    pub quantization_config: Option<Value>,
}

/// The `config.json` dimensions of a DeepSeek-V3-style MLA MoE model that
/// decide its parameter count; each None when absent or not an integer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelDims {
    pub hidden_size: Option<u64>,
    pub num_hidden_layers: Option<u64>,
    pub num_attention_heads: Option<u64>,
    /// KV heads (`num_key_value_heads`; GQA/MQA models): decode context
    /// parallelism splits them.
    pub num_key_value_heads: Option<u64>,
    pub q_lora_rank: Option<u64>,
    pub qk_nope_head_dim: Option<u64>,
    pub v_head_dim: Option<u64>,
    pub index_n_heads: Option<u64>,
    pub intermediate_size: Option<u64>,
    pub moe_intermediate_size: Option<u64>,
    pub n_routed_experts: Option<u64>,
    pub n_shared_experts: Option<u64>,
    pub first_k_dense_replace: Option<u64>,
    pub vocab_size: Option<u64>,
    pub tie_word_embeddings: bool,
    /// True when `layer_types` mixes in layers other than sparse MLA (linear
    /// attention): the MLA MoE parameter formula does not describe them.
    pub mixed_layer_kinds: bool,
}

impl ModelInfo {
    /// Whether vLLM 0.33's HiSparse layout rejects this model outright.
    pub fn is_deepseek_v4(&self) -> bool {
        self.model_type.as_deref() == Some("deepseek_v4")
            || self
                .architecture
                .as_deref()
                .is_some_and(|a| a.starts_with("DeepseekV4"))
    }

    /// A readable model name for messages.
    pub fn name(&self) -> String {
        self.architecture
            .clone()
            .or_else(|| self.model_type.clone())
            .unwrap_or_else(|| "this model".to_owned())
    }
}

/// Deep-merge `overrides` into `base` (objects merge key by key; anything
/// else replaces), as vLLM applies a dict `--hf-overrides`.
pub fn deep_merge(base: &mut Value, overrides: &Value) {
    match (base, overrides) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        deep_merge(existing, v)
                    }
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Keys vLLM 0.33 reads from the top-level HF config object (`hf_config`);
/// every other key it reads from `hf_text_config`, which is `text_config` for
/// a composite model (`get_hf_text_config`, vllm/transformers_utils/config.py).
const TOP_LEVEL_KEYS: &[&str] = &[
    "architectures",
    "model_type",
    "index_topk",
    "quantization_config",
    "torch_dtype",
    "dtype",
    "tie_word_embeddings",
];

/// Read [`ModelInfo`] from a merged config. `overrides` (if any) only decides
/// how each value's source is named.
///
/// A key is looked up where vLLM reads it first ([`TOP_LEVEL_KEYS`] at the
/// top, the rest in `text_config`), then in the other place. So a flat
/// `--hf-overrides '{"num_hidden_layers": 8}'` on a composite model does not
/// change its text model's layers: vLLM sets it on the top-level config
/// object (`config.update`, vllm/transformers_utils/config.py:991), which the
/// text config does not read.
pub fn read(merged: &Value, overrides: Option<&Value>) -> ModelInfo {
    let empty = Map::new();
    let top = merged.as_object().unwrap_or(&empty);
    let text = top.get("text_config").and_then(Value::as_object);
    let lookup = |key: &str| lookup(top, text, overrides, key);
    let small_uint = |key: &str| {
        lookup(key)
            .and_then(|(v, _, _)| v.as_u64())
            .and_then(|n| u32::try_from(n).ok())
    };

    let index_topk = lookup("index_topk").map(|(v, source, overridden)| Sourced {
        value: positive(&v).and_then(|n| u32::try_from(n).ok()).ok_or(v),
        source,
        overridden,
    });
    let sparse_mla_layers = sparse_mla_layers(&lookup);
    let (max_position_embeddings, max_position_embeddings_invalid) =
        max_position_embeddings(&lookup);
    let indexer_leaders = dsa_layers(&lookup, sparse_mla_layers.as_ref())
        .map(|layers| indexer_leaders(&layers, &lookup));
    let uint = |key: &str| lookup(key).and_then(|(v, _, _)| v.as_u64());
    let dims = dims(&lookup);
    ModelInfo {
        architecture: top
            .get("architectures")
            .and_then(|a| a.get(0))
            .and_then(Value::as_str)
            .map(str::to_owned),
        model_type: top
            .get("model_type")
            .and_then(Value::as_str)
            .map(str::to_owned),
        index_topk_nested: index_topk.is_some() && top.get("index_topk").is_none_or(Value::is_null),
        index_topk,
        sparse_mla_layers,
        max_position_embeddings,
        max_position_embeddings_invalid,
        torch_dtype: lookup("torch_dtype")
            .or_else(|| lookup("dtype"))
            .and_then(|(v, _, _)| v.as_str().map(str::to_owned)),
        num_nextn_predict_layers: small_uint("num_nextn_predict_layers"),
        num_experts: [
            "num_experts",
            "moe_num_experts",
            "n_routed_experts",
            "num_local_experts",
        ]
        .into_iter()
        .find_map(uint),
        kv_lora_rank: small_uint("kv_lora_rank"),
        qk_rope_head_dim: small_uint("qk_rope_head_dim"),
        index_kpool: lookup("index_kpool").and_then(|(v, source, overridden)| {
            Some(Sourced {
                value: u32::try_from(v.as_u64()?).ok()?,
                source,
                overridden,
            })
        }),
        index_head_dim: small_uint("index_head_dim"),
        indexer_leaders,
        dims,
        quantization_config: lookup("quantization_config").map(|(v, _, _)| v),
    }
}

/// A config key as vLLM reads it: at the top level or in `text_config` (which
/// first: `TOP_LEVEL_KEYS`), null counting as absent; with its source
/// (`text_config.x`, `hf_overrides.x`) and whether `--hf-overrides` gave it.
fn lookup(
    top: &Map<String, Value>,
    text: Option<&Map<String, Value>>,
    overrides: Option<&Value>,
    key: &str,
) -> Option<(Value, String, bool)> {
    debug_assert!(MODEL_KEYS.contains(&key), "add {key:?} to MODEL_KEYS");
    let at_top = || {
        let v = top.get(key).filter(|v| !v.is_null())?;
        let overridden = overrides.and_then(|o| o.get(key)).is_some();
        Some((v.clone(), source(overridden, key), overridden))
    };
    let in_text = || {
        let v = text?.get(key).filter(|v| !v.is_null())?;
        let overridden = overrides
            .and_then(|o| o.get("text_config"))
            .and_then(|t| t.get(key))
            .is_some();
        Some((
            v.clone(),
            source(overridden, &format!("text_config.{key}")),
            overridden,
        ))
    };
    if TOP_LEVEL_KEYS.contains(&key) {
        at_top().or_else(in_text)
    } else {
        in_text().or_else(at_top)
    }
}

fn positive(v: &Value) -> Option<u64> {
    v.as_u64().filter(|n| *n > 0)
}

/// The sparse-MLA layers: the `layer_types` entries equal to
/// "deepseek_sparse_attention", else `num_hidden_layers`.
fn sparse_mla_layers(lookup: &Lookup<'_>) -> Option<Sourced<u32>> {
    match lookup("layer_types") {
        Some((Value::Array(kinds), source, overridden)) => {
            let n = kinds
                .iter()
                .filter(|k| k.as_str() == Some("deepseek_sparse_attention"))
                .count();
            Some(Sourced {
                value: n as u32,
                source: format!("{source} (entries equal to \"deepseek_sparse_attention\")"),
                overridden,
            })
        }
        _ => lookup("num_hidden_layers").and_then(|(v, source, overridden)| {
            Some(Sourced {
                value: u32::try_from(positive(&v)?).ok()?,
                source,
                overridden,
            })
        }),
    }
}

/// `max_position_embeddings` when it is a token count, else what was given
/// (for its error).
fn max_position_embeddings(lookup: &Lookup<'_>) -> (Option<Sourced<u64>>, Option<Sourced<Value>>) {
    // vLLM compares the value with `<` (ModelArchConfigConvertor
    // derived_max_model_len_and_key): an integral float such as 4096.0 works
    // as 4096; null counts as absent.
    let tokens = |v: &Value| {
        positive(v).or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 1.0 && *f < 9.0e15)
                .map(|f| f as u64)
        })
    };
    let mpe_given = lookup("max_position_embeddings").filter(|(v, _, _)| !v.is_null());
    let max_position_embeddings = mpe_given.clone().and_then(|(v, source, overridden)| {
        Some(Sourced {
            value: tokens(&v)?,
            source,
            overridden,
        })
    });
    let max_position_embeddings_invalid =
        mpe_given
            .filter(|(v, _, _)| tokens(v).is_none())
            .map(|(value, source, overridden)| Sourced {
                value,
                source,
                overridden,
            });
    (max_position_embeddings, max_position_embeddings_invalid)
}

/// The DSA layers' indices, for the indexer leaders.
fn dsa_layers(lookup: &Lookup<'_>, sparse_mla_layers: Option<&Sourced<u32>>) -> Option<Vec<usize>> {
    match lookup("layer_types") {
        Some((Value::Array(kinds), _, _)) => Some(
            kinds
                .iter()
                .enumerate()
                .filter(|(_, k)| k.as_str() == Some("deepseek_sparse_attention"))
                .map(|(i, _)| i)
                .collect(),
        ),
        // Listed per layer only for real layer counts; beyond, every layer
        // has its own indexer (the planner's closed form).
        _ => sparse_mla_layers
            .filter(|l| l.value <= MAX_LISTED_LAYERS)
            .map(|l| (0..l.value as usize).collect()),
    }
}

/// The dimensions the weight estimate reads.
fn dims(lookup: &Lookup<'_>) -> ModelDims {
    let uint = |key: &str| lookup(key).and_then(|(v, _, _)| v.as_u64());
    ModelDims {
        hidden_size: uint("hidden_size"),
        num_hidden_layers: uint("num_hidden_layers"),
        num_attention_heads: uint("num_attention_heads"),
        num_key_value_heads: uint("num_key_value_heads"),
        q_lora_rank: uint("q_lora_rank"),
        qk_nope_head_dim: uint("qk_nope_head_dim"),
        v_head_dim: uint("v_head_dim"),
        index_n_heads: uint("index_n_heads"),
        intermediate_size: uint("intermediate_size"),
        moe_intermediate_size: uint("moe_intermediate_size"),
        n_routed_experts: uint("n_routed_experts"),
        n_shared_experts: uint("n_shared_experts"),
        first_k_dense_replace: uint("first_k_dense_replace"),
        vocab_size: uint("vocab_size"),
        tie_word_embeddings: lookup("tie_word_embeddings")
            .and_then(|(v, _, _)| v.as_bool())
            .unwrap_or(false),
        mixed_layer_kinds: matches!(lookup("layer_types"), Some((Value::Array(kinds), _, _))
            if kinds.iter().any(|k| k.as_str() != Some("deepseek_sparse_attention"))),
    }
}

type Lookup<'a> = dyn Fn(&str) -> Option<(Value, String, bool)> + 'a;

/// Which sparse-MLA layers (`layers`: their indices among all hidden layers)
/// run their own indexer, by the first rule the config has:
/// 1. `index_topk_pattern`: a layer whose entry is "S" skips its indexer;
/// 2. `index_topk_freq` (IndexCache, vLLM 0.33 deepseek_v2): layer `i` skips
///    when `max(i - index_skip_topk_offset + 1, 0) % index_topk_freq != 0`
///    (offset default 2);
/// 3. `indexer_types`: "shared" entries skip;
/// 4. otherwise every layer runs one.
///
/// The first sparse layer always starts an index group (vLLM 0.33 hisparse layout).
fn indexer_leaders(layers: &[usize], lookup: &Lookup<'_>) -> Sourced<Vec<bool>> {
    let pattern: Option<(Vec<bool>, String, bool)> =
        lookup("index_topk_pattern").and_then(|(v, source, overridden)| {
            let skips: Vec<bool> = match &v {
                Value::String(s) => s.chars().map(|c| c == 'S').collect(),
                Value::Array(items) => items.iter().map(|x| x.as_str() == Some("S")).collect(),
                _ => return None,
            };
            Some((skips, source, overridden))
        });
    let freq = lookup("index_topk_freq").and_then(|(v, source, overridden)| {
        Some((v.as_u64().filter(|f| *f > 0)?, source, overridden))
    });
    let types = lookup("indexer_types").and_then(|(v, source, overridden)| {
        let items = v.as_array()?;
        Some((
            items
                .iter()
                .map(|x| x.as_str() == Some("shared"))
                .collect::<Vec<bool>>(),
            source,
            overridden,
        ))
    });
    let (skip, source, overridden): (Box<dyn Fn(usize) -> bool>, String, bool) = if let Some((
        skips,
        source,
        overridden,
    )) = pattern
    {
        (
            Box::new(move |i| skips.get(i).copied().unwrap_or(false)),
            format!("{source} (\"S\" skips the indexer)"),
            overridden,
        )
    } else if let Some((f, source, overridden)) = freq {
        let offset = lookup("index_skip_topk_offset")
            .and_then(|(v, _, _)| v.as_u64())
            .unwrap_or(2);
        (
                Box::new(move |i| (i as u64 + 1).saturating_sub(offset) % f != 0),
                format!("{source} with index_skip_topk_offset {offset} (vLLM 0.33 deepseek_v2 IndexCache rule)"),
                overridden,
            )
    } else if let Some((shared, source, overridden)) = types {
        (
            Box::new(move |i| shared.get(i).copied().unwrap_or(false)),
            format!("{source} (\"shared\" reuses the previous indexer)"),
            overridden,
        )
    } else {
        (
            Box::new(|_| false),
            "every sparse-MLA layer runs its own indexer".to_owned(),
            false,
        )
    };
    Sourced {
        value: layers
            .iter()
            .enumerate()
            .map(|(n, i)| n == 0 || !skip(*i))
            .collect(),
        source,
        overridden,
    }
}

fn source(overridden: bool, key: &str) -> String {
    if overridden {
        format!("hf_overrides.{key}")
    } else {
        format!("config.json:{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_config_and_overrides() {
        let mut cfg = json!({"architectures": ["X"], "text_config": {"index_topk": 2048, "num_hidden_layers": 4,
            "layer_types": ["linear_attention", "deepseek_sparse_attention", "linear_attention", "deepseek_sparse_attention"]}});
        let ov = json!({"text_config": {"index_topk": 1024}});
        deep_merge(&mut cfg, &ov);
        let info = read(&cfg, Some(&ov));
        let topk = info.index_topk.unwrap();
        assert_eq!(topk.value, Ok(1024));
        assert_eq!(topk.source, "hf_overrides.text_config.index_topk");
        assert_eq!(info.sparse_mla_layers.unwrap().value, 2);
        assert_eq!(info.indexer_leaders.unwrap().value, vec![true, true]);
    }

    #[test]
    fn a_flat_override_does_not_reach_the_text_model() {
        // vLLM sets a flat --hf-overrides key on the top-level config object;
        // the text model (hf_text_config) keeps its own value.
        let mut cfg = json!({"architectures": ["X"], "text_config": {"num_hidden_layers": 61,
            "kv_lora_rank": 512}});
        let ov = json!({"num_hidden_layers": 8, "index_topk": 128});
        deep_merge(&mut cfg, &ov);
        let info = read(&cfg, Some(&ov));
        assert_eq!(info.sparse_mla_layers.unwrap().value, 61);
        assert_eq!(info.dims.num_hidden_layers, Some(61));
        // index_topk is read at the top, as vLLM's HiSparse check reads it.
        assert_eq!(info.index_topk.unwrap().source, "hf_overrides.index_topk");
        assert!(!info.index_topk_nested);
    }

    fn leaders_of(dir: &str) -> Vec<bool> {
        let path = format!(
            "{}/../../tests/data/models/{dir}/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let cfg: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        read(&cfg, None).indexer_leaders.unwrap().value
    }

    #[test]
    fn indexer_layers_of_real_configs() {
        let count = |v: &[bool]| v.iter().filter(|l| **l).count();
        assert_eq!(count(&leaders_of("deepseek-v3.2")), 61);
        assert_eq!(count(&leaders_of("glm-5")), 78);
        // GLM-5.2 IndexShare: index_topk_freq 4, offset 3: layers 0, 1, 2, 6, 10, ..., 74.
        let glm52 = leaders_of("glm-5.2");
        assert_eq!(glm52.len(), 78);
        assert_eq!(count(&glm52), 21);
        assert_eq!(
            &glm52[..8],
            &[true, true, true, false, false, false, true, false]
        );
        // GLM-5.3-Flash: 11 sparse layers among 45, each with its own indexer.
        assert_eq!(
            leaders_of("glm-5.3-flash-reap-exl3-k2-k256"),
            vec![true; 11]
        );
    }

    #[test]
    fn index_share_rules_agree_with_indexer_types() {
        // GLM-5.2 ships both the IndexCache rule and indexer_types: same layers.
        let path = format!(
            "{}/../../tests/data/models/glm-5.2/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut cfg: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let by_freq = read(&cfg, None).indexer_leaders.unwrap().value;
        let obj = cfg.as_object_mut().unwrap();
        obj.remove("index_topk_freq");
        let by_types = read(&cfg, None).indexer_leaders.unwrap();
        assert!(by_types.source.contains("indexer_types"));
        assert_eq!(by_freq, by_types.value);
    }
}
