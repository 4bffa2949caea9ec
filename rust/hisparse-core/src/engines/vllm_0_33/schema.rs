//! What vLLM 0.33.0 accepts: the field names of its config classes and
//! pydantic's lax-mode coercions, plus the generic checks built on them
//! (unknown keys with a suggestion, types, unexpanded shell variables).

use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use crate::path::{FieldPath, Seg};
use serde_json::{Map, Value};

pub use crate::words::{closest, kind, quoted};

/// `vllm/config/kv_transfer.py` `KVTransferConfig` fields (0.33.0).
pub const KV_TRANSFER_FIELDS: &[&str] = &[
    "kv_connector",
    "engine_id",
    "kv_buffer_device",
    "kv_role",
    "kv_port",
    "kv_connector_extra_config",
    "kv_connector_module_path",
    "enable_permute_local_kv",
    "kv_load_failure_policy",
];

/// Fields older vLLM releases had and 0.33.0 rejects as unknown.
pub const KV_TRANSFER_REMOVED: &[&str] =
    &["kv_buffer_size", "kv_rank", "kv_parallel_size", "kv_ip"];

/// The HiSparse settings' own keys (the HiSparseConnector's
/// `kv_connector_extra_config.host_pool_gib`, `hisparse_config`'s two).
pub(crate) const HOST_POOL_GIB: &str = "host_pool_gib";
pub(crate) const DEVICE_BUFFER_SIZE: &str = "device_buffer_size";
pub(crate) const EAGER_HOST_MIRROR: &str = "eager_host_mirror";

/// `host_pool_gib`, or a misspelling of it (`host_pool_gb`, `hostpoolgib`).
pub(crate) fn is_host_pool_key(key: &str, typos: bool) -> bool {
    key == HOST_POOL_GIB || (typos && closest(key, &[HOST_POOL_GIB]).is_some())
}

/// `KVRole` literal values.
pub const KV_ROLES: &[&str] = &["kv_producer", "kv_consumer", "kv_both"];

/// Connectors registered in `KVConnectorFactory` (0.33.0).
pub const KNOWN_CONNECTORS: &[&str] = &[
    "ExampleConnector",
    "ExampleHiddenStatesConnector",
    "LMCacheConnectorV1",
    "LMCacheMPConnector",
    "NixlConnector",
    "NixlPullConnector",
    "NixlPushConnector",
    "MultiConnector",
    "HiSparseConnector",
    "MoRIIOConnector",
    "OffloadingConnector",
    "DecodeBenchConnector",
    "MooncakeConnector",
    "MooncakeStoreConnector",
    "FlexKVConnectorV1",
    "SimpleCPUOffloadConnector",
    "HF3FSKVConnector",
];

/// Connectors vLLM 0.33 calls validated with HiSparse (others get its warning).
pub const HISPARSE_VALIDATED_TOP_CONNECTORS: &[&str] =
    &["NixlConnector", "MooncakeStoreConnector", "MultiConnector"];

/// `vllm/config/attention.py` `AttentionConfig` fields (0.33.0).
pub const ATTENTION_FIELDS: &[&str] = &[
    "backend",
    "minimax_m3_msa_decode_backend",
    "backend_per_kind",
    "flash_attn_version",
    "flash_attn_max_num_splits_for_cuda_graph",
    "tokenspeed_mla_min_split_kv",
    "tq_max_kv_splits_for_cuda_graph",
    "use_trtllm_attention",
    "disable_flashinfer_q_quantization",
    "mla_prefill_backend",
    "use_prefill_query_quantization",
    "trtllm_ragged_backend",
    "indexer_kv_dtype",
    "indexer_sparse_logits",
    "indexer_tp_shard_min_rows",
    "minimax_m3_indexer_cp",
    "hisparse_config",
    "use_non_causal",
    "sparse_mla_force_mqa",
    "sparse_mla_prefill_workspace_factor",
    "flex_attn_block_m",
    "flex_attn_block_n",
    "flex_attn_q_block_size",
    "flex_attn_kv_block_size",
];

/// `HiSparseConfig` fields (0.33.0).
pub const HISPARSE_FIELDS: &[&str] = &["device_buffer_size", "eager_host_mirror"];

