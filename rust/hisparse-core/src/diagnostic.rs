//! Diagnostics: every error and warning is a value with a stable code, the
//! field path it concerns, what was given, what is allowed, a hint, and a
//! machine-applicable fix (a list of [`FixOp`]s on the JSON form of
//! [`crate::ServeArgs`]) that makes the diagnostic go away when applied.

use crate::limits::MAX_JSON_DEPTH;
use crate::path::{FieldPath, Seg};
use crate::stage::{SglangStage, VllmStage};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Error or warning. Errors make a configuration invalid; warnings never do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

macro_rules! codes {
    ($($variant:ident => $text:literal,)*) => {
        /// Stable diagnostic codes. Tests and tools match on these, never on
        /// message text. New codes may be added; existing ones never change.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum Code {
            $(#[serde(rename = $text)] $variant,)*
        }

        impl Code {
            /// The stable string form, e.g. `"missing_kv_role"`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $text,)* }
            }

            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];
        }
    };
}

codes! {
    // Shape and type of the input (vLLM rejects these while parsing).
    InvalidJson => "invalid_json",
    InvalidType => "invalid_type",
    InvalidValue => "invalid_value",
    UnknownKey => "unknown_key",
    InputTooDeep => "input_too_deep",
    InputTooLarge => "input_too_large",
    // The KV connector tree.
    ConnectorsListAtTopLevel => "connectors_list_at_top_level",
    ConnectorNotObject => "connector_not_object",
    ConnectorsNotList => "connectors_not_list",
    MisplacedConnectors => "misplaced_connectors",
    EmptyMultiConnector => "empty_multi_connector",
    MissingKvRole => "missing_kv_role",
    MissingKvConnector => "missing_kv_connector",
    UnknownConnector => "unknown_connector",
    MultipleHiSparseConnectors => "multiple_hisparse_connectors",
    MaxDepthExceeded => "max_depth_exceeded",
    HiSparseConnectorTooDeep => "hisparse_connector_too_deep",
    ConnectorWithoutHma => "connector_without_hma",
    // HiSparse requirements (vLLM 0.33 VllmConfig.__post_init__, hisparse layout/runtime).
    HiSparseWithoutConnector => "hisparse_without_connector",
    HostPoolGibMissing => "host_pool_gib_missing",
    HostPoolGibMisplaced => "host_pool_gib_misplaced",
    HiSparseSettingMisplaced => "hisparse_setting_misplaced",
    HostPoolGibNotPositive => "host_pool_gib_not_positive",
    HostPoolTooSmall => "host_pool_too_small",
    PlatformUnsupported => "platform_unsupported",
    PipelineParallelUnsupported => "pipeline_parallel_unsupported",
    DecodeContextParallelUnsupported => "decode_context_parallel_unsupported",
    TensorParallelHeadsMismatch => "tensor_parallel_heads_mismatch",
    DecodeContextParallelInvalid => "decode_context_parallel_invalid",
    UnknownQuantizationMethod => "unknown_quantization_method",
    QuantAlgoMissing => "quant_algo_missing",
    // The launch layout over nodes (vLLM 0.33 create_engine_config, ParallelConfig,
    // the executor and `vllm serve --headless`).
    NodeRankOutOfRange => "node_rank_out_of_range",
    MultiNodeBackendUnsupported => "multi_node_backend_unsupported",
    DataParallelLayoutInvalid => "data_parallel_layout_invalid",
    HeadlessWithoutLocalReplicas => "headless_without_local_replicas",
    ExternalLbLocalSizeInvalid => "external_lb_local_size_invalid",
    // GPUs a node holds (issue 22 item 9, h22): both engines' layout rules.
    GpusPerNodeExceeded => "gpus_per_node_exceeded",
    ModelNotDsa => "model_not_dsa",
    DeepseekV4Unsupported => "deepseek_v4_unsupported",
    IndexTopkTooLarge => "index_topk_too_large",
    HybridKvCacheManagerDisabled => "hybrid_kv_cache_manager_disabled",
    ModelRunnerV2Disabled => "model_runner_v2_disabled",
    CudagraphFullUnsupported => "cudagraph_full_unsupported",
    SchedulerReserveFullIslDisabled => "scheduler_reserve_full_isl_disabled",
    DeviceBufferTooSmall => "device_buffer_too_small",
    DeviceBufferTooLarge => "device_buffer_too_large",
    ResidencySharedMemoryExceeded => "residency_shared_memory_exceeded",
    BlockSizeUnsupported => "block_size_unsupported",
    KvCacheDtypeUnsupported => "kv_cache_dtype_unsupported",
    MaxModelLenTooLarge => "max_model_len_too_large",
    MaxModelLenUnknown => "max_model_len_unknown",
    SpeculativeTokensMissing => "speculative_tokens_missing",
    ModelConfigMissing => "model_config_missing",
    // The capacity planner (hisparse-check --plan).
    HostMemoryExceeded => "host_memory_exceeded",
    PlanServesNoRequests => "plan_serves_no_requests",
    // Warnings: legal but surprising.
    KvProducerRole => "kv_producer_role",
    HiSparseRoleNotKvBoth => "hisparse_role_not_kv_both",
    DeviceBufferUnaligned => "device_buffer_unaligned",
    UnexpandedShellVariable => "unexpanded_shell_variable",
    ConnectorNotValidated => "connector_not_validated",
    ConnectorsKeyIgnored => "connectors_key_ignored",
    Vllm033Crash => "vllm_0_33_crash",
    RowBytesUnknown => "row_bytes_unknown",
    HybridBlockSizeUnknown => "hybrid_block_size_unknown",
    BoolAsNumber => "bool_as_number",
    HostPoolImplausible => "host_pool_implausible",
    HostPoolGibShadowed => "host_pool_gib_shadowed",
    HostPoolLimitsContext => "host_pool_limits_context",
    FlagReplaced => "flag_replaced",
    HiSparseSettingIgnored => "hisparse_setting_ignored",
    HostMemoryNotGiven => "host_memory_not_given",
    HostMemoryUnknown => "host_memory_unknown",
    HostPoolsFitAlone => "host_pools_fit_alone",
    WeightsUnknown => "weights_unknown",
    NoGpuKvRoom => "no_gpu_kv_room",
    PlanAssumption => "plan_assumption",
    // An engine start-up log read for planning (--engine-log).
    EngineLogMismatch => "engine_log_mismatch",
    // SGLang 0.5.23 (engines/sglang_0_5_23/codes.rs): one block, its own codes.
    HostReceiveWithHisparse => "host_receive_with_hisparse",
    DecodeRadixCacheWithHisparse => "decode_radix_cache_with_hisparse",
    PrefillCompleteWithHisparse => "prefill_complete_with_hisparse",
    PrefillOnlyDisableKvCacheWithHisparse => "prefill_only_disable_kv_cache_with_hisparse",
    DsaDcpUnsupported => "dsa_dcp_unsupported",
    DsaKvCacheDtypeUnsupported => "dsa_kv_cache_dtype_unsupported",
    TilelangFp8WithHisparse => "tilelang_fp8_with_hisparse",
    TritonDsaBackendOnCuda => "triton_dsa_backend_on_cuda",
    HierarchicalCacheWithoutRadixCache => "hierarchical_cache_without_radix_cache",
    KvCacheShardingWithHisparse => "kv_cache_sharding_with_hisparse",
    EagleTopkNeedsTreeBackend => "eagle_topk_needs_tree_backend",
    HisparseModelNotDsa => "hisparse_model_not_dsa",
    RadixCacheEnabled => "radix_cache_enabled",
    MixedChunkWithHisparse => "mixed_chunk_with_hisparse",
    SpeculativeEagleTopkNotOne => "speculative_eagle_topk_not_one",
    SpeculativeAdaptiveWithHisparse => "speculative_adaptive_with_hisparse",
    DsaBackendNotAllowed => "dsa_backend_not_allowed",
    ChunkedPrefillNotPageMultiple => "chunked_prefill_not_page_multiple",
    HisparseConfigInvalidJson => "hisparse_config_invalid_json",
    HisparseConfigNotObject => "hisparse_config_not_object",
    HisparseConfigInvalidType => "hisparse_config_invalid_type",
    DeviceBufferSizeBelowTopK => "device_buffer_size_below_top_k",
    SwapInBlockSizeNotInt => "swap_in_block_size_not_int",
    SwapInBlockSizeOutOfRange => "swap_in_block_size_out_of_range",
    HostToDeviceRatioNotInt => "host_to_device_ratio_not_int",
    HostToDeviceRatioZero => "host_to_device_ratio_zero",
    DeviceBufferSizeNotPageMultiple => "device_buffer_size_not_page_multiple",
    HostPoolOverRamBudget => "host_pool_over_ram_budget",
    SpeculativeDraftTokensOutOfRange => "speculative_draft_tokens_out_of_range",
    SpeculativeIndexTopkTooSmall => "speculative_index_topk_too_small",
    SpeculativeWorkspaceTooLarge => "speculative_workspace_too_large",
    RequestSlotsOverDeviceBuffer => "request_slots_over_device_buffer",
    DeviceBufferSizeBelowIndexTopk => "device_buffer_size_below_index_topk",
    DeviceBufferSizeOverInt16 => "device_buffer_size_over_int16",
    DraftKvTransferBackendUnsupported => "draft_kv_transfer_backend_unsupported",
    HisparseOutsidePdDecode => "hisparse_outside_pd_decode",
    TopKDiffersFromIndexTopk => "top_k_differs_from_index_topk",
    HisparseConfigUnknownKey => "hisparse_config_unknown_key",
    PageSizeOverridden => "page_size_overridden",
    CoordinatorMemoryUnreserved => "coordinator_memory_unreserved",
    HisparseConfigIgnored => "hisparse_config_ignored",
    ComputeCapabilityAssumed => "compute_capability_assumed",
    SglangPlanServesNoRequests => "sglang_plan_serves_no_requests",
    SpeculativeSwapOnXpu => "speculative_swap_on_xpu",
    SpeculativeNumStepsMissing => "speculative_num_steps_missing",
    SpeculativeEagleTopkMissing => "speculative_eagle_topk_missing",
    SpeculativeAlgorithmUnknown => "speculative_algorithm_unknown",
    NgramTopkWithPages => "ngram_topk_with_pages",
    NgramWithDpAttention => "ngram_with_dp_attention",
    ContextLengthOverDerived => "context_length_over_derived",
    AttnDpSizeNotPositive => "attn_dp_size_not_positive",
    DcpSizeNotPositive => "dcp_size_not_positive",
    DpReplicasWithAttnDp => "dp_replicas_with_attn_dp",
    TpPpNotDivisibleByNnodes => "tp_pp_not_divisible_by_nnodes",
    PipelineSpeculationOffPrefill => "pipeline_speculation_off_prefill",
    PipelineSpeculationNotEagle => "pipeline_speculation_not_eagle",
    SpeculativeAlgorithmNotForModel => "speculative_algorithm_not_for_model",
    // Issue 23 (h23): SGLang's KV-cache rules without HiSparse (rules_kv.rs).
    KvCacheShardingOffPrefill => "kv_cache_sharding_off_prefill",
    KvCacheDtypeNeedsBlackwell => "kv_cache_dtype_needs_blackwell",
    PrefillOnlyDisableKvCacheNeedsEmbedding => "prefill_only_disable_kv_cache_needs_embedding",
    PrefillOnlyDisableKvCachePreconditions => "prefill_only_disable_kv_cache_preconditions",
    TilelangFp8BackendsMixed => "tilelang_fp8_backends_mixed",
    PrefillCompletePolicyUnsupported => "prefill_complete_policy_unsupported",
    SpeculativeAdaptiveStepsNotCandidate => "speculative_adaptive_steps_not_candidate",
    EpSizeZero => "ep_size_zero",
    HostReceiveThresholdOutOfRange => "host_receive_threshold_out_of_range",
    HostReceiveOffDecode => "host_receive_off_decode",
    HostReceiveWithDcp => "host_receive_with_dcp",
    DpReplicasOverNodes => "dp_replicas_over_nodes",
    BaseGpuIdNegative => "base_gpu_id_negative",
    DecodeDpSizeZero => "decode_dp_size_zero",
    NgramBfsBreadthZero => "ngram_bfs_breadth_zero",
    GpuIdStepNotPositive => "gpu_id_step_not_positive",
    MoeDenseTpSizeUnsupported => "moe_dense_tp_size_unsupported",
    ServedModelNameColon => "served_model_name_colon",
    // A whole deployment's rules, between launches (hisparse-check deploy;
    // engines/deploy_codes.rs lists them with their sources).
    PdModelMismatch => "pd_model_mismatch",
    PdDtypeMismatch => "pd_dtype_mismatch",
    PdKvCacheDtypeMismatch => "pd_kv_cache_dtype_mismatch",
    PdHybridKvCacheManagerMismatch => "pd_hybrid_kv_cache_manager_mismatch",
    PdBlockSizeMismatch => "pd_block_size_mismatch",
    PdTensorParallelUnsupported => "pd_tensor_parallel_unsupported",
    PdKvRoleUnpaired => "pd_kv_role_unpaired",
    PdContextLengthExceedsDecode => "pd_context_length_exceeds_decode",
    PdPageSizeMismatch => "pd_page_size_mismatch",
    PdTransferBackendMismatch => "pd_transfer_backend_mismatch",
    PdAttentionTpMismatch => "pd_attention_tp_mismatch",
    MultinodeSizesMismatch => "multinode_sizes_mismatch",
    MultinodeRanksInvalid => "multinode_ranks_invalid",
    NodeGpusExceeded => "node_gpus_exceeded",
    // The deployment file's and --launch's declarations (h25b, issue 25):
    // a declared role, the pinned pools of a node's launches together.
    LaunchRoleMismatch => "launch_role_mismatch",
    NodeHostMemoryExceeded => "node_host_memory_exceeded",
    // Deployment rules the differential tests against the wheels added (h25a).
    PdSpeculativeMismatch => "pd_speculative_mismatch",
}

