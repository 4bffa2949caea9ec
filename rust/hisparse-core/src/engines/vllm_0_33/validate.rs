//! HiSparse validation and the resolved settings, once HiSparse is on
//! (explicitly or inferred): engine requirements, the model, the hot buffer,
//! the host pool. Every check runs; none stops the others.
//!
//! Sources: vLLM 0.33.0 `VllmConfig.__post_init__` (engine checks),
//! `vllm/v1/hisparse/runtime.py` `ResolvedHiSparseConfig` (buffer bounds),
//! `layout.py` (host pool, DeepSeek-V4), and shared/spec/HISPARSE.md §4-§5.

use crate::diagnostic::{Code, Diagnostic, FixOp};
use crate::engines::vllm_0_33::args::ServeArgs;
use crate::engines::vllm_0_33::connectors::{
    ConnectorTree, HiSparseSite, CONNECTORS_WITHOUT_HMA, HISPARSE, MULTI,
};
use crate::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use crate::engines::vllm_0_33::input::{HiSparseInput, Scalars};
use crate::engines::vllm_0_33::misplaced::{
    Misplaced, DEVICE_BUFFER_SIZE, EAGER_HOST_MIRROR, HOST_POOL_GIB,
};
use crate::engines::vllm_0_33::schema::{
    lax_bool, lax_int, py_float, quoted, type_error, HISPARSE_VALIDATED_TOP_CONNECTORS,
    SPARSE_MLA_DTYPES,
};
use crate::engines::vllm_0_33::stages::VllmStage;
use crate::gpu::GpuSpec;
use crate::model::{ModelInfo, Sourced};
use crate::path::FieldPath;
use crate::report::{Provenance, Resolved, ResolvedHiSparse};
use crate::sizes::{self, min_pool_gib, pool_blocks, GIB};
use serde_json::{json, Value};

/// vLLM 0.33's max_model_len for a config.json with no length key
/// (`_get_and_verify_max_len`, vllm/config/model.py:2589).
pub(crate) const VLLM_DEFAULT_MAX_LEN: u64 = 2048;

/// Largest hot buffer: slot indices are int16 (vLLM 0.33 runtime: `iinfo(int16).max + 1`).
pub const MAX_DEVICE_BUFFER_SIZE: u64 = 32768;
/// Sparse-MLA kernel block sizes on CUDA are multiples of 64, and 64 when unset
/// (vLLM 0.33 `get_supported_kernel_block_sizes`).
pub const SPARSE_MLA_BLOCK_SIZE: u64 = 64;
/// Larger than any single host's RAM: likely a unit mistake (e.g. a dotted flag's `64g` = 64e9).
const IMPLAUSIBLE_POOL_GIB: f64 = 16384.0;
const LATE: &str = "vLLM 0.33 reports this only after the model has loaded";
/// When vLLM 0.33 runs `_check_residency_shared_memory` (runtime.py:168-193).
const LATE_SMEM: &str = "vLLM 0.33 checks this late in start-up, when it builds each layer's HiSparse runtime (v1/hisparse/runtime.py:749, HiSparseRuntime.__init__)";

/// The host_pool_gib fixes set, and what that pool holds (a sentence). The
/// joint pass sets it to the start-up minimum after the report's other fixes;
/// with a known GPU, the check sets it to the pool that lets the GPUs bind.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PoolAdvice {
    pub(crate) gib: f64,
    pub(crate) holds: String,
}

/// What start-up needs of the host pool: the smallest pool, in GiB, and the
/// blocks it is counted in.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StartupNeed {
    pub(crate) gib: f64,
    pub(crate) block_size: u32,
    pub(crate) min_blocks: u64,
    pub(crate) host_block_stride: u64,
}

/// The model-dependent part of the resolved settings.
struct Sizing {
    index_topk: Resolved<u32>,
    index_groups: Vec<u32>,
    topk_buffer_width: Resolved<u32>,
    layers: Sourced<u32>,
    kv_cache_dtype: Resolved<String>,
    row_bytes: Option<Resolved<u32>>,
    block_size: Resolved<u32>,
    max_decode_query_len: Resolved<u32>,
    device_buffer_size: Resolved<u32>,
    eager_host_mirror: Resolved<bool>,
    max_model_len: Resolved<u64>,
    min_blocks: u64,
    host_block_stride: Option<Resolved<u64>>,
    min_host_blocks: Resolved<u64>,
    host_block_bytes: Option<Resolved<u64>>,
    needed_gib: Option<f64>,
    /// vLLM's resolver need (bytes per CUDA block) and ours, when known.
    residency_shared_memory: Resolved<u64>,
    triton_resolver_shared_memory: Option<u64>,
}

/// What validation needs from the inputs.
pub(crate) struct Ctx<'a> {
    pub(crate) args: &'a ServeArgs,
    pub(crate) tree: &'a ConnectorTree,
    pub(crate) explicit: Option<&'a HiSparseInput>,
    pub(crate) model: Option<&'a ModelInfo>,
    pub(crate) num_speculative_tokens: Option<Option<u64>>,
    pub(crate) cudagraph_mode: Option<&'a str>,
    pub(crate) scalars: &'a Scalars,
    /// The GPU, when known (`--gpu`): vLLM's resolver shared-memory check.
    pub(crate) gpu: Option<&'a GpuSpec>,
    /// The host pool fixes suggest, when the caller knows better than the start-up minimum.
    pub(crate) advice: Option<&'a PoolAdvice>,
    /// HiSparse settings written in a wrong place (see `misplaced`).
    pub(crate) misplaced: &'a [Misplaced],
}