/// `vllm/config/speculative.py` `SpeculativeConfig` fields (0.33.0).
pub const SPECULATIVE_FIELDS: &[&str] = &[
    "enforce_eager",
    "num_speculative_tokens",
    "model",
    "method",
    "draft_tensor_parallel_size",
    "tensor_parallel_size",
    "quantization",
    "moe_backend",
    "attention_backend",
    "kv_cache_dtype",
    "max_model_len",
    "revision",
    "code_revision",
    "index_share_for_mtp_iteration",
    "disable_padded_drafter_batch",
    "disable_eagle_block_drop",
    "disable_lookahead_block_hashes",
    "draft_lm_head_quantization",
    "use_local_argmax_reduction",
    "use_heterogeneous_vocab",
    "prompt_lookup_max",
    "prompt_lookup_min",
    "parallel_drafting",
    "target_model_config",
    "target_parallel_config",
    "num_speculative_tokens_per_batch_size",
    "draft_model_config",
    "draft_parallel_config",
    "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob",
    "draft_load_config",
    "rejection_sample_method",
    "synthetic_acceptance_rates",
    "synthetic_acceptance_length",
    "enable_adaptive_verification",
    "draft_sample_method",
    "dspark_draft_topk",
    "xpress_topc",
    "fly_window_size",
    "fly_entropy_threshold",
    "fly_entropy_top_k",
];

/// `vllm/config/compilation.py` `CompilationConfig` fields (0.33.0).
pub const COMPILATION_FIELDS: &[&str] = &[
    "mode",
    "debug_dump_path",
    "cache_dir",
    "compile_cache_save_format",
    "backend",
    "custom_ops",
    "ir_enable_torch_wrap",
    "splitting_ops",
    "compile_mm_encoder",
    "cudagraph_mm_encoder",
    "encoder_cudagraph_token_budgets",
    "encoder_cudagraph_max_vision_items_per_batch",
    "encoder_cudagraph_max_frames_per_batch",
    "cudagraph_decoder_replay",
    "decoder_replay_cudagraph_capture_sizes",
    "decoder_replay_trim_threshold",
    "compile_sizes",
    "compile_ranges_endpoints",
    "inductor_compile_config",
    "inductor_passes",
    "cudagraph_mode",
    "cudagraph_num_of_warmups",
    "cudagraph_capture_sizes",
    "cudagraph_copy_inputs",
    "cudagraph_specialize_lora",
    "use_inductor_graph_partition",
    "pass_config",
    "max_cudagraph_capture_size",
    "dynamic_shapes_config",
    "local_cache_dir",
    "fast_moe_cold_start",
    "enabled_custom_ops",
    "disabled_custom_ops",
    "traced_files",
    "compilation_time",
    "encoder_compilation_time",
    "static_forward_context",
    "static_all_moe_layers",
];

/// `CUDAGraphMode` member names; vLLM upper-cases strings before the lookup.
pub const CUDAGRAPH_MODES: &[&str] = &[
    "NONE",
    "PIECEWISE",
    "FULL",
    "FULL_DECODE_ONLY",
    "FULL_AND_PIECEWISE",
];

/// `vllm/config/cache.py` `CacheDType` literal (0.33.0).
pub const CACHE_DTYPES: &[&str] = &[
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "octave_k3v4",
    "octave_k3v3",
    "octave_k3v3_compact",
    "ultraquant_4bit",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
];

/// KV dtypes some sparse-MLA backend takes (`supported_kv_cache_dtypes` of
/// FlashMLA sparse, FlashInfer MLA sparse and FlashAttention MLA sparse, 0.33.0;
/// which one runs depends on the GPU). On FlashMLA sparse "fp8" is an alias for
/// "fp8_ds_mla".
pub const SPARSE_MLA_DTYPES: &[&str] = &[
    "auto",
    "float16",
    "bfloat16",
    "fp8_ds_mla",
    "fp8",
    "fp8_e4m3",
    "nvfp4_ds_mla",
];

pub const PLATFORMS: &[&str] = &["cuda", "rocm", "cpu"];

/// Checkpoint quantization methods vLLM 0.33 loads (`QuantizationMethods`,
/// vllm/model_executor/layers/quantization/__init__.py:15).
pub const QUANTIZATION_METHODS: &[&str] = &[
    "awq",
    "auto_awq",
    "fp8",
    "fbgemm_fp8",
    "fp_quant",
    "modelopt",
    "modelopt_fp4",
    "modelopt_mxfp8",
    "modelopt_mixed",
    "auto_gptq",
    "gptq",
    "gptq_marlin",
    "awq_marlin",
    "humming",
    "compressed-tensors",
    "experts_int8",
    "quark",
    "moe_wna16",
    "torchao",
    "inc",
    "mxfp4",
    "gpt_oss_mxfp4",
    "deepseek_v4_fp8",
    "online",
    "fp8_per_tensor",
    "fp8_per_block",
    "fp8_per_channel",
    "int8_per_channel_weight_only",
    "nvfp4_per_token",
    "mxfp8",
];