/// When the engine would have refused what a diagnostic reports: one of an
/// engine version's own stages. Serialized as the stage's plain name
/// (`"config"`, `"model_load"`, ...; the names and meanings are in
/// [`VllmStage`]).
///
/// Engine-scoped by design: each engine version owns its stage enum and its
/// code-to-stage table in its own module (`engines/vllm_0_33/stages.rs` for vLLM
/// 0.33.0). A second engine (SGLang 0.5.23: `argparse`, `resolve`, `check`,
/// `after_weights_load`, `pool_build`, `coordinator_init`, `first_decode`,
/// `request`) adds a variant here and its own enum beside its rules, without
/// touching vLLM's. A name two engines share (`argparse`, `never`) reads
/// back as the first engine's when a diagnostic is read alone; a `Report` or
/// `Plan` reads its `engine` first and its diagnostics' stages with that
/// engine's table ([`Stage::parse_in`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Vllm(VllmStage),
    /// SGLang 0.5.23's stages ([`SglangStage`]; its table is its rules'
    /// explicit stages, `engines/sglang_0_5_23/`).
    Sglang(SglangStage),
}

impl Stage {
    /// The stage's name, e.g. `"workers"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Vllm(s) => s.as_str(),
            Stage::Sglang(s) => s.as_str(),
        }
    }

    /// The stage `engine` (`vllm`, `sglang`) calls `name`, from that
    /// engine's table alone (`argparse` and `never` are both engines' names,
    /// each its own stage). None for an engine this build does not know.
    /// Err names the engine's stages.
    pub fn parse_in(engine: &str, name: &str) -> Option<Result<Stage, String>> {
        let (found, names, who): (Option<Stage>, Vec<&str>, &str) = match engine {
            crate::stage::ENGINE_VLLM => (
                VllmStage::parse(name).map(Stage::Vllm),
                VllmStage::ALL.iter().map(|s| s.as_str()).collect(),
                "a vLLM",
            ),
            crate::stage::ENGINE_SGLANG => (
                SglangStage::parse(name).map(Stage::Sglang),
                SglangStage::ALL.iter().map(|s| s.as_str()).collect(),
                "an SGLang",
            ),
            _ => return None,
        };
        Some(
            found.ok_or_else(|| {
                format!("{name:?} is not {who} stage (one of {})", names.join(", "))
            }),
        )
    }
}