impl Ctx<'_> {
    /// Fix operations that turn HiSparse off entirely (remove every HiSparse
    /// connector, later ones first so list indices stay valid, and any explicit
    /// hisparse_config): always a valid configuration.
    fn disable_hisparse(&self) -> Vec<FixOp> {
        let mut ops: Vec<FixOp> = self
            .tree
            .sites
            .iter()
            .rev()
            .flat_map(|s| s.removal.clone())
            .collect();
        if let Some(hs) = self.explicit {
            ops.push(FixOp::Remove {
                path: hs.path.clone(),
            });
        }
        ops
    }

    /// Validate HiSparse; returns the resolved settings (None when invalid) and
    /// sets `needed` to what start-up needs of the pool when the model's sizes are known.
    pub(crate) fn validate(
        &self,
        d: &mut Vec<Diagnostic>,
        needed: &mut Option<StartupNeed>,
    ) -> Option<ResolvedHiSparse> {
        let site = self.tree.sites.first();
        let enabled = match (self.explicit, site) {
            (Some(hs), _) => Resolved::new(
                true,
                Provenance::Explicit {
                    path: hs.path.to_string(),
                },
            ),
            (None, Some(s)) => Resolved::new(
                true,
                Provenance::Inferred {
                    connector: s.path.to_string(),
                },
            ),
            (None, None) => unreachable!("validate runs only when HiSparse is configured"),
        };
        self.check_engine(d);
        self.check_hma(d);
        if let Some(top) = &self.tree.top_connector {
            if !HISPARSE_VALIDATED_TOP_CONNECTORS.contains(&top.as_str()) {
                d.push(
                    Diagnostic::warning(
                        Code::ConnectorNotValidated,
                        FieldPath::root("kv_transfer_config").key("kv_connector"),
                        format!("vLLM {} treats HiSparse with top-level connector {top} as a debug/fallback path; NixlConnector, MooncakeStoreConnector and MultiConnector are the validated ones", crate::engines::vllm_0_33::VERSION),
                    )
                    .hint("for P/D decode, use a MultiConnector with NixlConnector (kv_consumer) and HiSparseConnector (kv_both) children"),
                );
            }
        }

        let model = self.model;
        if model.is_none() {
            d.push(
                Diagnostic::error(
                    Code::ModelConfigMissing,
                    FieldPath::root("model"),
                    "HiSparse settings depend on the model, but no model config was given",
                )
                .allowed("a local config.json, or a directory that contains one")
                .hint("pass --model PATH (Python: model=PATH or hf_config=dict)"),
            );
        }
        // Model-dependent sizing; its errors never stop the connector checks below.
        let sizing = model.and_then(|m| self.size(m, d));
        *needed = sizing.as_ref().and_then(|s| {
            Some(StartupNeed {
                gib: s.needed_gib?,
                block_size: s.block_size.value,
                min_blocks: s.min_blocks,
                host_block_stride: s.host_block_stride.as_ref()?.value,
            })
        });
        let Some(site) = site else {
            // A model that cannot use HiSparse gets no connector: its error's fix turns HiSparse off.
            let rejected = d.iter().any(|e| {
                matches!(
                    e.code,
                    Code::ModelNotDsa | Code::DeepseekV4Unsupported | Code::IndexTopkTooLarge
                )
            });
            self.no_connector(sizing.as_ref(), rejected, d);
            return None;
        };
        let host_pool_gib = self.resolve_host_pool(site, sizing.as_ref(), d);
        let s = sizing?;
        let host_pool_gib = host_pool_gib?;
        let host_blocks = s.host_block_stride.as_ref().map(|stride| {
            Resolved::new(
                pool_blocks(host_pool_gib.value, stride.value),
                Provenance::Derived {
                    from: vec!["host_pool_gib".into(), "host_block_stride".into()],
                    rule: "floor(host_pool_gib x 2^30 / host_block_stride)".into(),
                },
            )
        });
        if let (Some(blocks), Some(stride), Some(minimum)) =
            (&host_blocks, &s.host_block_stride, s.needed_gib)
        {
            if blocks.value < s.min_blocks {
                let path = site.host_pool_path();
                let what = format!(
                    "host_pool_gib {} holds {} host blocks of {} bytes, but one {}-token request needs {}",
                    host_pool_gib.value, blocks.value, stride.value, s.max_model_len.value, s.min_blocks
                );
                let (gib, holds) = self.pool_suggestion(Some(&s));
                let diag = if self.scalars.max_model_len_auto {
                    Diagnostic::warning(
                        Code::HostPoolLimitsContext,
                        path.clone(),
                        format!(
                            "{what}; with max_model_len auto, vLLM shortens the context to fit"
                        ),
                    )
                    .hint(format!(
                        "for the full context, set host_pool_gib to {gib} ({holds})"
                    ))
                } else {
                    Diagnostic::error(
                        Code::HostPoolTooSmall,
                        path.clone(),
                        format!("{what} ({LATE})"),
                    )
                    .allowed(format!(
                        "at least {minimum} GiB (ceil(max_model_len / block_size) + 2 = {} blocks)",
                        s.min_blocks
                    ))
                    .hint(format!(
                        "set host_pool_gib to {gib} ({holds}), or lower max_model_len"
                    ))
                };
                d.push(
                    diag.given(&json!(host_pool_gib.value))
                        .fix(vec![FixOp::Set {
                            path,
                            value: sizes::gib_json(gib),
                        }]),
                );
            }
        }
        Some(ResolvedHiSparse {
            enabled,
            connector: site.path.to_string(),
            host_pool_gib,
            device_buffer_size: s.device_buffer_size,
            eager_host_mirror: s.eager_host_mirror,
            index_topk: s.index_topk,
            topk_buffer_width: s.topk_buffer_width,
            max_decode_query_len: s.max_decode_query_len,
            kv_cache_dtype: s.kv_cache_dtype,
            row_bytes: s.row_bytes,
            block_size: s.block_size,
            max_model_len: s.max_model_len,
            sparse_mla_layers: Resolved::new(
                s.layers.value,
                Provenance::Derived {
                    from: vec![s.layers.source],
                    rule: "layers with sparse-MLA KV".into(),
                },
            ),
            host_block_bytes: s.host_block_bytes,
            host_block_stride: s.host_block_stride,
            host_blocks,
            min_host_blocks: s.min_host_blocks,
            index_groups: s.index_groups,
            residency_shared_memory_bytes: Some(s.residency_shared_memory),
            triton_resolver_shared_memory_bytes: s.triton_resolver_shared_memory,
        })
    }

    /// The host_pool_gib a fix sets and what it holds: the caller's advice
    /// when it is at least the start-up minimum, else the minimum.
    fn pool_suggestion(&self, sizing: Option<&Sizing>) -> (f64, String) {
        let needed = sizing.and_then(|s| s.needed_gib);
        if let Some(a) = self.advice.filter(|a| needed.is_none_or(|n| a.gib >= n)) {
            return (a.gib, a.holds.clone());
        }
        match (needed, sizing) {
            (Some(gib), Some(s)) => (
                gib,
                format!(
                    "{gib} GiB is the start-up minimum: it holds one {}-token request at a time; size the pool for your concurrency with hisparse-check --plan (hisparse_rs.plan){}",
                    s.max_model_len.value,
                    // With the GPU named, the pool that lets it bind was offered where it
                    // could be planned (and fits the node's RAM): do not ask for it again.
                    if self.gpu.is_some() {
                        ""
                    } else {
                        ", or give the GPU (--gpu NAME or --gpu-memory-gib) to get the pool that lets the GPUs bind"
                    }
                ),
            ),
            _ => (
                64.0,
                "a placeholder: the model's sizes are unknown, so the start-up minimum is too".to_owned(),
            ),
        }
    }

    /// Everything that follows from the model: top-k, dtype, block size, query
    /// length, hot buffer and host block sizes. None when the model cannot serve HiSparse.
    fn size(&self, model: &ModelInfo, d: &mut Vec<Diagnostic>) -> Option<Sizing> {
        let index_topk = self.check_model(model, d)?;
        let topk_buffer_width = match &model.index_kpool {
            Some(kpool) => Resolved::new(
                sizes::round_up(index_topk.value as u64 + kpool.value.max(1) as u64 - 1, 128) as u32,
                Provenance::Derived {
                    from: vec!["index_topk".into(), kpool.source.clone()],
                    rule: "round_up(index_topk + index_kpool - 1, 128): a pooled top-k keeps the partial pool tail (vLLM 0.33 glm5next get_sparse_topk_buffer_width)".into(),
                },
            ),
            None => Resolved::new(
                index_topk.value,
                Provenance::Derived { from: vec!["index_topk".into()], rule: "the indexer's top-k".into() },
            ),
        };
        if u64::from(topk_buffer_width.value) > MAX_DEVICE_BUFFER_SIZE {
            d.push(
                Diagnostic::error(
                    Code::IndexTopkTooLarge,
                    FieldPath::root("model"),
                    format!(
                        "{} selects {} rows per query, more than the {MAX_DEVICE_BUFFER_SIZE} int16 hot-buffer slots: HiSparse cannot serve it",
                        model.name(),
                        topk_buffer_width.value
                    ),
                )
                .given(&json!(topk_buffer_width.value))
                .allowed(format!("a top-k of at most {MAX_DEVICE_BUFFER_SIZE}"))
                .hint("check index_topk in config.json or --hf-overrides, or serve without HiSparse")
                .fix(self.disable_hisparse()),
            );
            return None;
        }
        let Some(mut layers) = model.sparse_mla_layers.clone().filter(|l| l.value > 0) else {
            d.push(
                Diagnostic::error(
                    Code::ModelNotDsa,
                    FieldPath::root("model"),
                    format!("{} has no sparse-MLA layers (num_hidden_layers, or layer_types entries \"deepseek_sparse_attention\")", model.name()),
                )
                .allowed("a DSA model with at least one sparse-MLA layer")
                // vLLM finds no sparse-MLA cache specs when it lays out the KV
                // cache (v1/hisparse/layout.py:121), after the model has loaded.
                .stage(VllmStage::Workers)
                .hint("fix the model's config.json or --hf-overrides, or serve without HiSparse")
                .fix(self.disable_hisparse()),
            );
            return None;
        };

        // MTP draft layers are sparse-MLA layers too; HiSparse binds them like the
        // target's (vLLM 0.33 hisparse binding: draft_layer).
        let draft_layers = model
            .num_nextn_predict_layers
            .filter(|n| *n > 0 && self.uses_mtp());
        if let Some(n) = draft_layers {
            layers.value = layers.value.saturating_add(n);
            layers.source = format!(
                "{} + config.json:num_nextn_predict_layers (MTP draft)",
                layers.source
            );
        }
        let index_groups = index_groups(
            model.indexer_leaders.as_ref().map(|l| l.value.as_slice()),
            layers.value,
        );
        let (kv_cache_dtype, row_bytes) = self.resolve_dtype(model, d);
        let block_size = self.resolve_block_size(d);
        if model.dims.mixed_layer_kinds {
            d.push(hybrid_block_size(model, block_size.value));
        }
        let max_decode_query_len = self.resolve_query_len(model);
        let device_buffer_size = self.resolve_device_buffer(
            &topk_buffer_width,
            &max_decode_query_len,
            block_size.value,
            d,
        );
        let union_rows = u64::from(max_decode_query_len.value)
            .saturating_mul(u64::from(topk_buffer_width.value));
        let dbs = u64::from(device_buffer_size.value);
        let residency_shared_memory = Resolved::new(
            sizes::vllm_resolver_shared_memory_bytes(dbs, union_rows),
            Provenance::Derived {
                from: vec!["device_buffer_size".into(), "max_decode_query_len".into(), "topk_buffer_width".into()],
                rule: "vLLM 0.33 hisparse_resolve_residency, per CUDA block: 4 x (2 x (max_decode_query_len x top-k + 1) + 3 x ceil(device_buffer_size / 32) + 7) + 2 x device_buffer_size bytes (v1/hisparse/runtime.py _check_residency_shared_memory)".into(),
            },
        );
        let triton_resolver_shared_memory =
            sizes::triton_resolver_shared_memory_bytes(dbs, union_rows);
        let eager_host_mirror = match self
            .explicit
            .and_then(|hs| hs.eager_host_mirror.map(|b| (b, hs)))
        {
            Some((b, hs)) => Resolved::new(
                b,
                Provenance::Explicit {
                    path: hs.path.key("eager_host_mirror").to_string(),
                },
            ),
            None => {
                if let Some(m) = self.misplaced.iter().find(|m| m.field == EAGER_HOST_MIRROR) {
                    let fixed = lax_bool(&m.value).is_none().then(Vec::new);
                    d.push(self.misplaced_setting(m, fixed, "a boolean"));
                }
                Resolved::new(
                    true,
                    Provenance::Default {
                        rule: "HiSparseConfig.eager_host_mirror default (vLLM 0.33)".into(),
                    },
                )
            }
        };
        let auto = self.scalars.max_model_len_auto;
        let max_model_len = match (self.scalars.max_model_len, &model.max_position_embeddings) {
            (None, Some(mpe)) if auto => Resolved::new(
                mpe.value,
                Provenance::Derived {
                    from: vec!["max_model_len=auto".into(), mpe.source.clone()],
                    rule: "auto: vLLM fits max_model_len to memory (host pool included) at start-up; sized here at the model's maximum".into(),
                },
            ),
            (Some(n), _) => Resolved::new(
                n,
                Provenance::Explicit {
                    path: "max_model_len".into(),
                },
            ),
            (None, Some(mpe)) => Resolved::new(
                mpe.value,
                Provenance::Derived {
                    from: vec![mpe.source.clone()],
                    rule: "vLLM's default max_model_len is the model's max_position_embeddings"
                        .into(),
                },
            ),
            // No length key at all: vLLM 0.33 assumes 2048 tokens and logs "The
            // model's config.json does not contain any of the keys to determine
            // the original maximum length of the model" (config/model.py:2589-2595;
            // a RoPE factor other than YaRN's would scale it, :2600-2625, and DSA
            // checkpoints use YaRN).
            (None, None) if model.max_position_embeddings_invalid.is_none() => Resolved::new(
                VLLM_DEFAULT_MAX_LEN,
                Provenance::Derived {
                    from: vec!["config.json: no max_position_embeddings".into()],
                    rule: "vLLM 0.33 assumes 2048 tokens when the model's config.json has none of its length keys (config/model.py:2589-2595)".into(),
                },
            ),
            (None, None) => {
                let error = match &model.max_position_embeddings_invalid {
                    // vLLM crashes comparing a string or list with `<`; on NaN or
                    // 0 it runs with a length it derives wrongly.
                    Some(bad) => Diagnostic::error(
                        Code::MaxModelLenUnknown,
                        FieldPath::root("max_model_len"),
                        format!(
                            "{} max_position_embeddings ({}) is not a positive number of tokens, so the host pool cannot be sized",
                            model.name(),
                            bad.source
                        ),
                    )
                    .given(&bad.value)
                    .hint(if bad.overridden {
                        "pass --max-model-len, or give --hf-overrides a positive integer max_position_embeddings"
                    } else {
                        "pass --max-model-len"
                    }),
                    None => Diagnostic::error(
                        Code::MaxModelLenUnknown,
                        FieldPath::root("max_model_len"),
                        format!(
                            "{} gives no max_position_embeddings, so the host pool cannot be sized",
                            model.name()
                        ),
                    )
                    .hint("pass --max-model-len"),
                };
                d.push(error.allowed("a positive number of tokens"));
                return None;
            }
        };
        let min_blocks = sizes::min_host_blocks(max_model_len.value, block_size.value as u64);
        let min_host_blocks = Resolved::new(
            min_blocks,
            Provenance::Derived {
                from: vec!["max_model_len".into(), "block_size".into()],
                rule: "ceil(max_model_len / block_size) + 2 (vLLM 0.33 HiSparse start-up minimum)"
                    .into(),
            },
        );
        let host_block_bytes = row_bytes.as_ref().map(|rb| {
            Resolved::new(
                sizes::host_block_bytes(block_size.value, rb.value, layers.value),
                Provenance::Derived {
                    from: vec![
                        "block_size".into(),
                        "row_bytes".into(),
                        layers.source.clone(),
                    ],
                    rule: "block_size x row_bytes x sparse_mla_layers".into(),
                },
            )
        });
        let sc = self.scalars;
        let shared_pool = sizes::shared_host_pool(
            &sc.platform,
            sc.parallel,
            self.args.distributed_executor_backend.as_deref(),
        );
        let host_block_stride = host_block_bytes.as_ref().map(|b| {
            if shared_pool {
                Resolved::new(
                    sizes::host_block_stride(b.value, true),
                    Provenance::Derived {
                        from: vec!["host_block_bytes".into(), "tensor_parallel_size".into()],
                        rule: "TP ranks share one host pool, whose blocks are rounded up to the 4 KiB OS page (vLLM 0.33 get_hisparse_host_block_stride; the mp executor, assumed on one node)".into(),
                    },
                )
            } else {
                Resolved::new(
                    b.value,
                    Provenance::Derived { from: vec!["host_block_bytes".into()], rule: "one pool per rank: blocks are packed".into() },
                )
            }
        });
        let needed_gib = host_block_stride
            .as_ref()
            .map(|b| min_pool_gib(min_blocks, b.value));

        Some(Sizing {
            index_topk,
            index_groups,
            topk_buffer_width,
            layers,
            kv_cache_dtype,
            row_bytes,
            block_size,
            max_decode_query_len,
            device_buffer_size,
            eager_host_mirror,
            max_model_len,
            min_blocks,
            min_host_blocks,
            host_block_bytes,
            host_block_stride,
            needed_gib,
            residency_shared_memory,
            triton_resolver_shared_memory,
        })
    }

    /// Where `field` of hisparse_config goes.
    fn hisparse_config_path(&self, field: &str) -> FieldPath {
        self.explicit
            .map(|hs| hs.path.key(field))
            .unwrap_or_else(|| {
                FieldPath::root("attention_config")
                    .key("hisparse_config")
                    .key(field)
            })
    }

    /// A hisparse_config setting written elsewhere: the fix moves the user's
    /// value to hisparse_config, or, when `fixed` holds the edits that make it
    /// valid there (`allowed` says what is), drops it and applies those.
    fn misplaced_setting(
        &self,
        m: &Misplaced,
        fixed: Option<Vec<FixOp>>,
        allowed: &str,
    ) -> Diagnostic {
        let to = self.hisparse_config_path(m.field);
        let message = format!(
            "{} {} is at {}, and vLLM {} {}: it reads {} only from {to}{}",
            m.key(),
            m.value,
            m.from,
            crate::engines::vllm_0_33::VERSION,
            m.fate(),
            m.field,
            if m.rejected {
                ""
            } else {
                ", so it runs with the default"
            }
        );
        let diag = if m.rejected {
            Diagnostic::error(Code::HiSparseSettingMisplaced, m.from.clone(), message)
        } else {
            Diagnostic::warning(Code::HiSparseSettingIgnored, m.from.clone(), message)
        }
        .given(&m.value)
        .allowed(format!("{allowed}, at {to}"));
        match fixed {
            None => diag
                .hint(format!("move your {} to {to}", m.value))
                .fix(vec![FixOp::Move {
                    from: m.from.clone(),
                    to,
                }]),
            Some(ops) => {
                let hint = match ops.is_empty() {
                    true => format!("{} is not {allowed}: remove it", m.value),
                    false => format!(
                        "{} is not {allowed} there: remove it and {}",
                        m.value,
                        super::diagnostics::describe_fix(&ops)
                    ),
                };
                let mut all = vec![FixOp::Remove {
                    path: m.from.clone(),
                }];
                all.extend(ops);
                diag.hint(hint).fix(all)
            }
        }
    }

    /// vLLM turns the hybrid KV cache manager off when any connector in the
    /// tree lacks `SupportsHMA` (unless the user set the flag), and HiSparse
    /// needs it (vLLM 0.33 `VllmConfig`, `KVConnectorFactory.supports_hma_config`).
    fn check_hma(&self, d: &mut Vec<Diagnostic>) {
        if self.args.disable_hybrid_kv_cache_manager.is_some() {
            return; // an explicit flag is checked in check_engine
        }
        let without_hma = self.tree.leaves.iter().filter(|leaf| {
            !leaf.custom_module && CONNECTORS_WITHOUT_HMA.contains(&leaf.name.as_str())
        });
        for leaf in without_hma.chain(&self.tree.empty_multis) {
            let what = if leaf.name == MULTI {
                "A MultiConnector without child connectors".to_owned()
            } else {
                leaf.name.clone()
            };
            d.push(
                Diagnostic::error(
                    Code::ConnectorWithoutHma,
                    leaf.path.key("kv_connector"),
                    format!(
                        "{what} does not support the hybrid KV cache manager, so vLLM {} turns the manager off, and HiSparse requires it",
                        crate::engines::vllm_0_33::VERSION
                    ),
                )
                .given(&json!(leaf.name))
                .allowed("connectors that support it: NixlConnector, MooncakeConnector, MooncakeStoreConnector, OffloadingConnector, SimpleCPUOffloadConnector, ...")
                .hint(format!("remove {} from the connector tree, or replace it with a connector that supports the hybrid KV cache manager", leaf.name))
                .fix(leaf.removal.clone()),
            );
        }
    }

    /// vLLM 0.33 refuses pipeline parallelism with HiSparse
    /// (config/vllm.py:1887). The fix keeps the deployment's GPUs: the
    /// pipeline stages become tensor parallel ranks (TP x PP), or data
    /// parallel replicas when TP x PP does not divide the attention heads
    /// (config/model.py:1562 verify_with_parallel_config).
    fn pipeline_parallel(&self) -> Diagnostic {
        let p = &self.scalars.parallel;
        let (tp, pp, dp) = (p.tp.max(1), p.pp, p.dp.max(1));
        let heads = self
            .model
            .and_then(|m| m.dims.num_attention_heads)
            .unwrap_or(0);
        let root = FieldPath::root;
        let set = |path: FieldPath, value: i64| FixOp::Set {
            path,
            value: json!(value),
        };
        let joined = tp
            .checked_mul(pp)
            .filter(|t| u64::try_from(*t).is_ok_and(|t| heads == 0 || heads % t == 0));
        let (ops, how) = match joined {
            Some(t) => (
                vec![set(root("pipeline_parallel_size"), 1), set(root("tensor_parallel_size"), t)],
                format!("use pipeline_parallel_size 1 and tensor_parallel_size {t} (vllm serve: --pipeline-parallel-size 1 --tensor-parallel-size {t}): the same {t} GPUs per replica, its {pp} pipeline stages as tensor parallel ranks"),
            ),
            None => {
                let n = dp.saturating_mul(pp);
                let mut ops = vec![set(root("pipeline_parallel_size"), 1), set(root("data_parallel_size"), n)];
                if let Some(local) = p.dp_local {
                    ops.push(set(root("data_parallel_size_local"), local.saturating_mul(pp)));
                }
                (ops, format!("use pipeline_parallel_size 1 and data_parallel_size {n} (vllm serve: --pipeline-parallel-size 1 --data-parallel-size {n}): the same GPUs, its {pp} pipeline stages as data parallel replicas of tensor parallel size {tp} (tensor_parallel_size {} does not divide the {heads} attention heads)", tp.saturating_mul(pp)))
            }
        };
        Diagnostic::error(
            Code::PipelineParallelUnsupported,
            root("pipeline_parallel_size"),
            "HiSparse does not support pipeline parallelism",
        )
        .given(&json!(pp))
        .allowed("1")
        .hint(how)
        .fix(ops)
    }

    /// Engine-level requirements (vLLM 0.33 `VllmConfig.__post_init__`, `use_v2_model_runner`).
    fn check_engine(&self, d: &mut Vec<Diagnostic>) {
        let s = self.scalars;
        let root = FieldPath::root;
        let set = |path: FieldPath, value: Value| FixOp::Set { path, value };
        // (broken, code, field, message, given, allowed, hint, fix)
        let requirements = [
            (
                s.platform != "cuda",
                Code::PlatformUnsupported,
                root("platform"),
                "HiSparse currently requires NVIDIA CUDA",
                json!(s.platform),
                "\"cuda\"",
                // vLLM has no --platform flag: it detects the platform when it is
                // imported (vllm/platforms/__init__.py:240
                // resolve_current_platform_cls_qualname); `platform` describes the
                // machine to hisparse-check (--platform, Python platform=).
                Some("serve HiSparse on an NVIDIA GPU with a CUDA build of vLLM (vLLM has no --platform flag: it detects the platform when it starts); then check with hisparse-check --platform cuda (the default; Python: platform=\"cuda\"), which describes the machine, not a vllm serve flag"),
                set(root("platform"), json!("cuda")),
            ),
            (
                s.parallel.dcp > 1,
                Code::DecodeContextParallelUnsupported,
                root("decode_context_parallel_size"),
                "HiSparse does not support decode context parallelism",
                json!(s.parallel.dcp),
                "1",
                None,
                set(root("decode_context_parallel_size"), json!(1)),
            ),
            (
                self.cudagraph_mode == Some("FULL"),
                Code::CudagraphFullUnsupported,
                root("compilation_config").key("cudagraph_mode"),
                "HiSparse does not support cudagraph_mode=FULL; FULL_AND_PIECEWISE (the default) captures FULL graphs for decode batches",
                json!("FULL"),
                "any mode but FULL; FULL_AND_PIECEWISE is the default",
                None,
                set(root("compilation_config").key("cudagraph_mode"), json!("FULL_AND_PIECEWISE")),
            ),
            (
                self.args.scheduler_reserve_full_isl == Some(false),
                Code::SchedulerReserveFullIslDisabled,
                root("scheduler_reserve_full_isl"),
                "HiSparse requires --scheduler-reserve-full-isl: without it, requests admitted against free host blocks can wait on each other's host pages forever",
                json!(false),
                "true (the default)",
                Some("remove --no-scheduler-reserve-full-isl"),
                set(root("scheduler_reserve_full_isl"), json!(true)),
            ),
            (
                self.args.disable_hybrid_kv_cache_manager == Some(true),
                Code::HybridKvCacheManagerDisabled,
                root("disable_hybrid_kv_cache_manager"),
                "HiSparse requires the hybrid KV cache manager",
                json!(true),
                "false (the default)",
                Some("remove --disable-hybrid-kv-cache-manager"),
                set(root("disable_hybrid_kv_cache_manager"), json!(false)),
            ),
            (
                s.v2_runner == Some(false),
                Code::ModelRunnerV2Disabled,
                root("VLLM_USE_V2_MODEL_RUNNER"),
                "HiSparse requires Model Runner V2, but VLLM_USE_V2_MODEL_RUNNER turns it off",
                json!(self.args.vllm_use_v2_model_runner),
                "unset, or a non-zero integer",
                Some("unset VLLM_USE_V2_MODEL_RUNNER (remove VLLM_USE_V2_MODEL_RUNNER=0)"),
                FixOp::Remove { path: root("VLLM_USE_V2_MODEL_RUNNER") },
            ),
        ];
        for (broken, code, path, message, given, allowed, hint, fix) in requirements {
            if !broken {
                continue;
            }
            let mut diag = Diagnostic::error(code, path, message)
                .given(&given)
                .allowed(allowed);
            if let Some(hint) = hint {
                diag = diag.hint(hint);
            }
            d.push(diag.fix(vec![fix]));
        }
        if s.parallel.pp > 1 {
            d.push(self.pipeline_parallel());
        }
        // The GPU named with --gpu is not a flag a fix can change.
        if let Some(g) = self
            .gpu
            .filter(|g| g.platform != "cuda" && s.platform == "cuda")
        {
            d.push(
                Diagnostic::error(
                    Code::PlatformUnsupported,
                    FieldPath::root("gpu"),
                    format!(
                        "HiSparse currently requires NVIDIA CUDA, and {} ({}) is a {} GPU",
                        g.name, g.description, g.platform
                    ),
                )
                .given(&json!(g.name))
                .allowed("an NVIDIA GPU (--gpu h100, h200, b200, ...)")
                .hint("serve HiSparse on NVIDIA GPUs, or without HiSparse on this one"),
            );
        }
    }

    /// `kv_lora_rank: 0` (config.json or `--hf-overrides`): MLA with no latent
    /// KV, nothing for HiSparse to offload; vLLM 0.33 builds the MLA layers'
    /// projections that wide and cannot load the checkpoint's weights into
    /// them (model_load). An override's fix removes it; the model's own,
    /// turns HiSparse off.
    fn zero_kv_lora_rank(&self, model: &ModelInfo) -> Diagnostic {
        let overridden = self
            .args
            .hf_overrides
            .as_ref()
            .and_then(|o| o.get("kv_lora_rank"))
            .is_some();
        let message = format!("kv_lora_rank 0 leaves {} no MLA latent KV for HiSparse to offload, and vLLM 0.33 cannot load the checkpoint into MLA projections that narrow", model.name());
        if overridden {
            let path = FieldPath::root("hf_overrides").key("kv_lora_rank");
            Diagnostic::error(Code::InvalidValue, path.clone(), message)
                .stage(VllmStage::ModelLoad)
                .given(&json!(0))
                .allowed(
                    "a positive kv_lora_rank (the checkpoint's, 512 on DeepSeek-V3.2 and GLM-5)",
                )
                .hint(format!(
                    "remove {path}: the checkpoint's own kv_lora_rank applies"
                ))
                .fix(vec![FixOp::Remove { path }])
        } else {
            Diagnostic::error(Code::ModelNotDsa, FieldPath::root("model"), message)
                .stage(VllmStage::ModelLoad)
                .given(&json!(model.name()))
                .allowed("a DSA model with MLA: a positive kv_lora_rank in config.json")
                .hint("fix the model's config.json, or serve without HiSparse")
                .fix(self.disable_hisparse())
        }
    }

    /// DSA-ness: returns the resolved `index_topk`.
    fn check_model(&self, model: &ModelInfo, d: &mut Vec<Diagnostic>) -> Option<Resolved<u32>> {
        let path = FieldPath::root("model");
        if model.is_deepseek_v4() {
            d.push(
                Diagnostic::error(Code::DeepseekV4Unsupported, path, format!("HiSparse does not support DeepSeek-V4 ({}; vLLM 0.33 HiSparse layout)", model.name()))
                    .given(&json!(model.name()))
                    .allowed("a DSA model with MLA latent KV: DeepSeek-V3.2, GLM-5/5.1/5.2")
                    .hint("serve DeepSeek-V4 without HiSparse: remove the HiSparseConnector and hisparse_config")
                    .fix(self.disable_hisparse()),
            );
            return None;
        }
        let Some(topk) = &model.index_topk else {
            d.push(
                Diagnostic::error(Code::ModelNotDsa, path, format!("HiSparse is only supported for DSA models with index_topk; {} has no index_topk (top level or text_config)", model.name()))
                    .given(&json!(model.name()))
                    .allowed("a DSA model: DeepSeek-V3.2, GLM-5/5.1/5.2 (config.json has index_topk)")
                    .hint("serve this model without HiSparse: remove the HiSparseConnector and hisparse_config")
                    .fix(self.disable_hisparse()),
            );
            return None;
        };
        let missing: Vec<&str> = [
            ("kv_lora_rank", model.kv_lora_rank),
            ("qk_rope_head_dim", model.qk_rope_head_dim),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.is_none().then_some(name))
        .collect();
        if !missing.is_empty() {
            d.push(
                Diagnostic::error(
                    Code::ModelNotDsa,
                    path,
                    format!("{} has index_topk but no MLA latent dimensions ({} missing or not an integer); HiSparse offloads MLA latent KV", model.name(), missing.join(", ")),
                )
                .given(&json!(model.name()))
                .allowed("a DSA model with MLA: kv_lora_rank and qk_rope_head_dim in config.json")
                // vLLM finds no sparse-MLA cache specs when it lays out the KV
                // cache (v1/hisparse/layout.py:121), after the model has loaded.
                .stage(VllmStage::Workers)
                .hint("fix the model's config.json or --hf-overrides, or serve without HiSparse")
                .fix(self.disable_hisparse()),
            );
            return None;
        }
        if model.kv_lora_rank == Some(0) {
            d.push(self.zero_kv_lora_rank(model));
            return None;
        }
        if let (true, Ok(k)) = (model.index_topk_nested, &topk.value) {
            d.push(
                Diagnostic::error(
                    Code::ModelNotDsa,
                    path.clone(),
                    format!("{} has index_topk only under text_config ({}); vLLM {} looks for index_topk on the top-level HF config (hasattr(hf_config, \"index_topk\") in VllmConfig.__post_init__), which transformers' composite config class for it does not expose, so vLLM refuses HiSparse", model.name(), topk.source, crate::engines::vllm_0_33::VERSION),
                )
                .given(&json!(k))
                .allowed("index_topk at the top level of the HF config (config.json or --hf-overrides)")
                .hint(format!("add the top-level index_topk through --hf-overrides '{{\"index_topk\": {k}}}'"))
                .fix(vec![FixOp::Set {
                    path: FieldPath::root("hf_overrides").key("index_topk"),
                    value: json!(k),
                }]),
            );
        }
        match &topk.value {
            Ok(k) => Some(Resolved::new(
                *k,
                if topk.overridden {
                    Provenance::Explicit {
                        path: topk.source.clone(),
                    }
                } else {
                    Provenance::Derived {
                        from: vec![topk.source.clone()],
                        rule: "the model's indexer top-k".into(),
                    }
                },
            )),
            Err(raw) => {
                d.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        FieldPath::root("model"),
                        format!("{} must be a positive integer", topk.source),
                    )
                    .given(raw)
                    .allowed("an integer > 0")
                    .hint("fix index_topk in the model's config.json or in --hf-overrides"),
                );
                None
            }
        }
    }

    fn resolve_dtype(
        &self,
        model: &ModelInfo,
        d: &mut Vec<Diagnostic>,
    ) -> (Resolved<String>, Option<Resolved<u32>>) {
        let path = FieldPath::root("kv_cache_dtype");
        let given = self.scalars.kv_cache_dtype.as_deref();
        let dtype = match given {
            None | Some("auto") => {
                let model_dtype = model
                    .torch_dtype
                    .clone()
                    .unwrap_or_else(|| "bfloat16".into());
                let resolved = if model_dtype == "float16" {
                    "float16"
                } else {
                    "bfloat16"
                };
                let mut from = vec![format!(
                    "kv_cache_dtype={}",
                    given.unwrap_or("auto (default)")
                )];
                if model.torch_dtype.is_some() {
                    from.push("config.json:torch_dtype".into());
                }
                Resolved::new(resolved.to_owned(), Provenance::Derived { from, rule: "\"auto\" stores KV in the model dtype; pass --kv-cache-dtype fp8_ds_mla to halve host memory (656 vs 1152 B/row)".into() })
            }
            Some("fp8") => Resolved::new(
                "fp8_ds_mla".to_owned(),
                Provenance::Derived {
                    from: vec!["kv_cache_dtype=fp8".into()],
                    rule: "FlashMLA sparse treats \"fp8\" as an alias for fp8_ds_mla (vLLM 0.33)"
                        .into(),
                },
            ),
            Some(t) => {
                if !SPARSE_MLA_DTYPES.contains(&t) {
                    d.push(
                        Diagnostic::error(Code::KvCacheDtypeUnsupported, path.clone(), format!("kv_cache_dtype \"{t}\" is not supported by sparse-MLA backends, so HiSparse cannot use it (vLLM 0.33 finds out only when it builds the model's attention layers and selects their backend, in the worker processes)"))
                            .given(&json!(t))
                            .allowed(format!("one of {}", quoted(SPARSE_MLA_DTYPES)))
                            .fix(vec![FixOp::Set { path: path.clone(), value: json!("fp8_ds_mla") }]),
                    );
                }
                Resolved::new(
                    t.to_owned(),
                    Provenance::Explicit {
                        path: "kv_cache_dtype".into(),
                    },
                )
            }
        };
        // 16-bit rows hold kv_lora_rank + qk_rope_head_dim values (a NoPE model
        // stores 512); fp8_ds_mla keeps its 656-byte layout either way.
        // check_model made sure both dims exist.
        let row_bytes = sizes::mla_row_bytes(
            &dtype.value,
            model.kv_lora_rank.unwrap_or(0),
            model.qk_rope_head_dim.unwrap_or(0),
        );
        if row_bytes.is_none() && SPARSE_MLA_DTYPES.contains(&dtype.value.as_str()) {
            d.push(
                Diagnostic::warning(Code::RowBytesUnknown, path, format!("hisparse_rs does not know the host row size of {}, so the host-pool size checks are skipped", dtype.value))
                    .given(&json!(dtype.value)),
            );
        }
        let row = row_bytes.map(|rb| {
            Resolved::new(
                rb,
                Provenance::Derived {
                    from: vec!["kv_cache_dtype".into(), "config.json:kv_lora_rank".into(), "config.json:qk_rope_head_dim".into()],
                    rule: "fp8_ds_mla: 512 e4m3 + 4 fp32 scales + 64 bf16 = 656 B; 16-bit: (kv_lora_rank + qk_rope_head_dim) x 2 B; fp8_e4m3: 1 B each".into(),
                },
            )
        });
        (dtype, row)
    }

    fn resolve_block_size(&self, d: &mut Vec<Diagnostic>) -> Resolved<u32> {
        match self.scalars.block_size {
            None => Resolved::new(SPARSE_MLA_BLOCK_SIZE as u32, Provenance::Default { rule: "sparse-MLA kernel block size on CUDA (vLLM 0.33 get_supported_kernel_block_sizes)".into() }),
            Some(b) => {
                if b % SPARSE_MLA_BLOCK_SIZE != 0 {
                    let path = FieldPath::root("block_size");
                    d.push(
                        Diagnostic::error(Code::BlockSizeUnsupported, path.clone(), format!("block_size {b} is not a sparse-MLA kernel block size; DSA models with HiSparse need a multiple of {SPARSE_MLA_BLOCK_SIZE} ({LATE})"))
                            .given(&json!(b))
                            .allowed(format!("a multiple of {SPARSE_MLA_BLOCK_SIZE} (64, 128, 256, ...)"))
                            .fix(vec![FixOp::Set { path, value: json!(SPARSE_MLA_BLOCK_SIZE) }]),
                    );
                }
                Resolved::new(u32::try_from(b).unwrap_or(u32::MAX), Provenance::Explicit { path: "block_size".into() })
            }
        }
    }

    fn resolve_query_len(&self, model: &ModelInfo) -> Resolved<u32> {
        let from_spec = |n: u64, source: &str| {
            Resolved::new(
                u32::try_from(n.saturating_add(1)).unwrap_or(u32::MAX),
                Provenance::Derived {
                    from: vec![source.to_owned()],
                    rule: "1 + num_speculative_tokens (vLLM 0.33 max_decode_query_len on Model Runner V2)".into(),
                },
            )
        };
        let plain = || {
            Resolved::new(
                1,
                Provenance::Default {
                    rule: "1 without speculative decoding".into(),
                },
            )
        };
        match self.num_speculative_tokens {
            None => plain(),
            Some(Some(n)) => from_spec(n, "speculative_config.num_speculative_tokens"),
            // vLLM needs the count (resolve reports its absence); size as the
            // checkpoint's MTP depth would, so the other checks still run.
            Some(None) => match model.num_nextn_predict_layers.filter(|n| *n > 0) {
                Some(n) if self.spec_method_is_mtp() => {
                    from_spec(n as u64, "config.json:num_nextn_predict_layers")
                }
                _ => plain(),
            },
        }
    }

    /// Speculative decoding with the checkpoint's own MTP layers.
    fn uses_mtp(&self) -> bool {
        self.num_speculative_tokens.is_some() && self.spec_method_is_mtp()
    }

    fn spec_method_is_mtp(&self) -> bool {
        let method = self
            .args
            .speculative_config
            .as_ref()
            .and_then(|s| s.get("method"))
            .and_then(Value::as_str);
        matches!(method, Some(m) if m == "mtp" || m.ends_with("_mtp"))
    }

    fn resolve_device_buffer(
        &self,
        topk: &Resolved<u32>,
        qlen: &Resolved<u32>,
        block_size: u32,
        d: &mut Vec<Diagnostic>,
    ) -> Resolved<u32> {
        let k = topk.value as u64;
        let q = qlen.value as u64;
        let min = q * k;
        let default = (q + 1) * k;
        let path = self.hisparse_config_path(DEVICE_BUFFER_SIZE);
        let explicit = self.explicit.and_then(|hs| hs.device_buffer_size);
        let value = explicit.unwrap_or(default);
        let smem = self.gpu.map(|g| (g, g.max_shared_memory_per_block));
        // The largest buffer the bounds (and the GPU's shared memory) allow at this query length.
        let limit = |union: u64| match smem {
            Some((_, avail)) => {
                sizes::largest_resolver_buffer(union, MAX_DEVICE_BUFFER_SIZE, avail)
            }
            None => (union <= MAX_DEVICE_BUFFER_SIZE).then_some(MAX_DEVICE_BUFFER_SIZE),
        };
        let hi = limit(min);
        let allowed = match (hi, smem) {
            (Some(hi), Some((g, avail))) if hi < MAX_DEVICE_BUFFER_SIZE => format!(
                "{min} <= device_buffer_size <= {hi} (the most whose vLLM resolver fits the {avail} B of shared memory per block of {})",
                g.name
            ),
            (Some(_), _) => format!("{min} <= device_buffer_size <= {MAX_DEVICE_BUFFER_SIZE}"),
            (None, Some((g, avail))) if min <= MAX_DEVICE_BUFFER_SIZE => format!(
                "no size fits at max_decode_query_len {q}: vLLM's resolver for {q} x {k} rows needs more than the {avail} B of shared memory per block of {}",
                g.name
            ),
            (None, _) => format!(
                "no size fits: {q} x {k} rows exceed the {MAX_DEVICE_BUFFER_SIZE} int16 slots"
            ),
        };
        // One target for every fix below: the user's query length when a buffer
        // fits it, else the widest query (1 + n speculative tokens) whose rows do,
        // with the default buffer clamped into that query's bounds. So the fixes
        // of this report agree with each other. (size() already refused a top-k
        // wider than all slots.)
        let target = (1..=q.min(MAX_DEVICE_BUFFER_SIZE / k.max(1)))
            .rev()
            .find_map(|q_fit| {
                let lo = q_fit * k;
                let hi = limit(lo)?;
                // Below the int16 limit, stay on a block boundary when that still fits.
                let hi = match block_size as u64 {
                    bs if bs > 0 && hi < MAX_DEVICE_BUFFER_SIZE && hi / bs * bs >= lo => {
                        hi / bs * bs
                    }
                    _ => hi,
                };
                Some((q_fit, ((q_fit + 1) * k).clamp(lo, hi)))
            });
        let target_ops = target.map(|(q_fit, v)| {
            let spec = FieldPath::root("speculative_config");
            let set = FixOp::Set {
                path: path.clone(),
                value: json!(v),
            };
            match q_fit {
                _ if q_fit == q => vec![set],
                1 => vec![FixOp::Remove { path: spec }, set],
                n => vec![
                    FixOp::Set {
                        path: spec.key("num_speculative_tokens"),
                        value: json!(n - 1),
                    },
                    set,
                ],
            }
        });
        let fix = |d: Diagnostic| {
            let d = d.allowed(allowed.clone());
            match &target_ops {
                Some(ops) => d.fix(ops.clone()),
                None => d.hint("serve without speculative decoding, or use a GPU with more shared memory per block"),
            }
        };
        if explicit.is_none() {
            if let Some(m) = self
                .misplaced
                .iter()
                .find(|m| m.field == DEVICE_BUFFER_SIZE)
            {
                let fits = lax_int(&m.value)
                    .and_then(|n| u64::try_from(n).ok())
                    .is_some_and(|n| n >= min && hi.is_some_and(|hi| n <= hi));
                let fixed = match (fits, &target_ops) {
                    (true, _) => None,
                    (false, Some(ops)) => Some(ops.clone()),
                    (false, None) => Some(Vec::new()),
                };
                d.push(self.misplaced_setting(m, fixed, &allowed));
            }
        }
        let need = sizes::vllm_resolver_shared_memory_bytes(value, min);
        if value < min {
            d.push(fix(
                Diagnostic::error(
                    Code::DeviceBufferTooSmall,
                    path.clone(),
                    format!("device_buffer_size {value} is smaller than max_decode_query_len x {} = {q} x {k} = {min}: every decode query's top-k must fit ({LATE})", topk_name(topk)),
                )
                .given(&json!(value)),
            ));
        } else if value > MAX_DEVICE_BUFFER_SIZE {
            let origin = if explicit.is_some() {
                ""
            } else {
                " (the default: (max_decode_query_len + 1) x top-k)"
            };
            d.push(fix(
                Diagnostic::error(
                    Code::DeviceBufferTooLarge,
                    path.clone(),
                    format!("device_buffer_size {value}{origin} exceeds the int16 slot-index limit of {MAX_DEVICE_BUFFER_SIZE} ({LATE})"),
                )
                .given(&json!(value)),
            ));
        } else if let Some((g, avail)) = smem.filter(|(_, avail)| need > *avail) {
            // vLLM's own message (runtime.py:186-193), then where it comes from.
            d.push(fix(
                Diagnostic::error(
                    Code::ResidencySharedMemoryExceeded,
                    path.clone(),
                    format!(
                        "HiSparse residency resolution needs {need} B of shared memory per block for device_buffer_size={value} and {min} rows per request (decode query length x index_topk), but the device allows {avail} B ({}: {}). Lower device_buffer_size or num_speculative_tokens. ({LATE_SMEM})",
                        g.name, g.shared_memory_source
                    ),
                )
                .given(&json!(value)),
            ));
        } else if explicit.is_some() && block_size > 0 && value % block_size as u64 != 0 {
            let up = value.div_ceil(block_size as u64) * block_size as u64;
            let mut w = Diagnostic::warning(
                Code::DeviceBufferUnaligned,
                path.clone(),
                format!("device_buffer_size {value} is not a multiple of the {block_size}-token block size, so {} padding rows per hot group are allocated and never used", up - value),
            )
            .given(&json!(value));
            if hi.is_some_and(|hi| up <= hi) {
                w = w.fix(vec![FixOp::Set {
                    path: path.clone(),
                    value: json!(up),
                }]);
            }
            d.push(w);
        }
        let value = u32::try_from(value).unwrap_or(u32::MAX);
        match (explicit, self.explicit) {
            (Some(_), Some(hs)) => Resolved::new(value, Provenance::Explicit { path: hs.path.key("device_buffer_size").to_string() }),
            _ => Resolved::new(
                value,
                Provenance::Derived {
                    from: vec!["max_decode_query_len".into(), "index_topk".into()],
                    rule: "(max_decode_query_len + 1) x index_topk: every decode query's top-k plus one top-k of LRU slack (vLLM 0.33 ResolvedHiSparseConfig)".into(),
                },
            ),
        }
    }

    fn resolve_host_pool(
        &self,
        site: &HiSparseSite,
        sizing: Option<&Sizing>,
        d: &mut Vec<Diagnostic>,
    ) -> Option<Resolved<f64>> {
        let path = site.host_pool_path();
        let needed_gib = sizing.and_then(|s| s.needed_gib);
        let (suggestion, holds) = self.pool_suggestion(sizing);
        let set = vec![FixOp::Set {
            path: path.clone(),
            value: json!(suggestion),
        }];
        let allowed = match needed_gib {
            Some(g) => {
                format!("a number of GiB > 0; at least {g} for this model and max_model_len")
            }
            None => "a number of GiB > 0".to_owned(),
        };
        // Several host_pool_gib values: one is read (the one in place, else the
        // first misplaced one, which the fix moves there); each other is flagged.
        // (A second HiSparseConnector's own pool is its error's: multiple_hisparse_connectors.)
        let in_other_hisparse = |m: &Misplaced| {
            let connector = m.from.parent().parent();
            connector != site.path
                && crate::engines::vllm_0_33::fixes::Lookup::at(
                    self.args,
                    &connector.key("kv_connector"),
                )
                .and_then(Value::as_str)
                    == Some("HiSparseConnector")
        };
        let pools: Vec<&Misplaced> = self
            .misplaced
            .iter()
            .filter(|m| m.field == HOST_POOL_GIB && !in_other_hisparse(m))
            .collect();
        let winner = match &site.host_pool_gib {
            Some(raw) => Some((path.clone(), raw.clone())),
            None if site.host_pool_misplaced => None,
            None => pools.first().map(|m| (path.clone(), m.value.clone())),
        };
        if let Some((at, value)) = &winner {
            let skip = usize::from(site.host_pool_gib.is_none());
            for m in pools.iter().skip(skip) {
                d.push(
                    Diagnostic::warning(
                        Code::HostPoolGibShadowed,
                        m.from.clone(),
                        format!(
                            "host_pool_gib {} at {} is not the pool vLLM {} uses: host_pool_gib {value} at {at} is{}; vLLM {}",
                            m.value,
                            m.from,
                            crate::engines::vllm_0_33::VERSION,
                            if site.host_pool_gib.is_some() { "" } else { " (once the fix of host_pool_gib_misplaced moves it there)" },
                            m.fate(),
                        ),
                    )
                    .given(&m.value)
                    .hint(format!("remove {} (if it is the pool you meant, write it at {at} instead)", m.from)),
                );
            }
        }
        let Some(raw) = &site.host_pool_gib else {
            if site.host_pool_misplaced {
                return None; // its unknown_key error moves the user's value into place
            }
            if let Some(m) = pools.first() {
                d.push(self.misplaced_host_pool(m, site, sizing, &allowed));
                return None;
            }
            d.push(
                Diagnostic::error(Code::HostPoolGibMissing, path.clone(), format!("HiSparseConnector at {} requires host_pool_gib in its kv_connector_extra_config ({LATE})", site.path))
                    .allowed(allowed)
                    .hint(format!("set {path} to {suggestion} ({holds})"))
                    .fix(set),
            );
            return None;
        };
        let Some(gib) = py_float(raw) else {
            // "128GiB" / "128g": keep the user's number rather than shrink the pool.
            let (hint, fix) = match raw.as_str().and_then(gib_with_unit) {
                Some(meant) => {
                    let value = needed_gib.map_or(meant, |n| meant.max(n));
                    (
                        format!("host_pool_gib is a plain number of GiB: write {value}, not {raw}"),
                        vec![FixOp::Set {
                            path: path.clone(),
                            value: json!(value),
                        }],
                    )
                }
                None => (
                    format!("set {path} to a number of GiB: {suggestion} ({holds})"),
                    set,
                ),
            };
            d.push(
                type_error(&path, "a number of GiB", raw)
                    // float(host_pool_gib), config/kv_transfer.py:45, as the
                    // KV cache is laid out (v1/hisparse/layout.py:86).
                    .stage(VllmStage::Workers)
                    .allowed(allowed)
                    .hint(hint)
                    .fix(fix),
            );
            return None;
        };
        if !(gib * GIB).is_finite() {
            d.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    path.clone(),
                    format!("host_pool_gib {gib} is not a finite size: vLLM {} crashes on int(host_pool_gib * 2**30)", crate::engines::vllm_0_33::VERSION),
                )
                .stage(VllmStage::Workers)
                .given(raw)
                .allowed(allowed)
                .hint(format!("set {path} to {suggestion} ({holds})"))
                .fix(set),
            );
            return None;
        }
        if gib > IMPLAUSIBLE_POOL_GIB {
            let mut w = Diagnostic::warning(
                Code::HostPoolImplausible,
                path.clone(),
                format!("host_pool_gib {gib} GiB is more host RAM than any single machine has; host_pool_gib is already in GiB"),
            )
            .given(raw);
            // A size suffix (`128G` in the JSON, `64g` on a dotted flag) that
            // vLLM expanded to bytes: the number before it is the GiB meant.
            if let Some((n, suffix, factor)) = crate::pytext::suffixed_size(gib) {
                w = w
                    .hint(format!(
                        "{n}{suffix} is {n} x {factor} (vLLM expands K/M/G/T size suffixes in its JSON and dotted flags); write the GiB as a plain number: set {path} to {n}"
                    ))
                    .fix(vec![FixOp::Set { path: path.clone(), value: json!(n) }]);
            }
            d.push(w);
        }
        if raw.is_boolean() {
            d.push(
                Diagnostic::warning(
                    Code::BoolAsNumber,
                    path.clone(),
                    format!("host_pool_gib is the boolean {raw}, which vLLM reads as {gib} GiB"),
                )
                .given(raw)
                .fix(set.clone()),
            );
        }
        if gib <= 0.0 {
            d.push(
                Diagnostic::error(
                    Code::HostPoolGibNotPositive,
                    path.clone(),
                    "HiSparseConnector host_pool_gib must be positive",
                )
                .given(raw)
                .allowed(allowed)
                .hint(format!("set {path} to {suggestion} ({holds})"))
                .fix(set),
            );
            return None;
        }
        Some(Resolved::new(
            gib,
            Provenance::Explicit {
                path: path.to_string(),
            },
        ))
    }

    /// The user's host_pool_gib as it would go into the connector: itself when
    /// it starts there, else the value a fix should write instead and why.
    fn usable_pool(&self, raw: &Value, sizing: Option<&Sizing>) -> Result<f64, (f64, String)> {
        let (suggestion, holds) = self.pool_suggestion(sizing);
        let needed = sizing.and_then(|s| s.needed_gib);
        let Some(gib) = py_float(raw) else {
            return Err(match raw.as_str().and_then(gib_with_unit) {
                Some(meant) => (
                    needed.map_or(meant, |n| meant.max(n)),
                    format!("host_pool_gib is a plain number of GiB, not {raw}"),
                ),
                None => (suggestion, format!("{raw} is not a number of GiB; {holds}")),
            });
        };
        let blocks = sizing.and_then(|s| {
            let stride = s.host_block_stride.as_ref()?.value;
            Some((pool_blocks(gib, stride), s.min_blocks, s.block_size.value))
        });
        match blocks {
            _ if !((gib * GIB).is_finite() && gib > 0.0) || raw.is_boolean() => Err((
                suggestion,
                format!("{raw} is not a positive number of GiB; {holds}"),
            )),
            Some((have, need, block_size)) if have < need => Err((
                suggestion,
                format!("{gib} GiB holds {have} host blocks of {block_size} tokens, fewer than the {need} that start-up needs as given; {holds}"),
            )),
            _ => Ok(gib),
        }
    }

    /// host_pool_gib written where vLLM does not read it, and none where it
    /// does: move the user's value into the HiSparseConnector.
    fn misplaced_host_pool(
        &self,
        m: &Misplaced,
        site: &HiSparseSite,
        sizing: Option<&Sizing>,
        allowed: &str,
    ) -> Diagnostic {
        let to = site.host_pool_path();
        let spelled = if m.key() == HOST_POOL_GIB {
            String::new()
        } else {
            format!(" ({} reads as a misspelling of host_pool_gib)", m.key())
        };
        let diag = Diagnostic::error(
            Code::HostPoolGibMisplaced,
            m.from.clone(),
            format!(
                "host_pool_gib {} is at {}{spelled}, and vLLM {} {}: it reads host_pool_gib only from the HiSparseConnector's kv_connector_extra_config ({to}), which has none, so start-up fails (HiSparseConnector requires host_pool_gib)",
                m.value,
                m.from,
                crate::engines::vllm_0_33::VERSION,
                m.fate()
            ),
        )
        // Where pydantic rejects the key (hisparse_config), vLLM stops at its parser.
        .stage(if m.rejected { VllmStage::Argparse } else { VllmStage::Workers })
        .given(&m.value)
        .allowed(format!("{allowed}, at {to}"));
        match self.usable_pool(&m.value, sizing) {
            Ok(_) => diag
                .hint(format!("move your {} to {to}", m.value))
                .fix(vec![FixOp::Move {
                    from: m.from.clone(),
                    to,
                }]),
            Err((value, why)) => diag
                .hint(format!("move it to {to} as {value}: {why}"))
                .fix(vec![
                    FixOp::Remove {
                        path: m.from.clone(),
                    },
                    FixOp::Set {
                        path: to,
                        value: json!(value),
                    },
                ]),
        }
    }

    /// `hisparse_config` is set but no HiSparseConnector exists anywhere: add
    /// one, with the host_pool_gib the user wrote elsewhere when there is one.
    fn no_connector(&self, sizing: Option<&Sizing>, rejected: bool, d: &mut Vec<Diagnostic>) {
        let Some(hs) = self.explicit else { return };
        if rejected {
            d.push(self.without_connector(hs).hint(format!(
                "this model cannot use HiSparse (see its error): remove {}",
                hs.path
            )));
            return;
        }
        let misplaced = self.misplaced.iter().find(|m| m.field == HOST_POOL_GIB);
        let pool = match misplaced.map(|m| self.usable_pool(&m.value, sizing)) {
            Some(Ok(gib)) => gib,
            Some(Err((gib, _))) => gib,
            None => self.pool_suggestion(sizing).0,
        };
        let Some(add) = add_hisparse_connector(self.args.kv_transfer_config.as_ref(), pool) else {
            let mut diag = self.without_connector(hs);
            diag = diag.hint(format!(
                "add a HiSparseConnector to kv_transfer_config, or remove {}",
                hs.path
            ));
            d.push(diag);
            return;
        };
        let mut ops: Vec<FixOp> = misplaced
            .map(|m| FixOp::Remove {
                path: m.from.clone(),
            })
            .into_iter()
            .collect();
        ops.extend(add);
        let diag = match misplaced.filter(|m| m.rejected) {
            // vLLM's HiSparseConfig rejects the key first, while the flags are
            // parsed: the message says that refusal, at its stage.
            Some(m) => self.rejected_without_connector(hs, &m.from),
            None => self.without_connector(hs),
        };
        d.push(diag.fix(ops));
    }

    /// [`Self::without_connector`] when the host_pool_gib is where pydantic
    /// refuses the key (`hisparse_config`): vLLM 0.33 stops while it parses
    /// the flags (engine/arg_utils.py:372 `TypeAdapter(cls).validate_json`,
    /// config/utils.py:71 `extra="forbid"`; HiSparseConfig has
    /// device_buffer_size and eager_host_mirror only, config/attention.py:18).
    fn rejected_without_connector(&self, hs: &HiSparseInput, key: &FieldPath) -> Diagnostic {
        Diagnostic::error(
            Code::HiSparseWithoutConnector,
            hs.path.clone(),
            format!("hisparse_config is set but no HiSparseConnector is configured anywhere in kv_transfer_config, so there is no host pool; vLLM 0.33 refuses {key} first, while it parses the flags: HiSparseConfig has no host_pool_gib field (the pool is the HiSparseConnector's kv_connector_extra_config.host_pool_gib)"),
        )
        .stage(VllmStage::Argparse)
        .allowed("hisparse_config together with a HiSparseConnector in kv_transfer_config")
    }

    fn without_connector(&self, hs: &HiSparseInput) -> Diagnostic {
        Diagnostic::error(
            Code::HiSparseWithoutConnector,
            hs.path.clone(),
            format!("hisparse_config is set but no HiSparseConnector is configured anywhere in kv_transfer_config, so there is no host pool ({LATE})"),
        )
        .allowed("hisparse_config together with a HiSparseConnector in kv_transfer_config")
    }
}