/// pydantic lax-mode int: ints, integral floats, integer strings, and bools.
pub fn lax_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

/// pydantic lax-mode bool: bools, 0/1, and the strings pydantic accepts.
pub fn lax_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_f64() {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
            "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
            _ => None,
        },
        _ => None,
    }
}

/// Python `float(x)` as vLLM applies it to `host_pool_gib`: numbers, bools and
/// numeric strings ("nan" and "inf" included, as in Python).
pub fn py_float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::String(s) => crate::pytext::py_float_text(s),
        _ => None,
    }
}

/// Report keys of `obj` that are not in `known` (vLLM forbids unknown keys),
/// with the closest valid key as a fix that moves the value there.
pub fn check_keys(
    obj: &Map<String, Value>,
    known: &[&str],
    removed: &[&str],
    class: &str,
    path: &FieldPath,
    out: &mut Vec<Diagnostic>,
) {
    for (key, value) in obj {
        // `connectors` beside kv_connector gets its own error (misplaced_connectors).
        if known.contains(&key.as_str()) || (class == "KVTransferConfig" && key == "connectors") {
            continue;
        }
        let at = path.key(key);
        let mut d = Diagnostic::error(
            Code::UnknownKey,
            at.clone(),
            format!(
                "{class} has no field \"{key}\"; vLLM {} rejects unknown keys",
                crate::engines::vllm_0_33::VERSION
            ),
        )
        .given(value)
        .allowed(format!("one of {}", quoted(known)));
        if removed.contains(&key.as_str()) {
            d = d
                .hint(format!(
                    "\"{key}\" was removed from {class} in vLLM {}; remove it",
                    crate::engines::vllm_0_33::VERSION
                ))
                .fix(vec![FixOp::Remove { path: at }]);
        } else if let Some((best, set)) = closest(key, known)
            .and_then(|best| obj.get(best).map(|set| (best, set)))
            // Two objects merge and two lists concatenate (apply_fix's Move):
            // nothing is lost, so those still move.
            .filter(|(_, set)| {
                !(set.is_object() && value.is_object() || set.is_array() && value.is_array())
            })
        {
            // A rename never overwrites what the user set under the right name.
            d = d
                .hint(format!(
                    "did you mean \"{best}\"? {} is already set to {set}, which vLLM reads; remove {at} (its {value} would otherwise replace it)",
                    path.key(best)
                ))
                .fix(vec![FixOp::Remove { path: at }]);
        } else if let Some(best) = closest(key, known) {
            let to = path.key(best);
            let merge = if obj.contains_key(best) {
                ", merged with what is there (the keys already there win)"
            } else {
                ""
            };
            d = d
                .hint(format!(
                    "did you mean \"{best}\"? move the value to {to}{merge}"
                ))
                .fix(vec![FixOp::Move { from: at, to }]);
        } else if let Some((pool_key, pool)) = held_pool(class, obj, value) {
            // An unknown key holding the HiSparseConnector's host_pool_gib
            // (`kv_extra_config: {host_pool_gib: 64}`): the pool moves to where
            // vLLM reads it before the key goes, so the user's value is kept.
            let to = path.key("kv_connector_extra_config").key("host_pool_gib");
            d = d
                .hint(format!(
                    "remove {at}, moving its host_pool_gib {pool} to {to}, where vLLM reads it"
                ))
                .fix(vec![
                    FixOp::Move {
                        from: at.key(pool_key),
                        to,
                    },
                    FixOp::Remove { path: at },
                ]);
        } else {
            d = d
                .hint(format!("remove {at}"))
                .fix(vec![FixOp::Remove { path: at }]);
        }
        out.push(d);
    }
}