/// Reads a report or plan document by its engine: the JSON first, its
/// `engine` (absent: `vllm`, a document written before SGLang), the typed
/// read (`read`, serde's derived reader), then every diagnostic's stage in
/// `errors` and `warnings` with that engine's table ([`Stage::parse_in`]),
/// so a shared name (`never`) is the document's engine's stage.
pub(crate) fn read_by_engine<'de, D, T>(
    d: D,
    read: fn(Value) -> Result<T, serde_json::Error>,
    diagnostics: fn(&mut T) -> [&mut Vec<Diagnostic>; 2],
) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error;
    let doc = Value::deserialize(d)?;
    let engine = doc
        .get("engine")
        .and_then(Value::as_str)
        .unwrap_or(crate::stage::ENGINE_VLLM)
        .to_owned();
    let stages = [
        document_stages(&doc, "errors", &engine).map_err(D::Error::custom)?,
        document_stages(&doc, "warnings", &engine).map_err(D::Error::custom)?,
    ];
    let mut typed = read(doc).map_err(D::Error::custom)?;
    for (diags, stages) in diagnostics(&mut typed).into_iter().zip(stages) {
        for (d, s) in diags.iter_mut().zip(stages) {
            if let Some(s) = s {
                d.stage = s;
            }
        }
    }
    Ok(typed)
}