/// The edit that adds a HiSparseConnector (kv_both, `host_pool_gib`) to a
/// `--kv-transfer-config` (None when that is not an object or null): the
/// connector alone, appended to a MultiConnector, or a MultiConnector around
/// the existing connector and it. None when the config is not an object.
pub(crate) fn add_hisparse_connector(kv: Option<&Value>, host_pool_gib: f64) -> Option<Vec<FixOp>> {
    let child = json!({
        "kv_connector": HISPARSE,
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"host_pool_gib": sizes::gib_json(host_pool_gib)},
    });
    let top = FieldPath::root("kv_transfer_config");
    match kv {
        None | Some(Value::Null) => Some(vec![FixOp::Set {
            path: top,
            value: child,
        }]),
        Some(Value::Object(obj)) => match obj.get("kv_connector").and_then(Value::as_str) {
            Some(MULTI) => {
                let list = top.key("kv_connector_extra_config").key("connectors");
                let in_extra = obj
                    .get("kv_connector_extra_config")
                    .and_then(|e| e.get("connectors"));
                Some(vec![match (in_extra, obj.get("connectors")) {
                    (Some(Value::Array(l)), _) if !l.is_empty() => FixOp::Set {
                        path: list.index(l.len()),
                        value: child,
                    },
                    // Misplaced children: join them (their fix moves them all in).
                    (_, Some(Value::Array(l))) => FixOp::Set {
                        path: top.key("connectors").index(l.len()),
                        value: child,
                    },
                    // One connector object instead of a list: list it, and the new one.
                    (Some(one @ Value::Object(_)), _)
                        if one.get("kv_connector").is_some_and(Value::is_string) =>
                    {
                        return Some(vec![
                            FixOp::Move {
                                from: list.clone(),
                                to: list.index(0),
                            },
                            FixOp::Set {
                                path: list.index(1),
                                value: child,
                            },
                        ]);
                    }
                    _ => FixOp::Set {
                        path: list,
                        value: json!([child]),
                    },
                }])
            }
            // The connector moves into a MultiConnector (so other fixes of it
            // stay with it), beside the new one.
            Some(_) => {
                let list = top.key("kv_connector_extra_config").key("connectors");
                Some(vec![
                    FixOp::Move {
                        from: top.clone(),
                        to: list.index(0),
                    },
                    FixOp::Set {
                        path: top.key("kv_connector"),
                        value: json!(MULTI),
                    },
                    FixOp::Set {
                        path: top.key("kv_role"),
                        value: obj.get("kv_role").cloned().unwrap_or(json!("kv_both")),
                    },
                    FixOp::Set {
                        path: list.index(1),
                        value: child,
                    },
                ])
            }
            None => Some(vec![FixOp::Set {
                path: top,
                value: child,
            }]),
        },
        // An empty list (whose fix removes it): the connector replaces it.
        Some(Value::Array(items)) if items.is_empty() => Some(vec![FixOp::Set {
            path: top,
            value: child,
        }]),
        // A list of connectors (whose fix wraps it in a MultiConnector): join it.
        Some(Value::Array(items)) => Some(vec![FixOp::Set {
            path: top.index(items.len()),
            value: child,
        }]),
        Some(_) => None,
    }
}