/// The host_pool_gib (or a misspelling of it) inside an unknown key of a
/// HiSparseConnector whose own extra config has none: (its key, its value).
fn held_pool<'a>(
    class: &str,
    connector: &Map<String, Value>,
    value: &'a Value,
) -> Option<(&'a str, &'a Value)> {
    if class != "KVTransferConfig"
        || connector.get("kv_connector").and_then(Value::as_str) != Some("HiSparseConnector")
        || connector
            .get("kv_connector_extra_config")
            .and_then(|e| e.get("host_pool_gib"))
            .is_some()
    {
        return None;
    }
    value
        .as_object()?
        .iter()
        .find_map(|(k, v)| is_host_pool_key(k, true).then_some((k.as_str(), v)))
}

/// An "expected TYPE" error at `path` for a value of the wrong type.
pub fn type_error(path: &FieldPath, expected: &str, given: &Value) -> Diagnostic {
    Diagnostic::error(
        Code::InvalidType,
        path.clone(),
        format!("{path} must be {expected}, got {}", kind(given)),
    )
    .given(given)
    .allowed(expected.to_owned())
}

/// Warn about strings that look like shell variables that were never expanded
/// (`"$HOST_POOL_GIB"`, `"${POOL}"`): a quoting mistake in a launch script.
///
/// Iterative, and linear in the document: each node records only its parent
/// and its own step; a path is built only for a string that matches.
pub fn find_shell_variables(value: &Value, path: &FieldPath, out: &mut Vec<Diagnostic>) {
    // (parent node index, step from the parent: a key or a list index)
    let mut nodes: Vec<(usize, Option<Result<&str, usize>>)> = vec![(0, None)];
    let mut stack = vec![(value, 0usize)];
    while let Some((v, id)) = stack.pop() {
        match v {
            Value::String(s) if looks_like_shell_variable(s) => {
                let mut steps = Vec::new();
                let mut at = id;
                while let (parent, Some(step)) = nodes[at] {
                    steps.push(match step {
                        Ok(key) => Seg::Key(key.to_owned()),
                        Err(i) => Seg::Index(i),
                    });
                    at = parent;
                }
                let mut p = path.clone();
                p.0.extend(steps.into_iter().rev());
                out.push(
                    Diagnostic::warning(
                        Code::UnexpandedShellVariable,
                        p.clone(),
                        format!("{p} is {s:?}, which looks like a shell variable that was never expanded"),
                    )
                    .given(v)
                    .hint("use double quotes around the JSON in your launch script so the shell expands it, or write the value itself"),
                );
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    nodes.push((id, Some(Err(i))));
                    stack.push((item, nodes.len() - 1));
                }
            }
            Value::Object(map) => {
                for (k, item) in map.iter().rev() {
                    nodes.push((id, Some(Ok(k.as_str()))));
                    stack.push((item, nodes.len() - 1));
                }
            }
            _ => {}
        }
    }
}

fn looks_like_shell_variable(s: &str) -> bool {
    let s = s.trim();
    let Some(rest) = s.strip_prefix('$') else {
        return false;
    };
    let name = rest
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(rest);
    crate::path::is_identifier(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn suggests_the_field_for_common_typos() {
        assert_eq!(
            closest("kv_extra_config", KV_TRANSFER_FIELDS),
            Some("kv_connector_extra_config")
        );
        assert_eq!(closest("kv_rol", KV_TRANSFER_FIELDS), Some("kv_role"));
        assert_eq!(
            closest("HiSparseConector", KNOWN_CONNECTORS),
            Some("HiSparseConnector")
        );
        assert_eq!(
            closest("device_buffer", HISPARSE_FIELDS),
            Some("device_buffer_size")
        );
        assert_eq!(closest("zzz", HISPARSE_FIELDS), None);
    }

    #[test]
    fn lax_coercions_follow_pydantic() {
        assert_eq!(lax_int(&json!("9000")), Some(9000));
        assert_eq!(lax_int(&json!(4096.0)), Some(4096));
        assert_eq!(lax_int(&json!(4096.5)), None);
        assert_eq!(lax_int(&json!([1])), None);
        assert_eq!(lax_bool(&json!("yes")), Some(true));
        assert_eq!(lax_bool(&json!(2)), None);
        assert_eq!(py_float(&json!("128")), Some(128.0));
        assert!(py_float(&json!("nan")).is_some_and(f64::is_nan));
    }

    #[test]
    fn shell_variables() {
        assert!(looks_like_shell_variable("$HOST_POOL_GIB"));
        assert!(looks_like_shell_variable("${POOL}"));
        assert!(!looks_like_shell_variable("$5"));
        assert!(!looks_like_shell_variable("kv_both"));
    }
}
