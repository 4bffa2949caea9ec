//! Model weight bytes per GPU, estimated from `config.json` when the user does
//! not give them: the parameter count of a DeepSeek-V3-style MLA MoE model
//! (DeepSeek-V3.2, GLM-5) from its dimensions, times the bytes per parameter of
//! its `quantization_config`. vLLM's start-up log ("Model loading took X GiB")
//! is exact; `--weights-gib` takes it.

use crate::model::ModelInfo;
use serde_json::Value;

/// A weight-size estimate for the whole model (all ranks together).
#[derive(Clone, Debug, PartialEq)]
pub struct WeightEstimate {
    /// Parameters outside the routed experts (attention, indexer, dense and
    /// shared MLPs, router, embeddings, norms).
    pub dense_params: u64,
    /// Routed-expert parameters (split across TP x DP ranks under expert parallelism).
    pub expert_params: u64,
    /// Bytes of `dense_params` plus `expert_params`, as stored.
    pub dense_bytes: u64,
    pub expert_bytes: u64,
    /// How the bytes were counted, for the output.
    pub rule: String,
    /// Of `dense_bytes`, the attention weights an SGLang rank holds whole: the
    /// q_a / kv_a projections and their norms, and the indexer (ReplicatedLinear,
    /// SGLang models/deepseek_v2.py:2070, :2095; layers/attention/dsa/dsa_indexer.py:344-368).
    pub replicated_attention_bytes: u64,
    /// Of `dense_bytes`, the attention weights split over the attention-TP group:
    /// q_b (or q_proj), kv_b, o_proj (models/deepseek_v2.py:2078-2093, :2145-2161).
    pub sharded_attention_bytes: u64,
}

impl WeightEstimate {
    /// Weight bytes on one GPU: everything split by TP, experts by TP x DP under
    /// expert parallelism (vLLM `--enable-expert-parallel`).
    pub fn bytes_per_gpu(&self, tp: u64, dp: u64, expert_parallel: bool) -> u64 {
        let tp = tp.max(1);
        let expert_ranks = if expert_parallel {
            tp.saturating_mul(dp.max(1))
        } else {
            tp
        };
        (self.dense_bytes / tp).saturating_add(self.expert_bytes / expert_ranks)
    }

    /// Weight bytes on one SGLang rank: as [`Self::bytes_per_gpu`], but the
    /// replicated attention weights whole and the sharded ones split over
    /// `attn_tp` (tp / dp with --enable-dp-attention, runtime_context.py:73-76).
    pub fn sglang_bytes_per_gpu(
        &self,
        tp: u64,
        attn_tp: u64,
        expert_ranks_dp: u64,
        expert_parallel: bool,
    ) -> u64 {
        let tp = tp.max(1);
        let attention = self
            .replicated_attention_bytes
            .saturating_add(self.sharded_attention_bytes);
        self.bytes_per_gpu(tp, expert_ranks_dp, expert_parallel)
            .saturating_sub(attention / tp)
            .saturating_add(self.replicated_attention_bytes)
            .saturating_add(self.sharded_attention_bytes / attn_tp.max(1))
    }
}

/// Bytes per parameter of the quantized linear weights, and the rule's words;
/// None for a quantization this estimate does not know.
fn quantized_bytes_per_param(q: &Value) -> Option<(f64, String)> {
    let method = q
        .get("quant_method")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let algo = q
        .get("quant_algo")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    if method == "fp8" || method == "fbgemm_fp8" {
        // One fp32 scale per 128 x 128 weight block (DeepSeek-V3.2 `weight_block_size`).
        return Some((
            1.0 + 4.0 / 16384.0,
            "fp8 linear weights (1 B + a fp32 scale per 128x128 block), bf16 embeddings".into(),
        ));
    }
    if method.contains("fp4") || algo.contains("fp4") {
        return Some((
            0.5 + 1.0 / 16.0,
            "fp4 linear weights (0.5 B + an fp8 scale per 16), bf16 embeddings".into(),
        ));
    }
    let bits = q.get("bits").and_then(Value::as_u64)?;
    if !(1..=16).contains(&bits) {
        return None;
    }
    Some((
        bits as f64 / 8.0 + 2.0 / 128.0,
        format!("{bits}-bit {method} linear weights (+ a 16-bit scale per group of 128), bf16 embeddings"),
    ))
}

// Saturating products and sums: absurd dims give huge figures, never a panic.
fn mul(xs: &[u64]) -> u64 {
    xs.iter().fold(1u64, |a, b| a.saturating_mul(*b))
}

fn sum(xs: &[u64]) -> u64 {
    xs.iter().fold(0u64, |a, b| a.saturating_add(*b))
}

