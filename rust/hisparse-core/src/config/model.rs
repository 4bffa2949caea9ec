//! What hisparse_rs needs from a model's HF `config.json` after
//! `--hf-overrides` is deep-merged over it: DSA-ness (`index_topk`), the
//! number of sparse-MLA layers and the context limit. Keys are looked up at
//! the top level first, then under `text_config` (composite models).

use serde_json::{Map, Value};

/// A value read from the model config, with where it came from
/// (`config.json:text_config.index_topk` or `hf_overrides.index_topk`).
#[derive(Clone, Debug, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
    /// True when `--hf-overrides` supplied it.
    pub overridden: bool,
}

/// The model facts HiSparse resolution uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelInfo {
    /// `architectures[0]`, e.g. `DeepseekV32ForCausalLM`.
    pub architecture: Option<String>,
    pub model_type: Option<String>,
    /// The indexer's top-k (DSA models only); `Err(raw)` when present but not a positive int.
    pub index_topk: Option<Sourced<Result<u32, Value>>>,
    /// Layers holding sparse-MLA KV: `layer_types` entries equal to
    /// `deepseek_sparse_attention` when the model mixes layer kinds, else `num_hidden_layers`.
    pub sparse_mla_layers: Option<Sourced<u32>>,
    pub max_position_embeddings: Option<Sourced<u64>>,
    /// `torch_dtype` (or `dtype` in newer transformers).
    pub torch_dtype: Option<String>,
    /// MTP depth shipped with the checkpoint (`num_nextn_predict_layers`).
    pub num_nextn_predict_layers: Option<u32>,
    /// MLA latent width (`kv_lora_rank`, 512 on DeepSeek-V3.2 and GLM-5).
    pub kv_lora_rank: Option<u32>,
    /// Decoupled RoPE width (`qk_rope_head_dim`: 64, or 0 on NoPE models such as GLM-5.3-Flash).
    pub qk_rope_head_dim: Option<u32>,
    /// Pooled indexer width (`index_kpool`, GLM-5.3-Flash): widens the top-k buffer.
    pub index_kpool: Option<Sourced<u32>>,
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

/// Read [`ModelInfo`] from a merged config. `overrides` (if any) only decides
/// how each value's source is named.
pub fn read(merged: &Value, overrides: Option<&Value>) -> ModelInfo {
    let empty = Map::new();
    let top = merged.as_object().unwrap_or(&empty);
    let text = top.get("text_config").and_then(Value::as_object);
    let lookup = |key: &str| -> Option<(Value, String, bool)> {
        if let Some(v) = top.get(key).filter(|v| !v.is_null()) {
            let overridden = overrides.and_then(|o| o.get(key)).is_some();
            return Some((v.clone(), source(overridden, key), overridden));
        }
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
    let positive = |v: &Value| v.as_u64().filter(|n| *n > 0);
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
    let sparse_mla_layers = match lookup("layer_types") {
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
    };
    let max_position_embeddings =
        lookup("max_position_embeddings").and_then(|(v, source, overridden)| {
            Some(Sourced {
                value: positive(&v)?,
                source,
                overridden,
            })
        });
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
        index_topk,
        sparse_mla_layers,
        max_position_embeddings,
        torch_dtype: lookup("torch_dtype")
            .or_else(|| lookup("dtype"))
            .and_then(|(v, _, _)| v.as_str().map(str::to_owned)),
        num_nextn_predict_layers: small_uint("num_nextn_predict_layers"),
        kv_lora_rank: small_uint("kv_lora_rank"),
        qk_rope_head_dim: small_uint("qk_rope_head_dim"),
        index_kpool: lookup("index_kpool").and_then(|(v, source, overridden)| {
            Some(Sourced {
                value: u32::try_from(v.as_u64()?).ok()?,
                source,
                overridden,
            })
        }),
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
    }
}
