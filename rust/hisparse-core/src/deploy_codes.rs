//! The codes of a whole deployment's rules (`hisparse-check deploy`), the
//! block at the end of [`Code`]: each reported on a pair of launches (or a
//! node), at the stage the engine fails (`handshake` / `first_request` for a
//! P/D pair), with the engine source that fails. They are in neither engine's
//! single-launch table (vLLM's `stages.rs`, SGLang's `codes.rs`).

use crate::diagnostic::Code;

/// One deployment code and where each engine fails on it (`None`: the
/// engine has no such rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeployCode {
    pub code: Code,
    pub vllm: Option<&'static str>,
    pub sglang: Option<&'static str>,
}

const fn c(code: Code, vllm: Option<&'static str>, sglang: Option<&'static str>) -> DeployCode {
    DeployCode { code, vllm, sglang }
}

const NIXL_HASH: &str = "vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:146-210 (compute_nixl_compatibility_hash; the handshake refuses a peer whose hash differs)";
const NIXL_HANDSHAKE: &str =
    "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:2690-2760 (_validate_remote_agent_handshake)";

/// Every deployment code, in declaration order (the tail of [`Code::ALL`]).
pub const DEPLOY_CODES: &[DeployCode] = &[
    c(Code::PdModelMismatch, Some(NIXL_HASH), Some("the two sides' model configs differ (architecture or KV dimensions): the KV layouts do not match")),
    c(Code::PdDtypeMismatch, Some(NIXL_HASH), None),
    c(Code::PdKvCacheDtypeMismatch, Some(NIXL_HASH), Some("sglang/srt/disaggregation/ (each side sizes its KV buffers by its own kv_cache_dtype; arg_groups/overrides.py:532-544 resolves auto)")),
    c(Code::PdHybridKvCacheManagerMismatch, Some(NIXL_HASH), None),
    c(Code::PdBlockSizeMismatch, Some(NIXL_HANDSHAKE), None),
    c(Code::PdTensorParallelUnsupported, Some("vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:2690-2760, :3065 (\"Only nP < nD supported currently\")"), None),
    c(Code::PdKvRoleUnpaired, Some("vllm/config/kv_transfer.py (kv_role: kv_producer sends, kv_consumer receives)"), Some("sglang/srt/disaggregation/ (a decode server waits for a prefill server's bootstrap)")),
    c(Code::PdContextLengthExceedsDecode, Some("vllm/config/model.py (max_model_len): the decode refuses a longer prompt"), Some("sglang --context-length: the decode server refuses a longer prompt")),
    c(Code::PdPageSizeMismatch, None, Some("sglang/srt/disaggregation/common/conn.py:1320-1324; arg_groups/model_overrides/deepseek_v2.py:150-176 (the DSA page size)")),
    c(Code::PdTransferBackendMismatch, None, Some("sglang/srt/disaggregation/ (each side's --disaggregation-transfer-backend picks its KV manager)")),
    c(Code::PdAttentionTpMismatch, None, Some("sglang/srt/disaggregation/common/conn.py:1432-1470 (MLA KV sharding needs equal attention TP)")),
    c(Code::MultinodeSizesMismatch, Some("vllm/config/parallel.py (data_parallel_size, nnodes, data_parallel_address)"), Some("sglang/srt/arg_groups/fields/parallel.py (tp_size, nnodes, dist_init_addr)")),
    c(Code::MultinodeRanksInvalid, Some("vllm/config/parallel.py (node_rank, data_parallel_start_rank)"), Some("sglang/srt/arg_groups/fields/parallel.py (node_rank)")),
    c(Code::NodeGpusExceeded, Some("the pod's resources.limits[\"nvidia.com/gpu\"] (or the node's gpus_per_node): vLLM sees only those GPUs"), Some("the pod's resources.limits[\"nvidia.com/gpu\"] (or the node's gpus_per_node): SGLang sees only those GPUs")),
    c(Code::LaunchRoleMismatch, Some("vllm/config/kv_transfer.py:71, :128-136 (kv_role: the launch's role is its connector's, not the one declared)"), Some("sglang --disaggregation-mode (prefill, decode, null: the launch's role is its flag's, not the one declared)")),
    c(Code::NodeHostMemoryExceeded, Some("vllm/v1/hisparse/runtime.py:195-203 (check_hisparse_host_memory: pool_bytes > 0.95 x the RAM available when it pins)"), Some("sglang/srt/mem_cache/pool_host/base.py:84-107, :244-257 (the RAM budget available when the rank pins; \"Not enough host memory available\")")),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_the_tail_of_code_all() {
        let n = DEPLOY_CODES.len();
        let tail: Vec<Code> = DEPLOY_CODES.iter().map(|d| d.code).collect();
        assert_eq!(&Code::ALL[Code::ALL.len() - n..], tail.as_slice());
    }
}