/// The stages of the diagnostics in `doc[key]` (`errors`, `warnings`), each
/// read with `engine`'s table; None where there is no stage text to read
/// (the typed read says what is wrong) or the engine is not known (the name
/// is kept as read).
fn document_stages(doc: &Value, key: &str, engine: &str) -> Result<Vec<Option<Stage>>, String> {
    let Some(items) = doc.get(key).and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .map(|d| match d.get("stage").and_then(Value::as_str) {
            Some(name) => Stage::parse_in(engine, name)
                .transpose()
                .map_err(|e| format!("{key}: {e}")),
            None => Ok(None),
        })
        .collect()
}

impl From<SglangStage> for Stage {
    fn from(s: SglangStage) -> Self {
        Stage::Sglang(s)
    }
}

impl From<VllmStage> for Stage {
    fn from(s: VllmStage) -> Self {
        Stage::Vllm(s)
    }
}

impl Serialize for Stage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Stage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        // vLLM's names first (`argparse` and `never` are shared), then SGLang's.
        VllmStage::parse(&name)
            .map(Stage::Vllm)
            .or_else(|| SglangStage::parse(&name).map(Stage::Sglang))
            .ok_or_else(|| {
                let names: Vec<&str> = VllmStage::ALL
                    .iter()
                    .map(|s| s.as_str())
                    .chain(SglangStage::ALL.iter().map(|s| s.as_str()))
                    .collect();
                serde::de::Error::custom(format!(
                    "{name:?} is not a vLLM or SGLang stage (one of {})",
                    names.join(", ")
                ))
            })
    }
}