/// How messages name the top-k the hot buffer is sized by.
fn topk_name(width: &Resolved<u32>) -> &'static str {
    match &width.provenance {
        Provenance::Derived { from, .. } if from.len() > 1 => "topk_buffer_width",
        _ => "index_topk",
    }
}

/// `"128GiB"`, `"128 g"`, `"1T"` -> the number of GiB meant, for fixes.
fn gib_with_unit(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let number: f64 = t[..split].parse().ok()?;
    let scale = match t[split..].trim().to_ascii_lowercase().as_str() {
        "g" | "gb" | "gib" => 1.0,
        "t" | "tb" | "tib" => 1024.0,
        "m" | "mb" | "mib" => 1.0 / 1024.0,
        _ => return None,
    };
    Some(number * scale).filter(|g| g.is_finite() && *g > 0.0)
}

/// More layers than any real model has: beyond this the per-layer group list
/// is left empty rather than allocated (configs can claim u32::MAX layers).
const MAX_LISTED_LAYERS: u32 = 4096;

/// Index group of each host-pool layer: sparse-MLA layers in order, then MTP
/// draft layers. A layer that runs its own indexer starts a group; one that
/// reuses the previous indexer's top-k (IndexShare, GLM-5.2) joins it; draft
/// layers run their own indexer. Empty beyond [`MAX_LISTED_LAYERS`] layers.
fn index_groups(leaders: Option<&[bool]>, layers: u32) -> Vec<u32> {
    if layers > MAX_LISTED_LAYERS {
        return Vec::new();
    }
    let mut group = 0u32;
    (0..layers as usize)
        .map(|i| {
            // The first layer always leads: there is no earlier indexer to reuse.
            let leads = leaders.and_then(|l| l.get(i)).copied().unwrap_or(true);
            if leads && i > 0 {
                group += 1;
            }
            group
        })
        .collect()
}

