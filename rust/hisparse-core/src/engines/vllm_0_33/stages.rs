//! When vLLM 0.33.0 refuses what each diagnostic reports: one table, one row
//! per [`Code`], with the vLLM source that raises it.
//!
//! The stage is what a preflight saved the user: a refusal at `argparse` or
//! `config` costs seconds, one at `model_load` or `workers` costs the minutes
//! it takes 8 GPUs to load the weights, and `never` is vLLM starting with a
//! configuration that then breaks or is silently ignored.
//!
//! A rule whose stage depends on where it fires (an `invalid_value` at the
//! argument parser or inside `ParallelConfig`; a child connector's
//! `missing_kv_role`, seen when the engine builds its connectors) sets it
//! itself with [`crate::Diagnostic::stage`]; the table gives the stage of the
//! code's common case. The differential test (`tests/vllm/test_differential.py`)
//! holds each report's first error's stage to the stage at which vLLM 0.33.0's
//! own code raised.
//!
//! Another engine (SGLang 0.5.23, issue 16) brings its own stage enum and table
//! in its own module and a variant of [`crate::diagnostic::Stage`]; this file
//! stays as it is.

use crate::diagnostic::{Code, Diagnostic};

pub use crate::stage::VllmStage;

/// The sentence the CLI and the plugin print for a diagnostic at `stage`.
pub fn sentence(stage: VllmStage, severity_is_error: bool) -> String {
    let v = super::VERSION;
    match stage {
        VllmStage::Never if severity_is_error => {
            format!("vLLM {v} accepts this and then breaks on it or ignores it")
        }
        VllmStage::Never => format!("vLLM {v} accepts this"),
        s => format!("vLLM {v} refuses this {}", s.when()),
    }
}

/// One row of the table: a code, the stage of its common case, and where vLLM
/// 0.33.0 raises it (or, for `never`, what it does instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageRow {
    pub code: Code,
    pub stage: VllmStage,
    /// vLLM file:line (under `vllm/`) or, for `never`, what vLLM does.
    pub source: &'static str,
}

const fn row(code: Code, stage: VllmStage, source: &'static str) -> StageRow {
    StageRow {
        code,
        stage,
        source,
    }
}

use VllmStage::*;