/// One edit of the JSON form of [`crate::ServeArgs`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FixOp {
    /// Put `value` at `path`, creating missing parent objects (a parent that is
    /// not an object is replaced by one); a list index at or past the end
    /// appends, so an append still lands after other fixes removed items.
    Set { path: FieldPath, value: Value },
    /// Delete the key or list element at `path` (absent: no-op, nothing is created).
    Remove { path: FieldPath },
    /// Move the value at `from` to `to`; when both are objects, keys already
    /// at `to` win and the rest are carried over; two lists are concatenated
    /// (`to`'s items first), so nothing is lost.
    Move { from: FieldPath, to: FieldPath },
}

/// A finding about the configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    /// Where in the serve configuration, e.g. `attention_config.hisparse_config.device_buffer_size`.
    pub path: FieldPath,
    /// One sentence a user can read without the source.
    pub message: String,
    /// When the engine would have refused this (`never`: it accepts it, then
    /// breaks or ignores it): the engine's table (vLLM 0.33.0's in
    /// `engines/vllm_0_33/stages.rs`), or the rule's own where it depends on
    /// where the rule fires.
    pub stage: Stage,
    /// The value that was given, if any (a given JSON null stays `Some(Null)`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub given: Option<Value>,
    /// What is allowed, in words (e.g. `one of "kv_producer", "kv_consumer", "kv_both"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
    /// What to do, in words; renders `fix` when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The same advice as edits; applying them removes this diagnostic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fix: Vec<FixOp>,
    /// True for an error the configuration as given does not have, that only
    /// the report's other fixes reveal (a pool the node's RAM cannot pin once
    /// another fix lets the pool check run): its fix applies after theirs.
    /// Absent from JSON when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub revealed: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Diagnostic {
    /// A diagnostic at `stage`. Each engine module wraps this in its own
    /// `error` / `warning`, which take the stage from that engine's table
    /// (vLLM 0.33.0: `engines::vllm_0_33::diagnostics::VllmDiagnostic`).
    pub fn new(
        code: Code,
        severity: Severity,
        stage: impl Into<Stage>,
        path: FieldPath,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            code,
            severity,
            path,
            message: message.into(),
            stage: stage.into(),
            given: None,
            allowed: None,
            hint: None,
            fix: Vec::new(),
            revealed: false,
        }
    }

    pub fn given(mut self, value: &Value) -> Self {
        self.given = Some(value.clone());
        self
    }

    pub fn allowed(mut self, allowed: impl Into<String>) -> Self {
        self.allowed = Some(allowed.into());
        self
    }

    /// Set the stage where it is not the code's usual one (the engine's table).
    pub fn stage(mut self, stage: impl Into<Stage>) -> Self {
        self.stage = stage.into();
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Attach a fix; when no hint was written, `words` (what the fix does,
    /// in the engine's terms) become the hint.
    pub fn fix_described(
        mut self,
        ops: Vec<FixOp>,
        words: impl FnOnce(&[FixOp]) -> String,
    ) -> Self {
        if self.hint.is_none() {
            self.hint = Some(words(&ops));
        }
        self.fix = ops;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A field that is present deserializes to `Some`, even when it is null.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Apply fix operations to a JSON document (the JSON form of `ServeArgs`).
///
/// All or nothing: on an error `doc` is unchanged. Errors: a path longer
/// than [`MAX_JSON_DEPTH`] segments, an index into a non-list or past its
/// end, or a result nested deeper than [`MAX_JSON_DEPTH`] (README "Limits").
/// The edits are iterative, so no path or document can overflow the stack.
pub fn apply_fix(doc: &mut Value, ops: &[FixOp]) -> Result<(), String> {
    for op in ops {
        let paths: &[&FieldPath] = match op {
            FixOp::Set { path, .. } | FixOp::Remove { path } => &[path],
            FixOp::Move { from, to } => &[from, to],
        };
        if let Some(long) = paths.iter().find(|p| p.0.len() > MAX_JSON_DEPTH) {
            return Err(format!(
                "fix path has {} segments, more than the {MAX_JSON_DEPTH} allowed (README \"Limits\")",
                long.0.len()
            ));
        }
    }
    let mut edited = doc.clone();
    apply_ops(&mut edited, ops)?;
    if depth(&edited) > MAX_JSON_DEPTH {
        return Err(format!(
            "the fix would nest the serve args deeper than {MAX_JSON_DEPTH} levels (README \"Limits\")"
        ));
    }
    *doc = edited;
    Ok(())
}

/// Nesting depth of a value (a scalar is 0), without recursion.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|x| (x, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    deepest
}

fn apply_ops(doc: &mut Value, ops: &[FixOp]) -> Result<(), String> {
    for op in ops {
        match op {
            FixOp::Set { path, value } => *slot_mut(doc, &path.0)? = value.clone(),
            FixOp::Remove { path } => {
                take(doc, &path.0);
            }
            FixOp::Move { from, to } => {
                let Some(moved) = take(doc, &from.0) else {
                    continue;
                };
                let target = slot_mut(doc, &to.0)?;
                match (target, moved) {
                    (Value::Object(existing), Value::Object(incoming)) => {
                        for (k, v) in incoming {
                            existing.entry(k).or_insert(v);
                        }
                    }
                    (Value::Array(existing), Value::Array(incoming)) => existing.extend(incoming),
                    (target, moved) => *target = moved,
                }
            }
        }
    }
    Ok(())
}

/// The value at `segs`, created if missing (for set and move targets).
fn slot_mut<'a>(doc: &'a mut Value, segs: &[Seg]) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for seg in segs {
        cur = match seg {
            Seg::Key(k) => {
                // Setting below a null or a non-object (e.g. "kv_connector_extra_config": "x")
                // replaces it with an object: the fix is the user's intent for that spot.
                if !cur.is_object() {
                    *cur = Value::Object(Map::new());
                }
                let obj = cur
                    .as_object_mut()
                    .ok_or_else(|| format!("cannot set key {k:?} inside a non-object"))?;
                obj.entry(k.clone()).or_insert(Value::Null)
            }
            Seg::Index(i) => {
                // A list created by this edit (a move into `x[0]`) starts empty.
                if cur.is_null() {
                    *cur = Value::Array(Vec::new());
                }
                let list = cur
                    .as_array_mut()
                    .ok_or_else(|| format!("cannot index [{i}] into a non-list"))?;
                // At or past the end appends, so an append still lands after
                // other fixes of the same report removed items.
                if *i >= list.len() {
                    list.push(Value::Null);
                    let last = list.len() - 1;
                    &mut list[last]
                } else {
                    &mut list[*i]
                }
            }
        };
    }
    Ok(cur)
}