/// One MLA layer's attention parameters, and the part of them (q_b or q_proj,
/// kv_b, o_proj) that SGLang splits by attention TP. `dims` is `[hidden,
/// heads, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, kv_lora_rank]`;
/// `q_lora` the `q_lora_rank` when the model has one.
fn attention_params(q_lora: Option<u64>, dims: [u64; 6]) -> (u64, u64) {
    let [h, heads, nope, rope, v_dim, kl] = dims;
    let q_proj = match q_lora {
        Some(q) => sum(&[mul(&[h, q]), q, mul(&[q, heads, nope.saturating_add(rope)])]),
        None => mul(&[h, heads, nope.saturating_add(rope)]),
    };
    let q_sharded = match q_lora {
        Some(q) => mul(&[q, heads, nope.saturating_add(rope)]),
        None => q_proj,
    };
    let attention_sharded = sum(&[
        q_sharded,
        mul(&[kl, heads, nope.saturating_add(v_dim)]),
        mul(&[heads, v_dim, h]),
    ]);
    let attention = sum(&[
        q_proj,
        mul(&[h, kl + rope]),
        kl,
        mul(&[kl, heads, nope.saturating_add(v_dim)]),
        mul(&[heads, v_dim, h]),
    ]);
    (attention, attention_sharded)
}

/// Bytes per parameter: the model dtype's (embeddings), the linear layers'
/// (the quantization's, else the dtype's), and the rule in words. Err: a
/// quantization_config this estimate does not know.
fn bytes_per_param(model: &ModelInfo) -> Result<(f64, f64, String), String> {
    let dtype_bytes = match model.torch_dtype.as_deref() {
        Some("float32") => 4.0,
        _ => 2.0,
    };
    let (linear_bpp, rule) = match &model.quantization_config {
        None | Some(Value::Null) => (
            dtype_bytes,
            format!("{dtype_bytes} B per parameter (model dtype, no quantization_config)"),
        ),
        Some(q) => quantized_bytes_per_param(q).ok_or_else(|| {
            format!(
                "quantization_config {} is not one this estimate knows",
                q.get("quant_method")
                    .map_or_else(|| "?".to_owned(), Value::to_string)
            )
        })?,
    };
    Ok((dtype_bytes, linear_bpp, rule))
}