/// vLLM 0.33.0's stage for every code (a test holds it to [`Code::ALL`]).
pub const VLLM_0_33_STAGES: &[StageRow] = &[
    // Shape and type of the input.
    row(Code::InvalidJson, Argparse, "utils/argparse_utils.py: json.loads of a JSON flag"),
    row(Code::InvalidType, Argparse, "config/utils.py:71 pydantic (JSON flags are validated while parsed)"),
    row(Code::InvalidValue, Config, "config/*.py field constraints and __post_init__ (rules at other stages set theirs)"),
    row(Code::UnknownKey, Argparse, "config/utils.py:71 ConfigDict(extra=\"forbid\")"),
    row(Code::InputTooDeep, Never, "hisparse_rs's own bound (README Limits); vLLM reads deeper input"),
    row(Code::InputTooLarge, Never, "hisparse_rs's own bound (README Limits); vLLM reads larger input"),
    // The KV connector tree.
    row(Code::ConnectorsListAtTopLevel, Argparse, "config/kv_transfer.py: KVTransferConfig is an object, pydantic refuses a list"),
    row(Code::ConnectorNotObject, Config, "config/kv_transfer.py:146 has_connector (child.get), from config/vllm.py:1879"),
    row(Code::ConnectorsNotList, Config, "config/kv_transfer.py:146 has_connector iterates connectors, from config/vllm.py:1879"),
    row(Code::MisplacedConnectors, Argparse, "config/utils.py:71 extra=\"forbid\": KVTransferConfig has no connectors field (a child's: where its config is built)"),
    row(Code::EmptyMultiConnector, Workers, "multi_connector.py: a MultiConnector without connectors fails when the connectors are built"),
    row(Code::MissingKvRole, Argparse, "config/kv_transfer.py:120 KVTransferConfig.__post_init__ (a child's: multi_connector.py:166, config/vllm.py:2264)"),
    row(Code::MissingKvConnector, Config, "multi_connector.py:166 KVTransferConfig of each child, from config/vllm.py:2264 supports_hma_config"),
    row(Code::UnknownConnector, Config, "distributed/kv_transfer/kv_connector/factory.py:93 \"not registered\", from config/vllm.py:2264"),
    row(Code::MultipleHiSparseConnectors, Workers, "config/kv_transfer.py:38 via v1/hisparse/layout.py:86"),
    row(Code::MaxDepthExceeded, Never, "hisparse_rs's own bound (16 MultiConnector levels); vLLM walks deeper trees"),
    row(Code::HiSparseConnectorTooDeep, Workers, "config/kv_transfer.py:38-43 reads one MultiConnector level: no host pool at v1/hisparse/layout.py:86"),
    row(Code::ConnectorWithoutHma, Config, "config/vllm.py:2264 turns the hybrid KV cache manager off, config/vllm.py:2301 refuses HiSparse without it"),
    // HiSparse requirements.
    row(Code::HiSparseWithoutConnector, Workers, "v1/hisparse/layout.py:88 \"HiSparse requires HiSparseConnector with host_pool_gib\""),
    row(Code::HostPoolGibMissing, Workers, "config/kv_transfer.py:43 via v1/hisparse/layout.py:86"),
    row(Code::HostPoolGibMisplaced, Workers, "config/kv_transfer.py:43 (vLLM does not see it) via v1/hisparse/layout.py:86"),
    row(Code::HiSparseSettingMisplaced, Argparse, "config/utils.py:71 extra=\"forbid\" on the connector or AttentionConfig"),
    row(Code::HostPoolGibNotPositive, Workers, "config/kv_transfer.py:46 via v1/hisparse/layout.py:86"),
    row(Code::HostPoolTooSmall, Workers, "v1/hisparse/layout.py:251-256 (min_host_blocks)"),
    row(Code::PlatformUnsupported, Config, "config/vllm.py:1885"),
    row(Code::PipelineParallelUnsupported, Config, "config/vllm.py:1887"),
    row(Code::DecodeContextParallelUnsupported, Config, "config/vllm.py:1889"),
    row(Code::TensorParallelHeadsMismatch, Config, "config/model.py:1562 verify_with_parallel_config"),
    row(Code::DecodeContextParallelInvalid, Config, "config/parallel.py:600-602, config/vllm.py:1581-1587, config/model.py:1579"),
    row(Code::UnknownQuantizationMethod, Config, "config/model.py:1467 _verify_quantization"),
    row(Code::QuantAlgoMissing, Config, "model_executor/layers/quantization/modelopt.py:363 \"Missing 'quant_algo' in quantization config\", from config/vllm.py:1608 _get_quantization_config"),
    row(Code::NodeRankOutOfRange, Config, "engine/arg_utils.py:2414 (and config/parallel.py:323 ge=0)"),
    row(Code::MultiNodeBackendUnsupported, Config, "config/parallel.py:1108-1114 \"nnodes > 1 can only be set when distributed executor backend is mp, uni or external_launcher\""),
    row(Code::DataParallelLayoutInvalid, EngineStart, "config/parallel.py:827 nnodes_within_dp, v1/executor/multiproc_executor.py:305, first read when the engine starts"),
    row(Code::HeadlessWithoutLocalReplicas, EngineStart, "entrypoints/cli/serve.py:203 run_headless \"data_parallel_size_local must be > 0 in headless mode\""),
    row(Code::ExternalLbLocalSizeInvalid, Config, "engine/arg_utils.py:2476-2483 \"an external data-parallel rank requires --data-parallel-size-local 1\""),
    row(Code::GpusPerNodeExceeded, EngineStart, "config/parallel.py:1068-1077 \"World size (N) is larger than the number of available GPUs (M) in this node\" (one node, the default executor: stage config, set by the rule), v1/worker/gpu_worker.py:487-490 \"DP adjusted local rank N is out of bounds for M devices\" (a DP replica past the node's GPUs, as its workers start)"),
    row(Code::ModelNotDsa, Config, "config/vllm.py:1909 hasattr(hf_config, \"index_topk\")"),
    row(Code::DeepseekV4Unsupported, Workers, "v1/hisparse/layout.py:104"),
    row(Code::IndexTopkTooLarge, Workers, "v1/hisparse/runtime.py:142 (device_buffer_size above 32768)"),
    row(Code::HybridKvCacheManagerDisabled, Config, "config/vllm.py:2301"),
    row(Code::ModelRunnerV2Disabled, Config, "config/vllm.py:735"),
    row(Code::CudagraphFullUnsupported, Config, "config/vllm.py:1893"),
    row(Code::SchedulerReserveFullIslDisabled, Config, "config/vllm.py:1902"),
    row(Code::DeviceBufferTooSmall, Workers, "v1/hisparse/runtime.py:132 via v1/hisparse/layout.py:136"),
    row(Code::DeviceBufferTooLarge, Workers, "v1/hisparse/runtime.py:142 via v1/hisparse/layout.py:136"),
    row(Code::ResidencySharedMemoryExceeded, Workers, "v1/hisparse/runtime.py:185 from runtime.py:749 (each layer's HiSparse runtime)"),
    row(Code::BlockSizeUnsupported, ModelLoad, "v1/worker/utils.py select_common_block_size, from multiproc_executor.py:802 update_block_size_for_backend"),
    row(Code::KvCacheDtypeUnsupported, ModelLoad, "v1/attention/selector.py get_attn_backend, as each sparse-MLA layer is built"),
    row(Code::MaxModelLenTooLarge, Config, "config/model.py:2664 _get_and_verify_max_len"),
    row(Code::MaxModelLenUnknown, Never, "config/model.py:2545 compares a max_position_embeddings that is not a number of tokens (a string crashes, NaN or 0 derive a wrong length); none at all is vLLM's 2048, config/model.py:2589"),
    row(Code::SpeculativeTokensMissing, Config, "config/speculative.py:1946"),
    row(Code::ModelConfigMissing, Never, "vLLM serves its default model; hisparse_rs has nothing to check against"),
    // The capacity planner.
    row(Code::HostMemoryExceeded, Workers, "v1/hisparse/runtime.py:199 check_hisparse_host_memory, as each rank pins its pool"),
    row(Code::PlanServesNoRequests, Workers, "v1/core/kv_cache_planning.py: no KV cache room for one request at max_model_len"),
    // Warnings.
    row(Code::KvProducerRole, Never, "starts; a producer-only node never decodes with HiSparse"),
    row(Code::HiSparseRoleNotKvBoth, Never, "starts"),
    row(Code::DeviceBufferUnaligned, Never, "starts (rounds the buffer internally)"),
    row(Code::UnexpandedShellVariable, Workers, "config/kv_transfer.py:45 float(host_pool_gib) on the string"),
    row(Code::ConnectorNotValidated, Never, "config/vllm.py:1920 logs a warning and starts"),
    row(Code::ConnectorsKeyIgnored, Never, "ignores the key"),
    row(Code::Vllm033Crash, Config, "beside its error: the crash's stage is that error's (the rule sets it)"),
    row(Code::RowBytesUnknown, Never, "starts"),
    row(Code::HybridBlockSizeUnknown, Never, "starts, with another block size"),
    row(Code::BoolAsNumber, Never, "reads the bool as a number"),
    row(Code::HostPoolImplausible, Never, "starts if the RAM is there"),
    row(Code::HostPoolGibShadowed, Never, "vLLM reads one host_pool_gib, the HiSparseConnector's own (v1/hisparse/layout.py:86); where it rejects the other key, that key's own error carries the stage"),
    row(Code::HostPoolLimitsContext, Never, "shortens max_model_len to what the pool holds"),
    row(Code::FlagReplaced, Never, "the last JSON flag replaces the others whole"),
    row(Code::HiSparseSettingIgnored, Never, "ignores the setting in kv_connector_extra_config"),
    row(Code::HostMemoryNotGiven, Never, "hisparse_rs's planner note"),
    row(Code::HostMemoryUnknown, Never, "hisparse_rs's planner note"),
    row(Code::HostPoolsFitAlone, Never, "checks each pool alone (v1/hisparse/runtime.py:199): may start with the node's RAM nearly all pinned"),
    row(Code::WeightsUnknown, Never, "hisparse_rs's planner note"),
    row(Code::NoGpuKvRoom, Workers, "v1/core/kv_cache_planning.py: no GPU memory left for the KV cache"),
    row(Code::PlanAssumption, Never, "hisparse_rs's planner note"),
    row(Code::EngineLogMismatch, Never, "hisparse_rs's planner input: a log of another launch"),
];

