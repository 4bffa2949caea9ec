//! The codes only SGLang 0.5.23 reports (their block at the end of
//! [`Code`]); vLLM 0.33.0's stage table leaves them out. SGLang diagnostics
//! also reuse a few neutral codes (`model_config_missing`), always with an
//! SGLang stage set explicitly.

use crate::diagnostic::Code;

/// Every SGLang-only code, in declaration order.
pub const SGLANG_CODES: &[Code] = &[
    Code::HostReceiveWithHisparse,
    Code::DecodeRadixCacheWithHisparse,
    Code::PrefillCompleteWithHisparse,
    Code::PrefillOnlyDisableKvCacheWithHisparse,
    Code::DsaDcpUnsupported,
    Code::DsaKvCacheDtypeUnsupported,
    Code::TilelangFp8WithHisparse,
    Code::TritonDsaBackendOnCuda,
    Code::HierarchicalCacheWithoutRadixCache,
    Code::KvCacheShardingWithHisparse,
    Code::EagleTopkNeedsTreeBackend,
    Code::HisparseModelNotDsa,
    Code::RadixCacheEnabled,
    Code::MixedChunkWithHisparse,
    Code::SpeculativeEagleTopkNotOne,
    Code::SpeculativeAdaptiveWithHisparse,
    Code::DsaBackendNotAllowed,
    Code::ChunkedPrefillNotPageMultiple,
    Code::HisparseConfigInvalidJson,
    Code::HisparseConfigNotObject,
    Code::HisparseConfigInvalidType,
    Code::DeviceBufferSizeBelowTopK,
    Code::SwapInBlockSizeNotInt,
    Code::SwapInBlockSizeOutOfRange,
    Code::HostToDeviceRatioNotInt,
    Code::HostToDeviceRatioZero,
    Code::DeviceBufferSizeNotPageMultiple,
    Code::HostPoolOverRamBudget,
    Code::SpeculativeDraftTokensOutOfRange,
    Code::SpeculativeIndexTopkTooSmall,
    Code::SpeculativeWorkspaceTooLarge,
    Code::RequestSlotsOverDeviceBuffer,
    Code::DeviceBufferSizeBelowIndexTopk,
    Code::DeviceBufferSizeOverInt16,
    Code::DraftKvTransferBackendUnsupported,
    Code::HisparseOutsidePdDecode,
    Code::TopKDiffersFromIndexTopk,
    Code::HisparseConfigUnknownKey,
    Code::PageSizeOverridden,
    Code::CoordinatorMemoryUnreserved,
    Code::HisparseConfigIgnored,
    Code::ComputeCapabilityAssumed,
    Code::SglangPlanServesNoRequests,
    Code::SpeculativeSwapOnXpu,
    Code::SpeculativeNumStepsMissing,
    Code::SpeculativeEagleTopkMissing,
    Code::SpeculativeAlgorithmUnknown,
    Code::NgramTopkWithPages,
    Code::NgramWithDpAttention,
    Code::ContextLengthOverDerived,
    Code::AttnDpSizeNotPositive,
    Code::DcpSizeNotPositive,
    Code::DpReplicasWithAttnDp,
    Code::TpPpNotDivisibleByNnodes,
    Code::PipelineSpeculationOffPrefill,
    Code::PipelineSpeculationNotEagle,
    Code::SpeculativeAlgorithmNotForModel,
    Code::KvCacheShardingOffPrefill,
    Code::KvCacheDtypeNeedsBlackwell,
    Code::PrefillOnlyDisableKvCacheNeedsEmbedding,
    Code::PrefillOnlyDisableKvCachePreconditions,
    Code::TilelangFp8BackendsMixed,
    Code::PrefillCompletePolicyUnsupported,
    Code::SpeculativeAdaptiveStepsNotCandidate,
    Code::EpSizeZero,
    Code::HostReceiveThresholdOutOfRange,
    Code::HostReceiveOffDecode,
    Code::HostReceiveWithDcp,
    Code::DpReplicasOverNodes,
    Code::BaseGpuIdNegative,
    Code::DecodeDpSizeZero,
    Code::NgramBfsBreadthZero,
    Code::GpuIdStepNotPositive,
    Code::MoeDenseTpSizeUnsupported,
    Code::ServedModelNameColon,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_the_tail_of_code_all() {
        // Before the deployment codes' block (deploy_codes.rs).
        let n = SGLANG_CODES.len();
        let end = Code::ALL.len() - crate::deploy_codes::DEPLOY_CODES.len();
        assert_eq!(&Code::ALL[end - n..end], SGLANG_CODES);
    }
}