/// vLLM 0.33 sizes the KV cache blocks of a hybrid model (linear-attention
/// layers beside the sparse-MLA ones, GLM-5.3-Flash) so that one attention
/// page holds a linear-attention state (`Platform._align_hybrid_block_size`,
/// vllm/platforms/interface.py:940, when it builds the model's layers): a
/// block of thousands of tokens, overriding `--block-size`. The state sizes
/// come from each model's code, which is not modelled here.
fn hybrid_block_size(model: &ModelInfo, block_size: u32) -> Diagnostic {
    Diagnostic::warning(
        Code::HybridBlockSizeUnknown,
        FieldPath::root("block_size"),
        format!(
            "{} has linear-attention layers beside its sparse-MLA ones: vLLM {} raises the KV cache block size until one attention page holds a linear-attention state (Platform._align_hybrid_block_size), so its host block size, stride and count, and the smallest host pool that starts, differ from these, which are for block_size {block_size}",
            model.name(),
            crate::engines::vllm_0_33::VERSION
        ),
    )
    .hint("the host-pool figures here are for the given block size; vLLM logs the block size it picks (\"Setting attention block size to N tokens\")")
}

#[cfg(test)]
mod index_group_tests {
    use super::index_groups;

    #[test]
    fn shared_indexers_join_the_previous_group_and_draft_layers_lead() {
        // Layers 0, 1 lead; 2, 3 reuse layer 1's top-k; then one MTP draft layer.
        assert_eq!(
            index_groups(Some(&[true, true, false, false]), 5),
            vec![0, 1, 1, 1, 2]
        );
        assert_eq!(index_groups(None, 3), vec![0, 1, 2]);
        assert!(index_groups(None, u32::MAX).is_empty());
    }
}