/// The value at `segs` if it exists; never creates anything.
fn existing_mut<'a>(doc: &'a mut Value, segs: &[Seg]) -> Option<&'a mut Value> {
    let mut cur = doc;
    for seg in segs {
        cur = match (seg, cur) {
            (Seg::Key(k), Value::Object(obj)) => obj.get_mut(k)?,
            (Seg::Index(i), Value::Array(list)) => list.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Remove and return the value at `segs`; an absent path changes nothing.
fn take(doc: &mut Value, segs: &[Seg]) -> Option<Value> {
    let (last, parent) = segs.split_last()?;
    let parent = existing_mut(doc, parent)?;
    match (last, parent) {
        (Seg::Key(k), Value::Object(obj)) => obj.shift_remove(k),
        (Seg::Index(i), Value::Array(list)) if *i < list.len() => Some(list.remove(*i)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codes_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in Code::ALL {
            assert!(seen.insert(c.as_str()), "duplicate code {}", c.as_str());
        }
    }

    #[test]
    fn move_merges_without_losing_keys() {
        let mut doc = json!({"k": {"kv_extra_config": {"host_pool_gib": 8}, "kv_connector_extra_config": {"a": 1}}});
        let ops = vec![FixOp::Move {
            from: FieldPath::parse("k.kv_extra_config").unwrap(),
            to: FieldPath::parse("k.kv_connector_extra_config").unwrap(),
        }];
        apply_fix(&mut doc, &ops).unwrap();
        assert_eq!(
            doc,
            json!({"k": {"kv_connector_extra_config": {"a": 1, "host_pool_gib": 8}}})
        );
    }

    #[test]
    fn remove_of_an_absent_path_changes_nothing() {
        let original = json!({"kv_transfer_config": {"kv_role": "kv_both"}, "a": [1]});
        for path in [
            "x.y.z",
            "kv_transfer_config.nope.deeper",
            "a[5]",
            "a[0].k",
            "kv_transfer_config.kv_role.x",
        ] {
            let mut doc = original.clone();
            apply_fix(
                &mut doc,
                &[FixOp::Remove {
                    path: FieldPath::parse(path).unwrap(),
                }],
            )
            .unwrap();
            assert_eq!(doc, original, "{path}");
            let mut doc = original.clone();
            let mv = FixOp::Move {
                from: FieldPath::parse(path).unwrap(),
                to: FieldPath::root("b"),
            };
            apply_fix(&mut doc, &[mv]).unwrap();
            assert_eq!(doc, original, "move from {path}");
        }
    }

    #[test]
    fn a_failing_fix_leaves_the_document_unchanged() {
        let original = json!({"a": [1, 2], "s": "x"});
        let set = |p: &str| FixOp::Set {
            path: FieldPath::parse(p).unwrap(),
            value: json!(1),
        };
        for bad in ["s[0]", "a[0][1]"] {
            let mut doc = original.clone();
            // The first op would apply; the second fails: neither is kept.
            let e = apply_fix(&mut doc, &[set("new"), set(bad)]).unwrap_err();
            assert!(e.contains("index") || e.contains("non-list"), "{e}");
            assert_eq!(doc, original, "{bad}");
        }
        // Past the end of a list is not a failure: it appends (see FixOp::Set).
        let mut doc = original.clone();
        apply_fix(&mut doc, &[set("a[5]")]).unwrap();
        assert_eq!(doc, json!({"a": [1, 2, 1], "s": "x"}));
    }

    #[test]
    fn deep_paths_are_refused_without_recursion() {
        let mut doc = json!({});
        let deep = FieldPath((0..20_000).map(|i| Seg::Key(format!("k{i}"))).collect());
        let e = apply_fix(
            &mut doc,
            &[FixOp::Set {
                path: deep,
                value: json!(1),
            }],
        )
        .unwrap_err();
        assert!(e.contains("20000 segments"), "{e}");
        // At the bound the path applies; a value that makes it deeper does not.
        let at_bound = FieldPath(
            (0..MAX_JSON_DEPTH)
                .map(|i| Seg::Key(format!("k{i}")))
                .collect(),
        );
        apply_fix(
            &mut doc,
            &[FixOp::Set {
                path: at_bound.clone(),
                value: json!(1),
            }],
        )
        .unwrap();
        assert_eq!(depth(&doc), MAX_JSON_DEPTH);
        let before = doc.clone();
        let e = apply_fix(
            &mut doc,
            &[FixOp::Set {
                path: at_bound,
                value: json!([1]),
            }],
        )
        .unwrap_err();
        assert!(e.contains("deeper than"), "{e}");
        assert_eq!(doc, before);
    }

    #[test]
    fn set_creates_parents_and_remove_drops_list_items() {
        let mut doc = json!({"a": [1, 2, 3]});
        apply_fix(
            &mut doc,
            &[
                FixOp::Set {
                    path: FieldPath::parse("b.c").unwrap(),
                    value: json!(5),
                },
                FixOp::Remove {
                    path: FieldPath::parse("a[1]").unwrap(),
                },
            ],
        )
        .unwrap();
        assert_eq!(doc, json!({"a": [1, 3], "b": {"c": 5}}));
    }
}