/// The table's row for `code` (every code has one: `every_code_has_one_row`).
pub fn stage_row(code: Code) -> Option<&'static StageRow> {
    VLLM_0_33_STAGES.iter().find(|r| r.code == code)
}

/// vLLM 0.33.0's stage for `code` (its common case; see the module docs).
pub fn stage_of(code: Code) -> VllmStage {
    stage_row(code).map_or(Config, |r| r.stage)
}

/// The stages of what the connector walk reports, which depend on where in
/// the tree and on one flag. The top-level connector's own fields are
/// pydantic's, while the flags are parsed (`KVTransferConfig.__post_init__`,
/// config/kv_transfer.py:110-124); its class and every child's config are
/// first resolved while the config is built: by `supports_hma_config`
/// (config/vllm.py:2264, multi_connector.py:166) when
/// `--[no-]disable-hybrid-kv-cache-manager` is not given, and by
/// `requires_piecewise_for_cudagraph` (config/vllm.py:1990,
/// multi_connector.py:149) under a full CUDA graph mode; otherwise
/// (`children_late`) only when the engine creates the connectors after the
/// model has loaded.
pub fn set_connector_stages(diags: &mut [Diagnostic], children_late: bool) {
    let late = if children_late { Workers } else { Config };
    for d in diags {
        // A child's engine_id fails only when the connectors are created (its rule says so).
        if matches!(d.path.0.last(), Some(crate::path::Seg::Key(k)) if k == "engine_id") {
            continue;
        }
        // Below a `connectors[i]` item: a MultiConnector's child.
        let item = |w: &[crate::path::Seg]| matches!(w, [crate::path::Seg::Key(k), crate::path::Seg::Index(_)] if k == "connectors");
        let segs = &d.path.0;
        let child = segs.windows(2).any(item);
        // Inside that connector's kv_connector_extra_config (a free dict no
        // pydantic model checks as a whole): the rule that reads the value
        // sets the stage.
        let own = segs.windows(2).rposition(item).map_or(0, |i| i + 2);
        let in_extra = segs[own..].split_last().is_some_and(|(_, above)| {
            above
                .iter()
                .any(|s| matches!(s, crate::path::Seg::Key(k) if k == "kv_connector_extra_config"))
        });
        if in_extra {
            continue;
        }
        let stage = match d.code {
            // A `connectors` list beside kv_connector_extra_config: a field
            // KVTransferConfig does not have.
            Code::MissingKvRole
            | Code::InvalidValue
            | Code::InvalidType
            | Code::MisplacedConnectors
                if !child =>
            {
                Argparse
            }
            // A child's own fields, unknown keys included, are pydantic's
            // when vLLM builds the child's KVTransferConfig.
            Code::MissingKvRole
            | Code::InvalidValue
            | Code::InvalidType
            | Code::UnknownConnector
            | Code::MisplacedConnectors
            | Code::MissingKvConnector => late,
            Code::UnknownKey if child => late,
            _ => continue,
        };
        d.stage = stage.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Severity;

    #[test]
    fn every_code_has_one_row() {
        // SGLang 0.5.23's own codes have no vLLM stage (engines/sglang_0_5_23/codes.rs).
        let sglang = crate::engines::sglang_0_5_23::codes::SGLANG_CODES;
        let vllm: Vec<Code> = Code::ALL
            .iter()
            .copied()
            .filter(|c| !sglang.contains(c))
            // The deployment codes are a pair's, not one launch's (deploy_codes.rs).
            .filter(|c| {
                !crate::deploy_codes::DEPLOY_CODES
                    .iter()
                    .any(|d| d.code == *c)
            })
            .collect();
        for code in &vllm {
            let n = VLLM_0_33_STAGES.iter().filter(|r| r.code == *code).count();
            assert_eq!(n, 1, "{} has {n} rows", code.as_str());
        }
        assert_eq!(VLLM_0_33_STAGES.len(), vllm.len());
    }

    #[test]
    fn connector_stages_follow_where_the_field_is_read() {
        use crate::path::FieldPath;
        let at = |code, path: &str| {
            Diagnostic::new(
                code,
                Severity::Error,
                stage_of(code),
                FieldPath::parse(path).unwrap(),
                "x",
            )
        };
        let child = "kv_transfer_config.kv_connector_extra_config.connectors[1].kv_role";
        let mut d = vec![
            at(Code::MissingKvRole, "kv_transfer_config.kv_role"),
            at(Code::MissingKvRole, child),
            at(Code::MisplacedConnectors, "kv_transfer_config.connectors"),
            at(Code::UnknownConnector, "kv_transfer_config.kv_connector"),
            // Inside the free dict: the reading rule's stage stays.
            at(
                Code::InvalidType,
                "kv_transfer_config.kv_connector_extra_config.host_pool_gib",
            )
            .stage(Workers),
            at(
                Code::InvalidValue,
                "kv_transfer_config.kv_connector_extra_config.connectors[0].engine_id",
            )
            .stage(Workers),
        ];
        set_connector_stages(&mut d, false);
        let got: Vec<VllmStage> = d
            .iter()
            .map(|x| match x.stage {
                crate::diagnostic::Stage::Vllm(s) => s,
                other => panic!("not a vLLM stage: {other:?}"),
            })
            .collect();
        assert_eq!(got, [Argparse, Config, Argparse, Config, Workers, Workers]);
        // With the hybrid KV cache manager flag given, children are read only
        // when the connectors are created.
        set_connector_stages(&mut d, true);
        assert_eq!(d[1].stage, Workers.into());
        assert_eq!(d[0].stage, Argparse.into());
    }

    #[test]
    fn stages_round_trip_and_read() {
        for s in VllmStage::ALL {
            assert_eq!(VllmStage::parse(s.as_str()), Some(*s));
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, serde_json::json!(s.as_str()));
        }
        assert_eq!(VllmStage::parse("pool_build"), None);
        assert!(sentence(VllmStage::ModelLoad, true)
            .contains("refuses this while its workers load the model"));
        assert!(sentence(VllmStage::Never, true).contains("accepts this"));
        // Start-up order.
        assert!(VllmStage::Argparse < VllmStage::Config && VllmStage::Workers < VllmStage::Never);
    }
}
