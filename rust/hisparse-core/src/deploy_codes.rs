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

const NIXL_HASH: &str = "vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:146-216 (compute_nixl_compatibility_hash, factors :186-203); the decode's handshake refuses a peer whose hash differs: nixl/base_worker.py:1191-1207";
const NIXL_BLOCK: &str = "vllm/distributed/kv_transfer/kv_connector/utils.py:541-547 (TransferTopology.block_size_ratio), from nixl/base_worker.py:2721 (_validate_remote_agent_handshake); with a host buffer :2780-2786; the kernel block size exchanged: :1066-1081";
const NIXL_TP: &str = "vllm/distributed/kv_transfer/kv_connector/utils.py:522-539 (TransferTopology.tp_ratio), from nixl/base_worker.py:2720 (_validate_remote_agent_handshake); DCP: :2706-2712";

/// Every deployment code, in declaration order (the tail of [`Code::ALL`]).
pub const DEPLOY_CODES: &[DeployCode] = &[
    c(Code::PdModelMismatch, Some(NIXL_HASH), Some("the two sides' model configs differ (architecture or KV dimensions): the KV layouts do not match")),
    c(Code::PdDtypeMismatch, Some(NIXL_HASH), None),
    c(Code::PdKvCacheDtypeMismatch, Some(NIXL_HASH), Some("sglang/srt/disaggregation/common/conn.py:1327-1335 (try_ensure_parallel_info: \"KV cache dtype mismatch\"; arg_groups/overrides.py:532-544 resolves auto)")),
    c(Code::PdHybridKvCacheManagerMismatch, Some(NIXL_HASH), None),
    c(Code::PdBlockSizeMismatch, Some(NIXL_BLOCK), None),
    c(Code::PdTensorParallelUnsupported, Some(NIXL_TP), None),
    c(Code::PdKvRoleUnpaired, Some("vllm/config/kv_transfer.py:126-136 (is_kv_producer / is_kv_consumer: a producer sends, a consumer waits to receive)"), Some("sglang/srt/disaggregation/common/conn.py:1293-1317 (try_ensure_parallel_info: a decode server waits for a prefill server's bootstrap)")),
    c(Code::PdContextLengthExceedsDecode, Some("vllm/v1/engine/input_processor.py:588-592 (the decode refuses a prompt longer than its max_model_len)"), Some("sglang/srt/managers/tokenizer_manager.py:1336-1352 (the decode server refuses an input longer than its context length)")),
    c(Code::PdPageSizeMismatch, None, Some("sglang/srt/disaggregation/common/conn.py:1320-1325 (try_ensure_parallel_info: \"Page size mismatch\"); arg_groups/model_overrides/deepseek_v2.py:150-176 (the DSA page size)")),
    c(Code::PdTransferBackendMismatch, None, Some("sglang/srt/disaggregation/utils.py:681-720 (TransferBackend, get_kv_class: each side's --disaggregation-transfer-backend picks its KV manager class)")),
    c(Code::PdAttentionTpMismatch, None, Some("sglang/srt/disaggregation/common/conn.py:1432-1464 (_resolve_rank_mapping: equal attention TP under the prefill's --enable-kv-cache-sharding, :1441-1449; a larger decode attention TP maps its ranks to prefill rank (r % D) // (D // P), :1458-1464)")),
    c(Code::MultinodeSizesMismatch, Some("vllm/config/parallel.py:147-159, :323-326 (data_parallel_size, data_parallel_size_local, data_parallel_master_ip, node_rank, nnodes); engine/arg_utils.py:557-559 (--data-parallel-start-rank, --data-parallel-address)"), Some("sglang/srt/arg_groups/fields/parallel.py:32-45 (dist_init_addr, nnodes, node_rank, tp_size)")),
    c(Code::MultinodeRanksInvalid, Some("vllm/config/parallel.py:323 (node_rank); engine/arg_utils.py:557, 2489-2509 (data_parallel_start_rank)"), Some("sglang/srt/arg_groups/fields/parallel.py:44 (node_rank)")),
    c(Code::NodeGpusExceeded, Some("the pod's resources.limits[\"nvidia.com/gpu\"] (or the node's gpus_per_node): vLLM sees only those GPUs"), Some("the pod's resources.limits[\"nvidia.com/gpu\"] (or the node's gpus_per_node): SGLang sees only those GPUs")),
    c(Code::LaunchRoleMismatch, Some("vllm/config/kv_transfer.py:71, :128-136 (kv_role: the launch's role is its connector's, not the one declared)"), Some("sglang --disaggregation-mode (prefill, decode, null: the launch's role is its flag's, not the one declared)")),
    c(Code::NodeHostMemoryExceeded, Some("vllm/v1/hisparse/runtime.py:195-203 (check_hisparse_host_memory: pool_bytes > 0.95 x the RAM available when it pins)"), Some("sglang/srt/mem_cache/pool_host/base.py:84-107, :244-257 (the RAM budget available when the rank pins; \"Not enough host memory available\")")),
    c(Code::PdSpeculativeMismatch, Some("vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:103-143 (_get_speculative_compatibility_factors, hashed at :200: method, draft model, revision, parallel_drafting, kv_cache_dtype, for the methods use_eagle() names, config/speculative.py:2116-2120); the decode's handshake refuses a peer whose hash differs: nixl/base_worker.py:1191-1207"), None),
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