/// Estimate the model's weight bytes; `draft_layers` MTP layers are loaded
/// with MTP speculation. `indexer_layers` counts target layers with an indexer.
/// Err explains why no estimate is possible (pass `--weights-gib`).
pub fn estimate(
    model: &ModelInfo,
    indexer_layers: u64,
    draft_layers: u64,
) -> Result<WeightEstimate, String> {
    let d = &model.dims;
    if d.mixed_layer_kinds {
        return Err(format!(
            "{} mixes sparse-MLA with other layer kinds; the MLA MoE parameter formula does not describe it",
            model.name()
        ));
    }
    let need = |name: &str, v: Option<u64>| v.ok_or_else(|| format!("config.json has no {name}"));
    let h = need("hidden_size", d.hidden_size)?;
    let layers = need("num_hidden_layers", d.num_hidden_layers)?;
    let heads = need("num_attention_heads", d.num_attention_heads)?;
    let nope = need("qk_nope_head_dim", d.qk_nope_head_dim)?;
    let v_dim = need("v_head_dim", d.v_head_dim)?;
    let vocab = need("vocab_size", d.vocab_size)?;
    let kl = u64::from(
        model
            .kv_lora_rank
            .ok_or("config.json has no kv_lora_rank")?,
    );
    let rope = u64::from(
        model
            .qk_rope_head_dim
            .ok_or("config.json has no qk_rope_head_dim")?,
    );
    let (attention, attention_sharded) = attention_params(
        d.q_lora_rank.filter(|q| *q > 0),
        [h, heads, nope, rope, v_dim, kl],
    );
    let indexer = match (model.index_head_dim, d.index_n_heads, d.q_lora_rank) {
        (Some(ihd), Some(inh), Some(q)) => {
            let ihd = u64::from(ihd);
            sum(&[mul(&[q, inh, ihd]), mul(&[h, ihd]), 2 * ihd, mul(&[h, inh])])
        }
        _ => 0,
    };
    let dense_k = d.first_k_dense_replace.unwrap_or(0).min(layers);
    let dense_mlp = mul(&[3, h, d.intermediate_size.unwrap_or(0)]);
    let moe_inter = d.moe_intermediate_size.unwrap_or(0);
    let routed = d.n_routed_experts.unwrap_or(0);
    let experts = mul(&[3, h, moe_inter, routed]);
    let shared = sum(&[
        mul(&[3, h, moe_inter, d.n_shared_experts.unwrap_or(0)]),
        mul(&[h, routed]),
    ]);
    let (moe_layers, mlp_dense) = if routed > 0 {
        (layers - dense_k, dense_k)
    } else {
        (0, layers)
    };
    let embeddings = mul(&[vocab, h, if d.tie_word_embeddings { 1 } else { 2 }]);
    // An MTP layer: a full decoder layer plus its eh_proj (2h x h) and norms.
    let mtp = mul(&[
        draft_layers,
        sum(&[
            attention,
            indexer,
            experts,
            shared,
            mul(&[2, h, h]),
            mul(&[5, h]),
        ]),
    ]);
    let mtp_experts = mul(&[draft_layers, experts]);
    let linear_dense = sum(&[
        mul(&[layers, attention]),
        mul(&[indexer_layers, indexer]),
        mul(&[mlp_dense, dense_mlp]),
        mul(&[moe_layers, shared]),
        mtp.saturating_sub(mtp_experts),
        mul(&[layers, 2, h]),
        h, // final norm
    ]);
    let expert_params = sum(&[mul(&[moe_layers, experts]), mtp_experts]);

    let (dtype_bytes, linear_bpp, rule) = bytes_per_param(model)?;
    let bytes = |params: u64, bpp: f64| (params as f64 * bpp) as u64;
    let attn_layers = layers.saturating_add(draft_layers);
    let sharded = mul(&[attn_layers, attention_sharded]);
    let replicated = sum(&[
        mul(&[attn_layers, attention.saturating_sub(attention_sharded)]),
        mul(&[indexer_layers.saturating_add(draft_layers), indexer]),
    ]);
    Ok(WeightEstimate {
        replicated_attention_bytes: bytes(replicated, linear_bpp),
        sharded_attention_bytes: bytes(sharded, linear_bpp),
        dense_params: linear_dense.saturating_add(embeddings),
        expert_params,
        dense_bytes: bytes(linear_dense, linear_bpp).saturating_add(bytes(embeddings, dtype_bytes)),
        expert_bytes: bytes(expert_params, linear_bpp),
        rule,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model;

    fn info(dir: &str) -> ModelInfo {
        let path = format!(
            "{}/../../tests/data/models/{dir}/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let cfg: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        model::read(&cfg, None)
    }

    #[test]
    fn sglang_attention_split_replicated_and_sharded() {
        let e = estimate(&info("deepseek-v3.2"), 61, 0).unwrap();
        // q_b + kv_b + o_proj: 61 x (1536 x 128 x 192 + 512 x 128 x 256 + 128 x 128 x 7168)
        // = 10,489,954,304 params x (1 + 4/16384) B
        assert_eq!(e.sharded_attention_bytes, 10_492_515_328);
        // q_a + its norm + kv_a + its norm, and the indexer (wq_b, wk, 2 x 128 norm, weights_proj):
        // 61 x (7168 x 1536 + 1536 + 7168 x 576 + 512) + 61 x (1536 x 64 x 128 + 7168 x 128
        // + 256 + 7168 x 64) = 1,775,117,568 params
        assert_eq!(e.replicated_attention_bytes, 1_775_550_946);
        // Without DP attention SGLang holds the replicated part whole: 7/8 of it more
        // than the plain TP split (with the integer divisions' rounding).
        let plain = e.bytes_per_gpu(8, 1, false);
        let sg = e.sglang_bytes_per_gpu(8, 8, 1, false);
        // 1,775,550,946 - (12,268,066,274 // 8 - 10,492,515,328 // 8) = 1,553,607,078 B
        assert_eq!(sg - plain, 1_553_607_078);
        // DP attention 8: attention TP 1, the sharded part whole too.
        assert_eq!(
            e.sglang_bytes_per_gpu(8, 1, 8, false) - sg,
            10_492_515_328 - 10_492_515_328 / 8
        );
    }

    #[test]
    fn parameter_counts_match_the_published_sizes() {
        // DeepSeek-V3.2: 671.9 B without the MTP layer (DeepSeek publishes 671 B + 14 B MTP
        // with shared embeddings); GLM-5: 743.9 B ("744 B"). Hand-computed from the dims.
        let w = estimate(&info("deepseek-v3.2"), 61, 0).unwrap();
        assert_eq!(w.dense_params + w.expert_params, 671_877_929_216);
        let w = estimate(&info("glm-5"), 78, 0).unwrap();
        assert_eq!(w.dense_params + w.expert_params, 743_911_199_232);
    }

    #[test]
    fn fp8_checkpoint_bytes_per_gpu() {
        // DeepSeek-V3.2 is an fp8 checkpoint: about 1 B per parameter, 2 for embeddings.
        let w = estimate(&info("deepseek-v3.2"), 61, 0).unwrap();
        let total = w.dense_bytes + w.expert_bytes;
        assert!((670e9..676e9).contains(&(total as f64)), "{total}");
        let tp8 = w.bytes_per_gpu(8, 1, false);
        assert_eq!(tp8, w.dense_bytes / 8 + w.expert_bytes / 8);
        // Expert parallelism over DP 8 splits the experts 64 ways.
        assert!(w.bytes_per_gpu(8, 8, true) < tp8 / 4);
        // GLM-5 is bf16: about 2 B per parameter.
        let w = estimate(&info("glm-5"), 78, 0).unwrap();
        assert!(w.dense_bytes + w.expert_bytes > 1_480_000_000_000);
    }

    #[test]
    fn unknown_models_are_refused_not_guessed() {
        assert!(estimate(&info("glm-5.3-flash-reap-exl3-k2-k256"), 11, 0).is_err());
        assert!(estimate(&ModelInfo::default(), 0, 0).is_err());
    }
}
